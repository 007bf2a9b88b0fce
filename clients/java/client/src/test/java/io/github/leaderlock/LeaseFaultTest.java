package io.github.leaderlock;

import static io.github.leaderlock.Support.dsn;
import static io.github.leaderlock.Support.one;
import static io.github.leaderlock.Support.unique;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.sql.Connection;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Leases when the server misbehaves or refuses: a renewal stuck on a frozen backend replaced on a
 * new connection; refusals for good typed and not retried (max_ttl, a schema that does not hold
 * leaderlock, a database without it, a role without EXECUTE, an unreachable server at the timeout).
 * A class of its own: test classes run side by side.
 */
class LeaseFaultTest {
    @BeforeAll
    static void server() {
        dsn(); // skipped without one
    }

    private final String key = unique("java-fault");

    private static LeaseOptions ttl(double seconds) {
        return new LeaseOptions().ttl(Duration.ofMillis((long) (seconds * 1000)));
    }

    /** A renewal stuck on one connection (its backend stopped) is retried on a new one. */
    @Test
    void aFrozenConnectionIsReplaced() throws Exception {
        String name = unique("java-frozen");
        try (Lease lease = Leaderlock.lead(Support.dsnNamed(name), key, ttl(1.5))) {
            List<Integer> pids = Support.backends(name, null);
            assertEquals(1, pids.size(), "the renewer's backend: " + pids);
            Support.signal(pids.get(0), "STOP");
            try {
                Thread.sleep(3000);
                lease.check();
                assertEquals(lease.id(), one("SELECT le_leader(?)", key));
            } finally {
                Support.signal(pids.get(0), "CONT");
            }
        }
    }

    @Test
    void refusalsForGoodAreTypedAndNotRetried() throws Exception {
        // a ttl above leaderlock.max_ttl: the server's 22023
        BadArgumentException bad =
                assertThrows(
                        BadArgumentException.class,
                        () ->
                                Leaderlock.lead(
                                        dsn(), key, new LeaseOptions().ttl(Duration.ofDays(300))));
        assertEquals("22023", bad.sqlState());
        // a schema that does not hold leaderlock
        NotInstalledException missing =
                assertThrows(
                        NotInstalledException.class,
                        () -> Leaderlock.lead(dsn(), key, ttl(1).schema("pg_catalog")));
        assertTrue(missing.getMessage().contains("pg_catalog"), missing.getMessage());
        // a database without the extension; a role without EXECUTE in one with it
        String bare = "ll_java_bare";
        String noexec = "ll_java_noexec";
        try {
            for (String db : List.of(bare, noexec)) {
                one("DROP DATABASE IF EXISTS " + db + " WITH (FORCE)");
                one("CREATE DATABASE " + db);
            }
            one("DROP ROLE IF EXISTS " + noexec);
            one("CREATE ROLE " + noexec + " LOGIN");
            try (Connection c =
                            java.sql.DriverManager.getConnection(
                                    Dsn.parse(Support.dsnFor(noexec, "postgres")).url(),
                                    Dsn.parse(Support.dsnFor(noexec, "postgres"))
                                            .properties("t", 5000));
                    var st = c.createStatement()) {
                st.execute("CREATE EXTENSION leaderlock");
                st.execute("REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA public FROM PUBLIC");
            }
            NotInstalledException none =
                    assertThrows(
                            NotInstalledException.class,
                            () -> Leaderlock.lead(Support.dsnFor(bare, "postgres"), key, ttl(1)));
            assertTrue(none.getMessage().contains("\"" + bare + "\""), none.getMessage());
            PrivilegeException p =
                    assertThrows(
                            PrivilegeException.class,
                            () -> Leaderlock.lead(Support.dsnFor(noexec, noexec), key, ttl(1)));
            assertEquals("42501", p.sqlState());
        } finally {
            for (String db : List.of(bare, noexec)) {
                one("DROP DATABASE IF EXISTS " + db + " WITH (FORCE)");
            }
            one("DROP ROLE IF EXISTS " + noexec);
        }
        // an unreachable server, at the timeout
        long t0 = System.nanoTime();
        UnavailableException u =
                assertThrows(
                        UnavailableException.class,
                        () ->
                                Leaderlock.lead(
                                        "host=127.0.0.1 port=1 dbname=x user=x",
                                        key,
                                        ttl(1).timeout(Duration.ofSeconds(1))));
        assertNotNull(u.getCause());
        assertTrue(System.nanoTime() - t0 < 3_000_000_000L);
    }
}
