package io.github.leaderlock.shedlock;

import io.github.leaderlock.BadArgumentException;
import io.github.leaderlock.Calls;
import io.github.leaderlock.Dsn;
import io.github.leaderlock.Leaderlock;
import io.github.leaderlock.LeaderlockException;
import java.lang.System.Logger.Level;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.Iterator;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.concurrent.ConcurrentLinkedDeque;
import java.util.concurrent.atomic.AtomicLong;
import javax.sql.DataSource;
import net.javacrumbs.shedlock.core.ClockProvider;
import net.javacrumbs.shedlock.core.ExtensibleLockProvider;
import net.javacrumbs.shedlock.core.LockConfiguration;
import net.javacrumbs.shedlock.core.SimpleLock;

/**
 * A ShedLock {@link net.javacrumbs.shedlock.core.LockProvider} on leaderlock: each lock is a lease
 * of the key named as the lock (with an optional prefix), so a ShedLock user switches one bean and
 * gains expiry without polling, a fencing term, the history and the console.
 *
 * <ul>
 *   <li>{@code lock(config)}: le_try_acquire(key, id, ttl) with ttl = lockAtMostFor (what is left
 *       of it since the configuration's createdAt), under an id of its own for every lock
 *       (host:pid:random:n), so that a second lock of the same name, from this process too, is
 *       refused while the first is held. Empty when another holds it.
 *   <li>{@code unlock()}: keeps the lease until createdAt + lockAtLeastFor (le_renew with what is
 *       left of it: the server ends it then, and announces the expiry), else releases it at once
 *       (le_release: a waiting replica takes over within milliseconds). Both name the lock's term.
 *   <li>{@code extend(lockAtMostFor, lockAtLeastFor)} (ShedLock's LockExtender, and its
 *       KeepAliveLockProvider): le_renew of the same tenure; empty once it lapsed.
 * </ul>
 *
 * <p>The task reaches its lock through {@link #current()}: {@link LeaderlockLock#term()} is the
 * fencing token (pass it to systems that refuse an older one), {@link LeaderlockLock#check()}
 * throws once the lock's local deadline (the send time of the acquire + lockAtMostFor -
 * lockAtMostFor/200) passed, and {@link LeaderlockLock#guard(Connection)} fences a write in its
 * transaction. There are no renewals: lockAtMostFor bounds the task, as in every ShedLock provider.
 *
 * <p>Connections: an application's {@link DataSource} (each call takes one and gives it back), or a
 * connection string (connections of its own, up to 4 kept idle). Every statement is in autocommit,
 * and names leaderlock's schema, found once.
 */
public final class LeaderlockLockProvider implements ExtensibleLockProvider, AutoCloseable {
    private static final System.Logger LOG = System.getLogger("leaderlock");
    private static final int MAX_IDLE = 4;

    /** The locks each thread holds, innermost last. */
    private static final ThreadLocal<Deque<Held>> HELD =
            ThreadLocal.withInitial(ConcurrentLinkedDeque::new);

    private final DataSource dataSource;
    private final Dsn dsn;
    private final String prefix;
    private final String idBase;
    private final String named;
    private final AtomicLong serial = new AtomicLong();
    private final Deque<Connection> idle = new ArrayDeque<>();
    private volatile String schema;
    private boolean closed;

    /** Configures a provider: {@link #builder()}. */
    public static final class Builder {
        private DataSource dataSource;
        private String dsn;
        private String prefix = "";
        private String id;
        private String schema;

        private Builder() {}

        /** Connections from the application's pool (in autocommit, given back after each call). */
        public Builder dataSource(DataSource dataSource) {
            this.dataSource = Objects.requireNonNull(dataSource);
            return this;
        }

        /**
         * Connections of the provider's own, to this connection string (libpq's key=value, a
         * postgresql:// URL, or a jdbc:postgresql: URL).
         */
        public Builder dsn(String dsn) {
            this.dsn = Objects.requireNonNull(dsn);
            return this;
        }

        /** Prepended to every lock's name to make its key (default none: the key is the name). */
        public Builder keyPrefix(String prefix) {
            this.prefix = Objects.requireNonNull(prefix);
            return this;
        }

