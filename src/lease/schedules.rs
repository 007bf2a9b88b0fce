//! Contract 24: a job's schedule kept in the database. Its due instants
//! come from `leaderlock_protocol::calendar`, as every Rust replica's do;
//! the worker settles each instant once its misfire grace has passed with
//! the decision a late claim makes (`run_claim`), so an instant nobody
//! claimed is recorded missed exactly once, whether or not any replica is
//! alive, and the schedule's `settled_to` moves past it in the same
//! transaction.

use crate::announce::notify::RunEvent;
use crate::base::clock::{micros, ts};
use crate::base::settings;
use crate::base::ttl::interval_micros;
use crate::lease::runs;
use crate::lease::tenure;
use crate::store::plans;
use crate::store::queries;
use leaderlock_protocol::calendar::Schedule;
use leaderlock_protocol::runs::{past_grace, run_claim, Overlap, RunClaim};
use pgrx::prelude::*;

/// PostgreSQL's epoch (2000-01-01) in microseconds since the Unix epoch.
const PG_EPOCH_IN_UNIX_MICROS: i64 = 946_684_800_000_000;

/// Schedules settled per round, at most, the longest waiting first.
const SCHEDULES_PER_ROUND: i64 = 100;
/// Due instants settled per round, at most, across schedules: the worker's
/// time is shared by every role; a schedule further behind goes on at the
/// next round.
const INSTANTS_PER_ROUND: usize = 1_000;

/// What makes a schedule, as its SQL face checked it.
pub struct Settings<'a> {
    /// Every period, in microseconds; or
    pub every: Option<i64>,
    /// a cron expression,
    pub cron: Option<&'a str>,
    /// in this time zone.
    pub tz: &'a str,
    /// Microseconds.
    pub misfire_grace: i64,
    pub overlap: Overlap,
}

/// The calendar of a schedule's settings (an error says why not).
pub fn calendar(every: Option<i64>, cron: Option<&str>, tz: &str) -> Result<Schedule, String> {
    match (every, cron) {
        (Some(p), _) => Schedule::every(p),
        (None, Some(expr)) => Schedule::cron(expr, tz),
        (None, None) => Err("a schedule needs every or cron".to_string()),
    }
}

/// The first instant of `calendar` strictly after `after` (lease clock).
pub fn next_after(calendar: &Schedule, after: i64) -> Option<i64> {
    calendar
        .next_after_micros(after.checked_add(PG_EPOCH_IN_UNIX_MICROS)?)
        .and_then(|t| t.checked_sub(PG_EPOCH_IN_UNIX_MICROS))
}

/// When the worker next looks at a schedule settled up to `settled_to`:
/// when its next instant's grace ends.
fn next_check(calendar: &Schedule, settled_to: i64, grace: i64) -> Option<i64> {
    next_after(calendar, settled_to)?.checked_add(grace)
}

fn interval(us: i64) -> Interval {
    Interval::new(0, 0, us).expect("a microseconds-only interval is always valid")
}

/// A schedule's every, cron, tz and misfire grace, read from four columns
/// of a row from `at` on.
struct Spec {
    every: Option<i64>,
    cron: Option<String>,
    tz: String,
    grace: Option<i64>,
}

fn spec(row: &pgrx::spi::SpiHeapTupleData, at: usize) -> Spec {
    let span = |i| {
        row.get::<Interval>(i)
            .ok()
            .flatten()
            .map(|v| interval_micros(&v))
    };
    Spec {
        every: span(at),
        cron: row.get::<String>(at + 1).ok().flatten(),
        tz: row.get::<String>(at + 2).ok().flatten().unwrap_or_default(),
        grace: span(at + 3),
    }
}

impl Spec {
    fn calendar(&self) -> Option<Schedule> {
        calendar(self.every, self.cron.as_deref(), &self.tz).ok()
    }
}

/// A schedule's row as its owner's change reads it, locked.
pub struct Locked {
    pub member: bool,
    pub same: bool,
    pub paused: bool,
}

fn lock(job: &str, caller: pg_sys::Oid, settings: Option<&Settings>) -> Option<Locked> {
    plans::run(queries::LOCK_SCHEDULE, &[job.into(), caller.into()], |t| {
        let row = t.into_iter().next()?;
        let Spec {
            every,
            cron,
            tz,
            grace,
        } = spec(&row, 2);
        let overlap = row.get::<String>(6).ok().flatten();
        let same = settings.is_some_and(|s| {
            every == s.every
                && cron.as_deref() == s.cron
                && tz == s.tz
                && grace == Some(s.misfire_grace)
                && overlap.as_deref().and_then(Overlap::named) == Some(s.overlap)
        });
        Some(Locked {
            member: row.get::<bool>(1).ok().flatten().unwrap_or(false),
            same,
            paused: row.get::<bool>(7).ok().flatten().unwrap_or(false),
        })
    })
}

