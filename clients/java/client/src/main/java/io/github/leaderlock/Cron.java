package io.github.leaderlock;

import java.time.DayOfWeek;
import java.time.Instant;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.LocalTime;
import java.time.ZoneId;
import java.time.ZonedDateTime;
import java.time.zone.ZoneRules;
import java.util.Locale;
import java.util.Map;

/**
 * A cron expression read as the Rust client (the cron crate) and the other clients read it, so that
 * replicas in any language agree on the due instants: five fields (minute hour day-of-month month
 * day-of-week) or six with seconds first, or @hourly, @daily, @weekly, @monthly, @yearly; lists,
 * ranges, steps, month and day names. Refused where dialects differ: days of the week by number
 * (crontab counts Sunday as 0, the Rust client as 1), both day fields restricted (crontab runs on
 * either, the Rust client on both), L, W and #, a year field. In a time zone: a local time that
 * does not exist (a daylight saving gap) is skipped, one that occurs twice is due once, at the
 * first.
 */
final class Cron {
    private static final Map<String, String> SHORTHANDS =
            Map.of(
                    "@yearly", "0 0 0 1 1 *",
                    "@monthly", "0 0 0 1 * *",
                    "@weekly", "0 0 0 * * SUN",
                    "@daily", "0 0 0 * * *",
                    "@hourly", "0 0 * * * *");
    private static final String[] MONTHS = {
        "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"
    };
    private static final String[] DAYS = {"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"};

    /** How far ahead a due instant is looked for (a leap day's runs are 4 to 8 years apart). */
    private static final int YEARS = 30;

    private final String text;
    private final ZoneId zone;
    private final ZoneRules rules;
    private final boolean[] seconds;
    private final boolean[] minutes;
    private final boolean[] hours;
    private final boolean[] days; // 1..31
    private final boolean[] months; // 1..12
    private final boolean[] weekdays; // 0 (Sunday)..6
    private final boolean domRestricted;
    private final boolean dowRestricted;

    private Cron(String text, ZoneId zone, String[] f) {
        this.text = text;
        this.zone = zone;
        this.rules = zone.getRules();
        this.seconds = field(f[0], "second", 0, 59, null);
        this.minutes = field(f[1], "minute", 0, 59, null);
        this.hours = field(f[2], "hour", 0, 23, null);
        this.days = field(f[3], "day-of-month", 1, 31, null);
        this.months = field(f[4], "month", 1, 12, MONTHS);
        this.weekdays = field(f[5], "day-of-week", 0, 6, DAYS);
        this.domRestricted = !f[3].equals("*");
        this.dowRestricted = !f[5].equals("*");
    }

    static Cron parse(String expr, String tz) {
        if (expr == null || expr.isBlank()) {
            throw new BadArgumentException(
                    "leaderlock: a cron expression must be a non-empty string");
        }
        ZoneId zone;
        try {
            zone = ZoneId.of(tz == null ? "UTC" : tz);
        } catch (RuntimeException e) {
            throw new BadArgumentException(
                    "leaderlock: time zone "
                            + Text.quote(tz)
                            + ": not found ("
                            + e.getMessage()
                            + ")");
        }
        String text = expr.strip();
        String[] f;
        if (SHORTHANDS.containsKey(text)) {
            f = SHORTHANDS.get(text).split(" ");
        } else {
            String[] given = text.split("\\s+");
            if (given.length == 5) {
                f = new String[6];
                f[0] = "0";
                System.arraycopy(given, 0, f, 1, 5);
            } else if (given.length == 7) {
                throw bad(expr, "a year field (seven fields) is not supported here");
            } else if (given.length == 6) {
                f = given;
            } else {
                throw bad(
                        expr,
                        "five fields (minute hour day-of-month month day-of-week), or six with seconds first");
            }
        }
        f[3] = f[3].replace("?", "*");
        f[5] = f[5].replace("?", "*");
        for (String term : f[5].split(",")) {
            String range = term.split("/", 2)[0];
            if (range.chars().anyMatch(Character::isDigit)
                    || range.contains("#")
                    || range.contains("L")) {
                throw bad(
                        expr,
                        "name the days of the week (SUN, MON-FRI): their numbers differ between cron"
                                + " dialects (crontab counts Sunday as 0 or 7, the Rust client as 1); numbers"
                                + " are refused, and so are L and #");
            }
        }
        if (f[3].chars().anyMatch(Character::isLetter)) {
            throw bad(expr, "L and W are not supported in the day of the month");
        }
        if (!f[3].equals("*") && !f[5].equals("*")) {
            throw bad(
                    expr,
                    "restrict the day of the month or the day of the week, not both: crontab runs on"
                            + " either, the Rust client on both");
        }
        Cron c;
        try {
            c = new Cron(expr, zone, f);
        } catch (IllegalArgumentException e) {
            throw bad(expr, e.getMessage());
        }
        if (c.domRestricted && !c.someMonthHasADay()) {
            throw bad(expr, "the day-of-month never occurs in the months given");
        }
        return c;
    }

