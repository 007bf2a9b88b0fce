package io.github.leaderlock;

import java.sql.Array;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Types;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Executor;
import org.postgresql.PGConnection;
import org.postgresql.PGNotification;

/**
 * A connection of this library's: in autocommit, the extension's schema found on it (every
 * statement it sends names that schema), and every call bounded by an instant on the monotonic
 * clock (System.nanoTime): the socket's read timeout is set to the time left before each call, so a
 * call to a server that stopped answering (frozen, its host gone) fails at its bound rather than
 * hang, and the connection is then closed. Not for two threads at once.
 */
final class Db implements AutoCloseable {
    private static final Executor DIRECT = Runnable::run;
    private static final org.postgresql.Driver DRIVER = new org.postgresql.Driver();

    final Connection conn;
    final String schema;

    private Db(Connection conn, String schema) {
        this.conn = conn;
        this.schema = schema;
    }

    /**
     * Connects, within {@code until} (connecting may take at least 2 s: PgJDBC counts whole
     * seconds), and finds the extension's schema: {@code named} when the user named one, else the
     * one that holds it. No schema: {@link NotInstalledException}; several: {@link
     * BadArgumentException}; other failures are SQLException (retry).
     */
    static Db connect(Dsn dsn, long until, String named, String appName) throws SQLException {
        long left = Math.max(until - System.nanoTime(), 0) / 1_000_000;
        Connection c = DRIVER.connect(dsn.url(), dsn.properties(appName, left));
        if (c == null) {
            throw new BadArgumentException("leaderlock: PgJDBC does not take " + dsn);
        }
        try {
            c.setAutoCommit(true);
            Db db = new Db(c, null);
            List<Object[]> rows =
                    db.rows(
                            Math.max(until, System.nanoTime() + 2_000_000_000L),
                            Statements.FIND_SCHEMA,
                            named,
                            named);
            String found = Schemas.found(rows, db, named);
            return new Db(c, found);
        } catch (SQLException | RuntimeException e) {
            try {
                c.close();
            } catch (SQLException ignored) {
                // closing after a failure
            }
            throw e;
        }
    }

    /** A connection of the caller's: the schema looked up on it (guard, outside this library). */
    static String schemaOf(Connection c, String named) throws SQLException {
        Db db = new Db(c, null);
        List<Object[]> rows = new ArrayList<>();
        try (PreparedStatement st =
                c.prepareStatement(Statements.bind(Statements.FIND_SCHEMA, null))) {
            bindAll(st, new Object[] {named, named});
            try (ResultSet rs = st.executeQuery()) {
                while (rs.next()) {
                    rows.add(new Object[] {rs.getString(1)});
                }
            }
        }
        return Schemas.found(rows, db, named);
    }

    private void bound(long until) throws SQLException {
        long left = until - System.nanoTime();
        if (left <= 0) {
            throw new java.sql.SQLTimeoutException(
                    "leaderlock: no time left for the call", "57014");
        }
        conn.setNetworkTimeout(
                DIRECT, (int) Math.min(Integer.MAX_VALUE, (left + 999_999) / 1_000_000));
    }

    static void bindAll(PreparedStatement st, Object[] args) throws SQLException {
        for (int i = 0; i < args.length; i++) {
            Object a = args[i];
            int n = i + 1;
            if (a == null) {
                st.setNull(n, Types.VARCHAR);
            } else if (a instanceof Null nul) {
                st.setNull(n, nul.type);
            } else if (a instanceof String s) {
                st.setString(n, s);
            } else if (a instanceof Long l) {
                st.setLong(n, l);
            } else if (a instanceof Integer v) {
                st.setInt(n, v);
            } else if (a instanceof Double d) {
                st.setDouble(n, d);
            } else if (a instanceof Boolean b) {
                st.setBoolean(n, b);
            } else if (a instanceof Instant t) {
                st.setObject(n, t.atOffset(ZoneOffset.UTC));
            } else {
                throw new IllegalArgumentException("leaderlock: no binding for " + a.getClass());
            }
        }
    }

    /** A NULL of a given JDBC type. */
    record Null(int type) {}

    static final Null NULL_BIGINT = new Null(Types.BIGINT);
    static final Null NULL_INT = new Null(Types.INTEGER);
    static final Null NULL_DOUBLE = new Null(Types.DOUBLE);
    static final Null NULL_TEXT = new Null(Types.VARCHAR);

