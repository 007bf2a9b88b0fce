package io.github.leaderlock;

import java.time.Duration;

/** What a {@link HistoryWatcher} follows: each setter returns this. */
public final class HistoryOptions {
    Long since;
    String key;
    String keyPrefix;
    Duration poll = Duration.ofSeconds(1);
    String schema;

    /** The defaults: from now on, every key, a read every second besides notifications. */
    public HistoryOptions() {}

    /**
     * Deliver the transitions after this position (a {@link HistoryWatcher#position()} kept from an
     * earlier watcher, or a transition's). Null (the default): those numbered after the watcher's
     * first connection. 0 is the start of the history, while nothing was pruned.
     */
    public HistoryOptions since(Long position) {
        this.since = position;
        return this;
    }

    /** Only this key's transitions (a job's, for runs). Not with keyPrefix. */
    public HistoryOptions key(String key) {
        this.key = key;
        return this;
    }

    /** Only those of the keys starting with this. Not with key. */
    public HistoryOptions keyPrefix(String prefix) {
        this.keyPrefix = prefix;
        return this;
    }

    /** How often to read without a notification; default 1 s, at least 50 ms. */
    public HistoryOptions poll(Duration poll) {
        this.poll = poll;
        return this;
    }

    /** The schema that holds leaderlock, as {@link LeaseOptions#schema}. */
    public HistoryOptions schema(String schema) {
        this.schema = schema;
        return this;
    }

    HistoryOptions copy() {
        HistoryOptions o = new HistoryOptions();
        o.since = since;
        o.key = key;
        o.keyPrefix = keyPrefix;
        o.poll = poll;
        o.schema = schema;
        return o;
    }
}
