package io.github.leaderlock;

/**
 * The server could not be reached, or did not answer, before the timeout given. The cause is the
 * last connection error. (Without a timeout the library keeps trying instead.)
 */
public class UnavailableException extends LeaderlockException {
    private static final long serialVersionUID = 1L;

    public UnavailableException(String message, Throwable cause) {
        super(message, cause);
    }
}
