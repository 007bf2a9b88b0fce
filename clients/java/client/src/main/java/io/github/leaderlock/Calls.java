package io.github.leaderlock;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.OptionalLong;

/**
 * The lease statements one by one, on a connection the caller gives (in autocommit), for
 * integrations that run on an application's own pool, such as the ShedLock provider. The same
 * statements as the rest of this library ({@code schema}: leaderlock's schema on that database, as
 * {@link #findSchema} gives it; every statement names it, whatever the search_path). No renewal
 * thread, no local deadline: the caller keeps those (the send time of the acquire + ttl - ttl/200).
 * Refusals for good are {@link RejectedException}; anything else a {@link LeaderlockException} with
 * the JDBC error as its cause.
 */
public final class Calls {
    private Calls() {}

    /**
     * leaderlock's schema on the connection's database, quoted: {@code named} (null:
     * LEADERLOCK_SCHEMA, else the one schema that holds it). {@link NotInstalledException} when no
     * schema holds it, {@link BadArgumentException} when several do and none is named.
     */
    public static String findSchema(Connection conn, String named) {
        try {
            return Db.schemaOf(conn, Schemas.option(named));
        } catch (SQLException e) {
            throw failed("looking up leaderlock's schema", e);
        }
    }

    /**
     * le_try_acquire(key, id, ttl), then, when it answered true, the term of the tenure, in one
     * transaction (the acquisition's row stays locked until it commits, so however short the ttl,
     * the term read from the table is the tenure's): the term, or empty when the key is held by
     * another. The caller's deadline counts from the moment this was called. The connection is left
     * in autocommit.
     */
    public static OptionalLong tryAcquire(
            Connection conn, String schema, String key, String id, Duration ttl) {
        double secs = seconds(ttl);
        try {
            conn.setAutoCommit(false);
            try {
                OptionalLong term = OptionalLong.empty();
                if (bool(conn, schema, Statements.TRY_ACQUIRE, key, id, secs)) {
                    Object t = first(conn, schema, Statements.TERM_IN, key, id);
                    if (t != null) {
                        term = OptionalLong.of(((Number) t).longValue());
                    }
                }
                conn.commit();
                return term;
            } catch (SQLException e) {
                conn.rollback();
                throw e;
            } finally {
                conn.setAutoCommit(true);
            }
        } catch (SQLException e) {
            if (Errors.slotsDiffer(e)) {
                return OptionalLong.empty(); // held with another number of slots: not ours now
            }
            throw failed("acquiring " + Text.quote(key), e);
        }
    }

    /**
     * le_renew(key, id, ttl, term): the tenure of {@code term} now lasts {@code ttl} from the
     * server's now (shorter or longer than before). False when it is not live any more.
     */
    public static boolean renew(
            Connection conn, String schema, String key, String id, Duration ttl, long term) {
        try {
            return bool(conn, schema, Statements.RENEW, key, id, seconds(ttl), term);
        } catch (SQLException e) {
            throw failed("renewing " + Text.quote(key), e);
        }
    }

    /** le_release(key, id, term): false when that tenure is not live any more. */
    public static boolean release(
            Connection conn, String schema, String key, String id, long term) {
        try {
            return bool(conn, schema, Statements.RELEASE, key, id, term);
        } catch (SQLException e) {
            throw failed("releasing " + Text.quote(key), e);
        }
    }

    /** Whether {@code key} has a live holder now, by the server's clock. */
    public static boolean isHeld(Connection conn, String schema, String key) {
        try {
            return bool(conn, schema, Statements.IS_HELD, key);
        } catch (SQLException e) {
            throw failed("reading " + Text.quote(key), e);
        }
    }

    /**
     * Fences a write, in the caller's transaction (not autocommit): le_assert_leader(key, id,
     * term), whose share lock on the lease's row holds off any takeover until the transaction ends.
     * The term; {@link LeaseLostException} (reason NOT_LEADER) when the server says {@code id} does
     * not hold the key in {@code term}.
     */
    public static long assertLeader(
            Connection conn, String schema, String key, String id, long term) {
        return Lease.Guard.assertLeader(
                conn,
                schema,
                key,
                id,
                term,
                detail ->
                        new LeaseLostException(
                                "the lease of " + Text.quote(key),
                                key,
                                term,
                                LostReason.NOT_LEADER,
                                detail));
    }

    private static double seconds(Duration ttl) {
        if (ttl == null || ttl.isNegative() || ttl.isZero()) {
            throw new BadArgumentException("leaderlock: ttl must be positive, not " + ttl);
        }
        return ttl.toNanos() / 1e9;
    }

    private static Object first(Connection conn, String schema, String sql, Object... args)
            throws SQLException {
        try (PreparedStatement st = conn.prepareStatement(Statements.bind(sql, schema))) {
            Db.bindAll(st, args);
            try (ResultSet rs = st.executeQuery()) {
                return rs.next() ? rs.getObject(1) : null;
            }
        }
    }

    private static boolean bool(Connection conn, String schema, String sql, Object... args)
            throws SQLException {
        return Boolean.TRUE.equals(first(conn, schema, sql, args));
    }

    private static LeaderlockException failed(String what, SQLException e) {
        RejectedException r = Errors.rejection(e, null);
        if (r != null) {
            return r;
        }
        return new LeaderlockException("leaderlock: " + what + ": " + Text.describe(e), e);
    }
}
