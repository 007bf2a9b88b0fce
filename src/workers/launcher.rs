//! The launcher (contract 12): starts one worker (`worker.rs`) per served
//! database in which the extension is installed.
//!
//! It connects to no database, reads the shared catalog `pg_database`
//! every second (and when woken), and starts a dynamic background worker
//! for each database that allows connections, is not a template, and is
//! included by `leaderlock.databases`. A worker that finds no extension in
//! its database says so in shared memory and exits; the launcher then
//! starts none there until the commit of a CREATE EXTENSION leaderlock
//! there wakes it (`hooks.rs`), or until it restarts. Workers stop on their
//! own: when the extension is dropped, the database is no longer listed,
//! or a command needs the database to itself (DROP DATABASE). Laid out
//! after PostgreSQL's autovacuum launcher (`get_database_list`) and
//! TimescaleDB's launcher.

use crate::base::clock;
use crate::base::settings;
use crate::shmem::databases::{self, Slot};
use crate::shmem::handover;
use crate::shmem::sessions;
use crate::workers::bgworker;
use crate::workers::worker;
use pgrx::bgworkers::{BackgroundWorker, BackgroundWorkerBuilder, BgWorkerStartTime};
use pgrx::prelude::*;
use std::collections::{HashMap, HashSet};
use std::ffi::c_int;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// The launcher's name, and its `backend_type` in pg_stat_activity.
pub const BACKEND_TYPE: &str = "leaderlock launcher";

/// How often `pg_database` is read when nothing wakes the launcher.
const RESCAN_MS: i64 = 1_000;

/// A worker that ran at least this long before it stopped is restarted
/// after `RESCAN_MS`; one that stopped sooner waits twice as long each
/// time, up to `MAX_BACKOFF_S`.
const STEADY_RUN_S: i64 = 10;
const MAX_BACKOFF_S: i64 = 60;

/// Least time between two worker starts for one database, whatever asks
/// for them (no role can make the launcher fork in a loop).
const START_FLOOR_MS: i64 = 500;

/// A database where the extension was found absent is looked at again
/// after this long, in case its CREATE EXTENSION was not seen (it came in a
/// prepared transaction, or from a dump restored without it).
pub const REPROBE_S: i64 = 300;

/// A database the launcher has seen.
#[derive(Default)]
struct Database {
    name: String,
    handle: Option<Handle>,
    /// Since when the worker found no extension here: none is started until
    /// a CREATE EXTENSION wakes us, or `REPROBE_S` later.
    absent_since: Option<i64>,
    /// No worker is started before this time.
    next_start: i64,
    /// Quick stops in a row.
    quick_stops: u32,
    /// Since when no background worker slot could be had; whether said.
    no_slot_since: Option<i64>,
    told_no_slot: bool,
    /// When a worker was last started here.
    last_start: i64,
    /// Whether the log said its owner's share of workers is taken.
    told_owner_full: bool,
}

/// A registered dynamic worker.
struct Handle {
    raw: *mut pg_sys::BackgroundWorkerHandle,
    started_at: i64,
}

/// Registers the launcher; only possible while preloading.
pub fn register() {
    BackgroundWorkerBuilder::new(BACKEND_TYPE)
        .set_type(BACKEND_TYPE)
        .set_library("leaderlock")
        .set_function("leaderlock_launcher_main")
        .enable_spi_access()
        // Start on a hot standby too: its workers wait there for promotion.
        .set_start_time(BgWorkerStartTime::ConsistentState)
        .set_restart_time(Some(Duration::from_secs(1)))
        .load();
}

