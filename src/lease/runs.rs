//! Scheduled runs (contract 22): a run is (job, due instant); claiming it
//! gives a fencing term from the job's one sequence, at most one live
//! claim per run, and finishing records its outcome once.
//!
//! Claims of one job take turns on the job's row (locked without waiting:
//! a claim that finds it locked is refused, and tries again later), so a
//! run's row is made, claimed or recorded missed by one claim at a time.
//! A runner's own calls (renew, finish) lock only the run's row, and only
//! when it is theirs: nothing another role does delays them.

use crate::announce::notify::RunEvent;
use crate::base::clock::{micros, ts};
use crate::base::settings;
use crate::base::ttl::interval_micros;
use crate::base::ttl::Ttl;
use crate::lease::failover;
use crate::store::call;
use crate::store::keys;
use crate::store::plans;
use crate::store::queries;
use leaderlock_protocol::runs::{
    claim_may_act, run_claim, run_forgotten, Found, JobRules, Overlap, RunClaim,
};
use pgrx::datum::DatumWithOid;
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;

/// What a claim did under the job's lock.
enum Claimed {
    /// A new claim, of this term, ending then, the run's how-many-th; and
    /// the other runs it ended (overlap `replace`: due, holder, term).
    Term(i64, i64, i32, Vec<(i64, String, i64)>),
    /// The run was past its misfire grace: recorded missed (once).
    Missed,
}

/// A job's row as a claim (or the worker) finds it under its lock.
pub struct JobLock {
    /// Its runs due before it were pruned (never claimed again).
    pub pruned_before: Option<i64>,
    /// Its schedule's rules (contract 24), the default without one.
    pub rules: JobRules,
    /// Its schedule's misfire grace, if it has one.
    pub grace: Option<i64>,
}

/// A stored backfill (the column's CHECK bounds it; NULL: none).
pub fn backfill_of(value: Option<i32>) -> u16 {
    value.and_then(|b| u16::try_from(b).ok()).unwrap_or(0)
}

/// Locks job `job`'s row without waiting (claims of a job take turns on it):
/// None when another transaction holds it, or it has no row.
pub fn lock_job(job: &str) -> Option<JobLock> {
    plans::run(queries::LOCK_JOB, &[job.into()], |t| {
        let row = t.into_iter().next()?;
        let overlap = row.get::<String>(2).expect("overlap");
        Some(JobLock {
            pruned_before: micros(row.get::<TimestampWithTimeZone>(1).expect("pruned_before")),
            rules: JobRules {
                overlap: overlap
                    .as_deref()
                    .and_then(Overlap::named)
                    .unwrap_or_default(),
                paused: row.get::<bool>(4).expect("paused").unwrap_or(false),
                judged_from: micros(row.get::<TimestampWithTimeZone>(5).expect("active_since")),
                backfill: backfill_of(row.get::<i32>(6).expect("backfill")),
            },
            grace: row
                .get::<Interval>(3)
                .expect("misfire_grace")
                .map(|g| interval_micros(&g)),
        })
    })
}

/// Under the job's lock, the run of `job` due at `due` locked if it may
/// be claimed at `now` (unfinished, its last claim not live), its row made
/// first when it has none: whether it was, with its last claim's holder
/// and term. A new row prunes the job's runs past the retention (`horizon`).
pub fn lock_claimable(
    job: &str,
    due: i64,
    now: i64,
    horizon: i64,
) -> Option<(Option<String>, Option<i64>)> {
    let run = [job.into(), ts(due).into()];
    let new = !plans::run(queries::RUN_EXISTS, &run, |t| !t.is_empty())
        && plans::run(queries::INSERT_RUN, &run, |t| !t.is_empty());
    if new {
        let prune = [job.into(), ts(horizon).into(), ts(now).into()];
        plans::run(queries::PRUNE_RUNS, &prune, |_| ());
        plans::run(queries::MARK_PRUNED, &prune[..2], |_| ());
    }
    let args = [job.into(), ts(due).into(), ts(now).into()];
    plans::run(queries::LOCK_CLAIMABLE_RUN, &args, |t| {
        let row = t.into_iter().next()?;
        let holder = row.get::<String>(1).expect("holder");
        let term = row.get::<i64>(2).expect("term");
        Some((holder, term))
    })
}

