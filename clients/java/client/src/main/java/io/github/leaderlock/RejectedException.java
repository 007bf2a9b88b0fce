package io.github.leaderlock;

/**
 * The server refused the request, and retrying cannot change that (a role that may not connect, a
 * database that does not exist, and the kinds below). {@link #sqlState()} is the server's code when
 * it gave one.
 */
public class RejectedException extends LeaderlockException {
    private static final long serialVersionUID = 1L;
    private final String sqlState;

    public RejectedException(String message, String sqlState) {
        super(message);
        this.sqlState = sqlState;
    }

    public RejectedException(String message, String sqlState, Throwable cause) {
        super(message, cause);
        this.sqlState = sqlState;
    }

    /** The server's SQLSTATE (42501, 22023...), or null for a refusal made here. */
    public String sqlState() {
        return sqlState;
    }
}
