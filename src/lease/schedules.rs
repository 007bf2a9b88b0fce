//! Contract 24: a job's schedule kept in the database, made, changed,
//! paused and read here; its due instants come from
//! `leaderlock_protocol::calendar`, as every Rust replica's do. The worker's
//! settling of the instants nobody claimed is `settle.rs`.

use crate::announce::notify::ScheduleEvent;
use crate::base::clock::{micros, ts, PG_EPOCH_IN_UNIX_MICROS};
use crate::base::settings;
use crate::base::ttl::{interval_micros, micros_interval};
use crate::lease::runs;
use crate::shmem::worker_wakeup;
use crate::store::keys;
use crate::store::plans;
use crate::store::queries;
use leaderlock_protocol::calendar::Schedule;
use leaderlock_protocol::runs::{JobRules, Overlap};
use pgrx::prelude::*;

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
    /// How many of its latest missed instants may be run late.
    pub backfill: u16,
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

/// Whether `due` is one of `calendar`'s instants.
pub fn on_calendar(calendar: &Schedule, due: i64) -> bool {
    next_after(calendar, due.saturating_sub(1)) == Some(due)
}

/// When the worker next looks at a schedule settled up to `settled_to`:
/// when its next instant's grace ends.
pub fn next_check(calendar: &Schedule, settled_to: i64, grace: i64) -> Option<i64> {
    next_after(calendar, settled_to)?.checked_add(grace)
}

/// A schedule's every, cron, tz and misfire grace, read from four columns
/// of a row from `at` on.
pub struct Spec {
    every: Option<i64>,
    cron: Option<String>,
    tz: String,
    pub grace: Option<i64>,
}

pub fn spec(row: &pgrx::spi::SpiHeapTupleData, at: usize) -> Spec {
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
    pub fn calendar(&self) -> Option<Schedule> {
        calendar(self.every, self.cron.as_deref(), &self.tz).ok()
    }
}

/// A schedule as anyone may read it, with what `caller` may do with it.
pub struct Read {
    /// As stored (what a change compares).
    spec: Spec,
    pub calendar: Schedule,
    pub misfire_grace: i64,
    pub overlap: Overlap,
    pub paused: bool,
    /// Made, changed or resumed then: no instant before it is judged.
    pub active_since: i64,
    pub settled_to: i64,
    pub backfill: u16,
    /// The caller is a member of its owner.
    pub member: bool,
}

impl Read {
    pub fn rules(&self) -> JobRules {
        JobRules {
            overlap: self.overlap,
            paused: self.paused,
            judged_from: Some(self.active_since),
            backfill: self.backfill,
        }
    }
}

fn read_with(sql: &'static str, job: &str, caller: pg_sys::Oid) -> Option<Read> {
    plans::run(sql, &[job.into(), caller.into()], |t| {
        let row = t.into_iter().next()?;
        let spec = spec(&row, 2);
        let overlap = row.get::<String>(6).ok().flatten();
        Some(Read {
            calendar: spec.calendar()?,
            misfire_grace: spec.grace?,
            spec,
            overlap: overlap.as_deref().and_then(Overlap::named)?,
            paused: row.get::<bool>(7).ok().flatten().unwrap_or(false),
            active_since: micros(row.get::<TimestampWithTimeZone>(8).ok().flatten())?,
            settled_to: micros(row.get::<TimestampWithTimeZone>(9).ok().flatten())?,
            backfill: runs::backfill_of(row.get::<i32>(10).ok().flatten()),
            member: row.get::<bool>(1).ok().flatten().unwrap_or(false),
        })
    })
}

/// Job `job`'s schedule, if it has one (for `caller`).
pub fn read(job: &str, caller: pg_sys::Oid) -> Option<Read> {
    read_with(queries::READ_SCHEDULE, job, caller)
}

/// Whether `read` (the row as found) has the calendar of settings `s`.
fn same_calendar(read: &Read, s: &Settings) -> bool {
    read.spec.every == s.every && read.spec.cron.as_deref() == s.cron && read.spec.tz == s.tz
}

