package io.github.leaderlock.shedlock;

import io.github.leaderlock.Calls;
import io.github.leaderlock.LeaseLostException;
import io.github.leaderlock.LostReason;
import java.sql.Connection;
import java.time.Duration;
import java.util.Optional;
import net.javacrumbs.shedlock.core.AbstractSimpleLock;
import net.javacrumbs.shedlock.core.LockConfiguration;
import net.javacrumbs.shedlock.core.SimpleLock;

/**
 * A ShedLock lock held as a leaderlock lease: its key, the holder's id, the fencing term, and a
 * local deadline (the send time of the acquire, or of the last extension + lockAtMostFor -
 * lockAtMostFor/200, on System.nanoTime()'s clock: the server's expiry is later). The task reaches
 * it through {@link LeaderlockLockProvider#current()}.
 */
public final class LeaderlockLock extends AbstractSimpleLock {
    private final LeaderlockLockProvider provider;
    final LeaderlockLockProvider.Held held;
    private final String key;
    private final String id;
    private final long term;
    private final long deadline;
    private volatile LostReason ended;

    LeaderlockLock(
            LeaderlockLockProvider provider,
            LeaderlockLockProvider.Held held,
            LockConfiguration configuration,
            String key,
            String id,
            long term,
            long deadline) {
        super(configuration);
        this.provider = provider;
        this.held = held;
        this.key = key;
        this.id = id;
        this.term = term;
        this.deadline = deadline;
    }

    /** The lock's name (ShedLock's). */
    public String name() {
        return lockConfiguration.getName();
    }

    /** The lease's key: the name, after the provider's prefix. */
    public String key() {
        return key;
    }

    /** The holder's id: the provider's, and a number of this lock's. */
    public String id() {
        return id;
    }

    /**
     * The fencing token: above every earlier tenure's of the key. Pass it with each write to
     * systems that refuse an older one.
     */
    public long term() {
        return term;
    }

    /** The configuration it was locked (or extended) with. */
    public LockConfiguration configuration() {
        return lockConfiguration;
    }

    /**
     * Whether the task may still act under the lock, now: not unlocked, and its local deadline
     * (lockAtMostFor from the send of the acquire, less 1/200) not passed. Reads the clock.
     */
    public boolean isLocked() {
        return ended == null && System.nanoTime() - deadline < 0;
    }

    /** Throws {@link LeaseLostException} unless {@link #isLocked()}: call it before each step. */
    public void check() {
        if (ended != null) {
            throw new LeaseLostException("the lock of " + key, key, term, ended, null);
        }
        if (System.nanoTime() - deadline >= 0) {
            throw new LeaseLostException(
                    "the lock of " + key, key, term, LostReason.EXPIRED, "lockAtMostFor passed");
        }
    }

    /** The time left before the local deadline (zero once past, or unlocked). */
    public Duration remaining() {
        return isLocked() ? Duration.ofNanos(deadline - System.nanoTime()) : Duration.ZERO;
    }

    /**
     * Fences a write: le_assert_leader(key, id, term) on {@code conn}, inside the transaction of
     * the write ({@code conn.setAutoCommit(false)}; guard; write; commit): the write commits only
     * while this lock's tenure holds. {@link LeaseLostException} otherwise. Returns the term.
     */
    public long guard(Connection conn) {
        check();
        try {
            return Calls.assertLeader(conn, provider.schema(), key, id, term);
        } catch (LeaseLostException e) {
            ended = LostReason.NOT_LEADER;
            throw e;
        }
    }

    @Override
    protected void doUnlock() {
        ended = LostReason.RELEASED;
        provider.unlock(this);
    }

    @Override
    protected Optional<SimpleLock> doExtend(LockConfiguration next) {
        Optional<SimpleLock> longer = provider.extend(this, next);
        ended = longer.isPresent() ? LostReason.RESIGNED : LostReason.EXPIRED;
        return longer;
    }

    @Override
    public String toString() {
        return "LeaderlockLock["
                + key
                + " id="
                + id
                + " term="
                + term
                + (isLocked() ? " held" : " ended")
                + "]";
    }
}
