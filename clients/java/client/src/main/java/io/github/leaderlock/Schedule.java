package io.github.leaderlock;

import java.time.Duration;
import java.time.Instant;
import java.util.Optional;

/**
 * When a job is due: {@link #every(Duration)}, {@link #cron(String, String)}, or {@link
 * #registered()} (the job's schedule kept in the database). Due instants are on the server's lease
 * clock; every replica, in any language, computes the same ones.
 */
public final class Schedule {
    private final Long periodMicros;
    private final Cron cron;
    private final boolean registered;

    private Schedule(Long periodMicros, Cron cron, boolean registered) {
        this.periodMicros = periodMicros;
        this.cron = cron;
        this.registered = registered;
    }

    /**
     * Every {@code period}: whole milliseconds, at least one. Due at the multiples of the period
     * since the Unix epoch, so every replica computes the same instants.
     */
    public static Schedule every(Duration period) {
        if (period == null || period.toNanos() < 1_000_000 || period.toNanos() % 1_000_000 != 0) {
            throw new BadArgumentException(
                    "leaderlock: a period must be whole milliseconds, at least 1 ms (got "
                            + period
                            + ")");
        }
        return new Schedule(period.toNanos() / 1000, null, false);
    }

    /**
     * A cron expression in time zone {@code tz} (an IANA name: "Europe/Paris", "UTC"): five fields
     * (minute hour day-of-month month day-of-week), or six with seconds first, or @hourly, @daily,
     *
     * @weekly, @monthly, @yearly. Lists, ranges, steps, month and day names (JAN, MON-FRI). The
     *     Rust client's rules, so that replicas in any language agree: across daylight saving
     *     changes, a local time that does not exist is skipped and one that occurs twice is due
     *     once, at the first; days of the week by name only; the day of the month or the day of the
     *     week restricted, not both; no L, W or #, no year field. {@link BadArgumentException}
     *     otherwise.
     */
    public static Schedule cron(String expr, String tz) {
        return new Schedule(null, Cron.parse(expr, tz), false);
    }

    /** A cron expression in UTC. */
    public static Schedule cron(String expr) {
        return cron(expr, "UTC");
    }

    /**
     * The job's schedule kept in the database (contract 24: made or changed by le_schedule, paused
     * by le_pause_schedule): each due instant is read from the server (le_next_due) every poll, so
     * a change or a pause is followed without a restart; its misfire grace is the schedule's.
     */
    public static Schedule registered() {
        return new Schedule(null, null, true);
    }

    /** Whether the due instants come from the database. */
    public boolean isRegistered() {
        return registered;
    }

    /** The period of an every schedule, else empty. */
    public Optional<Duration> period() {
        return periodMicros == null
                ? Optional.empty()
                : Optional.of(Duration.ofNanos(periodMicros * 1000));
    }

    /**
     * The misfire grace when none is given: the period, or 5 minutes for cron (as leaderlock run);
     * empty for a registered schedule (the database's).
     */
    public Optional<Duration> defaultGrace() {
        if (registered) {
            return Optional.empty();
        }
        return Optional.of(
                periodMicros != null
                        ? Duration.ofNanos(periodMicros * 1000)
                        : Duration.ofMinutes(5));
    }

    /**
     * The first due instant strictly after {@code t}; empty for a registered schedule (the server
     * says).
     */
    public Optional<Instant> nextAfter(Instant t) {
        if (registered) {
            return Optional.empty();
        }
        if (periodMicros != null) {
            long us =
                    Math.addExact(
                            Math.multiplyExact(t.getEpochSecond(), 1_000_000L), t.getNano() / 1000);
            long next = (Math.floorDiv(us, periodMicros) + 1) * periodMicros;
            return Optional.of(
                    Instant.EPOCH
                            .plusNanos(0)
                            .plusSeconds(Math.floorDiv(next, 1_000_000L))
                            .plusNanos(Math.floorMod(next, 1_000_000L) * 1000));
        }
        return Optional.ofNullable(cron.nextAfter(t));
    }

    /** The first due instant at or after {@code t}. */
    public Optional<Instant> atOrAfter(Instant t) {
        return nextAfter(t.minusNanos(1000));
    }

    @Override
    public String toString() {
        if (registered) {
            return "Schedule.registered()";
        }
        if (periodMicros != null) {
            return "Schedule.every(" + Duration.ofNanos(periodMicros * 1000) + ")";
        }
        return "Schedule.cron(" + cron + ")";
    }
}
