package io.github.leaderlock;

import java.net.InetAddress;
import java.net.UnknownHostException;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.sql.Connection;
import java.sql.SQLException;
import java.util.HexFormat;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/**
 * Leader election on PostgreSQL with the leaderlock extension (compiled or portable edition), with
 * the guarantees of the other leaderlock clients: renew every ttl/3; a local deadline on the
 * monotonic clock (the instant the last successful acquire or renewal was sent + ttl - ttl/200)
 * that {@link Lease#check()} compares with the clock on every call; every call bounded by that
 * deadline; LISTEN as a hint with polling as the fallback (it works behind pgbouncer's transaction
 * pooling); reconnection through server restarts and failovers; release on the way out; id
 * host:pid:random.
 *
 * <pre>{@code
 * Leaderlock.releaseOnShutdown();                  // SIGTERM: every lease ends, is released; exit 143
 * while (true) {                                   // campaign again after a loss
 *     try (Lease lease = Leaderlock.lead(dsn, "nightly-report", new LeaseOptions())) {
 *         while (true) {
 *             lease.check();                       // LeaseLostException past the local deadline
 *             step(lease);                         // one unit of work; writes fenced by lease.guard(conn)
 *             lease.awaitLoss(Duration.ofSeconds(1));
 *         }
 *     } catch (LeaseLostException lost) {
 *         // not the leader any more: campaign again
 *     }
 * }
 * }</pre>
 *
 * See also {@link Elector} (a long-running service), {@link Session} (many keys, one renewal),
 * {@link Scheduler} (scheduled runs), {@link HistoryWatcher} (every transition) and {@link Member}
 * (a share of a group's partitions).
 */
public final class Leaderlock {
    private Leaderlock() {}

    /** The version of this library. */
    public static final String VERSION = "0.5.0";

    /** Sessions are named so unless the connection string (or PGAPPNAME) names them. */
    static final String APPLICATION_NAME = "leaderlock java";

    private static final SecureRandom RANDOM = new SecureRandom();

    /** host:pid:random, unique per process and per call. */
    public static String defaultId() {
        String host;
        try {
            host = InetAddress.getLocalHost().getHostName();
        } catch (UnknownHostException e) {
            host = "localhost";
        }
        byte[] r = new byte[4];
        RANDOM.nextBytes(r);
        return host + ":" + ProcessHandle.current().pid() + ":" + HexFormat.of().formatHex(r);
    }

    static String checkName(String what, String value) {
        if (value == null || value.isEmpty()) {
            throw new BadArgumentException("leaderlock: " + what + " must be a non-empty string");
        }
        if (value.getBytes(StandardCharsets.UTF_8).length > 255) {
            throw new BadArgumentException("leaderlock: " + what + " must be at most 255 bytes");
        }
        return value;
    }

    /** {@link #lead(String, String, LeaseOptions)} with the default options. */
    public static Lease lead(String dsn, String key) {
        return lead(dsn, key, new LeaseOptions());
    }

    /**
     * Campaigns for {@code key} until this process leads (or {@code options.timeout} passes), then
     * returns the lease: a thread renews it every ttl/3 until {@link Lease#close()} (use
     * try-with-resources), which releases it.
     *
     * <p>Waiting, it keeps trying through lost connections, server restarts and failovers, each
     * lost connection made again after a delay from 100 ms doubling to 2 s. Only a refusal that
     * retrying cannot change ends it early: {@link NotInstalledException}, {@link
     * PrivilegeException}, {@link BadArgumentException} (all {@link RejectedException}). With a
     * timeout: {@link NotAcquiredException} when it passes with the key held, {@link
     * UnavailableException} with the server out of reach.
     *
     * @param dsn a connection string: libpq's key=value pairs, a postgresql:// URL, or a
     *     jdbc:postgresql: URL ({@link Dsn})
     */
    public static Lease lead(String dsn, String key, LeaseOptions options) {
        LeaseOptions o = options.copy();
        Dsn d = Dsn.parse(dsn);
        checkName("key", key);
        String id = o.id != null ? checkName("id", o.id) : defaultId();
        Timing t = Timing.of(o.ttl, o.poll);
        if (o.timeout != null && o.timeout.isNegative()) {
            throw new BadArgumentException("leaderlock: timeout must be null or at least zero");
        }
        Long timeout = o.timeout == null ? null : o.timeout.toNanos();
        String named = Schemas.option(o.schema);
        Campaign c = new Campaign(d, dsn, key, id, t, o.value, named, () -> Shutdown.down, null);
        Lease lease;
        try {
            lease = c.run(timeout);
        } catch (NotAcquiredException e) {
            c.drop();
            if (Shutdown.down) { // no campaign wins once the process shuts down
                Shutdown.park(timeout == null ? null : System.nanoTime() + timeout);
            }
            throw e;
        } catch (LeaderlockException e) {
            c.drop();
            throw e;
        } catch (RuntimeException | Error e) {
            c.abort();
            throw e;
        }
        LeaseRenewer r = new LeaseRenewer(d, dsn, named, c.take(), lease, t);
        Held held = new Held(lease, r);
        lease.onClose(held::close);
        Shutdown.register(held);
        lease.tenure.watch();
        r.start("leaderlock-renewer " + key);
        return lease;
    }

