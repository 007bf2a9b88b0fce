//! Scheduled runs (contract 22): a job that every replica schedules alike
//! and that runs once per due instant, on one of them.
//!
//! Due instants come from a [`Schedule`] and are read on the server's
//! lease clock (`le_now()`), never on this host's. A [`Scheduler`] waits for
//! each to come, claims its run, and hands it over as a [`Run`] with a
//! fencing term and a local deadline (the claim's ttl from the moment the
//! claim was sent, less a margin): act only while [`Run::is_ours`] says so,
//! checked right before each side effect, renew with
//! [`Scheduler::renew`] every ttl/3, and [`Scheduler::finish`] with the
//! outcome. A run another replica claimed is watched until it is finished,
//! and claimed again if its claim lapses unfinished (its runner died: the
//! new claim has a higher term, so fence side effects with it).
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use leaderlock_protocol::calendar;
use tokio::time::{sleep, timeout, Instant};
use tokio_postgres::types::Type;

use crate::config::{micros, ConnectConfig};
use crate::db::Db;
use crate::error::{explain, Error};
use crate::sql;

/// When a job is due: every period (instants at multiples of it since the
/// Unix epoch, so every replica computes the same ones), by a cron
/// expression in a time zone (the extension computes a registered
/// schedule's instants with the same code, `leaderlock_protocol::calendar`),
/// or as the job's schedule kept in the database says ([`Schedule::registered`]).
#[derive(Debug, Clone)]
pub struct Schedule(Source);

#[derive(Debug, Clone)]
enum Source {
    /// Computed here, from what it was made of (kept to register it).
    Local(calendar::Schedule, Spec),
    Registered,
}

/// What a local schedule was made of.
#[derive(Debug, Clone)]
enum Spec {
    Every(Duration),
    Cron { expr: String, tz: String },
}

impl Schedule {
    /// Every `period`: at least a millisecond, in whole milliseconds.
    pub fn every(period: Duration) -> Result<Schedule, Error> {
        let bad = || {
            Error::Config(format!(
                "a period must be whole milliseconds, at least 1ms (got {period:?})"
            ))
        };
        if !period.subsec_nanos().is_multiple_of(1_000) {
            return Err(bad());
        }
        let us = i64::try_from(period.as_micros()).map_err(|_| bad())?;
        calendar::Schedule::every(us)
            .map(|c| Schedule(Source::Local(c, Spec::Every(period))))
            .map_err(|_| bad())
    }

    /// A cron expression: five fields (minute hour day-of-month month
    /// day-of-week), or six with seconds first, or `@hourly`, `@daily`,
    /// `@weekly`, `@monthly`, `@yearly`, in time zone `tz` (an IANA name, e.g. `Europe/Paris`; `UTC`). Across
    /// daylight saving changes a local time that does not exist is skipped
    /// and one that occurs twice is due once, at the first (the cron
    /// crate's rule; docs/scheduled-runs.md).
    pub fn cron(expr: &str, tz: &str) -> Result<Schedule, Error> {
        let spec = Spec::Cron {
            expr: expr.to_owned(),
            tz: tz.to_owned(),
        };
        calendar::Schedule::cron(expr, tz)
            .map(|c| Schedule(Source::Local(c, spec)))
            .map_err(Error::Config)
    }

    /// The job's schedule kept in the database (contract 24, `le_schedule`):
    /// each due instant is read from the server (`le_next_due`), so a
    /// change or a pause takes effect within [`RunConfig::poll_every`],
    /// without a restart; its misfire grace is the schedule's. The missed
    /// instants its backfill lets run late (`le_backfill_due`) are claimed
    /// as any due run.
    pub fn registered() -> Schedule {
        Schedule(Source::Registered)
    }

    /// Whether the instants come from the database.
    pub fn is_registered(&self) -> bool {
        matches!(self.0, Source::Registered)
    }

    /// The first due instant strictly after `t` (None for a registered
    /// schedule: the server says).
    pub fn next_after(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match &self.0 {
            Source::Local(c, _) => c.next_after(t),
            Source::Registered => None,
        }
    }

    /// The first due instant at or after `t`.
    pub fn at_or_after(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match &self.0 {
            Source::Local(c, _) => c.at_or_after(t),
            Source::Registered => None,
        }
    }
}

