//! Candidates waiting in le_acquire (contract 18), in shared memory: who
//! waits for which key, with what priority, since when. While one waits,
//! no candidate of lower priority takes the key (`outranked`);
//! `le_candidates` lists them in the order they would be served; and a
//! release wakes the one that will win first (`best`, used by `waiters.rs`).
//!
//! One entry per waiting backend, under one LWLock: registering and leaving
//! take it exclusively (once per le_acquire that waits), lookups share it.
//! Only when preloaded; elsewhere nobody is registered and priorities are
//! refused (`input::priority`).

use crate::clock;
use crate::databases;
use crate::preload;
use pgrx::lwlock::PgLwLock;
use pgrx::pg_shmem_init;
use pgrx::prelude::*;
use pgrx::shmem::PGRXSharedMemory;
use std::cell::Cell;

/// Most candidates waiting at once on the server. Beyond, a waiting
/// le_acquire still waits, unlisted and unranked (docs/sql-reference.md).
pub const CAPACITY: usize = 512;
/// Longest key or id (as `input::MAX_NAME_BYTES`).
const NAME: usize = 255;

#[derive(Clone, Copy)]
#[repr(C)]
struct Entry {
    used: bool,
    procno: i32,
    database: u32,
    priority: i32,
    since: i64,
    key_len: u16,
    id_len: u16,
    key: [u8; NAME],
    id: [u8; NAME],
}

impl Entry {
    const EMPTY: Entry = Entry {
        used: false,
        procno: -1,
        database: 0,
        priority: 0,
        since: 0,
        key_len: 0,
        id_len: 0,
        key: [0; NAME],
        id: [0; NAME],
    };

    fn waits_for(&self, database: u32, key: &str) -> bool {
        self.used
            && self.database == database
            && &self.key[..self.key_len as usize] == key.as_bytes()
    }

    /// The serving order, greatest first: higher priority, then waiting longer.
    fn rank(&self) -> (i32, std::cmp::Reverse<i64>) {
        (self.priority, std::cmp::Reverse(self.since))
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

thread_local! {
    /// This backend's entry while it waits.
    static MINE: Cell<Option<usize>> = const { Cell::new(None) };
    /// Whether the exit callback that frees it is registered.
    static EXIT_HOOKED: Cell<bool> = const { Cell::new(false) };
}

/// Called from `_PG_init` while preloading.
pub fn init() {
    pg_shmem_init!(REGISTRY);
}

fn database() -> u32 {
    unsafe { pg_sys::MyDatabaseId }.to_u32()
}

/// Enters this backend as a candidate for `key`; false when not preloaded
/// or the registry is full (the caller then waits unranked).
pub fn register(key: &str, id: &str, priority: i32, since: i64) -> bool {
    if !preload::preloaded() {
        return false;
    }
    leave();
    if !EXIT_HOOKED.replace(true) {
        // A backend that dies mid-wait (terminated) leaves no entry behind.
        unsafe { pg_sys::before_shmem_exit(Some(on_exit), pg_sys::Datum::from(0)) };
    }
    let mut entry = Entry {
        used: true,
        procno: databases::my_procno(),
        database: database(),
        priority,
        since,
        key_len: key.len() as u16,
        id_len: id.len() as u16,
        ..Entry::EMPTY
    };
    entry.key[..key.len()].copy_from_slice(key.as_bytes());
    entry.id[..id.len()].copy_from_slice(id.as_bytes());
    let mut registry = REGISTRY.exclusive();
    let Some(free) = registry.entries.iter().position(|e| !e.used) else {
        return false;
    };
    registry.entries[free] = entry;
    MINE.set(Some(free));
    true
}

/// Leaves the registry, if this backend is in it.
pub fn leave() {
    if let Some(i) = MINE.take() {
        REGISTRY.exclusive().entries[i] = Entry::EMPTY;
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn on_exit(_code: i32, _arg: pg_sys::Datum) {
    leave();
}

/// How long an outranked candidate sleeps at most before it looks again:
/// the candidate above it wakes it when it stops waiting without the
/// lease; this bounds the wait should it die instead (a terminated backend
/// leaves the registry on its way out, but wakes nobody).
const OUTRANKED_RECHECK_US: i64 = 1_000_000;

/// Until when an outranked candidate may sleep (server clock).
pub fn outranked_until() -> i64 {
    clock::now().saturating_add(OUTRANKED_RECHECK_US)
}

/// Whether a candidate of higher priority than `priority` waits for `key`
/// (this backend's own entry aside).
pub fn outranked(key: &str, priority: i32) -> bool {
    if !preload::preloaded() {
        return false;
    }
    let (database, mine) = (database(), MINE.get());
    let registry = REGISTRY.share();
    registry
        .entries
        .iter()
        .enumerate()
        .any(|(i, e)| Some(i) != mine && e.waits_for(database, key) && e.priority > priority)
}

/// The PGPROC number of the candidate for `key` that would be served first.
pub fn best(key: &str) -> Option<i32> {
    if !preload::preloaded() {
        return None;
    }
    let database = database();
    let registry = REGISTRY.share();
    registry
        .entries
        .iter()
        .filter(|e| e.waits_for(database, key))
        .max_by_key(|e| e.rank())
        .map(|e| e.procno)
}

/// le_candidates: (id, priority, waiting since) of each candidate waiting
/// for `key` now, in the order they would be served.
pub fn list(key: &str) -> Vec<(String, i32, i64)> {
    if !preload::preloaded() {
        return Vec::new();
    }
    let database = database();
    let mut found: Vec<Entry> = {
        let registry = REGISTRY.share();
        registry
            .entries
            .iter()
            .filter(|e| e.waits_for(database, key))
            .copied()
            .collect()
    };
    found.sort_by_key(|e| std::cmp::Reverse(e.rank()));
    found
        .iter()
        .map(|e| {
            (
                String::from_utf8_lossy(&e.id[..e.id_len as usize]).into_owned(),
                e.priority,
                e.since,
            )
        })
        .collect()
}
