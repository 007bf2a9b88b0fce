//! Session-bound leases (contract 10): telling the worker that a session
//! ended.
//!
//! A backend that binds a lease to its session registers an exit callback
//! (once). When the backend exits, normally or by FATAL error, the callback
//! puts (pid, database, backend start) on a small queue in shared memory and
//! sets the worker's latch; the worker then vacates that session's leases
//! and announces them. The callback runs after the backend's transaction
//! was rolled back and its locks released, so the rows are free to take.
//!
//! A backend killed outright (kill -9) runs no callback, but PostgreSQL then
//! restarts every process, the worker included, and the worker's first
//! check vacates every session-bound lease whose session no longer exists.
//! So does a check when the queue overflowed, and one every
//! `SWEEP_INTERVAL_MS` as a safety net.

use crate::base::preload;
use crate::shmem::databases;
use crate::shmem::worker_wakeup;
use pgrx::prelude::*;
use pgrx::shmem::AssertPGRXSharedMemory;
use pgrx::spinlock::PgSpinLock;
use pgrx::{pg_shmem_init, PgAtomic};
use std::cell::Cell;
use std::sync::atomic::Ordering;

/// Sessions that can end between two looks of the worker before it falls
/// back to a sweep.
const QUEUE: usize = 256;

/// Longest time between two sweeps for sessions gone without a word.
pub const SWEEP_INTERVAL_MS: i64 = 10_000;

/// A session: its backend's pid and start time, as pg_stat_activity shows
/// them (`pid`, `backend_start`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Session {
    pub pid: i32,
    pub started: i64,
    pub database: u32,
}

#[derive(Clone, Copy)]
struct Queue {
    ended: [Session; QUEUE],
    len: usize,
    /// Sessions that found the queue full, since server start.
    overflows: u64,
}

static ENDED: PgAtomic<PgSpinLock<AssertPGRXSharedMemory<Queue>>> =
    unsafe { PgAtomic::new(c"leaderlock ended sessions") };

thread_local! {
    static EXIT_CALLBACK: Cell<bool> = const { Cell::new(false) };
}

/// Called from `_PG_init` while preloading.
pub fn init() {
    pg_shmem_init!(
        ENDED = PgSpinLock::new(unsafe {
            AssertPGRXSharedMemory::new(Queue {
                ended: [Session::default(); QUEUE],
                len: 0,
                overflows: 0,
            })
        })
    );
}

/// Whether session-bound leases can be announced here: the library is
/// preloaded and its worker serves this database.
pub fn available() -> bool {
    preload::preloaded()
}

/// This session, for a lease bound to it. The first call registers the
/// exit callback that reports its end.
pub fn this_session() -> Session {
    if !EXIT_CALLBACK.get() {
        unsafe { pg_sys::on_shmem_exit(Some(session_ended), pg_sys::Datum::from(0)) };
        EXIT_CALLBACK.set(true);
    }
    me()
}

fn me() -> Session {
    unsafe {
        Session {
            pid: pg_sys::MyProcPid,
            started: pg_sys::MyStartTimestamp,
            database: pg_sys::MyDatabaseId.to_u32(),
        }
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn session_ended(_code: i32, _arg: pg_sys::Datum) {
    let me = me();
    if databases::mine().is_none_or(|s| s.worker_procno.load(Ordering::SeqCst) < 0) {
        // No worker here now: the next one's first check sweeps for
        // sessions gone, this one included. (Queued, it would stay.)
        return;
    }
    {
        let mut queue = ENDED.get().lock();
        if queue.len < QUEUE {
            let at = queue.len;
            queue.ended[at] = me;
            queue.len += 1;
        } else {
            queue.overflows += 1;
        }
    }
    worker_wakeup::wake_worker();
}

/// Worker: the sessions of `database` that ended since the last call, and
/// whether some may not have been recorded since `overflows` (updated) was
/// read (then sweep). The queue is shared by the workers of every
/// database: each takes its own.
pub fn take_ended(database: u32, overflows: &mut u64) -> (Vec<Session>, bool) {
    if !available() {
        return (Vec::new(), false);
    }
    // Copied out under the spinlock (no allocation may happen there).
    let mut mine = [Session::default(); QUEUE];
    let (taken, overflowed) = {
        let mut queue = ENDED.get().lock();
        let taken = queue.remove(database, &mut mine);
        // An overflow may have lost any database's session: every worker
        // sweeps once.
        let overflowed = queue.overflows != *overflows;
        *overflows = queue.overflows;
        (taken, overflowed)
    };
    (mine[..taken].to_vec(), overflowed)
}

/// Launcher: database `database` is gone; drop its queued sessions.
pub fn forget(database: u32) {
    if available() {
        let mut dropped = [Session::default(); QUEUE];
        ENDED.get().lock().remove(database, &mut dropped);
    }
}

impl Queue {
    /// Moves the entries of `database` out into `out` (`databases::move_out`).
    fn remove(&mut self, database: u32, out: &mut [Session; QUEUE]) -> usize {
        databases::move_out(
            &mut self.ended,
            &mut self.len,
            database,
            |e| e.database,
            out,
        )
    }
}