/// What a change of a schedule found.
pub enum Change {
    /// Made, changed, or found as asked; its next due instant.
    Done(Option<i64>),
    /// Another role's (not a member of its owner): nothing changed.
    NotOwner,
}

/// Makes or changes job `job`'s schedule at `now`, for `caller`. A change
/// judges the instants from `now` on; the same settings again change
/// nothing (a replica that registers its schedule at every start never
/// hides a miss). The job's row is made for a new job (counted against
/// `leaderlock.max_jobs_per_role` by `make_job`).
pub fn schedule(
    job: &str,
    settings: &Settings,
    calendar: &Schedule,
    now: i64,
    caller: pg_sys::Oid,
    make_job: impl FnOnce(),
) -> Change {
    let first_check = next_check(calendar, now, settings.misfire_grace);
    let args = |t: Option<i64>| {
        [
            job.into(),
            settings.every.map(interval).into(),
            settings.cron.into(),
            settings.tz.into(),
            interval(settings.misfire_grace).into(),
            overlap_name(settings.overlap).into(),
            ts(now).into(),
            t.map(ts).into(),
            caller.into(),
        ]
    };
    match lock(job, caller, Some(settings)) {
        Some(l) if !l.member => return Change::NotOwner,
        Some(l) if l.same => {}
        Some(_) => plans::run(queries::CHANGE_SCHEDULE, &args(first_check)[..8], |_| ()),
        None => {
            let owned = plans::run(queries::JOB_OWNED_BY, &[job.into(), caller.into()], |t| {
                t.first().get_one::<bool>().ok().flatten()
            });
            match owned {
                Some(false) => return Change::NotOwner,
                Some(true) => {}
                None => {
                    make_job();
                    let made = [job.into(), caller.into()];
                    tenure::insert_first(queries::INSERT_JOB, &made, now, Some(now));
                }
            }
            plans::run(queries::INSERT_SCHEDULE, &args(first_check), |_| ());
        }
    }
    Change::Done(next_after(calendar, now))
}

pub fn overlap_name(o: Overlap) -> &'static str {
    match o {
        Overlap::Allow => "allow",
        Overlap::Forbid => "forbid",
        Overlap::Replace => "replace",
    }
}

/// Job `job`'s schedule goes: Some(whether it did), None: another role's.
pub fn unschedule(job: &str, caller: pg_sys::Oid) -> Option<bool> {
    match lock(job, caller, None) {
        None => Some(false),
        Some(l) if !l.member => None,
        Some(_) => {
            plans::run(queries::DELETE_SCHEDULE, &[job.into()], |_| ());
            Some(true)
        }
    }
}

/// Pauses or resumes job `job`'s schedule at `now`: Some(whether it
/// changed), None: another role's. A resumed schedule is judged from `now`
/// on: no instant due while it was paused is ever recorded missed.
pub fn set_paused(job: &str, paused: bool, now: i64, caller: pg_sys::Oid) -> Option<bool> {
    let l = lock(job, caller, None)?;
    match l {
        Locked { member: false, .. } => return None,
        Locked { paused: p, .. } if p == paused => return Some(false),
        _ => {}
    }
    let check = if paused {
        None
    } else {
        read(job).and_then(|r| next_check(&r.calendar, now, r.misfire_grace))
    };
    let args = [
        job.into(),
        paused.into(),
        ts(now).into(),
        check.map(ts).into(),
    ];
    plans::run(queries::PAUSE_SCHEDULE, &args, |_| ());
    Some(true)
}

/// A schedule as anyone may read it.
pub struct Read {
    pub calendar: Schedule,
    pub misfire_grace: i64,
    pub paused: bool,
    pub active_since: i64,
}

/// Job `job`'s schedule, if it has one.
pub fn read(job: &str) -> Option<Read> {
    plans::run(queries::READ_SCHEDULE, &[job.into()], |t| {
        let row = t.into_iter().next()?;
        let spec = spec(&row, 1);
        Some(Read {
            calendar: spec.calendar()?,
            misfire_grace: spec.grace?,
            paused: row.get::<bool>(6).ok().flatten().unwrap_or(false),
            active_since: micros(row.get::<TimestampWithTimeZone>(7).ok().flatten())?,
        })
    })
}

