package io.github.leaderlock;

import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.HashMap;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A session (contract 21, docs/sessions.md): one ttl that many keys share. A process opens one,
 * acquires its keys under it, and one thread renews the session every ttl/3 on a connection of its
 * own (le_renew_session: one row written however many keys). The guarantees are a lease's: a local
 * deadline on the monotonic clock (the send time of le_open_session or of the last successful
 * le_renew_session + ttl - ttl/200) that {@link #check()} and each {@link SessionLease#check()}
 * compare with the clock on every call; every call bounded by it. A renewal answered false, a
 * refusal for good, or no successful renewal before the deadline loses the session, and every key
 * held under it, for good: open a new one.
 *
 * <pre>{@code
 * try (Session s = Session.open(dsn, new SessionOptions().ttl(Duration.ofSeconds(10)))) {
 *     List<SessionLease> mine = new ArrayList<>();
 *     for (int n = 0; n < 64; n++) {
 *         s.tryAcquire("shard/" + n).ifPresent(mine::add);
 *     }
 *     while (true) {
 *         for (SessionLease lease : mine) {
 *             lease.check();                        // LeaseLostException past the session's deadline
 *             step(lease);
 *         }
 *         s.awaitLoss(Duration.ofSeconds(1));
 *     }
 * }
 * }</pre>
 *
 * Closing it ends every lease here first, then closes the session on the server (le_close_session:
 * every key vacated in one transaction, announced released). Safe for use from several threads.
 */
public final class Session implements AutoCloseable {
    /** Connections a session keeps for its acquisitions and releases (the renewal has its own). */
    static final int MAX_IDLE = 4;

    private final Dsn dsn;
    private final String id;
    private final String named;
    private final Timing timing;
    private final String handle;
    private final String schema;
    private final Life life;
    private final SessionRenewer renewer;
    private final AtomicLong renewals = new AtomicLong();
    private final Object lock = new Object();
    private final Deque<Db> idle = new ArrayDeque<>();
    private final Map<String, SessionLease> leases = new HashMap<>();

    /** Releases of a key that heard no answer, with the tenure's term. */
    private final Map<String, Long> unanswered = new HashMap<>();

    private boolean closed;
    private final CountDownLatch closedLatch = new CountDownLatch(1);
    private final Participant participant = new Participant();

    /** The session's life: its deadline, why it ended. */
    private final class Life extends Tenure {
        Life(long deadline) {
            super(deadline);
        }

        @Override
        LeaseLostException lostException() {
            LostReason r = reason();
            return new LeaseLostException(
                    "the session " + Text.quote(handle) + " of " + Text.quote(id),
                    id,
                    0,
                    r == null ? LostReason.EXPIRED : r,
                    detail());
        }

        @Override
        void logEnd() {
            LostReason r = reason();
            if (r == LostReason.RELEASED || r == LostReason.SHUTDOWN) {
                Log.info("session %s: ended: %s", Text.quote(id), r.word());
            } else {
                Log.warn(
                        "session %s: lost, with every key held under it: %s%s",
                        Text.quote(id), r.word(), detail() != null ? " (" + detail() + ")" : "");
            }
        }
    }

    private final class SessionRenewer extends Renewer {
        SessionRenewer(Db db) {
            super(
                    Session.this.dsn,
                    Session.this.named,
                    Leaderlock.APPLICATION_NAME,
                    db,
                    Session.this.life,
                    Session.this.timing,
                    "session renewals",
                    Session.this.id);
        }

        @Override
        boolean renewed(long by) throws SQLException {
            renewals.incrementAndGet();
            return db.bool(by, Statements.RENEW_SESSION, handle, Session.this.timing.ttlSeconds());
        }

        @Override
        boolean refused(long by) {
            // not live on the server (closed, ended, lapsed): every key is gone
            life.end(
                    LostReason.VACATED, "the server refused the session's renewal: it ended there");
            return false;
        }
    }

    private Session(
            Dsn dsn,
            String id,
            String named,
            Timing timing,
            String handle,
            String schema,
            long deadline,
            Db db) {
        this.dsn = dsn;
        this.id = id;
        this.named = named;
        this.timing = timing;
        this.handle = handle;
        this.schema = schema;
        this.life = new Life(deadline);
        this.renewer = new SessionRenewer(db);
    }

    /** {@link #open(String, SessionOptions)} with the default options. */
    public static Session open(String dsn) {
        return open(dsn, new SessionOptions());
    }

    /**
     * Opens a session (le_open_session) on a connection of its own and starts renewing it. {@link
     * BadArgumentException} for options this client refuses, before anything connects; {@link
     * RejectedException} when the server refuses; {@link UnavailableException} when it cannot be
     * reached within ttl/3 (5 s at least).
     */
    public static Session open(String dsn, SessionOptions options) {
        SessionOptions o = options.copy();
        Dsn d = Dsn.parse(dsn);
        String id = o.id != null ? Leaderlock.checkName("id", o.id) : Leaderlock.defaultId();
        Timing t = Timing.of(o.ttl, null);
        if (o.lockDelay.isNegative()) {
            throw new BadArgumentException("leaderlock: lock_delay must not be negative");
        }
        String named = Schemas.option(o.schema);
        Db db = null;
        try {
            db =
                    Db.connect(
                            d,
                            System.nanoTime() + t.connectBound(),
                            named,
                            Leaderlock.APPLICATION_NAME);
            long start = System.nanoTime();
            String handle =
                    (String)
                            db.one(
                                    start + t.connectBound(),
                                    Statements.OPEN_SESSION,
                                    id,
                                    t.ttlSeconds(),
                                    o.lockDelay.toNanos() / 1e9,
                                    o.keepValues);
            Session s =
                    new Session(d, id, named, t, handle, db.schema, start + t.ttl - t.margin, db);
            Shutdown.register(s.participant);
            s.life.watch();
            s.renewer.start("leaderlock-session " + id);
            Log.info("session %s: opened %s", Text.quote(id), handle);
            return s;
        } catch (SQLException e) {
            RejectedException r = Errors.rejection(e, db);
            if (db != null) {
                db.close();
            }
            if (r != null) {
                throw r;
            }
            throw new UnavailableException(
                    "leaderlock: could not open a session: " + Text.describe(e), e);
        } catch (RuntimeException e) {
            if (db != null) {
                db.close();
            }
            throw e;
        }
    }

    /** The session's uuid (leaderlock_sessions.session). */
    public String handle() {
        return handle;
    }

    /** The holder of the session's keys. */
    public String id() {
        return id;
    }

    String schema() {
        return schema;
    }

    /** le_renew_session calls sent (for tests and metrics). */
    public long renewals() {
        return renewals.get();
    }

    /** Whether the session is live by the local clock, now. */
    public boolean isAlive() {
        return life.ours();
    }

    /** Throws {@link LeaseLostException} unless the session is live by the local clock. */
    public void check() {
        life.check();
    }

    /** The time left before the local deadline (zero once lost). */
    public Duration remaining() {
        return life.remaining();
    }

    /** The local deadline, on System.nanoTime()'s clock. */
    public long deadlineNanos() {
        return life.deadline();
    }

    /** Why the session ended, or null while it lasts. */
    public LostReason lostReason() {
        return life.reason();
    }

    /** Waits until the session ends or {@code timeout} passes: whether it ended. */
    public boolean awaitLoss(Duration timeout) throws InterruptedException {
        return life.awaitLoss(timeout);
    }

    /**
     * Tries once to acquire {@code key} under the session (le_try_acquire_in): its lease, or empty
     * when another holds it. A lost or closed session throws {@link LeaseLostException}; other
     * {@link RejectedException} are refusals for good; {@link UnavailableException}: not reached
     * (the key is not held then).
     */
    public Optional<SessionLease> tryAcquire(String key) {
        return Optional.ofNullable(acquireOnce(key, null));
    }

    /**
     * Waits up to {@code wait} for {@code key} (le_acquire_in, woken by the server when it is
     * freed): its lease, or {@link NotAcquiredException} when {@code wait} passed; otherwise as
     * {@link #tryAcquire}. The server caps the wait (leaderlock.max_wait, 5 minutes by default).
     */
    public SessionLease acquire(String key, Duration wait) {
        if (wait == null || wait.isNegative()) {
            throw new BadArgumentException("leaderlock: wait must not be negative");
        }
        SessionLease l = acquireOnce(key, wait);
        if (l == null) {
            throw new NotAcquiredException(key, null);
        }
        return l;
    }

    private SessionLease acquireOnce(String key, Duration wait) {
        Leaderlock.checkName("key", key);
        check();
        long extra = wait == null ? 0 : wait.toNanos();
        Db db = null;
        try {
            db = take(System.nanoTime() + timing.connectBound());
            // the calls' bound counts once connected
            long until = System.nanoTime() + timing.callTimeout + extra;
            if (!releaseAgain(db, until, key)) {
                give(db, true);
                return null;
            }
            long[] term = acquireIn(db, until, key, wait);
            give(db, true);
            if (term == null) {
                return null;
            }
            synchronized (lock) {
                check(); // lost meanwhile: so is the key
                SessionLease held = leases.get(key);
                if (held != null && held.term() == term[0] && held.isLeader()) {
                    return held; // held already: the same tenure
                }
                SessionLease l = new SessionLease(this, key, term[0]);
                leases.put(key, l);
                return l;
            }
        } catch (SQLException e) {
            RejectedException r = Errors.rejection(e, db);
            if (db != null) {
                give(db, false);
            }
            check();
            if (r != null) {
                throw r;
            }
            throw new UnavailableException(
                    "leaderlock: session "
                            + Text.quote(id)
                            + ": acquiring "
                            + Text.quote(key)
                            + ": "
                            + Text.describe(e),
                    e);
        }
    }

    /**
     * Acquires key in a transaction that reads its term right after (the row locked by the
     * acquisition until commit): its term, or null. A commit that heard no answer may have taken
     * the key: its release is sent (and recorded, if unanswered) before the error.
     */
    private long[] acquireIn(Db db, long until, String key, Duration wait) throws SQLException {
        db.conn.setAutoCommit(false); // le_acquire_in waits in READ COMMITTED only
        boolean held = false;
        long term = 0;
        try {
            db.exec(until, Statements.READ_COMMITTED);
            if (wait == null) {
                held = db.bool(until, Statements.TRY_ACQUIRE_IN, handle, key);
            } else {
                held = db.bool(until, Statements.ACQUIRE_IN, handle, key, wait.toNanos() / 1e9);
            }
            if (held) {
                Object t = db.one(until, Statements.SESSION_TERM, key, id, handle);
                if (t == null) {
                    held = false;
                } else {
                    term = ((Number) t).longValue();
                }
            }
        } catch (SQLException e) {
            try {
                db.conn.rollback();
                db.conn.setAutoCommit(true);
            } catch (SQLException ignored) {
                // the connection is dropped
            }
            throw e;
        }
        try {
            db.conn.commit();
            db.conn.setAutoCommit(true);
        } catch (SQLException e) {
            if (held) { // it may have committed
                releaseAfterUnansweredCommit(key, term);
            }
            throw e;
        }
        return held ? new long[] {term} : null;
    }

    /**
     * Gives up {@code key} (le_release(key, id, term) with the tenure's term): its lease is lost
     * here first, then released on the server; the session goes on. Nothing happens when the key is
     * not held under this session. A release that heard no answer is sent again, and answered,
     * before the key is acquired again: then {@link UnavailableException}.
     */
    public void release(String key) {
        Leaderlock.checkName("key", key);
        Long term;
        boolean isClosed;
        synchronized (lock) {
            SessionLease l = leases.remove(key);
            term = unanswered.get(key);
            isClosed = closed;
            if (l != null) {
                l.lose(LostReason.RELEASED);
                term = l.term();
            }
        }
        if (term == null || isClosed) { // nothing held; or closed: every key released
            return;
        }
        Db db = null;
        try {
            db = take(System.nanoTime() + timing.connectBound());
            long until = System.nanoTime() + timing.callTimeout;
            db.bool(until, Statements.RELEASE, key, id, term);
            give(db, true);
            synchronized (lock) {
                if (term.equals(unanswered.get(key))) {
                    unanswered.remove(key);
                }
            }
        } catch (SQLException | RuntimeException e) {
            if (db != null) {
                give(db, false);
            }
            synchronized (lock) {
                unanswered.put(key, term);
            }
            Log.warn(
                    "session %s: the release of %s (term %d) heard no answer (%s): sent again before the"
                            + " key is acquired again",
                    Text.quote(id), Text.quote(key), term, Text.describe(e));
            RejectedException r = e instanceof SQLException s ? Errors.rejection(s, db) : null;
            if (r != null) {
                throw r;
            }
            throw new UnavailableException(
                    "leaderlock: the release of " + Text.quote(key) + " heard no answer", e);
        }
    }

    /**
     * As if a release of {@code key}'s tenure {@code term} had heard no answer: it is sent again,
     * and answered, before the key is acquired again (the tour reaches the statements of that path
     * with it).
     */
    void releaseUnanswered(String key, long term) {
        synchronized (lock) {
            SessionLease l = leases.remove(key);
            if (l != null) {
                l.lose(LostReason.RELEASED);
            }
            unanswered.put(key, term);
        }
    }

    /**
     * After an acquisition whose commit heard no answer: release the tenure it may have started.
     */
    private void releaseAfterUnansweredCommit(String key, long term) {
        synchronized (lock) {
            unanswered.put(key, term);
        }
        long until = System.nanoTime() + timing.callTimeout;
        try (Db db = Db.connect(dsn, until, named, Leaderlock.APPLICATION_NAME)) {
            db.bool(until, Statements.RELEASE, key, id, term);
            synchronized (lock) {
                if (Long.valueOf(term).equals(unanswered.get(key))) {
                    unanswered.remove(key);
                }
            }
        } catch (SQLException | RuntimeException e) {
            // sent again before the key is acquired again
        }
    }

    /**
     * Sends again the release of key that heard no answer, if any. False while the tenure it ends
     * is still held (its row was locked): no try yet.
     */
    private boolean releaseAgain(Db db, long until, String key) throws SQLException {
        Long term;
        synchronized (lock) {
            term = unanswered.get(key);
        }
        if (term == null) {
            return true;
        }
        if (!db.bool(until, Statements.RELEASE, key, id, term)
                && db.bool(until, Statements.HOLDS, key, id, term, term)) {
            return false;
        }
        synchronized (lock) {
            if (term.equals(unanswered.get(key))) {
                unanswered.remove(key);
            }
        }
        return true;
    }

    /** An idle connection of the session's, or a new one. */
    private Db take(long until) throws SQLException {
        synchronized (lock) {
            while (!idle.isEmpty()) {
                Db d = idle.pop();
                if (!d.isClosed()) {
                    return d;
                }
            }
        }
        return Db.connect(
                dsn,
                Math.max(until, System.nanoTime() + 2_000_000_000L),
                named,
                Leaderlock.APPLICATION_NAME);
    }

    /** Keeps db for the next call unless the call failed or the session is closed. */
    private void give(Db db, boolean ok) {
        synchronized (lock) {
            if (ok && !db.isClosed() && !closed && idle.size() < MAX_IDLE) {
                idle.push(db);
                return;
            }
        }
        db.close();
    }

    /**
     * Ends the session: the session and every lease are lost here first (check() throws), the
     * renewal stops, then le_close_session releases every key at once, in one transaction (each
     * announced released, waiters woken), within ttl/3. A close that does not reach the server
     * leaves the keys to lapse with the session's ttl (logged). Closing again does nothing.
     */
    @Override
    public void close() {
        synchronized (lock) {
            if (closed) {
                return;
            }
            closed = true;
        }
        try {
            life.end(LostReason.RELEASED, "closed");
            renewer.stop();
            if (!renewer.busy()) {
                renewer.drop();
            }
            Db db = null;
            synchronized (lock) {
                for (Db d : idle) {
                    if (db == null && !d.isClosed()) {
                        db = d;
                    } else {
                        d.close();
                    }
                }
                idle.clear();
            }
            try {
                if (db == null) {
                    db =
                            Db.connect(
                                    dsn,
                                    System.nanoTime() + timing.connectBound(),
                                    named,
                                    Leaderlock.APPLICATION_NAME);
                }
                db.bool(System.nanoTime() + timing.callTimeout, Statements.CLOSE_SESSION, handle);
                Log.info("session %s: closed", Text.quote(id));
            } catch (SQLException | RuntimeException e) {
                Log.warn(
                        "session %s: the close heard no answer (%s): its keys are vacated when it lapses",
                        Text.quote(id), Text.describe(e));
            } finally {
                if (db != null) {
                    db.close();
                }
            }
        } finally {
            Shutdown.unregister(participant);
            closedLatch.countDown();
        }
    }

    private final class Participant implements Shutdown.Participant {
        @Override
        public void beginShutdown() {
            life.end(LostReason.SHUTDOWN, "the process is shutting down");
        }

        @Override
        public void finishShutdown() {
            // the owner's close, until the deadline; then closed here
            try {
                closedLatch.await(
                        Math.max(0, life.deadline() - System.nanoTime()), TimeUnit.NANOSECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            close();
        }
    }
}
