package io.github.leaderlock;

/**
 * The timeout passed without leading (0: the one try found the key held), or a session's acquire
 * waited its whole wait. Not a refusal for good: try again.
 */
public class NotAcquiredException extends LeaderlockException {
    private static final long serialVersionUID = 1L;
    private final String key;
    private final String holder;

    public NotAcquiredException(String key, String holder) {
        super(
                "leaderlock: not the leader of "
                        + Text.quote(key)
                        + (holder != null ? " (held by " + Text.quote(holder) + ")" : ""));
        this.key = key;
        this.holder = holder;
    }

    public String key() {
        return key;
    }

    /** The holder seen at the last try, or null (vacant, or not read). */
    public String holder() {
        return holder;
    }
}
