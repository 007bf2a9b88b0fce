//! Schedules kept in the database (contract 24): make, change, pause,
//! resume, drop; the next due instant; the status view.

use crate::api::input;
use crate::base::clock::{self, ts};
use crate::lease::runs;
use crate::lease::schedules::{self, Change, Settings};
use crate::lease::settle;
use crate::store::call::{self, Access};
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;

fn not_owner(job: &str) -> ! {
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
        format!(
            "leaderlock: permission denied to change the schedule of job {job:?}: \
             another role made it"
        ),
        "leaderlock",
    )
    .set_hint("A job's schedule is its owner's (the role that made the job or the schedule), as a lease is.")
    .report(PgLogLevel::ERROR);
    unreachable!("an ERROR does not return")
}

/// Contract 24: makes or changes job `job`'s schedule: every `every`
/// (at its multiples since the Unix epoch) or by `cron` in `tz`; a due
/// instant not claimed within `misfire_grace` (NULL: the period, or 5
/// minutes with cron) is recorded missed by the worker; `overlap` allow,
/// forbid or replace; `backfill`: how many of its latest missed instants a
/// replica may still run late (0 to 100). Its next due instant.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
#[allow(clippy::too_many_arguments)] // (the SQL function's arguments)
fn le_schedule(
    job: Option<&str>,
    every: default!(Option<Interval>, "NULL"),
    cron: default!(Option<&str>, "NULL"),
    tz: default!(Option<&str>, "'UTC'"),
    misfire_grace: default!(Option<Interval>, "NULL"),
    overlap: default!(Option<&str>, "'allow'"),
    backfill: default!(Option<i32>, "0"),
    fcinfo: pg_sys::FunctionCallInfo,
) -> Option<TimestampWithTimeZone> {
    let _call = unsafe { call::enter(fcinfo, Access::Write) };
    let job = input::name("job", job);
    let (every, calendar) = input::schedule_calendar(every, cron, tz);
    let settings = Settings {
        every,
        cron: if every.is_some() { None } else { cron },
        tz: tz.unwrap_or("UTC"),
        misfire_grace: input::schedule_grace(misfire_grace, every),
        overlap: input::overlap(overlap),
        backfill: input::backfill(backfill),
    };
    let now = clock::now();
    let caller = call::caller();
    let made = schedules::schedule(
        job,
        &settings,
        &calendar,
        now,
        caller,
        runs::may_make_a_job,
        settle::before_change,
    );
    match made {
        Change::Done(next) => next.map(ts),
        Change::NotOwner => not_owner(job),
    }
}

/// Contract 24: job `job`'s schedule goes (its runs and terms stay);
/// whether it had one.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn le_unschedule(job: Option<&str>, fcinfo: pg_sys::FunctionCallInfo) -> bool {
    let _call = unsafe { call::enter(fcinfo, Access::Write) };
    let job = input::name("job", job);
    schedules::unschedule(job, call::caller()).unwrap_or_else(|| not_owner(job))
}

/// Contract 24: pauses job `job`'s schedule: no run of it starts, and no
/// instant is recorded missed, until it is resumed. Whether it changed.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn le_pause_schedule(job: Option<&str>, fcinfo: pg_sys::FunctionCallInfo) -> bool {
    pause(job, true, fcinfo)
}

/// Contract 24: resumes job `job`'s schedule, judged from now on (no
/// instant due while it was paused is recorded missed). Whether it changed.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn le_resume_schedule(job: Option<&str>, fcinfo: pg_sys::FunctionCallInfo) -> bool {
    pause(job, false, fcinfo)
}

fn pause(job: Option<&str>, paused: bool, fcinfo: pg_sys::FunctionCallInfo) -> bool {
    let _call = unsafe { call::enter(fcinfo, Access::Write) };
    let job = input::name("job", job);
    let now = clock::now();
    match schedules::set_paused(job, paused, now, call::caller(), settle::before_change) {
        None => false,
        Some(None) => not_owner(job),
        Some(Some(changed)) => changed,
    }
}

/// Contract 24: the first due instant of job `job`'s schedule after
/// `after` (NULL: now, on the lease clock); NULL when it has no schedule
/// or it is paused. What replicas that run a job by name alone wait for.
#[pg_extern(volatile, parallel_safe)]
#[search_path(pg_catalog, pg_temp)]
fn le_next_due(
    job: Option<&str>,
    after: default!(Option<TimestampWithTimeZone>, "NULL"),
    fcinfo: pg_sys::FunctionCallInfo,
) -> Option<TimestampWithTimeZone> {
    let _call = unsafe { call::enter(fcinfo, Access::Read) };
    let job = input::name("job", job);
    let after = match after {
        None => clock::now(),
        Some(a) => input::due(Some(a)),
    };
    let schedule = schedules::read(job, call::caller()).filter(|s| !s.paused)?;
    schedules::next_after(&schedule.calendar, after).map(ts)
}

/// Contract 24's backfill: the instants of job `job`'s schedule that a
/// replica may still run late (recorded missed, among its `backfill`
/// latest missed, never taken up since), oldest first; none without a
/// schedule, while it is paused, or with backfill 0.
#[pg_extern(volatile, parallel_safe)]
#[search_path(pg_catalog, pg_temp)]
fn le_backfill_due(
    job: Option<&str>,
    fcinfo: pg_sys::FunctionCallInfo,
) -> SetOfIterator<'static, TimestampWithTimeZone> {
    let _call = unsafe { call::enter(fcinfo, Access::Read) };
    let job = input::name("job", job);
    let due = schedules::read(job, call::caller())
        .map(|s| schedules::backfill_due(job, &s, clock::now()))
        .unwrap_or_default();
    SetOfIterator::new(due.into_iter().map(ts))
}

/// Contract 24, for the view `leaderlock_schedule_status`: job `job`'s
/// next due instant and since when it waits for a run (NULL: for none).
#[pg_extern(volatile, parallel_safe)]
#[search_path(pg_catalog, pg_temp)]
fn le_schedule_times(
    job: Option<&str>,
    fcinfo: pg_sys::FunctionCallInfo,
) -> TableIterator<
    'static,
    (
        name!(next_due, Option<TimestampWithTimeZone>),
        name!(waiting_since, Option<TimestampWithTimeZone>),
    ),
> {
    let _call = unsafe { call::enter(fcinfo, Access::Read) };
    let job = input::name("job", job);
    let now = clock::now();
    let row = schedules::read(job, call::caller()).map(|s| {
        let next = if s.paused {
            None
        } else {
            schedules::next_after(&s.calendar, now)
        };
        (next.map(ts), schedules::waiting_since(job, &s, now).map(ts))
    });
    TableIterator::new(row)
}

// The schedules with their next due instant and lateness, readable by all.
extension_sql_file!(
    "../ddl/schedule_status_view.sql",
    name = "schedule_status_view",
    requires = [le_schedule_times, "schema"]
);
