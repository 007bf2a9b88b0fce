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
use crate::base::ttl::Ttl;
use crate::lease::failover;
use crate::lease::tenure;
use crate::store::call;
use crate::store::plans;
use crate::store::queries;
use leaderlock_protocol::runs::{run_claim, run_forgotten, RunClaim};
use pgrx::datum::DatumWithOid;
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;

/// What a claim did under the job's lock.
enum Claimed {
    /// A new claim, of this term, ending then, the run's how-many-th.
    Term(i64, i64, i32),
    /// The run was past its misfire grace: recorded missed (once).
    Missed,
}

/// Contract 22: claims the run of `job` due at `due` for `id` by `ttl` at
/// `now` (the SQL face has checked that the run is due by then).
/// Its term, or None: finished (or missed) already, claimed live by
/// another, past its misfire grace (recorded missed by this call), or its
/// job's row taken by a concurrent claim.
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
        tenure::insert_first(queries::INSERT_JOB, &args, now, Some(now));
    }
    let floor = failover::term_floor();
    let done = plans::under_lock(
        || {
            plans::run(queries::LOCK_JOB, &[job.into()], |t| {
                let row = t.into_iter().next()?;
                Some(micros(
                    row.get::<TimestampWithTimeZone>(1).expect("pruned_before"),
                ))
            })
        },
        |pruned_before| {
            if pruned_before.is_some_and(|p| run_forgotten(due, p)) {
                return None; // pruned by a shorter retention: never again
            }
            let run = [job.into(), ts(due).into()];
            let new = !plans::run(queries::RUN_EXISTS, &run, |t| !t.is_empty())
                && plans::run(queries::INSERT_RUN, &run, |t| !t.is_empty());
            if new {
                let prune = [job.into(), ts(horizon).into(), ts(now).into()];
                plans::run(queries::PRUNE_RUNS, &prune, |_| ());
                plans::run(queries::MARK_PRUNED, &prune[..2], |_| ());
            }
            let args = [job.into(), ts(due).into(), ts(now).into()];
            let last = plans::run(queries::LOCK_CLAIMABLE_RUN, &args, |t| {
                let row = t.into_iter().next()?;
                let holder = row.get::<String>(1).expect("holder");
                let term = row.get::<i64>(2).expect("term");
                Some((holder, term))
            });
            match run_claim(due, now, grace, last.is_some()) {
                RunClaim::Refuse => return None,
                RunClaim::Claim => {}
                RunClaim::Missed => {
                    let why = match last {
                        Some((Some(_), Some(term))) => format!(
                            "its claim of term {term} lapsed unfinished and its misfire \
                             grace has passed"
                        ),
                        _ => "not claimed within its misfire grace".to_string(),
                    };
                    let args = [
                        job.into(),
                        ts(due).into(),
                        ts(now).into(),
                        why.as_str().into(),
                    ];
                    plans::run(queries::MISS_RUN, &args, |_| ());
                    return Some(Claimed::Missed);
                }
            }
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
            Some(Claimed::Term(term, expires_at, attempt))
        },
    )?;
    failover::commit_durably();
    match done {
        Claimed::Term(term, expires_at, attempt) => {
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

/// Contract 22's bound per role: a role that is not a superuser makes at
/// most `leaderlock.max_jobs_per_role` jobs still kept (53400 beyond,
/// before anything is written), so that no role fills the database with
/// job names.
fn may_make_a_job() {
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
/// `tenure::insert_first`'s bound at most). Whether this transaction holds it.
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
            tenure::insert_first(queries::MAKE_JOBS_FLOOR, &[], now, Some(now)).is_some()
        }
    }
}

/// `prune_expired` in a subtransaction, for le_expire_lapsed: a failure is
/// rolled back alone and told as a WARNING, never undoing the call's
/// expiries.
pub fn prune_expired_or_warn(now: i64) {
    if let Err((code, message)) = plans::caught(|| prune_expired(now)) {
        ErrorReport::new(
            code,
            format!("leaderlock: the runs' retention did not run: {message}"),
            "prune_expired_or_warn",
        )
        .set_detail(format!(
            "The expiries of this call are kept; it is tried again at the next call \
             (SQLSTATE {}).",
            plans::sqlstate(code)
        ))
        .report(PgLogLevel::WARNING);
    }
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
