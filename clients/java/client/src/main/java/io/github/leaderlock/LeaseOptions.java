package io.github.leaderlock;

import java.time.Duration;

/**
 * How to campaign for a key ({@link Leaderlock#lead}, {@link Elector}): each setter returns this.
 *
 * <pre>{@code
 * new LeaseOptions().ttl(Duration.ofSeconds(10)).timeout(Duration.ofSeconds(30))
 * }</pre>
 */
public final class LeaseOptions {
    Duration ttl = Duration.ofSeconds(10);
    Duration timeout;
    String id;
    String value;
    Duration poll;
    String schema;

    /** The defaults: ttl 10 s, wait for ever, id host:pid:random. */
    public LeaseOptions() {}

    /** The lease's length; renewed every ttl/3 (default 10 s). */
    public LeaseOptions ttl(Duration ttl) {
        this.ttl = ttl;
        return this;
    }

    /**
     * How long {@link Leaderlock#lead} waits for leadership: null (the default) for ever, zero for
     * one try; then {@link NotAcquiredException} (the key held) or {@link UnavailableException}
     * (the server out of reach). Not for an Elector, which campaigns until stopped.
     */
    public LeaseOptions timeout(Duration timeout) {
        this.timeout = timeout;
        return this;
    }

    /**
     * This candidate's id (default host:pid:random): unique among live candidates, and never reused
     * by a new process while an old one's lease may be live.
     */
    public LeaseOptions id(String id) {
        this.id = id;
        return this;
    }

    /** A JSON value announced with the leadership (le_proclaim), or null. */
    public LeaseOptions value(String json) {
        this.value = json;
        return this;
    }

    /**
     * How often a waiting candidate tries again without a notification: by default 1 s, ttl/2 once
     * notifications are seen to arrive, ttl/4 (100 ms to 1 s) where no worker serves the database.
     */
    public LeaseOptions poll(Duration poll) {
        this.poll = poll;
        return this;
    }

    /**
     * The schema that holds leaderlock (default LEADERLOCK_SCHEMA; neither: the one schema that
     * holds it, found on each connection). Every statement names it.
     */
    public LeaseOptions schema(String schema) {
        this.schema = schema;
        return this;
    }

    LeaseOptions copy() {
        LeaseOptions o = new LeaseOptions();
        o.ttl = ttl;
        o.timeout = timeout;
        o.id = id;
        o.value = value;
        o.poll = poll;
        o.schema = schema;
        return o;
    }
}
