#!/usr/bin/env python3
"""The cases on which tests/portable/sql/calendar.sql compares the portable
edition's calendar (contract 24, PL/pgSQL) with the compiled edition's
(crates/protocol/src/calendar.rs). make.sh runs it twice: without an
argument it prints the cases, one per line, for main.rs to answer; with
the answers' file it prints calendar.sql."""
import sys

# P: a cron expression and a time zone, accepted or refused (and why).
# N: instants stepped from an instant (expression, time zone, after, count).
# E: the same every period (microseconds, after, count).
# J: microseconds as the seconds a JSON payload carries (serde_json's f64).
P = [
 ("0 3 * * *","UTC"),("30 2 * * *","Europe/Paris"),("* * * * * *","UTC"),("*/10 * * * * *","UTC"),
 ("0 3 * * MON-FRI","UTC"),("0 3 1,15 * ?","UTC"),("@daily","UTC"),("@weekly","UTC"),("@monthly","UTC"),
 ("@yearly","UTC"),("@hourly","UTC"),("  @daily  ","UTC"),("0 3 * * */2","UTC"),("0 0 12 * * SUN,sat","UTC"),
 ("0 0 12 ? JAN-MAR,DEC *","UTC"),("15-45/10 * * * *","UTC"),("5/20 * * * *","UTC"),("0 9-17/2 * * mon-fri","UTC"),
 ("0 0 29 FEB *","UTC"),("0 0 31 * *","UTC"),("5* * * * *","UTC"),("0 0 1 jan,Jul ?","UTC"),("0 */15 * * * *","UTC"),
 ("0 0 0 1 1 ?","UTC"),("1,2,3/5 * * * * *","UTC"),("0 3 * * * *","UTC"),("0 3 * * SUN-SAT/2","UTC"),
 ("0 0 12 * * Mon-Thurs/2","UTC"),("0 0 12 * * tues","UTC"),("0 0 12 * * Thursday","UTC"),
 ("0\t3 * * *","UTC"),("0 3 * * *\n","UTC"),("0 3 * * MON\u00a0","UTC"),("0 1 * *  *","UTC"),
 ("0 0 0 * * ?","UTC"),("0 0 0 ? * ?","UTC"),("*/1 * * * * *","UTC"),("0 0 0 1-31/2 * *","UTC"),
 ("0 0 0 * FEB-NOV/3 *","UTC"),("0 0 0 * * MON-SUN","UTC"),("0 0 0 * * WED-MON","UTC"),
 # refused by calendar.rs
 ("0 3 * * 1","UTC"),("0 3 * * 1-5","UTC"),("0 3 1 * MON","UTC"),("0 3 L * *","UTC"),("0 3 * * MON#2","UTC"),
 ("0 0 3 * * * 2027","UTC"),("0 3 * *","UTC"),("","UTC"),("   ","UTC"),("0 0 1 2 3 4 5 6","UTC"),
 ("0 3 * * 5L","UTC"),("0 3 1W * *","UTC"),("0 0 0 1 * *","UTC"),("0 0 0 1 * MON","UTC"),("0 3 * * L","UTC"),
 ("0 3 * * SAT/1,2","UTC"),("0 0 1-X * *","UTC"),
 # refused by the crate
 ("61 * * * *","UTC"),("0 61 * * * *","UTC"),("0 0 24 * * *","UTC"),("0 0 0 32 * *","UTC"),("0 0 0 0 * *","UTC"),
 ("0 0 0 * 13 *","UTC"),("0 0 0 * 0 *","UTC"),("*/0 * * * *","UTC"),("*/61 * * * * *","UTC"),("5-3 * * * *","UTC"),
 ("0-65 * * * * *","UTC"),("0 1-X * * *","UTC"),("0 3 * * MON/2","UTC"),("0 3 * * FOO","UTC"),("0 3 * FOO *","UTC"),
 ("0 3 * JAN-FOO *","UTC"),("0 3 * FOO-JAN *","UTC"),("0 3 * DEC-JAN *","UTC"),("0 3 * * SAT-MON","UTC"),
 ("0 MON * * *","UTC"),("0 3 * * TUE-XX","UTC"),("? * * * *","UTC"),("* ? * * *","UTC"),("0 0 ? * * *","UTC"),
 ("99999999999 * * * *","UTC"),("4294967296 * * * *","UTC"),("4294967295 * * * *","UTC"),("1,,2 * * * *","UTC"),
 (",1 * * * *","UTC"),("1, 2 * * *","UTC"),("@dailyBla","UTC"),("@daily * * * * *","UTC"),("@every 5m","UTC"),
 ("0 */25 * * *","UTC"),("0 0 */32 * *","UTC"),("0 0 * */13 *","UTC"),("0 0 * * */8","UTC"),("0 0 * * */0","UTC"),
 ("5/0 * * * *","UTC"),("70/5 * * * *","UTC"),("0 0 0 * 12-1 *","UTC"),("0 0 0 * NOV-FEB *","UTC"),
 ("0 0 0 * JAN-13 *","UTC"),("0 3 * * M\u00d6N","UTC"),("\u00ff 3 * * *","UTC"),('0 3 * * "MON"',"UTC"),
 ("0 3 * * MON\\","UTC"),("* * * * * * *","UTC"),("1-2-3 * * * *","UTC"),("1/2/3 * * * *","UTC"),
 ("*/2/3 * * * *","UTC"),("**/2 * * * *","UTC"),("1-*/2 * * * *","UTC"),("0 0 0 * * MON-","UTC"),
 ("0 0 0 * JAN- *","UTC"),("0 0 0 * JAN-/2 *","UTC"),("0 0 0 * JAN/2 *","UTC"),("0 0 0 * FEB-NOV/0 *","UTC"),
 ("0 0 0 * FEB-NOV/13 *","UTC"),("0 0 0 * JAN,FEB,XYZ *","UTC"),("0 0 0 * JAN,FEB,13 *","UTC"),
 ("0 0 0 * JAN,,FEB *","UTC"),("0 0 0 1-40/2 * *","UTC"),("0 0 0 40/2 * *","UTC"),("* 1,2,60 * * * *","UTC"),
 ("* 60,1 * * * *","UTC"),("0 0 0 * * mon,Xyz","UTC"),("0 0 0 * * SUN-SATURDAY","UTC"),("0 0 0 * * FRIDAY-TUE","UTC"),
 ("0 0 0 ? ? ?","UTC"),("0 0 0 1 * ? 2030","UTC"),("0 0 0 1 * *x","UTC"),("0 0 0 1 * *,","UTC"),
 ("0 0 0 1 *1 *","UTC"),("00 03 * * *","UTC"),("0 0 0 1 */12 *","UTC"),
 # time zones
 ("0 3 * * *","Mars/Olympus"),("0 3 * * *","europe/paris"),("0 3 * * *","EST5EDT"),("0 3 * * *","+03"),
 ("0 3 * * *",""),("0 3 * * *","Etc/GMT+5"),("0 3 * * *","US/Eastern"),("0 3 * * *","Factory"),
 ("61 * * * *","Mars/Olympus"),("0 3 * * *","Europe/Kyiv"),("0 3 * * *","America/Ciudad_Juarez"),
 ("0 3 * * *","localtime"),("0 3 * * *","posixrules"),("0 3 * * *","GMT"),("0 3 * * *","Z"),
 ("0 3 * * *",'Eu"rope'),
]
N = [
 ("30 2 * * *","Europe/Paris","2026-03-27T12:00:00Z",4),("30 2 * * *","Europe/Paris","2026-10-24T12:00:00Z",4),
 ("30 2 * * *","Europe/Paris","2026-10-25T00:45:00Z",2),("30 2 * * *","Europe/Paris","2026-10-25T01:10:00Z",2),
 ("30 2 * * *","Europe/Paris","2026-10-25T00:30:00Z",2),("30 2 * * *","Europe/Paris","2026-10-25T01:30:00Z",2),
 ("30 2 * * *","Europe/Paris","2026-10-25T00:29:59.999999Z",2),
 ("* * * * * *","Europe/Paris","2026-10-25T00:59:55Z",20),("* * * * * *","Europe/Paris","2026-03-29T00:59:55Z",10),
 ("30 * * * * *","Europe/Paris","2026-10-25T00:58:00Z",8),("0 * * * *","Europe/Paris","2026-10-24T23:30:00Z",5),
 ("*/20 * * * *","Europe/Paris","2026-10-25T00:30:00Z",10),
 ("0 */30 * * * *","Australia/Lord_Howe","2026-04-04T14:00:00Z",8),("0 */30 * * * *","Australia/Lord_Howe","2026-10-03T14:00:00Z",8),
 ("0 30 1 * * *","Australia/Lord_Howe","2026-04-03T00:00:00Z",4),
 ("0 0 * * *","America/Sao_Paulo","1999-10-02T00:00:00Z",4),("0 0 * * *","Pacific/Apia","2011-12-28T00:00:00Z",5),
 ("0 0 2 * * *","America/New_York","2026-03-07T00:00:00Z",3),("0 30 1 * * *","America/New_York","2026-10-31T00:00:00Z",4),
 ("0 0 12 * * MON-FRI","Asia/Kolkata","2026-11-27T10:00:00Z",6),("@weekly","UTC","2026-11-27T10:00:00Z",3),
 ("@monthly","Europe/London","2026-01-15T00:00:00Z",14),("@yearly","UTC","2096-06-01T00:00:00Z",6),
 ("0 0 29 FEB *","UTC","2026-01-01T00:00:00Z",3),("0 0 31 FEB *","UTC","2026-01-01T00:00:00Z",1),
 ("15-45/10 * * * *","UTC","2026-11-27T10:00:00.5Z",6),("5/20 * * * *","UTC","2026-11-27T10:00:00Z",5),
 ("0 9-17/2 * * mon-fri","Europe/Berlin","2026-12-24T00:00:00Z",10),("*/10 * * * * *","UTC","2026-11-27T10:00:00.000001Z",3),
 ("0 0 1 jan,Jul ?","Asia/Tokyo","2026-05-01T00:00:00Z",4),("1,2,3/5 * * * * *","UTC","2026-11-27T10:00:00Z",15),
 ("5* * * * *","UTC","2026-11-27T10:00:00Z",3),("0 3 * * *","UTC","1969-12-31T00:00:00Z",3),
 ("0 0 0 * * *","UTC","2100-12-30T00:00:00Z",3),("* * * * * *","UTC","2026-11-27T10:00:00.999999Z",3),
 ("0 0 * * * *","Europe/Dublin","2026-10-24T23:30:00Z",4),("0 0 * * * *","Europe/Dublin","2026-03-29T00:30:00Z",3),
 ("0 0 * * *","Asia/Tehran","2022-03-20T00:00:00Z",3),("0 30 2 * * *","Europe/Paris","2026-03-28T00:00:00Z",3),
 ("0 0 * * *","America/Santiago","2026-09-04T00:00:00Z",4),("0 0 * * *","America/Santiago","2026-04-03T00:00:00Z",4),
 ("30 2 * * *","Europe/Paris","2040-03-24T12:00:00Z",3),("30 2 * * *","Europe/Paris","2040-10-27T12:00:00Z",3),
 ("30 2 * * *","America/New_York","2060-03-10T00:00:00Z",3),("0 0 12 * * SUN","Pacific/Chatham","2026-04-01T00:00:00Z",3),
 ("0 45 2 * * *","Pacific/Chatham","2026-09-26T00:00:00Z",3),("0 45 2 * * *","Pacific/Chatham","2026-04-04T00:00:00Z",3),
 ("@hourly","Asia/Kathmandu","2026-11-27T10:00:00Z",3),("@daily","Europe/Moscow","2011-03-26T00:00:00Z",3),
 ("0 0 3 * * *","Europe/Moscow","2014-10-25T00:00:00Z",3),("0 0 1 * * *","Europe/Moscow","2014-10-25T00:00:00Z",3),
 ("0 0 0 1 1 ?","America/Caracas","2007-12-01T00:00:00Z",2),("* * * * * *","Australia/Lord_Howe","2026-04-04T14:59:58Z",6),
 ("0 0 0 L * *","UTC","2026-01-01T00:00:00Z",1),
]
E = [(300000000,"2026-11-27T10:02:03Z",3),(300000000,"2026-11-27T10:05:00Z",2),(1000000,"1969-12-31T23:59:59.5Z",3),
     (1500,"2026-11-27T10:00:00Z",1),(86400000000,"2026-11-27T10:00:00Z",2),(7000,"2026-11-27T10:00:00.000001Z",3),
     (604800000000,"2026-11-27T10:00:00Z",2),(1000000000000000,"2026-11-27T10:00:00Z",2),(1001000,"2026-11-27T10:00:00Z",3),
     (1000000,"2026-11-27T10:00:00Z",2),(3600000000,"1960-05-05T05:05:05.123456Z",2)]
