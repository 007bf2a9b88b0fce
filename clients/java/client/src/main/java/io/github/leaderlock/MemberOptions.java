package io.github.leaderlock;

import java.time.Duration;

/**
 * How to be a member of a group ({@link Leaderlock#member}): each setter returns this.
 *
 * <pre>{@code
 * MemberOptions.of("orders").ttl(Duration.ofSeconds(10)).partitions(64)
 *         .onAssigned((partition, term) -> start(partition, term))
 *         .onRevoked(partition -> stopAndDrain(partition))
 * }</pre>
 */
public final class MemberOptions {
    final String group;
    String member;
    Duration ttl = Duration.ofSeconds(10);
    Integer partitions;
    Duration drain;
    Member.OnAssigned onAssigned = (partition, term) -> {};
    Member.OnRevoked onRevoked = partition -> {};
    String schema;

    private MemberOptions(String group) {
        this.group = group;
    }

    /** A member of {@code group}, with the defaults: ttl 10 s, member host:pid:random. */
    public static MemberOptions of(String group) {
        return new MemberOptions(group);
    }

    /** The member's name in the group (default host:pid:random): one live process per name. */
    public MemberOptions member(String member) {
        this.member = member;
        return this;
    }

    /** The membership's length, renewed every ttl/3 (default 10 s). */
    public MemberOptions ttl(Duration ttl) {
        this.ttl = ttl;
        return this;
    }

    /**
     * The group's partition count (1 to 100000), for its first join or its maker's change; null
     * (the default): as it is.
     */
    public MemberOptions partitions(Integer partitions) {
        this.partitions = partitions;
        return this;
    }

    /**
     * How long an owner has to give a revoked partition back, for the group's first join or its
     * maker's change; null (the default): as it is (10 s for a new group).
     */
    public MemberOptions drain(Duration drain) {
        this.drain = drain;
        return this;
    }

    /** Called when a partition becomes this member's, in a term. */
    public MemberOptions onAssigned(Member.OnAssigned onAssigned) {
        this.onAssigned = onAssigned == null ? (partition, term) -> {} : onAssigned;
        return this;
    }

    /**
     * Called when a partition stops being this member's: stop its work and drain it, then return (a
     * revoked partition is given back then).
     */
    public MemberOptions onRevoked(Member.OnRevoked onRevoked) {
        this.onRevoked = onRevoked == null ? partition -> {} : onRevoked;
        return this;
    }

    /** The schema that holds leaderlock, as {@link LeaseOptions#schema}. */
    public MemberOptions schema(String schema) {
        this.schema = schema;
        return this;
    }

    MemberOptions copy() {
        MemberOptions o = new MemberOptions(group);
        o.member = member;
        o.ttl = ttl;
        o.partitions = partitions;
        o.drain = drain;
        o.onAssigned = onAssigned;
        o.onRevoked = onRevoked;
        o.schema = schema;
        return o;
    }
}
