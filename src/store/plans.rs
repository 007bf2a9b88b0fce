//! Runs the statements of `queries` through SPI with plans prepared once
//! per backend and kept, so a call costs an execution, not a parse and plan.
//!
//! Statements name the extension's objects as `@extschema@.name`; the
//! placeholder becomes the current name of the extension's schema (looked
//! up by OID for each call, see `call.rs`), so plans are kept per statement
//! and schema name. Kept plans are revalidated by PostgreSQL's plan cache,
//! so they follow a dropped and re-created extension on their own; every
//! execution is checked by `guard.rs`.

use crate::store::call;
use crate::store::guard;
use pgrx::datum::DatumWithOid;
use pgrx::pg_sys::PgOid;
use pgrx::prelude::*;
use pgrx::spi::{OwnedPreparedStatement, SpiClient, SpiTupleTable};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

thread_local! {
    static PLANS: RefCell<HashMap<(&'static str, String), Rc<OwnedPreparedStatement>>> =
        RefCell::new(HashMap::new());
}

/// A tenure's term as a parameter (int8), NULL for any term.
pub fn term_or_any(term: Option<i64>) -> DatumWithOid<'static> {
    term.map_or_else(DatumWithOid::null::<i64>, DatumWithOid::from)
}

/// Executes `sql` with `args` and hands the result rows to `read`, inside
/// one SPI connection. The argument types of the first call fix the plan's
/// parameter types, so callers always pass the same types per statement.
///
/// Plans are prepared as mutating (SPI then takes a fresh snapshot for each
/// statement) but executed with `select`, not `update`: pgrx's `update`
/// forces a transaction ID even for a read, which would make every call,
/// even `le_leader` or a refused `le_try_acquire`, write a commit record,
/// and fail on a hot standby. The executor assigns an ID only when a
/// statement really writes.
pub fn run<R>(
    sql: &'static str,
    args: &[DatumWithOid<'_>],
    read: impl FnOnce(SpiTupleTable<'_>) -> R,
) -> R {
    let context = call::current();
    let _watch = guard::statements_of(context.schema);
    Spi::connect(|client| {
        let table = execute(client, sql, &context.schema_name, args);
        read(table)
    })
}

fn execute<'conn>(
    client: &SpiClient<'conn>,
    sql: &'static str,
    schema: &str,
    args: &[DatumWithOid<'_>],
) -> SpiTupleTable<'conn> {
    // The plan is cloned out of the cache before running, so a statement
    // that re-enters this module (a nested call) never meets a held borrow.
    let key = (sql, schema.to_string());
    let cached = PLANS.with(|plans| plans.borrow().get(&key).cloned());
    let plan = match cached {
        Some(plan) => plan,
        None => {
            let types: Vec<PgOid> = args.iter().map(|a| PgOid::from(a.oid())).collect();
            let text = sql.replace("@extschema@", schema);
            let plan = Rc::new(
                client
                    .prepare_mut(text.as_str(), &types)
                    .unwrap_or_else(|e| panic!("leaderlock: cannot prepare statement: {e}"))
                    .keep(),
            );
            PLANS.with(|plans| plans.borrow_mut().insert(key, Rc::clone(&plan)));
            plan
        }
    };
    client
        .select(&*plan, None, args)
        .unwrap_or_else(|e| panic!("leaderlock: statement failed: {e}"))
}

/// Runs `f` in a subtransaction, kept (released into the parent) when
/// `keep` says so of its result, rolled back otherwise: what it wrote is
/// undone, and the locks it took (rows, and the table's own) are released.
pub fn in_subtransaction<T>(f: impl FnOnce() -> T, keep: impl FnOnce(&T) -> bool) -> T {
    subtransaction(f, keep, |e| e.rethrow())
}

/// Runs `f` in a subtransaction: kept when it returns, rolled back when it
/// raises an error, which is then returned (SQLSTATE and message) instead
/// of aborting the caller's transaction: for work whose failure must not
/// undo what the transaction did before it (the history's numbering after
/// expiries).
pub fn caught<T>(f: impl FnOnce() -> T) -> Result<T, (PgSqlErrorCode, String)> {
    subtransaction(
        || Ok(f()),
        |_| true,
        |e| {
            let report = match e {
                pg_sys::panic::CaughtError::PostgresError(r)
                | pg_sys::panic::CaughtError::ErrorReport(r)
                | pg_sys::panic::CaughtError::RustPanic { ereport: r, .. } => r,
            };
            Err((report.sql_error_code(), report.message().to_owned()))
        },
    )
}

/// `f` in a subtransaction, kept when `keep` says so of its result, rolled
/// back otherwise; an error raised in it rolls it back and is `failed`'s.
fn subtransaction<T>(
    f: impl FnOnce() -> T,
    keep: impl FnOnce(&T) -> bool,
    failed: fn(pg_sys::panic::CaughtError) -> T,
) -> T {
    let (cxt, owner) = unsafe { (pg_sys::CurrentMemoryContext, pg_sys::CurrentResourceOwner) };
    let back_to_parent = move || unsafe {
        pg_sys::MemoryContextSwitchTo(cxt);
        pg_sys::CurrentResourceOwner = owner;
    };
    unsafe { pg_sys::BeginInternalSubTransaction(std::ptr::null()) };
    PgTryBuilder::new(std::panic::AssertUnwindSafe(|| {
        let result = f();
        unsafe {
            if keep(&result) {
                pg_sys::ReleaseCurrentSubTransaction();
            } else {
                pg_sys::RollbackAndReleaseCurrentSubTransaction();
            }
        }
        back_to_parent();
        result
    }))
    .catch_others(move |e| {
        unsafe {
            pg_sys::MemoryContextSwitchTo(cxt);
            pg_sys::RollbackAndReleaseCurrentSubTransaction();
        }
        back_to_parent();
        failed(e)
    })
    .execute()
}

/// The five characters of `code`'s SQLSTATE (PostgreSQL's unpack_sql_state).
pub fn sqlstate(code: PgSqlErrorCode) -> String {
    let packed = code as i32;
    (0..5)
        .map(|i| char::from(b'0' + ((packed >> (6 * i)) & 0x3F) as u8))
        .collect()
}

/// `step` in a subtransaction, for le_expire_lapsed's housekeeping where
/// no worker serves: a failure is rolled back alone and told as a WARNING
/// (`leaderlock: WHAT: message`), never undoing the call's expiries.
pub fn caught_or_warn<T>(what: &str, step: impl FnOnce() -> T) {
    if let Err((code, message)) = caught(step) {
        pg_sys::panic::ErrorReport::new(
            code,
            format!("leaderlock: {what}: {message}"),
            "caught_or_warn",
        )
        .set_detail(format!(
            "The expiries of this call are kept; it is tried again at the next call \
                 (SQLSTATE {}).",
            sqlstate(code)
        ))
        .report(PgLogLevel::WARNING);
    }
}

/// Runs `lock` (a `SELECT ... FOR NO KEY UPDATE SKIP LOCKED`) and, when it
/// locked a row, `write` under that lock, in one subtransaction: kept when
/// `write` changed something, rolled back otherwise.
///
/// Rolled back: a row that was updated after the statement's snapshot is
/// locked in its latest version and only then re-checked against the WHERE
/// clause; when the re-check fails the row is not returned but stays locked
/// until the transaction ends. A rival that lost a race would so keep the
/// winner's row locked, and the winner's renewals (which never wait) would
/// fail: for the rest of the rival's transaction, or of a waiting
/// le_acquire. Rolling the subtransaction back releases that lock.
///
/// One subtransaction for both: a lock taken in a subtransaction and a
/// write in its parent are two transaction ids on the row, which
/// PostgreSQL records as a MultiXact at every write, and every later
/// reader of the row's older versions looks up (bench/acquire_wake.sh
/// found this on top of the profile of busy handovers).
pub fn under_lock<L, T>(
    lock: impl FnOnce() -> Option<L>,
    write: impl FnOnce(L) -> Option<T>,
) -> Option<T> {
    in_subtransaction(|| lock().and_then(write), Option::is_some)
}
