package io.github.leaderlock.shedlock;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

import net.javacrumbs.shedlock.core.ExtensibleLockProvider;
import net.javacrumbs.shedlock.test.support.AbstractExtensibleLockProviderIntegrationTest;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

/**
 * ShedLock's own tests of a lock provider (shedlock-test-support's
 * AbstractExtensibleLockProviderIntegrationTest, which runs AbstractLockProviderIntegrationTest's
 * too: a lock and its unlock, a second lock refused, two independent locks, locking twice in a row,
 * lockAtMostFor's timeout, locking right after an unlock, lockAtLeastFor kept after an unlock, the
 * fuzz test of 8 threads counting under two locks, and extending: once, several times, not after an
 * unlock nor once expired, keeping lockAtLeastFor, not twice, no unlock after it) against the
 * server LEADERLOCK_DSN names, with a provider of connections of its own.
 */
class ShedLockProviderTest extends AbstractExtensibleLockProviderIntegrationTest {
    private static LeaderlockLockProvider provider;

    @BeforeAll
    static void start() {
        String dsn = System.getenv("LEADERLOCK_DSN");
        assumeTrue(
                dsn != null && !dsn.isEmpty(),
                "LEADERLOCK_DSN is not set: no server to test against");
        provider = new LeaderlockLockProvider(dsn);
    }

    @AfterAll
    static void stop() {
        if (provider != null) {
            provider.close();
        }
    }

    @Override
    protected ExtensibleLockProvider getLockProvider() {
        return provider;
    }

    @Override
    protected void assertUnlocked(String lockName) {
        if (provider.isLocked(lockName)) {
            throw new AssertionError(lockName + " is locked");
        }
    }

    @Override
    protected void assertLocked(String lockName) {
        if (!provider.isLocked(lockName)) {
            throw new AssertionError(lockName + " is not locked");
        }
    }
}
