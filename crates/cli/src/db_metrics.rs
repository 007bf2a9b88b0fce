//! `leaderlock metrics --listen ADDR`: what the database knows, as
//! Prometheus text, from any host beside it: per schedule (contract 24)
//! how overdue it is and the missed runs kept, per key expected to be led
//! (contract 25) its open leaderless interval, the intervals recorded and
//! its tenures. So a job whose replicas all died, or a key nobody leads,
//! is reported by a process that is none of its replicas. Labels are the
//! names other roles wrote: escaped (`metrics::label`).
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_postgres::error::SqlState;
use tokio_postgres::types::Type;

use crate::metrics::{accept_later, label, write_schedule_metrics, ScheduleRead};
use crate::status::{connect, say};

/// The connection and the last read: what it found, and when.
#[derive(Default)]
struct Read {
    db: Option<leaderlock_client::Db>,
    text: String,
    at: Option<Instant>,
}

/// Serves `/metrics` (and `/healthz`), reading the database when a scrape
/// comes: at most one read per `every` (scrapes meanwhile get the last
/// one; scrapes at once share one read), so the database pays one
/// aggregate read per period at most, whatever the number of scrapers,
/// and each scrape sees the database as it is. `/healthz` fails when the
/// database cannot be read.
pub async fn serve(dsn: Option<&str>, listen: SocketAddr, every: Duration) -> i32 {
    if every < Duration::from_millis(100) {
        say("--every must be at least 100ms");
        return crate::exit::USAGE;
    }
    let listener = match tokio::net::TcpListener::bind(listen).await {
        Ok(l) => l,
        Err(e) => {
            say(&format!("cannot listen on {listen}: {e}"));
            return crate::exit::USAGE;
        }
    };
    let read = Arc::new(tokio::sync::Mutex::new(Read::default()));
    let dsn = Arc::new(dsn.map(str::to_owned));
    accept_later(
        listener,
        Arc::new(move |path: String| {
            let (read, dsn) = (read.clone(), dsn.clone());
            Box::pin(async move {
                match path.as_str() {
                    "/metrics" => match fresh(&read, dsn.as_deref(), every).await {
                        Some(text) => ("200 OK", text),
                        None => (
                            "503 Service Unavailable",
                            "the database cannot be read\n".into(),
                        ),
                    },
                    "/healthz" => match fresh(&read, dsn.as_deref(), every).await {
                        Some(_) => ("200 OK", "ok\n".into()),
                        None => (
                            "503 Service Unavailable",
                            "the database cannot be read\n".into(),
                        ),
                    },
                    _ => ("404 Not Found", "not found: /metrics, /healthz\n".into()),
                }
            })
        }),
    )
    .await;
    0
}

/// The metrics text: the last read if younger than `every`, else read now
/// (connecting again if the connection was lost); None when it fails.
async fn fresh(
    read: &tokio::sync::Mutex<Read>,
    dsn: Option<&str>,
    every: Duration,
) -> Option<String> {
    let mut r = read.lock().await;
    if r.at.is_some_and(|at| at.elapsed() < every) {
        return Some(r.text.clone());
    }
    if r.db.as_ref().is_none_or(|db| db.is_closed()) {
        r.db = connect(dsn).await.ok().map(|(db, _)| db);
    }
    let db = r.db.as_ref()?;
    let started = Instant::now();
    match render(db).await {
        Ok(mut text) => {
            let _ = writeln!(
                text,
                "# HELP leaderlock_metrics_read_seconds How long the last read of the database \
                 took.\n# TYPE leaderlock_metrics_read_seconds gauge\n\
                 leaderlock_metrics_read_seconds {:.3}",
                started.elapsed().as_secs_f64()
            );
            r.text = text;
            r.at = Some(Instant::now());
            Some(r.text.clone())
        }
        Err(e) => {
            say(&format!("reading the database: {e}"));
            r.db = None;
            None
        }
    }
}

