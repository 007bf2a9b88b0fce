package io.github.leaderlock;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;

/**
 * The leadership of a key, as {@link Leaderlock#lead} and an {@link Elector} hand it over.
 *
 * <p>Before each step a leader takes, call {@link #check()} (or read {@link #isLeader()}): both
 * compare System.nanoTime() with the local deadline at the moment they are called, so a process
 * resumed after a pause, or whose renewals failed, stops at the local deadline whatever any timer
 * or thread has done yet. The deadline is the instant the last successful acquire or renewal was
 * sent + ttl - ttl/200, on the monotonic clock: the server's expires_at is later. A thread renews
 * every ttl/3.
 *
 * <p>{@link #term()} is the fencing token; {@link #guard(Connection)} runs le_assert_leader(key,
 * id, term) in the caller's transaction, so the writes made in that transaction commit only while
 * this process leads. {@link #close()} ends the lease here and releases it (the follower leads
 * within milliseconds). Safe for use from several threads.
 */
public final class Lease implements AutoCloseable {
    private final String key;
    private final String id;
    private final long term;
    private final String value;
    final String schema;
    final Held tenure;
    private volatile Runnable closer;

    /** The tenure of a lease: its deadline, why it ended. */
    final class Held extends Tenure {
        Held(long deadline) {
            super(deadline);
        }

        @Override
        LeaseLostException lostException() {
            LostReason r = reason();
            return new LeaseLostException(
                    "the lease of " + Text.quote(key),
                    key,
                    term,
                    r == null ? LostReason.EXPIRED : r,
                    detail());
        }

        @Override
        void logEnd() {
            LostReason r = reason();
            String d = detail();
            String line =
                    String.format(
                            "%s: term %d ended: %s%s",
                            Text.quote(key), term, r.word(), d != null ? " (" + d + ")" : "");
            if (r == LostReason.RELEASED || r == LostReason.RESIGNED || r == LostReason.SHUTDOWN) {
                Log.info("%s", line);
            } else {
                Log.warn("%s", line);
            }
        }
    }

    Lease(String key, String id, long term, String value, long deadline, String schema) {
        this.key = key;
        this.id = id;
        this.term = term;
        this.value = value;
        this.schema = schema;
        this.tenure = new Held(deadline);
    }

    void onClose(Runnable closer) {
        this.closer = closer;
    }

    /** The key led. */
    public String key() {
        return key;
    }

    /** This process's id as the lease's holder. */
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

    /** The JSON value announced with this leadership (le_proclaim), or null. */
    public String value() {
        return value;
    }

    /** Whether this process may still act as leader, now: reads the clock. */
    public boolean isLeader() {
        return tenure.ours();
    }

    /**
     * Throws {@link LeaseLostException} unless the lease is still ours by the local clock: call it
     * before each step a leader takes.
     */
    public void check() {
        tenure.check();
    }

    /** The time left before the local deadline (zero once lost). */
    public Duration remaining() {
        return tenure.remaining();
    }

    /** The local deadline, on System.nanoTime()'s clock; renewals move it. */
    public long deadlineNanos() {
        return tenure.deadline();
    }

    /** Why the lease ended, or null while it lasts (read without the clock: see isLeader). */
    public LostReason lostReason() {
        return tenure.reason();
    }

    /**
     * Waits until the lease ends or {@code timeout} passes (instead of a sleep between steps):
     * whether it ended. A timer ends it at the deadline; after a pause of the process the timer may
     * be late, so guard the steps with {@link #check()}, not with this.
     */
    public boolean awaitLoss(Duration timeout) throws InterruptedException {
        return tenure.awaitLoss(timeout);
    }

    /**
     * Fences a write: runs le_assert_leader(key, id, term) on {@code conn}, inside the transaction
     * of the write it guards ({@code conn.setAutoCommit(false)}; guard; write; commit). The row of
     * the lease stays share-locked until that transaction ends, so no other holder can take over
     * before it commits: the write commits only while this process leads. {@link
     * LeaseLostException} (reason NOT_LEADER) when the server says otherwise, after which the
     * transaction can only be rolled back. Returns the term. {@code conn} is in the database of the
     * lease: the statement names leaderlock's schema there, whatever conn's search_path.
     */
    public long guard(Connection conn) {
        check();
        return Guard.assertLeader(
                conn,
                schema,
                key,
                id,
                term,
                detail -> {
                    tenure.end(LostReason.NOT_LEADER, detail);
                    return tenure.lostException();
                });
    }

    /**
     * Ends the lease here (every later check throws) and releases it on the server, within ttl/3:
     * the follower takes over at once. Closing again does nothing.
     */
    @Override
    public void close() {
        Runnable c = closer;
        closer = null;
        if (c != null) {
            c.run();
        } else {
            tenure.end(LostReason.RELEASED, null);
        }
    }

    @Override
    public String toString() {
        LostReason r = tenure.reason();
        return "Lease["
                + Text.quote(key)
                + " id="
                + Text.quote(id)
                + " term="
                + term
                + (r == null ? " held" : " lost: " + r.word())
                + "]";
    }

    /** The fencing statement, for every kind of lease. */
    static final class Guard {
        private Guard() {}

        static long assertLeader(
                Connection conn,
                String schema,
                String key,
                String id,
                long term,
                java.util.function.Function<String, LeaseLostException> notLeader) {
            return run(
                    conn,
                    schema,
                    Text.quote(key),
                    Statements.ASSERT_LEADER,
                    new Object[] {key, id, term},
                    notLeader);
        }

        /** {@code sql} (a guard that answers a term, or LE001) in the caller's transaction. */
        static long run(
                Connection conn,
                String schema,
                String what,
                String sql,
                Object[] args,
                java.util.function.Function<String, LeaseLostException> notLeader) {
            try {
                if (conn.getAutoCommit()) {
                    throw new LeaderlockException(
                            "leaderlock: guard must run inside the transaction of the write it fences"
                                    + " (conn.setAutoCommit(false)); in autocommit it would fence nothing");
                }
                String s = schema != null ? schema : Db.schemaOf(conn, Schemas.option(null));
                try (PreparedStatement st = conn.prepareStatement(Statements.bind(sql, s))) {
                    Db.bindAll(st, args);
                    try (ResultSet rs = st.executeQuery()) {
                        rs.next();
                        return rs.getLong(1);
                    }
                }
            } catch (SQLException e) {
                if (Errors.notLeader(e)) {
                    throw notLeader.apply(Text.firstLine(e.getMessage()));
                }
                RejectedException r = Errors.rejection(e, null);
                if (r != null) {
                    throw r;
                }
                throw new LeaderlockException(
                        "leaderlock: the guard of " + what + " failed: " + Text.describe(e), e);
            }
        }
    }
}
