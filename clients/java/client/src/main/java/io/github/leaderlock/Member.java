package io.github.leaderlock;

import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.OptionalLong;
import java.util.Queue;
import java.util.Set;
import java.util.SortedMap;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.postgresql.PGNotification;

/**
 * A member of a group (contract 26, docs/groups.md): its share of the group's partitions, which the
 * server assigns. A thread joins (le_join: the first join makes the group, every later one renews
 * the membership) every ttl/3, then reads the assignment (le_assignment), on a connection of its
 * own. Every partition owned has the local deadline of the last round whose assignment was read:
 * the instant its join was sent + ttl - ttl/200 (System.nanoTime), which {@link #owns} compares
 * with the clock at each call; every call is bounded by it.
 *
 * <pre>{@code
 * try (Member m = Leaderlock.member(dsn, MemberOptions.of("orders").partitions(64)
 *         .onAssigned((partition, term) -> start(partition, term))
 *         .onRevoked(partition -> stopAndDrain(partition)))) {
 *     // before each side effect on a partition: m.owns(partition), its term or empty;
 *     // writes fenced by m.guard(conn, partition) in their transaction
 * }
 * }</pre>
 *
 * <p>A partition the server revokes goes to {@code onRevoked}, then is given back (le_ack) once it
 * returned: its next owner gets it at once. One gone from the assignment, or owned past the
 * deadline, goes to {@code onRevoked} at once, and is not given back (it is not ours to give).
 * Callbacks run one at a time, in order, in a thread of their own: a long drain delays no renewal.
 * A notification naming this member (a grant, a revocation) brings the next round sooner, at most
 * once per max(ttl/30, 50 ms). {@link #close()} hands every partition to {@code onRevoked}, then
 * leaves (le_leave: they go to the others at once).
 */
public final class Member implements AutoCloseable {
    /** Called when a partition becomes this member's. */
    @FunctionalInterface
    public interface OnAssigned {
        void assigned(int partition, long term) throws Exception;
    }

    /** Called when a partition stops being this member's: stop, drain, then return. */
    @FunctionalInterface
    public interface OnRevoked {
        void revoked(int partition) throws Exception;
    }

    /** The member's life: never past a deadline of its own (its partitions have theirs). */
    private static final long FOREVER = Long.MAX_VALUE / 4;

    /** The longest a drained partition waits to be given back (nanoseconds). */
    private static final long ACK_POLL = 50_000_000L;

    private record Grant(int partition, long term) {}

    private enum Kind {
        ASSIGNED,
        REVOKED,
        LOST,
        CLOSE
    }

    private record Event(Kind kind, int partition, long term) {}

    private interface Call {
        void run() throws Exception;
    }

    private final Dsn dsn;
    private final String named;
    private final String group;
    private final String me;
    private final Timing timing;
    private final Object partitions;
    private final Object drain;
    private final OnAssigned onAssigned;
    private final OnRevoked onRevoked;
    private final long soonest;
    private final Life life = new Life();
    private final Rounds rounds;
    private final Callbacks callbacks = new Callbacks();
    private final AtomicLong roundsSent = new AtomicLong();
    private final Queue<Grant> drained = new ConcurrentLinkedQueue<>();
    private final CountDownLatch closedLatch = new CountDownLatch(1);
    private final Participant participant = new Participant();
    private volatile String schema;
    private volatile RejectedException error;

    private final Object lock = new Object();
    // Under lock: what the last rounds said is ours, until when; revocations being drained.
    private final TreeMap<Integer, Long> owned = new TreeMap<>();
    private long deadline;
    private boolean dated;
    private final Set<Grant> revoking = new HashSet<>();
    private boolean closed;

    private Member(Dsn dsn, String named, String me, Timing timing, MemberOptions o) {
        this.dsn = dsn;
        this.named = named;
        this.group = o.group;
        this.me = me;
        this.timing = timing;
        this.partitions = o.partitions == null ? Db.NULL_INT : o.partitions;
        this.drain = o.drain == null ? Db.NULL_DOUBLE : (Object) (o.drain.toNanos() / 1e9);
        this.onAssigned = o.onAssigned;
        this.onRevoked = o.onRevoked;
        this.soonest = Math.max(timing.ttl / 30, 50_000_000L);
        this.rounds = new Rounds();
    }