/// Whether `read` has the settings `s`.
fn same(read: &Read, s: &Settings) -> bool {
    same_calendar(read, s)
        && read.misfire_grace == s.misfire_grace
        && read.overlap == s.overlap
        && read.backfill == s.backfill
}

/// What a change of a schedule found.
pub enum Change {
    /// Made, changed, or found as asked; its next due instant.
    Done(Option<i64>),
    /// Another role's (not a member of its owner), or a job another role
    /// made: nothing changed.
    NotOwner,
}

/// Makes or changes job `job`'s schedule at `now`, for `caller`. A change
/// of its calendar settles the instants of the old one whose grace has
/// passed, then judges the instants from `now` on (a change of its grace
/// or overlap alone judges them as before); the same settings again change
/// nothing (a replica that registers its schedule at every start never
/// hides a miss). The job's row is made for a new job (counted against
/// `leaderlock.max_jobs_per_role` by `make_job`); `settle` is
/// `settle::before_change`.
pub fn schedule(
    job: &str,
    settings: &Settings,
    calendar: &Schedule,
    now: i64,
    caller: pg_sys::Oid,
    make_job: impl FnOnce(),
    settle: impl FnOnce(&str, &Read, i64),
) -> Change {
    let first_check = next_check(calendar, now, settings.misfire_grace);
    let args = [
        job.into(),
        settings.every.map(micros_interval).into(),
        settings.cron.into(),
        settings.tz.into(),
        micros_interval(settings.misfire_grace).into(),
        overlap_name(settings.overlap).into(),
        ts(now).into(),
        first_check.map(ts).into(),
        i32::from(settings.backfill).into(),
        caller.into(),
    ];
    match read_with(queries::LOCK_SCHEDULE, job, caller) {
        Some(r) if !r.member => return Change::NotOwner,
        Some(r) if same(&r, settings) => {}
        Some(r) if same_calendar(&r, settings) => {
            // The same instants: judged as before, by the new grace,
            // overlap and backfill.
            let check = next_check(calendar, r.settled_to, settings.misfire_grace);
            let rules = [
                job.into(),
                micros_interval(settings.misfire_grace).into(),
                overlap_name(settings.overlap).into(),
                check.map(ts).into(),
                ts(now).into(),
                i32::from(settings.backfill).into(),
            ];
            plans::run(queries::CHANGE_SCHEDULE_RULES, &rules, |_| ());
            wake_by(check, r.paused);
        }
        Some(r) => {
            settle(job, &r, now);
            plans::run(queries::CHANGE_SCHEDULE, &args[..9], |_| ());
            wake_by(first_check, r.paused);
        }
        None => {
            if !job_is_callers(job, caller, now, make_job) {
                return Change::NotOwner;
            }
            plans::run(queries::INSERT_SCHEDULE, &args, |_| ());
            wake_by(first_check, false);
        }
    }
    Change::Done(next_after(calendar, now))
}

/// Whether job `job` is `caller`'s to schedule: its row made by a role the
/// caller is a member of (made now for a new job, and checked again after:
/// a rival's claim may have made it meanwhile).
fn job_is_callers(job: &str, caller: pg_sys::Oid, now: i64, make_job: impl FnOnce()) -> bool {
    let owned = || {
        plans::run(queries::JOB_OWNED_BY, &[job.into(), caller.into()], |t| {
            t.first().get_one::<bool>().ok().flatten()
        })
    };
    match owned() {
        Some(member) => member,
        None => {
            make_job();
            let made = [job.into(), caller.into()];
            keys::insert_first(queries::INSERT_JOB, &made, now, Some(now));
            owned().unwrap_or(false)
        }
    }
}

/// Wakes the worker by `check` once this commits (a schedule not paused).
fn wake_by(check: Option<i64>, paused: bool) {
    if let (Some(at), false) = (check, paused) {
        worker_wakeup::expiry_written(at);
    }
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
    match read_with(queries::LOCK_SCHEDULE, job, caller) {
        None => Some(false),
        Some(r) if !r.member => None,
        Some(_) => {
            plans::run(queries::DELETE_SCHEDULE, &[job.into()], |_| ());
            Some(true)
        }
    }
}

