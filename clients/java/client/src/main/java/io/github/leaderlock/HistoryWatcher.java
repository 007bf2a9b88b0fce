package io.github.leaderlock;

import java.sql.SQLException;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;
import org.postgresql.PGNotification;

/**
 * Follows the history of transitions (contract 23): delivers each transition after a position once,
 * in position order, and when its connection is lost it connects again and goes on after the last
 * one delivered, so that none is missed or repeated. The server numbers transitions in commit order
 * shortly after they commit (its worker), and says so on channel leaderlock_history. Any role may
 * notify there: a notification only makes the watcher read le_history now (never sooner than 50 ms
 * after the previous read); what it delivers is what le_history returns. It also reads every poll
 * interval, in case a notification is lost. The rules of the other clients' watchers.
 *
 * <pre>{@code
 * try (HistoryWatcher w = HistoryWatcher.open(dsn, new HistoryOptions().since(saved).keyPrefix("shard/"))) {
 *     while (true) {
 *         Transition t = w.next(Duration.ofSeconds(1));  // null when a second passes
 *         if (t != null) {
 *             handle(t);
 *             saved = w.position();                       // persist it: since(saved) resumes after it
 *         }
 *     }
 * }
 * }</pre>
 *
 * {@link #next} is for one thread at a time; {@link #position()} and {@link #close()} may be called
 * from any thread.
 */
public final class HistoryWatcher implements AutoCloseable {
    /** Rows per read. */
    static final int PAGE = 1000;

    /** The least time between the start of two reads that a notification asks for. */
    static final long READ_GAP = 50_000_000L;

    /** Bounds each call, and each connection attempt unless the string sets connect_timeout. */
    static final long CALL_TIMEOUT = 10_000_000_000L;

    private static final long BACKOFF_FIRST = 100_000_000L;
    private static final long BACKOFF_LAST = 5_000_000_000L;
    static final String APPLICATION_NAME = "leaderlock watch";

    private final Dsn dsn;
    private final String key;
    private final String prefix;
    private final long poll;
    private final String named;
    private volatile long position;
    private volatile boolean closed;
    private final Object lock = new Object();

    // held under lock (next's)
    private Db db;
    private boolean number; // no worker numbers the history: le_expire_lapsed() before each read
    private final Deque<Transition> ready = new ArrayDeque<>();
    private long head;
    private boolean due;
    private boolean hinted;
    private long lastRead = Long.MIN_VALUE / 2;
    private long nextPoll;
    private long retryAt;
    private long delay;
    private RuntimeException error;
    private int reconnects;

    private HistoryWatcher(Dsn dsn, HistoryOptions o, String named) {
        this.dsn = dsn;
        this.key = o.key;
        this.prefix = o.keyPrefix;
        this.poll = Math.max(o.poll.toNanos(), READ_GAP);
        this.named = named;
    }

    /** {@link #open(String, HistoryOptions)} with the default options: from now on, every key. */
    public static HistoryWatcher open(String dsn) {
        return open(dsn, new HistoryOptions());
    }

    /**
     * Connects and starts following the history: {@link #next} returns each transition after {@code
     * options.since} (null: after the last one numbered now), once, in position order. Bad options
     * are {@link BadArgumentException} before anything connects; a refusal for good from the server
     * is a {@link RejectedException}; an unreachable server {@link UnavailableException}. Sessions
     * are named {@code leaderlock watch} unless the connection string names them.
     */
    public static HistoryWatcher open(String dsn, HistoryOptions options) {
        HistoryOptions o = options.copy();
        if (o.key != null && o.keyPrefix != null) {
            throw new BadArgumentException("leaderlock: give key or keyPrefix, not both");
        }
        if (o.since != null && o.since < 0) {
            throw new BadArgumentException("leaderlock: since must be 0 or a history position");
        }
        if (o.poll == null || o.poll.isNegative() || o.poll.isZero()) {
            throw new BadArgumentException("leaderlock: poll must be positive");
        }
        HistoryWatcher w = new HistoryWatcher(Dsn.parse(dsn), o, Schemas.option(o.schema));
        if (o.since != null) {
            w.position = o.since;
        }
        synchronized (w.lock) {
            try {
                w.connect(o.since == null);
            } catch (SQLException e) {
                RejectedException r = Errors.rejection(e, null);
                if (r != null) {
                    throw r;
                }
                throw new UnavailableException("leaderlock: the history: " + Text.describe(e), e);
            }
        }
        return w;
    }

    /**
     * The position through which every transition the watcher selects has been delivered: the last
     * one's, or further when the history beyond it holds none of the key or prefix. Keep it to
     * resume later ({@link HistoryOptions#since}).
     */
    public long position() {
        return position;
    }

    /** How many times the connection was made again. */
    public int reconnects() {
        synchronized (lock) {
            return reconnects;
        }
    }

