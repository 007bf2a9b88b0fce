package io.github.leaderlock;

import static io.github.leaderlock.Support.dsn;
import static io.github.leaderlock.Support.one;
import static io.github.leaderlock.Support.unique;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * What other roles can do to a waiting candidate (docs/clients.md): a flood of forged released
 * notifications from a role of no rights brings its tries forward at most once every 10 ms
 * (HINT_FLOOR: its tries' send times never closer; the server counts them too, track_functions for
 * the candidate's sessions alone), and the real release after it is still taken over at once; a
 * rival holding the key with another number of slots is waited out.
 */
class HostileTest {
    private static final String FORGER = "ll_java_forger";
    private final String key = unique("java-hostile");

    @BeforeAll
    static void server() {
        dsn(); // skipped without one
    }

    @AfterAll
    static void dropTheForger() throws Exception {
        one("DROP ROLE IF EXISTS " + FORGER);
    }

    private static long tries() throws Exception {
        Object n =
                one(
                        "SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_user_functions"
                                + " WHERE funcname = 'le_try_acquire'");
        return (Long) n;
    }

    @Test
    void aFloodOfForgedReleasesMakesTriesAtABoundedRate() throws Exception {
        one(
                "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '"
                        + FORGER
                        + "') THEN CREATE ROLE "
                        + FORGER
                        + " LOGIN; END IF; END $$");
        one("SELECT le_try_acquire(?, 'rival', '30 s')", key);
        // the candidate's sessions count their calls of le_try_acquire
        String counted =
                Support.dsnNamed("ll_java_counted") + "&options=-c%20track_functions%3Dall";
        if (!dsn().contains("://")) {
            counted = Support.dsnNamed("ll_java_counted") + " options='-c track_functions=all'";
        }
        String dsnCounted = counted;
        long before = tries();
        long[] led = {0, 0};
        // the send times of the candidate's tries, as the library sends them
        List<Long> sends = new CopyOnWriteArrayList<>();
        Thread[] me = {null};
        Statements.trace =
                sql -> {
                    if (sql.equals(Statements.TRY_ACQUIRE) && Thread.currentThread() == me[0]) {
                        sends.add(System.nanoTime());
                    }
                };
        Thread candidate =
                new Thread(
                        () -> {
                            try (Lease l =
                                    Leaderlock.lead(
                                            dsnCounted,
                                            key,
                                            new LeaseOptions()
                                                    .ttl(Duration.ofSeconds(10))
                                                    .timeout(Duration.ofSeconds(15)))) {
                                led[0] = System.nanoTime();
                                led[1] = l.term();
                            }
                        });
        me[0] = candidate;
        candidate.start();
        Thread.sleep(1000); // waiting, LISTENing
        Dsn d = Dsn.parse(dsn());
        Properties p = d.properties("ll_java_forger", 5000);
        p.setProperty("user", FORGER);
        p.remove("password");
        long sent = 0;
        long start;
        long end;
        try (Connection forger = DriverManager.getConnection(d.url(), p);
                PreparedStatement st =
                        forger.prepareStatement(
                                "SELECT count(pg_notify('leaderlock', json_build_object('event', e, 'key', ?::text,"
                                        + " 'holder', 'rival', 'term', 1)::text)) FROM (VALUES ('released')) AS ev(e)")) {
            st.setString(1, key);
            start = System.nanoTime();
            end = start + 2_000_000_000L;
            while (System.nanoTime() < end) {
                try (var rs = st.executeQuery()) {
                    rs.next();
                    sent += rs.getLong(1);
                }
            }
        }
        double seconds = (System.nanoTime() - start) / 1e9;
        assertEquals(0, led[0], "led under the flood");
        long released = System.nanoTime();
        assertEquals(Boolean.TRUE, one("SELECT le_release(?, 'rival')", key));
        candidate.join(5000);
        assertTrue(led[1] > 0, "no lead after the real release");
        long ms = (led[0] - released) / 1_000_000;
        assertTrue(ms < 300, "led " + ms + " ms after the real release");
        // the candidate's backends have ended (close): their counts are in the statistics
        long calls = 0;
        for (int i = 0; i < 50 && calls == 0; i++) {
            Thread.sleep(100);
            calls = tries() - before;
        }
        Statements.trace = null;
        double rate = calls / (seconds + 1.0); // the flood, and the second before it
        long least = Long.MAX_VALUE;
        for (int i = 1; i < sends.size(); i++) {
            if (sends.get(i) > start && sends.get(i) < end) {
                least = Math.min(least, sends.get(i) - sends.get(i - 1));
            }
        }
        System.out.printf(
                "figure: %d forged notifications in %.1f s (%.0f/s): %d tries, %.0f a second, at least %.1f ms"
                        + " apart; led %d ms after the real release%n",
                sent, seconds, sent / seconds, calls, rate, least / 1e6, ms);
        // never two tries less than HINT_FLOOR apart (what the floor is for, whatever the machine's
        // speed). The floor counts from the moment the library notes the try; the trace sees its
        // statement a moment later, and a loaded machine may pause the thread between the two: half
        // the 10 ms floor as the bound (without the floor, tries under this flood come a round
        // trip apart)
        assertTrue(least >= 5_000_000L, "two tries " + least / 1e6 + " ms apart");
        assertTrue(calls > 0, "no tries counted");
        assertTrue(rate <= 120, calls + " tries in " + seconds + " s");
    }

    @Test
    void aRivalHoldingTheKeyWithOtherSlotsIsWaitedOut() throws Exception {
        one("SELECT le_try_acquire(?, 'rival', '1 s', slots => 3)", key);
        long t0 = System.nanoTime();
        try (Lease l =
                Leaderlock.lead(
                        dsn(),
                        key,
                        new LeaseOptions()
                                .ttl(Duration.ofSeconds(5))
                                .timeout(Duration.ofSeconds(5)))) {
            long ms = (System.nanoTime() - t0) / 1_000_000;
            assertTrue(ms >= 500, "led " + ms + " ms in, while the rival held it with 3 slots");
            assertTrue(l.isLeader());
        }
        // a timeout still ends the wait
        one("SELECT le_try_acquire(?, 'rival', '3 s', slots => 3)", key);
        long t1 = System.nanoTime();
        boolean refused = false;
        try (Lease l =
                Leaderlock.lead(
                        dsn(),
                        key,
                        new LeaseOptions()
                                .ttl(Duration.ofSeconds(5))
                                .timeout(Duration.ofMillis(500)))) {
            assertFalse(l.isLeader(), "led");
        } catch (NotAcquiredException e) {
            refused = true;
        }
        assertTrue(refused);
        assertTrue(System.nanoTime() - t1 < 2_000_000_000L);
    }
}