    /**
     * Joins once in the caller's thread (a refusal comes out here: {@link RejectedException}; the
     * server out of reach: {@link UnavailableException}), then goes on in a thread of its own.
     */
    static Member start(String dsnText, MemberOptions options) {
        MemberOptions o = options.copy();
        Dsn d = Dsn.parse(dsnText);
        Leaderlock.checkName("group", o.group);
        String me = o.member != null ? Leaderlock.checkName("member", o.member) : null;
        Timing t = Timing.of(o.ttl, null);
        if (o.partitions != null && o.partitions < 1) {
            throw new BadArgumentException("leaderlock: partitions must be at least 1");
        }
        if (o.drain != null && o.drain.isNegative()) {
            throw new BadArgumentException("leaderlock: drain must not be negative");
        }
        String named = Schemas.option(o.schema);
        Member m = new Member(d, named, me != null ? me : Leaderlock.defaultId(), t, o);
        m.callbacks.start();
        try {
            long start = System.nanoTime();
            m.rounds.db = m.rounds.connect(start + t.connectBound());
            m.round(System.nanoTime() + t.callTimeout);
        } catch (SQLException | RuntimeException e) {
            RejectedException r = Errors.rejection(e, m.rounds.db);
            m.rounds.drop();
            m.life.end(LostReason.RELEASED, "not started");
            m.loseAll();
            m.callbacks.finish(null);
            if (r != null) {
                throw r;
            }
            if (e instanceof LeaderlockException l) {
                throw l;
            }
            throw new UnavailableException(
                    "leaderlock: could not join group "
                            + Text.quote(m.group)
                            + ": "
                            + Text.describe(e),
                    e);
        }
        Shutdown.register(m.participant);
        m.rounds.start("leaderlock-member " + m.me);
        Log.info("group %s: member %s joined", Text.quote(m.group), Text.quote(m.me));
        return m;
    }

    /** The group's name. */
    public String group() {
        return group;
    }

    /** This member's name in the group. */
    public String id() {
        return me;
    }

    /**
     * The term {@code partition} is owned in, or empty: not ours, revoked, or the local deadline
     * has passed (the clock is read now). Ask right before every side effect on it.
     */
    public OptionalLong owns(int partition) {
        synchronized (lock) {
            Long t = live() ? owned.get(partition) : null;
            return t == null ? OptionalLong.empty() : OptionalLong.of(t);
        }
    }

    /** Every partition owned now (partition to term), as {@link #owns} says. */
    public SortedMap<Integer, Long> owned() {
        synchronized (lock) {
            return live()
                    ? Collections.unmodifiableSortedMap(new TreeMap<>(owned))
                    : Collections.emptySortedMap();
        }
    }

    /** The time left before the local deadline (zero when nothing is owned). */
    public Duration remaining() {
        synchronized (lock) {
            return live() && !owned.isEmpty()
                    ? Duration.ofNanos(deadline - System.nanoTime())
                    : Duration.ZERO;
        }
    }

    /** Rounds sent (le_join then le_assignment), for tests and metrics. */
    public long rounds() {
        return roundsSent.get();
    }

    /** The refusal that stopped the member (every partition lost before), or null. */
    public RejectedException error() {
        return error;
    }

    /** Under lock: whether the deadline of what is owned has not passed. */
    private boolean live() {
        return dated && System.nanoTime() - deadline < 0;
    }

    /**
     * Fences a write, in the caller's transaction on {@code conn} (not autocommit):
     * le_assert_partition, which refuses (LE001) unless this member owns {@code partition} in its
     * term now, and holds it so until the transaction ends. The term. {@link LeaseLostException}
     * (the key: group/partition) without a call when it is not ours here (EXPIRED past the
     * deadline, else NOT_LEADER), or NOT_LEADER when the server refuses: the partition is then lost
     * here too ({@code onRevoked}, not given back). Roll back after it.
     */
    public long guard(Connection conn, int partition) {
        String key = group + "/" + partition;
        String what = "partition " + partition + " of group " + Text.quote(group);
        OptionalLong held = owns(partition);
        if (held.isEmpty()) {
            boolean expired;
            synchronized (lock) {
                expired = owned.containsKey(partition);
            }
            throw new LeaseLostException(
                    what,
                    key,
                    0,
                    expired ? LostReason.EXPIRED : LostReason.NOT_LEADER,
                    "not this member's now");
        }
        long term = held.getAsLong();
        return Lease.Guard.run(
                conn,
                schema,
                what,
                Statements.ASSERT_PARTITION,
                new Object[] {group, partition, me, term},
                detail -> {
                    synchronized (lock) {
                        if (owned.remove(partition, term)) {
                            callbacks.add(Kind.LOST, partition, term);
                        }
                    }
                    Log.warn("%s (term %d): not this member's: %s", what, term, detail);
                    return new LeaseLostException(what, key, term, LostReason.NOT_LEADER, detail);
                });
    }

