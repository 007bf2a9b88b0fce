//! Candidates waiting in le_acquire (contract 18), in shared memory: who
//! waits for which key, with what priority, since when. While one waits,
//! no candidate of lower priority takes the key (`outranked`);
//! `le_candidates` lists them in the order they would be served; and a
//! release wakes the one that will win, and only that one (`knock_best`,
//! used by `waiters.rs`). The candidate knocked on has the key to itself
//! until its next look, for `RESERVED_US` at most: a caller of the same
//! priority that comes in meanwhile (the releaser campaigning again, a
//! le_try_acquire) would otherwise often take the lease first, and the
//! one knocked on, finding the row locked, would wait for nothing.
//!
//! A candidate that waits in an implicit transaction for a key of one slot,
//! with no value and no session binding, is grantable: a release that
//! finds it first in line hands it the lease in the releasing transaction
//! (`claim_grant`, used by `lease::hand_over`), so that the handover costs
//! one commit instead of two (docs/sql-reference.md, le_acquire). A tenure
//! handed over and never taken up goes to the worker (`handover.rs`): the
//! candidate that leaves without it says so, or the release does at its
//! commit if the candidate left first (its entry stays out of use until
//! then, so that the release's word reaches the right one).
//!
//! One entry per waiting backend, under one LWLock: registering and leaving
//! take it exclusively (once per le_acquire that waits), lookups share it.
//! Beside each entry, a count of knocks: bumped (and the backend's latch
//! set) to wake that candidate alone. A waiter beyond the registry's
//! capacity is counted as unranked, so that releases wake everyone then.
//! Only when preloaded; elsewhere nobody is registered and priorities are
//! refused (`input::priority`).

use crate::base::clock;
use crate::base::names::Name;
use crate::base::preload;
use crate::base::settings;
use crate::shmem::databases;
use crate::shmem::handover;
use pgrx::lwlock::PgLwLock;
use pgrx::prelude::*;
use pgrx::shmem::{AssertPGRXSharedMemory, PGRXSharedMemory};
use pgrx::{pg_shmem_init, PgAtomic};
use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64, Ordering};

/// Most candidates waiting at once on the server. Beyond, a waiting
/// le_acquire still waits, unlisted and unranked (docs/sql-reference.md).
pub const CAPACITY: usize = 512;

#[derive(Clone, Copy)]
#[repr(C)]
struct Entry {
    used: bool,
    procno: i32,
    database: u32,
    priority: i32,
    since: i64,
    /// The role that waits (`register`).
    role: u32,
    key: Name,
    id: Name,
    /// What a release needs to hand it the lease; None: it may not.
    grantable: Option<Grantable>,
}

impl Entry {
    const EMPTY: Entry = Entry {
        used: false,
        procno: -1,
        database: 0,
        priority: 0,
        since: 0,
        role: 0,
        key: Name::EMPTY,
        id: Name::EMPTY,
        grantable: None,
    };

    fn waits_for(&self, database: u32, key: &str) -> bool {
        self.used && self.database == database && self.key.as_bytes() == key.as_bytes()
    }

    /// The serving order, greatest first (`serving_rank`).
    fn rank(&self) -> (i32, std::cmp::Reverse<i64>) {
        leaderlock_protocol::serving_rank(self.priority, self.since)
    }
}

#[derive(Clone, Copy)]
#[repr(C)]
struct Registry {
    entries: [Entry; CAPACITY],
}

impl Default for Registry {
    fn default() -> Self {
        Registry {
            entries: [Entry::EMPTY; CAPACITY],
        }
    }
}

// SAFETY: plain data, no pointers; shared only under its LWLock.
unsafe impl PGRXSharedMemory for Registry {}

static REGISTRY: PgLwLock<Registry> = unsafe { PgLwLock::new(c"leaderlock candidates") };

