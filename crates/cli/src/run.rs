//! `leaderlock run -- cmd args...`: the command runs only while this
//! process leads. The elector (in this process) campaigns and renews; the
//! supervisor (a process of its own, see supervisor.rs) starts the command
//! and stops it at the local deadline whatever happens to this process.
use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use leaderlock_client::{
    pg_config_from_env, Elector, ElectorConfig, Event, MemberConfig, RunConfig, Schedule,
    StopReason,
};
use serde_json::json;
use tokio::signal::unix::{signal, SignalKind};
use tokio::time::{sleep_until, Instant};

use crate::log::{Format, Log};
use crate::supervisor::{Cause, Handle, Message};
use crate::{exit, group_run, metrics, scheduled, text};

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Exit status: the command's own (128+N if a signal N it did not get from us \
ended it); 120 not acquired within --timeout; 121 lease lost; 122 database \
unreachable; 123 rejected by the server (extension missing, bad key or id, \
no privilege); 124 internal error; 127 command cannot be started; 130/143 \
after SIGINT/SIGTERM; 2 bad flags.")]
pub struct RunArgs {
    /// The election's key. Default: the command's file name.
    #[arg(long)]
    key: Option<String>,
    /// This candidate's id. Default: host:pid:random.
    #[arg(long)]
    id: Option<String>,
    /// Lease length; renewed every ttl/3. At least 500ms.
    #[arg(long, default_value = "10s", value_parser = crate::duration::parse)]
    ttl: Duration,
    /// Give up if not leading within this time (0: try once). Default: wait
    /// for ever.
    #[arg(long, value_parser = crate::duration::parse)]
    timeout: Option<Duration>,
    /// Time between SIGTERM and SIGKILL when the command must stop. The
    /// command gets SIGTERM at (local deadline - grace). Must be shorter
    /// than two thirds of the ttl. Default: ttl/4.
    #[arg(long, value_parser = crate::duration::parse)]
    grace: Option<Duration>,
    /// How many candidates may run the command at once (a semaphore of the
    /// key, extension 0.5.0): every candidate of the key must give the
    /// same number (while the key is held with another, this one waits).
    /// Default 1: one leader.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    slots: u32,
    /// While this candidate waits, no candidate of lower priority becomes
    /// leader (a leader is never preempted; extension 0.5.0, preloaded).
    /// Default 0. A host that must never lead simply does not run
    /// `leaderlock run`.
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    priority: i32,
    /// Restart the command when it exits while leading, and campaign again
    /// after losing the lease, instead of exiting.
    #[arg(long)]
    restart: bool,
    /// With --restart: pause before starting the command again. At least
    /// 50ms.
    #[arg(long, default_value = "1s", value_parser = crate::duration::parse)]
    restart_delay: Duration,
    /// How often to try while another candidate leads. Default: 1 s, or
    /// ttl/2 once notifications are seen to arrive. At least 50ms.
    #[arg(long, value_parser = crate::duration::parse)]
    poll: Option<Duration>,
    #[arg(long, value_enum, default_value = "text")]
    log_format: Format,
    /// Serve Prometheus metrics at http://ADDR/metrics and a health check
    /// at http://ADDR/healthz (fails while the elector is stuck, or leads
    /// with no renewal for two thirds of a ttl), e.g. 127.0.0.1:9187.
    #[arg(long, value_name = "ADDR")]
    metrics: Option<std::net::SocketAddr>,
    /// Keep the connection settings out of the command's environment:
    /// LEADERLOCK_DSN, DATABASE_URL and every PG* variable (PGPASSWORD
    /// among them). By default the command inherits the whole environment.
    #[arg(long)]
    no_connection_env: bool,
    /// Scheduled runs (extension 0.5.0): run the command once per period
    /// (e.g. 5m; due instants at multiples of it since the Unix epoch, on
    /// the server's clock), on one of the replicas that run this same line.
    #[arg(long, value_parser = crate::duration::parse, conflicts_with = "cron", help_heading = "Scheduled runs")]
    every: Option<Duration>,
    /// Scheduled runs by a cron expression: five fields (minute hour
    /// day-of-month month day-of-week), or six with seconds first.
    #[arg(long, value_name = "EXPR", help_heading = "Scheduled runs")]
    cron: Option<String>,
    /// Time zone of --cron (an IANA name). Default UTC.
    #[arg(
        long,
        default_value = "UTC",
        requires = "cron",
        help_heading = "Scheduled runs"
    )]
    tz: String,
    /// A run not started within this time after it is due is not run, and
    /// recorded as missed. Default: the period of --every; 5 minutes with
    /// --cron.
    #[arg(long, value_parser = crate::duration::parse, help_heading = "Scheduled runs")]
    misfire_grace: Option<Duration>,
    /// The job's name. Default: --key, else the command's file name. Alone
    /// (no --every, --cron): run the job's schedule kept in the database
    /// (le_schedule), following its changes.
    #[arg(long, help_heading = "Scheduled runs")]
    job: Option<String>,
    /// With --every or --cron: register them as the job's schedule in the
    /// database at start (le_schedule), so that replicas run with --job
    /// alone follow it and the database records the runs nobody claimed.
    #[arg(long, help_heading = "Scheduled runs")]
    register: bool,
    /// With --register: whether runs of the job may overlap: allow, forbid
    /// (a run waits, within its grace, for the one before to end) or
    /// replace (a run ends the one before; its runner is fenced off).
    #[arg(long, value_parser = ["allow", "forbid", "replace"], requires = "register", help_heading = "Scheduled runs")]
    overlap: Option<String>,
    /// Groups (contract 26): be a member of this group and run the command
    /// once per partition the server assigns to it, with LEADERLOCK_GROUP,
    /// LEADERLOCK_MEMBER (--id), LEADERLOCK_PARTITION and LEADERLOCK_TERM
    /// in its environment. A partition's command is stopped (SIGTERM, then
    /// SIGKILL after --grace) at the local deadline or when the partition
    /// is revoked (then given back), started again after --restart-delay
    /// if it exits while the partition is ours. Runs until SIGINT/SIGTERM
    /// (every command stopped, then the member leaves) or a refusal.
    #[arg(long, help_heading = "Groups", conflicts_with_all = ["every", "cron", "job", "register"])]
    group: Option<String>,
    /// With --group: the group's partition count, for its first join (or
    /// its maker's change), 1 to 100000.
    #[arg(long, requires = "group", value_parser = clap::value_parser!(i32).range(1..=100_000), help_heading = "Groups")]
    partitions: Option<i32>,
    /// With --group: how long an owner has to give a revoked partition
    /// back, for the group's first join (or its maker's change). Default:
    /// the group's (10s for a new one).
    #[arg(long, requires = "group", value_parser = crate::duration::parse, help_heading = "Groups")]
    drain: Option<Duration>,
    /// The command and its arguments (run directly, without a shell).
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    command: Vec<OsString>,
}

