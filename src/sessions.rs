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

use crate::wakeup;
use pgrx::prelude::*;
use pgrx::shmem::AssertPGRXSharedMemory;
use pgrx::spinlock::PgSpinLock;
use pgrx::{pg_shmem_init, PgAtomic};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};

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
    overflowed: bool,
}

static ENDED: PgAtomic<PgSpinLock<AssertPGRXSharedMemory<Queue>>> =
    unsafe { PgAtomic::new(c"leaderlock ended sessions") };

/// Set in the postmaster when preloading; inherited by every backend.
static ENABLED: AtomicBool = AtomicBool::new(false);

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
                overflowed: false,
            })
        })
    );
    ENABLED.store(true, Ordering::SeqCst);
}

/// Whether session-bound leases can be announced here: the library is
/// preloaded and its worker serves this database.
pub fn available() -> bool {
    ENABLED.load(Ordering::Relaxed)
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
    {
        let mut queue = ENDED.get().lock();
        if queue.len < QUEUE {
            let at = queue.len;
            queue.ended[at] = me;
            queue.len += 1;
        } else {
            queue.overflowed = true;
        }
    }
    wakeup::wake_worker();
}

/// Worker: the sessions that ended since the last call, and whether some
/// were not recorded (then sweep).
pub fn take_ended() -> (Vec<Session>, bool) {
    if !available() {
        return (Vec::new(), false);
    }
    // Copied out under the spinlock (no allocation may happen there).
    let (copy, len, overflowed) = {
        let mut queue = ENDED.get().lock();
        let taken = (queue.ended, queue.len, queue.overflowed);
        queue.len = 0;
        queue.overflowed = false;
        taken
    };
    (copy[..len].to_vec(), overflowed)
}