        /** What the holders' ids start with (default host:pid:random); each lock adds ":n". */
        public Builder id(String id) {
            this.id = Objects.requireNonNull(id);
            return this;
        }

        /** The schema that holds leaderlock (default LEADERLOCK_SCHEMA, else the one that does). */
        public Builder schema(String schema) {
            this.schema = schema;
            return this;
        }

        public LeaderlockLockProvider build() {
            if ((dataSource == null) == (dsn == null)) {
                throw new BadArgumentException(
                        "leaderlock: give the provider a data source or a connection string (one)");
            }
            return new LeaderlockLockProvider(this);
        }
    }

    public static Builder builder() {
        return new Builder();
    }

    /** A provider on the application's pool, keys as the locks' names. */
    public LeaderlockLockProvider(DataSource dataSource) {
        this(builder().dataSource(dataSource));
    }

    /** A provider with connections of its own, keys as the locks' names. */
    public LeaderlockLockProvider(String dsn) {
        this(builder().dsn(dsn));
    }

    private LeaderlockLockProvider(Builder b) {
        this.dataSource = b.dataSource;
        this.dsn = b.dsn == null ? null : Dsn.parse(b.dsn);
        this.prefix = b.prefix;
        this.idBase = b.id != null ? b.id : Leaderlock.defaultId();
        this.named = b.schema;
    }

    /**
     * The lock of this thread's task (the innermost, when it holds several), while it is held: its
     * term, its deadline, its guard. Set by {@link #lock} in the thread that locks (ShedLock's
     * executors run the task in it), cleared by unlock.
     */
    public static Optional<LeaderlockLock> current() {
        Held h = HELD.get().peekLast();
        return h == null ? Optional.empty() : Optional.of(h.lock);
    }

    /** The lock named {@code name} this thread's task holds, if any. */
    public static Optional<LeaderlockLock> current(String name) {
        Iterator<Held> it = HELD.get().descendingIterator();
        while (it.hasNext()) {
            Held h = it.next();
            if (h.lock.name().equals(name)) {
                return Optional.of(h.lock);
            }
        }
        return Optional.empty();
    }

    /** The key of a lock's name. */
    String key(String name) {
        String key = prefix + name;
        int bytes = key.getBytes(StandardCharsets.UTF_8).length;
        if (bytes > 255) {
            throw new BadArgumentException(
                    "leaderlock: the key of lock " + name + " is " + bytes + " bytes, above 255");
        }
        return key;
    }

    @Override
    public Optional<SimpleLock> lock(LockConfiguration config) {
        String key = key(config.getName());
        String id = idBase + ":" + serial.incrementAndGet();
        long[] deadline = {0};
        OptionalLong term =
                call(
                        c -> {
                            // connected: the deadline counts from the send of the acquire
                            Duration ttl = left(config.getLockAtMostUntil());
                            deadline[0] = deadline(System.nanoTime(), ttl);
                            return Calls.tryAcquire(c, schema, key, id, ttl);
                        });
        if (term.isEmpty()) {
            return Optional.empty();
        }
        Held held = new Held(HELD.get());
        LeaderlockLock lock =
                new LeaderlockLock(this, held, config, key, id, term.getAsLong(), deadline[0]);
        held.lock = lock;
        held.stack.addLast(held);
        return Optional.of(lock);
    }

    /** Whether lock {@code name} is held now, by the server's clock. */
    public boolean isLocked(String name) {
        String key = key(name);
        return call(c -> Calls.isHeld(c, schema, key));
    }

    /** Where a lock sits in its thread's stack: extensions replace the lock. */
    static final class Held {
        final Deque<Held> stack;
        volatile LeaderlockLock lock;

        Held(Deque<Held> stack) {
            this.stack = stack;
        }
    }

    /** What is left of a duration until {@code until} (ShedLock's clock), 1 ms at least. */
    static Duration left(Instant until) {
        Duration d = Duration.between(ClockProvider.now(), until);
        return d.compareTo(Duration.ofMillis(1)) < 0 ? Duration.ofMillis(1) : d;
    }

