package io.github.leaderlock;

/**
 * The role may not use leaderlock (EXECUTE revoked), acts as a holder another role owns (contract
 * 13), may not connect, or the password is wrong: SQLSTATE 42501, 28P01, 28000.
 */
public class PrivilegeException extends RejectedException {
    private static final long serialVersionUID = 1L;

    public PrivilegeException(String message, String sqlState, Throwable cause) {
        super(message, sqlState, cause);
    }
}
