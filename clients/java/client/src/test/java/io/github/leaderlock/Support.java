package io.github.leaderlock;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.function.BooleanSupplier;

/**
 * What the tests against a server share: the server (LEADERLOCK_DSN, a superuser's; the tests
 * freeze backends with SIGSTOP, so they run on the server's host as root or as the server's user),
 * one-shot SQL on it, and waiting for a condition. Without LEADERLOCK_DSN they are skipped.
 */
final class Support {
    private Support() {}

    static final String DSN = System.getenv("LEADERLOCK_DSN");

    /** The server's DSN; the test is skipped without one. */
    static String dsn() {
        assumeTrue(
                DSN != null && !DSN.isEmpty(),
                "LEADERLOCK_DSN is not set: no server to test against");
        return DSN;
    }

    /** The DSN with an application name of the test's own (to find its backends). */
    static String dsnNamed(String name) {
        String d = dsn();
        if (d.startsWith("postgres://") || d.startsWith("postgresql://")) {
            return d + (d.contains("?") ? "&" : "?") + "application_name=" + name;
        }
        if (d.startsWith("jdbc:")) {
            return d + (d.contains("?") ? "&" : "?") + "ApplicationName=" + name;
        }
        return d + " application_name=" + name;
    }

    /** The DSN for another database, or another user, of the same server. */
    static String dsnFor(String database, String user) {
        Dsn d = Dsn.parse(dsn());
        String url = d.url();
        String hostPart = url.substring("jdbc:postgresql://".length(), url.lastIndexOf('/'));
        return "postgresql://" + user + "@" + hostPart + "/" + database;
    }

    static String unique(String prefix) {
        return prefix + "-" + UUID.randomUUID().toString().substring(0, 8);
    }

    static Connection connect() throws SQLException {
        Dsn d = Dsn.parse(dsn());
        Connection c =
                DriverManager.getConnection(d.url(), d.properties("leaderlock java tests", 5000));
        c.setAutoCommit(true);
        return c;
    }

    /** Every row of a statement (plain SQL, the search_path of the test's database). */
    static List<Object[]> rows(String sql, Object... args) throws SQLException {
        try (Connection c = connect();
                PreparedStatement st = c.prepareStatement(sql)) {
            Db.bindAll(st, args);
            List<Object[]> out = new ArrayList<>();
            if (!st.execute()) {
                return out;
            }
            try (ResultSet rs = st.getResultSet()) {
                int n = rs.getMetaData().getColumnCount();
                while (rs.next()) {
                    Object[] row = new Object[n];
                    for (int i = 0; i < n; i++) {
                        row[i] = rs.getObject(i + 1);
                    }
                    out.add(row);
                }
            }
            return out;
        }
    }

    /** The first column of the first row (null: none). */
    static Object one(String sql, Object... args) throws SQLException {
        List<Object[]> r = rows(sql, args);
        return r.isEmpty() ? null : r.get(0)[0];
    }

    /** Whether the condition came true within {@code seconds}. */
    static boolean within(double seconds, BooleanSupplier ok) throws InterruptedException {
        long until = System.nanoTime() + (long) (seconds * 1e9);
        while (!ok.getAsBoolean()) {
            if (System.nanoTime() - until > 0) {
                return false;
            }
            Thread.sleep(20);
        }
        return true;
    }

    /** The backend pids of the sessions named {@code name} (and sending {@code like}, if given). */
    static List<Integer> backends(String name, String like) throws SQLException {
        List<Integer> out = new ArrayList<>();
        for (Object[] r :
                rows(
                        "SELECT pid FROM pg_stat_activity WHERE application_name = ? AND (?::text IS NULL OR query LIKE ?)",
                        name,
                        like,
                        like)) {
            out.add((Integer) r[0]);
        }
        return out;
    }

    /** Sends a signal (STOP, CONT) to a process of the server. */
    static void signal(int pid, String sig) throws Exception {
        Process p =
                new ProcessBuilder("kill", "-" + sig, Integer.toString(pid)).inheritIO().start();
        p.waitFor();
    }
}
