package io.github.leaderlock;

import java.sql.SQLException;
import java.util.concurrent.ThreadLocalRandom;
import java.util.function.BooleanSupplier;
import java.util.function.Consumer;
import org.postgresql.PGNotification;

/**
 * Tries until won or the timeout passes (null: for ever; zero: one try), on a connection of its own
 * that it makes again, with backoff, whenever it is lost: across server restarts and failovers
 * (PgJDBC's multi-host URLs and targetServerType choose the server). Only a refusal retrying cannot
 * change ends it early ({@link RejectedException}); when the timeout passes without the server
 * being reachable, {@link UnavailableException}.
 *
 * <p>It LISTENs on channel leaderlock: a notification that the key was released or expired is a
 * hint (any role can send one) that brings the next try forward, never to less than {@link
 * #HINT_FLOOR} after the start of the previous one. It polls besides (every second; ttl/2 when
 * notifications are seen to arrive; ttl/4 where no worker announces expiries, and then it calls
 * le_expire_lapsed() first).
 */
final class Campaign {
    /**
     * Notifications are hints, and any role may send them (docs/clients.md): a hint brings the next
     * try forward, but never to less than HINT_FLOOR after the start of the previous one; hints
     * that arrive meanwhile make that one try, and the first hint after a quiet period is acted on
     * at once. The same rule, and the same name, in every leaderlock client. Nanoseconds (10 ms).
     */
    static final long HINT_FLOOR = 10_000_000L;

    final Dsn dsn;
    final String dsnText;
    final String key;
    final String me;
    final Timing timing;
    final String value;
    final String named;
    final BooleanSupplier stop;
    final Consumer<String> refused;
    Db db;
    long lastTry = Long.MIN_VALUE / 2; // when the last try started (HINT_FLOOR)
    boolean slotsDiffer;
    boolean worker = true;
    boolean notifications;
    boolean expireLapsed;
    final Outage outage;
    Long giveUp;

    Campaign(
            Dsn dsn,
            String dsnText,
            String key,
            String me,
            Timing timing,
            String value,
            String named,
            BooleanSupplier stop,
            Consumer<String> refused) {
        this.dsn = dsn;
        this.dsnText = dsnText;
        this.key = key;
        this.me = me;
        this.timing = timing;
        this.value = value;
        this.named = named;
        this.stop = stop;
        this.refused = refused;
        this.outage = new Outage(key, "campaign");
    }

    /**
     * This campaign's connection, ready: LISTENing, and knowing whether notifications arrive and
     * whether a worker announces expiries.
     */
    Db session() throws SQLException {
        if (db == null) {
            long now = System.nanoTime();
            long bound = timing.connectBound();
            if (giveUp != null) { // not much past the timeout
                bound =
                        Math.min(
                                bound,
                                Math.max(
                                        giveUp - now,
                                        Math.max(timing.callTimeout, 2_000_000_000L)));
            }
            Db d = Db.connect(dsn, now + bound, named, Leaderlock.APPLICATION_NAME);
            db = d;
            long by = System.nanoTime() + Math.max(timing.callTimeout, 2_000_000_000L);
            worker = workerServes(d, by);
            expireLapsed = !worker;
            d.exec(by, Statements.LISTEN);
            notifications = probe(d, by);
        }
        return db;
    }

    static boolean workerServes(Db d, long by) throws SQLException {
        try {
            return d.bool(by, Statements.WORKER_SERVES);
        } catch (SQLException e) {
            if (!Errors.undefined(e)) {
                throw e;
            }
            return d.bool(by, Statements.WORKER_RUNS); // before 0.5.0
        }
    }

    /**
     * Whether a notification this session sends itself comes back (not behind transaction pooling).
     */
    static boolean probe(Db d, long by) throws SQLException {
        String token = Long.toHexString(ThreadLocalRandom.current().nextLong());
        d.exec(by, Statements.LISTEN_PROBE);
        d.send(by, Statements.NOTIFY_PROBE, token);
        long until = System.nanoTime() + 200_000_000L;
        while (System.nanoTime() < until) {
            for (PGNotification n :
                    d.notifications(Math.max(1, (until - System.nanoTime()) / 1_000_000))) {
                if (n.getName().equals("leaderlock_probe") && token.equals(n.getParameter())) {
                    return true;
                }
            }
        }
        return false;
    }

