//! Shared memory per database (contracts 12 and 14): the worker serving it
//! (where to wake it, when it plans to wake), what the launcher must know
//! about it, and its counters since server start.
//!
//! A table of `leaderlock.max_databases` slots (at most `SLOTS`), each
//! claimed by a database where the
//! extension is installed, on first use (a call counted, a worker that
//! found the extension, a CREATE EXTENSION committing) and freed by the
//! launcher once the database is gone. A database without the extension
//! never takes one, so no role that may only create databases can use
//! them up. Every field is an
//! atomic: no lock is held anywhere on the path of a call.
//!
//! Only present when the library is preloaded.

use crate::base::clock;
use crate::base::preload;
use crate::base::settings;
use pgrx::prelude::*;
use pgrx::shmem::AssertPGRXSharedMemory;
use pgrx::{pg_shmem_init, PgAtomic};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, AtomicU32, AtomicU64, Ordering};

/// Most databases that can have a slot at once: the ceiling of
/// `leaderlock.max_databases`, which sets how many do.
pub const SLOTS: usize = settings::MAX_DATABASES_LIMIT as usize;

/// Commands under way on databases without a slot (see `keep_out`) that
/// can be remembered at once; how many of them one role (not a superuser)
/// may have, so no role can take them all from the others; and how many
/// only superusers' commands take (a role that may act as many roles
/// still leaves them those).
const UNSLOTTED: usize = 32;
const UNSLOTTED_PER_ROLE: usize = 4;
const UNSLOTTED_SUPERUSERS: usize = 8;

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
    /// When a caller last woke the worker on request (`wake_worker_asked`).
    asked_wake_at: AtomicI64,
    /// Set at the commit of CREATE EXTENSION leaderlock: start a worker.
    pub wanted: AtomicBool,
    /// Set by a worker that found the extension absent and exited.
    pub absent: AtomicBool,
    /// Until then no worker runs here (the launcher's short pause of a
    /// database made a template or closed to connections).
    paused_until: AtomicI64,
    /// Commands under way that need the database to themselves (DROP
    /// DATABASE and the like), and until when they may keep workers out
    /// (bounds a count left behind by a backend that died mid-command).
    commands: AtomicI32,
    commands_until: AtomicI64,
    /// Set by a worker that left on request (a pause, or no longer
    /// included): the launcher starts the next one without backing off.
    pub stepped_aside: AtomicBool,
    /// Contract 23: a committed transition waits for a position; the
    /// commit that set it woke the worker (`worker_wakeup.rs`).
    pub history_pending: AtomicBool,
    /// Set with every wake-up but the history's: the worker checks again
    /// (one for the history alone only notes it, see `worker.rs`).
    check_wanted: AtomicBool,
    counters: [AtomicU64; COUNTERS],
    /// When the slot was claimed: the counters count since then.
    since: AtomicI64,
}

struct Table {
    slots: [Slot; SLOTS],
    /// Held (a spinning flag: a scan of the table at most) while a slot is
    /// claimed or freed, so no database ever gets two.
    claiming: AtomicBool,
    /// The launcher's PGPROC number, -1 when it is not running.
    launcher_procno: AtomicI32,
    /// Commands that need a database without a slot to themselves, each
    /// the database's OID (high half) and until when, in seconds of the
    /// lease clock (low half): one word, so no reader sees half of one.
    /// 0 when free.
    unslotted: [AtomicU64; UNSLOTTED],
    /// Each entry's role (0: a superuser's), written with the entry under
    /// the claim lock.
    unslotted_role: [AtomicU32; UNSLOTTED],
    /// How many times the launcher has read the settings again (a reload).
    reloads: AtomicU32,
}

static TABLE: PgAtomic<AssertPGRXSharedMemory<Table>> =
    unsafe { PgAtomic::new(c"leaderlock databases") };

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
                    asked_wake_at: AtomicI64::new(0),
                    wanted: AtomicBool::new(false),
                    absent: AtomicBool::new(false),
                    paused_until: AtomicI64::new(0),
                    commands: AtomicI32::new(0),
                    commands_until: AtomicI64::new(0),
                    stepped_aside: AtomicBool::new(false),
                    history_pending: AtomicBool::new(false),
                    check_wanted: AtomicBool::new(false),
                    counters: std::array::from_fn(|_| AtomicU64::new(0)),
                    since: AtomicI64::new(0),
                }),
                claiming: AtomicBool::new(false),
                launcher_procno: AtomicI32::new(-1),
                unslotted: std::array::from_fn(|_| AtomicU64::new(0)),
                unslotted_role: std::array::from_fn(|_| AtomicU32::new(0)),
                reloads: AtomicU32::new(0),
            })
        }
    );
}

pub fn enabled() -> bool {
    preload::preloaded()
}