const MIN_TTL: Duration = Duration::from_millis(500);
const MIN_POLL: Duration = Duration::from_millis(50);
const MIN_RESTART_DELAY: Duration = Duration::from_millis(50);

/// What a finished run exits with, once the command is gone and the lease
/// released.
struct Finish(i32);

pub async fn run(args: RunArgs, dsn: Option<&str>) -> i32 {
    let log = Log {
        format: args.log_format,
    };
    let fail = |message: String, code: i32| {
        log.event("error", &message, json!({ "exit": code }));
        code
    };
    let db = match pg_config_from_env(dsn) {
        Ok(db) => db,
        Err(e) => return fail(e.to_string(), exit::USAGE),
    };
    let key = args.key.clone().unwrap_or_else(|| {
        Path::new(&args.command[0])
            .file_name()
            .map_or_else(|| "command".into(), |n| n.to_string_lossy().into_owned())
    });
    let remove = connection_env(&args);
    if let Some(group) = &args.group {
        return match group_member(&args, group) {
            Ok(g) => group_run::run(g, db, log).await,
            Err(message) => fail(message, exit::USAGE),
        };
    }
    // --job alone: the job's schedule kept in the database (contract 24).
    if args.every.is_some() || args.cron.is_some() || args.job.is_some() {
        return match scheduled_job(&args, key, remove) {
            Ok(job) => scheduled::run(job, db, log).await,
            Err(message) => fail(message, exit::USAGE),
        };
    }
    let mut config = ElectorConfig::with_ttl(key.clone(), args.ttl);
    if let Some(id) = &args.id {
        config.id = id.clone();
    }
    config.poll_every = args.poll;
    config.campaign_again = args.restart;
    config.slots = args.slots;
    config.priority = args.priority;
    // Floors: below them a tenure (or a try) could not do any work before
    // the next, and the CLI would only load the database.
    for (flag, value, floor) in [
        ("--ttl", Some(args.ttl), MIN_TTL),
        ("--poll", args.poll, MIN_POLL),
        (
            "--restart-delay",
            Some(args.restart_delay),
            MIN_RESTART_DELAY,
        ),
    ] {
        if value.is_some_and(|v| v < floor) {
            return fail(format!("{flag} must be at least {floor:?}"), exit::USAGE);
        }
    }
    let grace = match checked_grace(&args, config.renew_every, config.margin) {
        Ok(grace) => grace,
        Err(message) => return fail(message, exit::USAGE),
    };
    let id = config.id.clone();
    let env = [
        ("LEADERLOCK_KEY", key.as_str()),
        ("LEADERLOCK_ID", id.as_str()),
    ];
    let mut supervisor = match Handle::spawn(&args.command, grace, &env, &remove) {
        Ok(s) => s,
        Err(e) => return fail(format!("cannot start the supervisor: {e}"), exit::INTERNAL),
    };
    log.event(
        "campaigning",
        &format!(
            "campaigning for key {key:?} as {id:?} (ttl {:?}, grace {grace:?})",
            args.ttl
        ),
        json!({"key": key, "id": id, "ttl": args.ttl.as_secs_f64(), "grace": grace.as_secs_f64()}),
    );
    let metrics = metrics::Shared::default();
    let listener = match args.metrics {
        Some(addr) => match tokio::net::TcpListener::bind(addr).await {
            Ok(listener) => Some(listener),
            Err(e) => {
                supervisor.close();
                return fail(
                    format!("--metrics: cannot listen on {addr}: {e}"),
                    exit::USAGE,
                );
            }
        },
        None => None,
    };
    let elector = Elector::start(db, config);
    if let Some(listener) = listener {
        // Wedged: later than a call's timeout (ttl/3) allows, with room.
        let wedged_after = args.ttl.max(Duration::from_secs(5));
        tokio::spawn(metrics::serve(
            listener,
            key.clone(),
            metrics.clone(),
            elector.watchdog(),
            wedged_after,
            // a renewal's interval plus its call's timeout: late only when
            // one has really failed
            args.ttl * 2 / 3,
        ));
    }
    let code = Run {
        args: &args,
        log,
        elector,
        supervisor: &mut supervisor,
        metrics,
    }
    .go()
    .await;
    supervisor.close();
    code
}

