//! A job's schedule as the database knows it (contract 24), and its
//! metrics: written alike by `leaderlock metrics` and `leaderlock run
//! --metrics`, so that the alert rules (monitoring/) apply to either.
use std::fmt::Write as _;

/// A job's schedule as the database knows it (contract 24).
pub struct ScheduleRead {
    /// Seconds since its first due instant no claim took.
    pub overdue: f64,
    /// Its misfire grace, in seconds.
    pub grace: f64,
    /// Its runs recorded missed, as the retention keeps them.
    pub missed: i64,
    /// Its latest finished run failed (or was recorded missed or replaced).
    pub last_failed: bool,
    /// When its newest run kept as missed was recorded (Unix seconds).
    pub last_missed: Option<f64>,
}

impl ScheduleRead {
    /// From a row of `leaderlock_client::sql::SCHEDULES`.
    pub fn from_row(r: &tokio_postgres::Row) -> ScheduleRead {
        ScheduleRead {
            overdue: r.get(8),
            grace: r.get(4),
            missed: r.get(9),
            last_failed: r
                .get::<_, Option<String>>(10)
                .is_some_and(|o| o != "succeeded"),
            last_missed: r.get(11),
        }
    }
}

/// The schedules' metrics, one sample per job (`labels`, already escaped):
/// named alike by `leaderlock metrics` (read from the database) and by
/// `leaderlock run --metrics` (its own job), so that the alert rules
/// (monitoring/) apply to either.
pub fn write_schedule_metrics(out: &mut String, jobs: &[(String, &ScheduleRead)]) {
    type Value = fn(&ScheduleRead) -> String;
    let metrics: [(&str, &str, Value); 5] = [
        (
            "overdue_seconds",
            "Seconds since the job's first due instant no claim took (0: none waiting).",
            |s| format!("{:.3}", s.overdue),
        ),
        (
            "misfire_grace_seconds",
            "The job's misfire grace: a due instant not claimed within it is missed.",
            |s| format!("{:.3}", s.grace),
        ),
        (
            "missed_runs",
            "Runs of the job recorded missed, as the retention keeps them.",
            |s| s.missed.to_string(),
        ),
        (
            // Never moves back while runs are missed (a count of the runs
            // kept shrinks as the retention prunes them): the alert on
            // recent misses reads this.
            "last_missed_timestamp_seconds",
            "When the job's newest run kept as missed was recorded, in Unix seconds (NaN: none kept).",
            |s| s.last_missed.map_or_else(|| "NaN".to_string(), |t| format!("{t:.3}")),
        ),
        (
            "last_failed",
            "1 when the job's latest finished run did not succeed (failed, missed or replaced).",
            |s| u8::from(s.last_failed).to_string(),
        ),
    ];
    for (name, help, value) in metrics {
        let _ = writeln!(
            out,
            "# HELP leaderlock_run_{name} {help}\n# TYPE leaderlock_run_{name} gauge"
        );
        for (labels, s) in jobs {
            let _ = writeln!(out, "leaderlock_run_{name}{{{labels}}} {}", value(s));
        }
    }
}
