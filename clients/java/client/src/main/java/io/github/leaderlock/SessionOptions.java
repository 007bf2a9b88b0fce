package io.github.leaderlock;

import java.time.Duration;

/** How to open a {@link Session}: each setter returns this. */
public final class SessionOptions {
    Duration ttl = Duration.ofSeconds(10);
    String id;
    Duration lockDelay = Duration.ZERO;
    boolean keepValues;
    String schema;

    /** The defaults: ttl 10 s, id host:pid:random, no lock delay. */
    public SessionOptions() {}

    /** The session's length, renewed every ttl/3 (default 10 s). */
    public SessionOptions ttl(Duration ttl) {
        this.ttl = ttl;
        return this;
    }

    /** The holder of every key acquired under the session (default host:pid:random). */
    public SessionOptions id(String id) {
        this.id = id;
        return this;
    }

    /**
     * A key of a session that expired or lost its connection cannot be acquired by anyone for this
     * long (not after a close or a release); default 0, at most 60 s.
     */
    public SessionOptions lockDelay(Duration lockDelay) {
        this.lockDelay = lockDelay;
        return this;
    }

    /** Vacated keys keep their last value. */
    public SessionOptions keepValues(boolean keepValues) {
        this.keepValues = keepValues;
        return this;
    }

    /** The schema that holds leaderlock, as {@link LeaseOptions#schema}. */
    public SessionOptions schema(String schema) {
        this.schema = schema;
        return this;
    }

    SessionOptions copy() {
        SessionOptions o = new SessionOptions();
        o.ttl = ttl;
        o.id = id;
        o.lockDelay = lockDelay;
        o.keepValues = keepValues;
        o.schema = schema;
        return o;
    }
}
