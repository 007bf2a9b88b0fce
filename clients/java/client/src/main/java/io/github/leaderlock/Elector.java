package io.github.leaderlock;

import java.time.Duration;
import java.util.Objects;

/**
 * A long-running candidate, for services that campaign for as long as they run (the shape of
 * client-go's LeaderCallbacks): it campaigns in a thread of its own until {@link #stop()}, through
 * lost connections and server restarts, and after a tenure ends it campaigns again.
 *
 * <pre>{@code
 * Leaderlock.releaseOnShutdown();                    // SIGTERM: the work stops, the lease is released
 * Elector elector = new Elector(dsn, "scheduler", new LeaseOptions(), lease -> {
 *     while (true) {
 *         lease.check();                             // LeaseLostException: the elector campaigns again
 *         step(lease);                               // writes fenced by lease.guard(conn)
 *         lease.awaitLoss(Duration.ofSeconds(1));
 *     }
 * });
 * elector.start();
 * elector.join();
 * }</pre>
 *
 * <p>{@code work(lease)} runs in a thread of its own each time this process starts to lead. It must
 * call {@code lease.check()} before each step (it throws past the local deadline, once the lease is
 * lost, or once the elector stops). {@link LeaseLostException} out of it ends the tenure and the
 * elector campaigns again; if it returns, or throws anything else (logged), the elector releases
 * the lease and campaigns again after a pause. The elector never starts a tenure's work before the
 * previous tenure's work returned, and releases only once it did.
 */
public final class Elector {
    /** The leader's work: called in a thread of its own each time this process leads. */
    @FunctionalInterface
    public interface Work {
        void run(Lease lease) throws Exception;
    }

    /**
     * What an elector tells; each method does nothing unless overridden, and should return soon.
     */
    public interface Listener {
        /** This process leads (called before work, in the elector's thread). */
        default void onStarted(Lease lease) {}

        /** A tenure ended (after its work returned, and after the release). */
        default void onStopped(Lease lease, LostReason reason) {}

        /** The holder a follower sees changed (null: vacant); this process's id when it leads. */
        default void onNewLeader(String holder) {}

        /** The server refused for good: the elector ends, {@link #error()} keeps it. */
        default void onFailed(RejectedException error) {}
    }

    private final String dsnText;
    private final Dsn dsn;
    private final String key;
    private final String id;
    private final Timing timing;
    private final LeaseOptions options;
    private final String named;
    private final Work work;
    private volatile Listener listener = new Listener() {};
    private final Object lock = new Object();
    private volatile boolean stopping;
    private volatile boolean finished;
    private volatile Lease lease;
    private volatile RejectedException error;
    private Thread thread;
    private Thread workThread;
    private Object seen = new Object(); // the last holder told (a sentinel before any)
    private final Participant participant = new Participant();

    /**
     * An elector for {@code key}; {@link #start()} starts it ({@code options.timeout} is unused).
     */
    public Elector(String dsn, String key, LeaseOptions options, Work work) {
        this.dsnText = dsn;
        this.dsn = Dsn.parse(dsn);
        this.key = Leaderlock.checkName("key", key);
        this.options = options.copy();
        this.id =
                this.options.id != null
                        ? Leaderlock.checkName("id", this.options.id)
                        : Leaderlock.defaultId();
        this.timing = Timing.of(this.options.ttl, this.options.poll);
        this.named = Schemas.option(this.options.schema);
        this.work = work;
    }

    /** What to tell (before start). */
    public Elector listener(Listener listener) {
        this.listener = Objects.requireNonNull(listener);
        return this;
    }

    /** This candidate's id. */
    public String id() {
        return id;
    }

    /** Starts campaigning, in a thread of its own. */
    public void start() {
        synchronized (lock) {
            if (thread != null) {
                throw new IllegalStateException("leaderlock: the elector was started already");
            }
            thread = new Thread(this::run, "leaderlock-elector " + key);
            thread.setDaemon(true);
            Shutdown.register(participant);
            thread.start();
        }
    }

    /**
     * Stops campaigning: the lease (if any) ends at once for the work (check() throws), and once
     * the work returned it is released (hands over at once). Waits for the elector to end (the
     * work's step under way, until the lease's deadline at most).
     */
    public void stop() {
        stopWith(LostReason.RELEASED, "the elector stops");
        join(Duration.ofNanos(timing.ttl + 2_000_000_000L));
    }

    private void stopWith(LostReason why, String what) {
        stopping = true;
        Lease l = lease;
        if (l != null) {
            l.tenure.end(why, what);
        }
    }

