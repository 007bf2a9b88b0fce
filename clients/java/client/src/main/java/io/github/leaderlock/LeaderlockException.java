package io.github.leaderlock;

/**
 * The base of this library's exceptions: every one is unchecked. {@link RejectedException} (and its
 * kinds) when the server refused for good and retrying cannot help; {@link LeaseLostException} when
 * a lease, a session or a run may no longer be acted on; {@link NotAcquiredException} when a wait
 * for leadership ended without it; {@link UnavailableException} when the server could not be
 * reached in time.
 */
public class LeaderlockException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public LeaderlockException(String message) {
        super(message);
    }

    public LeaderlockException(String message, Throwable cause) {
        super(message, cause);
    }
}
