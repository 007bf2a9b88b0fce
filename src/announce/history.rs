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

use crate::base::clock::ts;
use crate::shmem::worker_wakeup;
use crate::store::call;
use crate::store::plans;
use crate::store::queries;
use crate::store::schema_version;
use pgrx::datum::DatumWithOid;
use pgrx::prelude::*;
use pgrx::PgTupleDesc;

extension_sql_file!(
    "../ddl/history.sql",
    name = "history",
    requires = ["schema"]
);

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
    if !unsafe { insert_pending(context.schema, &mut values, &mut nulls) } {
        // Not as made (below): the statement does what INSERT does, with
        // the same values (all but seq, which it draws).
        let params: Vec<DatumWithOid> = (1..PENDING_TYPES.len())
            .map(|i| match nulls[i] {
                true => DatumWithOid::null_oid(PENDING_TYPES[i]),
                // SAFETY: values[i] was made above as a PENDING_TYPES[i].
                false => unsafe { DatumWithOid::new(values[i], PENDING_TYPES[i]) },
            })
            .collect();
        plans::run(queries::RECORD_HISTORY, &params, |_| ());
    }
    worker_wakeup::history_written();
}

/// The columns of `leaderlock_history_pending`, in order (`ddl/schema.sql`).
const PENDING_TYPES: [pg_sys::Oid; 8] = [
    pg_sys::INT8OID,
    pg_sys::TIMESTAMPTZOID,
    pg_sys::TEXTOID,
    pg_sys::TEXTOID,
    pg_sys::TEXTOID,
    pg_sys::INT8OID,
    pg_sys::OIDOID,
    pg_sys::TEXTOID,
];

/// Writes a row of `leaderlock_history_pending` (`seq` drawn here) and its
/// index entry directly, as `INSERT` would, without a statement: every
/// transition's transaction pays for this row, a hand-over twice, and an
/// executor set up for one row was a third of it (bench/README.md). Only
/// into the table exactly as the extension made it (found in its schema
/// by name, never by the search path): its columns, heap storage, no
/// trigger, rule or check, one ready plain btree index on `seq`. Anything
/// else (an index being rebuilt by REINDEX CONCURRENTLY, one added)
/// returns false, and the caller runs the INSERT statement, which
/// maintains whatever is there.
unsafe fn insert_pending(
    schema: pg_sys::Oid,
    values: &mut [pg_sys::Datum; 8],
    nulls: &mut [bool; 8],
) -> bool {
    let oid = |name: &std::ffi::CStr| pg_sys::get_relname_relid(name.as_ptr(), schema);
    let (table, index, sequence) = (
        oid(c"leaderlock_history_pending"),
        oid(c"leaderlock_history_pending_seq_idx"),
        oid(c"leaderlock_history_pending_seq_seq"),
    );
    if [table, index, sequence].contains(&pg_sys::InvalidOid) {
        return false;
    }
    let rel = pg_sys::table_open(table, pg_sys::RowExclusiveLock as pg_sys::LOCKMODE);
    let indexes = pg_sys::RelationGetIndexList(rel);
    let only_ours =
        !indexes.is_null() && (*indexes).length == 1 && (*(*indexes).elements).oid_value == index;
    pg_sys::list_free(indexes);
    let desc = PgTupleDesc::from_pg_unchecked((*rel).rd_att);
    let constr = (*(*rel).rd_att).constr;
    let as_made = only_ours
        && (*(*rel).rd_rel).relkind == pg_sys::RELKIND_RELATION as std::ffi::c_char
        && (*(*rel).rd_rel).relam == pg_sys::HEAP_TABLE_AM_OID
        && (*rel).trigdesc.is_null()
        && (*rel).rd_rules.is_null()
        && (constr.is_null() || (*constr).num_check == 0)
        && desc.len() == PENDING_TYPES.len()
        && desc
            .iter()
            .zip(PENDING_TYPES)
            .all(|(a, t)| !a.attisdropped && a.atttypid == t);
    if !as_made {
        pg_sys::table_close(rel, pg_sys::NoLock as pg_sys::LOCKMODE);
        return false;
    }
    let idx = pg_sys::index_open(index, pg_sys::RowExclusiveLock as pg_sys::LOCKMODE);
    let info = pg_sys::BuildIndexInfo(idx);
    if !((*info).ii_Am == pg_sys::BTREE_AM_OID
        && (*info).ii_NumIndexAttrs == 1
        && (*info).ii_IndexAttrNumbers[0] == 1
        && (*info).ii_Expressions.is_null()
        && (*info).ii_Predicate.is_null()
        && !(*info).ii_Unique
        && (*info).ii_ReadyForInserts)
    {
        pg_sys::index_close(idx, pg_sys::NoLock as pg_sys::LOCKMODE);
        pg_sys::table_close(rel, pg_sys::NoLock as pg_sys::LOCKMODE);
        return false;
    }
    // nextval checks USAGE on the sequence: the call acts as the
    // extension's owner, the worker as a superuser.
    values[0] = pg_sys::OidFunctionCall1Coll(
        pg_sys::Oid::from(pg_sys::F_NEXTVAL),
        pg_sys::InvalidOid,
        pg_sys::Datum::from(sequence),
    );
    let tuple = pg_sys::heap_form_tuple((*rel).rd_att, values.as_mut_ptr(), nulls.as_mut_ptr());
    pg_sys::simple_heap_insert(rel, tuple);
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
        info,
    );
    pg_sys::index_close(idx, pg_sys::NoLock as pg_sys::LOCKMODE);
    pg_sys::table_close(rel, pg_sys::NoLock as pg_sys::LOCKMODE);
    pg_sys::heap_freetuple(tuple);
    true
}