    /**
     * Before a try: sends again a release under this id that heard no answer (it may still arrive).
     * False while the tenure it ends is still held (its row was locked): no try yet.
     */
    static boolean releaseAgain(Db d, long by, String dsnText, String key, String id)
            throws SQLException {
        Unanswered.Pending p = Unanswered.pending(dsnText, key, id);
        if (p == null) {
            return true;
        }
        Object term = p.term() == null ? Db.NULL_BIGINT : p.term();
        if (!d.callNamed(by, Statements.RELEASE, key, id, term)) {
            try {
                if (d.bool(by, Statements.HOLDS, key, id, term, term)) {
                    return false;
                }
            } catch (SQLException e) {
                if (!Errors.undefined(e)) { // before 0.5.0: nothing to go by
                    throw e;
                }
            }
        }
        Unanswered.answered(dsnText, key, id, p.term());
        return true;
    }

    /** One try: the lease, or null. */
    Lease once() throws SQLException {
        Db d = session();
        lastTry = System.nanoTime();
        if (!releaseAgain(d, System.nanoTime() + timing.callTimeout, dsnText, key, me)) {
            return null;
        }
        if (expireLapsed) {
            try {
                d.one(System.nanoTime() + timing.callTimeout, Statements.EXPIRE_LAPSED);
            } catch (SQLException e) {
                if (Errors.transient_(e)) {
                    throw e;
                }
                // refused (or missing before 0.5.0): the try below takes a lapsed lease anyway;
                // it only goes unannounced
                expireLapsed = false;
            }
        }
        // the deadline counts from the moment the try is sent, and so does HINT_FLOOR (the calls
        // before it may have taken a while)
        long start = System.nanoTime();
        lastTry = start;
        long by = start + timing.callTimeout;
        boolean won;
        try {
            won = d.bool(by, Statements.TRY_ACQUIRE, key, me, timing.ttlSeconds());
        } catch (SQLException e) {
            if (!Errors.slotsDiffer(e)) {
                throw e;
            }
            // held with another number of slots: not ours now, a refusal
            if (!slotsDiffer) {
                slotsDiffer = true;
                Log.warn(
                        "key %s is held with another number of slots: not ours now; trying again until"
                                + " those tenures end (server: %s)",
                        Text.quote(key), Text.quote(Text.firstLine(e.getMessage())));
            }
            return null;
        }
        slotsDiffer = false;
        if (!won) {
            return null;
        }
        Object term = d.one(by, Statements.TERM_OF, key, me);
        if (term == null) {
            return null;
        }
        if (value != null) {
            d.one(by, Statements.PROCLAIM, key, me, value);
        }
        return new Lease(
                key,
                me,
                ((Number) term).longValue(),
                value,
                start + timing.ttl - timing.margin,
                d.schema);
    }

    /** Campaigns until won; see the class. */
    Lease run(Long timeoutNanos) {
        Long until = timeoutNanos == null ? null : System.nanoTime() + timeoutNanos;
        giveUp = until;
        while (true) {
            if (stop.getAsBoolean()) {
                throw new NotAcquiredException(key, null);
            }
            try {
                Lease lease = once();
                outage.ended();
                if (lease != null) {
                    Log.info(
                            "%s: leading as %s in term %d",
                            Text.quote(key), Text.quote(me), lease.term());
                    return lease;
                }
                long now = System.nanoTime();
                boolean out = until != null && now - until >= 0;
                if (refused != null || out) {
                    String holder =
                            (String) db.one(now + timing.callTimeout, Statements.LEADER, key);
                    if (refused != null) {
                        refused.accept(holder);
                    }
                    if (out) {
                        throw new NotAcquiredException(key, holder);
                    }
                }
                long left = timing.pollEvery(worker, notifications);
                if (until != null) {
                    left = Math.min(left, until - now);
                }
                waitForHint(left);
            } catch (SQLException | RejectedException e) {
                failed(e, until);
            }
        }
    }

