package io.github.leaderlock;

/**
 * A key, id, ttl, duration or connection string this client or the server refuses (SQLSTATE 22023
 * or 22004 from the server: empty, too long, a ttl above leaderlock.max_ttl), or no schema named
 * where leaderlock's functions are in several schemas. Refused before anything connects when this
 * client sees it first (then {@link #sqlState()} is null).
 */
public class BadArgumentException extends RejectedException {
    private static final long serialVersionUID = 1L;

    public BadArgumentException(String message) {
        super(message, null);
    }

    public BadArgumentException(String message, String sqlState, Throwable cause) {
        super(message, sqlState, cause);
    }
}