    /**
     * Stops owning at once ({@link #owns} is empty from the call on), stops the rounds, hands every
     * partition to {@code onRevoked} and waits for each to return, then leaves the group (le_leave:
     * its partitions go to the others at once; within ttl/3, else they go when the membership
     * lapses). Closing again does nothing.
     */
    @Override
    public void close() {
        finish(null);
    }

    /** close(), waiting at most {@code bound} nanoseconds for the callbacks (null: for ever). */
    private void finish(Long bound) {
        synchronized (lock) {
            if (closed) {
                return;
            }
            closed = true;
        }
        try {
            life.end(LostReason.RELEASED, "closed");
            loseAll();
            rounds.stop();
            callbacks.finish(bound);
            leave();
        } finally {
            Shutdown.unregister(participant);
            closedLatch.countDown();
        }
    }

    private void leave() {
        Db db = null;
        if (!rounds.busy()) { // else its call still holds the connection
            db = rounds.db;
            rounds.db = null;
        }
        try {
            if (db == null || db.isClosed()) {
                db =
                        Db.connect(
                                dsn,
                                System.nanoTime() + timing.connectBound(),
                                named,
                                Leaderlock.APPLICATION_NAME);
            }
            boolean known =
                    db.bool(
                            System.nanoTime() + timing.callTimeout,
                            Statements.GROUP_LEAVE,
                            group,
                            me);
            Log.info(
                    "group %s: member %s left%s",
                    Text.quote(group), Text.quote(me), known ? "" : " (unknown there)");
        } catch (SQLException | RuntimeException e) {
            Log.warn(
                    "group %s: member %s could not leave (%s): its partitions move when its membership lapses",
                    Text.quote(group), Text.quote(me), Text.describe(e));
        } finally {
            if (db != null) {
                db.close();
            }
        }
    }

    /** Every partition lost at once (closed, refused, shutting down). */
    private void loseAll() {
        synchronized (lock) {
            for (Map.Entry<Integer, Long> e : owned.entrySet()) {
                callbacks.add(Kind.LOST, e.getKey(), e.getValue());
            }
            owned.clear();
            dated = false;
        }
    }

    /** Under lock: past the deadline, every partition is lost (told once). */
    private void loseIfPast() {
        if (!owned.isEmpty() && dated && System.nanoTime() - deadline >= 0) {
            Log.warn(
                    "group %s: member %s: no round was answered before the local deadline: %d partitions lost",
                    Text.quote(group), Text.quote(me), owned.size());
            loseAll();
        }
    }

    /** Join (renew), read the assignment, tell what changed, give back what runs nowhere here. */
    private void round(long by) throws SQLException {
        Db db = rounds.db;
        long sent = System.nanoTime();
        rounds.lastRound = sent;
        roundsSent.incrementAndGet();
        db.one(by, Statements.GROUP_JOIN, group, me, timing.ttlSeconds(), partitions, drain);
        Map<Integer, Long> mine = new TreeMap<>();
        Map<Integer, Long> revoked = new TreeMap<>();
        for (Object[] r : db.rows(by, Statements.GROUP_ASSIGNMENT, group, me)) {
            int p = ((Number) r[0]).intValue();
            long t = ((Number) r[1]).longValue();
            ("owned".equals(r[2]) ? mine : revoked).put(p, t);
        }
        List<Grant> idle = new ArrayList<>();
        synchronized (lock) {
            if (!life.ours()) {
                return; // closed meanwhile: nothing is ours any more
            }
            loseIfPast();
            // gone, or in another term: lost; revoked in our term: drained, then given back
            List<Grant> told = new ArrayList<>();
            for (var it = owned.entrySet().iterator(); it.hasNext(); ) {
                var e = it.next();
                Grant g = new Grant(e.getKey(), e.getValue());
                if (Objects.equals(revoked.get(g.partition()), g.term())) {
                    told.add(g);
                    it.remove();
                } else if (!Objects.equals(mine.get(g.partition()), g.term())) {
                    callbacks.add(Kind.LOST, g.partition(), g.term());
                    it.remove();
                }
            }
            for (Grant g : told) {
                revoking.add(g);
                callbacks.add(Kind.REVOKED, g.partition(), g.term());
            }
            revoking.removeIf(g -> !Objects.equals(revoked.get(g.partition()), g.term()));
            // revoked, and nothing of ours runs on it (never seen granted, or lost): at once
            for (var e : revoked.entrySet()) {
                Grant g = new Grant(e.getKey(), e.getValue());
                if (!revoking.contains(g)) {
                    idle.add(g);
                }
            }
            deadline = sent + timing.ttl - timing.margin;
            dated = true;
            for (var e : mine.entrySet()) {
                if (owned.putIfAbsent(e.getKey(), e.getValue()) == null) {
                    callbacks.add(Kind.ASSIGNED, e.getKey(), e.getValue());
                }
            }
        }
        for (Grant g : idle) {
            ack(db, g);
        }
    }

