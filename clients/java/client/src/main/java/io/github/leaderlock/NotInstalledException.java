package io.github.leaderlock;

/**
 * leaderlock is not installed in the database connected to (CREATE EXTENSION leaderlock was not run
 * there, nor the portable edition's script), or not in the schema the {@code schema} option (or
 * LEADERLOCK_SCHEMA) names, or a function this client calls is missing from its schema there (an
 * older version: ALTER EXTENSION leaderlock UPDATE). SQLSTATE 42883.
 */
public class NotInstalledException extends RejectedException {
    private static final long serialVersionUID = 1L;

    public NotInstalledException(String message, String sqlState, Throwable cause) {
        super(message, sqlState, cause);
    }
}