    /** Every row of a statement, each column as JDBC's getObject gives it (timestamps: Instant). */
    List<Object[]> rows(long until, String sql, Object... args) throws SQLException {
        bound(until);
        try (PreparedStatement st = conn.prepareStatement(Statements.bind(sql, schema))) {
            bindAll(st, args);
            List<Object[]> out = new ArrayList<>();
            if (!st.execute()) {
                return out;
            }
            try (ResultSet rs = st.getResultSet()) {
                int n = rs.getMetaData().getColumnCount();
                while (rs.next()) {
                    Object[] row = new Object[n];
                    for (int i = 0; i < n; i++) {
                        row[i] = column(rs, i + 1);
                    }
                    out.add(row);
                }
            }
            return out;
        }
    }

    /**
     * A column as getObject gives it, timestamps as Instant and arrays of them as lists. Never the
     * result set's metadata (but the number of columns): PgJDBC looks up a type it does not know,
     * and the columns of a table, with statements of its own that are not search_path-safe
     * (tests/clients/hostile.py); every column this library reads is of a type PgJDBC knows.
     */
    private static Object column(ResultSet rs, int i) throws SQLException {
        Object o = rs.getObject(i);
        if (o instanceof java.sql.Timestamp t) {
            return t.toInstant();
        }
        if (o instanceof Array a) {
            List<Instant> out = new ArrayList<>();
            for (Object e : (Object[]) a.getArray()) {
                if (e instanceof java.sql.Timestamp t) {
                    out.add(t.toInstant());
                }
            }
            return out;
        }
        return o;
    }

    /** The first row (null: no row). */
    Object[] row(long until, String sql, Object... args) throws SQLException {
        List<Object[]> rows = rows(until, sql, args);
        return rows.isEmpty() ? null : rows.get(0);
    }

    /** The first column of the first row (null: no row, or NULL). */
    Object one(long until, String sql, Object... args) throws SQLException {
        Object[] r = row(until, sql, args);
        return r == null ? null : r[0];
    }

    /** The first column as a boolean (NULL or no row: false). */
    boolean bool(long until, String sql, Object... args) throws SQLException {
        return Boolean.TRUE.equals(one(until, sql, args));
    }

    /**
     * A statement whose result is not read (pg_notify's void: PgJDBC would look its type up with a
     * statement of its own).
     */
    void send(long until, String sql, Object... args) throws SQLException {
        bound(until);
        try (PreparedStatement st = conn.prepareStatement(Statements.bind(sql, schema))) {
            bindAll(st, args);
            st.execute();
        }
    }

    /** A statement without rows (LISTEN, UNLISTEN). */
    void exec(long until, String sql) throws SQLException {
        bound(until);
        try (Statement st = conn.createStatement()) {
            st.execute(Statements.bind(sql, schema));
        }
    }

    /**
     * The notifications that arrive within {@code millis} (at least 1): whatever came meanwhile,
     * and waits for the first one otherwise.
     */
    PGNotification[] notifications(long millis) throws SQLException {
        bound(System.nanoTime() + (millis + 5_000) * 1_000_000L);
        PGNotification[] got =
                conn.unwrap(PGConnection.class)
                        .getNotifications((int) Math.max(1, Math.min(Integer.MAX_VALUE, millis)));
        return got == null ? new PGNotification[0] : got;
    }

    /** The statements RENEW and RELEASE name the tenure's term; before 0.5.0, without it. */
    boolean callNamed(long until, String sql, Object... args) throws SQLException {
        try {
            return bool(until, sql, args);
        } catch (SQLException e) {
            if (!"42883".equals(e.getSQLState())) {
                throw e;
            }
            String legacy =
                    sql.equals(Statements.RENEW)
                            ? Statements.RENEW_LEGACY
                            : sql.equals(Statements.RELEASE) ? Statements.RELEASE_LEGACY : null;
            if (legacy == null) {
                throw e;
            }
            Object[] fewer = new Object[args.length - 1];
            System.arraycopy(args, 0, fewer, 0, fewer.length);
            return bool(until, legacy, fewer);
        }
    }

    boolean isClosed() {
        try {
            return conn.isClosed();
        } catch (SQLException e) {
            return true;
        }
    }

    @Override
    public void close() {
        try {
            conn.close();
        } catch (SQLException ignored) {
            // a connection that failed closes as it can
        }
    }
}