J = [0, 1, 10, 100, 999, 1000, 12345, 100000, 999999, 1000000, 1000001, 1500000, 2000000, 2500000,
     30000000, 128620000, 86400000000, 123456789, 3600000000000, 12345678901234567, 9223372036854775807]


def esc(s):
    return s.replace('\\', '\\\\').replace('\n', '\\n').replace('\t', '\\t')


def lines():
    for e, tz in P:
        yield f"P\t{esc(e)}\t{tz}"
    for e, tz, a, c in N:
        yield f"N\t{esc(e)}\t{tz}\t{a}\t{c}"
    for p, a, c in E:
        yield f"E\t{p}\t{a}\t{c}"
    for us in J:
        yield f"J\t{us}"


SQL_HEAD = """-- Contract 24's calendar: the portable edition's (PL/pgSQL: _le_calendar,
-- _le_next_after, portable/leaderlock.sql) against the compiled edition's
-- (crates/protocol/src/calendar.rs: the cron crate 0.17 and chrono-tz
-- 0.10.4, as every Rust replica computes it), case by case: cron
-- expressions accepted or refused, with the same message (P); instants
-- stepped from an instant (N: cron in UTC and in time zones across
-- daylight saving changes both ways, at midnight, of 30 minutes, a day
-- skipped, local times that occur twice, the years' bound; E: every
-- period); and seconds as serde_json writes them in the payloads of
-- contract 25 (J). The answers in column rust are the Rust calendar's:
-- tests/portable/calendar/make.sh regenerates this file from cases.py.
-- Any row of the first query is a difference.
SET TIME ZONE 'UTC';
CREATE TEMP TABLE calendar_cases (kind text, arg text, tz text, after timestamptz, steps integer, rust text);
COPY calendar_cases FROM stdin;
"""

