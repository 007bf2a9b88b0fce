//! Wakes the worker early when a commit sets a lease expiry earlier than
//! the worker's planned wake-up (contract 5: timeliness without polling).
//!
//! Two words of shared memory per database (`databases.rs`): the PGPROC
//! number of the worker serving it and the time it plans to wake. A backend
//! that writes an expires_at remembers the earliest one of its transaction;
//! at commit (when the row is visible to new snapshots) it sets that
//! worker's latch if that expiry is earlier than the planned wake-up. While
//! the worker checks, the planned time is `CHECKING`, so a commit racing
//! with a check always wakes it for one more check.
//!
//! The same transaction callback wakes le_acquire's waiters (`waiters.rs`).
//!
//! Only active when the library is preloaded; otherwise there is no worker
//! and nothing here runs.

use crate::base::preload;
use crate::shmem::databases::{self, Slot, CHECKING};
use crate::shmem::waiters;
use pgrx::prelude::*;
use std::cell::Cell;
use std::sync::atomic::Ordering;

thread_local! {
    /// Earliest expires_at written by the current transaction.
    static EARLIEST: Cell<Option<i64>> = const { Cell::new(None) };
    /// The current transaction recorded a transition (contract 23).
    static RECORDED: Cell<bool> = const { Cell::new(false) };
}

/// Called from `_PG_init` while preloading.
pub fn init() {
    unsafe {
        pg_sys::RegisterXactCallback(Some(on_xact_event), std::ptr::null_mut());
        pg_sys::RegisterSubXactCallback(Some(on_subxact_event), std::ptr::null_mut());
    }
}

/// A lease now expires at `expires_at` if this transaction commits.
pub fn expiry_written(expires_at: i64) {
    if preload::preloaded() {
        EARLIEST.with(|e| e.set(Some(e.get().map_or(expires_at, |x| x.min(expires_at)))));
    }
}

/// A transition was recorded (contract 23): once this commits, the worker
/// numbers it, `worker::HISTORY_GAP_MS` later (or at its next round, while
/// transitions keep coming). Only the first commit after the worker took
/// the flag wakes it, and only to note the time, so a burst of transitions
/// costs it one round, not one each.
pub fn history_written() {
    if preload::preloaded() {
        RECORDED.with(|r| r.set(true));
    }
}

/// Worker side: whether transitions await a position; clears the flag
/// (a commit from now on sets it again, and wakes us).
pub fn take_history_pending() -> bool {
    databases::mine().is_some_and(|slot| slot.history_pending.swap(false, Ordering::SeqCst))
}

#[pg_guard]
unsafe extern "C-unwind" fn on_xact_event(
    event: pg_sys::XactEvent::Type,
    _arg: *mut std::ffi::c_void,
) {
    use pg_sys::XactEvent::*;
    match event {
        XACT_EVENT_COMMIT | XACT_EVENT_PARALLEL_COMMIT => {
            if let Some(expires_at) = EARLIEST.with(|e| e.take()) {
                if let Some(slot) = databases::mine() {
                    if expires_at < slot.planned_wake.load(Ordering::SeqCst) {
                        slot.wake_worker();
                    }
                }
            }
            if RECORDED.with(|r| r.take()) {
                if let Some(slot) = databases::mine() {
                    if !slot.history_pending.swap(true, Ordering::SeqCst) {
                        slot.wake_worker_for_history();
                    }
                }
            }
            waiters::transaction_ended(true);
        }
        XACT_EVENT_ABORT | XACT_EVENT_PARALLEL_ABORT => {
            EARLIEST.with(|e| e.set(None));
            RECORDED.with(|r| r.set(false));
            waiters::transaction_ended(false);
        }
        // A prepared transaction commits elsewhere; the worker's naptime covers it.
        XACT_EVENT_PREPARE => {
            EARLIEST.with(|e| e.set(None));
            RECORDED.with(|r| r.set(false));
            waiters::transaction_prepared();
        }
        _ => {}
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn on_subxact_event(
    event: pg_sys::SubXactEvent::Type,
    _my: pg_sys::SubTransactionId,
    _parent: pg_sys::SubTransactionId,
    _arg: *mut std::ffi::c_void,
) {
    if event == pg_sys::SubXactEvent::SUBXACT_EVENT_ABORT_SUB {
        waiters::subtransaction_aborted();
    }
}

/// Sets the latch of the worker serving this database (a commit, or a
/// session-bound lease's session ended).
pub fn wake_worker() {
    if let Some(slot) = databases::mine() {
        slot.wake_worker();
    }
}

/// Least time between two checks that callers ask for (le_expire_lapsed),
/// per database, whoever asks: at most ten extra checks a second.
const ASKED_WAKE_FLOOR_US: i64 = 100_000;

/// le_expire_lapsed where a worker serves: bring its next check forward,
/// at most once per `ASKED_WAKE_FLOOR_US` for the whole database.
pub fn wake_worker_asked() {
    if let Some(slot) = databases::mine() {
        slot.wake_worker_asked(ASKED_WAKE_FLOOR_US);
    }
}

/// Worker side: announce where to wake us; cleared again when we exit.
/// False when another worker already serves this database.
pub fn register_worker(slot: &'static Slot) -> bool {
    if slot
        .worker_procno
        .compare_exchange(
            -1,
            databases::my_procno(),
            Ordering::SeqCst,
            Ordering::SeqCst,
        )
        .is_err()
    {
        return false;
    }
    unsafe { pg_sys::on_shmem_exit(Some(unregister_worker), pg_sys::Datum::from(0)) };
    true
}

#[pg_guard]
unsafe extern "C-unwind" fn unregister_worker(_code: i32, _arg: pg_sys::Datum) {
    if let Some(slot) = databases::mine() {
        slot.planned_wake.store(CHECKING, Ordering::SeqCst);
        let _ = slot.worker_procno.compare_exchange(
            databases::my_procno(),
            -1,
            Ordering::SeqCst,
            Ordering::SeqCst,
        );
    }
    // The launcher decides whether to start another.
    databases::wake_launcher();
}

/// Worker side: a check starts; any commit from now on wakes us again,
/// for another check.
pub fn check_started() {
    if let Some(slot) = databases::mine() {
        slot.planned_wake.store(CHECKING, Ordering::SeqCst);
        slot.take_check_wanted();
    }
}

/// Worker side: whether a wake-up since the last check asked for a check
/// (every one but the history's does).
pub fn check_wanted() -> bool {
    databases::mine().is_some_and(|slot| slot.take_check_wanted())
}

/// Worker side: we will sleep until `wake_at` unless woken earlier.
pub fn sleeping_until(wake_at: i64) {
    if let Some(slot) = databases::mine() {
        slot.planned_wake.store(wake_at, Ordering::SeqCst);
    }
}
