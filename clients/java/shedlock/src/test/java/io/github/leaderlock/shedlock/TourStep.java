package io.github.leaderlock.shedlock;

import io.github.leaderlock.LeaseLostException;
import java.sql.Connection;
import java.time.Duration;
import net.javacrumbs.shedlock.core.ClockProvider;
import net.javacrumbs.shedlock.core.LockConfiguration;
import net.javacrumbs.shedlock.core.SimpleLock;

/**
 * The ShedLock provider's step of the Java client's tour (io.github.leaderlock.Tour, run by
 * tests/clients/hostile.py): every call of the provider on a database set against its clients.
 */
public final class TourStep {
    private TourStep() {}

    private static void check(boolean ok, String what) {
        if (!ok) {
            throw new AssertionError(what);
        }
    }

    private static LockConfiguration config(String name, Duration atMost, Duration atLeast) {
        return new LockConfiguration(ClockProvider.now(), name, atMost, atLeast);
    }

    public static String run(String dsn, String name) throws Exception {
        try (LeaderlockLockProvider provider = new LeaderlockLockProvider(dsn)) {
            LeaderlockLock lock =
                    (LeaderlockLock)
                            provider.lock(
                                            config(
                                                    name,
                                                    Duration.ofSeconds(5),
                                                    Duration.ofMillis(300)))
                                    .orElseThrow();
            check(
                    provider.lock(config(name, Duration.ofSeconds(5), Duration.ZERO)).isEmpty(),
                    "locked twice");
            check(LeaderlockLockProvider.current(name).orElseThrow() == lock, "current()");
            try (Connection c = io.github.leaderlock.Dsn.parse(dsn).connect()) {
                c.setAutoCommit(false);
                check(lock.guard(c) == lock.term(), "guard's term");
                c.commit();
            }
            SimpleLock longer =
                    lock.extend(Duration.ofSeconds(10), Duration.ofMillis(300)).orElseThrow();
            check(provider.isLocked(name), "not locked");
            longer.unlock();
            check(provider.isLocked(name), "lockAtLeastFor not kept");
            Thread.sleep(500);
            check(!provider.isLocked(name), "still locked after lockAtLeastFor");
            LeaderlockLock next =
                    (LeaderlockLock)
                            provider.lock(config(name, Duration.ofSeconds(5), Duration.ZERO))
                                    .orElseThrow();
            check(next.term() > lock.term(), "term " + next.term() + " after " + lock.term());
            next.unlock();
            check(!provider.isLocked(name), "not released");
            try (Connection c = io.github.leaderlock.Dsn.parse(dsn).connect()) {
                c.setAutoCommit(false);
                next.guard(c);
                throw new AssertionError("a released lock's guard passed");
            } catch (LeaseLostException expected) {
                // unlocked: refused before anything is sent
            }
            return "terms "
                    + lock.term()
                    + " (extended, kept 300 ms after its unlock) and "
                    + next.term()
                    + " (released)";
        }
    }
}