#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn leaderlock_launcher_main(_arg: pg_sys::Datum) {
    bgworker::standard_signal_handlers();
    // No database: pg_database is a shared catalog, readable from here.
    BackgroundWorker::connect_worker_to_spi(None, None);
    databases::register_launcher();
    log!("leaderlock launcher started");

    let mut known: HashMap<u32, Database> = HashMap::new();
    let mut in_recovery = unsafe { pg_sys::RecoveryInProgress() };
    // The lease clock's beat, and its copy in the data directory (see
    // clock.rs); between two rounds the launcher wakes for them.
    let mut next_round = 0;
    let mut next_persist = 0;
    let mut databases_setting = settings::DATABASES.get();
    loop {
        // Reading the clock is the beat.
        let now = clock::now();
        if now >= next_persist {
            clock::persist();
            next_persist = now + clock::PERSIST_US;
        }
        // Promoted (seen within a beat): every worker takes the failover
        // step at once, since no caller asks for it while held leases look
        // live (after a promotion they may look live far too long: the old
        // primary's lease clock was another host's, failover.rs); and every
        // database is looked at again at once: on a standby a CREATE
        // EXTENSION arrives by WAL, which no hook sees, so a database found
        // without it would wait for REPROBE_S.
        if in_recovery && !unsafe { pg_sys::RecoveryInProgress() } {
            in_recovery = false;
            for db in known.values_mut() {
                db.absent_since = None;
            }
            for (_, slot) in databases::claimed() {
                slot.wake_worker();
            }
            next_round = 0;
        }
        if now < next_round {
            let woken = bgworker::wait_woken((next_round - now) / 1000 + 1, clock::BEAT_US / 1000);
            if !woken {
                continue;
            }
        }
        if bgworker::reload_config() {
            databases::settings_reloaded();
        }
        // A change of leaderlock.databases: every database is looked at
        // again, so that one it names now is said to lack the extension
        // even when found without it (unnamed, silently) before the change.
        let setting = settings::DATABASES.get();
        if setting != databases_setting {
            databases_setting = setting;
            for db in known.values_mut() {
                db.absent_since = None;
            }
        }
        let sleep_ms = launch(&mut known);
        next_round = clock::now() + sleep_ms * 1000;
    }
}

