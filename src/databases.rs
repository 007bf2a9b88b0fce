//! Shared memory per database (contracts 12 and 14): the worker serving it
//! (where to wake it, when it plans to wake), what the launcher must know
//! about it, and its counters since server start.
//!
//! A fixed table of `SLOTS` slots, each claimed by a database on first
//! use (a backend counting a call, or the launcher starting a worker) and
//! freed by the launcher once the database is gone. Every field is an
//! atomic: no lock is held anywhere on the path of a call.
//!
//! Only present when the library is preloaded.

use pgrx::prelude::*;
use pgrx::shmem::AssertPGRXSharedMemory;
use pgrx::{pg_shmem_init, PgAtomic};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, AtomicU32, AtomicU64, Ordering};

/// Databases that can have a slot at once.
pub const SLOTS: usize = 512;

/// "Wake me for any expiry": the worker is checking right now.
pub const CHECKING: i64 = i64::MAX;

/// What `leaderlock_database_stats` counts (contract 14), in its order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counter {
    /// A lease taken or extended by le_try_acquire / le_acquire.
    Acquired = 0,
    /// A successful le_renew.
    Renewed,
    /// A le_try_acquire / le_acquire / le_renew that returned false.
    Refused,
    /// A lease vacated by le_release or le_force_release.
    Released,
    /// A tenure that ended without a release: vacated by a worker (lapsed,
    /// or its session ended), or taken over once lapsed.
    Expired,
}

pub const COUNTERS: usize = 5;

pub struct Slot {
    /// The database's OID; 0 while the slot is free.
    database: AtomicU32,
    /// The serving worker's PGPROC number, -1 when none is running.
    pub worker_procno: AtomicI32,
    /// When the worker plans to wake (`CHECKING` while it checks).
    pub planned_wake: AtomicI64,
    /// Set at the commit of CREATE EXTENSION leaderlock: start a worker.
    pub wanted: AtomicBool,
    /// Set by a worker that found the extension absent and exited.
    pub absent: AtomicBool,
    /// Until then no worker runs here: DROP DATABASE (or another command
    /// that needs the database to itself) is under way.
    pub paused_until: AtomicI64,
    counters: [AtomicU64; COUNTERS],
    /// When the slot was claimed: the counters count since then.
    since: AtomicI64,
}

struct Table {
    slots: [Slot; SLOTS],
    /// The launcher's PGPROC number, -1 when it is not running.
    launcher_procno: AtomicI32,
}

static TABLE: PgAtomic<AssertPGRXSharedMemory<Table>> =
    unsafe { PgAtomic::new(c"leaderlock databases") };

/// Set in the postmaster when preloading; inherited by every backend.
static ENABLED: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// This backend's slot (a backend never changes database).
    static MINE: Cell<Option<usize>> = const { Cell::new(None) };
}

/// Called from `_PG_init` while preloading.
pub fn init() {
    pg_shmem_init!(
        TABLE = unsafe {
            AssertPGRXSharedMemory::new(Table {
                slots: std::array::from_fn(|_| Slot {
                    database: AtomicU32::new(0),
                    worker_procno: AtomicI32::new(-1),
                    planned_wake: AtomicI64::new(CHECKING),
                    wanted: AtomicBool::new(false),
                    absent: AtomicBool::new(false),
                    paused_until: AtomicI64::new(0),
                    counters: std::array::from_fn(|_| AtomicU64::new(0)),
                    since: AtomicI64::new(0),
                }),
                launcher_procno: AtomicI32::new(-1),
            })
        }
    );
    ENABLED.store(true, Ordering::SeqCst);
}

pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

fn table() -> &'static Table {
    TABLE.get()
}

/// The slot of `database`, if it has one.
pub fn find(database: u32) -> Option<&'static Slot> {
    if !enabled() || database == 0 {
        return None;
    }
    table()
        .slots
        .iter()
        .find(|s| s.database.load(Ordering::SeqCst) == database)
}

/// The slot of `database`, claimed if it has none; None when the table is
/// full (that database then has no worker and no counters).
pub fn claim(database: u32) -> Option<&'static Slot> {
    if !enabled() || database == 0 {
        return None;
    }
    loop {
        if let Some(slot) = find(database) {
            return Some(slot);
        }
        // Every claimer takes the lowest free slot, so two claimers of the
        // same database meet there: one wins, the other finds it above.
        let free = table()
            .slots
            .iter()
            .find(|s| s.database.load(Ordering::SeqCst) == 0)?;
        if free
            .database
            .compare_exchange(0, database, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            free.since
                .store(unsafe { pg_sys::GetCurrentTimestamp() }, Ordering::SeqCst);
        }
    }
}

