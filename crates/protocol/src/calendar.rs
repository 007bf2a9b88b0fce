//! When a job is due (contract 22, 24): every period, at its multiples
//! since the Unix epoch, or by a cron expression in a time zone. One
//! computation for the extension (a schedule kept in the database: its
//! next due instant, the instants the worker records missed) and every
//! Rust replica (crates/client), so that they agree on every instant; the
//! other clients' cron libraries read the expressions this module accepts
//! alike (`cron_fields` refuses the others).
//!
//! Behind the feature `calendar`: the rules of leases need no calendar.

use std::str::FromStr;

use chrono::{DateTime, TimeZone, Utc};

use crate::Micros;

/// When a job is due.
#[derive(Debug, Clone)]
pub enum Schedule {
    /// Every period, in microseconds (whole milliseconds, at least one).
    Every(Micros),
    Cron {
        schedule: Box<cron::Schedule>,
        tz: chrono_tz::Tz,
    },
}

impl Schedule {
    /// Every `period` microseconds: at least a millisecond, in whole
    /// milliseconds.
    pub fn every(period: Micros) -> Result<Schedule, String> {
        if period < 1_000 || period % 1_000 != 0 {
            return Err(format!(
                "a period must be whole milliseconds, at least 1ms (got {period} microseconds)"
            ));
        }
        Ok(Schedule::Every(period))
    }

    /// A cron expression: five fields (minute hour day-of-month month
    /// day-of-week), or six with seconds first, or `@hourly`, `@daily`,
    /// `@weekly`, `@monthly`, `@yearly`, in time zone `tz` (an IANA name,
    /// e.g. `Europe/Paris`; `UTC`). Across daylight saving changes a local
    /// time that does not exist is skipped and one that occurs twice is due
    /// once, at the first (the cron crate's rule).
    pub fn cron(expr: &str, tz: &str) -> Result<Schedule, String> {
        let full = cron_fields(expr)?;
        let schedule = cron::Schedule::from_str(&full)
            .map_err(|e| format!("cron expression {expr:?}: {e}"))?;
        let tz = chrono_tz::Tz::from_str(tz).map_err(|e| format!("time zone {tz:?}: {e}"))?;
        Ok(Schedule::Cron {
            schedule: Box::new(schedule),
            tz,
        })
    }

    /// The first due instant strictly after `t`.
    pub fn next_after(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match self {
            Schedule::Every(p) => {
                let us = t.timestamp_micros();
                let next = us.div_euclid(*p).checked_add(1)?.checked_mul(*p)?;
                Utc.timestamp_micros(next).single()
            }
            // Strictly after `t`: where a local time occurs twice (clocks
            // going back) the crate may give the first of the two instants,
            // not after `t`; a caller stepping from instant to instant would
            // then never move on.
            Schedule::Cron { schedule, tz } => schedule
                .after(&t.with_timezone(tz))
                .take(10_000)
                .map(|d| d.with_timezone(&Utc))
                .find(|d| *d > t),
        }
    }

    /// The first due instant at or after `t`.
    pub fn at_or_after(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.next_after(t - chrono::Duration::microseconds(1))
    }

    /// `next_after` in microseconds since the Unix epoch.
    pub fn next_after_micros(&self, unix: Micros) -> Option<Micros> {
        let t = Utc.timestamp_micros(unix).single()?;
        Some(self.next_after(t)?.timestamp_micros())
    }

    /// The shortest time between two due instants, in microseconds: the
    /// period, or a second for a cron expression (its finest field).
    pub fn finest(&self) -> Micros {
        match self {
            Schedule::Every(p) => *p,
            Schedule::Cron { .. } => 1_000_000,
        }
    }
}

