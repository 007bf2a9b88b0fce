package io.github.leaderlock;

import static io.github.leaderlock.Support.dsn;
import static io.github.leaderlock.Support.one;
import static io.github.leaderlock.Support.unique;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.time.Duration;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Leases against a real server: leading, renewing, releasing, waiting, the local deadline when
 * every renewal is refused (the row locked), a renewal stuck on a frozen backend replaced, refused
 * renewals that lose the lease at once, the guard.
 */
class LeaseTest {
    @BeforeAll
    static void server() {
        dsn(); // skipped without one
    }

    private final String key = unique("java-lease");

    private static LeaseOptions ttl(double seconds) {
        return new LeaseOptions().ttl(Duration.ofMillis((long) (seconds * 1000)));
    }

    @Test
    void leadsRenewsPastItsTtlAndReleasesOnClose() throws Exception {
        long term;
        try (Lease lease = Leaderlock.lead(dsn(), key, ttl(1.0).value("{\"role\": \"primary\"}"))) {
            assertTrue(lease.term() > 0);
            assertTrue(lease.isLeader());
            assertEquals(lease.id(), one("SELECT le_leader(?)", key));
            assertEquals("primary", one("SELECT value->>'role' FROM le_lease(?)", key));
            long deadline = lease.deadlineNanos();
            Thread.sleep(2000); // two ttls: only renewals keep it
            lease.check();
            assertTrue(lease.deadlineNanos() > deadline, "the deadline did not move");
            assertEquals(lease.id(), one("SELECT le_leader(?)", key));
            term = lease.term();
        }
        assertNull(one("SELECT le_leader(?)", key), "close() did not release");
        // another candidate leads at once, in a higher term
        try (Lease next = Leaderlock.lead(dsn(), key, ttl(1.0).timeout(Duration.ZERO))) {
            assertTrue(next.term() > term);
        }
    }

    @Test
    void aTimeoutOfZeroTriesOnceAndNamesTheHolder() {
        try (Lease lease = Leaderlock.lead(dsn(), key, ttl(5).id("java-holder"))) {
            long t0 = System.nanoTime();
            NotAcquiredException e =
                    assertThrows(
                            NotAcquiredException.class,
                            () -> Leaderlock.lead(dsn(), key, ttl(5).timeout(Duration.ZERO)));
            assertEquals("java-holder", e.holder());
            assertTrue(System.nanoTime() - t0 < 2_000_000_000L);
            e =
                    assertThrows(
                            NotAcquiredException.class,
                            () ->
                                    Leaderlock.lead(
                                            dsn(), key, ttl(5).timeout(Duration.ofMillis(300))));
            assertEquals("java-holder", e.holder());
            lease.check();
        }
    }

    @Test
    void aWaitingCandidateLeadsAtOnceWhenTheHolderReleases() throws Exception {
        Lease first = Leaderlock.lead(dsn(), key, ttl(10));
        long[] got = {0, 0};
        Thread waiter =
                new Thread(
                        () -> {
                            try (Lease second = Leaderlock.lead(dsn(), key, ttl(10))) {
                                got[0] = System.nanoTime();
                                got[1] = second.term();
                            }
                        });
        waiter.start();
        Thread.sleep(700); // waiting, LISTENing
        long released = System.nanoTime();
        first.close();
        waiter.join(5000);
        assertTrue(got[1] > first.term(), "the waiter did not lead");
        long ms = (got[0] - released) / 1_000_000;
        assertTrue(ms < 300, "the waiter led " + ms + " ms after the release");
    }

