//! `leaderlock runs [--job J]`: how each job's scheduled runs went, and
//! its latest runs. Jobs, holders and details were written by whichever
//! role claimed or finished a run: printed through text.rs, never raw.
use std::io::Write;

use tokio_postgres::error::SqlState;
use tokio_postgres::types::Type;

use crate::status::{connect, db_error, say, shortened};
use crate::text;

/// Prints a summary line per job, then the latest `limit` runs as a table;
/// or (`json`) one JSON object per run.
pub async fn runs(dsn: Option<&str>, job: Option<String>, limit: i64, json: bool) -> i32 {
    let (client, _) = match connect(dsn).await {
        Ok(c) => c,
        Err(code) => return code,
    };
    let summary = match client
        .query_typed(leaderlock_client::sql::RUNS_SUMMARY, &[(&job, Type::TEXT)])
        .await
    {
        Ok(rows) => rows,
        Err(e) => return db_error(&client, e).await,
    };
    let schedules = match client
        .query_typed(leaderlock_client::sql::SCHEDULES, &[(&job, Type::TEXT)])
        .await
    {
        Ok(rows) => rows,
        // (an edition or version that keeps no schedules: none to show)
        Err(e) if e.code() == Some(&SqlState::UNDEFINED_TABLE) => Vec::new(),
        Err(e) => return db_error(&client, e).await,
    };
    let history = match client
        .query_typed(
            leaderlock_client::sql::RUNS_HISTORY,
            &[(&job, Type::TEXT), (&limit, Type::INT8)],
        )
        .await
    {
        Ok(rows) => rows,
        Err(e) => return db_error(&client, e).await,
    };
    let mut out = std::io::stdout().lock();
    let printed = if json {
        history.iter().try_for_each(|r| {
            let line = serde_json::json!({
                "job": r.get::<_, String>(0),
                "due": r.get::<_, String>(1),
                "state": r.get::<_, String>(2),
                "holder": r.get::<_, Option<String>>(3),
                "term": r.get::<_, Option<i64>>(4),
                "attempts": r.get::<_, i32>(5),
                "finished_at": r.get::<_, Option<String>>(6),
                "detail": r.get::<_, Option<String>>(7),
            });
            writeln!(out, "{}", text::json_line(&line))
        })
    } else {
        print_schedules(&mut out, &schedules).and_then(|_| print(&mut out, &summary, &history))
    };
    if printed.and_then(|_| out.flush()).is_err() {
        return 0; // reader went away (| head)
    }
    if job.is_some() && summary.is_empty() && schedules.is_empty() {
        say("no runs of that job");
        return 1;
    }
    0
}

/// A line per schedule kept in the database (contract 24).
fn print_schedules(out: &mut impl Write, schedules: &[tokio_postgres::Row]) -> std::io::Result<()> {
    for r in schedules {
        let secs = |s: f64| {
            crate::duration::shown(std::time::Duration::from_millis(
                (s.max(0.0) * 1e3).round() as u64
            ))
        };
        let when = match (r.get::<_, Option<f64>>(1), r.get::<_, Option<String>>(2)) {
            (Some(every), _) => format!("every {}", secs(every)),
            (None, cron) => format!(
                "cron \"{}\" in {}",
                text::shown(&cron.unwrap_or_default()),
                text::shown(&r.get::<_, String>(3))
            ),
        };
        let state = if r.get::<_, bool>(6) {
            "paused".to_string()
        } else {
            r.get::<_, Option<String>>(7)
                .map_or_else(|| "no due instant".into(), |t| format!("next due {t}"))
        };
        let overdue = r.get::<_, f64>(8);
        writeln!(
            out,
            "schedule \"{}\": {when}, misfire grace {}, overlap {}; {state}{}; {} missed kept",
            shortened(&text::shown(&r.get::<_, String>(0))),
            secs(r.get::<_, f64>(4)),
            text::shown(&r.get::<_, String>(5)),
            if overdue > 0.0 {
                format!("; overdue {}", secs(overdue))
            } else {
                String::new()
            },
            r.get::<_, i64>(9),
        )?;
    }
    if !schedules.is_empty() {
        writeln!(out)?;
    }
    Ok(())
}

fn print(
    out: &mut impl Write,
    summary: &[tokio_postgres::Row],
    history: &[tokio_postgres::Row],
) -> std::io::Result<()> {
    for r in summary {
        let last = |i: usize, what: &str| {
            r.get::<_, Option<String>>(i)
                .map_or_else(String::new, |t| format!("; last {what} due {t}"))
        };
        writeln!(
            out,
            "job \"{}\": {} runs: {} succeeded, {} failed, {} missed, {} running{}{}",
            shortened(&text::shown(&r.get::<_, String>(0))),
            r.get::<_, i64>(1),
            r.get::<_, i64>(2),
            r.get::<_, i64>(3),
            r.get::<_, i64>(4),
            r.get::<_, i64>(5),
            last(6, "success"),
            last(7, "failure"),
        )?;
    }
    if history.is_empty() {
        return Ok(());
    }
    writeln!(out)?;
    let dash = || "-".to_string();
    let shown = |v: Option<String>| v.map_or_else(dash, |v| shortened(&text::shown(&v)));
    let rows: Vec<Vec<String>> = history
        .iter()
        .map(|r| {
            vec![
                text::shown(&r.get::<_, String>(1)),
                shown(Some(r.get(0))),
                text::shown(&r.get::<_, String>(2)),
                r.get::<_, Option<i64>>(4)
                    .map_or_else(dash, |t| t.to_string()),
                r.get::<_, i32>(5).to_string(),
                shown(r.get(3)),
                shown(r.get(7)),
            ]
        })
        .collect();
    text::table(
        out,
        &[
            "DUE", "JOB", "STATE", "TERM", "ATTEMPTS", "HOLDER", "DETAIL",
        ],
        &rows,
    )
}