    /**
     * After a failed call: a typed error when retrying cannot help, or when the timeout passed;
     * else the connection is dropped and, after a (jittered, growing, bounded) delay, the campaign
     * goes on.
     */
    private void failed(Exception e, Long until) {
        RejectedException refusal = Errors.rejection(e, db);
        drop();
        if (refusal != null) {
            Log.error("%s: %s", Text.quote(key), refusal.getMessage());
            throw refusal;
        }
        long delay = outage.failed(e);
        long now = System.nanoTime();
        if (until != null) {
            if (now - until >= 0) {
                throw new UnavailableException(
                        "leaderlock: "
                                + Text.quote(key)
                                + ": the server could not be reached before the timeout ("
                                + Text.describe(e)
                                + ")",
                        e);
            }
            delay = Math.min(delay, until - now);
        }
        sleep(delay);
    }

    /** Sleeps, looking at stop every 100 ms. */
    void sleep(long nanos) {
        long until = System.nanoTime() + nanos;
        while (!stop.getAsBoolean()) {
            long left = until - System.nanoTime();
            if (left <= 0) {
                return;
            }
            try {
                Thread.sleep(Math.max(1, Math.min(left, 100_000_000L) / 1_000_000));
            } catch (InterruptedException ie) {
                Thread.currentThread().interrupt();
                throw new NotAcquiredException(key, null);
            }
        }
    }

    /**
     * Until a notification says the key is free (but never sooner than HINT_FLOOR after the last
     * try started: hints heard meanwhile make one try), {@code nanos} pass, or stop (looked at
     * every 100 ms).
     */
    private void waitForHint(long nanos) throws SQLException {
        long until = System.nanoTime() + Math.max(nanos, 0);
        while (!stop.getAsBoolean()) {
            long left = until - System.nanoTime();
            if (left <= 0) {
                return;
            }
            if (Thread.interrupted()) {
                Thread.currentThread().interrupt();
                throw new NotAcquiredException(key, null);
            }
            for (PGNotification n :
                    db.notifications(Math.max(1, Math.min(left, 100_000_000L) / 1_000_000))) {
                if (frees(n.getParameter(), key)) {
                    until = Math.min(until, Math.max(System.nanoTime(), lastTry + HINT_FLOOR));
                }
            }
        }
    }

    /**
     * Whether a notification says {@code key} became vacant. A hint only: any role may notify on
     * the channel; the next try decides.
     */
    static boolean frees(String payload, String key) {
        Json.Value v;
        try {
            v = Json.parse(payload);
        } catch (IllegalArgumentException e) {
            return false;
        }
        if (!(v instanceof Json.Obj o)) {
            return false;
        }
        String event = o.string("event");
        return key.equals(o.string("key")) && ("released".equals(event) || "expired".equals(event));
    }

    /**
     * The connection, for the renewals (without the LISTEN), once won; null when it failed
     * meanwhile (the renewer makes a new one).
     */
    Db take() {
        Db d = db;
        db = null;
        if (d != null) {
            try {
                d.exec(System.nanoTime() + timing.callTimeout, Statements.UNLISTEN);
            } catch (SQLException e) {
                d.close();
                return null;
            }
        }
        return d;
    }

    void drop() {
        if (db != null) {
            db.close();
            db = null;
        }
    }

    /**
     * Interrupted by something else than its own outcome: a try in flight may have won, so release,
     * at most ttl/3 later.
     */
    void abort() {
        drop();
        try (Db d =
                Db.connect(
                        dsn,
                        System.nanoTime() + timing.callTimeout,
                        named,
                        Leaderlock.APPLICATION_NAME)) {
            d.callNamed(
                    System.nanoTime() + timing.callTimeout,
                    Statements.RELEASE,
                    key,
                    me,
                    Db.NULL_BIGINT);
        } catch (SQLException | RuntimeException e) {
            Unanswered.record(dsnText, key, me, null);
        }
    }
}