    /**
     * Its row locked by another transaction, every renewal is refused while the lease still shows
     * as ours: retried, and at the local deadline the lease is lost, not a step later.
     */
    @Test
    void refusedRenewalsEndTheLeaseAtTheLocalDeadline() throws Exception {
        try (Lease lease = Leaderlock.lead(dsn(), key, ttl(1.5));
                Connection blocker = Support.connect()) {
            blocker.setAutoCommit(false);
            try (PreparedStatement st =
                    blocker.prepareStatement("SELECT 1 FROM leaderlock WHERE key = ? FOR UPDATE")) {
                st.setString(1, key);
                st.executeQuery().close();
            }
            // Every renewal applied was sent before the block: the deadline is before this.
            long bound = System.nanoTime() + Duration.ofMillis(1500).toNanos();
            long lastTrue = 0; // read before a question that answered true
            while (true) {
                long now = System.nanoTime();
                if (!lease.isLeader()) {
                    break;
                }
                lastTrue = now;
                assertTrue(now - bound < 0, "leader a ttl after the block");
                Thread.sleep(5);
            }
            long lostAt = System.nanoTime();
            // Read once lost, when nothing moves it (a renewal committed just before the block
            // may have been applied after it).
            long deadline = lease.deadlineNanos();
            assertTrue(deadline - bound < 0, "the deadline is past block + ttl");
            assertTrue(lastTrue - deadline < 0, "a step was allowed past the deadline");
            // a look every 5 ms: a scheduling allowance
            long late = (lostAt - deadline) / 1_000_000;
            assertTrue(late < 250, "lost " + late + " ms after the deadline");
            LeaseLostException e = assertThrows(LeaseLostException.class, lease::check);
            assertEquals(LostReason.EXPIRED, e.reason());
            assertTrue(e.detail().contains("locked"), e.detail());
            blocker.rollback();
        }
    }

    @Test
    void aRenewalRefusedByTheServerLosesTheLeaseAtOnce() throws Exception {
        Lease lease = Leaderlock.lead(dsn(), key, ttl(1.2));
        assertEquals(Boolean.TRUE, one("SELECT le_force_release(?)", key));
        assertTrue(lease.awaitLoss(Duration.ofSeconds(2)));
        LeaseLostException e = assertThrows(LeaseLostException.class, lease::check);
        assertEquals(LostReason.VACATED, e.reason());
        lease.close(); // nothing to release
        // taken over meanwhile by another holder: TAKEN
        Lease again = Leaderlock.lead(dsn(), key, ttl(1.2));
        assertEquals(Boolean.TRUE, one("SELECT le_force_release(?)", key));
        assertEquals(Boolean.TRUE, one("SELECT le_try_acquire(?, 'rival', '10 s')", key));
        assertTrue(again.awaitLoss(Duration.ofSeconds(2)));
        assertEquals(
                LostReason.TAKEN, assertThrows(LeaseLostException.class, again::check).reason());
        again.close();
        assertEquals(
                "rival",
                one("SELECT le_leader(?)", key),
                "a lost lease's close released another's");
    }

    @Test
    void theGuardFencesWritesInTheirTransaction() throws Exception {
        String table = "java_fenced_" + key.substring(key.length() - 8);
        Support.one("CREATE TABLE " + table + " (term bigint)");
        try (Lease lease = Leaderlock.lead(dsn(), key, ttl(10));
                Connection conn = Support.connect()) {
            conn.setAutoCommit(false);
            assertEquals(lease.term(), lease.guard(conn));
            conn.createStatement()
                    .execute("INSERT INTO " + table + " VALUES (" + lease.term() + ")");
            conn.commit();
            // another holder takes over: the guard refuses, the write is rolled back
            one("SELECT le_force_release(?)", key);
            one("SELECT le_try_acquire(?, 'rival', '10 s')", key);
            LeaseLostException e = assertThrows(LeaseLostException.class, () -> lease.guard(conn));
            assertEquals(LostReason.NOT_LEADER, e.reason());
            conn.rollback();
            assertFalse(lease.isLeader());
            // outside a transaction it would fence nothing: refused
            conn.setAutoCommit(true);
            assertThrows(LeaderlockException.class, () -> lease.guard(conn));
        } finally {
            Support.one("DROP TABLE " + table);
        }
        assertEquals(1L, one("SELECT 1::bigint"));
    }

    @Test
    void badArgumentsAreRefusedBeforeAnythingConnects() {
        assertThrows(BadArgumentException.class, () -> Leaderlock.lead(dsn(), ""));
        assertThrows(BadArgumentException.class, () -> Leaderlock.lead(dsn(), key, ttl(0)));
        assertThrows(BadArgumentException.class, () -> Leaderlock.lead(dsn(), key, ttl(-1)));
        assertThrows(
                BadArgumentException.class,
                () -> Leaderlock.lead(dsn(), key, ttl(1).timeout(Duration.ofSeconds(-1))));
        assertThrows(
                BadArgumentException.class,
                () -> Leaderlock.lead(dsn(), key, ttl(1).poll(Duration.ZERO)));
        assertThrows(BadArgumentException.class, () -> Leaderlock.lead("host=/tmp", key));
        assertThrows(BadArgumentException.class, () -> Leaderlock.lead("hots=x", key));
    }
}
