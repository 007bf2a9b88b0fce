//! The history of transitions (contract 23). Each transition is recorded
//! by the transaction that makes it, beside its notification (`notify.rs`),
//! without a position; the worker (or `le_expire_lapsed` where none serves)
//! numbers committed rows later, in the order it finds them, and prunes the
//! oldest by the retention. Reading is SQL: `ddl/history.sql`.
//!
//! Why numbered later: a number drawn inside a transaction is not commit
//! order. A transition drawing 7 and committing after another drew 8 and
//! committed would appear behind a reader that already read 8, and a reader
//! resuming "after 8" would never see it. Numbering only committed rows,
//! one numbering at a time (the head row's lock), makes every new position
//! higher than every position any reader could have seen. Transitions of
//! one key commit one after the other (its row lock), so their positions
//! follow their terms.

use crate::call;
use crate::clock::ts;
use crate::failover;
use crate::plans;
use crate::queries;
use crate::schema_version;
use crate::settings;
use crate::worker_wakeup;
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;

extension_sql_file!("ddl/history.sql", name = "history", requires = ["schema"]);

/// Rows numbered, or pruned, per statement.
pub const BATCH: i64 = 10_000;

/// Records a transition, as notified with `payload`, in the current
/// transaction: it is in the history if and only if the transition commits.
pub fn record(
    at: i64,
    event: &str,
    key: &str,
    holder: Option<&str>,
    term: Option<i64>,
    payload: &str,
) {
    if !schema_version::has_history() {
        return; // a schema from before 0.5.0, until ALTER EXTENSION UPDATE
    }
    // The worker acts for no role.
    let context = call::current();
    let role = (!context.worker).then_some(context.caller);
    let text = |s: &str| s.into_datum().expect("text");
    let mut values = [
        pg_sys::Datum::from(0), // seq, drawn below
        ts(at).into_datum().expect("timestamptz"),
        text(event),
        text(key),
        holder.map_or(pg_sys::Datum::from(0), text),
        pg_sys::Datum::from(term.unwrap_or(0)),
        pg_sys::Datum::from(role.unwrap_or(pg_sys::InvalidOid)),
        text(payload),
    ];
    let mut nulls = [
        false,
        false,
        false,
        false,
        holder.is_none(),
        term.is_none(),
        role.is_none(),
        false,
    ];
    unsafe { insert_pending(context.schema, &mut values, &mut nulls) };
    worker_wakeup::history_written();
}

/// Writes a row of `leaderlock_history_pending` (columns as in
/// `ddl/schema.sql`, `seq` drawn here) and its index entry directly, as
/// `INSERT` would, without a statement: every transition's transaction
/// pays for this row, a hand-over twice, and an executor set up for one
/// row was a third of it (bench/README.md). The table and its index are
/// found in the extension's schema by name, not by the search path. A
/// table that is not as created (another index, a trigger, a rule, an
/// access method other than heap: each a superuser's doing) is refused
/// rather than written around.
unsafe fn insert_pending(
    schema: pg_sys::Oid,
    values: &mut [pg_sys::Datum; 8],
    nulls: &mut [bool; 8],
) {
    let oid = |name: &std::ffi::CStr| {
        let oid = pg_sys::get_relname_relid(name.as_ptr(), schema);
        if oid == pg_sys::InvalidOid {
            not_as_made(&format!("{} is missing", name.to_string_lossy()));
        }
        oid
    };
    let table = oid(c"leaderlock_history_pending");
    let index = oid(c"leaderlock_history_pending_seq_idx");
    let rel = pg_sys::table_open(table, pg_sys::RowExclusiveLock as pg_sys::LOCKMODE);
    let indexes = pg_sys::RelationGetIndexList(rel);
    let only_ours =
        !indexes.is_null() && (*indexes).length == 1 && (*(*indexes).elements).oid_value == index;
    pg_sys::list_free(indexes);
    if !only_ours
        || (*(*rel).rd_att).natts != 8
        || (*(*rel).rd_rel).relam != pg_sys::HEAP_TABLE_AM_OID
        || !(*rel).trigdesc.is_null()
        || !(*rel).rd_rules.is_null()
    {
        not_as_made("leaderlock_history_pending has been changed");
    }
    // nextval checks USAGE on the sequence: the call acts as the
    // extension's owner, the worker as a superuser.
    values[0] = pg_sys::OidFunctionCall1Coll(
        pg_sys::Oid::from(pg_sys::F_NEXTVAL),
        pg_sys::InvalidOid,
        pg_sys::Datum::from(oid(c"leaderlock_history_pending_seq_seq")),
    );
    let tuple = pg_sys::heap_form_tuple((*rel).rd_att, values.as_mut_ptr(), nulls.as_mut_ptr());
    pg_sys::simple_heap_insert(rel, tuple);
    let idx = pg_sys::index_open(index, pg_sys::RowExclusiveLock as pg_sys::LOCKMODE);
    let mut key = [values[0]];
    let mut key_null = [false];
    pg_sys::index_insert(
        idx,
        key.as_mut_ptr(),
        key_null.as_mut_ptr(),
        &mut (*tuple).t_self,
        rel,
        pg_sys::IndexUniqueCheck::UNIQUE_CHECK_NO,
        false,
        pg_sys::BuildIndexInfo(idx),
    );
    pg_sys::index_close(idx, pg_sys::NoLock as pg_sys::LOCKMODE);
    pg_sys::table_close(rel, pg_sys::NoLock as pg_sys::LOCKMODE);
    pg_sys::heap_freetuple(tuple);
}

/// Refuses to record into objects changed behind the extension (55000).
fn not_as_made(what: &str) -> ! {
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        format!("leaderlock: the history's objects are not as the extension made them: {what}"),
        "leaderlock",
    )
    .set_detail(
        "A transition writes its row into leaderlock_history_pending directly: the table must keep \
         its columns, its one index (leaderlock_history_pending_seq_idx), heap storage, and no \
         trigger or rule.",
    )
    .set_hint("Undo the change, or reinstall the extension.")
    .report(PgLogLevel::ERROR);
    unreachable!("an ERROR does not return")
}

/// Numbers the committed rows still without a position, oldest recording
/// first, and prunes what the retention lets go, unless another
/// transaction is doing so (it then numbers them). Never waits. Announces
/// the last position on channel `leaderlock_history` when it numbered
/// any (`queries::NUMBER_HISTORY`). Returns whether rows are left for
/// another round.
pub fn number_and_prune(now: i64) -> bool {
    if !schema_version::has_history() {
        return false;
    }
    let Some(pruned) = plans::run(queries::LOCK_HISTORY_HEAD, &[], |rows| {
        rows.first().get::<i64>(1).ok().flatten()
    }) else {
        return false; // numbering elsewhere
    };
    let numbered = plans::run(
        queries::NUMBER_HISTORY,
        &[pruned.into(), failover::term_floor().into(), BATCH.into()],
        |rows| rows.first().get::<i64>(1).ok().flatten().unwrap_or(0),
    );
    let horizon = now.saturating_sub(settings::history_retention_micros());
    let keep = i64::from(settings::HISTORY_MAX_ROWS.get());
    let deleted = plans::run(
        queries::PRUNE_HISTORY,
        &[pruned.into(), ts(horizon).into(), keep.into(), BATCH.into()],
        |rows| rows.first().get::<i64>(1).ok().flatten().unwrap_or(0),
    );
    numbered >= BATCH || deleted >= BATCH
}
