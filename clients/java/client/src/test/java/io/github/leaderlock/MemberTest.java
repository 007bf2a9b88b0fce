package io.github.leaderlock;

import static io.github.leaderlock.Support.dsn;
import static io.github.leaderlock.Support.unique;
import static io.github.leaderlock.Support.within;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SortedMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Groups (contract 26): members sharing a group's partitions, a revoked one moving once onRevoked
 * returned, the notification hint, the guard, a member that cannot renew, leaving.
 */
class MemberTest {
    @BeforeAll
    static void server() {
        dsn(); // skipped without one
    }

    private final String group = unique("java-group");

    /** What a member's callbacks saw, and when (System.nanoTime). */
    static final class Seen {
        final Map<Integer, Long> assignedAt = new ConcurrentHashMap<>();
        // when onRevoked first returned
        final Map<Integer, Long> revokedAt = new ConcurrentHashMap<>();
        final List<String> calls = new CopyOnWriteArrayList<>();
        volatile long drainMillis;

        MemberOptions options(String group, String id, Duration ttl) {
            return MemberOptions.of(group)
                    .member(id)
                    .ttl(ttl)
                    .partitions(4)
                    .drain(Duration.ofSeconds(5))
                    .onAssigned(
                            (p, term) -> {
                                calls.add("assigned " + p + " " + term);
                                assignedAt.put(p, System.nanoTime());
                            })
                    .onRevoked(
                            p -> {
                                calls.add("revoked " + p);
                                Thread.sleep(drainMillis);
                                revokedAt.putIfAbsent(p, System.nanoTime());
                            });
        }
    }

    private static double millisSince(long t0) {
        return (System.nanoTime() - t0) / 1e6;
    }

    /**
     * The second member gets its half only once the first's onRevoked returned (the ack), in later
     * terms; each owns two.
     */
    @Test
    void twoMembersShareFourPartitionsMovedOnceOnRevokedReturned() throws Exception {
        Seen sa = new Seen();
        Seen sb = new Seen();
        sa.drainMillis = 300;
        try (Member a = Leaderlock.member(dsn(), sa.options(group, "a", Duration.ofSeconds(6)))) {
            Map<Integer, Long> all = a.owned();
            assertEquals(Set.of(1, 2, 3, 4), all.keySet());
            try (Member b =
                    Leaderlock.member(dsn(), sb.options(group, "b", Duration.ofSeconds(6)))) {
                assertTrue(
                        within(
                                5,
                                () ->
                                        a.owned().size() == 2
                                                && b.owned().size() == 2
                                                && sb.assignedAt.size() == 2),
                        "a " + a.owned() + ", b " + b.owned());
                Map<Integer, Long> given = b.owned();
                assertEquals(given.keySet(), sa.revokedAt.keySet(), "a revoked: " + sa.calls);
                for (var e : given.entrySet()) {
                    int p = e.getKey();
                    assertTrue(e.getValue() > all.get(p), "partition " + p + ": term " + e);
                    assertTrue(
                            sb.assignedAt.get(p) - sa.revokedAt.get(p) > 0,
                            "partition " + p + " was b's before a's onRevoked returned");
                    assertTrue(a.owns(p).isEmpty());
                }
                for (int p : a.owned().keySet()) {
                    assertEquals(all.get(p), a.owns(p).getAsLong(), "kept in its term");
                }
            }
        }
    }

    /**
     * Rounds every 2 s: the revocation's notification brings the owner's next round (it gives
     * back), the grant's the newcomer's (it owns). Without the hint, the newcomer's next round
     * comes 2 s after it joined.
     */
    @Test
    void aNewcomerOwnsItsShareWellWithinOneRenewalPeriod() throws Exception {
        Seen sa = new Seen();
        Seen sb = new Seen();
        Duration ttl = Duration.ofSeconds(6);
        try (Member a = Leaderlock.member(dsn(), sa.options(group, "a", ttl))) {
            assertEquals(4, a.owned().size());
            long t0 = System.nanoTime();
            try (Member b = Leaderlock.member(dsn(), sb.options(group, "b", ttl))) {
                assertTrue(within(5, () -> b.owned().size() == 2), "b " + b.owned());
                double took = millisSince(t0);
                System.out.printf(
                        "figure: a newcomer owned its share %.0f ms after joining (rounds every 2 s;"
                                + " %d rounds of its own)%n",
                        took, b.rounds());
                assertTrue(took < 1000, "the newcomer owned its share after " + took + " ms");
            }
        }
    }