    /** Waits for the elector to end (after stop(), or a refusal). Whether it ended. */
    public boolean join(Duration timeout) {
        Thread t;
        synchronized (lock) {
            t = thread;
        }
        if (t == null || t == Thread.currentThread()) {
            return finished;
        }
        try {
            t.join(Math.max(1, timeout.toMillis()));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        return finished;
    }

    /** Waits for the elector to end, however long. */
    public void join() throws InterruptedException {
        Thread t;
        synchronized (lock) {
            t = thread;
        }
        if (t != null) {
            t.join();
        }
    }

    /** Whether it campaigns or leads still. */
    public boolean isRunning() {
        return thread != null && !finished;
    }

    /** The lease while this process leads, else null. */
    public Lease lease() {
        return lease;
    }

    /** The refusal that ended the elector, or null. */
    public RejectedException error() {
        return error;
    }

    private void call(Runnable callback) {
        try {
            callback.run();
        } catch (RuntimeException e) {
            Log.warn(e, "%s: a callback of the elector threw", Text.quote(key));
        }
    }

    private void refused(String holder) {
        if (!Objects.equals(holder, seen)) {
            seen = holder;
            call(() -> listener.onNewLeader(holder));
        }
    }

    private void run() {
        try {
            while (!stopping && !Shutdown.down) {
                if (!previousWorkDone()) {
                    return;
                }
                Campaign c =
                        new Campaign(
                                dsn,
                                dsnText,
                                key,
                                id,
                                timing,
                                options.value,
                                named,
                                () -> stopping || Shutdown.down,
                                this::refused);
                Lease won;
                try {
                    won = c.run(null);
                } catch (NotAcquiredException e) { // stopped
                    c.drop();
                    return;
                } catch (RejectedException e) { // retrying cannot help: say so, and end
                    c.drop();
                    error = e;
                    call(() -> listener.onFailed(e));
                    return;
                } catch (RuntimeException e) { // not expected: say so, try again
                    Log.warn(e, "%s: the elector", Text.quote(key));
                    c.abort();
                    c.sleep(timing.retryEvery);
                    continue;
                }
                lead(won, c);
            }
        } finally {
            Shutdown.unregister(participant);
            finished = true;
        }
    }

    /**
     * A work still running (past its tenure's deadline: it did not check) delays the next campaign
     * until it returns.
     */
    private boolean previousWorkDone() {
        Thread w = workThread;
        if (w == null || !w.isAlive()) {
            return true;
        }
        Log.warn(
                "%s: the work of the last tenure is still running past its deadline; campaigning again"
                        + " once it returns",
                Text.quote(key));
        while (w.isAlive()) {
            if (stopping) {
                return false;
            }
            try {
                w.join(100);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return false;
            }
        }
        return true;
    }

    private void lead(Lease won, Campaign c) {
        LeaseRenewer renewer = new LeaseRenewer(dsn, dsnText, named, c.take(), won, timing);
        won.onClose(() -> won.tenure.end(LostReason.RESIGNED, "closed by the work"));
        won.tenure.watch();
        renewer.start("leaderlock-renewer " + key);
        lease = won;
        seen = id;
        final boolean[] lost = {false};
        final String[] why = {null};
        Thread worker = null;
        try {
            if (stopping) {
                won.tenure.end(LostReason.RELEASED, "the elector stops");
            }
            call(() -> listener.onNewLeader(id));
            call(() -> listener.onStarted(won));
            if (work != null && won.isLeader()) {
                worker =
                        new Thread(
                                () -> {
                                    try {
                                        work.run(won);
                                    } catch (LeaseLostException e) {
                                        lost[0] = true;
                                    } catch (Exception e) {
                                        Log.warn(
                                                e,
                                                "%s: the work threw; releasing",
                                                Text.quote(key));
                                        why[0] = "the work threw " + Text.describe(e);
                                    }
                                },
                                "leaderlock-work " + key);
                worker.setDaemon(true);
                workThread = worker;
                worker.start();
            }
            while (won.isLeader() && !stopping && (worker == null || worker.isAlive())) {
                try {
                    won.awaitLoss(Duration.ofMillis(50));
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    break;
                }
            }
        } finally {
            // Nothing may start a step any more: then wait for the step under way (until the
            // deadline at most), stop renewing, release.
            if (stopping) {
                won.tenure.end(LostReason.RELEASED, "the elector stops");
            } else if (worker != null && !worker.isAlive() && !lost[0]) {
                won.tenure.end(LostReason.RESIGNED, why[0] != null ? why[0] : "the work returned");
            } else {
                won.tenure.end(LostReason.RESIGNED, "the work ended with LeaseLostException");
            }
            if (worker != null) {
                try {
                    worker.join(
                            Math.max(1, (won.tenure.deadline() - System.nanoTime()) / 1_000_000));
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
            renewer.stop();
            if ((worker == null || !worker.isAlive()) && !renewer.busy()) {
                renewer.release();
                renewer.drop();
            }
            lease = null;
        }
        call(() -> listener.onStopped(won, won.lostReason()));
        if (!lost[0] && worker != null && !stopping) {
            c.sleep(timing.retryEvery); // resigned: give the others a chance first
        }
    }

    private final class Participant implements Shutdown.Participant {
        @Override
        public void beginShutdown() {
            stopWith(LostReason.SHUTDOWN, "the process is shutting down");
        }

        @Override
        public void finishShutdown() {
            // the work's step under way (until the deadline), then the release
            join(Duration.ofNanos(timing.ttl + 2_000_000_000L));
        }
    }
}