    /**
     * The next transition, waiting for one {@code timeout} at most (then null; the watcher goes on
     * at the next call). A lost connection (the server restarted, the session terminated, the
     * network) is made again with backoff (100 ms doubling to 5 s), going on after the last
     * transition delivered. What stops the watcher, thrown again by every later call: {@link
     * HistoryPrunedException} when transitions after the position were pruned before they were
     * read; other refusals for good ({@link RejectedException}); {@link IllegalStateException}
     * after {@link #close()}.
     */
    public Transition next(Duration timeout) {
        long until = System.nanoTime() + timeout.toNanos();
        synchronized (lock) {
            while (true) {
                if (closed) {
                    throw new IllegalStateException("leaderlock: the history watcher is closed");
                }
                if (error != null) {
                    throw error;
                }
                Transition t = ready.poll();
                if (t != null) {
                    long p = t.position();
                    if (ready.isEmpty() && head > p) {
                        p = head;
                    }
                    position = p;
                    return t;
                }
                long now = System.nanoTime();
                if (now - until >= 0) {
                    return null;
                }
                try {
                    if (db == null) {
                        if (retryAt - now > 0) {
                            pause(Math.min(retryAt, until) - now);
                            continue;
                        }
                        connect(false);
                        reconnects++;
                    }
                    if (!due && !hinted) {
                        long wait = Math.min(nextPoll, until) - System.nanoTime();
                        if (wait <= 0) {
                            due = System.nanoTime() - nextPoll >= 0;
                            continue;
                        }
                        for (PGNotification n :
                                db.notifications(
                                        Math.max(1, Math.min(wait, 100_000_000L) / 1_000_000))) {
                            // where no worker numbers, the changes themselves are hints too
                            if (n.getName().equals("leaderlock_history")
                                    || (number && n.getName().equals("leaderlock"))) {
                                hinted = true;
                            }
                        }
                        continue;
                    }
                    if (!due) {
                        // a hint: never sooner than READ_GAP after the last read
                        long gap = lastRead + READ_GAP - System.nanoTime();
                        if (gap > 0) {
                            pause(Math.min(gap, until - System.nanoTime()));
                            continue;
                        }
                    }
                    read();
                } catch (SQLException | RuntimeException e) {
                    failed(e);
                }
            }
        }
    }

    private void pause(long nanos) {
        if (nanos <= 0) {
            return;
        }
        try {
            lock.wait(Math.max(1, Math.min(nanos, 100_000_000L) / 1_000_000));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new LeaderlockException("leaderlock: interrupted", e);
        }
    }

    private void connect(boolean first) throws SQLException {
        Db d = Db.connect(dsn, System.nanoTime() + CALL_TIMEOUT, named, APPLICATION_NAME);
        try {
            long by = System.nanoTime() + CALL_TIMEOUT;
            // no worker numbers the history here (the portable edition, a library not preloaded):
            // le_expire_lapsed() does, before each read; LISTEN to the changes as hints too
            boolean worker = d.bool(by, Statements.WORKER_SERVES);
            number = !worker;
            d.exec(by, Statements.LISTEN_HISTORY);
            if (!worker) {
                d.exec(by, Statements.LISTEN);
            }
            if (first) {
                Object p = d.one(by, Statements.HISTORY_POSITION);
                position = p == null ? 0 : ((Number) p).longValue();
            }
        } catch (SQLException | RuntimeException e) {
            d.close();
            throw e;
        }
        db = d;
        due = true; // what was numbered while no one listened
    }

    private void read() throws SQLException {
        hinted = false; // hints until now ask for this read
        lastRead = System.nanoTime();
        long by = lastRead + CALL_TIMEOUT;
        if (number) {
            db.one(by, Statements.EXPIRE_LAPSED);
        }
        List<Object[]> rows =
                db.rows(
                        by,
                        Statements.HISTORY,
                        position,
                        key != null ? key : Db.NULL_TEXT,
                        prefix != null ? prefix : Db.NULL_TEXT,
                        PAGE);
        int n = 0;
        long h = 0;
        for (Object[] r : rows) {
            h = ((Number) r[8]).longValue();
            if (r[0] == null) { // no transition
                continue;
            }
            n++;
            ready.add(
                    new Transition(
                            ((Number) r[0]).longValue(),
                            (Instant) r[1],
                            (String) r[2],
                            (String) r[3],
                            (String) r[4],
                            r[5] == null ? 0 : ((Number) r[5]).longValue(),
                            (String) r[6],
                            (String) r[7]));
        }
        delay = 0; // the connection works
        nextPoll = lastRead + poll;
        due = n == PAGE;
        head = 0;
        if (!due) { // every selected transition up to head is in the page
            head = h;
            if (n == 0 && h > position) {
                position = h;
            }
        }
    }

    /**
     * A call failed: when the connection was lost, it is made again after a delay; otherwise the
     * error stops the watcher.
     */
    private void failed(Exception e) {
        RejectedException r = Errors.rejection(e, db);
        boolean live = db != null && !db.isClosed();
        if (r instanceof HistoryPrunedException) {
            r = new HistoryPrunedException(r.getMessage(), position, r.getCause());
        }
        boolean stop = r != null || (live && e instanceof SQLException s && !Errors.transient_(s));
        drop();
        if (stop) {
            error =
                    r != null
                            ? r
                            : new LeaderlockException(
                                    "leaderlock: the history: " + Text.describe(e), e);
            Log.warn("history: stopped after position %d: %s", position, error.getMessage());
            return;
        }
        delay = delay == 0 ? BACKOFF_FIRST : Math.min(delay * 2, BACKOFF_LAST);
        long d = delay / 2 + ThreadLocalRandom.current().nextLong(delay / 2 + 1);
        retryAt = System.nanoTime() + d;
        Log.warn(
                "history: connection lost (%s); reconnecting in %d ms, to resume after position %d",
                Text.describe(e), d / 1_000_000, position);
    }

    private void drop() {
        if (db != null) {
            db.close();
            db = null;
        }
    }

    /** Closes the connection; later calls of next throw. Safe from any thread, more than once. */
    @Override
    public void close() {
        closed = true;
        synchronized (lock) {
            drop();
            lock.notifyAll();
        }
    }
}
