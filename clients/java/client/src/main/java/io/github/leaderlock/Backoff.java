package io.github.leaderlock;

import java.util.concurrent.ThreadLocalRandom;

/**
 * Delays between reconnection attempts: from {@code first}, doubling up to {@code cap}, each drawn
 * at random between half and all of it (so candidates cut off together do not come back together).
 * Nanoseconds.
 */
final class Backoff {
    private final long first;
    private final long cap;
    private int n;

    Backoff(long first, long cap) {
        this.first = first;
        this.cap = cap;
    }

    long next() {
        long d = Math.min(cap, first << Math.min(n, 16));
        n++;
        return d / 2 + ThreadLocalRandom.current().nextLong(d / 2 + 1);
    }

    void reset() {
        n = 0;
    }
}