/// The variables kept out of the command's environment: the connection
/// settings with --no-connection-env, else none.
fn connection_env(args: &RunArgs) -> Vec<OsString> {
    if !args.no_connection_env {
        return Vec::new();
    }
    std::env::vars_os()
        .map(|(name, _)| name)
        .filter(|name| {
            let n = name.to_string_lossy();
            n.starts_with("PG") || n == "DATABASE_URL" || n == "LEADERLOCK_DSN"
        })
        .collect()
}

/// The time between SIGTERM and SIGKILL (`--grace`, default ttl/4), or why
/// not (a usage error). SIGTERM goes at the last renewal's start + ttl,
/// less the margin and the grace: a grace that leaves no room for the
/// renewal due every `renew_every` would stop every command a few seconds
/// into its tenure (or its run).
fn checked_grace(
    args: &RunArgs,
    renew_every: Duration,
    margin: Duration,
) -> Result<Duration, String> {
    let grace = args.grace.unwrap_or(args.ttl / 4);
    if grace + renew_every + margin >= args.ttl {
        return Err(format!(
            "--grace ({grace:?}) must be shorter than two thirds of --ttl ({:?}): \
             the renewal every ttl/3 must be able to move the deadline before SIGTERM",
            args.ttl
        ));
    }
    Ok(grace)
}

/// The group member `args` describe, or why not (a usage error).
fn group_member(args: &RunArgs, group: &str) -> Result<group_run::Group, String> {
    for (flag, given) in [
        ("--key", args.key.is_some()),
        ("--restart", args.restart),
        ("--slots", args.slots != 1),
        ("--priority", args.priority != 0),
        ("--timeout", args.timeout.is_some()),
        ("--poll", args.poll.is_some()),
        ("--metrics", args.metrics.is_some()),
    ] {
        if given {
            return Err(format!("{flag} applies to leading, not to --group"));
        }
    }
    if args.ttl < MIN_TTL {
        return Err(format!("--ttl must be at least {MIN_TTL:?}"));
    }
    if args.restart_delay < MIN_RESTART_DELAY {
        return Err(format!(
            "--restart-delay must be at least {MIN_RESTART_DELAY:?}"
        ));
    }
    let mut config = MemberConfig::new(group, args.ttl);
    if let Some(id) = &args.id {
        config.id = id.clone();
    }
    config.partitions = args.partitions;
    config.drain = args.drain;
    let grace = checked_grace(args, args.ttl / 3, config.margin)?;
    Ok(group_run::Group {
        config,
        grace,
        restart_delay: args.restart_delay,
        command: args.command.clone(),
        remove_env: connection_env(args),
    })
}