    /** A lease of lead(): its renewer, and its end. */
    private static final class Held implements Shutdown.Participant {
        final Lease lease;
        final LeaseRenewer renewer;
        final CountDownLatch closed = new CountDownLatch(1);

        Held(Lease lease, LeaseRenewer renewer) {
            this.lease = lease;
            this.renewer = renewer;
        }

        void close() {
            try {
                lease.tenure.end(
                        LostReason.RELEASED, null); // whatever the body does next, check() throws
                renewer.stop();
                if (!renewer.busy()) { // else its call still holds the connection
                    renewer.release();
                    renewer.drop();
                }
            } finally {
                Shutdown.unregister(this);
                closed.countDown();
            }
        }

        @Override
        public void beginShutdown() {
            lease.tenure.end(LostReason.SHUTDOWN, "the process is shutting down");
        }

        @Override
        public void finishShutdown() {
            // the body's next check() throws; leaving its try-with-resources releases
            long left = lease.tenure.deadline() - System.nanoTime();
            try {
                closed.await(Math.max(0, left), TimeUnit.NANOSECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /**
     * Joins a group (contract 26, docs/groups.md) as a member, at once (a refusal: {@link
     * RejectedException}; the server out of reach: {@link UnavailableException}), then every ttl/3
     * in a thread of its own until {@link Member#close()} (use try-with-resources), which hands
     * every partition to {@code onRevoked}, then leaves.
     */
    public static Member member(String dsn, MemberOptions options) {
        return Member.start(dsn, options);
    }

    /**
     * Opt-in, once, before leading: on SIGTERM (and at any other exit of the JVM that runs its
     * shutdown hooks) every lease, session and scheduled run of this process ends at once (the next
     * {@code check()} throws {@link LeaseLostException}, reason SHUTDOWN), no campaign wins and no
     * run is claimed any more; then the hook waits for each to be released or closed: a {@code
     * lead()} lease when its try-with-resources block is left, an {@link Elector} once its work
     * returned, a {@link Session} when closed (or at its deadline, then closed here), a {@link
     * Scheduler} once the run under way returned and its outcome was recorded, each until its local
     * deadline at most (a {@link Member}: its partitions lost at once, handed to onRevoked, then it
     * leaves). The JVM exits with status 143 after a SIGTERM, once the followers can take over at
     * once.
     */
    public static void releaseOnShutdown() {
        Shutdown.install();
    }

    /** Whether the JVM is shutting down and {@link #releaseOnShutdown()} ended every lease. */
    public static boolean isShuttingDown() {
        return Shutdown.down;
    }

    /**
     * Whether {@code key} has a live holder now, by the server's clock ({@code conn}: any
     * connection to the database, in any mode). For tests and tools; campaign with {@link #lead}
     * instead.
     */
    public static boolean isHeld(Connection conn, String key) {
        try {
            String schema = Db.schemaOf(conn, Schemas.option(null));
            try (var st = conn.prepareStatement(Statements.bind(Statements.IS_HELD, schema))) {
                st.setString(1, key);
                try (var rs = st.executeQuery()) {
                    return rs.next() && rs.getBoolean(1);
                }
            }
        } catch (SQLException e) {
            RejectedException r = Errors.rejection(e, null);
            throw r != null ? r : new LeaderlockException("leaderlock: " + Text.describe(e), e);
        }
    }
}
