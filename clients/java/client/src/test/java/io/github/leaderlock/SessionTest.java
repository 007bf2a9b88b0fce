package io.github.leaderlock;

import static io.github.leaderlock.Support.dsn;
import static io.github.leaderlock.Support.one;
import static io.github.leaderlock.Support.unique;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.sql.Connection;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Sessions (contract 21): many keys kept by one renewal every ttl/3, close vacating every key at
 * once, a refused renewal losing the session for good, waiting for a key, the guard.
 */
class SessionTest {
    @BeforeAll
    static void server() {
        dsn(); // skipped without one
    }

    private final String prefix = unique("java-session");

    @Test
    void manyKeysAreKeptByOneRenewalEveryTtlOver3() throws Exception {
        List<SessionLease> mine = new ArrayList<>();
        try (Session s = Session.open(dsn(), new SessionOptions().ttl(Duration.ofMillis(900)))) {
            for (int n = 0; n < 20; n++) {
                mine.add(s.tryAcquire(prefix + "/" + n).orElseThrow());
            }
            try (Session rival =
                    Session.open(dsn(), new SessionOptions().ttl(Duration.ofSeconds(5)))) {
                assertTrue(rival.tryAcquire(prefix + "/3").isEmpty());
            }
            long before = s.renewals();
            Thread.sleep(1800); // two ttls
            long renewals = s.renewals() - before;
            assertTrue(renewals >= 5 && renewals <= 7, renewals + " renewals in 1.8 s");
            for (SessionLease l : mine) {
                l.check();
            }
            assertEquals(
                    20L,
                    one(
                            "SELECT count(*) FROM leaderlock_status WHERE key LIKE ? AND holder = ? AND state = 'held'",
                            prefix + "/%",
                            s.id()));
            // the same key again: the same tenure
            assertEquals(mine.get(0).term(), s.tryAcquire(prefix + "/0").orElseThrow().term());
        }
        for (SessionLease l : mine) {
            assertFalse(l.isLeader());
        }
        assertEquals(
                0L,
                one(
                        "SELECT count(*) FROM leaderlock_status WHERE key LIKE ? AND state = 'held'",
                        prefix + "/%"),
                "close did not vacate every key");
    }

    @Test
    void aRefusedRenewalLosesTheSessionAndEveryLeaseForGood() throws Exception {
        try (Session s = Session.open(dsn(), new SessionOptions().ttl(Duration.ofSeconds(1)))) {
            SessionLease l = s.tryAcquire(prefix + "/a").orElseThrow();
            one("SELECT le_close_session(?::uuid)", s.handle()); // from elsewhere
            assertTrue(s.awaitLoss(Duration.ofSeconds(2)));
            assertEquals(
                    LostReason.VACATED, assertThrows(LeaseLostException.class, s::check).reason());
            assertThrows(LeaseLostException.class, l::check);
            assertThrows(LeaseLostException.class, () -> s.tryAcquire(prefix + "/b"));
        }
    }

    @Test
    void acquireWaitsForAKeyAndReleaseFreesOneKey() throws Exception {
        String key = prefix + "/shared";
        try (Session s = Session.open(dsn(), new SessionOptions().ttl(Duration.ofSeconds(3)));
                Session rival =
                        Session.open(dsn(), new SessionOptions().ttl(Duration.ofSeconds(3)))) {
            SessionLease theirs = rival.tryAcquire(key).orElseThrow();
            assertThrows(NotAcquiredException.class, () -> s.acquire(key, Duration.ofMillis(300)));
            Thread releaser =
                    new Thread(
                            () -> {
                                try {
                                    Thread.sleep(300);
                                } catch (InterruptedException e) {
                                    return;
                                }
                                theirs.release();
                            });
            releaser.start();
            long t0 = System.nanoTime();
            SessionLease mine = s.acquire(key, Duration.ofSeconds(5));
            releaser.join();
            assertTrue(System.nanoTime() - t0 < 2_000_000_000L);
            assertTrue(mine.term() > theirs.term());
            assertFalse(theirs.isLeader());
            assertTrue(rival.isAlive(), "releasing one key ended the session");
            // the guard fences writes with the key's own term
            try (Connection c = Support.connect()) {
                c.setAutoCommit(false);
                assertEquals(mine.term(), mine.guard(c));
                c.commit();
            }
        }
    }

    @Test
    void badInputIsABadArgument() {
        assertThrows(
                BadArgumentException.class,
                () -> Session.open(dsn(), new SessionOptions().ttl(Duration.ZERO)));
        assertThrows(
                BadArgumentException.class,
                () -> Session.open(dsn(), new SessionOptions().lockDelay(Duration.ofSeconds(-1))));
        try (Session s = Session.open(dsn(), new SessionOptions().ttl(Duration.ofSeconds(2)))) {
            assertThrows(BadArgumentException.class, () -> s.tryAcquire(""));
            assertThrows(BadArgumentException.class, () -> s.acquire("k", Duration.ofSeconds(-1)));
        }
    }
}
