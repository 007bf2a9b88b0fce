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
use pgrx::datum::DatumWithOid;
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
    plans::run(
        queries::RECORD_HISTORY,
        &[
            ts(at).into(),
            event.into(),
            key.into(),
            holder.map_or_else(DatumWithOid::null::<&str>, Into::into),
            term.map_or_else(DatumWithOid::null::<i64>, Into::into),
            role.map_or_else(DatumWithOid::null::<pg_sys::Oid>, Into::into),
            payload.into(),
        ],
        |_| (),
    );
    worker_wakeup::history_written();
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
