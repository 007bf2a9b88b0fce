package io.github.leaderlock;

import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;

/**
 * What a lease, a session and a scheduled run share: a local deadline on the monotonic clock
 * (System.nanoTime: the instant the last successful call was sent + ttl - ttl/200), read at each
 * question, and why it ended. Every question ({@link #ours()}, {@link #check()}) compares the clock
 * with the deadline when it is asked, so a process paused past it (SIGSTOP, a frozen VM, a long GC)
 * takes no further step, whatever any timer or thread has done yet. A watchdog also ends it at the
 * deadline, for those who wait on {@link #awaitLoss}.
 */
abstract class Tenure {
    /** The watchdogs' thread: it only marks tenures ended at their deadline. */
    private static final ScheduledExecutorService WATCHDOG =
            Executors.newSingleThreadScheduledExecutor(
                    r -> {
                        Thread t = new Thread(r, "leaderlock-watchdog");
                        t.setDaemon(true);
                        return t;
                    });

    private final Object lock = new Object();
    private long deadline;
    private LostReason reason;
    private String detail;
    private LostReason lateReason;
    private String lateDetail;
    private final CountDownLatch lost = new CountDownLatch(1);
    private ScheduledFuture<?> watchdog;

    Tenure(long deadline) {
        this.deadline = deadline;
    }

    /** Starts the watchdog: called once the tenure is made (not from its constructor). */
    final void watch() {
        arm();
    }

    private void arm() {
        synchronized (lock) {
            if (watchdog != null) {
                watchdog.cancel(false);
            }
            if (reason == null) {
                watchdog =
                        WATCHDOG.schedule(
                                this::expireIfDue,
                                Math.max(0, deadline - System.nanoTime()),
                                TimeUnit.NANOSECONDS);
            }
        }
    }

    private void expireIfDue() {
        boolean ended;
        boolean early;
        synchronized (lock) {
            ended = expireLocked();
            early = reason == null;
        }
        if (ended) {
            logEnd();
        } else if (early) {
            arm(); // moved meanwhile
        }
    }

    /** The local deadline (System.nanoTime()); renewals move it. */
    final long deadline() {
        synchronized (lock) {
            return deadline;
        }
    }

    /** Whether this process may still act, now (reads the clock). */
    final boolean ours() {
        boolean ended;
        boolean ours;
        synchronized (lock) {
            ended = expireLocked();
            ours = reason == null;
        }
        if (ended) {
            logEnd();
        }
        return ours;
    }

    /** Throws the loss unless still ours by the local clock. */
    final void check() {
        if (!ours()) {
            throw lostException();
        }
    }

    /** The time left before the local deadline (zero once lost). */
    final Duration remaining() {
        if (!ours()) {
            return Duration.ZERO;
        }
        return Duration.ofNanos(Math.max(0, deadline() - System.nanoTime()));
    }

    /** Why it ended (null while it lasts; does not read the clock). */
    final LostReason reason() {
        synchronized (lock) {
            return reason;
        }
    }

    final String detail() {
        synchronized (lock) {
            return detail;
        }
    }

    /** Waits until it ends, or {@code timeout} passes: whether it ended. */
    final boolean awaitLoss(Duration timeout) throws InterruptedException {
        if (!ours()) {
            return true;
        }
        long nanos = timeout.toNanos();
        return lost.await(nanos, TimeUnit.NANOSECONDS) || !ours();
    }

    /**
     * A renewal sent at {@code newDeadline - ttl + margin} succeeded: moves the deadline. False
     * (nothing moves) once it ended or its deadline passed: a loss is final.
     */
    final boolean extend(long newDeadline) {
        boolean ended;
        boolean extended;
        synchronized (lock) {
            ended = expireLocked();
            extended = reason == null;
            if (extended) {
                deadline = Math.max(deadline, newDeadline);
                lateReason = null;
                lateDetail = null;
            }
        }
        if (ended) {
            logEnd();
        }
        if (extended) {
            arm();
        }
        return extended;
    }

    /** Renewals fail: what the deadline will be put down to. */
    final void failing(LostReason why, String what) {
        synchronized (lock) {
            lateReason = why;
            lateDetail = what;
        }
    }

    /** Ends it (the first reason stays). Whether it was alive. */
    final boolean end(LostReason why, String what) {
        boolean wasAlive;
        synchronized (lock) {
            wasAlive = reason == null;
            if (wasAlive) {
                reason = why;
                detail = what;
                if (watchdog != null) {
                    watchdog.cancel(false);
                }
            }
        }
        lost.countDown();
        if (wasAlive) {
            logEnd();
        }
        return wasAlive;
    }

    private boolean expireLocked() {
        if (reason == null && System.nanoTime() - deadline >= 0) {
            if (lateReason != null) {
                reason = lateReason;
                detail = lateDetail;
            } else {
                reason = LostReason.EXPIRED;
                detail = "no renewal succeeded before the local deadline";
            }
            lost.countDown();
            return true;
        }
        return false;
    }

    /** The exception its questions throw once it ended. */
    abstract LeaseLostException lostException();

    /** Logged once, when it ends. */
    abstract void logEnd();
}