    private void ack(Db db, Grant g) throws SQLException {
        long by = Math.min(System.nanoTime() + timing.callTimeout, rounds.bound());
        db.bool(by, Statements.GROUP_ACK, group, me, g.partition(), g.term());
    }

    /**
     * Whether a notification is a well-formed announcement of this group's naming this member (a
     * hint: any role can send one; the next round decides).
     */
    boolean concernsUs(String payload) {
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
        boolean known =
                "partition_granted".equals(event)
                        || "partition_revoked".equals(event)
                        || "partition_freed".equals(event);
        return known
                && o.string("at") != null
                && integer(o, "term") >= 0
                && integer(o, "partition") > 0
                && group.equals(o.string("group"))
                && me.equals(o.string("member"));
    }

    /** The member {@code name} when it is an integer, else -1. */
    private static long integer(Json.Obj o, String name) {
        if (o.members().get(name) instanceof Json.Num n) {
            try {
                return Long.parseLong(n.text());
            } catch (NumberFormatException e) {
                return -1;
            }
        }
        return -1;
    }

    /** The member's thread: a round every ttl/3, sooner on a hint; the drained given back. */
    private final class Rounds extends Renewer {
        /** When the last round was sent: the first of this thread's, the hints' rate. */
        volatile long lastRound;

        Rounds() {
            super(
                    Member.this.dsn,
                    Member.this.named,
                    Leaderlock.APPLICATION_NAME,
                    null,
                    Member.this.life,
                    Member.this.timing,
                    "rounds of member " + Text.quote(Member.this.me),
                    Member.this.group);
        }

        @Override
        long firstRenewal() {
            return lastRound + timing.renewEvery;
        }

        @Override
        boolean renewed(long by) throws SQLException {
            round(by);
            return true;
        }

        @Override
        boolean refused(long by) {
            return true; // never: a round is answered, or fails
        }

        @Override
        long bound() {
            synchronized (lock) {
                return live() ? deadline : System.nanoTime() + FOREVER;
            }
        }

        @Override
        Db connect(long by) throws SQLException {
            Db d = Db.connect(dsn, by, named, appName);
            try {
                d.exec(by, Statements.LISTEN);
            } catch (SQLException | RuntimeException e) {
                d.close();
                throw e;
            }
            schema = d.schema;
            return d;
        }

        @Override
        boolean extend(long start) {
            return life.ours(); // the round moved the partitions' deadline
        }

        @Override
        void rejected(RejectedException refusal) {
            error = refusal;
            life.end(LostReason.REJECTED, refusal.getMessage());
            loseAll();
        }

        /** Until {@code at}, or sooner on a hint; gives back what was drained meanwhile. */
        @Override
        boolean pause(long at) {
            while (!stopped()) {
                if (!giveBack()) {
                    at = Math.min(at, hinted()); // the next round gives them back
                }
                long now = System.nanoTime();
                if (at - now <= 0) {
                    return false;
                }
                long slice = Math.min(at - now, ACK_POLL);
                if (db == null) {
                    waitUntil(now + slice);
                    continue;
                }
                try {
                    for (PGNotification n : db.notifications(Math.max(1, slice / 1_000_000))) {
                        if (concernsUs(n.getParameter())) {
                            at = Math.min(at, hinted());
                        }
                    }
                } catch (SQLException e) {
                    drop(); // the next round connects again
                }
            }
            return true;
        }

        /** The soonest a hinted round may be. */
        private long hinted() {
            return Math.max(System.nanoTime(), lastRound + soonest);
        }