fn table() -> &'static Table {
    TABLE.get()
}

/// The index of the slot holding `database`.
fn index_of(database: u32) -> Option<usize> {
    table()
        .slots
        .iter()
        .position(|s| s.database.load(Ordering::SeqCst) == database)
}

/// The slot of `database`, if it has one.
pub fn find(database: u32) -> Option<&'static Slot> {
    if !enabled() || database == 0 {
        return None;
    }
    index_of(database).map(|i| &table().slots[i])
}

/// The index of the slot of `database`, claimed if it has none; None when
/// the table is full (that database then has no worker and no counters).
fn claim_index(database: u32) -> Option<usize> {
    if !enabled() || database == 0 {
        return None;
    }
    if let Some(i) = index_of(database) {
        return Some(i);
    }
    let _guard = ClaimLock::take();
    // Again under the lock: another process may have claimed it meanwhile.
    if let Some(i) = index_of(database) {
        return Some(i);
    }
    // A free slot among the first leaderlock.max_databases.
    let usable = usize::try_from(settings::MAX_DATABASES.get()).map_or(0, |n| n.min(SLOTS));
    let i = table().slots[..usable]
        .iter()
        .position(|s| s.database.load(Ordering::SeqCst) == 0)?;
    let free = &table().slots[i];
    free.since.store(clock::now(), Ordering::SeqCst);
    free.database.store(database, Ordering::SeqCst);
    Some(i)
}

/// The table's claim lock: a spinning flag, held for a scan of the table
/// at most and never across an error (nothing in it can raise one).
struct ClaimLock;

impl ClaimLock {
    fn take() -> ClaimLock {
        while table()
            .claiming
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            std::hint::spin_loop();
        }
        ClaimLock
    }
}

impl Drop for ClaimLock {
    fn drop(&mut self) {
        table().claiming.store(false, Ordering::Release);
    }
}

/// This backend's database's slot, claimed on first use.
pub fn mine() -> Option<&'static Slot> {
    let index = match MINE.get() {
        Some(i) => i,
        None => {
            let i = claim_index(unsafe { pg_sys::MyDatabaseId }.to_u32())?;
            MINE.set(Some(i));
            i
        }
    };
    Some(&table().slots[index])
}

/// Whether a worker serves the current database now (contract 12).
pub fn worker_serves_this_database() -> bool {
    find(unsafe { pg_sys::MyDatabaseId }.to_u32())
        .is_some_and(|s| s.worker_procno.load(Ordering::SeqCst) >= 0)
}

/// Launcher: it read the settings again. A worker started just before may
/// have missed that reload: PostgreSQL drops a SIGHUP that comes before a
/// background worker sets its handlers. So every worker is woken, and
/// reads them again when this count moved since its start or its last
/// look (`worker.rs`).
pub fn settings_reloaded() {
    if enabled() {
        table().reloads.fetch_add(1, Ordering::SeqCst);
        for (_, slot) in claimed() {
            slot.wake_worker();
        }
    }
}

/// How many times the launcher has read the settings again.
pub fn settings_reloads() -> u32 {
    if enabled() {
        table().reloads.load(Ordering::SeqCst)
    } else {
        0
    }
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
        let _guard = ClaimLock::take();
        for c in &self.counters {
            c.store(0, Ordering::SeqCst);
        }
        self.wanted.store(false, Ordering::SeqCst);
        self.absent.store(false, Ordering::SeqCst);
        self.paused_until.store(0, Ordering::SeqCst);
        self.commands.store(0, Ordering::SeqCst);
        self.commands_until.store(0, Ordering::SeqCst);
        self.stepped_aside.store(false, Ordering::SeqCst);
        self.history_pending.store(false, Ordering::SeqCst);
        self.check_wanted.store(false, Ordering::SeqCst);
        self.planned_wake.store(CHECKING, Ordering::SeqCst);
        self.database.store(0, Ordering::SeqCst);
    }

    pub fn counters(&self) -> [u64; COUNTERS] {
        std::array::from_fn(|i| self.counters[i].load(Ordering::Relaxed))
    }

    /// Sets the latch of the worker serving this database, if any, for a
    /// check.
    pub fn wake_worker(&self) {
        self.check_wanted.store(true, Ordering::SeqCst);
        set_latch(self.worker_procno.load(Ordering::SeqCst));
    }

    /// Sets the worker's latch for the history alone (contract 23): it
    /// notes that rows wait and numbers them when due, without a check.
    pub fn wake_worker_for_history(&self) {
        set_latch(self.worker_procno.load(Ordering::SeqCst));
    }

    /// Worker side: whether anyone asked for a check since the last call.
    pub fn take_check_wanted(&self) -> bool {
        self.check_wanted.swap(false, Ordering::SeqCst)
    }

    /// Sets the worker's latch for a caller that asked for a check, unless
    /// one was asked within `floor_us` (either way of a clock step): the
    /// worker checks at every expiry on its own, so an ask only brings a
    /// check forward, and no role can make it check in a loop. True when
    /// this call woke it.
    pub fn wake_worker_asked(&self, floor_us: i64) -> bool {
        let now = clock::now();
        let last = self.asked_wake_at.load(Ordering::SeqCst);
        if (now - last).unsigned_abs() < floor_us.unsigned_abs()
            || self
                .asked_wake_at
                .compare_exchange(last, now, Ordering::SeqCst, Ordering::SeqCst)
                .is_err()
        {
            return false;
        }
        self.wake_worker();
        true
    }

    /// Keeps workers out of this database for `ms` from now.
    pub fn pause_for(&self, ms: i64) {
        self.paused_until
            .store(clock::now() + ms * 1000, Ordering::SeqCst);
    }

    /// A command that needs the database to itself starts: workers stay
    /// out until it ends (`command_ended`), or for `max_ms` at most.
    pub fn command_started(&self, max_ms: i64) {
        self.commands_until
            .store(clock::now() + max_ms * 1000, Ordering::SeqCst);
        self.commands.fetch_add(1, Ordering::SeqCst);
    }

    pub fn command_ended(&self) {
        let _ = self
            .commands
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                Some(n.saturating_sub(1).max(0))
            });
    }

    /// Whether workers must stay out of this database now.
    pub fn paused(&self) -> bool {
        let now = clock::now();
        self.paused_until.load(Ordering::SeqCst) > now
            || (self.commands.load(Ordering::SeqCst) > 0
                && self.commands_until.load(Ordering::SeqCst) > now)
            || unslotted_command(self.database.load(Ordering::SeqCst))
    }
}

