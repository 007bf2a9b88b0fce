package io.github.leaderlock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Due instants (no server): every period at multiples of it since the Unix epoch; cron in a time
 * zone by the Rust client's rules (the vectors of crates/client/src/schedule.rs and of the Python
 * client's tests, across daylight saving in Paris); the expressions refused because dialects read
 * them differently.
 */
class ScheduleTest {
    private static List<String> following(Schedule s, String start, int n) {
        List<String> out = new ArrayList<>();
        Instant t = Instant.parse(start);
        for (int i = 0; i < n; i++) {
            t = s.nextAfter(t).orElseThrow();
            out.add(t.toString());
        }
        return out;
    }

    @Test
    void everyPeriodIsAlignedToTheEpoch() {
        Schedule s = Schedule.every(Duration.ofMinutes(5));
        assertEquals(
                List.of("2026-11-27T10:05:00Z", "2026-11-27T10:10:00Z"),
                following(s, "2026-11-27T10:02:03Z", 2));
        assertEquals(
                Instant.parse("2026-11-27T10:05:00Z"),
                s.atOrAfter(Instant.parse("2026-11-27T10:05:00Z")).orElseThrow());
        Schedule ms = Schedule.every(Duration.ofMillis(300));
        assertEquals(
                List.of("2026-11-27T10:00:00.300Z", "2026-11-27T10:00:00.600Z"),
                following(ms, "2026-11-27T10:00:00.250001Z", 2));
        assertEquals(Duration.ofMinutes(5), s.defaultGrace().orElseThrow());
        for (Duration bad :
                List.of(
                        Duration.ZERO,
                        Duration.ofMillis(-1),
                        Duration.ofNanos(1_500_000),
                        Duration.ofNanos(500_000))) {
            assertThrows(BadArgumentException.class, () -> Schedule.every(bad), bad.toString());
        }
        Schedule.every(Duration.ofMillis(1));
    }

    @Test
    void cronInATimeZoneAcrossDaylightSaving() {
        // 02:30 every day in Paris: on 2026-03-29 that local time does not exist and is skipped,
        // on 2026-10-25 it occurs twice and is due once, at the first
        Schedule s = Schedule.cron("30 2 * * *", "Europe/Paris");
        assertEquals(
                List.of("2026-03-28T01:30:00Z", "2026-03-30T00:30:00Z", "2026-03-31T00:30:00Z"),
                following(s, "2026-03-27T12:00:00Z", 3));
        assertEquals(
                List.of("2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z", "2026-10-27T01:30:00Z"),
                following(s, "2026-10-24T12:00:00Z", 3));
        // every half hour: the hour that does not exist is skipped (no gap in UTC); the hour that
        // occurs twice runs once, the first time
        Schedule half = Schedule.cron("*/30 * * * *", "Europe/Paris");
        assertEquals(
                List.of("2026-03-29T00:30:00Z", "2026-03-29T01:00:00Z", "2026-03-29T01:30:00Z"),
                following(half, "2026-03-29T00:00:00Z", 3));
        assertEquals(
                List.of(
                        "2026-10-25T00:00:00Z",
                        "2026-10-25T00:30:00Z",
                        "2026-10-25T02:00:00Z",
                        "2026-10-25T02:30:00Z"),
                following(half, "2026-10-24T23:30:00Z", 4));
        // from inside the hour that occurs twice, its second time: nothing before the end of it
        assertEquals(List.of("2026-10-25T02:00:00Z"), following(half, "2026-10-25T01:15:00Z", 1));
        assertEquals(Duration.ofMinutes(5), s.defaultGrace().orElseThrow());
        assertTrue(s.period().isEmpty());
    }

    @Test
    void fiveFieldsMeanMinutesSixSecondsFirst() {
        assertEquals(
                List.of("2026-11-28T03:00:00Z"),
                following(Schedule.cron("0 3 * * *", "UTC"), "2026-11-27T10:00:00Z", 1));
        assertEquals(
                List.of("2026-11-27T10:00:20Z", "2026-11-27T10:00:40Z"),
                following(Schedule.cron("*/20 * * * * *"), "2026-11-27T10:00:05Z", 2));
        // days by name, with a step: Monday, Wednesday, Friday (2026-11-27 is a Friday)
        assertEquals(
                List.of("2026-11-30T00:00:00Z", "2026-12-02T00:00:00Z", "2026-12-04T00:00:00Z"),
                following(Schedule.cron("0 0 * * mon-FRI/2"), "2026-11-27T10:00:00Z", 3));
        assertEquals(
                List.of("2026-11-29T00:00:00Z"),
                following(Schedule.cron("@weekly"), "2026-11-27T10:00:00Z", 1));
        assertEquals(
                List.of("2026-12-01T12:00:00Z"),
                following(Schedule.cron("0 0 12 1 * ?"), "2026-11-27T10:00:00Z", 1));
        assertEquals(
                List.of("2026-12-01T06:00:00Z", "2026-12-11T06:00:00Z"),
                following(Schedule.cron("0 6 */10 * *"), "2026-11-27T10:00:00Z", 2));
        assertEquals(
                List.of("2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"),
                following(Schedule.cron("0 0 29 FEB *"), "2026-11-27T10:00:00Z", 2));
    }

    @Test
    void expressionsReadDifferentlyElsewhereAreRefused() {
        String[][] cases = {
            {"61 * * * *", "minute"},
            {"0 3 * * 1", "name the days"}, // Monday in crontab, Sunday in Rust
            {"0 3 * * 1-5", "name the days"},
            {"0 3 * * MON#1", "name the days"},
            {"0 3 1 * MON", "not both"}, // either in crontab, both in Rust
            {"0 3 */2 * MON", "not both"},
            {"0 0 L * *", "L and W"},
            {"0 0 0 * * * 2026", "year"},
            {"0 0 30 2 *", "day-of-month"},
            {"* * *", "five fields"},
            {"", "non-empty"},
            {"0 0 * * FRI-MON", "goes down"},
        };
        for (String[] c : cases) {
            BadArgumentException e =
                    assertThrows(BadArgumentException.class, () -> Schedule.cron(c[0]), c[0]);
            assertTrue(e.getMessage().contains(c[1]), c[0] + ": " + e.getMessage());
        }
        assertThrows(BadArgumentException.class, () -> Schedule.cron("0 3 * * *", "Mars/Olympus"));
    }

    @Test
    void aRegisteredScheduleHasNoInstantsHere() {
        Schedule r = Schedule.registered();
        assertTrue(r.isRegistered());
        assertFalse(r.nextAfter(Instant.now()).isPresent());
        assertTrue(r.defaultGrace().isEmpty());
        assertThrows(
                BadArgumentException.class,
                () ->
                        new Scheduler(
                                "host=127.0.0.1",
                                "j",
                                r,
                                new SchedulerOptions().misfireGrace(Duration.ofSeconds(5))));
        assertThrows(
                BadArgumentException.class,
                () -> new Scheduler("host=127.0.0.1", "", r, new SchedulerOptions()));
        assertThrows(
                BadArgumentException.class,
                () ->
                        new Scheduler(
                                "host=127.0.0.1",
                                "j",
                                r,
                                new SchedulerOptions().ttl(Duration.ZERO)));
    }

    @Test
    void aDetailIsCutAtACharacterWithin1000Bytes() {
        String d = Text.cut("ValueError: x" + "é".repeat(700), Scheduler.DETAIL_LIMIT);
        assertEquals(999, d.getBytes(java.nio.charset.StandardCharsets.UTF_8).length);
        assertEquals("a\uFFFDb", Text.cut("a\0b", 10));
    }
}