/// Settings of a [`Scheduler`].
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// The job's name (contract 22: as a key, 1 to 255 bytes).
    pub job: String,
    /// This replica's id. Default: [`crate::default_id`].
    pub id: String,
    /// Length of a claim, renewed every ttl/3 while the run goes on.
    pub ttl: Duration,
    /// A run not claimed within this time after its due instant is not
    /// run, and recorded as missed (once). None: no limit. Also how far
    /// back a scheduler that starts looks for a run due before it started.
    pub misfire_grace: Option<Duration>,
    /// How often to look at a run another replica has claimed (it is
    /// claimed again if that claim lapses unfinished). Default 1 s.
    pub poll_every: Duration,
    /// Subtracted from every local deadline (as the elector's).
    pub margin: Duration,
}

impl RunConfig {
    pub fn new(job: impl Into<String>, ttl: Duration) -> RunConfig {
        RunConfig {
            job: job.into(),
            id: crate::default_id(),
            ttl,
            misfire_grace: None,
            poll_every: Duration::from_secs(1),
            margin: Duration::from_micros(leaderlock_protocol::margin(
                micros(ttl),
                leaderlock_protocol::CLOCK_RATE_BOUND_PPM,
            ) as u64),
        }
    }
}

/// A run this replica claimed: run it while [`Run::is_ours`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    pub due: DateTime<Utc>,
    /// The claim's fencing term: above every earlier claim of the job.
    pub term: i64,
    /// Local deadline: the claim may have lapsed on the server from then.
    pub deadline: Instant,
}

impl Run {
    /// Whether this replica may still act for the run: check it right
    /// before every side effect (a timer alone misses a pause).
    pub fn is_ours(&self) -> bool {
        Instant::now() < self.deadline
    }
}

/// What [`Scheduler::next`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Turn {
    /// Claimed by this replica: run it.
    Run(Run),
    /// Finished by another replica, or recorded missed (`outcome` says
    /// which: `succeeded`, `failed` or `missed`).
    Settled {
        due: DateTime<Utc>,
        outcome: Option<String>,
    },
    /// A registered schedule ([`Schedule::registered`]) became absent or
    /// paused (`false`: nothing is claimed meanwhile), or present again
    /// (`true`); told once at each change, and `false` at the start when
    /// the job has none.
    Registered(bool),
}

/// When the database last answered a [`Scheduler`] (any of its calls):
/// for a health check. A clone follows the same scheduler.
#[derive(Clone, Debug, Default)]
pub struct Heartbeat(Arc<Mutex<Option<Instant>>>);

impl Heartbeat {
    /// How long since the last answer; None before the first.
    pub fn silent_for(&self) -> Option<Duration> {
        let last = *self.0.lock().unwrap_or_else(|e| e.into_inner());
        last.map(|t| t.elapsed())
    }

    fn beat(&self) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
    }
}

/// Claims the runs of one job as they come due; see the module's comment.
pub struct Scheduler {
    db: ConnectConfig,
    schedule: Schedule,
    config: RunConfig,
    client: Option<Db>,
    /// The next due instant not yet looked at (a registered schedule: the
    /// last one made pending).
    cursor: Option<DateTime<Utc>>,
    /// Whether the registered schedule was last found (None: not told yet).
    registered: Option<bool>,
    /// Due runs not settled yet, with when to look at each again, and how
    /// often it was found without a row (a claim racing, or pruned).
    pending: BTreeMap<DateTime<Utc>, (Instant, u32)>,
    heartbeat: Heartbeat,
}

/// A run whose row a refused claim cannot find this many times in a row is
/// dropped: due before the retention (a row that races a first claim, or
/// waits for the failover step, appears within a few tries).
const ABSENT_TRIES: u32 = 100;
const RACE_RETRY: Duration = Duration::from_millis(20);
/// Looks again every `RACE_RETRY` this many times before backing off.
const FAST_TRIES: u32 = 10;

impl Scheduler {
    pub fn new(db: ConnectConfig, schedule: Schedule, config: RunConfig) -> Scheduler {
        Scheduler {
            db,
            schedule,
            config,
            client: None,
            cursor: None,
            registered: None,
            pending: BTreeMap::new(),
            heartbeat: Heartbeat::default(),
        }
    }

    pub fn config(&self) -> &RunConfig {
        &self.config
    }

    /// When the database last answered this scheduler.
    pub fn heartbeat(&self) -> Heartbeat {
        self.heartbeat.clone()
    }

