//! Contract 24: the worker settles each due instant of a schedule once its
//! misfire grace has passed, with the decision a late claim makes
//! (`run_claim`) under the job's row lock, as claims take it: an instant
//! nobody claimed is recorded missed exactly once, whether or not any
//! replica is alive, and the schedule's `settled_to` moves past it in the
//! same transaction (the run's row, keyed by job and due, is the record).

use crate::announce::notify::RunEvent;
use crate::base::clock::{micros, ts};
use crate::base::settings;
use crate::lease::runs;
use crate::lease::schedules::{self, Read};
use crate::lease::turns::{Queue, Turns};
use crate::store::plans;
use crate::store::queries;
use leaderlock_protocol::calendar::Schedule;
use leaderlock_protocol::runs::{past_grace, run_claim, Found, JobRules, Overlap, RunClaim};
use pgrx::prelude::*;

/// Schedules settled per round, at most, their owners in turn (`turns`).
const SCHEDULES_PER_ROUND: i64 = 100;
/// Due instants settled per round, at most, across schedules: a round is
/// bounded, and the worker goes again at once while any are left.
pub const INSTANTS_PER_ROUND: usize = 1_000;

/// A schedule as its settling needs it, its job's row locked.
struct Due<'a> {
    job: &'a str,
    calendar: &'a Schedule,
    grace: i64,
    settled_to: i64,
    /// The job's runs due before it were pruned: not made again.
    pruned_before: Option<i64>,
    rules: JobRules,
}

/// Settles `d`'s instants after its `settled_to` whose grace has passed by
/// `now`, at most `budget`: each one nobody claimed is recorded missed
/// (announced by the caller, `announce`). Instants older than the runs'
/// retention or its prune are passed over (their rows would go at once).
/// Up to where it settled, and how many instants it looked at.
fn settle_job(d: &Due, now: i64, budget: usize, missed: &mut Vec<(String, i64)>) -> (i64, usize) {
    let horizon = now.saturating_sub(settings::run_retention_micros());
    let kept = horizon.max(d.pruned_before.unwrap_or(i64::MIN));
    let mut settled = d.settled_to.max(kept.saturating_sub(1));
    let mut looked = 0;
    while let Some(due) = schedules::next_after(d.calendar, settled) {
        if looked == budget || !past_grace(due, now, Some(d.grace)) {
            break;
        }
        looked += 1;
        let last = runs::lock_claimable(d.job, due, now, horizon);
        let other_live = last.is_some() && runs::other_run_live(d.job, due, now, d.rules);
        let found = last.as_ref().map_or(Found::Nothing, |_| Found::Claimable);
        if run_claim(due, now, Some(d.grace), found, d.rules, other_live) == RunClaim::Missed {
            runs::record_missed(d.job, due, now, &last.expect("locked"), other_live);
            missed.push((d.job.to_owned(), due));
        }
        settled = due;
    }
    (settled, looked)
}

fn announce(missed: Vec<(String, i64)>, now: i64) {
    for (job, due) in missed {
        RunEvent::Missed.send(&job, due, now);
    }
}

/// The worker's round (contract 24): the instants whose grace has passed
/// by `now`, of up to `SCHEDULES_PER_ROUND` schedules (passing over those
/// another transaction holds), their owners in turn and for the round's
/// budget (`turns`), up to `INSTANTS_PER_ROUND`. How many instants it
/// looked at: the worker goes again at once when that is the bound (as it
/// is when the budget ran out).
pub fn settle(now: i64) -> usize {
    let turns = Turns::begin(Queue::Schedules);
    let args = [ts(now).into(), SCHEDULES_PER_ROUND.into(), turns.last()];
    let rows: Vec<_> = plans::run(queries::LOCK_SCHEDULES_TO_SETTLE, &args, |t| {
        t.into_iter()
            .filter_map(|row| {
                let job = row.get::<String>(1).ok().flatten()?;
                let spec = schedules::spec(&row, 2);
                let settled_to = micros(row.get::<TimestampWithTimeZone>(6).ok().flatten())?;
                let overlap = row.get::<String>(7).ok().flatten();
                let rules = JobRules {
                    overlap: overlap.as_deref().and_then(Overlap::named)?,
                    paused: false,
                    judged_from: micros(row.get::<TimestampWithTimeZone>(8).ok().flatten()),
                    backfill: 0, // (the worker runs nothing late)
                };
                let pruned_before = micros(row.get::<TimestampWithTimeZone>(9).ok().flatten());
                let owner = row.get::<pg_sys::Oid>(10).ok().flatten()?;
                Some((
                    job,
                    spec.calendar()?,
                    spec.grace?,
                    settled_to,
                    rules,
                    pruned_before,
                    owner,
                ))
            })
            .collect()
    });
    let mut budget = INSTANTS_PER_ROUND;
    let mut missed = Vec::new();
    for (i, (job, calendar, grace, settled_to, rules, pruned_before, owner)) in
        rows.iter().enumerate()
    {
        if !turns.more(i) {
            budget = 0; // (a full round: the next comes at once)
            break;
        }
        let due = Due {
            job,
            calendar,
            grace: *grace,
            settled_to: *settled_to,
            pruned_before: *pruned_before,
            rules: *rules,
        };
        let (settled, looked) = settle_job(&due, now, budget, &mut missed);
        budget -= looked;
        let check = schedules::next_check(calendar, settled, *grace);
        let args = [
            job.as_str().into(),
            ts(settled).into(),
            check.map(ts).into(),
        ];
        plans::run(queries::SETTLED, &args, |_| ());
        turns.served(*owner);
        if budget == 0 {
            break;
        }
    }
    announce(missed, now);
    INSTANTS_PER_ROUND - budget
}

/// Before a change or a pause of job `job`'s schedule (its row locked, as
/// `read` found it): its instants whose grace has passed by `now` are
/// settled under the old settings (up to `INSTANTS_PER_ROUND`), so that
/// none of them is lost to the change. Passed over when a claim holds the
/// job's row right now.
pub fn before_change(job: &str, read: &Read, now: i64) {
    if read.paused {
        return; // (nothing was due)
    }
    let Some(lock) = runs::lock_job(job) else {
        return;
    };
    let due = Due {
        job,
        calendar: &read.calendar,
        grace: read.misfire_grace,
        settled_to: read.settled_to,
        pruned_before: lock.pruned_before,
        rules: read.rules(),
    };
    let mut missed = Vec::new();
    settle_job(&due, now, INSTANTS_PER_ROUND, &mut missed);
    announce(missed, now);
}

/// When the worker next has a schedule to settle.
pub fn next_settle() -> Option<i64> {
    plans::run(queries::NEXT_SCHEDULE_CHECK, &[], |t| {
        micros(t.first().get_one::<TimestampWithTimeZone>().ok().flatten())
    })
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
