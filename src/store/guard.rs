//! The last check before any statement of the extension runs: every table
//! or view it reads or writes lives in `pg_catalog` or in the extension's
//! own schema (by OID).
//!
//! Statements name the extension's table by its schema's current name
//! (`plans.rs`). PostgreSQL re-resolves names when it revalidates a cached
//! plan, so a rename of that schema racing with a call, with a look-alike
//! schema given the old name, could otherwise make a statement use the
//! look-alike's table (and run its triggers with the writer's rights). An
//! ExecutorStart hook sees the plan as it will run, before any of it does:
//! a relation anywhere else is refused. Installed whenever the library is
//! loaded, preloaded or not; it only looks at the extension's statements.

use pgrx::prelude::*;
use pgrx::PgList;
use std::cell::Cell;

static mut PREVIOUS: pg_sys::ExecutorStart_hook_type = None;

thread_local! {
    /// While the extension runs a statement: its schema.
    static ALLOWED: Cell<Option<pg_sys::Oid>> = const { Cell::new(None) };
    static INSTALLED: Cell<bool> = const { Cell::new(false) };
}

/// Called from `_PG_init`.
pub fn init() {
    if INSTALLED.replace(true) {
        return;
    }
    unsafe {
        PREVIOUS = pg_sys::ExecutorStart_hook;
        pg_sys::ExecutorStart_hook = Some(executor_start);
    }
}

/// Checks the statements run until the returned value is dropped against
/// `schema`.
pub fn statements_of(schema: pg_sys::Oid) -> Watch {
    Watch(ALLOWED.replace(Some(schema)))
}

pub struct Watch(Option<pg_sys::Oid>);

impl Drop for Watch {
    fn drop(&mut self) {
        ALLOWED.set(self.0);
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn executor_start(query_desc: *mut pg_sys::QueryDesc, eflags: i32) {
    if let Some(schema) = ALLOWED.get() {
        unsafe { check((*(*query_desc).plannedstmt).rtable, schema) };
    }
    unsafe {
        match PREVIOUS {
            Some(previous) => previous(query_desc, eflags),
            None => pg_sys::standard_ExecutorStart(query_desc, eflags),
        }
    }
}

unsafe fn check(rtable: *mut pg_sys::List, schema: pg_sys::Oid) {
    let entries = unsafe { PgList::<pg_sys::RangeTblEntry>::from_pg(rtable) };
    for rte in entries.iter_ptr() {
        let (kind, relid) = unsafe { ((*rte).rtekind, (*rte).relid) };
        if kind != pg_sys::RTEKind::RTE_RELATION {
            continue;
        }
        let namespace = unsafe { pg_sys::get_rel_namespace(relid) };
        if namespace != schema && namespace != pg_sys::Oid::from(pg_sys::PG_CATALOG_NAMESPACE) {
            error!(
                "leaderlock: refusing to run a statement on relation {} outside the extension's \
                 schema (was the extension's schema renamed while this call ran?)",
                relid.to_u32()
            );
        }
    }
}
