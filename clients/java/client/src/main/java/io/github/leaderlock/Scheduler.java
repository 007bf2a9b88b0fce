package io.github.leaderlock;

import java.sql.SQLException;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * Scheduled runs (contract 22): a job that every replica schedules alike and that runs once per due
 * instant, on one of them. The loop is the Rust client's Scheduler (crates/client/src/
 * schedule.rs), statement for statement, as the other clients': read the server's lease clock
 * (le_now()), make every due instant up to it pending, claim the pending ones (le_claim_run), watch
 * those another replica claimed (claimed again if their claim lapses unfinished), and run a claimed
 * one with the guarantees of a lease: renewed every ttl/3, a local deadline on the monotonic clock,
 * and its outcome recorded (le_finish_run).
 *
 * <pre>{@code
 * Scheduler nightly = new Scheduler(dsn, "nightly-report", Schedule.cron("0 3 * * *", "Europe/Paris"),
 *         new SchedulerOptions());
 * nightly.run(run -> {                               // blocks until nightly.stop()
 *     for (Invoice invoice : invoicesDue(run.due())) {
 *         run.check();                               // LeaseLostException past the local deadline
 *         send(invoice, run.term());                 // the receiver refuses an older term
 *     }
 * });
 * }</pre>
 *
 * The outcome: succeeded when the function returned while the run was still ours; failed when it
 * threw (the detail: the exception's class and message, cut to 1000 bytes), or returned once the
 * run was lost. Recorded even past the deadline (the server refuses it if another replica claimed
 * the run since).
 */
public final class Scheduler {
    /** One due run: the job's function. */
    @FunctionalInterface
    public interface Job {
        void run(ScheduledRun run) throws Exception;
    }

    /** How soon to try again a run whose claim raced another, or whose row was not found. */
    private static final long RACE_RETRY = 20_000_000L;

    /** A run whose row a refused claim cannot find this many times in a row is dropped. */
    private static final int ABSENT_TRIES = 100;

    /** Looks again every RACE_RETRY this many times before backing off. */
    private static final int FAST_TRIES = 10;

    /** le_finish_run's limit on the detail, in bytes. */
    static final int DETAIL_LIMIT = 1000;

    private final Dsn dsn;
    private final String job;
    private final String id;
    private final Schedule schedule;
    private final Timing timing;
    private final long poll;
    private final Double grace; // seconds; null: none (or, registered, the schedule's)
    private final long lookback; // nanoseconds
    private final String named;
    private final Object lock = new Object();
    private volatile boolean stopping;
    private volatile boolean running;
    private volatile ScheduledRun current;
    private volatile RejectedException error;
    private Thread thread;
    private final Object done = new Object();
    private final Participant participant = new Participant();

    // The loop's state (its thread's).
    private Db db;
    private boolean started;
    private boolean more = true;
    private Instant cursor;
    private final Map<Instant, Pending> pending = new TreeMap<>();
    private int absent; // registered: 0 not looked at, 1 found, 2 absent or paused (told)

    private static final class Pending {
        final Instant due;
        long at;
        int tries;

        Pending(Instant due, long at) {
            this.due = due;
            this.at = at;
        }
    }

    /** What next() found: a run claimed, or settled elsewhere. */
    private record Turn(Instant due, boolean claimed, long term, long sent, String outcome) {}

    /**
     * A scheduler of {@code job} (1 to 255 bytes: every replica that schedules it under this name
     * shares its runs) on {@code schedule}. {@link BadArgumentException} for what it refuses.
     */
    public Scheduler(String dsn, String job, Schedule schedule, SchedulerOptions options) {
        SchedulerOptions o = options.copy();
        this.dsn = Dsn.parse(dsn);
        this.job = Leaderlock.checkName("job", job);
        this.id = o.id != null ? Leaderlock.checkName("id", o.id) : Leaderlock.defaultId();
        this.schedule = java.util.Objects.requireNonNull(schedule, "schedule");
        this.timing = Timing.of(o.ttl, null);
        if (o.poll == null || o.poll.isNegative() || o.poll.isZero()) {
            throw new BadArgumentException("leaderlock: poll must be positive");
        }
        this.poll = o.poll.toNanos();
        if (schedule.isRegistered() && o.misfireGrace != null) {
            throw new BadArgumentException(
                    "leaderlock: a schedule kept in the database has its own misfire grace");
        }
        Duration g = o.misfireGrace != null ? o.misfireGrace : schedule.defaultGrace().orElse(null);
        if (g != null && !g.isNegative() && !g.isZero()) {
            this.grace = g.toNanos() / 1e9;
            this.lookback = g.toNanos();
        } else {
            this.grace = null;
            this.lookback = 0;
        }
        this.named = Schemas.option(o.schema);
    }

    public String job() {
        return job;
    }

    /** This replica's id. */
    public String id() {
        return id;
    }

    /** The run under way, or null. */
    public ScheduledRun current() {
        return current;
    }

    /** The refusal that ended the loop, or null. */
    public RejectedException error() {
        return error;
    }

    /**
     * Runs the job's due runs, one at a time, until {@link #stop()}: {@code fn} runs in a thread of
     * its own for each run this replica claims, while this one renews the claim every ttl/3; once
     * it returned, its outcome is recorded and the loop goes on, whatever it returned. A lost
     * connection is made again with backoff; a refusal for good (no extension, no privilege, a bad
     * job name or id) ends it with a {@link RejectedException}.
     */
    public void run(Job fn) {
        java.util.Objects.requireNonNull(fn, "fn");
        synchronized (lock) {
            if (running) {
                throw new IllegalStateException("leaderlock: the scheduler runs already");
            }
            running = true;
        }
        Shutdown.register(participant);
        try {
            loop(fn);
        } finally {
            drop();
            Shutdown.unregister(participant);
            synchronized (done) {
                running = false;
                done.notifyAll();
            }
        }
    }

    /** {@link #run} in a thread of its own. */
    public void start(Job fn) {
        synchronized (lock) {
            if (thread != null) {
                throw new IllegalStateException("leaderlock: the scheduler was started already");
            }
            thread =
                    new Thread(
                            () -> {
                                try {
                                    run(fn);
                                } catch (RejectedException e) {
                                    Log.error("%s: %s", Text.quote(job), e.getMessage());
                                }
                            },
                            "leaderlock-scheduler " + job);
            thread.setDaemon(true);
            thread.start();
        }
    }

    /**
     * Stops claiming: the run under way (if any) goes on to its end (or its loss) and its outcome
     * is recorded first. Waits for the loop to end, {@code timeout} at most: whether it ended.
     */
    public boolean stop(Duration timeout) {
        stopping = true;
        synchronized (done) {
            done.notifyAll();
        }
        long until = System.nanoTime() + timeout.toNanos();
        synchronized (done) {
            while (running) {
                long left = until - System.nanoTime();
                if (left <= 0) {
                    return false;
                }
                try {
                    done.wait(Math.max(1, left / 1_000_000));
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return !running;
                }
            }
        }
        return true;
    }

    /** {@link #stop(Duration)}, waiting as long as the run under way takes. */
    public void stop() {
        stop(Duration.ofDays(1));
    }

    private boolean stopped() {
        return stopping || Shutdown.down;
    }

    /** Sleeps until stopped or {@code nanos} pass; false when stopped. */
    private boolean sleep(long nanos) {
        long until = System.nanoTime() + Math.max(0, nanos);
        synchronized (done) {
            while (!stopped()) {
                long left = until - System.nanoTime();
                if (left <= 0) {
                    return true;
                }
                try {
                    done.wait(Math.max(1, Math.min(left, 100_000_000L) / 1_000_000));
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    stopping = true;
                    return false;
                }
            }
        }
        return false;
    }

    private void drop() {
        if (db != null) {
            db.close();
            db = null;
        }
    }

    private void loop(Job fn) {
        Backoff backoff =
                new Backoff(
                        timing.retryEvery,
                        Math.min(Math.max(timing.ttl / 2, 500_000_000L), 5_000_000_000L));
        while (!stopped()) {
            Turn tn;
            try {
                tn = next();
            } catch (SQLException | RuntimeException e) {
                if (stopped()) {
                    return;
                }
                RejectedException r = Errors.rejection(e, db);
                if (r != null) {
                    Log.error("%s: %s", Text.quote(job), r.getMessage());
                    error = r;
                    throw r;
                }
                drop();
                long d = backoff.next();
                Log.warn(
                        "%s: cannot reach the server (%s); trying again in %d ms",
                        Text.quote(job), Text.describe(e), d / 1_000_000);
                if (!sleep(d)) {
                    return;
                }
                continue;
            }
            if (tn == null) {
                return; // stopped
            }
            backoff.reset();
            if (!tn.claimed()) {
                Log.info(
                        "%s: the run due %s settled elsewhere: %s",
                        Text.quote(job),
                        ScheduledRun.DUE.format(tn.due()),
                        tn.outcome() == null ? "gone" : tn.outcome());
                continue;
            }
            RejectedException r = runOne(tn, fn);
            if (r != null) {
                error = r;
                throw r;
            }
        }
    }

    /** Waits until a run is due and settled or claimed; null once stopped. */
    private Turn next() throws SQLException {
        while (true) {
            if (stopped()) {
                return null;
            }
            if (db != null && db.isClosed()) {
                drop();
            }
            if (db == null) {
                db =
                        Db.connect(
                                dsn,
                                System.nanoTime() + timing.connectBound(),
                                named,
                                Leaderlock.APPLICATION_NAME);
            }
            Instant now =
                    (Instant) db.one(System.nanoTime() + timing.callTimeout, Statements.LE_NOW);
            long here = System.nanoTime();
            Instant upcoming;
            boolean hasUpcoming;
            long most = 10_000_000_000L;
            if (schedule.isRegistered()) {
                // read again every poll: a change or a pause is followed without a restart
                Instant n = makeRegisteredPending(now, here);
                upcoming = n;
                hasUpcoming = n != null;
                most = poll;
            } else {
                if (!started) {
                    Instant c = schedule.atOrAfter(now.minusNanos(lookback)).orElse(null);
                    if (c == null) {
                        throw new BadArgumentException(
                                "leaderlock: the schedule has no due instant");
                    }
                    cursor = c;
                    started = true;
                }
                while (more && !cursor.isAfter(now)) {
                    makePending(cursor, here);
                    Instant c = schedule.nextAfter(cursor).orElse(null);
                    if (c == null) {
                        more = false;
                    } else {
                        cursor = c;
                    }
                }
                upcoming = cursor;
                hasUpcoming = more;
            }
            Pending ready = null; // the earliest due run ready to be looked at
            for (Pending p : pending.values()) {
                if (p.at - here <= 0 && (ready == null || p.due.isBefore(ready.due))) {
                    ready = p;
                }
            }
            if (ready == null) {
                // wake at the next due instant or the next look, whichever comes first; read the
                // server's clock again then
                long wait = most;
                if (hasUpcoming) {
                    wait = Math.min(wait, Duration.between(now, upcoming).toNanos());
                }
                for (Pending p : pending.values()) {
                    wait = Math.min(wait, p.at - here);
                }
                if (!sleep(wait)) {
                    return null;
                }
                continue;
            }
            Turn tn = lookAt(ready);
            if (tn != null) {
                return tn;
            }
        }
    }

    private void makePending(Instant due, long here) {
        pending.putIfAbsent(due, new Pending(due, here));
    }

    /**
     * Makes pending every due instant up to now of the job's schedule kept in the database, read
     * from the server: after the last one made pending (cursor), or at the start after now less the
     * schedule's misfire grace; returns the next one after now. Null while the job has no schedule
     * or it is paused: then looked at from the start again, so that no instant of the pause is ever
     * claimed past its grace.
     */
    private Instant makeRegisteredPending(Instant now, long here) throws SQLException {
        Instant from = cursor;
        boolean have = started;
        while (true) {
            Instant after = have ? from : now;
            Object[] row =
                    db.row(
                            System.nanoTime() + timing.callTimeout,
                            Statements.NEXT_DUE,
                            job,
                            after,
                            job,
                            job);
            Instant next = row == null ? null : (Instant) row[0];
            Double g = row == null || row[1] == null ? null : ((Number) row[1]).doubleValue();
            if (row != null && row[2] instanceof List<?> late) {
                // missed instants the backfill lets run late: claimed as any due run
                for (Object d : late) {
                    makePending((Instant) d, here);
                }
            }
            if (next == null) {
                started = false;
                if (absent != 2) {
                    Log.info(
                            "%s: the job has no schedule in the database, or it is paused: nothing runs until"
                                    + " le_schedule or le_resume_schedule",
                            Text.quote(job));
                    absent = 2;
                }
                return null;
            }
            if (absent == 2) {
                Log.info("%s: its schedule in the database runs again", Text.quote(job));
            }
            absent = 1;
            long back = g != null && g > 0 ? (long) (g * 1e9) : 0;
            Instant floor = now.minusNanos(back).minusNanos(1000);
            if (!have || next.isBefore(floor)) {
                // the first look, or an instant past its grace: from one misfire grace back
                from = floor;
                have = true;
                continue;
            }
            if (next.isAfter(now)) {
                return next;
            }
            makePending(next, here);
            from = next;
            cursor = next;
            started = true;
        }
    }

    /** Tries to claim a pending run: a turn, or null when it is to be looked at again later. */
    private Turn lookAt(Pending p) throws SQLException {
        long sent = System.nanoTime();
        Object term =
                db.one(
                        sent + timing.callTimeout,
                        Statements.CLAIM_RUN,
                        job,
                        p.due,
                        id,
                        timing.ttlSeconds(),
                        grace != null ? (Object) grace : Db.NULL_DOUBLE);
        if (term != null) {
            pending.remove(p.due);
            return new Turn(p.due, true, ((Number) term).longValue(), sent, null);
        }
        Object[] state =
                db.row(System.nanoTime() + timing.callTimeout, Statements.RUN_STATE, job, p.due);
        long here = System.nanoTime();
        if (state == null) {
            // refused before its row was made (its job's row taken, the failover step not taken
            // yet, or due before the retention): every 20 ms FAST_TRIES times, then backing off,
            // doubling up to the poll, given up after ABSENT_TRIES
            p.tries++;
            if (p.tries >= ABSENT_TRIES) {
                pending.remove(p.due);
                return new Turn(p.due, false, 0, 0, null);
            }
            int shift = Math.min(Math.max(p.tries - FAST_TRIES, 0), 10);
            long backoff = Math.min(RACE_RETRY << shift, Math.max(poll, RACE_RETRY));
            p.at = here + backoff;
        } else if (Boolean.TRUE.equals(state[0])) {
            pending.remove(p.due);
            return new Turn(p.due, false, 0, 0, (String) state[2]);
        } else if (state[1] != null) {
            // claimed live by another: look again when it may have finished or lapsed
            long wait =
                    Math.min(Math.max(0, (long) (((Number) state[1]).doubleValue() * 1e9)), poll);
            p.at = here + wait + RACE_RETRY;
            p.tries = 0;
        } else { // not live: a claim raced this one
            p.at = here + RACE_RETRY;
            p.tries = 0;
        }
        return null;
    }

    /** Renews a claim (le_renew_run with its term). */
    private final class RunRenewer extends Renewer {
        private final ScheduledRun run;

        RunRenewer(ScheduledRun run, Db db) {
            super(
                    Scheduler.this.dsn,
                    Scheduler.this.named,
                    Leaderlock.APPLICATION_NAME,
                    db,
                    run.claim,
                    Scheduler.this.timing,
                    "renewals of the run due " + ScheduledRun.DUE.format(run.due()),
                    Scheduler.this.job);
            this.run = run;
        }

        @Override
        boolean renewed(long by) throws SQLException {
            return db.bool(
                    by,
                    Statements.RENEW_RUN,
                    job,
                    run.due(),
                    id,
                    Scheduler.this.timing.ttlSeconds(),
                    run.term());
        }

        @Override
        boolean refused(long by) {
            run.claim.end(
                    LostReason.VACATED,
                    "the server refused the renewal: the run was claimed again, or its claim lapsed there");
            return false;
        }
    }

    /** Runs a claimed run to its end and records its outcome; a refusal for good, or null. */
    private RejectedException runOne(Turn tn, Job fn) {
        String due = ScheduledRun.DUE.format(tn.due());
        if (stopped()) {
            // claimed as the loop stopped: not started, nor finished; the claim lapses and another
            // replica may claim the run again
            Log.info(
                    "%s: stopping: the run due %s (term %d) is not started; its claim lapses",
                    Text.quote(job), due, tn.term());
            return null;
        }
        ScheduledRun run =
                new ScheduledRun(
                        job, id, tn.due(), tn.term(), tn.sent() + timing.ttl - timing.margin);
        Log.info("%s: running the run due %s, term %d", Text.quote(job), due, tn.term());
        RunRenewer renewer = new RunRenewer(run, db);
        db = null; // the renewer's while the run goes on
        Throwable[] thrown = {null};
        Thread worker =
                new Thread(
                        () -> {
                            try {
                                fn.run(run);
                            } catch (Throwable t) {
                                thrown[0] = t;
                            } finally {
                                renewer.stop();
                            }
                        },
                        "leaderlock-run " + job);
        worker.setDaemon(true);
        current = run;
        run.claim.watch();
        worker.start();
        renewer.run(); // until fn returns or the run is lost
        try {
            worker.join();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        current = null;
        db = renewer.db;
        // returning after the run was lost is no success: recorded failed, as by every client
        boolean lostBefore = !run.isOurs();
        LostReason reason = run.lostReason();
        String lostDetail = run.claim.detail();
        run.claim.end(LostReason.RESIGNED, "the function returned");
        boolean succeeded = thrown[0] == null && !lostBefore;
        String detail = null;
        if (thrown[0] != null) {
            detail =
                    Text.cut(
                            thrown[0].getClass().getSimpleName()
                                    + (thrown[0].getMessage() != null
                                            ? ": " + thrown[0].getMessage()
                                            : ""),
                            DETAIL_LIMIT);
            Log.warn(
                    thrown[0],
                    "%s: the run due %s (term %d) threw",
                    Text.quote(job),
                    due,
                    tn.term());
        } else if (lostBefore) {
            detail =
                    Text.cut(
                            "returned after the run was lost: "
                                    + reason.word()
                                    + (lostDetail != null ? " (" + lostDetail + ")" : ""),
                            DETAIL_LIMIT);
        }
        String outcome = succeeded ? "succeeded" : "failed (" + detail + ")";
        RejectedException refusal = null;
        try {
            boolean recorded = finish(tn, succeeded, detail);
            if (recorded) {
                Log.info(
                        "%s: the run due %s (term %d) %s",
                        Text.quote(job), due, tn.term(), outcome);
            } else {
                Log.info(
                        "%s: the run due %s (term %d) %s; not recorded: it was claimed again since",
                        Text.quote(job), due, tn.term(), outcome);
            }
        } catch (SQLException | RuntimeException e) {
            Log.warn(
                    "%s: the run due %s (term %d) %s; not recorded: %s",
                    Text.quote(job), due, tn.term(), outcome, Text.describe(e));
            refusal = Errors.rejection(e, db);
        }
        if (reason == LostReason.REJECTED) {
            return refusal != null
                    ? refusal
                    : new RejectedException(
                            "leaderlock: " + Text.quote(job) + ": " + lostDetail, null);
        }
        return refusal;
    }

    /**
     * Records the run's outcome: three tries, each within ttl/3, on a new connection after a
     * failure, whether or not the loop stops. False when the run was claimed again since.
     */
    private boolean finish(Turn tn, boolean succeeded, String detail) throws SQLException {
        SQLException last = null;
        for (int attempt = 0; attempt < 3; attempt++) {
            if (attempt > 0) {
                try {
                    Thread.sleep(timing.retryEvery / 1_000_000);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
            try {
                if (db != null && db.isClosed()) {
                    drop();
                }
                if (db == null) {
                    db =
                            Db.connect(
                                    dsn,
                                    System.nanoTime() + timing.callTimeout,
                                    named,
                                    Leaderlock.APPLICATION_NAME);
                }
                return db.bool(
                        System.nanoTime() + timing.callTimeout,
                        Statements.FINISH_RUN,
                        job,
                        tn.due(),
                        id,
                        tn.term(),
                        succeeded,
                        detail != null ? detail : Db.NULL_TEXT);
            } catch (SQLException e) {
                last = e;
                if (Errors.rejection(e, db) != null) {
                    throw e;
                }
                drop();
            }
        }
        throw last;
    }

    private final class Participant implements Shutdown.Participant {
        @Override
        public void beginShutdown() {
            stopping = true;
            ScheduledRun r = current;
            if (r != null) {
                r.claim.end(LostReason.SHUTDOWN, "the process is shutting down");
            }
            synchronized (done) {
                done.notifyAll();
            }
        }

        @Override
        public void finishShutdown() {
            // the run under way returns (its check throws), its outcome is recorded
            ScheduledRun r = current;
            long bound = r != null ? Math.max(0, r.deadlineNanos() - System.nanoTime()) : 0;
            stop(Duration.ofNanos(bound + 3 * timing.callTimeout + 1_000_000_000L));
        }
    }
}