/// A command under way that needs a database to itself (`keep_out`).
pub struct KeptOut {
    slot: Option<&'static Slot>,
    entry: Option<(usize, u64)>,
}

/// A command that needs database `oid` to itself starts: workers stay out
/// of it until `KeptOut::end`, or for `max_ms` at most (should the backend
/// die first). Through the database's slot when it has one; otherwise
/// (a copy made from a template, whose first worker may be connecting
/// right now) through an entry of the table's few, then a second look for
/// the slot: a worker claims its slot before it looks for entries, so one
/// of the two sees the other. With no entry left for `role` (None: a
/// superuser; see `entry_for`), such a command goes without one, and
/// PostgreSQL's own wait for other sessions (5 s) is all a worker
/// starting there gets to leave.
pub fn keep_out(oid: u32, role: Option<u32>, max_ms: i64) -> KeptOut {
    let entry = (enabled() && find(oid).is_none())
        .then(|| take_entry(oid, role, max_ms))
        .flatten();
    let slot = find(oid);
    if let Some(slot) = slot {
        slot.command_started(max_ms);
    }
    KeptOut { slot, entry }
}

impl KeptOut {
    /// The database's slot, if it has one: a worker serving it must be
    /// asked to leave.
    pub fn slot(&self) -> Option<&'static Slot> {
        self.slot
    }

    /// The command is over (done or failed).
    pub fn end(&self) {
        if let Some(slot) = self.slot {
            slot.command_ended();
        }
        if let Some((i, word)) = self.entry {
            // (taken over by another command once expired: theirs now)
            let _ =
                table().unslotted[i].compare_exchange(word, 0, Ordering::SeqCst, Ordering::SeqCst);
        }
    }
}

fn now_s() -> u64 {
    u64::try_from(clock::now() / 1_000_000).unwrap_or(0)
}

/// Takes a free (or expired) entry for `oid` until `max_ms` from now,
/// within `role`'s share.
fn take_entry(oid: u32, role: Option<u32>, max_ms: i64) -> Option<(usize, u64)> {
    let now = now_s();
    let until = now + u64::try_from(max_ms / 1000).unwrap_or(0);
    let word = (u64::from(oid) << 32) | (until & LOW);
    let t = table();
    // (under the claim lock: no two takers count the same share)
    let _guard = ClaimLock::take();
    let entries: [(u64, u32); UNSLOTTED] = std::array::from_fn(|i| {
        (
            t.unslotted[i].load(Ordering::SeqCst),
            t.unslotted_role[i].load(Ordering::SeqCst),
        )
    });
    let i = entry_for(&entries, now, role)?;
    // (an entry's end clears its word by compare-and-swap, outside the
    // lock: a word taken over after its expiry is not the one it clears)
    t.unslotted_role[i].store(role.unwrap_or(0), Ordering::SeqCst);
    t.unslotted[i].store(word, Ordering::SeqCst);
    Some((i, word))
}

/// An entry's "until" half.
const LOW: u64 = u32::MAX as u64;