    static long deadline(long sent, Duration ttl) {
        long nanos = ttl.toNanos();
        return sent + nanos - nanos / 200;
    }

    /** unlock: keep the lease until lockAtLeastUntil, else release it. */
    void unlock(LeaderlockLock lock) {
        lock.held.stack.remove(lock.held);
        Duration atLeast =
                Duration.between(ClockProvider.now(), lock.configuration().getLockAtLeastUntil());
        try {
            boolean ended;
            if (atLeast.compareTo(Duration.ofMillis(1)) >= 0) {
                ended =
                        call(
                                c ->
                                        Calls.renew(
                                                c,
                                                schema,
                                                lock.key(),
                                                lock.id(),
                                                atLeast,
                                                lock.term()));
            } else {
                ended = call(c -> Calls.release(c, schema, lock.key(), lock.id(), lock.term()));
            }
            if (!ended) {
                // (the server answers false only when that tenure is not live any more)
                unlockSaid(
                        lock,
                        "was refused: that tenure had ended (it lapsed at lockAtMostFor, or was"
                                + " released or taken over)");
            }
        } catch (LeaderlockException e) {
            unlockSaid(lock, "failed; it lapses at lockAtMostFor: " + e.getMessage());
        }
    }

    private static void unlockSaid(LeaderlockLock lock, String what) {
        LOG.log(
                Level.WARNING,
                "leaderlock: unlock of " + lock.key() + " (term " + lock.term() + ") " + what);
    }

    /** extend: the same tenure, renewed to the new lockAtMostFor; empty once it lapsed. */
    Optional<SimpleLock> extend(LeaderlockLock lock, LockConfiguration next) {
        long[] deadline = {0};
        boolean renewed =
                call(
                        c -> {
                            Duration ttl = left(next.getLockAtMostUntil());
                            deadline[0] = deadline(System.nanoTime(), ttl);
                            return Calls.renew(c, schema, lock.key(), lock.id(), ttl, lock.term());
                        });
        if (!renewed) {
            lock.held.stack.remove(lock.held);
            return Optional.empty();
        }
        LeaderlockLock longer =
                new LeaderlockLock(
                        this, lock.held, next, lock.key(), lock.id(), lock.term(), deadline[0]);
        lock.held.lock = longer;
        return Optional.of(longer);
    }

    String schema() {
        return schema;
    }

    /** A call on a connection: the pool's, or one of the provider's own. */
    interface Call<T> {
        T on(Connection c);
    }

    <T> T call(Call<T> call) {
        Connection c = take();
        boolean ok = false;
        try {
            if (schema == null) {
                schema = Calls.findSchema(c, named);
            }
            T result = call.on(c);
            ok = true;
            return result;
        } finally {
            give(c, ok);
        }
    }

    private Connection take() {
        try {
            if (dataSource != null) {
                Connection c = dataSource.getConnection();
                if (!c.getAutoCommit()) {
                    c.setAutoCommit(true);
                }
                return c;
            }
            synchronized (idle) {
                if (closed) {
                    throw new IllegalStateException("leaderlock: the provider is closed");
                }
                Connection c = idle.pollLast();
                if (c != null) {
                    return c;
                }
            }
            return dsn.connect();
        } catch (SQLException e) {
            throw new LeaderlockException("leaderlock: no connection: " + e.getMessage(), e);
        }
    }

    private void give(Connection c, boolean ok) {
        if (dataSource == null) {
            synchronized (idle) {
                if (ok && !closed && idle.size() < MAX_IDLE) {
                    idle.addLast(c);
                    return;
                }
                if (!ok) { // the server restarted, or went away: the idle ones are likely gone too
                    idle.forEach(LeaderlockLockProvider::close);
                    idle.clear();
                }
            }
        }
        close(c);
    }

    private static void close(Connection c) {
        try {
            c.close();
        } catch (SQLException ignored) {
            // a failed connection closes as it can
        }
    }

    /** Closes the connections kept idle (a provider on a connection string). */
    @Override
    public void close() {
        synchronized (idle) {
            closed = true;
            idle.forEach(LeaderlockLockProvider::close);
            idle.clear();
        }
    }
}