struct Knocks {
    /// Per entry: knocks so far. Its waiter reads it before a look and
    /// compares after, as with a bucket's broadcasts, so a knock that comes
    /// in between is never missed.
    count: [AtomicU64; CAPACITY],
    /// Per entry: until when (server clock) the key is reserved for it, a
    /// knock's; 0 once it looked.
    reserved_until: [AtomicI64; CAPACITY],
    /// Per entry: the transaction (top-level id) of a release that handed
    /// this candidate the lease, committed or not; 0: none. Set under the
    /// shared lock, cleared under the exclusive one.
    granted_by: [AtomicU32; CAPACITY],
    /// Per entry: the role whose release handed it the lease. An entry the
    /// candidate left before that release ended stays out of use until
    /// then, counted against this role (`register`): a role's long
    /// statement of releases uses up its own share, not its candidates'.
    granted_by_role: [AtomicU32; CAPACITY],
    /// Per entry: the term handed over and its start (`acquired_at`, the
    /// release's clock), once that release committed; 0 before.
    granted_term: [AtomicI64; CAPACITY],
    granted_at: [AtomicI64; CAPACITY],
    /// Waiters that found the registry full: nobody can knock for them.
    unranked: AtomicU32,
}

/// How long a knocked candidate has its key to itself at most (it usually
/// looks within a millisecond; a frozen one delays the others this long).
const RESERVED_US: i64 = 100_000;

static KNOCKS: PgAtomic<AssertPGRXSharedMemory<Knocks>> =
    unsafe { PgAtomic::new(c"leaderlock knocks") };

thread_local! {
    /// This backend's entry while it waits.
    static MINE: Cell<Option<usize>> = const { Cell::new(None) };
    /// Whether this backend waits unranked (counted in `unranked`).
    static UNRANKED: Cell<bool> = const { Cell::new(false) };
    /// Whether the exit callback that frees it is registered.
    static EXIT_HOOKED: Cell<bool> = const { Cell::new(false) };
    /// The tenures handed over that this backend's le_acquire returned
    /// true for, in the current transaction (one statement may call it
    /// for several keys). Abandoned if the transaction rolls back.
    static TOOK: RefCell<Vec<handover::Abandoned>> = const { RefCell::new(Vec::new()) };
}

/// Called from `_PG_init` while preloading.
pub fn init() {
    pg_shmem_init!(REGISTRY);
    pg_shmem_init!(
        KNOCKS = unsafe {
            AssertPGRXSharedMemory::new(Knocks {
                count: std::array::from_fn(|_| AtomicU64::new(0)),
                reserved_until: std::array::from_fn(|_| AtomicI64::new(0)),
                granted_by: std::array::from_fn(|_| AtomicU32::new(0)),
                granted_by_role: std::array::from_fn(|_| AtomicU32::new(0)),
                granted_term: std::array::from_fn(|_| AtomicI64::new(0)),
                granted_at: std::array::from_fn(|_| AtomicI64::new(0)),
                unranked: AtomicU32::new(0),
            })
        }
    );
}

fn database() -> u32 {
    unsafe { pg_sys::MyDatabaseId }.to_u32()
}

/// What a release needs to hand a candidate the lease: the tenure it asked
/// for is `role`'s, for `ttl_us`, with no value and no session binding.
#[derive(Clone, Copy, Debug)]
pub struct Grantable {
    pub role: pg_sys::Oid,
    pub ttl_us: i64,
}