/// The whole database in aggregates (one pass over the keys, bounded
/// cost at a million keys: no row per key): the leases held, lapsed (past
/// their expiry, not yet expired by the worker) and vacant, counting each
/// slot of a key of many; the keys kept and their tenures, releases and
/// expiries. A lease held under a session counts as held while its row has
/// a holder (its session's expiry is the worker's to judge).
const DATABASE_STATE: &str = "WITH n AS (SELECT @extschema@.le_now() AS now), \
     k AS (SELECT \
       pg_catalog.count(*) FILTER (WHERE l.slots OPERATOR(pg_catalog.=) 1 AND l.holder IS NOT NULL \
         AND (l.session IS NOT NULL OR l.expires_at OPERATOR(pg_catalog.>) n.now)) AS held, \
       pg_catalog.count(*) FILTER (WHERE l.slots OPERATOR(pg_catalog.=) 1 AND l.holder IS NOT NULL \
         AND l.session IS NULL AND l.expires_at OPERATOR(pg_catalog.<=) n.now) AS lapsed, \
       pg_catalog.count(*) FILTER (WHERE l.slots OPERATOR(pg_catalog.=) 1 AND l.holder IS NULL) AS vacant, \
       pg_catalog.count(*) AS keys, \
       COALESCE(pg_catalog.sum(l.tenures), 0)::pg_catalog.int8 AS tenures, \
       COALESCE(pg_catalog.sum(l.releases), 0)::pg_catalog.int8 AS releases, \
       COALESCE(pg_catalog.sum(l.expiries), 0)::pg_catalog.int8 AS expiries \
       FROM @extschema@.leaderlock l, n), \
     s AS (SELECT \
       pg_catalog.count(*) FILTER (WHERE x.holder IS NOT NULL \
         AND (x.session IS NOT NULL OR x.expires_at OPERATOR(pg_catalog.>) n.now)) AS held, \
       pg_catalog.count(*) FILTER (WHERE x.holder IS NOT NULL AND x.session IS NULL \
         AND x.expires_at OPERATOR(pg_catalog.<=) n.now) AS lapsed, \
       pg_catalog.count(*) FILTER (WHERE x.holder IS NULL) AS vacant \
       FROM @extschema@.leaderlock_slots x \
       JOIN @extschema@.leaderlock h ON h.key OPERATOR(pg_catalog.=) x.key \
        AND x.slot OPERATOR(pg_catalog.<=) h.slots, n) \
     SELECT k.held OPERATOR(pg_catalog.+) s.held, k.lapsed OPERATOR(pg_catalog.+) s.lapsed, \
            k.vacant OPERATOR(pg_catalog.+) s.vacant, k.keys, k.tenures, k.releases, k.expiries \
       FROM k, s";

/// How late the worker is: seconds since the oldest lapsed lease not yet
/// expired should have been (0: none), read through the worker's own
/// index (a lapsed lease is due for a look); whether the worker serves
/// this database; the history's last position (it grows with every
/// transition).
const WORKER_STATE: &str = "SELECT COALESCE(( \
         SELECT pg_catalog.date_part('epoch'::pg_catalog.text, \
                  n.now OPERATOR(pg_catalog.-) pg_catalog.min(l.expires_at)) \
           FROM @extschema@.leaderlock l \
          WHERE l.holder IS NOT NULL AND l.recheck_at OPERATOR(pg_catalog.<=) n.now \
            AND l.session IS NULL AND l.expires_at OPERATOR(pg_catalog.<=) n.now), 0), \
       @extschema@.le_worker_running(), @extschema@.le_history_position() \
       FROM (SELECT @extschema@.le_now() AS now) n";

/// This database's calls since the server started (shared memory: no
/// table read), as `leaderlock_database_stats`.
const CALLS: &str = "SELECT d.acquired, d.renewed, d.refused, d.released, d.expired \
       FROM @extschema@.le_database_stats() d \
      WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database()";

/// The runs kept, by outcome (`running`: not finished).
const RUNS_BY_OUTCOME: &str = "SELECT COALESCE(r.outcome, 'running'), pg_catalog.count(*) \
       FROM @extschema@.leaderlock_runs r GROUP BY 1 ORDER BY 1";