/// Pauses or resumes job `job`'s schedule at `now`: Some(whether it
/// changed), None: another role's (or no schedule). A pause first settles
/// the instants whose grace has passed; a resumed schedule is judged from
/// `now` on: no instant due while it was paused is run or recorded missed.
/// `settle` is `settle::before_change`.
pub fn set_paused(
    job: &str,
    paused: bool,
    now: i64,
    caller: pg_sys::Oid,
    settle: impl FnOnce(&str, &Read, i64),
) -> Option<Option<bool>> {
    let r = read_with(queries::LOCK_SCHEDULE, job, caller)?;
    if !r.member {
        return Some(None);
    }
    if r.paused == paused {
        return Some(Some(false));
    }
    let check = if paused {
        settle(job, &r, now);
        None
    } else {
        next_check(&r.calendar, now, r.misfire_grace)
    };
    let args = [
        job.into(),
        paused.into(),
        ts(now).into(),
        check.map(ts).into(),
    ];
    plans::run(queries::PAUSE_SCHEDULE, &args, |_| ());
    let event = if paused {
        ScheduleEvent::Paused
    } else {
        ScheduleEvent::Resumed
    };
    event.send(job, now);
    wake_by(check, paused);
    Some(Some(true))
}

/// Since when job `job`'s schedule waits for a run: its first due instant
/// after the latest one a claim took, the moment it was made, changed or
/// resumed, and what the retention keeps (a pruned claim is no lateness),
/// when that instant has come by `now`; None when it waits for nothing
/// (or is paused).
pub fn waiting_since(job: &str, schedule: &Read, now: i64) -> Option<i64> {
    if schedule.paused {
        return None;
    }
    let claimed = plans::run(queries::LAST_CLAIMED_DUE, &[job.into()], |t| {
        micros(t.first().get_one::<TimestampWithTimeZone>().ok().flatten())
    });
    let kept = now.saturating_sub(settings::run_retention_micros());
    let from = claimed
        .unwrap_or(i64::MIN)
        .max(schedule.active_since)
        .max(kept);
    next_after(&schedule.calendar, from).filter(|d| *d <= now)
}

/// Contract 24's backfill: the instants of job `job`'s schedule (`read`)
/// a replica may still run late at `now`, oldest first: none while paused,
/// nor while a run of the job is claimed live under overlap `forbid` (a
/// claim would be refused: replicas would try it every poll).
pub fn backfill_due(job: &str, read: &Read, now: i64) -> Vec<i64> {
    if read.paused
        || read.backfill == 0
        || runs::other_run_live(job, i64::MIN, now, read.rules()) && read.overlap == Overlap::Forbid
    {
        return Vec::new();
    }
    let args = [
        job.into(),
        ts(read.active_since).into(),
        i64::from(read.backfill).into(),
    ];
    plans::run(queries::BACKFILL_DUE, &args, |t| {
        t.into_iter()
            .filter_map(|row| micros(row.get::<TimestampWithTimeZone>(1).ok().flatten()))
            .collect()
    })
}

/// Why a claim of a scheduled job's run is refused before anything is
/// read under a lock.
pub enum ClaimRefused {
    /// The caller is not a member of the schedule's owner.
    NotOwner,
    /// `due` is not an instant of the schedule.
    OffCalendar,
}

/// Contract 24: a scheduled job's runs are its owner's to claim, at its
/// calendar's instants only from when it took effect (a rival's
/// off-calendar claim could end the owner's runs under `replace`, or hold
/// them off under `forbid`; a replica run with other flags is told).
pub fn may_claim(job: &str, due: i64, caller: pg_sys::Oid) -> Result<(), ClaimRefused> {
    match read(job, caller) {
        None => Ok(()),
        Some(r) if !r.member => Err(ClaimRefused::NotOwner),
        // (an instant due before the calendar took effect is refused as any
        // claim that can do nothing: a follower that waited for one
        // across a change sees NULL, not an error)
        Some(r) if due >= r.active_since && !on_calendar(&r.calendar, due) => {
            Err(ClaimRefused::OffCalendar)
        }
        Some(_) => Ok(()),
    }
}