    /// A call's longest wait: a third of the ttl, as the elector's.
    fn call_timeout(&self) -> Duration {
        (self.config.ttl / 3).max(Duration::from_millis(100))
    }

    async fn client(&mut self) -> Result<&Db, Error> {
        if self.client.is_none() {
            let (client, mut messages) = timeout(self.call_timeout(), self.db.connect())
                .await
                .map_err(|_| Error::Unreachable("connecting timed out".into()))?
                .map_err(|e| Error::from_pg(&e))?;
            // The connection makes progress only while its messages are read.
            tokio::spawn(async move {
                use futures_util::StreamExt;
                while let Some(m) = messages.next().await {
                    if m.is_err() {
                        break;
                    }
                }
            });
            let limit = self.call_timeout();
            let client = timeout(limit, Db::attach(client, self.db.schema()))
                .await
                .map_err(|_| Error::Unreachable("connecting timed out".into()))??;
            self.client = Some(client);
        }
        Ok(self.client.as_ref().expect("just set"))
    }

    /// One statement, bounded by the call timeout; a connection that failed
    /// or timed out is dropped (the next call connects again).
    async fn query_opt(
        &mut self,
        statement: &str,
        params: &[(&(dyn tokio_postgres::types::ToSql + Sync), Type)],
    ) -> Result<Option<tokio_postgres::Row>, Error> {
        let limit = self.call_timeout();
        let client = self.client().await?;
        let result = match timeout(limit, client.query_opt(statement, params)).await {
            Err(_) => Err(Error::Unreachable("the call timed out".into())),
            Ok(Ok(row)) => {
                self.heartbeat.beat();
                return Ok(row);
            }
            Ok(Err(e)) => Err(explain(client.client(), &e).await),
        };
        if matches!(result, Err(Error::Unreachable(_))) {
            self.client = None;
        }
        result
    }

    async fn server_now(&mut self) -> Result<DateTime<Utc>, Error> {
        let row = self.query_opt(sql::LE_NOW, &[]).await?;
        Ok(row.expect("one row").get(0))
    }

    /// Waits until a run is due and settled or claimed; see [`Turn`].
    /// Errors: [`Error::Unreachable`] (call again: it reconnects),
    /// [`Error::Rejected`] (no extension, a refused job or id, no privilege).
    pub async fn next(&mut self) -> Result<Turn, Error> {
        loop {
            let now = self.server_now().await?;
            let here = Instant::now();
            let cursor = if self.schedule.is_registered() {
                let cursor = self.make_registered_pending(now, here).await?;
                // (None: absent or paused)
                let found = cursor.is_some();
                if self.registered != Some(found) && !(found && self.registered.is_none()) {
                    self.registered = Some(found);
                    return Ok(Turn::Registered(found));
                }
                self.registered = Some(found);
                cursor
            } else {
                Some(self.make_pending(now, here)?)
            };
            let ready = self
                .pending
                .iter()
                .find(|(_, (at, _))| *at <= here)
                .map(|(due, _)| *due);
            let Some(due) = ready else {
                // A registered schedule is read again every poll: a change
                // or a pause is followed without a restart.
                let most = if self.schedule.is_registered() {
                    self.config.poll_every
                } else {
                    Duration::from_secs(10)
                };
                let until_cursor = cursor.map_or(most, |c| (c - now).to_std().unwrap_or_default());
                let until_pending = self
                    .pending
                    .values()
                    .map(|(at, _)| at.saturating_duration_since(here))
                    .min()
                    .unwrap_or(until_cursor);
                // Wake at the earlier; re-read the server's clock then.
                sleep(until_cursor.min(until_pending).min(most)).await;
                continue;
            };
            if let Some(turn) = self.look_at(due).await? {
                return Ok(turn);
            }
        }
    }

    /// Makes every due instant up to `now` pending (looking back one
    /// misfire grace at the start); the next one after `now`.
    fn make_pending(&mut self, now: DateTime<Utc>, here: Instant) -> Result<DateTime<Utc>, Error> {
        let lookback = self.config.misfire_grace.unwrap_or(Duration::ZERO);
        let mut cursor = match self.cursor {
            Some(c) => c,
            None => self
                .schedule
                .at_or_after(now - chrono::Duration::from_std(lookback).unwrap_or_default())
                .ok_or_else(|| Error::Config("the schedule has no due instant".into()))?,
        };
        while cursor <= now {
            self.pending.entry(cursor).or_insert((here, 0));
            match self.schedule.next_after(cursor) {
                Some(next) => cursor = next,
                None => break,
            }
        }
        self.cursor = Some(cursor);
        Ok(cursor)
    }

