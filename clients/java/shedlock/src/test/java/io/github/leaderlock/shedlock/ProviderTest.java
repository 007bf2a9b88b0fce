package io.github.leaderlock.shedlock;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.github.leaderlock.LeaseLostException;
import io.github.leaderlock.LostReason;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.UUID;
import net.javacrumbs.shedlock.core.ClockProvider;
import net.javacrumbs.shedlock.core.DefaultLockingTaskExecutor;
import net.javacrumbs.shedlock.core.LockConfiguration;
import net.javacrumbs.shedlock.core.LockExtender;
import net.javacrumbs.shedlock.core.SimpleLock;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.postgresql.ds.PGSimpleDataSource;

/**
 * What the provider adds to ShedLock's contract: the term for the task (through current(), across
 * an extension), lockAtLeastFor kept by the server (the unlock releases nothing before it), the
 * lock's local deadline, the guard, and a provider on an application's DataSource.
 */
class ProviderTest {
    private static String dsn;
    private static LeaderlockLockProvider provider;
    private final String name = "java-shedlock-" + UUID.randomUUID().toString().substring(0, 8);

    @BeforeAll
    static void start() {
        dsn = System.getenv("LEADERLOCK_DSN");
        assumeTrue(
                dsn != null && !dsn.isEmpty(),
                "LEADERLOCK_DSN is not set: no server to test against");
        provider = LeaderlockLockProvider.builder().dsn(dsn).id("java-shedlock-test").build();
    }

    @AfterAll
    static void stop() {
        if (provider != null) {
            provider.close();
        }
    }

    private static LockConfiguration config(String name, Duration atMost, Duration atLeast) {
        return new LockConfiguration(ClockProvider.now(), name, atMost, atLeast);
    }

    private static Connection connect() throws Exception {
        Connection c = io.github.leaderlock.Dsn.parse(dsn).connect();
        return c;
    }

    private static List<String> history(String key) throws Exception {
        List<String> out = new ArrayList<>();
        try (Connection c = connect();
                PreparedStatement st =
                        c.prepareStatement(
                                "SELECT event || ' ' || holder || ' ' || term FROM leaderlock_history WHERE key = ? ORDER BY position")) {
            st.setString(1, key);
            try (ResultSet rs = st.executeQuery()) {
                while (rs.next()) {
                    out.add(rs.getString(1));
                }
            }
        }
        return out;
    }

    @Test
    void theTaskSeesItsLockAndItsTermAcrossAnExtension() throws Throwable {
        DefaultLockingTaskExecutor executor = new DefaultLockingTaskExecutor(provider);
        List<Long> terms = new ArrayList<>();
        for (int i = 0; i < 2; i++) {
            executor.executeWithLock(
                    (LockingTaskExecutorTask)
                            () -> {
                                LeaderlockLock lock =
                                        LeaderlockLockProvider.current().orElseThrow();
                                assertThat(lock.name()).isEqualTo(name);
                                assertThat(lock.id()).startsWith("java-shedlock-test:");
                                lock.check();
                                long before = lock.remaining().toMillis();
                                LockExtender.extendActiveLock(
                                        Duration.ofSeconds(30), Duration.ZERO);
                                LeaderlockLock longer =
                                        LeaderlockLockProvider.current(name).orElseThrow();
                                assertThat(longer).isNotSameAs(lock);
                                assertThat(longer.term()).isEqualTo(lock.term());
                                assertThat(longer.remaining().toMillis())
                                        .isGreaterThan(before + 20_000);
                                assertThat(lock.isLocked()).isFalse(); // superseded
                                terms.add(longer.term());
                            },
                    config(name, Duration.ofSeconds(5), Duration.ZERO));
        }
        assertThat(LeaderlockLockProvider.current()).isEmpty();
        assertThat(terms).hasSize(2);
        assertThat(terms.get(1)).isGreaterThan(terms.get(0));
        assertThat(provider.isLocked(name)).isFalse();
    }

    /** ShedLock's Task, for the executor (a lambda that may throw). */
    interface LockingTaskExecutorTask
            extends net.javacrumbs.shedlock.core.LockingTaskExecutor.Task {}

