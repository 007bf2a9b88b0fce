//! Blocking acquire (contract 9): where le_acquire waits, and what wakes it.
//!
//! A waiting le_acquire is a candidate (`candidates.rs`) and sleeps on its
//! latch. A transaction that vacates a lease (release, expiry, end of a
//! session-bound lease) knocks, when it commits, on the one candidate its
//! key serves first (one per lease or tenure vacated), so waiters wake
//! exactly when the vacant row is visible to a new snapshot, and only the
//! one that will win wakes: on a small machine, a herd of losers looking
//! delays the winner. A candidate that stops waiting without the lease
//! knocks on the others of its key.
//!
//! Shared memory also holds one PostgreSQL condition variable per bucket of
//! keys (a hash of the key picks the bucket), for what knocks cannot
//! reach: a transaction that started a tenure broadcasts its bucket when
//! it rolls back, since the lease is vacant again; and while some waiter
//! waits unranked (the registry was full), commits broadcast too. Sleeping
//! on latches costs no CPU, and PostgreSQL's interrupt handling (cancel,
//! termination, statement_timeout) works meanwhile.
//!
//! Only active when the library is preloaded; otherwise le_acquire looks
//! again every `UNPRELOADED_RECHECK_MS`.

use crate::base::preload;
use crate::shmem::candidates;
use pgrx::prelude::*;
use pgrx::shmem::AssertPGRXSharedMemory;
use pgrx::{pg_shmem_init, PgAtomic};
use std::cell::{Cell, RefCell, UnsafeCell};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// Buckets of keys. Waiters of keys that share a bucket wake together on
/// a broadcast and go back to sleep after one look at their own key.
const BUCKETS: usize = 64;

/// How often le_acquire looks again when there is no shared memory.
pub const UNPRELOADED_RECHECK_MS: i64 = 100;

/// After a broadcast, the waiter that claims it looks at once; the others
/// look this much later (see `sleep`).
const SECOND_LOOK_MS: i64 = 5;

struct Buckets {
    cvs: [UnsafeCell<pg_sys::ConditionVariable>; BUCKETS],
    /// Broadcasts so far, per bucket.
    woken: [AtomicU64; BUCKETS],
    /// The last broadcast a waiter claimed, per bucket (see `sleep`).
    claimed: [AtomicU64; BUCKETS],
}

static BUCKETS_SHMEM: PgAtomic<AssertPGRXSharedMemory<Buckets>> =
    unsafe { PgAtomic::new(c"leaderlock waiters") };

thread_local! {
    /// Buckets to broadcast when the current transaction commits, should
    /// a waiter wait unranked.
    static AT_COMMIT: Cell<u64> = const { Cell::new(0) };
    /// Buckets to broadcast when it rolls back.
    static AT_ABORT: Cell<u64> = const { Cell::new(0) };
    /// The keys vacated by this transaction, each as often as it vacated
    /// one of its leases or tenures: at commit, that many of its
    /// candidates are knocked on.
    static KEYS_AT_COMMIT: RefCell<HashMap<String, usize>> = RefCell::new(HashMap::new());
    /// Buckets of vacated keys beyond `KNOCKED_KEYS`: broadcast at commit.
    static UNKNOCKED: Cell<u64> = const { Cell::new(0) };
    /// Candidates this transaction handed a lease (`lease::hand_over`).
    /// Knocked on at commit.
    static GRANTS: RefCell<Vec<candidates::Grant>> = const { RefCell::new(Vec::new()) };
    /// While le_acquire looks (`look_begins`): its transaction nesting
    /// level and the buckets of tenures started before the look.
    static LOOK: Cell<Option<(i32, u64)>> = const { Cell::new(None) };
}

/// Most keys of one transaction whose candidates are knocked on at commit
/// (le_release_all may vacate thousands; the buckets of the rest are
/// broadcast).
const KNOCKED_KEYS: usize = 64;

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

/// A lease (or tenure) of `key` becomes vacant if this transaction commits.
pub fn wake_at_commit(key: &str) {
    if preload::preloaded() {
        let b = 1 << bucket(key);
        AT_COMMIT.set(AT_COMMIT.get() | b);
        KEYS_AT_COMMIT.with(|keys| {
            let mut keys = keys.borrow_mut();
            if let Some(n) = keys.get_mut(key) {
                *n += 1;
            } else if keys.len() < KNOCKED_KEYS {
                keys.insert(key.to_string(), 1);
            } else {
                UNKNOCKED.set(UNKNOCKED.get() | b);
            }
        });
    }
}

/// This transaction vacated `key` and hands its lease to `grant`: at
/// commit, that candidate is knocked on, not the one the vacated lease
/// would have woken.
pub fn granted_at_commit(key: &str, grant: candidates::Grant) {
    KEYS_AT_COMMIT.with(|keys| {
        let mut keys = keys.borrow_mut();
        if let Some(n) = keys.get_mut(key) {
            *n -= 1;
            if *n == 0 {
                keys.remove(key);
            }
        }
    });
    GRANTS.with(|g| g.borrow_mut().push(grant));
}

/// The tenure of the last `granted_at_commit` started, as `term`.
pub fn grant_started(term: i64) {
    GRANTS.with(|g| {
        if let Some(grant) = g.borrow_mut().last_mut() {
            grant.term = term;
        }
    });
}

