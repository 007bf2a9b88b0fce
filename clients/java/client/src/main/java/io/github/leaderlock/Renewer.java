package io.github.leaderlock;

import java.sql.SQLException;

/**
 * Renews a tenure every ttl/3 in a thread of its own until stopped, on a new connection when the
 * old one is lost or hangs; each call is bounded by ttl/3 and by the local deadline. A renewal
 * answered false goes to {@link #refused}: retry (the row was locked) or end. What a renewal is
 * differs between a lease, a session, a run and a group's member (the subclasses; a member also
 * overrides the hooks between {@link #pause} and {@link #rejected}).
 */
abstract class Renewer implements Runnable {
    final Dsn dsn;
    final String named;
    final String appName;
    final Tenure tenure;
    final Timing timing;
    final String what;
    private final Outage outage;
    private final Object stopLock = new Object();
    private boolean stopping;
    private volatile boolean finished;
    private boolean abandoned; // stop() gave up waiting: the thread closes the connection
    private Thread thread;

    /** The connection: the renewing thread's while it runs, then its stopper's. */
    Db db;

    Renewer(
            Dsn dsn,
            String named,
            String appName,
            Db db,
            Tenure tenure,
            Timing timing,
            String what,
            String key) {
        this.dsn = dsn;
        this.named = named;
        this.appName = appName;
        this.db = db;
        this.tenure = tenure;
        this.timing = timing;
        this.what = what;
        this.outage = new Outage(key, what);
    }

    void start(String threadName) {
        thread = new Thread(this, threadName);
        thread.setDaemon(true);
        thread.start();
    }

    /** The first renewal: ttl/3 after the tenure's start. */
    long firstRenewal() {
        return tenure.deadline() + timing.margin - timing.ttl + timing.renewEvery;
    }

    /** One renewal: true when renewed, false when the server refused it. */
    abstract boolean renewed(long by) throws SQLException;

    /** After a refusal: whether to retry (the row was locked); else the tenure was ended. */
    abstract boolean refused(long by) throws SQLException;

    @Override
    public void run() {
        try {
            renew();
        } finally {
            boolean close;
            synchronized (stopLock) {
                finished = true;
                close = abandoned;
                stopLock.notifyAll();
            }
            if (close) {
                drop();
            }
        }
    }

    /** Whether {@link #stop()} was called. */
    final boolean stopped() {
        synchronized (stopLock) {
            return stopping;
        }
    }

    /** Waits until {@code at}: true when stopped meanwhile. */
    final boolean waitUntil(long at) {
        synchronized (stopLock) {
            while (!stopping) {
                long left = at - System.nanoTime();
                if (left <= 0) {
                    return false;
                }
                try {
                    stopLock.wait(Math.max(1, left / 1_000_000), 0);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return true;
                }
            }
            return true;
        }
    }

    // Hooks, as a lease, a session and a run need them; a member's differ.

    /** Until the next renewal, due at {@code at}: true when stopped meanwhile. */
    boolean pause(long at) {
        return waitUntil(at);
    }

    /** The bound of every call, besides ttl/3: the local deadline. */
    long bound() {
        return tenure.deadline();
    }

    /** A new connection for the renewals. */
    Db connect(long by) throws SQLException {
        return Db.connect(dsn, by, named, appName);
    }

    /** A renewal sent at {@code start} was answered: false when the tenure ended meanwhile. */
    boolean extend(long start) {
        return tenure.extend(start + timing.ttl - timing.margin);
    }

    /** A refusal that retrying cannot change: the tenure ends. */
    void rejected(RejectedException refusal) {
        tenure.end(LostReason.REJECTED, "the server rejected the renewal: " + refusal.getMessage());
    }

    private void renew() {
        long next = firstRenewal();
        while (!pause(next)) {
            if (!tenure.ours()) {
                return;
            }
            // the new deadline counts from the moment the renewal is sent
            long start = System.nanoTime();
            // one call may take ttl/3 at most (then reconnect and retry), never past the deadline
            long by = Math.min(start + timing.callTimeout, bound());
            try {
                if (db == null) {
                    db = connect(by);
                }
                if (renewed(by)) {
                    if (!extend(start)) {
                        return; // the deadline passed meanwhile: a loss is final
                    }
                    outage.ended();
                    next = start + timing.renewEvery;
                    continue;
                }
                if (!refused(by)) {
                    return;
                }
                next = start + timing.retryEvery; // its row was locked: retry until the deadline
            } catch (SQLException | RuntimeException e) {
                RejectedException refusal = Errors.rejection(e, db);
                if (refusal != null) {
                    rejected(refusal);
                    return;
                }
                tenure.failing(
                        LostReason.CONNECTION_LOST,
                        "no renewal reached the server before the local deadline (last: "
                                + Text.describe(e)
                                + ")");
                if (tenure.ours()) {
                    outage.failed(e);
                }
                drop();
                next = start + timing.retryEvery;
            }
        }
    }

    /** Whether a renewal still holds the connection (stop() gave up waiting for it). */
    boolean busy() {
        return thread != null && thread.isAlive() && !finished;
    }

    /** Stops renewing; a call hung on a frozen server ends at its bound (ttl/3 at most). */
    void stop() {
        synchronized (stopLock) {
            stopping = true;
            stopLock.notifyAll();
            long until = System.nanoTime() + timing.callTimeout + 1_000_000_000L;
            while (thread != null && thread != Thread.currentThread() && !finished) {
                long left = until - System.nanoTime();
                if (left <= 0) {
                    break;
                }
                try {
                    stopLock.wait(Math.max(1, left / 1_000_000));
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    break;
                }
            }
            if (thread != null && thread != Thread.currentThread() && !finished) {
                abandoned = true;
            }
        }
    }

    void drop() {
        if (db != null) {
            db.close();
            db = null;
        }
    }
}
