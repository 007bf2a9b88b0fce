//! Wakes the worker early when a commit sets a lease expiry earlier than
//! the worker's planned wake-up (contract 5: timeliness without polling).
//!
//! Two words of shared memory: the worker's PGPROC number and the time it
//! plans to wake. A backend that writes an expires_at remembers the earliest
//! one of its transaction; at commit (when the row is visible to new
//! snapshots) it sets the worker's latch if that expiry is earlier than the
//! planned wake-up. While the worker checks, the planned time is `i64::MAX`,
//! so a commit racing with a check always wakes it for one more check.
//!
//! The same transaction callback wakes le_acquire's waiters (`waiters.rs`).
//!
//! Only active when the library is preloaded; otherwise there is no worker
//! and nothing here runs.

use crate::waiters;
use pgrx::prelude::*;
use pgrx::{pg_shmem_init, PgAtomic};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, Ordering};

static PLANNED_WAKE: PgAtomic<AtomicI64> = unsafe { PgAtomic::new(c"leaderlock planned wake") };
static WORKER_PROCNO: PgAtomic<AtomicI32> = unsafe { PgAtomic::new(c"leaderlock worker procno") };

/// Set in the postmaster when preloading; inherited by every backend.
static ENABLED: AtomicBool = AtomicBool::new(false);

/// "Wake me for any expiry": the worker is checking right now.
const CHECKING: i64 = i64::MAX;

thread_local! {
    /// Earliest expires_at written by the current transaction.
    static EARLIEST: Cell<Option<i64>> = const { Cell::new(None) };
}

/// Called from `_PG_init` while preloading.
pub fn init() {
    pg_shmem_init!(PLANNED_WAKE = AtomicI64::new(CHECKING));
    pg_shmem_init!(WORKER_PROCNO = AtomicI32::new(-1));
    unsafe {
        pg_sys::RegisterXactCallback(Some(on_xact_event), std::ptr::null_mut());
        pg_sys::RegisterSubXactCallback(Some(on_subxact_event), std::ptr::null_mut());
    }
    ENABLED.store(true, Ordering::SeqCst);
}

/// A lease now expires at `expires_at` if this transaction commits.
pub fn expiry_written(expires_at: i64) {
    if ENABLED.load(Ordering::Relaxed) {
        EARLIEST.with(|e| e.set(Some(e.get().map_or(expires_at, |x| x.min(expires_at)))));
    }
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
                if expires_at < PLANNED_WAKE.get().load(Ordering::SeqCst) {
                    wake_worker();
                }
            }
            waiters::transaction_ended(true);
        }
        XACT_EVENT_ABORT | XACT_EVENT_PARALLEL_ABORT => {
            EARLIEST.with(|e| e.set(None));
            waiters::transaction_ended(false);
        }
        // A prepared transaction commits elsewhere; the worker's naptime covers it.
        XACT_EVENT_PREPARE => {
            EARLIEST.with(|e| e.set(None));
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

/// Sets the worker's latch (a commit, or a session-bound lease's session ended).
pub fn wake_worker() {
    let procno = WORKER_PROCNO.get().load(Ordering::SeqCst);
    if procno >= 0 {
        // A stale procno only costs a spurious wake-up of some other process,
        // which latches tolerate by design.
        unsafe {
            let proc_ = (*pg_sys::ProcGlobal).allProcs.add(procno as usize);
            pg_sys::SetLatch(&raw mut (*proc_).procLatch);
        }
    }
}

/// This backend's index in `ProcGlobal->allProcs`. Computed from the
/// pointers, as PostgreSQL's own `GetNumberFromPGProc` does, because the
/// field that held it (`PGPROC.pgprocno`, PostgreSQL 14-16) is gone in 17
/// (replaced by `MyProcNumber`): one expression for every version.
fn my_procno() -> i32 {
    unsafe {
        let index = pg_sys::MyProc.offset_from((*pg_sys::ProcGlobal).allProcs);
        i32::try_from(index).expect("a PGPROC index fits in an int")
    }
}

/// Worker side: announce where to wake us; cleared again when we exit.
pub fn register_worker() {
    WORKER_PROCNO.get().store(my_procno(), Ordering::SeqCst);
    unsafe { pg_sys::on_shmem_exit(Some(unregister_worker), pg_sys::Datum::from(0)) };
}

#[pg_guard]
unsafe extern "C-unwind" fn unregister_worker(_code: i32, _arg: pg_sys::Datum) {
    let mine = my_procno();
    let _ = WORKER_PROCNO
        .get()
        .compare_exchange(mine, -1, Ordering::SeqCst, Ordering::SeqCst);
    PLANNED_WAKE.get().store(CHECKING, Ordering::SeqCst);
}

/// Worker side: a check starts; any commit from now on wakes us again.
pub fn check_started() {
    PLANNED_WAKE.get().store(CHECKING, Ordering::SeqCst);
}

/// Worker side: we will sleep until `wake_at` unless woken earlier.
pub fn sleeping_until(wake_at: i64) {
    PLANNED_WAKE.get().store(wake_at, Ordering::SeqCst);
}