/// One round: starts the workers that should run. Returns how long to
/// sleep, in milliseconds.
fn launch(known: &mut HashMap<u32, Database>) -> i64 {
    let served = settings::served();
    // Slots claimed before the read of pg_database: those whose database
    // is not in it belong to dropped databases (a slot is claimed only from
    // inside its database, or by us for a listed one).
    let claimed: Vec<(u32, &'static Slot)> = databases::claimed().collect();
    let listed = list_databases();
    let present: HashSet<u32> = listed.iter().map(|d| d.oid).collect();
    for (database, slot) in claimed {
        if !present.contains(&database) && slot.worker_procno.load(Ordering::SeqCst) < 0 {
            slot.free();
            sessions::forget(database);
            handover::forget(database);
        }
    }
    known.retain(|oid, db| {
        // Keep the handle of a running worker until it stops.
        present.contains(oid) || db.handle.as_ref().is_some_and(|h| running(h.raw))
    });

    // leaderlock.max_workers_per_owner: workers running per owner (not a
    // superuser), the oldest databases served first.
    let cap = usize::try_from(settings::MAX_WORKERS_PER_OWNER.get()).unwrap_or(0);
    let mut serving: HashMap<u32, usize> = HashMap::new();
    for l in listed.iter().filter(|l| !l.by_superuser) {
        if serves(l.oid, known.get(&l.oid)) {
            *serving.entry(l.owner).or_default() += 1;
        }
    }
    let mut listed = listed;
    listed.sort_by_key(|l| l.oid);

    let now = clock::now();
    let mut sleep_ms = RESCAN_MS;
    for listed in listed {
        if !listed.eligible {
            // Made a template, or closed to connections, while served: the
            // worker must leave (it checks its pause on every wake-up).
            if let Some(slot) = databases::find(listed.oid) {
                if slot.worker_procno.load(Ordering::SeqCst) >= 0 {
                    slot.pause_for(2 * RESCAN_MS);
                    slot.wake_worker();
                }
            }
            continue;
        }
        if !served.includes(&listed.name) {
            continue;
        }
        let db = known.entry(listed.oid).or_default();
        db.name = listed.name;
        let owner_full = !listed.by_superuser
            && !serves(listed.oid, Some(db))
            && serving.get(&listed.owner).copied().unwrap_or(0) >= cap;
        if let Some(wait) = consider(listed.oid, db, now, owner_full) {
            sleep_ms = sleep_ms.min(wait);
        }
        if !listed.by_superuser && !owner_full && db.handle.is_some() && db.last_start == now {
            *serving.entry(listed.owner).or_default() += 1;
        }
    }
    sleep_ms.max(1)
}

/// Whether a worker serves database `oid` or is starting there.
fn serves(oid: u32, db: Option<&Database>) -> bool {
    db.and_then(|d| d.handle.as_ref())
        .is_some_and(|h| running(h.raw))
        || databases::find(oid).is_some_and(|s| s.worker_procno.load(Ordering::SeqCst) >= 0)
}

/// Starts a worker for `db` if it needs one, unless its owner's share is
/// taken (`owner_full`). Returns how soon to look again, when sooner than
/// the next read of pg_database.
fn consider(oid: u32, db: &mut Database, now: i64, owner_full: bool) -> Option<i64> {
    // Claimed only where the extension is installed (see databases.rs):
    // none yet for a database whose worker has not found it.
    let slot = databases::find(oid);
    if let Some(handle) = &db.handle {
        if running(handle.raw) {
            // (a CREATE EXTENSION meanwhile stays wanted until it stopped)
            return None;
        }
        let ran_s = (now - handle.started_at) / 1_000_000;
        unsafe { pg_sys::pfree(handle.raw.cast()) };
        db.handle = None;
        // A worker that found no extension claimed no slot, or marked it.
        if slot.is_none_or(|s| s.absent.load(Ordering::SeqCst)) {
            db.absent_since = Some(now);
        } else if slot.is_some_and(|s| s.stepped_aside.swap(false, Ordering::SeqCst))
            || ran_s >= STEADY_RUN_S
        {
            // Left on request (its database was needed, or unlisted), or
            // ran well: no backing off.
            db.quick_stops = 0;
            db.next_start = now + RESCAN_MS * 1000;
        } else {
            db.quick_stops += 1;
            let backoff_s = (1i64 << db.quick_stops.min(6)).min(MAX_BACKOFF_S);
            db.next_start = now + backoff_s * 1_000_000;
        }
    }
    if slot.is_some_and(|s| s.worker_procno.load(Ordering::SeqCst) >= 0) {
        // Serving already (started by an earlier launcher).
        return None;
    }
    // Consumed only with no worker running: one that was about to find
    // the extension absent cannot swallow it.
    if slot.is_some_and(|s| s.wanted.swap(false, Ordering::SeqCst)) {
        db.absent_since = None;
        db.next_start = 0;
        db.quick_stops = 0;
    }
    // Whatever asked for it, never two starts closer than the floor.
    db.next_start = db.next_start.max(db.last_start + START_FLOOR_MS * 1000);
    if db
        .absent_since
        .is_some_and(|since| now - since >= REPROBE_S * 1_000_000)
    {
        db.absent_since = None;
    }
    if db.absent_since.is_some() || databases::kept_out(oid, slot) {
        return None;
    }
    if now < db.next_start {
        return Some((db.next_start - now) / 1000 + 1);
    }
    if owner_full {
        if !db.told_owner_full {
            log!(
                "leaderlock launcher: not serving database \"{}\": its owner, not a superuser, \
                 has leaderlock.max_workers_per_owner ({}) databases served already; leases \
                 there expire lazily until one of those is dropped or the setting is raised",
                db.name,
                settings::MAX_WORKERS_PER_OWNER.get()
            );
            db.told_owner_full = true;
        }
        return None;
    }
    db.told_owner_full = false;
    if let Some(slot) = slot {
        slot.absent.store(false, Ordering::SeqCst);
    }
    db.last_start = now;
    match start_worker(oid, &db.name) {
        Some(raw) => {
            db.handle = Some(Handle {
                raw,
                started_at: now,
            });
            db.no_slot_since = None;
            db.told_no_slot = false;
            None
        }
        None => {
            // Out of slots; workers that find no extension exit at once,
            // so wait a little before saying it.
            let since = *db.no_slot_since.get_or_insert(now);
            if now - since >= 2_000_000 && !db.told_no_slot {
                log!(
                    "leaderlock launcher: no background worker slot free to serve database \
                     \"{}\" (max_worker_processes = {}); raise max_worker_processes, or list \
                     fewer databases in leaderlock.databases",
                    db.name,
                    unsafe { pg_sys::max_worker_processes }
                );
                db.told_no_slot = true;
            }
            Some(RESCAN_MS)
        }
    }
}

/// Registers a worker for database `oid`; None when no slot is free.
fn start_worker(oid: u32, name: &str) -> Option<*mut pg_sys::BackgroundWorkerHandle> {
    let builder = BackgroundWorkerBuilder::new(&format!("leaderlock worker for {name}"))
        .set_type(worker::BACKEND_TYPE)
        .set_library("leaderlock")
        .set_function("leaderlock_worker_main")
        // (the database, and the launcher's reloads so far: `worker.rs`)
        .set_argument(Some(pg_sys::Datum::from(
            ((u64::from(databases::settings_reloads()) << 32) | u64::from(oid)) as usize,
        )))
        .enable_spi_access()
        .set_start_time(BgWorkerStartTime::ConsistentState)
        // Never restarted by the postmaster: the launcher decides.
        .set_restart_time(None)
        // Its start and stop set our latch.
        .set_notify_pid(unsafe { pg_sys::MyProcPid });
    let mut bgw: pg_sys::BackgroundWorker = (&builder).into();
    let mut handle: *mut pg_sys::BackgroundWorkerHandle = std::ptr::null_mut();
    // The handle outlives this round: allocate it for the process's life.
    let registered = unsafe {
        let old = pg_sys::MemoryContextSwitchTo(pg_sys::TopMemoryContext);
        let ok = pg_sys::RegisterDynamicBackgroundWorker(&mut bgw, &mut handle);
        pg_sys::MemoryContextSwitchTo(old);
        ok
    };
    registered.then_some(handle)
}

/// Whether the worker of `handle` is starting or running.
fn running(handle: *mut pg_sys::BackgroundWorkerHandle) -> bool {
    let mut pid: pg_sys::pid_t = 0;
    let status = unsafe { pg_sys::GetBackgroundWorkerPid(handle, &mut pid) };
    matches!(
        status,
        pg_sys::BgwHandleStatus::BGWH_STARTED | pg_sys::BgwHandleStatus::BGWH_NOT_YET_STARTED
    )
}

/// A row of pg_database.
struct Listed {
    oid: u32,
    name: String,
    /// Allows connections, is not a template (a connection to a template
    /// would make every CREATE DATABASE from it fail) and is valid.
    eligible: bool,
    /// Its owner, and whether that role is a superuser.
    owner: u32,
    by_superuser: bool,
}

/// Every database. A heap scan of the shared catalog, as the autovacuum
/// launcher does it.
fn list_databases() -> Vec<Listed> {
    BackgroundWorker::transaction(|| {
        let mut out = Vec::new();
        unsafe {
            pg_sys::GetTransactionSnapshot();
            let rel =
                pg_sys::table_open(pg_sys::DatabaseRelationId, pg_sys::AccessShareLock as c_int);
            let scan = pg_sys::table_beginscan_catalog(rel, 0, std::ptr::null_mut());
            loop {
                let tuple = pg_sys::heap_getnext(scan, pg_sys::ScanDirection::ForwardScanDirection);
                if tuple.is_null() {
                    break;
                }
                let row = &*pg_sys::heap_tuple_get_struct::<pg_sys::FormData_pg_database>(tuple);
                out.push(Listed {
                    oid: row.oid.to_u32(),
                    name: pg_sys::name_data_to_str(&row.datname).to_string(),
                    // datconnlimit -2: left invalid by an interrupted DROP
                    // DATABASE (PostgreSQL 15.6, 16.2 and later).
                    eligible: row.datallowconn && !row.datistemplate && row.datconnlimit != -2,
                    owner: row.datdba.to_u32(),
                    by_superuser: pg_sys::superuser_arg(row.datdba),
                });
            }
            pg_sys::table_endscan(scan);
            pg_sys::table_close(rel, pg_sys::AccessShareLock as c_int);
        }
        out
    })
}
