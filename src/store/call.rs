//! One SQL call (or one check of a worker) as PostgreSQL sees it: the role
//! that acts, and the schema that holds the extension's objects.
//!
//! Security (docs in SECURITY.md):
//! - The functions are SECURITY INVOKER with `search_path = pg_catalog,
//!   pg_temp`. The acting role is `current_user` at the call: the role
//!   PostgreSQL itself checks privileges for, also where it runs a role's
//!   code as a table owner (ANALYZE, autovacuum, REINDEX, REFRESH
//!   MATERIALIZED VIEW evaluate index expressions and views as the owner).
//! - A writer then acts as the function's owner (the role that ran CREATE
//!   EXTENSION, who owns the table) around its own statements only, as
//!   SECURITY DEFINER would, and refuses inside a security-restricted
//!   operation: no role's maintenance command ever changes a lease.
//! - Statements name the extension's objects by the schema the function
//!   lives in, looked up by OID at every call, never by a name fixed at
//!   install time (a renamed schema is followed; a look-alike schema given
//!   its old name is never used: see `guard.rs`).
//!
//! A schema from before 0.5.0 still has SECURITY DEFINER functions with a
//! search_path naming their schema, until ALTER EXTENSION leaderlock
//! UPDATE: there the session's role acts (as 0.4.0 did), and the search
//! path is pinned here for the call's statements.

use crate::base::settings;
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;
use std::cell::RefCell;
use std::ffi::CStr;

/// What the statements of the current call need to know.
#[derive(Clone, Debug)]
pub struct Context {
    /// The role acting: leases it takes are its own (contract 13).
    pub caller: pg_sys::Oid,
    /// The extension's schema.
    pub schema: pg_sys::Oid,
    /// Its name now, quoted as an identifier.
    pub schema_name: String,
    /// A worker's check, not a role's call.
    pub worker: bool,
}

thread_local! {
    static CURRENT: RefCell<Option<Context>> = const { RefCell::new(None) };
}

/// The context of the call under way. Panics outside one (a bug).
pub fn current() -> Context {
    CURRENT
        .with(|c| c.borrow().clone())
        .expect("leaderlock: no call under way")
}

/// The acting role.
pub fn caller() -> pg_sys::Oid {
    current().caller
}

/// How a function touches leases.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Reads with the caller's own rights.
    Read,
    /// Writes the table, as its owner, for the caller.
    Write,
}

/// Ends the call's context (and its change of role) when dropped.
pub struct Entered {
    previous: Option<Context>,
    /// The user and security context to go back to, after acting as owner.
    restore_user: Option<(pg_sys::Oid, i32)>,
    /// The search path pinned for a schema from before 0.5.0.
    _search_path: Option<settings::Local>,
}

/// Enters a call of the SQL function behind `fcinfo`.
///
/// # Safety
/// `fcinfo` must be the call's own, valid FunctionCallInfo.
pub unsafe fn enter(fcinfo: pg_sys::FunctionCallInfo, access: Access) -> Entered {
    let function = unsafe { (*(*fcinfo).flinfo).fn_oid };
    let (schema, owner, definer) = unsafe { function_facts(function) };
    if access == Access::Write && unsafe { pg_sys::InSecurityRestrictedOperation() } {
        refuse_restricted();
    }
    let caller = if definer {
        // Schema before 0.5.0: current_user is already the definer.
        unsafe { pg_sys::GetOuterUserId() }
    } else {
        unsafe { pg_sys::GetUserId() }
    };
    let search_path = definer.then(|| settings::Local::set(c"search_path", "pg_catalog, pg_temp"));
    let restore_user = (access == Access::Write && !definer).then(|| unsafe {
        let (mut user, mut context) = (pg_sys::InvalidOid, 0);
        pg_sys::GetUserIdAndSecContext(&mut user, &mut context);
        pg_sys::SetUserIdAndSecContext(
            owner,
            context | pg_sys::SECURITY_LOCAL_USERID_CHANGE as i32,
        );
        (user, context)
    });
    let previous = set(Context {
        caller,
        schema,
        schema_name: quoted_schema_name(schema),
        worker: false,
    });
    Entered {
        previous,
        restore_user,
        _search_path: search_path,
    }
}

/// Enters a worker's check of its database: the worker acts as itself
/// (the bootstrap superuser), on the extension in `schema`.
pub fn enter_worker(schema: pg_sys::Oid) -> Entered {
    let previous = set(Context {
        caller: unsafe { pg_sys::GetUserId() },
        schema,
        schema_name: quoted_schema_name(schema),
        worker: true,
    });
    Entered {
        previous,
        restore_user: None,
        _search_path: None,
    }
}

fn set(context: Context) -> Option<Context> {
    CURRENT.with(|c| c.borrow_mut().replace(context))
}

impl Drop for Entered {
    fn drop(&mut self) {
        CURRENT.with(|c| *c.borrow_mut() = self.previous.take());
        // On an error, the (sub)transaction's abort restores both.
        if std::thread::panicking() {
            return;
        }
        if let Some((user, context)) = self.restore_user {
            unsafe { pg_sys::SetUserIdAndSecContext(user, context) };
        }
    }
}

/// The schema, owner and SECURITY DEFINER flag of function `oid`.
unsafe fn function_facts(oid: pg_sys::Oid) -> (pg_sys::Oid, pg_sys::Oid, bool) {
    unsafe {
        let tuple = pg_sys::SearchSysCache1(
            pg_sys::SysCacheIdentifier::PROCOID as i32,
            pg_sys::Datum::from(oid),
        );
        if tuple.is_null() {
            error!(
                "leaderlock: cache lookup failed for function {}",
                oid.to_u32()
            );
        }
        let form = &*pg_sys::heap_tuple_get_struct::<pg_sys::FormData_pg_proc>(tuple);
        let facts = (form.pronamespace, form.proowner, form.prosecdef);
        pg_sys::ReleaseSysCache(tuple);
        facts
    }
}

/// The name of schema `oid`, quoted as an identifier.
fn quoted_schema_name(oid: pg_sys::Oid) -> String {
    unsafe {
        let name = pg_sys::get_namespace_name(oid);
        if name.is_null() {
            error!(
                "leaderlock: the extension's schema (OID {}) is gone",
                oid.to_u32()
            );
        }
        CStr::from_ptr(pg_sys::quote_identifier(name))
            .to_string_lossy()
            .into_owned()
    }
}

fn refuse_restricted() -> ! {
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
        "leaderlock: leases cannot be changed from a security-restricted operation",
        "leaderlock",
    )
    .set_detail(
        "PostgreSQL runs index expressions, materialized view queries and the like for \
         maintenance commands (ANALYZE, VACUUM, REINDEX, REFRESH MATERIALIZED VIEW) as \
         the table's owner; no lease changes from there.",
    )
    .report(PgLogLevel::ERROR);
    unreachable!("an ERROR does not return")
}
