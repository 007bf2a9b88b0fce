package io.github.leaderlock;

import java.time.Duration;

/**
 * The timings every tenure shares (the Rust client's): renew every ttl/3; a local deadline of (the
 * instant the last successful acquire or renewal was sent) + ttl - ttl/200; each call bounded by
 * max(ttl/3, 100 ms) and by the deadline; a failed renewal retried every ttl/10 (50 ms to 1 s). In
 * nanoseconds of System.nanoTime().
 */
final class Timing {
    final long ttl;
    final long renewEvery;
    final long margin;
    final long callTimeout;
    final long retryEvery;
    final Long poll;

    private Timing(long ttl, Long poll) {
        this.ttl = ttl;
        this.renewEvery = ttl / 3;
        this.margin = ttl / 200;
        this.callTimeout = Math.max(ttl / 3, 100_000_000L);
        this.retryEvery = Math.min(Math.max(ttl / 10, 50_000_000L), 1_000_000_000L);
        this.poll = poll;
    }

    static Timing of(Duration ttl, Duration poll) {
        if (ttl == null || ttl.isNegative() || ttl.isZero()) {
            throw new BadArgumentException("leaderlock: ttl must be positive, not " + ttl);
        }
        if (ttl.compareTo(Duration.ofDays(365)) > 0) {
            throw new BadArgumentException("leaderlock: ttl must be at most 365 days, not " + ttl);
        }
        if (poll != null && (poll.isNegative() || poll.isZero())) {
            throw new BadArgumentException("leaderlock: poll must be positive, not " + poll);
        }
        return new Timing(ttl.toNanos(), poll == null ? null : poll.toNanos());
    }

    /** The ttl in seconds, as the server takes it (make_interval(secs => ...)). */
    double ttlSeconds() {
        return ttl / 1e9;
    }

    /**
     * How long a campaign's connection attempt may take (PgJDBC counts whole seconds, 2 at least).
     */
    long connectBound() {
        return Math.max(callTimeout, 5_000_000_000L);
    }

    /** How long a candidate waits between tries without a hint. */
    long pollEvery(boolean worker, boolean notifications) {
        if (poll != null) {
            return poll;
        }
        if (!worker) {
            // nobody announces an expiry: the try itself finds it
            return Math.min(Math.max(ttl / 4, 100_000_000L), 1_000_000_000L);
        }
        return notifications ? Math.max(ttl / 2, 1_000_000_000L) : 1_000_000_000L;
    }
}