/// The scheduled job `args` describe, or why not (a usage error).
fn scheduled_job(
    args: &RunArgs,
    key: String,
    remove_env: Vec<OsString>,
) -> Result<scheduled::Job, String> {
    for (flag, given) in [
        ("--restart", args.restart),
        ("--slots", args.slots != 1),
        ("--priority", args.priority != 0),
        ("--timeout", args.timeout.is_some()),
        ("--poll", args.poll.is_some()),
    ] {
        if given {
            return Err(format!(
                "{flag} applies to leading, not to scheduled runs (--every, --cron, --job)"
            ));
        }
    }
    if args.ttl < MIN_TTL {
        return Err(format!("--ttl must be at least {MIN_TTL:?}"));
    }
    let schedule = match (&args.every, &args.cron) {
        (Some(every), _) => Schedule::every(*every),
        (None, Some(expr)) => Schedule::cron(expr, &args.tz),
        (None, None) if args.register => {
            return Err("--register goes with --every or --cron".into())
        }
        (None, None) if args.misfire_grace.is_some() => {
            return Err(
                "--misfire-grace goes with --every or --cron: a job run by name alone (--job) \
                 has its schedule's (le_schedule)"
                    .into(),
            )
        }
        (None, None) => Ok(Schedule::registered()),
    }
    .map_err(|e| e.to_string())?;
    let mut config = RunConfig::new(args.job.clone().unwrap_or(key), args.ttl);
    if let Some(id) = &args.id {
        config.id = id.clone();
    }
    // (a registered schedule's grace is the database's: none sent)
    config.misfire_grace = (!schedule.is_registered()).then(|| {
        args.misfire_grace
            .or(args.every)
            .unwrap_or(Duration::from_secs(300))
    });
    let grace = checked_grace(args, args.ttl / 3, config.margin)?;
    Ok(scheduled::Job {
        register: args
            .register
            .then(|| args.overlap.clone().unwrap_or_else(|| "allow".into())),
        schedule,
        metrics: args.metrics,
        config,
        grace,
        command: args.command.clone(),
        remove_env,
    })
}

struct Run<'a> {
    args: &'a RunArgs,
    log: Log,
    elector: Elector,
    supervisor: &'a mut Handle,
    metrics: metrics::Shared,
}

