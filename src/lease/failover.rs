//! Fencing that survives crashes and failover (contract 8).
//!
//! Terms (8.1): a new tenure's term is `greatest(previous + 1, floor)`, where
//! `floor = (timeline - 1) * 2^32 + 1` and timeline is the WAL timeline the
//! server writes on. Promotion of a standby and the end of a point-in-time
//! recovery both start a new timeline, numbered above every timeline that
//! existed, so terms issued there are above every term an older timeline
//! could have issued (fewer than 2^32 tenures per key and timeline), even
//! ones that never reached the standby or the archive. On timeline 1 the
//! floor is 1, so terms stay 1, 2, 3.
//!
//! Leases (8.2): on a new timeline, before any new tenure starts or any
//! lease expires, every held lease is made to last until now + its ttl
//! (exactly: the old primary's lease clock was another host's, and may have
//! been ahead of this one's; at least, on a schema before 0.5.0), and the
//! timeline recorded in `leaderlock_failover`, in one short
//! transaction of its own: the worker's, or a one-shot background worker's
//! where no worker serves the database. Callers never do it in their own
//! transaction (one left open would hold every held lease locked): until it
//! has committed, a call that would start a tenure refuses as it does for
//! a locked row, and le_acquire waits. Renewals, releases and proclaims of
//! live leases go on meanwhile: they never shorten a lease. A holder's
//! renewal, release or le_assert_leader refused on a lease that only looks
//! lapsed (its stored expiry from the old primary's clock, or from before a
//! start on another boot of the host) waits for the step, at most
//! `HOLDER_WAIT_US`, and looks again: the step may give it its ttl. When no
//! background worker can be started (max_worker_processes reached, which
//! an ordinary role's parallel queries can cause) new tenures wait for a
//! slot, logged: a caller's transaction taking the step instead, as 0.4.0
//! did, could be kept open and stop every holder's renewals.
//!
//! Durability (8.3): every call that writes commits as with
//! `synchronous_commit = on`, whatever the session asked for: a `true` seen
//! after commit survives a crash (and reached synchronous standbys), so a
//! term is never lost and issued again.

use crate::base::clock::{self, micros};
use crate::shmem::databases;
use crate::shmem::waiters;
use crate::store::call;
use crate::store::plans;
use crate::store::queries;
use crate::store::schema_version;
use leaderlock_protocol::failover::Step;
use pgrx::bgworkers::{BackgroundWorkerBuilder, BgWorkerStartTime};
use pgrx::prelude::*;
use std::cell::Cell;

/// The WAL timeline this server writes on (meaningful on a primary only;
/// on a standby every write fails anyway).
#[cfg(feature = "pg14")]
fn timeline() -> u32 {
    // PostgreSQL 14 keeps it in the backend-local `ThisTimeLineID`, which
    // RecoveryInProgress() refreshes once it sees recovery has ended (also
    // in a session that was open during a promotion). PostgreSQL 15 removed
    // that global in favour of GetWALInsertionTimeLine().
    unsafe {
        pg_sys::RecoveryInProgress();
        pg_sys::ThisTimeLineID
    }
}

#[cfg(not(feature = "pg14"))]
fn timeline() -> u32 {
    unsafe {
        if pg_sys::RecoveryInProgress() {
            return 1; // no term can be written during recovery
        }
        pg_sys::GetWALInsertionTimeLine()
    }
}

/// The lowest term a new tenure may get on the current timeline (8.1).
pub fn term_floor() -> i64 {
    let timeline = timeline();
    leaderlock_protocol::term_floor(timeline).unwrap_or_else(|| {
        error!("leaderlock: WAL timeline {timeline} is too high for the term rule (at most 2^31)")
    })
}

/// Makes the current transaction commit durably before the caller hears of
/// it (8.3): as `synchronous_commit = on` when the session has `off` or
/// `local` (a transaction-local setting, which outlives the function's own
/// SET clauses and is in force at commit), else as the session asked.
pub fn commit_durably() {
    let level = unsafe { pg_sys::synchronous_commit };
    if level < pg_sys::SyncCommitLevel::SYNCHRONOUS_COMMIT_REMOTE_WRITE as i32 {
        plans::run(queries::SYNC_COMMIT_ON, &[], |_| ());
    }
}

thread_local! {
    /// The timeline this backend saw committed in `leaderlock_failover`: no
    /// need to look again until the server's timeline differs.
    static KNOWN_SAFE: Cell<Option<u32>> = const { Cell::new(None) };
    /// When this backend last asked for the step (microseconds).
    static ASKED_AT: Cell<i64> = const { Cell::new(0) };
    /// When this backend last logged that no worker could take it.
    static LOGGED_AT: Cell<i64> = const { Cell::new(i64::MIN) };
}

