//! Utility commands that concern the workers (contract 12), seen from the
//! backend that runs them (a ProcessUtility hook, active when preloaded):
//!
//! - CREATE EXTENSION that installed leaderlock: at commit, ask the
//!   launcher for a worker in this database (it starts one at once, not at
//!   its next round).
//! - DROP EXTENSION: at commit, wake this database's worker, which finds
//!   the extension gone and exits.
//! - DROP DATABASE, ALTER DATABASE ... RENAME / SET TABLESPACE, and CREATE
//!   DATABASE ... TEMPLATE need the database to themselves, and a worker
//!   connected to it would make them fail ("being accessed by other
//!   users"): the worker is asked to leave (one still connecting, too:
//!   `databases::keep_out`) and the launcher starts none there until the
//!   command is over. Only when the current role could run
//!   the command (superuser, or the database owner's privileges): a role
//!   that could not must not be able to send a worker away.

use crate::base::clock;
use crate::shmem::databases;
use crate::workers::bgworker;
use pgrx::prelude::*;
use pgrx::PgList;
use std::cell::Cell;
use std::ffi::CStr;
use std::sync::atomic::Ordering;

/// How long a command waits for a worker to leave its database.
const LEAVE_TIMEOUT_MS: i64 = 10_000;

/// How long a command keeps workers out at most (should the backend die
/// before it can say it is done).
const PAUSE_S: i64 = 60;

static mut PREVIOUS: pg_sys::ProcessUtility_hook_type = None;

thread_local! {
    static CREATED: Cell<bool> = const { Cell::new(false) };
    static DROPPED: Cell<bool> = const { Cell::new(false) };
}

/// Called from `_PG_init` while preloading.
pub fn init() {
    unsafe {
        PREVIOUS = pg_sys::ProcessUtility_hook;
        pg_sys::ProcessUtility_hook = Some(process_utility);
        pg_sys::RegisterXactCallback(Some(on_xact_event), std::ptr::null_mut());
    }
}

#[pg_guard]
#[allow(clippy::too_many_arguments)]
unsafe extern "C-unwind" fn process_utility(
    pstmt: *mut pg_sys::PlannedStmt,
    query: *const std::ffi::c_char,
    read_only_tree: bool,
    context: pg_sys::ProcessUtilityContext::Type,
    params: pg_sys::ParamListInfo,
    query_env: *mut pg_sys::QueryEnvironment,
    dest: *mut pg_sys::DestReceiver,
    qc: *mut pg_sys::QueryCompletion,
) {
    let stmt = unsafe { (*pstmt).utilityStmt };
    let installed = || unsafe { pg_sys::get_extension_oid(c"leaderlock".as_ptr(), true) };
    let before = unsafe { creates_extension(stmt) }.then(installed);
    let needed = unsafe { database_needed(stmt) };
    let kept_out = needed
        .filter(|oid| may_take(*oid))
        .map(|oid| databases::keep_out(oid, acting_role(), PAUSE_S * 1000));
    let run = || unsafe {
        if let Some(slot) = kept_out.as_ref().and_then(databases::KeptOut::slot) {
            make_worker_leave(slot);
        }
        // (pgrx wraps standard_ProcessUtility in a Rust function, so it
        // cannot stand in for the hook's C function pointer)
        match PREVIOUS {
            Some(previous) => previous(
                pstmt,
                query,
                read_only_tree,
                context,
                params,
                query_env,
                dest,
                qc,
            ),
            None => pg_sys::standard_ProcessUtility(
                pstmt,
                query,
                read_only_tree,
                context,
                params,
                query_env,
                dest,
                qc,
            ),
        }
    };

    PgTryBuilder::new(run)
        .finally(|| {
            if let Some(kept_out) = &kept_out {
                // Over (done or failed): the launcher may start a worker
                // again, in the database if it still exists.
                kept_out.end();
                databases::wake_launcher();
            }
        })
        .execute();
    // Only a CREATE EXTENSION (leaderlock, or another one with CASCADE)
    // that installed leaderlock asks for a worker: one that installed
    // nothing of ours, as any role may run, must not make the launcher
    // start workers in a loop.
    if before.is_some_and(|b| b == pg_sys::InvalidOid && installed() != pg_sys::InvalidOid) {
        CREATED.set(true);
        if databases::enabled() && databases::mine().is_none() {
            warning!(
                "leaderlock: no worker can serve this database: leaderlock.max_databases ({}) \
                 databases with the extension are served already; raise it (restart needed)",
                crate::base::settings::MAX_DATABASES.get()
            );
        }
    }
    unsafe { note_extension_drop(stmt) };
}

/// Whether `stmt` is a CREATE EXTENSION.
unsafe fn creates_extension(stmt: *mut pg_sys::Node) -> bool {
    !stmt.is_null() && unsafe { (*stmt).type_ } == pg_sys::NodeTag::T_CreateExtensionStmt
}