/// The six fields (seconds first) of a cron expression, refused where
/// dialects read it otherwise (crontab, as the Python, Node.js and Go
/// clients' libraries do, and the cron crate), so that replicas in any
/// language agree on the due instants: days of the week by name only (their
/// numbers differ: crontab's Sunday is 0 or 7, the crate's 1), the day of
/// the month or of the week restricted but not both (crontab runs on
/// either, the crate on both), no `L`, `W`, `#` nor a year field.
fn cron_fields(expr: &str) -> Result<String, String> {
    let bad = |why: &str| Err(format!("cron expression {expr:?}: {why}"));
    let text = expr.trim();
    if let Some(six) = match text {
        "@yearly" => Some("0 0 0 1 1 *"),
        "@monthly" => Some("0 0 0 1 * *"),
        "@weekly" => Some("0 0 0 * * SUN"),
        "@daily" => Some("0 0 0 * * *"),
        "@hourly" => Some("0 0 * * * *"),
        _ => None,
    } {
        return Ok(six.to_owned());
    }
    let mut fields: Vec<String> = text.split_whitespace().map(str::to_owned).collect();
    match fields.len() {
        5 => fields.insert(0, "0".into()),
        6 => {}
        7 => return bad("a year field (seven fields) is not supported"),
        _ => return bad(
            "five fields (minute hour day-of-month month day-of-week), or six with seconds first",
        ),
    }
    for i in [3, 5] {
        fields[i] = fields[i].replace('?', "*");
    }
    let (dom, dow) = (&fields[3], &fields[5]);
    if dow.split(',').any(|t| {
        t.split('/')
            .next()
            .is_some_and(|range| range.chars().any(|c| c.is_ascii_digit()))
    }) || dow.contains(['L', '#'])
    {
        return bad(
            "name the days of the week (SUN, MON-FRI): their numbers differ between cron \
             dialects (crontab counts Sunday as 0 or 7, this client's cron crate as 1); numbers \
             are refused, and so are L and #",
        );
    }
    if dom.chars().any(|c| c.is_ascii_alphabetic()) {
        return bad("L and W are not supported in the day of the month");
    }
    if dom != "*" && dow != "*" {
        return bad(
            "restrict the day of the month or the day of the week, not both: crontab runs on \
             either, this client's cron crate on both",
        );
    }
    Ok(fields.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn every_period_is_aligned_to_the_epoch() {
        let s = Schedule::every(300_000_000).unwrap();
        assert_eq!(
            s.next_after(at("2026-11-27T10:02:03Z")),
            Some(at("2026-11-27T10:05:00Z"))
        );
        assert_eq!(
            s.next_after(at("2026-11-27T10:05:00Z")),
            Some(at("2026-11-27T10:10:00Z"))
        );
        assert_eq!(
            s.at_or_after(at("2026-11-27T10:05:00Z")),
            Some(at("2026-11-27T10:05:00Z"))
        );
        assert!(Schedule::every(1_500).is_err());
    }

    #[test]
    fn cron_in_a_time_zone_across_daylight_saving() {
        // 02:30 every day in Paris: on 2026-03-29 that local time does not
        // exist (02:00 -> 03:00) and is skipped; on 2026-10-25 it occurs
        // twice (03:00 -> 02:00) and runs once, at the first.
        let s = Schedule::cron("30 2 * * *", "Europe/Paris").unwrap();
        let mut t = at("2026-03-27T12:00:00Z");
        let mut spring = vec![];
        for _ in 0..3 {
            t = s.next_after(t).unwrap();
            spring.push(t);
        }
        assert_eq!(
            spring,
            vec![
                at("2026-03-28T01:30:00Z"),
                at("2026-03-30T00:30:00Z"),
                at("2026-03-31T00:30:00Z"),
            ]
        );
        let mut t = at("2026-10-24T12:00:00Z");
        let mut autumn = vec![];
        for _ in 0..3 {
            t = s.next_after(t).unwrap();
            autumn.push(t);
        }
        assert_eq!(
            autumn,
            vec![
                at("2026-10-25T00:30:00Z"),
                at("2026-10-26T01:30:00Z"),
                at("2026-10-27T01:30:00Z"),
            ]
        );
        assert!(Schedule::cron("61 * * * *", "UTC").is_err());
        assert!(Schedule::cron("0 3 * * *", "Mars/Olympus").is_err());
    }

    #[test]
    fn cron_expressions_read_otherwise_elsewhere_are_refused() {
        for expr in [
            "0 3 * * 1", // Monday in crontab, Sunday in the crate
            "0 3 * * 1-5",
            "0 3 1 * MON", // either (crontab) or both (the crate)
            "0 3 L * *",
            "0 3 * * MON#2",
            "0 0 3 * * * 2027",
            "0 3 * *",
        ] {
            let e = Schedule::cron(expr, "UTC").unwrap_err().to_string();
            assert!(e.starts_with("cron expression"), "{expr}: {e}");
        }
        for expr in [
            "0 3 * * MON-FRI",
            "0 3 1,15 * ?",
            "@daily",
            "*/10 * * * * *",
            "0 3 * * */2",
        ] {
            let _ = Schedule::cron(expr, "UTC").map_err(|e| panic!("{expr}: {e}"));
        }
        let weekly = Schedule::cron("@weekly", "UTC").unwrap();
        assert_eq!(
            weekly.next_after(at("2026-11-27T10:00:00Z")),
            Some(at("2026-11-29T00:00:00Z")) // a Sunday
        );
    }

    #[test]
    fn every_due_instant_is_after_the_last_across_clocks_going_back() {
        // Every second in Paris through 2026-10-25 03:00 CEST -> 02:00 CET:
        // the instants only grow, and none is skipped before the change.
        let s = Schedule::cron("* * * * * *", "Europe/Paris").unwrap();
        let mut t = at("2026-10-25T00:59:55Z");
        for _ in 0..20 {
            let next = s.next_after(t).unwrap();
            assert!(next > t, "{next} after {t}");
            t = next;
        }
        assert!(t >= at("2026-10-25T01:00:10Z"), "{t}");
    }

    #[test]
    fn five_fields_mean_minutes() {
        let s = Schedule::cron("0 3 * * *", "UTC").unwrap();
        assert_eq!(
            s.next_after(at("2026-11-27T10:00:00Z")),
            Some(at("2026-11-28T03:00:00Z"))
        );
    }

    #[test]
    fn micros_since_the_epoch_step_as_instants() {
        let s = Schedule::every(1_000_000).unwrap();
        assert_eq!(s.next_after_micros(1_500_000), Some(2_000_000));
        assert_eq!(s.next_after_micros(-1), Some(0));
        assert_eq!(s.finest(), 1_000_000);
    }
}