/// How often one backend logs that no background worker can take the step.
const LOG_EVERY_US: i64 = 10_000_000;

/// How often one backend asks for the step while it waits for it.
const ASK_EVERY_US: i64 = 100_000;

/// The timeline held leases were last made to outlast, and when, or None
/// on the 0.1.0 schema (no `leaderlock_failover` until ALTER EXTENSION ...
/// UPDATE).
fn safe_timeline(lock: bool) -> Option<Option<(i64, i64)>> {
    let schema = call::current().schema;
    let present = unsafe { pg_sys::get_relname_relid(c"leaderlock_failover".as_ptr(), schema) };
    if present == pg_sys::InvalidOid {
        return None;
    }
    let sql = if lock {
        queries::LOCK_SAFE_TIMELINE
    } else {
        queries::SAFE_TIMELINE
    };
    Some(plans::run(sql, &[], |t| {
        t.into_iter().next().and_then(|row| {
            let timeline = row.get::<i64>(1).expect("timeline")?;
            let at = micros(row.get::<TimestampWithTimeZone>(2).expect("changed_at"));
            Some((timeline, at.unwrap_or(i64::MIN)))
        })
    }))
}

/// What the failover step does on this server at `now`, held leases last
/// made to outlast timeline `stored` at `at` (`leaderlock_protocol::promotion`).
fn step((stored, at): (i64, i64), timeline: u32, now: i64) -> Step {
    leaderlock_protocol::promotion(stored, at, timeline, clock::fresh_since(), now)
}

/// Whether held leases already outlast the current timeline's start: the
/// common case, answered from memory or by a plain read (no lock, no
/// transaction ID).
fn already_safe() -> bool {
    if unsafe { pg_sys::RecoveryInProgress() } {
        return true; // nothing can be written here; refusals need no check
    }
    let timeline = timeline();
    if KNOWN_SAFE.get() == Some(timeline) {
        return true;
    }
    match safe_timeline(false) {
        None => true, // the 0.1.0 schema: as 0.1.0 did, unprotected
        Some(None) => {
            error!("leaderlock: the table leaderlock_failover has no row; reinstall the extension")
        }
        Some(Some(recorded)) if step(recorded, timeline, clock::now()) == Step::Covered => {
            KNOWN_SAFE.set(Some(timeline));
            true
        }
        Some(Some(_)) => false,
    }
}

/// Before a call starts a new tenure (8.2): whether held leases outlast the
/// move to the current timeline. When not yet, asks for the step and
/// returns false (the caller refuses, or waits); see the module's comment.
pub fn ready_for_new_tenures() -> bool {
    if already_safe() {
        return true;
    }
    ask_now_and_then();
    false
}

/// Asks for the step (`ask_for_step`), at most every `ASK_EVERY_US`; says
/// so in the log when it cannot be had.
fn ask_now_and_then() {
    let now = clock::now();
    if now - ASKED_AT.get() < ASK_EVERY_US {
        return;
    }
    ASKED_AT.set(now);
    if !ask_for_step() && now.saturating_sub(LOGGED_AT.get()) >= LOG_EVERY_US {
        LOGGED_AT.set(now);
        log!(
            "leaderlock: no background worker slot free for the failover step (max_worker_processes = {}); \
             new tenures wait until one is",
            unsafe { pg_sys::max_worker_processes }
        );
    }
}

/// How long a holder's refused call waits for a step still to be taken
/// (the worker's: within a beat of the start or the promotion).
const HOLDER_WAIT_US: i64 = 2_000_000;

/// How often such a call looks whether the step was taken.
const HOLDER_LOOK_MS: i64 = 10;

/// A holder's call (a renewal, a release, le_assert_leader) was refused;
/// when the step is still to be taken, the lease may only look lapsed
/// (see the module's comment): asks for the step and waits for it, at most
/// `HOLDER_WAIT_US`. True when it was taken meanwhile (the call looks
/// again); false at once when it was taken before (the common case, from
/// memory), or under a transaction snapshot, which would not see it.
pub fn step_taken_for_holder() -> bool {
    if already_safe() || unsafe { pg_sys::XactIsoLevel } >= pg_sys::XACT_REPEATABLE_READ as i32 {
        return false;
    }
    // (found not taken above: asked for, then looked at after each wait)
    let deadline = clock::now() + HOLDER_WAIT_US;
    loop {
        ask_now_and_then();
        if clock::now() >= deadline {
            return false;
        }
        waiters::latch_wait(HOLDER_LOOK_MS);
        if already_safe() {
            return true;
        }
    }
}