/// Under the job's lock, the run of `job` due at `due` locked if it was
/// recorded missed and may be run late (contract 24's backfill: one of the
/// job's `backfill` latest missed instants, never taken up since): its
/// last claim's holder and term, as `lock_claimable`.
pub fn lock_backfill(job: &str, due: i64, backfill: u16) -> Option<(Option<String>, Option<i64>)> {
    let args = [job.into(), ts(due).into(), i64::from(backfill).into()];
    plans::run(queries::LOCK_BACKFILL_RUN, &args, |t| {
        let row = t.into_iter().next()?;
        Some((
            row.get::<String>(1).expect("holder"),
            row.get::<i64>(2).expect("term"),
        ))
    })
}

/// Whether another run of `job` than the one due at `due` is claimed live
/// at `now` (read only where the overlap policy asks).
pub fn other_run_live(job: &str, due: i64, now: i64, rules: JobRules) -> bool {
    rules.overlap != Overlap::Allow
        && plans::run(
            queries::OTHER_RUN_LIVE,
            &[job.into(), ts(due).into(), ts(now).into()],
            |t| t.first().get_one::<bool>().ok().flatten().unwrap_or(false),
        )
}

/// Records the locked run of `job` due at `due` missed at `now`, saying
/// why: never claimed, its claim (`last`) lapsed unfinished, or an earlier
/// run of the job still running (`other_live`, overlap `forbid`).
pub fn record_missed(
    job: &str,
    due: i64,
    now: i64,
    last: &(Option<String>, Option<i64>),
    other_live: bool,
) {
    let why = match last {
        (Some(_), Some(term)) => {
            format!("its claim of term {term} lapsed unfinished and its misfire grace has passed")
        }
        _ if other_live => "not claimed within its misfire grace: an earlier run of the job \
                            was still running (overlap forbid)"
            .to_string(),
        _ => "not claimed within its misfire grace".to_string(),
    };
    let args = [
        job.into(),
        ts(due).into(),
        ts(now).into(),
        why.as_str().into(),
    ];
    plans::run(queries::MISS_RUN, &args, |_| ());
}

/// Contract 22: claims the run of `job` due at `due` for `id` by `ttl` at
/// `now` (the SQL face has checked that the run is due by then).
/// Its term, or None: finished (or missed) already, claimed live by
/// another, past its misfire grace (recorded missed by this call), its
/// job's row taken by a concurrent claim, its schedule paused, or another
/// run of it claimed live under overlap `forbid` (contract 24). A job's
/// schedule's misfire grace, where it has one, is the one that counts.
pub fn claim(job: &str, due: i64, id: &str, ttl: Ttl, grace: Option<i64>, now: i64) -> Option<i64> {
    // A run due longer ago than the retention is never claimed (its row may
    // be gone): refused before anything is written.
    let horizon = now.saturating_sub(settings::run_retention_micros());
    if run_forgotten(due, horizon) || !failover::ready_for_new_tenures() {
        return None; // (held claims outlast a failover first, 8.2)
    }
    if !plans::run(queries::JOB_EXISTS, &[job.into()], |t| !t.is_empty()) {
        may_make_a_job();
        let args = [job.into(), call::caller().into()];
        keys::insert_first(queries::INSERT_JOB, &args, now, Some(now));
    }
    let floor = failover::term_floor();
    let done = plans::under_lock(
        || lock_job(job),
        |lock| {
            if lock.pruned_before.is_some_and(|p| run_forgotten(due, p)) {
                return None; // pruned by a shorter retention: never again
            }
            let grace = lock.grace.or(grace);
            if !claim_may_act(due, lock.rules) {
                return None; // nothing is written for it
            }
            let mut last = lock_claimable(job, due, now, horizon);
            let mut found = last.as_ref().map_or(Found::Nothing, |_| Found::Claimable);
            if last.is_none() && lock.rules.backfill > 0 {
                last = lock_backfill(job, due, lock.rules.backfill);
                if last.is_some() {
                    found = Found::MissedToRun;
                }
            }
            let other_live = last.is_some() && other_run_live(job, due, now, lock.rules);
            let decision = run_claim(due, now, grace, found, lock.rules, other_live);
            let replaced = match decision {
                RunClaim::Refuse => return None,
                RunClaim::Missed => {
                    record_missed(job, due, now, &last.expect("locked"), other_live);
                    return Some(Claimed::Missed);
                }
                RunClaim::Claim => Vec::new(),
                RunClaim::Replace => end_other_runs(job, due, now),
            };
            let term = plans::run(queries::NEXT_JOB_TERM, &[job.into(), floor.into()], |t| {
                t.into_iter()
                    .next()
                    .and_then(|r| r.get::<i64>(1).expect("term"))
            })
            .expect("the job's row is locked");
            let args: [DatumWithOid; 7] = [
                job.into(),
                ts(due).into(),
                id.into(),
                term.into(),
                ts(now).into(),
                ttl.as_interval().into(),
                call::caller().into(),
            ];
            let (expires_at, attempt) = plans::run(queries::CLAIM_RUN, &args, |t| {
                let row = t.into_iter().next().expect("the run's row is locked");
                let e = micros(row.get::<TimestampWithTimeZone>(1).expect("expires_at"));
                let a = row.get::<i32>(2).expect("attempts").expect("NOT NULL");
                (e.expect("set"), a)
            });
            Some(Claimed::Term(term, expires_at, attempt, replaced))
        },
    )?;
    failover::commit_durably();
    match done {
        Claimed::Term(term, expires_at, attempt, replaced) => {
            for (other, holder, its_term) in &replaced {
                RunEvent::Finished {
                    holder,
                    term: *its_term,
                    outcome: "replaced",
                }
                .send(job, *other, now);
            }
            RunEvent::Claimed {
                holder: id,
                term,
                expires_at,
                attempt,
            }
            .send(job, due, now);
            Some(term)
        }
        Claimed::Missed => {
            RunEvent::Missed.send(job, due, now);
            None
        }
    }
}