/// The lease of `key` becomes vacant again if this transaction rolls back.
pub fn wake_at_abort(key: &str) {
    if preload::preloaded() {
        AT_ABORT.set(AT_ABORT.get() | 1 << bucket(key));
    }
}

/// From the transaction callback (`worker_wakeup.rs`): the transaction
/// ended. (Its commit is visible to every new snapshot by then.)
pub fn transaction_ended(committed: bool) {
    LOOK.set(None);
    let commit = AT_COMMIT.replace(0);
    let abort = AT_ABORT.replace(0);
    let unknocked = UNKNOCKED.replace(0);
    let keys = KEYS_AT_COMMIT.with(|k| std::mem::take(&mut *k.borrow_mut()));
    let grants = GRANTS.with(|g| std::mem::take(&mut *g.borrow_mut()));
    for grant in &grants {
        candidates::grant_ended(grant, committed);
    }
    candidates::transaction_ended(committed);
    if !committed {
        broadcast(abort);
        return;
    }
    for (key, vacated) in &keys {
        candidates::knock_best(key, *vacated);
    }
    // Read after the commit: a waiter counted later looks after it too.
    broadcast(if candidates::unranked_waiting() {
        commit
    } else {
        unknocked
    });
}

/// A candidate stopped waiting for `key` without the lease (it gave up or
/// failed): the others of its key look again, those it outranked too.
pub fn candidate_left(key: &str) {
    if preload::preloaded() {
        candidates::knock_all(key);
        if candidates::unranked_waiting() {
            broadcast(1 << bucket(key));
        }
    }
}

/// A candidate took a slot of `key`, a key of many slots: the next one
/// looks, in case another slot is free.
pub fn slot_taken(key: &str) {
    if preload::preloaded() {
        candidates::knock_best(key, 1);
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
    UNKNOCKED.set(0);
    KEYS_AT_COMMIT.with(|k| k.borrow_mut().clear());
    // (A prepared transaction is a block: it hands nothing over.)
    for grant in GRANTS.with(|g| std::mem::take(&mut *g.borrow_mut())) {
        candidates::grant_ended(&grant, false);
    }
    candidates::transaction_ended(true);
    LOOK.set(None);
}

/// What wakes a waiter for a key, counted so far: its bucket's broadcasts
/// and the knocks on its own candidate entry. A waiter reads it before it
/// looks at the lease and compares after registering to sleep, so a
/// release that commits in between is never missed.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Wakes {
    broadcasts: u64,
    knocks: u64,
}

pub fn wakes(key: &str) -> Wakes {
    if preload::preloaded() {
        Wakes {
            broadcasts: BUCKETS_SHMEM.get().woken[bucket(key)].load(Ordering::SeqCst),
            knocks: candidates::knocks(),
        }
    } else {
        Wakes {
            broadcasts: 0,
            knocks: 0,
        }
    }
}

/// Registers this backend as a waiter for `key`'s bucket, before it sleeps.
pub fn prepare(key: &str) {
    if preload::preloaded() {
        unsafe { pg_sys::ConditionVariablePrepareToSleep(cv(bucket(key))) };
    }
}

/// Sleeps until `until_ms` milliseconds have passed or something wakes the
/// waiter for `key` since `seen`: a knock at once; a broadcast at once for
/// the first waiter awake, who claims it, and `SECOND_LOOK_MS` later for
/// the others (sooner if woken again), by which time the lease is usually
/// taken and one read sends them back to sleep. Raises on cancel,
/// termination or statement_timeout (PostgreSQL checks for interrupts
/// here).
pub fn sleep(key: &str, mut seen: Wakes, until_ms: i64) {
    let started = std::time::Instant::now();
    let mut until_ms = until_ms.max(0);
    if !preload::preloaded() {
        latch_wait(until_ms.min(UNPRELOADED_RECHECK_MS));
        return;
    }
    let b = bucket(key);
    loop {
        let now = wakes(key);
        if now.knocks != seen.knocks {
            return;
        }
        if now.broadcasts != seen.broadcasts {
            if claim(b) {
                return;
            }
            // Popped off the bucket's list by the broadcast: back on it,
            // so that the next one still wakes us.
            prepare(key);
            seen.broadcasts = now.broadcasts;
            until_ms = until_ms.min(started.elapsed().as_millis() as i64 + SECOND_LOOK_MS);
            continue;
        }
        let left = until_ms - started.elapsed().as_millis() as i64;
        if left <= 0 {
            return;
        }
        latch_wait(left);
    }
}

/// Waits on this backend's latch for up to `ms`, then checks for
/// interrupts; true when the latch was set (someone woke us), false on a
/// timeout.
pub fn latch_wait(ms: i64) -> bool {
    let rc = unsafe {
        pg_sys::WaitLatch(
            pg_sys::MyLatch,
            (pg_sys::WL_LATCH_SET | pg_sys::WL_TIMEOUT | pg_sys::WL_EXIT_ON_PM_DEATH) as i32,
            ms.max(0),
            pg_sys::PG_WAIT_EXTENSION,
        )
    };
    unsafe { pg_sys::ResetLatch(pg_sys::MyLatch) };
    pg_sys::check_for_interrupts!();
    rc & pg_sys::WL_LATCH_SET as i32 != 0
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
