//! Leases handed over and never taken up (contract 9): the queue that
//! tells the worker.
//!
//! A release hands its lease to the candidate first in line, in the
//! releasing transaction (`lease::hand_over`). Should that candidate stop
//! waiting without returning true (cancelled, timed out, terminated), or its
//! own transaction roll back after it returned true, the tenure it was
//! handed is nobody's: the backend that finds so (the candidate, or the
//! release at its commit) puts (database, key, id, term, start) here and
//! sets the worker's latch; the worker vacates that tenure if it is still
//! as handed (that holder, term and start, never renewed) and announces
//! `expired` with `"reason":"abandoned"`, instead of leaving the key to
//! lapse at the candidate's ttl.
//!
//! Should the queue be full, the tenure lapses at its ttl, as one whose
//! holder died does.

use crate::base::names::Name;
use crate::base::preload;
use crate::shmem::databases;
use pgrx::prelude::*;
use pgrx::shmem::AssertPGRXSharedMemory;
use pgrx::spinlock::PgSpinLock;
use pgrx::{pg_shmem_init, PgAtomic};

/// Tenures abandoned between two looks of the workers.
const QUEUE: usize = 64;

/// A tenure handed to a candidate that never took it up: its key, holder,
/// term and start (`acquired_at`), which name it alone even should the
/// extension be dropped and created again meanwhile.
#[derive(Clone, Copy)]
pub struct Abandoned {
    database: u32,
    pub key: Name,
    pub id: Name,
    pub term: i64,
    pub acquired_at: i64,
}

impl Abandoned {
    const EMPTY: Abandoned = Abandoned {
        database: 0,
        key: Name::EMPTY,
        id: Name::EMPTY,
        term: 0,
        acquired_at: 0,
    };

    /// The tenure `term` of `key`, started `acquired_at` for `id`, in this
    /// database.
    pub fn new(key: Name, id: Name, term: i64, acquired_at: i64) -> Abandoned {
        Abandoned {
            database: unsafe { pg_sys::MyDatabaseId }.to_u32(),
            key,
            id,
            term,
            acquired_at,
        }
    }
}

#[derive(Clone, Copy)]
struct Queue {
    abandoned: [Abandoned; QUEUE],
    len: usize,
}

static QUEUED: PgAtomic<PgSpinLock<AssertPGRXSharedMemory<Queue>>> =
    unsafe { PgAtomic::new(c"leaderlock abandoned tenures") };

/// Called from `_PG_init` while preloading.
pub fn init() {
    pg_shmem_init!(
        QUEUED = PgSpinLock::new(unsafe {
            AssertPGRXSharedMemory::new(Queue {
                abandoned: [Abandoned::EMPTY; QUEUE],
                len: 0,
            })
        })
    );
}

/// A tenure handed over by a committed release was never taken up: the
/// worker of its database vacates it. (Without a worker there, it lapses
/// at its ttl: queued, it would fill the queue that every database shares.)
pub fn abandoned(a: Abandoned) {
    if !preload::preloaded() || !databases::worker_serves_this_database() {
        return;
    }
    let queued = {
        let mut queue = QUEUED.get().lock();
        let at = queue.len;
        (at < QUEUE)
            .then(|| {
                queue.abandoned[at] = a;
                queue.len += 1;
            })
            .is_some()
    };
    if let Some(slot) = databases::mine().filter(|_| queued) {
        slot.wake_worker();
    }
}

/// Worker: the abandoned tenures of `database` queued since the last call
/// (the queue is shared by the workers of every database).
pub fn take(database: u32) -> Vec<Abandoned> {
    if !preload::preloaded() {
        return Vec::new();
    }
    // Copied out under the spinlock (no allocation may happen there).
    let mut mine = [Abandoned::EMPTY; QUEUE];
    let taken = QUEUED.get().lock().remove(database, &mut mine);
    mine[..taken].to_vec()
}

/// Launcher: database `database` is gone; drop its queued tenures.
pub fn forget(database: u32) {
    if preload::preloaded() {
        let mut dropped = [Abandoned::EMPTY; QUEUE];
        QUEUED.get().lock().remove(database, &mut dropped);
    }
}

impl Queue {
    /// Moves the entries of `database` out into `out` (`databases::move_out`).
    fn remove(&mut self, database: u32, out: &mut [Abandoned; QUEUE]) -> usize {
        databases::move_out(
            &mut self.abandoned,
            &mut self.len,
            database,
            |e| e.database,
            out,
        )
    }
}
