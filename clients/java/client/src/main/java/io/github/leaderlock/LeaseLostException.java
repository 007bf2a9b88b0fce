package io.github.leaderlock;

/**
 * The lease is gone (or may be: its local deadline passed): stop acting as its holder. Thrown by
 * {@code check()} of a {@link Lease}, a {@link SessionLease}, a {@link Session} and a {@link
 * ScheduledRun}, and by their guards when the server says so (LE001).
 */
public class LeaseLostException extends LeaderlockException {
    private static final long serialVersionUID = 1L;
    private final String key;
    private final long term;
    private final LostReason reason;
    private final String detail;

    public LeaseLostException(
            String what, String key, long term, LostReason reason, String detail) {
        super(
                "leaderlock: lost "
                        + what
                        + (term > 0 ? " (term " + term + ")" : "")
                        + ": "
                        + reason.word()
                        + (detail != null ? ": " + detail : ""));
        this.key = key;
        this.term = term;
        this.reason = reason;
        this.detail = detail;
    }

    /** The key (a run's job; a session's id). */
    public String key() {
        return key;
    }

    /** The term lost (0 for a session). */
    public long term() {
        return term;
    }

    public LostReason reason() {
        return reason;
    }

    /** More, in words; may be null. */
    public String detail() {
        return detail;
    }
}