/// This backend's database's slot, claimed on first use.
pub fn mine() -> Option<&'static Slot> {
    if let Some(i) = MINE.get() {
        return Some(&table().slots[i]);
    }
    let slot = claim(unsafe { pg_sys::MyDatabaseId }.to_u32())?;
    let index = table()
        .slots
        .iter()
        .position(|s| std::ptr::eq(s, slot))
        .expect("a slot of the table");
    MINE.set(Some(index));
    Some(slot)
}

/// Launcher: every claimed slot, with its database.
pub fn claimed() -> impl Iterator<Item = (u32, &'static Slot)> {
    let slots: &'static [Slot] = if enabled() { &table().slots } else { &[] };
    slots
        .iter()
        .map(|s| (s.database.load(Ordering::SeqCst), s))
        .filter(|(d, _)| *d != 0)
}

impl Slot {
    pub fn since(&self) -> i64 {
        self.since.load(Ordering::SeqCst)
    }

    /// Launcher: the database is gone; nobody can be in it any more.
    pub fn free(&self) {
        for c in &self.counters {
            c.store(0, Ordering::SeqCst);
        }
        self.wanted.store(false, Ordering::SeqCst);
        self.absent.store(false, Ordering::SeqCst);
        self.paused_until.store(0, Ordering::SeqCst);
        self.planned_wake.store(CHECKING, Ordering::SeqCst);
        self.database.store(0, Ordering::SeqCst);
    }

    pub fn counters(&self) -> [u64; COUNTERS] {
        std::array::from_fn(|i| self.counters[i].load(Ordering::Relaxed))
    }

    /// Sets the latch of the worker serving this database, if any.
    pub fn wake_worker(&self) {
        set_latch(self.worker_procno.load(Ordering::SeqCst));
    }

    /// Keeps workers out of this database for `ms` from now.
    pub fn pause_for(&self, ms: i64) {
        let now = unsafe { pg_sys::GetCurrentTimestamp() };
        self.paused_until.store(now + ms * 1000, Ordering::SeqCst);
    }

    pub fn paused(&self) -> bool {
        self.paused_until.load(Ordering::SeqCst) > unsafe { pg_sys::GetCurrentTimestamp() }
    }
}

/// The name of this backend's database.
pub fn current_name() -> String {
    name_of(unsafe { pg_sys::MyDatabaseId }).unwrap_or_default()
}

/// The name of database `oid`, None when there is none (a catalog lookup:
/// inside a transaction).
pub fn name_of(oid: pg_sys::Oid) -> Option<String> {
    unsafe {
        let name = pg_sys::get_database_name(oid);
        (!name.is_null()).then(|| {
            std::ffi::CStr::from_ptr(name)
                .to_string_lossy()
                .into_owned()
        })
    }
}

/// Adds one to this database's `counter` (calls, whether or not their
/// transaction commits). Nothing when not preloaded.
pub fn count(counter: Counter) {
    if let Some(slot) = mine() {
        slot.counters[counter as usize].fetch_add(1, Ordering::Relaxed);
    }
}

/// Sets the latch of the process with PGPROC number `procno` (-1: none).
/// A stale number only costs some other process a spurious wake-up, which
/// latches tolerate by design.
pub fn set_latch(procno: i32) {
    if procno >= 0 {
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
pub fn my_procno() -> i32 {
    unsafe {
        let index = pg_sys::MyProc.offset_from((*pg_sys::ProcGlobal).allProcs);
        i32::try_from(index).expect("a PGPROC index fits in an int")
    }
}

/// Launcher side: announce where to wake it; cleared when it exits.
pub fn register_launcher() {
    table().launcher_procno.store(my_procno(), Ordering::SeqCst);
    unsafe { pg_sys::on_shmem_exit(Some(unregister_launcher), pg_sys::Datum::from(0)) };
}

#[pg_guard]
unsafe extern "C-unwind" fn unregister_launcher(_code: i32, _arg: pg_sys::Datum) {
    let _ = table().launcher_procno.compare_exchange(
        my_procno(),
        -1,
        Ordering::SeqCst,
        Ordering::SeqCst,
    );
}

pub fn wake_launcher() {
    if enabled() {
        set_latch(table().launcher_procno.load(Ordering::SeqCst));
    }
}
