//! Blocking acquire (contract 9): where le_acquire waits, and what wakes it.
//!
//! Shared memory holds one PostgreSQL condition variable per bucket of keys
//! (a hash of the key picks the bucket). A transaction that vacates a lease
//! (release, expiry, end of a session-bound lease) broadcasts the key's
//! bucket when it commits, so waiters wake exactly when the vacant row is
//! visible to a new snapshot; a transaction that started a tenure
//! broadcasts when it rolls back, since the lease is vacant again. Waiters
//! sleep on latches: no CPU, and PostgreSQL's interrupt handling (cancel,
//! termination, statement_timeout) works while they do.
//!
//! Only active when the library is preloaded; otherwise le_acquire looks
//! again every `UNPRELOADED_RECHECK_MS`.

use crate::candidates;
use crate::databases;
use crate::preload;
use pgrx::prelude::*;
use pgrx::shmem::AssertPGRXSharedMemory;
use pgrx::{pg_shmem_init, PgAtomic};
use std::cell::{Cell, RefCell, UnsafeCell};
use std::sync::atomic::AtomicI32;
use std::sync::atomic::{AtomicU64, Ordering};

/// Buckets of keys. Waiters of keys that share a bucket wake together and
/// go back to sleep after one look at their own key.
const BUCKETS: usize = 64;

/// How often le_acquire looks again when there is no shared memory.
pub const UNPRELOADED_RECHECK_MS: i64 = 100;

/// After a broadcast, the waiter that claims it looks at once; the others
/// look this much later (see `sleep`).
const SECOND_LOOK_MS: i64 = 5;

/// When the broadcast was for another candidate (the one the key serves
/// first), the others look this much later: by then it has taken the
/// lease, or, had it stopped waiting without, its leaving woke them
/// (`candidate_left`); this look only covers what neither can.
const CHOSEN_OTHER_MS: i64 = 50;

struct Buckets {
    cvs: [UnsafeCell<pg_sys::ConditionVariable>; BUCKETS],
    /// Broadcasts so far, per bucket.
    woken: [AtomicU64; BUCKETS],
    /// The last broadcast a waiter claimed, per bucket (see `sleep`).
    claimed: [AtomicU64; BUCKETS],
    /// The PGPROC number of the candidate the last broadcast is for (the
    /// one a release's key will serve first, contract 18), or -1.
    chosen: [AtomicI32; BUCKETS],
}

static BUCKETS_SHMEM: PgAtomic<AssertPGRXSharedMemory<Buckets>> =
    unsafe { PgAtomic::new(c"leaderlock waiters") };

thread_local! {
    /// Buckets to broadcast when the current transaction commits.
    static AT_COMMIT: Cell<u64> = const { Cell::new(0) };
    /// Buckets to broadcast when it rolls back.
    static AT_ABORT: Cell<u64> = const { Cell::new(0) };
    /// The first keys vacated by this transaction: at commit, each one's
    /// best candidate is woken first.
    static KEYS_AT_COMMIT: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
    /// While le_acquire looks (`look_begins`): its transaction nesting
    /// level and the buckets of tenures started before the look.
    static LOOK: Cell<Option<(i32, u64)>> = const { Cell::new(None) };
}

/// Most keys of one transaction whose best candidate is looked up at
/// commit (le_release_all may vacate thousands; the rest wake as before).
const CHOSEN_KEYS: usize = 64;

/// Called from `_PG_init` while preloading.
pub fn init() {
    pg_shmem_init!(
        BUCKETS_SHMEM = unsafe {
            AssertPGRXSharedMemory::new(Buckets {
                cvs: std::array::from_fn(|_| {
                    let mut cv = std::mem::MaybeUninit::<pg_sys::ConditionVariable>::zeroed();
                    pg_sys::ConditionVariableInit(cv.as_mut_ptr());
                    UnsafeCell::new(cv.assume_init())
                }),
                woken: std::array::from_fn(|_| AtomicU64::new(0)),
                claimed: std::array::from_fn(|_| AtomicU64::new(0)),
                chosen: std::array::from_fn(|_| AtomicI32::new(-1)),
            })
        }
    );
}

fn bucket(key: &str) -> usize {
    // The database too: the same key in two databases is two leases.
    bucket_of(unsafe { pg_sys::MyDatabaseId }.to_u32(), key)
}

