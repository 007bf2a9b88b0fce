//! Numbering the history (contract 23, `announce::history` says why rows
//! are numbered after they commit) and pruning it by the retention: the
//! worker's, or le_expire_lapsed's where no worker serves the database.

use crate::announce::history::BATCH;
use crate::base::clock::ts;
use crate::base::settings;
use crate::lease::failover;
use crate::store::plans;
use crate::store::queries;
use crate::store::schema_version;
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;

/// `number_and_prune` until no rows are left for another round, in a
/// subtransaction: a numbering that fails (a table changed behind the
/// extension, a publication it cannot delete under) is rolled back alone
/// and told as a WARNING, never undoing what the caller's transaction did
/// before it (le_expire_lapsed's expiries); the next call tries again.
pub fn number_all_or_warn(now: i64) {
    if let Err((code, message)) = plans::caught(|| while number_and_prune(now) {}) {
        ErrorReport::new(
            code,
            format!("leaderlock: the history was not numbered: {message}"),
            "number_all_or_warn",
        )
        .set_detail(format!(
            "The expiries of this call are kept; the numbering is tried again at the next \
             call (SQLSTATE {}).",
            plans::sqlstate(code)
        ))
        .report(PgLogLevel::WARNING);
    }
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