SQL_TAIL = r"""\.
CREATE FUNCTION pg_temp.stepped(every_us numeric, masks bigint[], years integer[], tz text,
                                after timestamptz, steps integer) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    t timestamptz := after;
    got text[] := '{}';
BEGIN
    FOR i IN 1 .. steps LOOP
        t := _le_next_after(every_us, masks, years, tz, t);
        IF t IS NULL THEN
            RETURN array_to_string(got || 'none'::text, ',');
        END IF;
        got := got || _le_rfc3339(t);
    END LOOP;
    RETURN array_to_string(got, ',');
END
$$;
SELECT c.kind, c.arg, c.tz, c.after, c.rust, p.portable
  FROM calendar_cases c
 CROSS JOIN LATERAL (
       SELECT CASE c.kind
           WHEN 'P' THEN coalesce(k.why, 'ok')
           WHEN 'J' THEN _le_json_seconds(c.arg::numeric)
           ELSE coalesce('error: ' || k.why,
                         pg_temp.stepped(k.every_us, k.masks, k.years, c.tz, c.after, c.steps)) END AS portable
         FROM _le_calendar(CASE WHEN c.kind = 'E' THEN _le_us_interval(c.arg::numeric) END,
                           CASE WHEN c.kind IN ('P', 'N') THEN c.arg END, c.tz) k) p
 WHERE p.portable IS DISTINCT FROM c.rust;
SELECT kind, count(*) AS cases, count(*) FILTER (WHERE rust LIKE 'cron expression%' OR rust LIKE 'time zone%'
                                                   OR rust LIKE 'error%') AS refused
  FROM calendar_cases GROUP BY kind ORDER BY kind;
-- Refused by le_schedule with those messages (22023), nothing written.
SELECT le_schedule('cal-bad', cron => '61 * * * *');
SELECT le_schedule('cal-bad', cron => '0 3 * * 1');
SELECT le_schedule('cal-bad', cron => '0 3 * * MON/2');
SELECT le_schedule('cal-bad', cron => '0 3 * * MON-FRI', tz => 'europe/paris');
SELECT count(*) AS nothing_made FROM leaderlock_schedules WHERE job = 'cal-bad';
-- calendar.rs's own unit tests, through le_next_due: 02:30 in Paris, skipped
-- the night it does not exist, once the night it occurs twice (at the
-- first); every second through the night clocks go back, always forward.
SELECT le_schedule('cal-paris', cron => '30 2 * * *', tz => 'Europe/Paris') IS NOT NULL AS made;
SELECT le_next_due('cal-paris', '2026-03-27 12:00:00+00') AS spring_1,
       le_next_due('cal-paris', '2026-03-28 01:30:00+00') AS spring_2,
       le_next_due('cal-paris', '2026-10-24 12:00:00+00') AS autumn_1,
       le_next_due('cal-paris', '2026-10-25 00:30:00+00') AS autumn_2;
SELECT le_schedule('cal-paris', cron => '* * * * * *', tz => 'Europe/Paris') IS NOT NULL AS changed;
WITH RECURSIVE s(n, t) AS (
    SELECT 0, '2026-10-25 00:59:55+00'::timestamptz
    UNION ALL
    SELECT n + 1, le_next_due('cal-paris', t) FROM s WHERE n < 20)
SELECT bool_and(t > lag) AS always_forward, max(t) >= '2026-10-25 01:00:10+00' AS through_the_change
  FROM (SELECT t, lag(t) OVER (ORDER BY n) AS lag FROM s) x WHERE lag IS NOT NULL;
SELECT le_unschedule('cal-paris');
DELETE FROM leaderlock_jobs WHERE job = 'cal-paris';
"""


def sql(answers):
    out = [SQL_HEAD]
    for line in open(answers, encoding="utf-8"):
        f = line.rstrip("\n").split("\t")
        if f[0] == "P":
            row = [f[0], f[1], f[2], r"\N", r"\N", f[3]]
        elif f[0] == "N":
            row = f[:6]
        elif f[0] == "E":
            row = [f[0], f[1], r"\N", f[2], f[3], f[4]]
        else:
            row = [f[0], f[1], r"\N", r"\N", r"\N", f[2]]
        out.append("\t".join(row) + "\n")
    out.append(SQL_TAIL)
    return "".join(out)


if __name__ == "__main__":
    if len(sys.argv) > 1:
        sys.stdout.write(sql(sys.argv[1]))
    else:
        for line in lines():
            print(line)
