//! `leaderlock run --every 5m -- cmd` / `--cron '0 3 * * *'`: every replica
//! runs the same line; each due run of the job runs on one of them (the
//! client's Scheduler claims it), with LEADERLOCK_TERM and LEADERLOCK_DUE in
//! the command's environment. The supervisor stops the command at the
//! claim's local deadline, as for a lease; renewals every ttl/3 move it.
//! The command's exit is recorded as the run's outcome.
use std::ffi::OsString;
use std::time::Duration;

use leaderlock_client::{ConnectConfig, Error, Run, RunConfig, Schedule, Scheduler, Turn};
use serde_json::json;
use tokio::signal::unix::{signal, SignalKind};
use tokio::time::{sleep, sleep_until, Instant};

use crate::exit;
use crate::log::Log;
use crate::metrics::{self, SharedRuns};
use crate::supervisor::{Cause, Handle, Message};

/// What `leaderlock run` was given for a scheduled job.
pub struct Job {
    pub schedule: Schedule,
    /// Register the schedule as the job's in the database first, with this
    /// overlap policy (--register).
    pub register: Option<String>,
    /// Serve `/metrics` and `/healthz` there.
    pub metrics: Option<std::net::SocketAddr>,
    pub config: RunConfig,
    pub grace: Duration,
    pub command: Vec<OsString>,
    pub remove_env: Vec<OsString>,
}

/// Runs the job's due runs until a signal or a permanent error.
pub async fn run(job: Job, db: ConnectConfig, log: Log) -> i32 {
    let config = job.config.clone();
    let env = [
        ("LEADERLOCK_JOB", config.job.as_str()),
        ("LEADERLOCK_ID", config.id.as_str()),
    ];
    let mut supervisor = match Handle::spawn(&job.command, job.grace, &env, &job.remove_env) {
        Ok(s) => s,
        Err(e) => {
            log.event(
                "error",
                &format!("cannot start the supervisor: {e}"),
                json!({}),
            );
            return exit::INTERNAL;
        }
    };
    let registered = job.schedule.is_registered();
    log.event(
        "scheduled",
        &format!(
            "running job {:?} as {:?} (ttl {:?}, misfire grace {})",
            config.job,
            config.id,
            config.ttl,
            config.misfire_grace.map_or_else(
                || if registered { "its schedule's" } else { "none" }.to_string(),
                |g| format!("{g:?}")
            )
        ),
        json!({"job": config.job, "id": config.id, "ttl": config.ttl.as_secs_f64(),
               "misfire_grace": config.misfire_grace.map(|g| g.as_secs_f64()),
               "registered": registered}),
    );
    let retry = (config.ttl / 10).clamp(Duration::from_millis(50), Duration::from_secs(1));
    let stats = SharedRuns::default();
    if job.metrics.is_some() {
        tokio::spawn(read_schedule(db.clone(), config.job.clone(), stats.clone()));
    }
    let mut scheduler = Scheduler::new(db, job.schedule, config);
    if let Some(addr) = job.metrics {
        match tokio::net::TcpListener::bind(addr).await {
            // Silent: longer than the scheduler's longest sleep (10 s) and a call.
            Ok(listener) => {
                tokio::spawn(metrics::serve_runs(
                    listener,
                    scheduler.config().job.clone(),
                    stats.clone(),
                    scheduler.heartbeat(),
                    Duration::from_secs(30).max(scheduler.config().ttl),
                ));
            }
            Err(e) => {
                supervisor.close();
                log.event(
                    "error",
                    &format!("--metrics: cannot listen on {addr}: {e}"),
                    json!({}),
                );
                return exit::USAGE;
            }
        }
    }
    let mut sigint = signal(SignalKind::interrupt()).expect("signal handler");
    let mut sigterm = signal(SignalKind::terminate()).expect("signal handler");
    let mut down = false;
    // --register: the schedule made the job's in the database first.
    while let Some(overlap) = &job.register {
        tokio::select! {
            r = scheduler.register(overlap) => match r {
                Ok(next) => {
                    let next = next.map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true));
                    log.event("registered", &format!("the job's schedule is registered; next due {}",
                                                     next.as_deref().unwrap_or("never")),
                              json!({"next_due": next, "overlap": overlap}));
                    break;
                }
                Err(Error::Rejected { sqlstate, message }) => {
                    log.event("rejected", &message, json!({"error": message, "sqlstate": sqlstate}));
                    supervisor.close();
                    return exit::REJECTED;
                }
                Err(e) => {
                    if !down {
                        log.event("disconnected", &format!("database: {e}"), json!({"error": e.to_string()}));
                        down = true;
                    }
                    sleep(retry).await;
                }
            },
            _ = sigint.recv() => { supervisor.close(); return 128 + libc::SIGINT; }
            _ = sigterm.recv() => { supervisor.close(); return 128 + libc::SIGTERM; }
        }
    }
    let code = loop {
        tokio::select! {
            turn = scheduler.next() => match turn {
                Ok(Turn::Run(run)) => {
                    down = false;
                    if let Some(code) = run_one(&mut scheduler, &mut supervisor, &log, run, retry, &stats).await {
                        break code;
                    }
                }
                Ok(Turn::Settled { due, outcome }) => {
                    down = false;
                    let outcome = outcome.unwrap_or_else(|| "gone".into());
                    lock(&stats).settled(seconds(due), &outcome);
                    let due = due.to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
                    log.event("run_settled", &format!("run due {due} settled elsewhere: {outcome}"),
                              json!({"due": due, "outcome": outcome}));
                }
                Ok(Turn::Registered(found)) => {
                    down = false;
                    let job = &scheduler.config().job;
                    if found {
                        log.event("schedule_found", &format!("job {job:?}: its schedule in the database runs again"),
                                  json!({"job": job}));
                    } else {
                        log.event("no_schedule",
                                  &format!("job {job:?} has no schedule in the database, or it is paused: \
                                            nothing runs until le_schedule or le_resume_schedule"),
                                  json!({"job": job}));
                    }
                }
                Err(Error::Rejected { sqlstate, message }) => {
                    log.event("rejected", &message, json!({"error": message, "sqlstate": sqlstate}));
                    break exit::REJECTED;
                }
                Err(e) => {
                    if !down {
                        log.event("disconnected", &format!("database: {e}"), json!({"error": e.to_string()}));
                        down = true;
                    }
                    sleep(retry).await;
                }
            },
            _ = sigint.recv() => break 128 + libc::SIGINT,
            _ = sigterm.recv() => break 128 + libc::SIGTERM,
        }
    };
    supervisor.close();
    code
}

