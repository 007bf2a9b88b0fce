package io.github.leaderlock;

import static io.github.leaderlock.Support.dsn;
import static io.github.leaderlock.Support.one;
import static io.github.leaderlock.Support.rows;
import static io.github.leaderlock.Support.unique;
import static io.github.leaderlock.Support.within;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.sql.Timestamp;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Scheduled runs against a real server: three replicas run each due instant once with growing
 * terms; a function that throws is recorded failed with its detail; a refused renewal loses the run
 * at once; a job run by its name alone follows its schedule kept in the database (le_schedule), and
 * stops while it is paused.
 */
class SchedulerTest {
    @BeforeAll
    static void server() {
        dsn(); // skipped without one
    }

    private final String job = unique("java-job");

    private record Ran(Instant due, long term, String by) {}

    private static Map<Instant, Object[]> runsOf(String job) throws Exception {
        Map<Instant, Object[]> out = new TreeMap<>();
        for (Object[] r :
                rows(
                        "SELECT due, holder, term, outcome, detail FROM leaderlock_runs WHERE job = ?",
                        job)) {
            out.put(((Timestamp) r[0]).toInstant(), r);
        }
        return out;
    }

    @Test
    void threeReplicasRunEachDueInstantOnce() throws Exception {
        List<Ran> ran = new CopyOnWriteArrayList<>();
        List<Scheduler> replicas = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            String me = "r" + i;
            Scheduler s =
                    new Scheduler(
                            dsn(),
                            job,
                            Schedule.every(Duration.ofMillis(300)),
                            new SchedulerOptions()
                                    .id(me)
                                    .ttl(Duration.ofSeconds(2))
                                    .misfireGrace(Duration.ofSeconds(2)));
            replicas.add(s);
        }
        for (Scheduler s : replicas) {
            s.start(
                    run -> {
                        run.check();
                        ran.add(new Ran(run.due(), run.term(), run.id()));
                        Thread.sleep(30);
                    });
        }
        Thread.sleep(2500);
        for (Scheduler s : replicas) {
            assertTrue(s.stop(Duration.ofSeconds(10)));
            assertEquals(null, s.error());
        }
        List<Instant> dues = ran.stream().map(Ran::due).sorted().toList();
        assertEquals(dues.size(), new HashSet<>(dues).size(), "a due instant ran twice: " + ran);
        assertTrue(dues.size() >= 8, ran.toString());
        List<Long> terms = ran.stream().map(Ran::term).toList();
        assertEquals(terms.size(), new HashSet<>(terms).size(), "a term was issued twice");
        Map<Instant, Object[]> rows = runsOf(job);
        for (Ran r : ran) {
            assertEquals("succeeded", rows.get(r.due())[3], r.toString());
        }
    }

    @Test
    void aFunctionThatThrowsIsRecordedFailedWithItsDetail() throws Exception {
        Scheduler s =
                new Scheduler(
                        dsn(),
                        job,
                        Schedule.every(Duration.ofMillis(200)),
                        new SchedulerOptions().ttl(Duration.ofSeconds(2)));
        List<Instant> dues = new CopyOnWriteArrayList<>();
        s.start(
                run -> {
                    dues.add(run.due());
                    throw new IllegalStateException("the invoices are not ready");
                });
        assertTrue(within(3, () -> dues.size() >= 2));
        assertTrue(s.stop(Duration.ofSeconds(5)));
        Object[] row = runsOf(job).get(dues.get(0));
        assertEquals("failed", row[3]);
        assertEquals("IllegalStateException: the invoices are not ready", row[4]);
    }

    @Test
    void aRefusedRenewalLosesTheRunAtOnce() throws Exception {
        List<LostReason> lost = new CopyOnWriteArrayList<>();
        List<Instant> dues = new CopyOnWriteArrayList<>();
        Scheduler s =
                new Scheduler(
                        dsn(),
                        job,
                        Schedule.every(Duration.ofSeconds(1)),
                        new SchedulerOptions().ttl(Duration.ofMillis(900)));
        s.start(
                run -> {
                    if (!dues.isEmpty()) {
                        return;
                    }
                    dues.add(run.due());
                    // another replica's claim replaces ours: its renewal is refused
                    one(
                            "UPDATE leaderlock_runs SET expires_at = le_now() - interval '1 s' WHERE job = ? AND due = ?",
                            job,
                            run.due());
                    one("SELECT le_claim_run(?, ?, 'rival', '10 s')", job, run.due());
                    run.awaitLoss(Duration.ofSeconds(2));
                    lost.add(run.lostReason());
                });
        assertTrue(within(4, () -> !lost.isEmpty()), "the run was never lost");
        assertTrue(s.stop(Duration.ofSeconds(5)));
        assertEquals(LostReason.VACATED, lost.get(0));
        assertEquals("rival", runsOf(job).get(dues.get(0))[1]);
    }

    @Test
    void aJobRunByItsNameFollowsItsScheduleInTheDatabase() throws Exception {
        one("SELECT le_schedule(job => ?, every => interval '1 s')", job);
        try {
            List<Instant> dues = new CopyOnWriteArrayList<>();
            Scheduler s =
                    new Scheduler(
                            dsn(),
                            job,
                            Schedule.registered(),
                            new SchedulerOptions()
                                    .ttl(Duration.ofMillis(1500))
                                    .poll(Duration.ofMillis(100)));
            s.start(
                    run -> {
                        dues.add(run.due());
                        run.check();
                    });
            assertTrue(within(4, () -> dues.size() >= 2), "no runs: " + dues);
            one("SELECT le_pause_schedule(job => ?)", job);
            Thread.sleep(300);
            int paused = dues.size();
            Thread.sleep(1200);
            assertEquals(paused, dues.size(), "runs while paused");
            one("SELECT le_resume_schedule(job => ?)", job);
            assertTrue(within(3, () -> dues.size() > paused), "no run once resumed");
            assertTrue(s.stop(Duration.ofSeconds(5)));
            for (Instant d : dues) {
                assertEquals(0, d.getNano(), "a due instant off the schedule: " + d);
            }
            assertEquals(dues.size(), new HashSet<>(dues).size());
        } finally {
            one("SELECT le_unschedule(job => ?)", job);
        }
    }
}
