//! `leaderlock metrics --listen ADDR`: what the database knows, as
//! Prometheus text, from any host beside it: per schedule (contract 24)
//! how overdue it is and the missed runs kept, per key expected to be led
//! (contract 25) its open leaderless interval, the intervals recorded and
//! its tenures. So a job whose replicas all died, or a key nobody leads,
//! is reported by a process that is none of its replicas. Labels are the
//! names other roles wrote: escaped (`metrics::label`).
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio_postgres::error::SqlState;
use tokio_postgres::types::Type;

use crate::metrics::{accept, label, write_schedule_metrics, ScheduleRead};
use crate::status::{connect, say};

/// What the last read found, and when.
#[derive(Default)]
struct Read {
    text: String,
    at: Option<Instant>,
}

/// Reads the database every `every` and serves the last read; `/healthz`
/// fails once no read has succeeded for three of them.
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
    let read = Arc::new(Mutex::new(Read::default()));
    let shared = read.clone();
    let stale = every * 3;
    tokio::spawn(accept(
        listener,
        Arc::new(move |path: &str| {
            let r = shared.lock().unwrap_or_else(|e| e.into_inner());
            match path {
                "/metrics" => ("200 OK", r.text.clone()),
                "/healthz" => match r.at {
                    Some(at) if at.elapsed() <= stale => ("200 OK", "ok\n".into()),
                    _ => (
                        "503 Service Unavailable",
                        "the database has not been read lately\n".into(),
                    ),
                },
                _ => ("404 Not Found", "not found: /metrics, /healthz\n".into()),
            }
        }),
    ));
    let dsn = dsn.map(str::to_owned);
    loop {
        match connect(dsn.as_deref()).await {
            Ok((db, _)) => loop {
                match render(&db).await {
                    Ok(text) => {
                        let mut r = read.lock().unwrap_or_else(|e| e.into_inner());
                        r.text = text;
                        r.at = Some(Instant::now());
                    }
                    Err(e) => {
                        say(&format!("reading the database: {e}"));
                        break;
                    }
                }
                tokio::time::sleep(every).await;
            },
            Err(_) => tokio::time::sleep(every).await,
        }
    }
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