/// The database-wide metrics: the leases by state, the keys and their
/// transitions, the worker's lag and presence, the calls, the runs.
async fn write_database_metrics(
    out: &mut String,
    db: &leaderlock_client::Db,
) -> Result<(), tokio_postgres::Error> {
    let mut metric = |name: &str, kind: &str, help: &str, samples: &[(String, String)]| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for (labels, value) in samples {
            if labels.is_empty() {
                let _ = writeln!(out, "{name} {value}");
            } else {
                let _ = writeln!(out, "{name}{{{labels}}} {value}");
            }
        }
    };
    let one = |v: String| vec![(String::new(), v)];
    let state = db.query_one(DATABASE_STATE, &[]).await?;
    let states = ["held", "lapsed", "vacant"]
        .iter()
        .enumerate()
        .map(|(i, s)| (format!("state=\"{s}\""), state.get::<_, i64>(i).to_string()))
        .collect::<Vec<_>>();
    metric("leaderlock_leases", "gauge", "Leases (each slot of a key of many) by state: held, lapsed (past their expiry, not yet expired), vacant.", &states);
    metric(
        "leaderlock_keys",
        "gauge",
        "Keys kept in the database.",
        &one(state.get::<_, i64>(3).to_string()),
    );
    metric(
        "leaderlock_tenures_total",
        "counter",
        "Tenures started, summed over the keys kept.",
        &one(state.get::<_, i64>(4).to_string()),
    );
    metric(
        "leaderlock_releases_total",
        "counter",
        "Releases, summed over the keys kept.",
        &one(state.get::<_, i64>(5).to_string()),
    );
    metric(
        "leaderlock_expiries_total",
        "counter",
        "Expiries (lapsed, or their session ended), summed over the keys kept.",
        &one(state.get::<_, i64>(6).to_string()),
    );
    let worker = db.query_one(WORKER_STATE, &[]).await?;
    metric("leaderlock_expiry_lag_seconds", "gauge", "Seconds since the oldest lapsed lease not yet expired by the worker should have been (0: none).", &one(format!("{:.3}", worker.get::<_, f64>(0))));
    metric(
        "leaderlock_worker_running",
        "gauge",
        "1 while the background worker serves this database.",
        &one(u8::from(worker.get::<_, bool>(1)).to_string()),
    );
    metric("leaderlock_history_position", "counter", "The history's last position: it grows with every transition (rate: transitions per second).", &one(worker.get::<_, i64>(2).to_string()));
    if let Some(calls) = db.query_opt(CALLS, &[]).await? {
        let samples = ["acquired", "renewed", "refused", "released", "expired"]
            .iter()
            .enumerate()
            .map(|(i, c)| (format!("call=\"{c}\""), calls.get::<_, i64>(i).to_string()))
            .collect::<Vec<_>>();
        metric("leaderlock_calls_total", "counter", "This database's calls since the server started, by what they did (refused: an acquisition or renewal refused).", &samples);
    }
    let runs = match db.query_typed(RUNS_BY_OUTCOME, &[]).await {
        Err(e) if e.code() == Some(&SqlState::UNDEFINED_TABLE) => Vec::new(),
        r => r?,
    };
    let samples = runs
        .iter()
        .map(|r| {
            (
                format!("outcome=\"{}\"", label(&r.get::<_, String>(0))),
                r.get::<_, i64>(1).to_string(),
            )
        })
        .collect::<Vec<_>>();
    metric(
        "leaderlock_runs",
        "gauge",
        "Scheduled runs kept (leaderlock.run_retention), by outcome (running: not finished).",
        &samples,
    );
    Ok(())
}

/// The metrics text of one read.
async fn render(db: &leaderlock_client::Db) -> Result<String, tokio_postgres::Error> {
    let none: Option<String> = None;
    // (an edition or version that keeps no schedules or marks: none)
    let absent = |r: Result<Vec<_>, tokio_postgres::Error>| match r {
        Err(e) if e.code() == Some(&SqlState::UNDEFINED_TABLE) => Ok(Vec::new()),
        r => r,
    };
    let schedules = absent(
        db.query_typed(leaderlock_client::sql::SCHEDULES, &[(&none, Type::TEXT)])
            .await,
    )?;
    let expected = absent(
        db.query_typed(leaderlock_client::sql::EXPECTED_KEYS, &[])
            .await,
    )?;
    let mut out = String::new();
    write_database_metrics(&mut out, db).await?;
    let reads: Vec<_> = schedules.iter().map(ScheduleRead::from_row).collect();
    let jobs: Vec<_> = schedules
        .iter()
        .zip(&reads)
        .map(|(r, read)| (format!("job=\"{}\"", label(&r.get::<_, String>(0))), read))
        .collect();
    write_schedule_metrics(&mut out, &jobs);
    let mut metric = |name: &str, kind: &str, help: &str, samples: Vec<(String, String)>| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for (labels, value) in samples {
            let _ = writeln!(out, "{name}{{{labels}}} {value}");
        }
    };
    let per_job = |f: &dyn Fn(&tokio_postgres::Row) -> String| -> Vec<(String, String)> {
        schedules
            .iter()
            .map(|r| (format!("job=\"{}\"", label(&r.get::<_, String>(0))), f(r)))
            .collect()
    };
    metric(
        "leaderlock_schedule_paused",
        "gauge",
        "1 while the job's schedule is paused.",
        per_job(&|r| u8::from(r.get::<_, bool>(6)).to_string()),
    );
    let per_key = |f: &dyn Fn(&tokio_postgres::Row) -> String| -> Vec<(String, String)> {
        expected
            .iter()
            .map(|r| (format!("key=\"{}\"", label(&r.get::<_, String>(0))), f(r)))
            .collect()
    };
    metric(
        "leaderlock_key_leaderless_seconds",
        "gauge",
        "Seconds the key expected to be led has been without a live holder, once past its bound (0: led).",
        per_key(&|r| format!("{:.3}", r.get::<_, f64>(1))),
    );
    metric(
        "leaderlock_key_leaderless_intervals_total",
        "counter",
        "Leaderless intervals recorded for the key expected to be led.",
        per_key(&|r| r.get::<_, i64>(2).to_string()),
    );
    metric(
        "leaderlock_key_tenures_total",
        "counter",
        "Tenures of the key expected to be led (a flapping key's grow fast).",
        per_key(&|r| r.get::<_, i64>(3).to_string()),
    );
    Ok(out)
}
