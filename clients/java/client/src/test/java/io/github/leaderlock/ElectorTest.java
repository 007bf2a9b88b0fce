package io.github.leaderlock;

import static io.github.leaderlock.Support.dsn;
import static io.github.leaderlock.Support.one;
import static io.github.leaderlock.Support.unique;
import static io.github.leaderlock.Support.within;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** Electors: one leader of two, a handover on stop within milliseconds, resigning, refusals. */
class ElectorTest {
    @BeforeAll
    static void server() {
        dsn(); // skipped without one
    }

    private final String key = unique("java-elector");

    /** Records, for each elector, what it was told, and what its work saw. */
    private static final class Seen implements Elector.Listener {
        final List<String> events = new CopyOnWriteArrayList<>();
        volatile long startedAt;
        volatile Lease lease;

        @Override
        public void onStarted(Lease lease) {
            this.lease = lease;
            startedAt = System.nanoTime();
            events.add("started " + lease.term());
        }

        @Override
        public void onStopped(Lease lease, LostReason reason) {
            events.add("stopped " + lease.term() + " " + reason.word());
        }

        @Override
        public void onNewLeader(String holder) {
            events.add("leader " + holder);
        }

        @Override
        public void onFailed(RejectedException error) {
            events.add("failed " + error.getClass().getSimpleName());
        }
    }

    private static Elector.Work ticking(List<Long> ticks) {
        return lease -> {
            while (true) {
                lease.check();
                ticks.add(lease.term());
                lease.awaitLoss(Duration.ofMillis(20));
            }
        };
    }

    @Test
    void oneLeaderOfTwoAndAHandoverOnStop() throws Exception {
        List<Long> ticksA = new CopyOnWriteArrayList<>();
        List<Long> ticksB = new CopyOnWriteArrayList<>();
        Seen a = new Seen();
        Seen b = new Seen();
        LeaseOptions o = new LeaseOptions().ttl(Duration.ofSeconds(2));
        Elector ea = new Elector(dsn(), key, o.id("java-a"), ticking(ticksA)).listener(a);
        ea.start();
        assertTrue(within(10, () -> !ticksA.isEmpty()), "A never led");
        Elector eb = new Elector(dsn(), key, o.id("java-b"), ticking(ticksB)).listener(b);
        eb.start();
        assertTrue(
                within(5, () -> b.events.contains("leader java-a")), "B never saw A: " + b.events);
        Thread.sleep(1500);
        assertTrue(ticksB.isEmpty(), "both led");
        long stopped = System.nanoTime();
        ea.stop();
        assertFalse(ea.isRunning());
        assertTrue(within(5, () -> !ticksB.isEmpty()), "B never led");
        long ms = (b.startedAt - stopped) / 1_000_000;
        assertTrue(ms < 500, "B led " + ms + " ms after A's stop began");
        assertTrue(b.lease.term() > a.lease.term());
        assertEquals(
                List.of(
                        "leader java-a",
                        "started " + a.lease.term(),
                        "stopped " + a.lease.term() + " released"),
                a.events);
        eb.stop();
        assertEquals(null, one("SELECT le_leader(?)", key));
    }

    @Test
    void aWorkThatReturnsResignsAndTheElectorCampaignsAgain() throws Exception {
        List<Long> terms = new CopyOnWriteArrayList<>();
        Seen seen = new Seen();
        Elector e =
                new Elector(
                                dsn(),
                                key,
                                new LeaseOptions().ttl(Duration.ofSeconds(2)),
                                lease -> terms.add(lease.term()))
                        .listener(seen);
        e.start();
        assertTrue(within(5, () -> terms.size() >= 2), "did not lead twice: " + terms);
        e.stop();
        assertTrue(terms.get(1) > terms.get(0));
        assertTrue(
                seen.events.contains("stopped " + terms.get(0) + " resigned"),
                seen.events.toString());
    }

    @Test
    void aRefusalForGoodEndsTheElector() throws Exception {
        Seen seen = new Seen();
        Elector e =
                new Elector(dsn(), key, new LeaseOptions().schema("pg_catalog"), lease -> {})
                        .listener(seen);
        e.start();
        assertTrue(e.join(Duration.ofSeconds(5)));
        assertNotNull(e.error());
        assertEquals(List.of("failed NotInstalledException"), seen.events);
    }
}