/// Whether an entry's word keeps workers out at `now` (seconds).
fn live(word: u64, now: u64) -> bool {
    word != 0 && (word & LOW) >= now
}

/// Which entry a command of `role` (None: a superuser's) may take, given
/// each entry's word and role (0: a superuser's): a free or expired one,
/// unless `role` has its share live already, or the roles theirs.
fn entry_for(entries: &[(u64, u32)], now: u64, role: Option<u32>) -> Option<usize> {
    if let Some(role) = role {
        let taken = |of: &dyn Fn(u32) -> bool| {
            entries
                .iter()
                .filter(|&&(w, r)| live(w, now) && of(r))
                .count()
        };
        if taken(&|r| r == role) >= UNSLOTTED_PER_ROLE
            || taken(&|r| r != 0) >= entries.len() - UNSLOTTED_SUPERUSERS
        {
            return None;
        }
    }
    entries.iter().position(|&(w, _)| !live(w, now))
}

/// Whether a command under way that found no slot keeps workers out of
/// database `oid`.
fn unslotted_command(oid: u32) -> bool {
    if !enabled() || oid == 0 {
        return false;
    }
    let now = now_s();
    table().unslotted.iter().any(|e| {
        let word = e.load(Ordering::SeqCst);
        word >> 32 == u64::from(oid) && live(word, now)
    })
}

/// Launcher: whether workers must stay out of database `oid` (whose slot,
/// if it has one, is `slot`) now.
pub fn kept_out(oid: u32, slot: Option<&Slot>) -> bool {
    slot.map_or_else(|| unslotted_command(oid), Slot::paused)
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
    count_n(counter, 1);
}

/// Adds `n` to this database's `counter` (as `count`).
pub fn count_n(counter: Counter, n: i64) {
    if let (Some(slot), Ok(n)) = (mine(), u64::try_from(n)) {
        if n > 0 {
            slot.counters[counter as usize].fetch_add(n, Ordering::Relaxed);
        }
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

/// Moves the entries of `database` among the first `*len` of `queue` (a
/// queue in shared memory that the workers of every database share) into
/// `out`, keeping the others in order; returns how many moved.
pub fn move_out<T: Copy>(
    queue: &mut [T],
    len: &mut usize,
    database: u32,
    database_of: impl Fn(&T) -> u32,
    out: &mut [T],
) -> usize {
    let (mut moved, mut kept) = (0, 0);
    for i in 0..*len {
        let entry = queue[i];
        if database_of(&entry) == database {
            out[moved] = entry;
            moved += 1;
        } else {
            queue[kept] = entry;
            kept += 1;
        }
    }
    *len = kept;
    moved
}

#[cfg(test)]
mod unit {
    use super::*;

    const NOW: u64 = 1_000;

    fn word(oid: u32, until: u64) -> u64 {
        (u64::from(oid) << 32) | until
    }

    #[test]
    fn a_role_takes_its_share_and_no_more() {
        let mut entries = [(0u64, 0u32); UNSLOTTED];
        for i in 0..UNSLOTTED_PER_ROLE {
            assert_eq!(entry_for(&entries, NOW, Some(7)), Some(i));
            entries[i] = (word(100 + i as u32, NOW + 60), 7);
        }
        assert_eq!(entry_for(&entries, NOW, Some(7)), None);
        // Another role, and a superuser, still get theirs.
        assert_eq!(entry_for(&entries, NOW, Some(8)), Some(UNSLOTTED_PER_ROLE));
        assert_eq!(entry_for(&entries, NOW, None), Some(UNSLOTTED_PER_ROLE));
        // An expired entry counts toward no share and is taken again.
        entries[1].0 = word(101, NOW - 1);
        assert_eq!(entry_for(&entries, NOW, Some(7)), Some(1));
        assert!(!live(entries[1].0, NOW) && live(entries[0].0, NOW));
    }

    #[test]
    fn roles_leave_superusers_their_entries() {
        let mut entries = [(0u64, 0u32); UNSLOTTED];
        let roles = UNSLOTTED - UNSLOTTED_SUPERUSERS;
        for i in 0..roles {
            let role = 10 + (i / UNSLOTTED_PER_ROLE) as u32;
            assert_eq!(entry_for(&entries, NOW, Some(role)), Some(i));
            entries[i] = (word(100 + i as u32, NOW + 60), role);
        }
        assert_eq!(entry_for(&entries, NOW, Some(99)), None);
        assert_eq!(entry_for(&entries, NOW, None), Some(roles));
    }

    #[test]
    fn a_full_table_gives_none() {
        let entries: [(u64, u32); UNSLOTTED] =
            std::array::from_fn(|i| (word(i as u32 + 1, NOW), i as u32));
        assert_eq!(entry_for(&entries, NOW, None), None);
        assert_eq!(entry_for(&entries, NOW + 1, None), Some(0));
    }
}