    /// `make_pending` for a registered schedule: the instants come from the
    /// server, after the last one made pending (`self.cursor` here), or
    /// after now less the schedule's misfire grace at the start. None while
    /// the job has no schedule or it is paused (then looked at from the
    /// start again: no instant of the pause is ever claimed past its grace).
    async fn make_registered_pending(
        &mut self,
        now: DateTime<Utc>,
        here: Instant,
    ) -> Result<Option<DateTime<Utc>>, Error> {
        let job = self.config.job.clone();
        let mut from = self.cursor;
        loop {
            let after = from.unwrap_or(now);
            let row = self
                .query_opt(
                    sql::NEXT_DUE,
                    &[(&job, Type::TEXT), (&after, Type::TIMESTAMPTZ)],
                )
                .await?
                .expect("one row");
            let (next, grace): (Option<DateTime<Utc>>, Option<f64>) = (row.get(0), row.get(1));
            // Missed instants the schedule's backfill lets run late: claimed
            // as any due run (the server decides, each once).
            for late in row.get::<_, Vec<DateTime<Utc>>>(2) {
                self.pending.entry(late).or_insert((here, 0));
            }
            let Some(next) = next else {
                self.cursor = None;
                return Ok(None);
            };
            // Back one misfire grace at the first look, and never further:
            // after a change to a shorter period, the instants since the
            // last one made pending are past their grace (the server
            // refuses them all).
            let grace = Duration::from_secs_f64(grace.unwrap_or(0.0).max(0.0));
            let back = now
                - chrono::Duration::from_std(grace).unwrap_or_default()
                - chrono::Duration::microseconds(1);
            if from.is_none() || (next <= back && from.is_some_and(|f| f < back)) {
                from = Some(back);
                continue;
            }
            if next > now {
                return Ok(Some(next));
            }
            self.pending.entry(next).or_insert((here, 0));
            from = Some(next);
            self.cursor = from;
        }
    }

    /// Tries to claim the due run `due`: a turn, or None when it is to be
    /// looked at again later.
    async fn look_at(&mut self, due: DateTime<Utc>) -> Result<Option<Turn>, Error> {
        let c = &self.config;
        let (job, id) = (c.job.clone(), c.id.clone());
        let ttl = c.ttl.as_secs_f64();
        let grace = c.misfire_grace.map(|g| g.as_secs_f64());
        let sent = Instant::now();
        let row = self
            .query_opt(
                sql::CLAIM_RUN,
                &[
                    (&job, Type::TEXT),
                    (&due, Type::TIMESTAMPTZ),
                    (&id, Type::TEXT),
                    (&ttl, Type::FLOAT8),
                    (&grace, Type::FLOAT8),
                ],
            )
            .await?;
        let term: Option<i64> = row.and_then(|r| r.get(0));
        if let Some(term) = term {
            self.pending.remove(&due);
            let deadline = sent + self.config.ttl - self.config.margin;
            return Ok(Some(Turn::Run(Run {
                due,
                term,
                deadline,
            })));
        }
        let state = self
            .query_opt(
                sql::RUN_STATE,
                &[(&job, Type::TEXT), (&due, Type::TIMESTAMPTZ)],
            )
            .await?;
        let here = Instant::now();
        let poll = self.config.poll_every;
        match state {
            Some(row) if row.get::<_, bool>(0) => {
                self.pending.remove(&due);
                Ok(Some(Turn::Settled {
                    due,
                    outcome: row.get(2),
                }))
            }
            Some(row) => {
                // Claimed live by another: look again when it may have
                // finished or lapsed. Not live: a claim raced this one.
                let wait = row.get::<_, Option<f64>>(1).map_or(RACE_RETRY, |s| {
                    Duration::from_secs_f64(s.max(0.0)).min(poll) + RACE_RETRY
                });
                self.pending.insert(due, (here + wait, 0));
                Ok(None)
            }
            None => {
                // Refused before its row was made: its job's row taken by
                // another claim (the common case: every replica claims at
                // the due instant), the failover step not taken yet, or due
                // before the retention (never to be claimed). Every 20 ms
                // FAST_TRIES times, then backing off (doubling, up to the
                // poll), given up after ABSENT_TRIES: about a minute and a half.
                let tries = self.pending.get(&due).map_or(0, |p| p.1) + 1;
                if tries >= ABSENT_TRIES {
                    self.pending.remove(&due);
                    return Ok(Some(Turn::Settled { due, outcome: None }));
                }
                let backoff = match tries.checked_sub(FAST_TRIES) {
                    None | Some(0) => RACE_RETRY,
                    Some(k) => RACE_RETRY
                        .saturating_mul(1 << k.min(10))
                        .min(poll.max(RACE_RETRY)),
                };
                self.pending.insert(due, (here + backoff, tries));
                Ok(None)
            }
        }
    }

