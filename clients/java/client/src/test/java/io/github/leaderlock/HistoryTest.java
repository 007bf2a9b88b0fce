package io.github.leaderlock;

import static io.github.leaderlock.Support.dsn;
import static io.github.leaderlock.Support.one;
import static io.github.leaderlock.Support.rows;
import static io.github.leaderlock.Support.unique;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The history watcher: every transition of a prefix once, in order, through terminated backends;
 * resuming after a saved position; a pruned position; bad options; close.
 */
class HistoryTest {
    @BeforeAll
    static void server() {
        dsn(); // skipped without one
    }

    private final String prefix = unique("java-history") + "/";

    /** Makes transitions of a key of the prefix: acquired and released, n times. */
    private void churn(String key, int n) throws Exception {
        for (int i = 0; i < n; i++) {
            one("SELECT le_try_acquire(?, 'h', '10 s')", key);
            one("SELECT le_release(?, 'h')", key);
        }
    }

    private List<Long> expected(long after) throws Exception {
        List<Long> out = new ArrayList<>();
        for (Object[] r :
                rows(
                        "SELECT position FROM le_history(after => ?, key_prefix => ?) ORDER BY position",
                        after,
                        prefix)) {
            out.add((Long) r[0]);
        }
        return out;
    }

    @Test
    void everyTransitionOnceInOrderThroughTerminatedBackends() throws Exception {
        String name = unique("java-watch");
        List<Transition> got = new ArrayList<>();
        try (HistoryWatcher w =
                HistoryWatcher.open(
                        Support.dsnNamed(name),
                        new HistoryOptions().keyPrefix(prefix).poll(Duration.ofMillis(200)))) {
            long start = w.position();
            for (int round = 0; round < 5; round++) {
                churn(prefix + round, 6);
                if (round % 2 == 1) {
                    one(
                            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = ?",
                            name);
                }
                Transition t;
                long until = System.nanoTime() + 400_000_000L;
                while ((t =
                                w.next(
                                        Duration.ofMillis(
                                                Math.max(
                                                        1,
                                                        (until - System.nanoTime()) / 1_000_000))))
                        != null) {
                    got.add(t);
                }
            }
            List<Long> want = expected(start);
            long until = System.nanoTime() + 5_000_000_000L;
            while (got.size() < want.size() && System.nanoTime() < until) {
                Transition t = w.next(Duration.ofMillis(200));
                if (t != null) {
                    got.add(t);
                }
            }
            assertEquals(want, got.stream().map(Transition::position).toList());
            assertEquals(60, want.size());
            assertTrue(w.reconnects() >= 2, "reconnected " + w.reconnects() + " times");
            assertTrue(w.position() >= want.get(want.size() - 1));
            Transition first = got.get(0);
            assertEquals("acquired", first.event());
            assertEquals("h", first.holder());
            assertTrue(first.payload().contains("\"event\""), first.payload());
            // since: exactly the rest
            long mid = got.get(29).position();
            try (HistoryWatcher again =
                    HistoryWatcher.open(dsn(), new HistoryOptions().keyPrefix(prefix).since(mid))) {
                List<Long> rest = new ArrayList<>();
                Transition t;
                while ((t = again.next(Duration.ofMillis(500))) != null) {
                    rest.add(t.position());
                }
                assertEquals(want.subList(30, 60), rest);
            }
        }
    }

    @Test
    void aPrunedPositionStopsTheWatcher() throws Exception {
        // keep no more than the newest row for a moment: the oldest transitions are pruned
        one("SELECT le_try_acquire(?, 'h', '10 s')", prefix + "p");
        long oldest = (Long) one("SELECT min(position) FROM leaderlock_history");
        one("ALTER SYSTEM SET leaderlock.history_max_rows = 1");
        one("SELECT pg_reload_conf()");
        try {
            assertTrue(
                    Support.within(
                            10,
                            () -> {
                                try {
                                    return (Long)
                                                    one(
                                                            "SELECT min(position) FROM leaderlock_history")
                                            > oldest;
                                } catch (Exception e) {
                                    return false;
                                }
                            }),
                    "nothing was pruned");
        } finally {
            one("ALTER SYSTEM RESET leaderlock.history_max_rows");
            one("SELECT pg_reload_conf()");
        }
        HistoryPrunedException e =
                assertThrows(
                        HistoryPrunedException.class,
                        () -> {
                            try (HistoryWatcher w =
                                    HistoryWatcher.open(
                                            dsn(), new HistoryOptions().since(oldest - 1))) {
                                w.next(Duration.ofSeconds(5));
                            }
                        });
        assertEquals(oldest - 1, e.position());
        assertEquals("LE002", e.sqlState());
    }

    @Test
    void badOptionsAreRefusedAtOnceAndCloseEndsIt() throws Exception {
        assertThrows(
                BadArgumentException.class,
                () -> HistoryWatcher.open(dsn(), new HistoryOptions().key("a").keyPrefix("b")));
        assertThrows(
                BadArgumentException.class,
                () -> HistoryWatcher.open(dsn(), new HistoryOptions().since(-1L)));
        HistoryWatcher w = HistoryWatcher.open(dsn(), new HistoryOptions().key(prefix + "quiet"));
        assertNull(w.next(Duration.ofMillis(200)));
        Thread closer =
                new Thread(
                        () -> {
                            try {
                                Thread.sleep(200);
                            } catch (InterruptedException ignored) {
                                return;
                            }
                            w.close();
                        });
        closer.start();
        long t0 = System.nanoTime();
        assertThrows(IllegalStateException.class, () -> w.next(Duration.ofSeconds(10)));
        assertTrue(System.nanoTime() - t0 < 1_000_000_000L);
        closer.join();
    }
}