        /** Sends the acks of what onRevoked drained: false when some could not be sent. */
        private boolean giveBack() {
            boolean ok = true;
            for (Grant g = drained.poll(); g != null; g = drained.poll()) {
                synchronized (lock) {
                    revoking.remove(g); // unsent, the next round's idle rule sends it
                }
                if (!ok || db == null) {
                    ok = false;
                    continue;
                }
                try {
                    ack(db, g);
                } catch (SQLException | RuntimeException e) {
                    Log.debug("group %s: an ack failed (%s)", Text.quote(group), Text.describe(e));
                    drop();
                    ok = false;
                }
            }
            return ok;
        }
    }

    /** The callbacks' thread: events in order; the partitions' deadline watched. */
    private final class Callbacks implements Runnable {
        private final LinkedBlockingQueue<Event> queue = new LinkedBlockingQueue<>();
        private final CountDownLatch done = new CountDownLatch(1);
        // This thread's: told assigned, not revoked yet.
        private final TreeMap<Integer, Long> active = new TreeMap<>();
        private boolean finished;
        private Thread thread;

        void start() {
            thread = new Thread(this, "leaderlock-member-callbacks " + me);
            thread.setDaemon(true);
            thread.start();
        }

        void add(Kind kind, int partition, long term) {
            queue.add(new Event(kind, partition, term));
        }

        @Override
        public void run() {
            try {
                while (!finished) {
                    long wait; // until the deadline while something is owned
                    synchronized (lock) {
                        wait =
                                owned.isEmpty() || !dated
                                        ? -1
                                        : Math.max(0, deadline - System.nanoTime());
                    }
                    // (a new grant comes as an event: the wait is computed again)
                    Event e = wait < 0 ? queue.take() : queue.poll(wait, TimeUnit.NANOSECONDS);
                    if (e == null) {
                        synchronized (lock) {
                            loseIfPast();
                        }
                    } else {
                        handle(e);
                    }
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            } finally {
                done.countDown();
            }
        }

        private void handle(Event e) {
            int p = e.partition();
            switch (e.kind()) {
                case ASSIGNED -> {
                    active.put(p, e.term());
                    call(() -> onAssigned.assigned(p, e.term()), "onAssigned", p);
                }
                case REVOKED -> {
                    if (active.remove(p, e.term())) {
                        call(() -> onRevoked.revoked(p), "onRevoked", p);
                    }
                    drained.add(new Grant(p, e.term()));
                }
                case LOST -> {
                    if (active.remove(p, e.term())) {
                        call(() -> onRevoked.revoked(p), "onRevoked", p);
                    }
                }
                case CLOSE -> {
                    for (int q : new ArrayList<>(active.keySet())) {
                        active.remove(q);
                        call(() -> onRevoked.revoked(q), "onRevoked", q);
                    }
                    finished = true;
                }
            }
        }

        private void call(Call c, String name, int partition) {
            try {
                c.run();
            } catch (Exception | Error e) {
                Log.warn(e, "group %s: %s(%d) threw", Text.quote(group), name, partition);
            }
        }

        /** Runs what is queued, to the end (bound: nanoseconds, null for ever). */
        void finish(Long bound) {
            add(Kind.CLOSE, 0, 0);
            if (Thread.currentThread() == thread) { // close() from a callback: here
                for (Event e = queue.poll(); e != null && !finished; e = queue.poll()) {
                    handle(e);
                }
                return;
            }
            try {
                if (bound == null) {
                    done.await();
                } else if (!done.await(bound, TimeUnit.NANOSECONDS)) {
                    Log.warn("group %s: callbacks still running; leaving", Text.quote(group));
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /** The member's life: ended by close, a refusal, the shutdown. */
    private final class Life extends Tenure {
        Life() {
            super(System.nanoTime() + FOREVER);
        }

        @Override
        LeaseLostException lostException() {
            LostReason r = reason();
            return new LeaseLostException(
                    "member " + Text.quote(me) + " of group " + Text.quote(group),
                    group,
                    0,
                    r == null ? LostReason.RELEASED : r,
                    detail());
        }

        @Override
        void logEnd() {
            LostReason r = reason();
            if (r == LostReason.REJECTED) {
                Log.error(
                        "group %s: member %s stopped, every partition lost: %s",
                        Text.quote(group), Text.quote(me), detail());
            }
        }
    }

    private final class Participant implements Shutdown.Participant {
        @Override
        public void beginShutdown() {
            life.end(LostReason.SHUTDOWN, "the process is shutting down");
            loseAll();
        }

        @Override
        public void finishShutdown() {
            finish(timing.ttl); // the callbacks until a ttl at most, then leave
            try {
                closedLatch.await(timing.ttl + timing.connectBound(), TimeUnit.NANOSECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }
}
