package io.github.leaderlock;

/**
 * One warning when the server cannot be reached, one line when it can again, and the delays between
 * attempts (100 ms doubling to 2 s).
 */
final class Outage {
    private final String key;
    private final String what;
    private Throwable error;
    private long since;
    final Backoff backoff = new Backoff(100_000_000L, 2_000_000_000L);

    Outage(String key, String what) {
        this.key = key;
        this.what = what;
    }

    /** Logs the failure (a warning for the first of a run); the delay before the next attempt. */
    long failed(Throwable e) {
        if (error == null) {
            since = System.nanoTime();
            Log.warn(
                    "%s: %s: the server cannot be reached (%s); reconnecting",
                    Text.quote(key), what, Text.describe(e));
        } else {
            Log.debug("%s: %s: still unreachable (%s)", Text.quote(key), what, Text.describe(e));
        }
        error = e;
        return backoff.next();
    }

    void ended() {
        if (error != null) {
            Log.info(
                    "%s: %s: connected again after %.1f s",
                    Text.quote(key), what, (System.nanoTime() - since) / 1e9);
            error = null;
            backoff.reset();
        }
    }
}