/// Runs one claimed run to its end and records the outcome. Some(code)
/// when the whole `run` must end (a signal, the supervisor gone).
fn lock(stats: &SharedRuns) -> std::sync::MutexGuard<'_, metrics::RunMetrics> {
    stats.lock().unwrap_or_else(|e| e.into_inner())
}

fn seconds(t: chrono::DateTime<chrono::Utc>) -> f64 {
    t.timestamp_micros() as f64 / 1e6
}

async fn run_one(
    scheduler: &mut Scheduler,
    supervisor: &mut Handle,
    log: &Log,
    mut run: Run,
    retry: Duration,
    stats: &SharedRuns,
) -> Option<i32> {
    {
        let mut m = lock(stats);
        m.running = true;
        m.claimed += 1;
    }
    let due = run.due.to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
    log.event(
        "run_claimed",
        &format!("running the run due {due}, term {}", run.term),
        json!({"due": due, "term": run.term}),
    );
    supervisor.start_run(run.term, run.deadline, &due).await;
    let renew_every = scheduler.config().ttl / 3;
    let mut renew_at = Instant::now() + renew_every;
    let mut lost = false;
    let mut stop_code = None;
    let mut sigint = signal(SignalKind::interrupt()).expect("signal handler");
    let mut sigterm = signal(SignalKind::terminate()).expect("signal handler");
    let (code, cause) = loop {
        tokio::select! {
            message = supervisor.next() => match message {
                Message::Started(pid) => {
                    log.event("child_started", &format!("started the command, pid {pid}"), json!({"child": pid}));
                }
                Message::SpawnFailed(e) => {
                    log.event("error", &format!("cannot start the command: {e}"), json!({"error": e}));
                    break (exit::CANNOT_RUN, Cause::Own);
                }
                Message::Exited(code, cause, _) => break (code, cause),
                Message::Gone => {
                    log.event("error", "the supervisor process is gone", json!({}));
                    return Some(exit::INTERNAL);
                }
            },
            _ = sleep_until(renew_at), if !lost => {
                match scheduler.renew(&mut run).await {
                    Ok(true) => {
                        supervisor.extend(run.term, run.deadline).await;
                        renew_at = Instant::now() + renew_every;
                    }
                    Ok(false) => {
                        log.event("run_lost", &format!("the claim of term {} is lost: stopping the command", run.term), json!({"term": run.term}));
                        lost = true;
                        supervisor.stop().await;
                    }
                    // Until the deadline, at which the supervisor stops it.
                    Err(_) => renew_at = Instant::now() + retry,
                }
            }
            _ = sigint.recv(), if stop_code.is_none() => {
                stop_code = Some(128 + libc::SIGINT);
                supervisor.stop().await;
            }
            _ = sigterm.recv(), if stop_code.is_none() => {
                stop_code = Some(128 + libc::SIGTERM);
                supervisor.stop().await;
            }
        }
    };
    let (succeeded, detail) = match cause {
        Cause::Own if code == 0 => (true, None),
        Cause::Own => (false, Some(format!("exit status {code}"))),
        Cause::Stop if lost => (false, Some("stopped: the claim was lost".to_string())),
        Cause::Stop => (
            false,
            Some(format!("stopped by a signal (exit status {code})")),
        ),
        Cause::Deadline => (
            false,
            Some("stopped at the local deadline: no renewal in time".to_string()),
        ),
    };
    // Recorded unless another replica claimed the run since.
    let mut recorded = None;
    for _ in 0..3 {
        match scheduler.finish(&run, succeeded, detail.as_deref()).await {
            Ok(done) => {
                recorded = Some(done);
                break;
            }
            Err(_) => sleep(retry).await,
        }
    }
    let outcome = if succeeded { "succeeded" } else { "failed" };
    {
        let mut m = lock(stats);
        m.running = false;
        if recorded == Some(true) {
            m.settled(seconds(run.due), outcome);
        }
    }
    log.event(
        "run_finished",
        &format!(
            "the run due {due} {outcome}{}{}",
            detail
                .as_deref()
                .map_or_else(String::new, |d| format!(" ({d})")),
            match recorded {
                Some(true) => "",
                Some(false) => "; not recorded: it was claimed again since",
                None => "; not recorded: the database did not answer",
            }
        ),
        json!({"due": due, "term": run.term, "outcome": outcome, "exit": code, "recorded": recorded}),
    );
    stop_code
}

/// For `/metrics`: the job's schedule as the database knows it (contract
/// 24: how overdue, its grace, its missed runs), read every 5 s on a
/// connection of its own, so that any replica reports the job's lateness
/// whoever was meant to run it.
async fn read_schedule(db: ConnectConfig, job: String, stats: SharedRuns) {
    const EVERY: Duration = Duration::from_secs(5);
    let job = Some(job);
    loop {
        if let Ok((client, mut messages)) = db.connect().await {
            tokio::spawn(async move {
                use futures_util::StreamExt;
                while let Some(Ok(_)) = messages.next().await {}
            });
            if let Ok(d) = leaderlock_client::Db::attach(client, db.schema()).await {
                while let Ok(rows) = d
                    .query_typed(
                        leaderlock_client::sql::SCHEDULES,
                        &[(&job, tokio_postgres::types::Type::TEXT)],
                    )
                    .await
                {
                    let read = rows.first().map(metrics::ScheduleRead::from_row);
                    stats.lock().unwrap_or_else(|e| e.into_inner()).schedule = read;
                    sleep(EVERY).await;
                }
            }
        }
        sleep(EVERY).await;
    }
}