/// Asks the worker serving this database, or else a one-shot worker, to
/// take the step. False when neither can be had.
fn ask_for_step() -> bool {
    let database = unsafe { pg_sys::MyDatabaseId };
    if let Some(slot) = databases::find(database.to_u32()) {
        if slot.worker_procno.load(std::sync::atomic::Ordering::SeqCst) >= 0 {
            slot.wake_worker();
            return true;
        }
    }
    BackgroundWorkerBuilder::new("leaderlock failover step")
        .set_type("leaderlock failover step")
        .set_library("leaderlock")
        .set_function("leaderlock_failover_main")
        .set_argument(Some(pg_sys::Datum::from(database)))
        .enable_spi_access()
        .set_start_time(BgWorkerStartTime::RecoveryFinished)
        .set_restart_time(None)
        .load_dynamic()
        .is_ok()
}

/// The step itself, in the current transaction: on a timeline whose held
/// leases were not yet extended, extends them. True when they outlast the
/// current timeline's start (now, or already); false when another
/// transaction is taking the step right now.
pub fn make_leases_outlast_failover() -> bool {
    if already_safe() {
        return true;
    }
    let timeline = timeline();
    let Some(stored) = safe_timeline(true) else {
        return true; // the 0.1.0 schema
    };
    let Some(previous) = stored else {
        return false; // locked: another transaction is extending them
    };
    let now = clock::now();
    // From now after a promotion, exactly; from the server's start where
    // only the lease clock started afresh (it may have started ahead of the
    // last run's: held leases are honoured for their ttl from then), at
    // least.
    let decided = match step(previous, timeline, now) {
        Step::Covered => None,
        Step::Promoted { from } => Some((from, true)),
        Step::ClockFresh { from } => Some((from, false)),
    };
    if let Some((from, promoted)) = decided {
        let previous = previous.0;
        if schema_version::has_slots() {
            // Groups (contract 26): each stepped afresh, its members'
            // sessions as they last from now on. First, as every change of
            // a group locks its row before its members' sessions (it waits
            // for one being changed, as the sessions' update would).
            plans::run(
                queries::GROUPS_DUE_AFTER_FAILOVER,
                &[clock::ts(now).into()],
                |_| (),
            );
        }
        let mut extended = if promoted && schema_version::has_slots() {
            // Exactly ttl from now, the other host's clock notwithstanding
            // (from now: `from` is now after a promotion).
            plans::run(queries::PROMOTED_LEASES, &[], |t| t.len())
                + plans::run(queries::PROMOTED_SLOTS, &[], |t| t.len())
        } else {
            plans::run(queries::OUTLAST_FAILOVER, &[clock::ts(from).into()], |t| {
                t.len()
            })
        };
        if !promoted && schema_version::has_slots() {
            // (the tenures of keys of many slots, contract 17)
            extended += plans::run(
                queries::OUTLAST_FAILOVER_SLOTS,
                &[clock::ts(from).into()],
                |t| t.len(),
            );
        }
        if schema_version::has_slots() {
            // Claims of scheduled runs (contract 22, the same schema): at
            // least their ttl from `from`, after a promotion too.
            extended += plans::run(
                queries::OUTLAST_FAILOVER_RUNS,
                &[clock::ts(from).into()],
                |t| t.len(),
            );
            // Sessions (contract 21): as leases; the keys held under them
            // follow their session.
            extended += if promoted {
                plans::run(queries::PROMOTED_SESSIONS, &[], |t| t.len())
            } else {
                plans::run(
                    queries::OUTLAST_FAILOVER_SESSIONS,
                    &[clock::ts(from).into()],
                    |t| t.len(),
                )
            };
        }
        plans::run(
            queries::MARK_SAFE_TIMELINE,
            &[i64::from(timeline).into(), clock::ts(now).into()],
            |_| (),
        );
        commit_durably();
        if promoted {
            log!(
                "leaderlock: WAL timeline {timeline} (was {previous}: a promotion or a recovery); \
                 {extended} held leases now last until now + their ttl"
            );
        } else {
            log!(
                "leaderlock: the lease clock started from the wall clock (its file is from \
                 another boot of the host); {extended} held leases now last at least until the \
                 server's start + their ttl"
            );
        }
    }
    // Not remembered yet: this transaction may still roll back.
    true
}

/// Tests only: forget the timeline seen safe, as a new backend would.
#[cfg(any(test, feature = "pg_test"))]
pub fn forget_known_timeline() {
    KNOWN_SAFE.set(None);
}