    private boolean someMonthHasADay() {
        int[] longest = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
        for (int m = 1; m <= 12; m++) {
            for (int d = 1; months[m] && d <= longest[m - 1]; d++) {
                if (days[d]) {
                    return true;
                }
            }
        }
        return false;
    }

    private static BadArgumentException bad(String expr, String why) {
        return new BadArgumentException(
                "leaderlock: cron expression " + Text.quote(expr) + ": " + why);
    }

    private static boolean[] field(String spec, String name, int min, int max, String[] names) {
        boolean[] set = new boolean[max + 1];
        for (String term : spec.split(",", -1)) {
            if (term.isEmpty()) {
                throw new IllegalArgumentException("an empty list item in the " + name);
            }
            String[] rs = term.split("/", -1);
            if (rs.length > 2) {
                throw new IllegalArgumentException("two steps in the " + name + ": " + term);
            }
            int step = 1;
            if (rs.length == 2) {
                step = number(rs[1], "the step of the " + name, 1, Integer.MAX_VALUE);
            }
            int lo;
            int hi;
            if (rs[0].equals("*")) {
                lo = min;
                hi = max;
            } else if (rs[0].contains("-")) {
                String[] ab = rs[0].split("-", -1);
                if (ab.length != 2) {
                    throw new IllegalArgumentException("a bad range in the " + name + ": " + rs[0]);
                }
                lo = value(ab[0], name, min, max, names);
                hi = value(ab[1], name, min, max, names);
                if (lo > hi) {
                    throw new IllegalArgumentException(
                            "a range that goes down in the " + name + ": " + rs[0]);
                }
            } else {
                lo = value(rs[0], name, min, max, names);
                hi = rs.length == 2 ? max : lo;
            }
            for (int v = lo; v <= hi; v += step) {
                set[v] = true;
                if (v > max - step) {
                    break;
                }
            }
        }
        return set;
    }

    private static int value(String s, String name, int min, int max, String[] names) {
        if (names != null) {
            String u = s.toUpperCase(Locale.ROOT);
            for (int i = 0; i < names.length; i++) {
                if (names[i].equals(u)) {
                    return i + min;
                }
            }
        }
        return number(s, "the " + name, min, max);
    }

    private static int number(String s, String what, int min, int max) {
        int v;
        try {
            v = Integer.parseInt(s);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(what + ": " + Text.quote(s) + " is not understood");
        }
        if (v < min || v > max) {
            throw new IllegalArgumentException(
                    what + ": " + v + " is out of range (" + min + " to " + max + ")");
        }
        return v;
    }

    ZoneId zone() {
        return zone;
    }

    /** The first due instant strictly after {@code t}, or null when there is none ahead. */
    Instant nextAfter(Instant t) {
        ZonedDateTime at = t.atZone(zone);
        LocalDateTime from = at.toLocalDateTime().withNano(0);
        LocalDate day = from.toLocalDate();
        LocalDate last = day.plusYears(YEARS);
        boolean first = true;
        for (; !day.isAfter(last); day = day.plusDays(1), first = false) {
            if (!months[day.getMonthValue()]) {
                day = day.withDayOfMonth(day.lengthOfMonth()); // the next month
                continue;
            }
            if (!days[day.getDayOfMonth()]) {
                continue;
            }
            DayOfWeek w = day.getDayOfWeek();
            if (!weekdays[w.getValue() % 7]) {
                continue;
            }
            for (int h = first ? from.getHour() : 0; h < 24; h++) {
                if (!hours[h]) {
                    continue;
                }
                boolean sameHour = first && h == from.getHour();
                for (int m = sameHour ? from.getMinute() : 0; m < 60; m++) {
                    if (!minutes[m]) {
                        continue;
                    }
                    boolean sameMinute = sameHour && m == from.getMinute();
                    for (int s = sameMinute ? from.getSecond() : 0; s < 60; s++) {
                        if (!seconds[s]) {
                            continue;
                        }
                        LocalDateTime local = LocalDateTime.of(day, LocalTime.of(h, m, s));
                        if (rules.getValidOffsets(local).isEmpty()) {
                            continue; // a local time that does not exist: skipped
                        }
                        // one that occurs twice: its first instant (the earlier offset)
                        Instant i =
                                ZonedDateTime.ofLocal(local, zone, null)
                                        .withEarlierOffsetAtOverlap()
                                        .toInstant();
                        if (i.isAfter(t)) {
                            return i;
                        }
                    }
                }
            }
        }
        return null;
    }

    @Override
    public String toString() {
        return text + " in " + zone;
    }
}