impl Run<'_> {
    async fn go(mut self) -> i32 {
        let mut sigint = signal(SignalKind::interrupt()).expect("signal handler");
        let mut sigterm = signal(SignalKind::terminate()).expect("signal handler");
        let mut sighup = signal(SignalKind::hangup()).expect("signal handler");
        let mut sigusr1 = signal(SignalKind::user_defined1()).expect("signal handler");
        let mut sigusr2 = signal(SignalKind::user_defined2()).expect("signal handler");
        let started = Instant::now();
        let far = started + Duration::from_secs(100 * 365 * 86400);
        let give_up_at = self.args.timeout.map(|t| started + t);
        let try_once = self.args.timeout == Some(Duration::ZERO);

        let mut leading = None;
        let mut ever_led = false;
        // From sending `start` until `exited` or `spawn-failed`: a start not
        // yet confirmed must be stopped like a running command.
        let mut child_running = false;
        let mut child_pid: Option<u32> = None;
        // The supervisor died: the lease is left to expire, not released.
        let mut abandon = false;
        let mut db_down = false;
        let mut restart_at: Option<Instant> = None;
        let mut last_holder: Option<Option<String>> = None;
        // Set once the run must end: the exit code, waiting for the command.
        let mut finish: Option<Finish> = None;

        loop {
            if let Some(Finish(code)) = finish {
                if abandon {
                    self.elector.abandon();
                    return code;
                }
                if !child_running {
                    let released = self.elector.shutdown().await;
                    if released {
                        self.log.event("released", "released the lease", json!({}));
                    }
                    return code;
                }
            }
            tokio::select! {
                event = self.elector.next_event() => {
                    let Some(event) = event else {
                        finish.get_or_insert(Finish(exit::INTERNAL));
                        continue;
                    };
                    self.count(&event, leading.is_some());
                    match event {
                        Event::Connected => {
                            db_down = false;
                            self.log.event("connected", "connected to the database", json!({}));
                        }
                        Event::Disconnected { error } => {
                            db_down = true;
                            self.log.event("disconnected", &format!("database: {error}"), json!({"error": error.to_string()}));
                            if try_once && !ever_led {
                                finish.get_or_insert(Finish(exit::UNREACHABLE));
                            }
                        }
                        Event::NotificationsArrive => {}
                        Event::Served { worker, poll_every } => {
                            if worker {
                                self.log.event("served", "a background worker announces expiries", json!({"worker": true}));
                            } else {
                                self.log.event("served", &format!("no background worker serves this database: trying every {} ms, announcing expiries with le_expire_lapsed()", poll_every.as_millis()), json!({"worker": false, "poll_every_ms": poll_every.as_millis() as u64}));
                            }
                        }
                        Event::Refused { holder } => {
                            if last_holder.as_ref() != Some(&holder) {
                                let by = holder.as_deref().map_or_else(|| "(unknown)".into(), |h| format!("\"{}\"", text::shown(h)));
                                self.log.event("refused", &format!("held by {by}"), json!({"holder": holder}));
                                last_holder = Some(holder);
                            }
                            if try_once && !ever_led {
                                finish.get_or_insert(Finish(exit::NOT_ACQUIRED));
                            }
                        }
                        Event::SlotsDiffer { message } => {
                            // Not ours now, and not for ever: the rival
                            // tenures end, then the key takes our number.
                            last_holder = None;
                            self.log.event("slots_differ", &format!("the key is held with another number of slots than --slots {}: waiting for those tenures to end ({message})", self.args.slots), json!({"slots": self.args.slots, "error": message}));
                            if try_once && !ever_led {
                                finish.get_or_insert(Finish(exit::NOT_ACQUIRED));
                            }
                        }
                        Event::Started(lease) => {
                            ever_led = true;
                            last_holder = None;
                            leading = Some(lease);
                            self.log.event("leading", &format!("leading, term {}", lease.term), json!({"term": lease.term}));
                            if finish.is_none() && !child_running {
                                self.supervisor.start(lease.term, lease.deadline).await;
                                child_running = true;
                            }
                        }
                        Event::Renewed(lease) => {
                            leading = Some(lease);
                            self.supervisor.extend(lease.term, lease.deadline).await;
                        }
                        Event::RenewalDeferred(lease) => {
                            self.log.event("renewal_deferred", &format!("renewal refused while the lease is still ours (term {}): its row is locked by another transaction; retrying until the deadline", lease.term), json!({"term": lease.term}));
                        }
                        Event::Stopped { term, reason } => {
                            leading = None;
                            restart_at = None;
                            self.log.event("stopped", &format!("no longer leading (term {term}): {reason}"), json!({"term": term, "reason": reason.to_string()}));
                            if child_running {
                                self.supervisor.stop().await;
                            }
                            if !self.args.restart && !matches!(reason, StopReason::Shutdown) {
                                let code = if reason == StopReason::Deadline && db_down { exit::UNREACHABLE } else { exit::LEASE_LOST };
                                finish.get_or_insert(Finish(code));
                            }
                        }
                        Event::Failed { error } => {
                            self.log.event("rejected", &error.to_string(), json!({"error": error.to_string(), "sqlstate": error.sqlstate()}));
                            if child_running {
                                self.supervisor.stop().await;
                            }
                            // (over the "lease lost" of the Stopped just before)
                            finish = Some(Finish(exit::REJECTED));
                        }
                    }
                }
                message = self.supervisor.next() => match message {
                    Message::Started(pid) => {
                        child_pid = Some(pid);
                        self.log.event("child_started", &format!("started the command, pid {pid}"), json!({"child": pid}));
                    }
                    Message::SpawnFailed(e) => {
                        child_running = false;
                        self.log.event("error", &format!("cannot start the command: {e}"), json!({"error": e}));
                        finish.get_or_insert(Finish(exit::CANNOT_RUN));
                    }
                    Message::Exited(code, cause, term) => {
                        *self.metrics().command_exits.entry(match cause {
                            Cause::Own => "own", Cause::Stop => "stopped", Cause::Deadline => "deadline",
                        }).or_default() += 1;
                        child_running = false;
                        child_pid = None;
                        self.log.event("child_exited", &format!("the command exited with {code} ({})", match cause {
                            Cause::Own => "by itself", Cause::Stop => "stopped", Cause::Deadline => "stopped at the local deadline",
                        }), json!({"code": code, "cause": format!("{cause:?}").to_lowercase()}));
                        match cause {
                            Cause::Own if finish.is_none() => {
                                if self.args.restart {
                                    restart_at = Some(Instant::now() + self.args.restart_delay);
                                } else {
                                    finish = Some(Finish(code));
                                }
                            }
                            // Stopped on a loss, but leading again already.
                            Cause::Stop if finish.is_none() && self.args.restart
                                && self.elector.leadership().is_some() => {
                                restart_at = Some(Instant::now());
                            }
                            Cause::Deadline => {
                                // This process could not renew in time (stopped,
                                // starved, database unreachable): give the lease up,
                                // unless it is already a newer tenure's.
                                if leading.is_some_and(|l| l.term == term) {
                                    leading = None;
                                    self.elector.resign();
                                }
                                if !self.args.restart {
                                    finish.get_or_insert(Finish(if db_down { exit::UNREACHABLE } else { exit::LEASE_LOST }));
                                }
                            }
                            _ => {}
                        }
                    }
                    Message::Gone => {
                        // The kernel killed the command (PR_SET_PDEATHSIG); the
                        // rest of its group is ours to kill. The lease is left to
                        // expire: nothing here can prove the group is gone.
                        if let Some(pid) = child_pid.take() {
                            // SAFETY: kill has no memory effects.
                            unsafe { libc::kill(-(pid as libc::pid_t), libc::SIGKILL) };
                        }
                        self.log.event("error", "the supervisor process is gone: the lease is left to expire", json!({}));
                        child_running = false;
                        abandon = true;
                        finish = Some(Finish(exit::INTERNAL));
                    }
                },
                _ = sleep_until(restart_at.unwrap_or(far)), if restart_at.is_some() => {
                    restart_at = None;
                    if let Some(lease) = self.elector.leadership() {
                        if finish.is_none() && !child_running {
                            self.supervisor.start(lease.term, lease.deadline).await;
                            child_running = true;
                        }
                    }
                }
                _ = sleep_until(give_up_at.unwrap_or(far)), if give_up_at.is_some() && !ever_led && finish.is_none() && !try_once => {
                    let code = if db_down { exit::UNREACHABLE } else { exit::NOT_ACQUIRED };
                    self.log.event("timeout", "not leading within --timeout", json!({}));
                    finish = Some(Finish(code));
                }
                _ = sigint.recv() => self.interrupted(&mut finish, child_running, libc::SIGINT).await,
                _ = sigterm.recv() => self.interrupted(&mut finish, child_running, libc::SIGTERM).await,
                _ = sighup.recv() => self.supervisor.signal(libc::SIGHUP).await,
                _ = sigusr1.recv() => self.supervisor.signal(libc::SIGUSR1).await,
                _ = sigusr2.recv() => self.supervisor.signal(libc::SIGUSR2).await,
            }
        }
    }

    fn metrics(&self) -> std::sync::MutexGuard<'_, metrics::Metrics> {
        self.metrics.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What `event` changes in the metrics (`leading`: before it).
    fn count(&self, event: &Event, leading: bool) {
        let mut m = self.metrics();
        match event {
            Event::Started(lease) => {
                m.leading = true;
                m.term = lease.term;
                m.deadline = Some(lease.deadline);
                m.last_renewal = Some(Instant::now());
            }
            Event::Renewed(lease) => {
                m.renewals += 1;
                m.deadline = Some(lease.deadline);
                m.last_renewal = Some(Instant::now());
            }
            Event::RenewalDeferred(_) => m.renewals_failed += 1,
            Event::Disconnected { .. } if leading => m.renewals_failed += 1,
            Event::Stopped { reason, .. } => {
                m.leading = false;
                m.deadline = None;
                *m.stops
                    .entry(match reason {
                        StopReason::Refused => "refused",
                        StopReason::Deadline => "deadline",
                        StopReason::Resigned => "resigned",
                        StopReason::Shutdown => "shutdown",
                    })
                    .or_default() += 1;
            }
            _ => {}
        }
    }

    async fn interrupted(&mut self, finish: &mut Option<Finish>, child_running: bool, signo: i32) {
        self.log.event(
            "signal",
            &format!("got signal {signo}: stopping"),
            json!({ "signal": signo }),
        );
        if child_running {
            self.supervisor.stop().await;
        }
        *finish = Some(Finish(128 + signo));
    }
}