    /** In the caller's transaction; the server refuses a term it superseded. */
    @Test
    void theGuardAdmitsTheOwnerAndRefusesASupersededTerm() throws Exception {
        Seen sa = new Seen();
        // ttl 30 s: rounds every 10 s, hinted ones 1 s apart at least
        try (Member a = Leaderlock.member(dsn(), sa.options(group, "a", Duration.ofSeconds(30)));
                Connection c = Support.connect();
                Connection auto = Support.connect()) {
            long term = a.owns(1).orElseThrow();
            c.setAutoCommit(false);
            assertEquals(term, a.guard(c, 1));
            c.commit();
            // in autocommit it would fence nothing
            assertThrows(LeaderlockException.class, () -> a.guard(auto, 1));
            // not a partition of the group: refused here, without a call
            LeaseLostException none = assertThrows(LeaseLostException.class, () -> a.guard(c, 7));
            assertEquals(LostReason.NOT_LEADER, none.reason());
            c.rollback();

            // a leaves behind its back: its partitions are free, in later terms from the next
            // owner on; a's view is a round old
            Support.one("SELECT le_leave(\"group\" => ?, member => 'a')", group);
            LeaseLostException refused =
                    assertThrows(LeaseLostException.class, () -> a.guard(c, 2));
            c.rollback();
            assertEquals(1, a.rounds(), "a round came between: the guard was not the server's");
            assertEquals(LostReason.NOT_LEADER, refused.reason());
            assertNotEquals("not this member's now", refused.detail());
            assertTrue(a.owns(2).isEmpty(), "still owned after the server's refusal");
            assertTrue(within(2, () -> sa.revokedAt.containsKey(2)), "no onRevoked: " + sa.calls);

            // the hinted round joins again: every partition in a later term
            assertTrue(within(5, () -> a.owned().size() == 4), "a " + a.owned());
            long later = a.owns(1).orElseThrow();
            assertTrue(later > term, "term " + later + " after " + term);
            assertEquals(later, a.guard(c, 1));
            c.commit();
            // the server itself refuses the superseded term
            try (PreparedStatement st =
                    c.prepareStatement(
                            "SELECT le_assert_partition(\"group\" => ?, partition => 1, member => 'a', term => ?)")) {
                st.setString(1, group);
                st.setLong(2, term);
                SQLException e = assertThrows(SQLException.class, st::executeQuery);
                assertEquals("LE001", e.getSQLState());
            }
            c.rollback();
        }
    }

    /**
     * Rounds wait on the member's session row, locked by another transaction: at the local deadline
     * every partition is lost (onRevoked), though no answer said so; owns() says so at the deadline
     * even while the callbacks' thread is busy. (Past its session's expiry a round joins again, in
     * a new session and later terms: that is not what is tested here.)
     */
    @Test
    @SuppressWarnings("try") // release: closed, not used
    void aMemberWhoseRoundsCannotSucceedLosesEverythingAtItsLocalDeadline() throws Exception {
        Duration ttl = Duration.ofMillis(1500);
        Seen told = new Seen();
        Seen busy = new Seen();
        CountDownLatch held = new CountDownLatch(1);
        MemberOptions heldOptions = busy.options(group + "-busy", "busy", ttl);
        heldOptions.onAssigned((p, term) -> held.await()); // the callbacks' thread kept busy
        try (Member m = Leaderlock.member(dsn(), told.options(group, "stalled", ttl));
                Member h = Leaderlock.member(dsn(), heldOptions);
                AutoCloseable release = held::countDown; // before h's close waits for it
                Connection c = Support.connect()) {
            assertTrue(within(2, () -> told.assignedAt.size() == 4), told.calls.toString());
            assertTrue(within(2, () -> h.owned().size() == 4), "busy " + h.owned());
            c.setAutoCommit(false);
            for (String[] who :
                    List.of(
                            new String[] {group, "stalled"},
                            new String[] {group + "-busy", "busy"})) {
                try (PreparedStatement st =
                        c.prepareStatement(
                                "SELECT 1 FROM leaderlock_sessions s JOIN leaderlock_members m USING (session) "
                                        + "WHERE m.grp = ? AND m.member = ? FOR UPDATE OF s")) {
                    st.setString(1, who[0]);
                    st.setString(2, who[1]);
                    assertTrue(st.executeQuery().next());
                }
            }
            long locked = System.nanoTime();
            // Every round either member applied was sent before the lock was granted (a join
            // needs the row), so each deadline (a round's send + ttl - margin) is before this.
            long bound = locked + ttl.toNanos();
            // owned() reads the clock: the busy member's grants (its callbacks' thread held) are
            // never seen at a time read a ttl or more after the lock. (Past the server's expiry it
            // may join again, in a new session and later terms: the spin ends there too.)
            SortedMap<Integer, Long> grants = h.owned();
            assertEquals(4, grants.size(), "the busy member owns its partitions");
            long seen = locked;
            for (; ; ) {
                long t = System.nanoTime();
                if (!h.owned().equals(grants)) {
                    break;
                }
                seen = t;
                assertTrue(
                        seen - bound < 0, "owned " + (seen - locked) / 1e6 + " ms after the lock");
            }
            double busyLost = (seen - locked) / 1e6;
            assertTrue(within(3, () -> told.revokedAt.size() == 4), "not lost: " + told.calls);
            long last = told.revokedAt.values().stream().max(Long::compare).orElseThrow();
            double toldLost = (last - locked) / 1e6;
            System.out.printf(
                    "figure: rounds held by a locked row: every partition lost %.0f ms after the lock"
                            + " (onRevoked returned), last seen owned %.0f ms after it with the"
                            + " callbacks' thread busy (owned()); ttl %d ms%n",
                    toldLost, busyLost, ttl.toMillis());
            // onRevoked runs on the callbacks' thread after the deadline: a scheduling allowance.
            assertTrue(
                    last - bound < Duration.ofMillis(250).toNanos(),
                    "told lost " + toldLost + " ms after the lock");
            assertTrue(busy.revokedAt.isEmpty(), "the busy member's callbacks ran");
            c.rollback();
            held.countDown(); // its callbacks' thread tells the losses then
            assertTrue(within(2, () -> busy.revokedAt.size() == 4), busy.calls.toString());
        }
    }