/// The database a command needs to itself (no other session in it), if
/// it is one of those.
unsafe fn database_needed(stmt: *mut pg_sys::Node) -> Option<u32> {
    if stmt.is_null() {
        return None;
    }
    let name: *const std::ffi::c_char = unsafe {
        match (*stmt).type_ {
            pg_sys::NodeTag::T_DropdbStmt => (*stmt.cast::<pg_sys::DropdbStmt>()).dbname,
            pg_sys::NodeTag::T_RenameStmt => {
                let rename = &*stmt.cast::<pg_sys::RenameStmt>();
                if rename.renameType != pg_sys::ObjectType::OBJECT_DATABASE {
                    return None;
                }
                rename.subname
            }
            pg_sys::NodeTag::T_AlterDatabaseStmt => {
                let alter = &*stmt.cast::<pg_sys::AlterDatabaseStmt>();
                option(alter.options, c"tablespace")?;
                alter.dbname
            }
            pg_sys::NodeTag::T_CreatedbStmt => {
                let create = &*stmt.cast::<pg_sys::CreatedbStmt>();
                let template = option(create.options, c"template")?;
                if (*template).arg.is_null() {
                    return None; // TEMPLATE DEFAULT: template1, never served
                }
                pg_sys::defGetString(template)
            }
            _ => return None,
        }
    };
    if name.is_null() {
        return None;
    }
    let oid = unsafe { pg_sys::get_database_oid(name, true) };
    (oid != pg_sys::InvalidOid).then(|| oid.to_u32())
}

/// Whether the current role could run such a command on database `oid`:
/// a superuser, or one with the privileges of its owner.
fn may_take(oid: u32) -> bool {
    unsafe {
        if pg_sys::superuser() {
            return true;
        }
        let tuple = pg_sys::SearchSysCache1(
            pg_sys::SysCacheIdentifier::DATABASEOID as std::ffi::c_int,
            pg_sys::Datum::from(oid),
        );
        if tuple.is_null() {
            return false;
        }
        let owner = (*pg_sys::heap_tuple_get_struct::<pg_sys::FormData_pg_database>(tuple)).datdba;
        pg_sys::ReleaseSysCache(tuple);
        pg_sys::has_privs_of_role(pg_sys::GetUserId(), owner)
    }
}

/// The role whose share of shared memory a command takes (None: a
/// superuser, who has no share).
fn acting_role() -> Option<u32> {
    unsafe { (!pg_sys::superuser()).then(|| pg_sys::GetUserId().to_u32()) }
}

/// The option named `name` of a command's option list.
unsafe fn option(options: *mut pg_sys::List, name: &CStr) -> Option<*mut pg_sys::DefElem> {
    let options = unsafe { PgList::<pg_sys::DefElem>::from_pg(options) };
    let found = options
        .iter_ptr()
        .find(|d| unsafe { !(**d).defname.is_null() && CStr::from_ptr((**d).defname) == name });
    found
}

/// Asks the worker serving `slot`'s database to leave (workers are kept
/// out already), and waits (briefly) until it has.
unsafe fn make_worker_leave(slot: &databases::Slot) {
    let deadline = clock::now() + LEAVE_TIMEOUT_MS * 1000;
    while slot.worker_procno.load(Ordering::SeqCst) >= 0 && clock::now() < deadline {
        slot.wake_worker();
        // (nothing signals the worker's exit to us: look every 10 ms)
        bgworker::wait(10);
    }
}

/// Remembers a DROP EXTENSION for the transaction's commit.
unsafe fn note_extension_drop(stmt: *mut pg_sys::Node) {
    if stmt.is_null() {
        return;
    }
    unsafe {
        // Whichever extension: a spare wake-up costs one check.
        if (*stmt).type_ == pg_sys::NodeTag::T_DropStmt
            && (*stmt.cast::<pg_sys::DropStmt>()).removeType == pg_sys::ObjectType::OBJECT_EXTENSION
        {
            DROPPED.set(true);
        }
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn on_xact_event(
    event: pg_sys::XactEvent::Type,
    _arg: *mut std::ffi::c_void,
) {
    use pg_sys::XactEvent::*;
    if !matches!(
        event,
        XACT_EVENT_COMMIT
            | XACT_EVENT_PARALLEL_COMMIT
            | XACT_EVENT_ABORT
            | XACT_EVENT_PARALLEL_ABORT
            | XACT_EVENT_PREPARE
    ) {
        return;
    }
    let created = CREATED.replace(false);
    let dropped = DROPPED.replace(false);
    // A prepared transaction commits later, elsewhere: ask now; should the
    // worker come before COMMIT PREPARED, the launcher looks again later
    // (`launcher::REPROBE_S`).
    if !matches!(
        event,
        XACT_EVENT_COMMIT | XACT_EVENT_PARALLEL_COMMIT | XACT_EVENT_PREPARE
    ) {
        return;
    }
    if created {
        if let Some(slot) = databases::mine() {
            slot.wanted.store(true, Ordering::SeqCst);
            databases::wake_launcher();
        }
    }
    if dropped {
        // (only a served database has a worker to wake)
        if let Some(slot) = databases::find(unsafe { pg_sys::MyDatabaseId }.to_u32()) {
            slot.wake_worker();
        }
    }
}