    /// Registers this scheduler's schedule as its job's in the database
    /// (contract 24, `le_schedule`), with its misfire grace (none: the
    /// server's default) and `overlap` (`allow`, `forbid`, `replace`), so
    /// that replicas run by the job's name alone follow it, and the worker
    /// records the instants nobody claimed. The same settings again change
    /// nothing. Its next due instant. A registered schedule has nothing to
    /// register: an error.
    pub async fn register(&mut self, overlap: &str) -> Result<Option<DateTime<Utc>>, Error> {
        let (every, cron, tz) = match &self.schedule.0 {
            Source::Registered => {
                return Err(Error::Config(
                    "a schedule read from the database has nothing to register".into(),
                ))
            }
            Source::Local(_, Spec::Every(p)) => (Some(p.as_secs_f64()), None, "UTC".to_owned()),
            Source::Local(_, Spec::Cron { expr, tz }) => (None, Some(expr.clone()), tz.clone()),
        };
        let job = self.config.job.clone();
        let grace = self.config.misfire_grace.map(|g| g.as_secs_f64());
        let overlap = overlap.to_owned();
        let row = self
            .query_opt(
                sql::REGISTER_SCHEDULE,
                &[
                    (&job, Type::TEXT),
                    (&every, Type::FLOAT8),
                    (&cron, Type::TEXT),
                    (&tz, Type::TEXT),
                    (&grace, Type::FLOAT8),
                    (&overlap, Type::TEXT),
                ],
            )
            .await?;
        Ok(row.and_then(|r| r.get(0)))
    }

    /// Extends the claim of `run` by the ttl: true moves its deadline,
    /// false means it is lost (stop acting for it at once).
    pub async fn renew(&mut self, run: &mut Run) -> Result<bool, Error> {
        let c = &self.config;
        let (job, id, ttl) = (c.job.clone(), c.id.clone(), c.ttl.as_secs_f64());
        let sent = Instant::now();
        let row = self
            .query_opt(
                sql::RENEW_RUN,
                &[
                    (&job, Type::TEXT),
                    (&run.due, Type::TIMESTAMPTZ),
                    (&id, Type::TEXT),
                    (&ttl, Type::FLOAT8),
                    (&run.term, Type::INT8),
                ],
            )
            .await?;
        let renewed = row.is_some_and(|r| r.get::<_, bool>(0));
        if renewed {
            run.deadline = sent + self.config.ttl - self.config.margin;
        }
        Ok(renewed)
    }

    /// Records the outcome of `run`; false when it was claimed again since
    /// (this replica's claim lapsed and another took it).
    pub async fn finish(
        &mut self,
        run: &Run,
        succeeded: bool,
        detail: Option<&str>,
    ) -> Result<bool, Error> {
        let (job, id) = (self.config.job.clone(), self.config.id.clone());
        let row = self
            .query_opt(
                sql::FINISH_RUN,
                &[
                    (&job, Type::TEXT),
                    (&run.due, Type::TIMESTAMPTZ),
                    (&id, Type::TEXT),
                    (&run.term, Type::INT8),
                    (&succeeded, Type::BOOL),
                    (&detail, Type::TEXT),
                ],
            )
            .await?;
        Ok(row.is_some_and(|r| r.get::<_, bool>(0)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn a_period_is_whole_milliseconds() {
        let s = Schedule::every(Duration::from_secs(300)).unwrap();
        assert_eq!(
            s.next_after(at("2026-11-27T10:02:03Z")),
            Some(at("2026-11-27T10:05:00Z"))
        );
        assert!(Schedule::every(Duration::from_micros(1500)).is_err());
        assert!(Schedule::every(Duration::from_nanos(1_000_000_500)).is_err());
        assert!(Schedule::cron("0 3 * * 1", "UTC").is_err());
    }
}