/// Enters this backend as a candidate for `key`, waiting as `role`; false
/// when not preloaded, the registry is full, or `role` (not a superuser)
/// holds `leaderlock.max_candidates_per_role` entries already (the caller
/// then waits unranked, and releases wake every waiter until it leaves).
pub fn register(
    key: &str,
    id: &str,
    role: pg_sys::Oid,
    priority: i32,
    since: i64,
    grantable: Option<Grantable>,
) -> bool {
    if !preload::preloaded() {
        return false;
    }
    leave(false);
    if !EXIT_HOOKED.replace(true) {
        // A backend that dies mid-wait (terminated) leaves no entry behind.
        unsafe { pg_sys::before_shmem_exit(Some(on_exit), pg_sys::Datum::from(0)) };
    }
    let (Some(key), Some(id)) = (Name::new(key.as_bytes()), Name::new(id.as_bytes())) else {
        return false;
    };
    let quota = if unsafe { pg_sys::superuser_arg(role) } {
        CAPACITY
    } else {
        usize::try_from(settings::MAX_CANDIDATES_PER_ROLE.get()).unwrap_or(CAPACITY)
    };
    let role = role.to_u32();
    let entry = Entry {
        used: true,
        procno: databases::my_procno(),
        database: database(),
        priority,
        since,
        role,
        key,
        id,
        grantable,
    };
    let mut registry = REGISTRY.exclusive();
    // Not one a release still hands a lease to (see `leave`).
    let knocks = KNOCKS.get();
    let pinned = |i: usize| knocks.granted_by[i].load(Ordering::SeqCst) != 0;
    let held = (0..CAPACITY)
        .filter(|&i| {
            let e = &registry.entries[i];
            if e.used {
                e.role == role
            } else {
                pinned(i) && knocks.granted_by_role[i].load(Ordering::SeqCst) == role
            }
        })
        .count();
    let free = (0..CAPACITY).find(|&i| !registry.entries[i].used && !pinned(i));
    let Some(free) = free.filter(|_| held < quota) else {
        drop(registry);
        UNRANKED.set(true);
        KNOCKS.get().unranked.fetch_add(1, Ordering::SeqCst);
        return false;
    };
    registry.entries[free] = entry;
    knocks.granted_term[free].store(0, Ordering::SeqCst);
    MINE.set(Some(free));
    true
}

/// Leaves the registry (or the unranked), if this backend is in it;
/// `took`: with the lease. Returns the key it waited for, ranked.
pub fn leave(took: bool) -> Option<String> {
    if UNRANKED.replace(false) {
        KNOCKS.get().unranked.fetch_sub(1, Ordering::SeqCst);
    }
    let i = MINE.take()?;
    let knocks = KNOCKS.get();
    knocks.reserved_until[i].store(0, Ordering::SeqCst);
    let mut registry = REGISTRY.exclusive();
    let e = registry.entries[i];
    registry.entries[i] = Entry::EMPTY;
    let handed = knocks.granted_by[i].load(Ordering::SeqCst) != 0;
    let term = knocks.granted_term[i].load(Ordering::SeqCst);
    let at = knocks.granted_at[i].load(Ordering::SeqCst);
    // Handed over and not taken, the release not committed yet: the entry
    // stays out of use, and the release tells the worker at its commit
    // (`grant_ended`).
    let release_tells = handed && !took && term == 0;
    if !release_tells {
        knocks.granted_by[i].store(0, Ordering::SeqCst);
    }
    drop(registry);
    if handed && !took && !release_tells {
        handover::abandoned(handover::Abandoned::new(e.key, e.id, term, at));
    }
    Some(e.key.text())
}

#[pg_guard]
unsafe extern "C-unwind" fn on_exit(_code: i32, _arg: pg_sys::Datum) {
    // Terminated while waiting: it may have been knocked for a release it
    // will never take, so the others of its key look instead.
    if let Some(key) = leave(false) {
        knock_all(&key);
    }
}

/// A lease handed over by a release (`lease::hand_over`): to whom.
#[derive(Clone)]
pub struct Grant {
    /// The candidate's entry and backend, to knock on at commit.
    pub index: usize,
    pub procno: i32,
    pub key: Name,
    pub id: Name,
    /// The tenure the candidate asked for.
    pub asked: Grantable,
    /// The release's transaction.
    pub xid: u32,
    /// The tenure: its start (the release's clock), and its term once
    /// started (0 before).
    pub at: i64,
    pub term: i64,
}

