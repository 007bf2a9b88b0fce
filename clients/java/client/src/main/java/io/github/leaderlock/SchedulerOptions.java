package io.github.leaderlock;

import java.time.Duration;

/** How a {@link Scheduler} runs its job: each setter returns this. */
public final class SchedulerOptions {
    String id;
    Duration ttl = Duration.ofSeconds(10);
    Duration misfireGrace;
    Duration poll = Duration.ofSeconds(1);
    String schema;

    /** The defaults: id host:pid:random, ttl 10 s, the schedule's misfire grace, poll 1 s. */
    public SchedulerOptions() {}

    /** This replica's id (default host:pid:random). */
    public SchedulerOptions id(String id) {
        this.id = id;
        return this;
    }

    /**
     * How long a claim lasts without renewal (default 10 s): how soon another replica runs the run
     * again after its runner died. Renewed every ttl/3 while the run goes on.
     */
    public SchedulerOptions ttl(Duration ttl) {
        this.ttl = ttl;
        return this;
    }

    /**
     * A run not claimed within this time after its due instant is not run, and recorded missed
     * (once); also how far back a scheduler that starts looks for a run due before it started.
     * Default (null): the period for {@link Schedule#every}, 5 minutes for cron. Negative: no limit
     * (and no look back). A registered schedule has its own (refused here).
     */
    public SchedulerOptions misfireGrace(Duration misfireGrace) {
        this.misfireGrace = misfireGrace;
        return this;
    }

    /**
     * How often to look at a run another replica has claimed (it is claimed again if that claim
     * lapses unfinished), and at a schedule kept in the database; default 1 s.
     */
    public SchedulerOptions poll(Duration poll) {
        this.poll = poll;
        return this;
    }

    /** The schema that holds leaderlock, as {@link LeaseOptions#schema}. */
    public SchedulerOptions schema(String schema) {
        this.schema = schema;
        return this;
    }

    SchedulerOptions copy() {
        SchedulerOptions o = new SchedulerOptions();
        o.id = id;
        o.ttl = ttl;
        o.misfireGrace = misfireGrace;
        o.poll = poll;
        o.schema = schema;
        return o;
    }
}