/// Overlap `replace`: ends the other runs of `job` claimed live at `now`
/// (before the claim of the run due at `due` takes its term, which fences
/// their runners off). Their due instants, holders and terms.
fn end_other_runs(job: &str, due: i64, now: i64) -> Vec<(i64, String, i64)> {
    let why = format!(
        "replaced by the run due at {} (overlap replace)",
        crate::announce::notify::rfc3339(due)
    );
    let args = [
        job.into(),
        ts(due).into(),
        ts(now).into(),
        why.as_str().into(),
    ];
    plans::run(queries::END_OTHER_RUNS, &args, |t| {
        t.into_iter()
            .filter_map(|row| {
                let due = micros(row.get::<TimestampWithTimeZone>(1).ok().flatten())?;
                let holder = row.get::<String>(2).ok().flatten()?;
                let term = row.get::<i64>(3).ok().flatten()?;
                Some((due, holder, term))
            })
            .collect()
    })
}

/// Contract 22's bound per role: a role that is not a superuser makes at
/// most `leaderlock.max_jobs_per_role` jobs still kept (53400 beyond,
/// before anything is written), so that no role fills the database with
/// job names.
pub fn may_make_a_job() {
    let caller = call::caller();
    if unsafe { pg_sys::superuser_arg(caller) } {
        return;
    }
    let limit = i64::from(settings::MAX_JOBS_PER_ROLE.get());
    let made = plans::run(queries::JOBS_MADE_BY, &[caller.into()], |t| {
        t.first().get_one::<i64>().ok().flatten().unwrap_or(0)
    });
    if made >= limit {
        ErrorReport::new(
            PgSqlErrorCode::ERRCODE_CONFIGURATION_LIMIT_EXCEEDED,
            format!(
                "leaderlock: this role has made leaderlock.max_jobs_per_role ({limit}) jobs; \
                 no new job is made"
            ),
            "may_make_a_job",
        )
        .set_hint(
            "A job is forgotten once its runs all passed leaderlock.run_retention; a \
             superuser may raise the limit.",
        )
        .report(PgLogLevel::ERROR);
    }
}

