package io.github.leaderlock;

import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;

/**
 * A due run this replica claimed, handed to the job's function. Act for it only while {@link
 * #isOurs()}: call {@link #check()} right before each side effect. Both compare System.nanoTime()
 * with the local deadline (the instant the claim or its last successful renewal was sent + ttl -
 * ttl/200) when called: a process paused past it takes no further step. A thread renews every
 * ttl/3; a refused renewal (the run was claimed again, or its claim lapsed on the server) ends it
 * at once.
 */
public final class ScheduledRun {
    /** Due instants as logs and the other clients write them: UTC, microseconds. */
    static final DateTimeFormatter DUE =
            DateTimeFormatter.ofPattern("yyyy-MM-dd'T'HH:mm:ss.SSSSSS'Z'").withZone(ZoneOffset.UTC);

    private final String job;
    private final String id;
    private final Instant due;
    private final long term;
    final Claim claim;

    /** The claim's life: its deadline, why it ended. */
    final class Claim extends Tenure {
        Claim(long deadline) {
            super(deadline);
        }

        @Override
        LeaseLostException lostException() {
            LostReason r = reason();
            return new LeaseLostException(
                    "the run of " + Text.quote(job) + " due " + DUE.format(due),
                    job,
                    term,
                    r == null ? LostReason.EXPIRED : r,
                    detail());
        }

        @Override
        void logEnd() {
            LostReason r = reason();
            if (r != LostReason.RELEASED && r != LostReason.RESIGNED) {
                Log.warn(
                        "%s: the run due %s (term %d) is lost: %s%s",
                        Text.quote(job),
                        DUE.format(due),
                        term,
                        r.word(),
                        detail() != null ? " (" + detail() + ")" : "");
            }
        }
    }

    ScheduledRun(String job, String id, Instant due, long term, long deadline) {
        this.job = job;
        this.id = id;
        this.due = due;
        this.term = term;
        this.claim = new Claim(deadline);
    }

    public String job() {
        return job;
    }

    /** This replica's id. */
    public String id() {
        return id;
    }

    /** The run's due instant, on the server's lease clock. */
    public Instant due() {
        return due;
    }

    /**
     * The claim's fencing term: above every earlier claim of any run of the job. Pass it with each
     * side effect to systems that refuse lower ones.
     */
    public long term() {
        return term;
    }

    /** Whether this replica may still act for the run, now: reads the clock. */
    public boolean isOurs() {
        return claim.ours();
    }

    /** Throws {@link LeaseLostException} unless {@link #isOurs()}. */
    public void check() {
        claim.check();
    }

    /** The time left before the local deadline (zero once lost). */
    public Duration remaining() {
        return claim.remaining();
    }

    /** The local deadline, on System.nanoTime()'s clock. */
    public long deadlineNanos() {
        return claim.deadline();
    }

    /** Why the run stopped being ours, or null. */
    public LostReason lostReason() {
        return claim.reason();
    }

    /** Waits until the run is lost or {@code timeout} passes: whether it was lost. */
    public boolean awaitLoss(Duration timeout) throws InterruptedException {
        return claim.awaitLoss(timeout);
    }

    @Override
    public String toString() {
        return "ScheduledRun["
                + Text.quote(job)
                + " due "
                + DUE.format(due)
                + " term="
                + term
                + "]";
    }
}
