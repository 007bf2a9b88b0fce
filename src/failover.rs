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
//! Leases (8.2): the first write on a new timeline, by a caller or by the
//! worker, first makes every held lease last at least until now + its ttl,
//! in the same transaction, and records the timeline in
//! `leaderlock_failover`. Until that commits nothing can take a lease, so no
//! lease the old primary may have renewed is taken early.
//!
//! Durability (8.3): every call that writes commits as with
//! `synchronous_commit = on`, whatever the session asked for: a `true` seen
//! after commit survives a crash (and reached synchronous standbys), so a
//! term is never lost and issued again.

use crate::lease;
use crate::plans;
use crate::queries;
use pgrx::prelude::*;
use std::cell::Cell;

/// Terms one timeline can issue before reaching the next one's floor.
const TERMS_PER_TIMELINE: i64 = 1 << 32;

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
    floor_of(timeline).unwrap_or_else(|| {
        error!("leaderlock: WAL timeline {timeline} is too high for the term rule (at most 2^31)")
    })
}

fn floor_of(timeline: u32) -> Option<i64> {
    i64::from(timeline.max(1) - 1)
        .checked_mul(TERMS_PER_TIMELINE)
        .map(|base| base + 1)
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
    /// The transaction that last extended held leases for a failover.
    static EXTENDED_IN: Cell<Option<pg_sys::TransactionId>> = const { Cell::new(None) };
}

/// Whether the current transaction extended held leases for a failover
/// (and so holds their rows locked until it ends).
pub fn extended_in_this_transaction() -> bool {
    EXTENDED_IN
        .get()
        .is_some_and(|xid| xid == unsafe { pg_sys::GetTopTransactionIdIfAny() })
}

/// Before a call or the worker writes (8.2): on a timeline whose held leases
/// were not yet extended, extends them. False when another transaction is
/// doing so right now: the caller then refuses, as it does when a lease's
/// row is locked, rather than wait.
pub fn leases_outlast_failover() -> bool {
    if unsafe { pg_sys::RecoveryInProgress() } {
        return true; // nothing can be written here; refusals need no check
    }
    let timeline = timeline();
    if KNOWN_SAFE.get() == Some(timeline) {
        return true;
    }
    let present = plans::run(queries::FAILOVER_TABLE_PRESENT, &[], |t| {
        t.first().get_one::<bool>().expect("bool")
    });
    if present != Some(true) {
        // The 0.1.0 schema, until ALTER EXTENSION leaderlock UPDATE: work
        // as 0.1.0 did, without this protection (asked again next call).
        return true;
    }
    let stored = |sql| {
        plans::run(sql, &[], |t| {
            t.into_iter()
                .next()
                .and_then(|row| row.get::<i64>(1).expect("timeline"))
        })
    };
    // A plain read first: on a timeline already handled, no lock is taken.
    match stored(queries::SAFE_TIMELINE) {
        None => {
            error!("leaderlock: the table leaderlock_failover has no row; reinstall the extension")
        }
        Some(t) if t >= i64::from(timeline) => {
            KNOWN_SAFE.set(Some(timeline));
            return true;
        }
        Some(_) => {}
    }
    let Some(previous) = stored(queries::LOCK_SAFE_TIMELINE) else {
        return false; // another transaction is extending them
    };
    if previous < i64::from(timeline) {
        let now = lease::now();
        let extended = plans::run(queries::OUTLAST_FAILOVER, &[lease::ts(now).into()], |t| {
            t.len()
        });
        plans::run(
            queries::MARK_SAFE_TIMELINE,
            &[i64::from(timeline).into(), lease::ts(now).into()],
            |_| (),
        );
        commit_durably();
        EXTENDED_IN.set(Some(unsafe { pg_sys::GetTopTransactionIdIfAny() }));
        log!(
            "leaderlock: WAL timeline {timeline} (was {previous}: a promotion or a recovery); \
             {extended} held leases now last at least until now + their ttl"
        );
    }
    // Not remembered yet: this transaction may still roll back.
    true
}

/// Tests only: forget the timeline seen safe, as a new backend would.
#[cfg(any(test, feature = "pg_test"))]
pub fn forget_known_timeline() {
    KNOWN_SAFE.set(None);
}

#[cfg(test)]
mod unit {
    #[test]
    fn floors_start_each_timeline_above_the_last() {
        assert_eq!(super::floor_of(1), Some(1));
        assert_eq!(super::floor_of(2), Some((1 << 32) + 1));
        assert_eq!(super::floor_of(3), Some((2 << 32) + 1));
        assert_eq!(
            super::floor_of(1 << 31),
            Some(((1 << 31) - 1) * (1 << 32) + 1)
        );
        assert_eq!(super::floor_of((1 << 31) + 1), None);
    }
}