/// The candidate for `key` first in line, when it is grantable, marked as
/// handed the lease by transaction `xid` (the caller's, acting as `by`),
/// its tenure to start `at`. None when the first in line is not grantable,
/// or already handed it.
pub fn claim_grant(key: &str, xid: u32, by: pg_sys::Oid, at: i64) -> Option<Grant> {
    if !preload::preloaded() {
        return None;
    }
    let database = database();
    // Under the shared lock: no entry leaves (exclusive) while it is chosen
    // and marked.
    let registry = REGISTRY.share();
    let (index, e) = registry
        .entries
        .iter()
        .enumerate()
        .filter(|(_, e)| e.waits_for(database, key))
        .min_by_key(|(_, e)| std::cmp::Reverse(e.rank()))?;
    let asked = e.grantable?;
    let knocks = KNOCKS.get();
    knocks.granted_by[index]
        .compare_exchange(0, xid, Ordering::SeqCst, Ordering::SeqCst)
        .ok()?;
    knocks.granted_by_role[index].store(by.to_u32(), Ordering::SeqCst);
    Some(Grant {
        index,
        procno: e.procno,
        key: e.key,
        id: e.id,
        asked,
        xid,
        at,
        term: 0,
    })
}

/// The release that made `grant` ended. Committed (its tenure started):
/// the candidate learns its tenure and is knocked on, or, if it left
/// meanwhile, the worker is told. Rolled back (or it failed before the
/// tenure started): the candidate may be handed the lease again.
pub fn grant_ended(grant: &Grant, committed: bool) {
    let committed = committed && grant.term != 0;
    let knocks = KNOCKS.get();
    let i = grant.index;
    let registry = REGISTRY.exclusive();
    if knocks.granted_by[i].load(Ordering::SeqCst) != grant.xid {
        return;
    }
    let waiting = registry.entries[i].used;
    if committed && waiting {
        knocks.granted_at[i].store(grant.at, Ordering::SeqCst);
        knocks.granted_term[i].store(grant.term, Ordering::SeqCst);
        drop(registry);
        knock(i, grant.procno);
        return;
    }
    knocks.granted_by[i].store(0, Ordering::SeqCst);
    drop(registry);
    if committed {
        handover::abandoned(handover::Abandoned::new(
            grant.key, grant.id, grant.term, grant.at,
        ));
    }
}

/// The tenure a committed release handed this waiting backend: (term,
/// start). None when none was, or that release has not committed.
pub fn granted() -> Option<(i64, i64)> {
    let i = MINE.get().filter(|_| preload::preloaded())?;
    let knocks = KNOCKS.get();
    let term = knocks.granted_term[i].load(Ordering::SeqCst);
    let handed = knocks.granted_by[i].load(Ordering::SeqCst) != 0;
    (handed && term != 0).then(|| (term, knocks.granted_at[i].load(Ordering::SeqCst)))
}

/// This backend's le_acquire returns true for the tenure handed to `id`
/// (`granted`): should its transaction roll back, that tenure is
/// abandoned.
pub fn took(key: &str, id: &str, (term, at): (i64, i64)) {
    if let (Some(key), Some(id)) = (Name::new(key.as_bytes()), Name::new(id.as_bytes())) {
        TOOK.with(|t| {
            t.borrow_mut()
                .push(handover::Abandoned::new(key, id, term, at))
        });
    }
}

/// This backend's transaction ended (`waiters::transaction_ended`; a
/// prepared one counts as committed: it can hold no hand-over).
pub fn transaction_ended(committed: bool) {
    for a in TOOK.with(|t| std::mem::take(&mut *t.borrow_mut())) {
        if !committed {
            handover::abandoned(a);
        }
    }
}

/// Whether some waiter waits unranked (the registry was full): nobody
/// can knock for it, so vacating a lease must wake its whole bucket.
pub fn unranked_waiting() -> bool {
    preload::preloaded() && KNOCKS.get().unranked.load(Ordering::SeqCst) > 0
}

/// Knocks on this backend's entry so far (0 when it has none).
pub fn knocks() -> u64 {
    match MINE.get() {
        Some(i) if preload::preloaded() => KNOCKS.get().count[i].load(Ordering::SeqCst),
        _ => 0,
    }
}

