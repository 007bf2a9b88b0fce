package io.github.leaderlock.shedlock;

import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Locale;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import net.javacrumbs.shedlock.core.ClockProvider;
import net.javacrumbs.shedlock.core.DefaultLockingTaskExecutor;
import net.javacrumbs.shedlock.core.LockConfiguration;
import net.javacrumbs.shedlock.core.LockExtender;
import net.javacrumbs.shedlock.core.LockingTaskExecutor;

/**
 * The ShedLock provider as a candidate of the scenario suite (tests/clients/scenarios.py, idiom
 * java:shedlock; io.github.leaderlock.Candidate hands it over):
 *
 * <pre>
 * ShedLockCandidate DSN KEY ID TTL_SECONDS RECORDS
 * </pre>
 *
 * The README's long task under ShedLock, word for word: every 20 ms, ShedLock's executor tries to
 * lock KEY with lockAtMostFor TTL; the task holding it appends "tick ID TERM UNIX_SECONDS" to
 * RECORDS every 20 ms, checking its lock first (LeaderlockLockProvider.current(): the local
 * deadline, read from the clock), and extends the lock every TTL/3 (LockExtender, ShedLock's manual
 * extension: a renewal of the same tenure). The provider's holder ids are ID:n, one per lock.
 * SIGTERM: the task returns, the unlock releases, exit 143.
 */
public final class ShedLockCandidate {
    private ShedLockCandidate() {}

    private static volatile boolean stopping;

    public static void main(String[] args) throws Exception {
        String dsn = args[0];
        String key = args[1];
        String id = args[2];
        Duration ttl = Duration.ofNanos((long) (Double.parseDouble(args[3]) * 1e9));
        FileOutputStream records = new FileOutputStream(args[4], true);
        CountDownLatch done = new CountDownLatch(1);
        Runtime.getRuntime()
                .addShutdownHook(
                        new Thread(
                                () -> {
                                    stopping = true; // the task returns; the unlock releases
                                    try {
                                        done.await(ttl.toMillis() + 2000, TimeUnit.MILLISECONDS);
                                    } catch (InterruptedException e) {
                                        Thread.currentThread().interrupt();
                                    }
                                }));

        // The README's idiom from here on.
        LeaderlockLockProvider provider = LeaderlockLockProvider.builder().dsn(dsn).id(id).build();
        LockingTaskExecutor executor = new DefaultLockingTaskExecutor(provider);
        // (warmed up: the first connection and the classes it loads, which can take seconds in a
        // JVM that just started, before a lock's lockAtMostFor starts counting)
        provider.isLocked(key);
        Runnable task =
                () -> {
                    long extended = System.nanoTime();
                    while (!stopping) {
                        // before each unit of work: the lock's local deadline, read from the clock
                        LeaderlockLock lock = LeaderlockLockProvider.current(key).orElseThrow();
                        if (!lock.isLocked()) {
                            return;
                        }
                        tick(records, id, lock.term());
                        if (System.nanoTime() - extended >= ttl.toNanos() / 3) {
                            extended = System.nanoTime();
                            LockExtender.extendActiveLock(ttl, Duration.ZERO);
                        }
                        sleep(20);
                    }
                };
        while (!stopping) {
            try {
                executor.executeWithLock(
                        task, new LockConfiguration(ClockProvider.now(), key, ttl, Duration.ZERO));
            } catch (RuntimeException e) {
                System.err.println("candidate: " + e);
            }
            sleep(20);
        }
        done.countDown();
    }

    private static void tick(FileOutputStream records, String id, long term) {
        String line =
                String.format(
                        Locale.ROOT,
                        "tick %s %d %.6f%n",
                        id,
                        term,
                        System.currentTimeMillis() / 1000.0);
        try {
            records.write(line.getBytes(StandardCharsets.UTF_8)); // one write per line, O_APPEND
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }

    private static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