/// Contract 22's retention, for every job (the worker, or le_expire_lapsed
/// where none serves): the jobs of runs due before now -
/// `leaderlock.run_retention` are locked (never waiting: a claim's job
/// waits for a later prune), their runs that are finished or not claimed
/// live go, and then the jobs left without a run (the row of job '', locked
/// first, keeps their highest term); a batch at a time, at most `ROUNDS`.
/// How many runs went.
pub fn prune_expired(now: i64) -> i64 {
    const BATCH: i64 = 1_000;
    const ROUNDS: usize = 10;
    if !crate::store::schema_version::has_slots() {
        return 0; // (scheduled runs came with 0.5.0's schema, as slots did)
    }
    let horizon = ts(now.saturating_sub(settings::run_retention_micros()));
    let mut deleted = 0;
    let mut floor_locked = false;
    for _ in 0..ROUNDS {
        let jobs: Vec<String> = plans::run(
            queries::LOCK_JOBS_TO_PRUNE,
            &[horizon.into(), ts(now).into(), BATCH.into()],
            |t| {
                t.into_iter()
                    .filter_map(|row| row.get::<String>(1).ok().flatten())
                    .collect()
            },
        );
        if jobs.is_empty() {
            break;
        }
        // The floor's row locked before any run goes, so that a job whose
        // runs go here is forgotten here too (another prune holding it:
        // this one leaves everything to a later round).
        if !floor_locked {
            floor_locked = lock_jobs_floor(now);
            if !floor_locked {
                break;
            }
        }
        let n = plans::run(
            queries::PRUNE_JOBS_RUNS,
            &[jobs.clone().into(), horizon.into(), ts(now).into()],
            |t| t.first().get_one::<i64>().ok().flatten().unwrap_or(0),
        );
        plans::run(queries::FORGET_JOBS, &[jobs.into()], |_| ());
        deleted += n;
        if n < BATCH {
            break;
        }
    }
    deleted
}

/// Locks the row of job '' without waiting, making it when no prune has
/// yet (a first made by another transaction not committed yet: waited for
/// `keys::insert_first`'s bound at most). Whether this transaction holds it.
fn lock_jobs_floor(now: i64) -> bool {
    let (exists, locked) = plans::run(queries::LOCK_JOBS_FLOOR, &[], |t| {
        let row = t.first();
        (
            row.get::<bool>(1).ok().flatten().unwrap_or(false),
            row.get::<bool>(2).ok().flatten().unwrap_or(false),
        )
    });
    match (exists, locked) {
        (_, true) => true,
        (true, false) => false,
        (false, false) => {
            keys::insert_first(queries::MAKE_JOBS_FLOOR, &[], now, Some(now)).is_some()
        }
    }
}

/// `prune_expired` in a subtransaction, for le_expire_lapsed: a failure is
/// rolled back alone and told as a WARNING, never undoing the call's
/// expiries.
pub fn prune_expired_or_warn(now: i64) {
    plans::caught_or_warn("the runs' retention did not run", || prune_expired(now));
}

/// Contract 22: extends `id`'s live claim of an unfinished run (of `term`
/// when named) by `ttl`, or the stored one; never waits.
pub fn renew(job: &str, due: i64, id: &str, ttl: Option<Ttl>, term: Option<i64>) -> bool {
    let now = crate::base::clock::now();
    let args = [
        job.into(),
        ts(due).into(),
        id.into(),
        ts(now).into(),
        Ttl::or_stored(ttl),
        call::caller().into(),
        plans::term_or_any(term),
    ];
    let renewed = plans::run(queries::RENEW_RUN, &args, |t| !t.is_empty());
    if renewed {
        failover::commit_durably();
    }
    renewed
}

/// Contract 22: records the outcome of the run whose last claim is `id`'s
/// of `term`, live or lapsed but not claimed again since; never waits.
pub fn finish(
    job: &str,
    due: i64,
    id: &str,
    term: i64,
    succeeded: bool,
    detail: Option<&str>,
) -> bool {
    let now = crate::base::clock::now();
    let outcome = if succeeded { "succeeded" } else { "failed" };
    let args = [
        job.into(),
        ts(due).into(),
        id.into(),
        term.into(),
        ts(now).into(),
        outcome.into(),
        detail.map_or_else(DatumWithOid::null::<&str>, DatumWithOid::from),
        call::caller().into(),
    ];
    let finished = plans::run(queries::FINISH_RUN, &args, |t| !t.is_empty());
    if finished {
        failover::commit_durably();
        RunEvent::Finished {
            holder: id,
            term,
            outcome,
        }
        .send(job, due, now);
    }
    finished
}