    @Test
    void lockAtLeastForIsKeptByTheServerThenEndsAsAnExpiry() throws Exception {
        // Held until the configuration's createdAt (read after t0, ShedLock's clock: whole
        // milliseconds, so up to 1 ms before the instant) + lockAtLeastFor (600 ms).
        long t0 = System.nanoTime();
        long held = 599_000_000L; // held from t0 for this long at least
        SimpleLock lock =
                provider.lock(config(name, Duration.ofSeconds(5), Duration.ofMillis(600)))
                        .orElseThrow();
        long term = ((LeaderlockLock) lock).term();
        long unlocked = System.nanoTime();
        lock.unlock();
        assertThat(provider.lock(config(name, Duration.ofSeconds(5), Duration.ZERO))).isEmpty();
        Thread.sleep(Math.max(0, 300 - (System.nanoTime() - t0) / 1_000_000));
        long asked = System.nanoTime();
        boolean locked = provider.isLocked(name);
        if (asked - t0 < held) { // (asked later, it may have lapsed: nothing to say)
            assertThat(locked).isTrue();
        }
        Optional<SimpleLock> next = Optional.empty();
        while (next.isEmpty() && System.nanoTime() - unlocked < 3_000_000_000L) {
            next = provider.lock(config(name, Duration.ofSeconds(5), Duration.ZERO));
        }
        long took = System.nanoTime();
        assertThat(next).isPresent();
        assertThat(took - t0).isGreaterThanOrEqualTo(held);
        assertThat((took - unlocked) / 1_000_000).isLessThan(900L);
        next.get().unlock();
        String holder = ((LeaderlockLock) lock).id();
        // the unlock released nothing: the tenure ran out on the server (expired, or lapsed and
        // taken over before the worker announced it)
        assertThat(history(name))
                .startsWith("acquired " + holder + " " + term)
                .doesNotContain("released " + holder + " " + term);
    }

    @Test
    void aLockIsHeldLocallyUntilItsLocalDeadline() throws Exception {
        LockConfiguration c = config(name, Duration.ofMillis(400), Duration.ZERO);
        long created = System.nanoTime(); // after the configuration's createdAt
        LeaderlockLock lock = (LeaderlockLock) provider.lock(c).orElseThrow();
        long lastHeld = 0; // read before a question that answered held
        while (true) {
            long now = System.nanoTime();
            if (!lock.isLocked()) {
                break;
            }
            lastHeld = now;
            Thread.sleep(5);
        }
        assertThat(lastHeld - created).isPositive().isLessThan(400_000_000L);
        assertThatThrownBy(lock::check)
                .isInstanceOf(LeaseLostException.class)
                .extracting(e -> ((LeaseLostException) e).reason())
                .isEqualTo(LostReason.EXPIRED);
        lock.unlock();
    }

    @Test
    void theGuardFencesAWriteWhileTheLockIsHeld() throws Exception {
        LeaderlockLock lock =
                (LeaderlockLock)
                        provider.lock(config(name, Duration.ofMillis(500), Duration.ZERO))
                                .orElseThrow();
        try (Connection c = connect()) {
            c.setAutoCommit(false);
            assertThat(lock.guard(c)).isEqualTo(lock.term());
            c.commit();
            Thread.sleep(700); // lapsed on the server: another replica takes it
            LeaderlockLock other =
                    (LeaderlockLock)
                            provider.lock(config(name, Duration.ofSeconds(5), Duration.ZERO))
                                    .orElseThrow();
            assertThat(other.term()).isGreaterThan(lock.term());
            assertThatThrownBy(() -> lock.guard(c)).isInstanceOf(LeaseLostException.class);
            c.rollback();
            c.setAutoCommit(true);
            assertThatThrownBy(() -> other.guard(c)).hasMessageContaining("inside the transaction");
            other.unlock();
        }
        // its tenure is over: ends nothing of the other's, and says so
        List<String> said = new ArrayList<>();
        java.util.logging.Logger log = java.util.logging.Logger.getLogger("leaderlock");
        java.util.logging.Handler handler =
                new java.util.logging.Handler() {
                    @Override
                    public void publish(java.util.logging.LogRecord r) {
                        said.add(r.getLevel() + " " + r.getMessage());
                    }

                    @Override
                    public void flush() {}

                    @Override
                    public void close() {}
                };
        log.addHandler(handler);
        try {
            lock.unlock();
        } finally {
            log.removeHandler(handler);
        }
        assertThat(said)
                .anyMatch(
                        m ->
                                m.startsWith("WARNING")
                                        && m.contains("unlock of " + lock.key())
                                        && m.contains("was refused"));
    }

    @Test
    void aProviderOnTheApplicationsDataSource() throws Exception {
        io.github.leaderlock.Dsn.parse(dsn); // a string PgJDBC's data source takes as a URL below
        PGSimpleDataSource ds = new PGSimpleDataSource();
        try (Connection c = connect()) {
            ds.setURL(c.getMetaData().getURL());
            ds.setUser(c.getMetaData().getUserName());
        }
        LeaderlockLockProvider onPool = new LeaderlockLockProvider(ds);
        SimpleLock lock =
                onPool.lock(config(name, Duration.ofSeconds(5), Duration.ZERO)).orElseThrow();
        assertThat(onPool.lock(config(name, Duration.ofSeconds(5), Duration.ZERO))).isEmpty();
        assertThat(provider.lock(config(name, Duration.ofSeconds(5), Duration.ZERO))).isEmpty();
        assertThat(onPool.isLocked(name)).isTrue();
        lock.unlock();
        assertThat(provider.isLocked(name)).isFalse();
        try (Connection c = DriverManager.getConnection(ds.getURL(), ds.getUser(), null)) {
            assertThat(c.isValid(1)).isTrue();
        }
    }
}