/// Since when job `job`'s schedule waits for a run: its first due instant
/// after both the latest one a claim took and the moment it was made,
/// changed or resumed, when that instant has come by `now`; None when it
/// waits for nothing (or is paused, or has no schedule).
pub fn waiting_since(job: &str, schedule: &Read, now: i64) -> Option<i64> {
    if schedule.paused {
        return None;
    }
    let claimed = plans::run(queries::LAST_CLAIMED_DUE, &[job.into()], |t| {
        micros(t.first().get_one::<TimestampWithTimeZone>().ok().flatten())
    });
    let from = claimed.map_or(schedule.active_since, |c| c.max(schedule.active_since));
    next_after(&schedule.calendar, from).filter(|d| *d <= now)
}

/// When the worker next has a schedule to settle.
pub fn next_settle() -> Option<i64> {
    plans::run(queries::NEXT_SCHEDULE_CHECK, &[], |t| {
        micros(t.first().get_one::<TimestampWithTimeZone>().ok().flatten())
    })
}

/// The worker's round (contract 24): every due instant whose grace has
/// passed by `now` and that no claim took is recorded missed and
/// announced, once; a schedule whose job a claim holds right now is left
/// for a later round. How many instants were recorded missed.
pub fn settle(now: i64) -> usize {
    let horizon = now.saturating_sub(settings::run_retention_micros());
    let args = [ts(now).into(), SCHEDULES_PER_ROUND.into()];
    let due: Vec<_> = plans::run(queries::LOCK_SCHEDULES_TO_SETTLE, &args, |t| {
        t.into_iter()
            .filter_map(|row| {
                let job = row.get::<String>(1).ok().flatten()?;
                let spec = spec(&row, 2);
                let settled_to = micros(row.get::<TimestampWithTimeZone>(6).ok().flatten())?;
                let owner = row.get::<pg_sys::Oid>(7).ok().flatten()?;
                let (calendar, grace) = (spec.calendar()?, spec.grace?);
                Some((job, calendar, grace, settled_to, owner))
            })
            .collect()
    });
    let mut budget = INSTANTS_PER_ROUND;
    let mut missed = 0;
    for (job, calendar, grace, settled_to, owner) in due {
        if budget == 0 {
            break;
        }
        if !plans::run(queries::JOB_EXISTS, &[job.as_str().into()], |t| {
            !t.is_empty()
        }) {
            // (its row outlives the retention while it has a schedule)
            let made = [job.as_str().into(), owner.into()];
            tenure::insert_first(queries::INSERT_JOB, &made, now, Some(now));
        }
        let Some(lock) = runs::lock_job(&job) else {
            continue; // a claim holds it: a later round
        };
        // Instants older than the retention are not recorded: their rows
        // would go at once.
        let mut settled = settled_to.max(horizon.saturating_sub(1));
        let mut instants = Vec::new();
        while let Some(d) = next_after(&calendar, settled) {
            if budget == 0 || !past_grace(d, now, Some(grace)) {
                break;
            }
            budget -= 1;
            let last = runs::lock_claimable(&job, d, now, horizon);
            let other_live = last.is_some() && runs::other_run_live(&job, d, now, lock.rules);
            if run_claim(d, now, Some(grace), last.is_some(), lock.rules, other_live)
                == RunClaim::Missed
            {
                runs::record_missed(&job, d, now, &last.expect("locked"), other_live);
                instants.push(d);
            }
            settled = d;
        }
        let check = next_check(&calendar, settled, grace);
        let args = [
            job.as_str().into(),
            ts(settled).into(),
            check.map(ts).into(),
        ];
        plans::run(queries::SETTLED, &args, |_| ());
        for d in instants {
            RunEvent::Missed.send(&job, d, now);
            missed += 1;
        }
    }
    missed
}

/// `settle` in a subtransaction, for le_expire_lapsed where no worker
/// serves: a failure is rolled back alone and told as a WARNING.
pub fn settle_or_warn(now: i64) {
    or_warn("the schedules were not settled", || settle(now));
}

/// `step` in a subtransaction where the 0.5.0 schema is installed (see
/// `plans::caught_or_warn`; `what` did not run).
pub fn or_warn(what: &str, step: impl FnOnce() -> usize) {
    if crate::store::schema_version::has_slots() {
        plans::caught_or_warn(what, step); // (schedules and marks came with 0.5.0's schema)
    }
}