    /**
     * A member restarted under its name (here: its membership made by hand, running nothing) gives
     * back at once what it was told to give back before: the newcomer does not wait for the drain
     * budget (20 s).
     */
    @Test
    void aRevokedPartitionRunningNowhereHereIsGivenBackAtOnce() throws Exception {
        Support.one(
                "SELECT le_join(\"group\" => ?, member => 'a', ttl => '30 s', partitions => 4,"
                        + " drain => '20 s')::text",
                group);
        Duration ttl = Duration.ofSeconds(6);
        try (Member b =
                Leaderlock.member(
                        dsn(), new Seen().options(group, "b", ttl).partitions(null).drain(null))) {
            assertTrue(b.owned().isEmpty(), "b " + b.owned()); // two of a's are being revoked
            long t0 = System.nanoTime();
            try (Member a =
                    Leaderlock.member(
                            dsn(),
                            new Seen().options(group, "a", ttl).partitions(null).drain(null))) {
                assertTrue(within(5, () -> b.owned().size() == 2), "b " + b.owned());
                double took = millisSince(t0);
                assertEquals(2, a.owned().size(), "a " + a.owned());
                assertTrue(took < 1000, "b owned its share " + took + " ms after a came back");
            }
        }
    }

    /** close(): onRevoked for each partition, then le_leave: the other member owns them at once. */
    @Test
    void closingHandsThePartitionsOverAtOnce() throws Exception {
        Seen sa = new Seen();
        Seen sb = new Seen();
        Duration ttl = Duration.ofSeconds(6);
        try (Member b = Leaderlock.member(dsn(), sb.options(group, "b", ttl))) {
            Member a = Leaderlock.member(dsn(), sa.options(group, "a", ttl));
            try {
                assertTrue(
                        within(5, () -> a.owned().size() == 2 && b.owned().size() == 2),
                        "a " + a.owned() + ", b " + b.owned());
            } finally {
                Set<Integer> mine = a.owned().keySet();
                long t0 = System.nanoTime();
                a.close();
                assertTrue(a.owned().isEmpty());
                assertEquals(mine, sa.revokedAt.keySet(), "onRevoked before close returned");
                assertTrue(within(5, () -> b.owned().size() == 4), "b " + b.owned());
                double took = millisSince(t0);
                System.out.printf(
                        "figure: closed: the other member owned every partition %.0f ms later"
                                + " (rounds every 2 s)%n",
                        took);
                assertTrue(took < 1000, "b owned them " + took + " ms after the close");
            }
        }
    }
}
