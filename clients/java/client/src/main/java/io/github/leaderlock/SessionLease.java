package io.github.leaderlock;

import java.sql.Connection;
import java.time.Duration;

/**
 * A key held under a {@link Session}: alive while its session is and it was not released. Its
 * {@link #check()} reads the clock against the session's local deadline, as a lease's does.
 */
public final class SessionLease {
    private final Session session;
    private final String key;
    private final long term;
    private volatile LostReason released;

    SessionLease(Session session, String key, long term) {
        this.session = session;
        this.key = key;
        this.term = term;
    }

    public String key() {
        return key;
    }

    /** The session's id: the holder of its keys. */
    public String id() {
        return session.id();
    }

    /** The fencing token of this key's tenure. */
    public long term() {
        return term;
    }

    /** The session it is held under. */
    public Session session() {
        return session;
    }

    /** Whether this process may still act as the key's holder, now: reads the clock. */
    public boolean isLeader() {
        return released == null && session.isAlive();
    }

    /**
     * Throws {@link LeaseLostException} unless the key is still held here by the local clock: the
     * session alive, the key not released nor found another's by a guard.
     */
    public void check() {
        session.check();
        LostReason r = released;
        if (r != null) {
            throw new LeaseLostException(
                    "the lease of " + Text.quote(key) + " under a session", key, term, r, null);
        }
    }

    /** The time left before the session's local deadline (zero once lost). */
    public Duration remaining() {
        return isLeader() ? session.remaining() : Duration.ZERO;
    }

    void lose(LostReason why) {
        if (released == null) {
            released = why;
        }
    }

    /**
     * Fences a write, as {@link Lease#guard(Connection)}: le_assert_leader(key, id, term) in the
     * caller's transaction. When the server says the key is another's (LE001) this lease is lost
     * (the session goes on).
     */
    public long guard(Connection conn) {
        check();
        return Lease.Guard.assertLeader(
                conn,
                session.schema(),
                key,
                id(),
                term,
                detail -> {
                    lose(LostReason.NOT_LEADER);
                    Log.warn(
                            "session %s: %s (term %d): not the holder: %s",
                            Text.quote(id()), Text.quote(key), term, detail);
                    return new LeaseLostException(
                            "the lease of " + Text.quote(key) + " under a session",
                            key,
                            term,
                            LostReason.NOT_LEADER,
                            detail);
                });
    }

    /** Releases this key alone (the session goes on); see {@link Session#release(String)}. */
    public void release() {
        session.release(key);
    }

    @Override
    public String toString() {
        return "SessionLease["
                + Text.quote(key)
                + " term="
                + term
                + (isLeader() ? " held" : " lost")
                + "]";
    }
}