/// Wakes the candidate of entry `i`, whose backend is `procno`. (Should
/// the entry change hands meanwhile, its new waiter looks once for
/// nothing.)
fn knock(i: usize, procno: i32) {
    let knocks = KNOCKS.get();
    knocks.reserved_until[i].store(clock::now().saturating_add(RESERVED_US), Ordering::SeqCst);
    knocks.count[i].fetch_add(1, Ordering::SeqCst);
    databases::set_latch(procno);
}

/// Wakes the `n` candidates for `key` that would be served first (a
/// commit vacated `n` of its leases or tenures).
pub fn knock_best(key: &str, n: usize) {
    for (i, e) in in_serving_order(key).into_iter().take(n) {
        knock(i, e.procno);
    }
}

/// Wakes every candidate for `key`: one stopped waiting without the
/// lease, so those it outranked, or any of them, may take it now.
pub fn knock_all(key: &str) {
    for (i, e) in in_serving_order(key) {
        knock(i, e.procno);
    }
}

/// The candidates for `key`, with their entries' indexes, in the order
/// they would be served.
fn in_serving_order(key: &str) -> Vec<(usize, Entry)> {
    if !preload::preloaded() {
        return Vec::new();
    }
    let database = database();
    let mut found: Vec<(usize, Entry)> = {
        let registry = REGISTRY.share();
        registry
            .entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e.waits_for(database, key))
            .map(|(i, e)| (i, *e))
            .collect()
    };
    found.sort_by_key(|(_, e)| std::cmp::Reverse(e.rank()));
    found
}

/// How long an outranked candidate sleeps at most before it looks again:
/// the candidate above it wakes it when it stops waiting without the
/// lease, or dies (`on_exit`); this bounds the wait should that wake-up be
/// missed (a waiter beyond the registry, whom nobody knocks for).
const OUTRANKED_RECHECK_US: i64 = 1_000_000;

/// Whether another candidate goes before a caller of `priority` for
/// `key` (this backend's own entry aside): one of higher priority waits,
/// or one of the same or higher priority was knocked on and has not
/// looked yet (unless this backend was knocked on too). If so, until when
/// the caller may sleep (server clock).
pub fn outranked(key: &str, priority: i32) -> Option<i64> {
    if !preload::preloaded() {
        return None;
    }
    let (database, mine, now) = (database(), MINE.get(), clock::now());
    let reserved = |i: usize| KNOCKS.get().reserved_until[i].load(Ordering::SeqCst);
    let knocked_too = mine.is_some_and(|i| reserved(i) > now);
    let registry = REGISTRY.share();
    let mut until = None;
    for (i, e) in registry.entries.iter().enumerate() {
        if Some(i) == mine || !e.waits_for(database, key) || e.priority < priority {
            continue;
        }
        if e.priority > priority {
            return Some(now.saturating_add(OUTRANKED_RECHECK_US));
        }
        let r = reserved(i);
        if r > now && !knocked_too {
            until = until.max(Some(r));
        }
    }
    until
}

/// This backend, a candidate, looked at its key since a knock (read
/// before the look as `reserved`): the key is no longer reserved for it.
/// (A knock during the look reserves it again, for the next look.)
pub fn looked(reserved: i64) {
    if let Some(i) = MINE.get() {
        let _ = KNOCKS.get().reserved_until[i].compare_exchange(
            reserved,
            0,
            Ordering::SeqCst,
            Ordering::SeqCst,
        );
    }
}

/// Until when the key is reserved for this backend (0: it is not).
pub fn reserved() -> i64 {
    match MINE.get() {
        Some(i) if preload::preloaded() => KNOCKS.get().reserved_until[i].load(Ordering::SeqCst),
        _ => 0,
    }
}

/// le_candidates: (id, priority, waiting since) of each candidate waiting
/// for `key` now, in the order they would be served.
pub fn list(key: &str) -> Vec<(String, i32, i64)> {
    in_serving_order(key)
        .iter()
        .map(|(_, e)| (e.id.text(), e.priority, e.since))
        .collect()
}