fn bucket_of(database: u32, key: &str) -> usize {
    // FNV-1a: stable across processes (unlike std's randomly seeded hasher).
    let database = database.to_le_bytes();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in database.iter().chain(key.as_bytes()) {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    (h % BUCKETS as u64) as usize
}

fn cv(bucket: usize) -> *mut pg_sys::ConditionVariable {
    BUCKETS_SHMEM.get().cvs[bucket].get()
}

/// The lease of `key` becomes vacant if this transaction commits.
pub fn wake_at_commit(key: &str) {
    if preload::preloaded() {
        AT_COMMIT.set(AT_COMMIT.get() | 1 << bucket(key));
        KEYS_AT_COMMIT.with(|keys| {
            let mut keys = keys.borrow_mut();
            if keys.len() < CHOSEN_KEYS {
                keys.push(key.to_string());
            }
        });
    }
}

/// The lease of `key` becomes vacant again if this transaction rolls back.
pub fn wake_at_abort(key: &str) {
    if preload::preloaded() {
        AT_ABORT.set(AT_ABORT.get() | 1 << bucket(key));
    }
}

/// From the transaction callback (`worker_worker_wakeup.rs`): the transaction ended.
pub fn transaction_ended(committed: bool) {
    LOOK.set(None);
    let commit = AT_COMMIT.replace(0);
    let abort = AT_ABORT.replace(0);
    let keys = KEYS_AT_COMMIT.with(|k| std::mem::take(&mut *k.borrow_mut()));
    if committed {
        choose(commit, &keys);
    }
    broadcast(if committed { commit } else { abort });
}

/// Before a broadcast of the buckets in `mask`: for each bucket, the best
/// candidate of a key vacated there (-1: none known; the first awake
/// claims the wake-up then).
fn choose(mask: u64, keys: &[String]) {
    let shared = BUCKETS_SHMEM.get();
    for b in 0..BUCKETS {
        if mask & (1 << b) != 0 {
            shared.chosen[b].store(-1, Ordering::SeqCst);
        }
    }
    for key in keys {
        if let Some(procno) = candidates::best(key) {
            shared.chosen[bucket(key)].store(procno, Ordering::SeqCst);
        }
    }
}

/// A candidate stopped waiting for `key` (it won, gave up or failed):
/// wake the others of its bucket now, so those it outranked look again.
pub fn candidate_left(key: &str) {
    if preload::preloaded() {
        let b = bucket(key);
        BUCKETS_SHMEM.get().chosen[b].store(-1, Ordering::SeqCst);
        broadcast(1 << b);
    }
}

/// Wakes every waiter of the buckets in `mask`.
fn broadcast(mask: u64) {
    for b in 0..BUCKETS {
        if mask & (1 << b) != 0 {
            BUCKETS_SHMEM.get().woken[b].fetch_add(1, Ordering::SeqCst);
            unsafe { pg_sys::ConditionVariableBroadcast(cv(b)) };
        }
    }
}

/// From the subtransaction callback: a savepoint (or a PL/pgSQL exception
/// block) rolled back, maybe undoing a new tenure: wake the waiters of
/// every tenure this transaction started so far (spare wake-ups only cost
/// the woken a look). The mask stays for the transaction's own end.
pub fn subtransaction_aborted() {
    let mask = AT_ABORT.get();
    let level = unsafe { pg_sys::GetCurrentTransactionNestLevel() };
    match LOOK.get() {
        // A look of le_acquire rolled back (it took nothing): it undid no
        // tenure started before it, so only what it started itself, if
        // anything, is vacant again. (Broadcasting those older ones would
        // wake this very waiter, and theirs, at every look.)
        Some((look_level, before)) if level > look_level => broadcast(mask & !before),
        _ => {
            LOOK.set(None);
            broadcast(mask);
        }
    }
}

/// le_acquire starts a look at the lease (in subtransactions of its own).
pub fn look_begins() {
    let level = unsafe { pg_sys::GetCurrentTransactionNestLevel() };
    LOOK.set(Some((level, AT_ABORT.get())));
}

/// The look is over.
pub fn look_ends() {
    LOOK.set(None);
}

/// From the transaction callback: a prepared transaction commits or rolls
/// back elsewhere, later; its waiters wake by their own timeouts.
pub fn transaction_prepared() {
    AT_COMMIT.set(0);
    AT_ABORT.set(0);
    KEYS_AT_COMMIT.with(|k| k.borrow_mut().clear());
    LOOK.set(None);
}

/// How many times `key`'s bucket was broadcast so far: a waiter reads it
/// before it looks at the lease and compares after registering, so a
/// release that commits in between is never missed.
pub fn broadcasts(key: &str) -> u64 {
    if preload::preloaded() {
        BUCKETS_SHMEM.get().woken[bucket(key)].load(Ordering::SeqCst)
    } else {
        0
    }
}

/// Registers this backend as a waiter for `key`, before it sleeps.
pub fn prepare(key: &str) {
    if preload::preloaded() {
        unsafe { pg_sys::ConditionVariablePrepareToSleep(cv(bucket(key))) };
    }
}

/// Sleeps until woken for `key`'s bucket or until `until_ms` milliseconds
/// have passed, whichever is first. Raises on cancel, termination or
/// statement_timeout (PostgreSQL checks for interrupts in the sleep).
///
/// A release wakes every waiter of its key (and of keys sharing the
/// bucket), but only one can win. So that they do not all race for the row
/// at once (on a small machine that herd delays the winner), the candidate
/// the key serves first (`candidates.rs`: highest priority, then waiting
/// longest) looks at once, or, when none is known, the first one awake
/// claims the wake-up and does; the others look `SECOND_LOOK_MS` later
/// (sooner if woken again), by which time the lease is usually taken and
/// one read sends them back to sleep. Should that one not take it (it
/// failed, or the claimer waits for another key of the bucket), the lease
/// is taken a few milliseconds later, never missed.
pub fn sleep(key: &str, until_ms: i64) {
    let ms = until_ms.max(0);
    unsafe {
        if preload::preloaded() {
            let b = bucket(key);
            let started = std::time::Instant::now();
            let timed_out =
                pg_sys::ConditionVariableTimedSleep(cv(b), ms, pg_sys::PG_WAIT_EXTENSION);
            if timed_out {
                return;
            }
            let Some(later) = look_later(b) else {
                return;
            };
            let left = ms - started.elapsed().as_millis() as i64;
            if left > 0 {
                pg_sys::ConditionVariableTimedSleep(
                    cv(b),
                    left.min(later),
                    pg_sys::PG_WAIT_EXTENSION,
                );
            }
        } else {
            pg_sys::WaitLatch(
                pg_sys::MyLatch,
                (pg_sys::WL_LATCH_SET | pg_sys::WL_TIMEOUT | pg_sys::WL_EXIT_ON_PM_DEATH) as i32,
                ms.min(UNPRELOADED_RECHECK_MS),
                pg_sys::PG_WAIT_EXTENSION,
            );
            pg_sys::ResetLatch(pg_sys::MyLatch);
            pg_sys::check_for_interrupts!();
        }
    }
}

/// After a broadcast of bucket `b`: None to look at once (this backend
/// is the candidate chosen for it, or none is and it claims it first),
/// else how long to wait before its own look.
fn look_later(b: usize) -> Option<i64> {
    let chosen = &BUCKETS_SHMEM.get().chosen[b];
    let me = databases::my_procno();
    match chosen.load(Ordering::SeqCst) {
        -1 if claim(b) => None,
        -1 => Some(SECOND_LOOK_MS),
        procno if procno == me => {
            let _ = chosen.compare_exchange(me, -1, Ordering::SeqCst, Ordering::SeqCst);
            None
        }
        _ => Some(CHOSEN_OTHER_MS),
    }
}

/// Whether this backend is the first to claim the latest broadcast of
/// bucket `b`.
fn claim(b: usize) -> bool {
    let shared = BUCKETS_SHMEM.get();
    let woken = shared.woken[b].load(Ordering::SeqCst);
    let claimed = shared.claimed[b].load(Ordering::SeqCst);
    claimed < woken
        && shared.claimed[b]
            .compare_exchange(claimed, woken, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
}

/// Stops waiting (PostgreSQL also does this when the transaction aborts).
pub fn done() {
    if preload::preloaded() {
        // Returns whether we were woken on 16 and later; nothing to pass on
        // after a broadcast.
        #[allow(clippy::let_unit_value)]
        let _ = unsafe { pg_sys::ConditionVariableCancelSleep() };
    }
}

#[cfg(test)]
mod unit {
    #[test]
    fn buckets_are_stable_and_in_range() {
        use super::bucket_of;
        assert_eq!(bucket_of(5, "a"), bucket_of(5, "a"));
        assert!((0..1000).all(|i| bucket_of(5, &format!("k{i}")) < super::BUCKETS));
        let used: std::collections::HashSet<_> =
            (0..1000).map(|i| bucket_of(5, &format!("k{i}"))).collect();
        assert_eq!(used.len(), super::BUCKETS);
    }
}
