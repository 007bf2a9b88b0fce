package io.github.leaderlock;

import java.sql.SQLException;
import org.postgresql.util.PSQLException;
import org.postgresql.util.ServerErrorMessage;

/** Sorts what a call ended with into "retry" and "give up" (the other clients' rules). */
final class Errors {
    private Errors() {}

    /**
     * The DETAIL both editions give (SQLSTATE 22023) when a key with live holders is asked for with
     * another number of slots than it admits (contract 17): the key is not ours now, not a request
     * to give up.
     */
    static final String SLOTS_DIFFER_DETAIL =
            "While a key has live holders, every acquisition must give the same slots.";

    /**
     * The typed error for a refusal that retrying cannot change (extension missing, privilege, a
     * bad argument, a history pruned, a role that may not connect, a database that does not exist),
     * or null: retry (a connection lost or refused, a server starting up or shutting down, a
     * standby, a call timed out). {@code db}: the connection it failed on, when it was made (its
     * database is named; a function missing from its schema is an older version).
     */
    static RejectedException rejection(Throwable t, Db db) {
        if (t instanceof RejectedException r) {
            return r;
        }
        if (!(t instanceof SQLException e)) {
            return null;
        }
        String code = e.getSQLState();
        if (code == null) {
            return null;
        }
        String first = Text.firstLine(e.getMessage());
        String described = first + " (SQLSTATE " + code + ")";
        switch (code) {
            case "42883", "42P01" -> {
                if (!first.contains("le_") && !first.contains("leaderlock")) {
                    return new RejectedException("leaderlock: " + described, code, e);
                }
                String where =
                        db != null
                                ? "database " + Text.quote(Schemas.database(db))
                                : "the database";
                if (db != null && db.schema != null) {
                    return new NotInstalledException(
                            "leaderlock: extension leaderlock in schema "
                                    + Text.quote(db.schema)
                                    + " of "
                                    + where
                                    + " lacks a function this client calls ("
                                    + described
                                    + "): update it (ALTER EXTENSION leaderlock UPDATE)",
                            code,
                            e);
                }
                return new NotInstalledException(
                        "leaderlock: extension leaderlock is not installed in "
                                + where
                                + " (CREATE EXTENSION leaderlock, or install the portable edition): "
                                + described,
                        code,
                        e);
            }
            case "42501" -> {
                return new PrivilegeException(
                        "leaderlock: the role may not use leaderlock: " + described, code, e);
            }
            case "28P01", "28000" -> {
                return new PrivilegeException(
                        "leaderlock: the server refused the connection: " + described, code, e);
            }
            case "3D000" -> {
                return new RejectedException(
                        "leaderlock: the server refused the connection: " + described, code, e);
            }
            case "22023", "22004" -> {
                if (slotsDiffer(e)) {
                    return null;
                }
                return new BadArgumentException(
                        "leaderlock: the server refused an argument: " + described, code, e);
            }
            case "LE002" -> {
                return new HistoryPrunedException(
                        "leaderlock: history pruned: " + described, -1, e);
            }
            default -> {
                return null;
            }
        }
    }

    /**
     * Whether the server refused a try because the key is held with another number of slots (22023
     * with SLOTS_DIFFER_DETAIL): keep trying, its holders' tenures will end.
     */
    static boolean slotsDiffer(Throwable t) {
        if (t instanceof PSQLException p && "22023".equals(p.getSQLState())) {
            ServerErrorMessage m = p.getServerErrorMessage();
            return m != null
                    && m.getDetail() != null
                    && m.getDetail().startsWith(SLOTS_DIFFER_DETAIL);
        }
        return false;
    }

    /** Whether a call failed with SQLSTATE 42883 (a function missing: before 0.5.0, or none). */
    static boolean undefined(Throwable t) {
        return t instanceof SQLException e && "42883".equals(e.getSQLState());
    }

    /** Whether the server said LE001 (not the leader in that term). */
    static boolean notLeader(Throwable t) {
        return t instanceof SQLException e && "LE001".equals(e.getSQLState());
    }

    /**
     * An error the server answered on a live connection that a new connection may not fix: not a
     * connection exception (08), a serialization failure or deadlock (40), a shortage (53), an
     * operator's intervention such as a cancelled statement or a shutdown (57), a FATAL.
     */
    static boolean transient_(SQLException e) {
        String code = e.getSQLState();
        if (code == null || code.length() != 5) {
            return true;
        }
        if (e instanceof PSQLException p && p.getServerErrorMessage() != null) {
            String sev = p.getServerErrorMessage().getSeverity();
            if ("FATAL".equals(sev) || "PANIC".equals(sev)) {
                return true;
            }
        }
        return switch (code.substring(0, 2)) {
            case "08", "40", "53", "57", "58", "XX" -> true;
            default -> false;
        };
    }
}
