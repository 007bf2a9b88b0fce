//! le_expire_lapsed (contract 19), and the DDL that needs every function.

use crate::base::clock;
use crate::lease::expected;
use crate::lease::expiry;
use crate::lease::groups;
use crate::lease::runs;
use crate::lease::settle;
use crate::shmem::databases;
use crate::shmem::worker_wakeup;
use crate::store::call::{self, Access};
use crate::workers::numbering;
use pgrx::prelude::*;

/// Contract 19: vacate and announce every lapsed lease; returns how many.
/// Where a worker serves this database it does so at each expiry already,
/// in transactions of its own: wake it (at most ten times a second for the
/// database, whoever calls) and return 0. Elsewhere (library not
/// preloaded, database not served) do it in this call, skipping locked
/// rows; what it vacates stays locked until the caller's transaction ends,
/// as a tenure taken by le_try_acquire does (docs/sql-reference.md).
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn le_expire_lapsed(fcinfo: pg_sys::FunctionCallInfo) -> i32 {
    let _call = unsafe { call::enter(fcinfo, Access::Write) };
    if databases::worker_serves_this_database() {
        worker_wakeup::wake_worker_asked();
        return 0;
    }
    if unsafe { pg_sys::RecoveryInProgress() } {
        return 0;
    }
    let vacated = expiry::expire_all_lapsed();
    // No worker numbers the history here (contract 23), prunes runs (22),
    // settles the schedules (24), checks marks (25) nor steps groups (26).
    numbering::number_all_or_warn(clock::now());
    runs::prune_expired_or_warn(clock::now());
    settle::settle_or_warn(clock::now());
    expected::check_or_warn(clock::now());
    groups::settle_or_warn(clock::now());
    i32::try_from(vacated).unwrap_or(i32::MAX)
}

// le_assert_leader is a plain V1 C function (le_assert_leader_c below):
// the file says why.
extension_sql_file!(
    "../ddl/le_assert_leader.sql",
    name = "le_assert_leader",
    requires = ["schema"]
);

// No function or type outside the extension named like one of its
// functions (the file says why): after every function exists.
extension_sql_file!("../ddl/names_guard.sql", name = "names_guard", finalize);

// Index plans inside every function whatever the statistics (the file says why).
extension_sql_file!(
    "../ddl/index_plans.sql",
    name = "index_plans",
    requires = [
        le_try_acquire_slots,
        le_acquire_slots,
        le_renew_term,
        le_release_term,
        le_renew_all,
        le_release_all,
        le_proclaim,
        le_force_release,
        le_leader,
        le_lease,
        le_holders,
        le_claim_run,
        le_renew_run,
        le_finish_run,
        le_schedule,
        le_unschedule,
        le_pause_schedule,
        le_resume_schedule,
        le_next_due,
        le_backfill_due,
        le_expect_leader,
        le_unexpect_leader,
        le_open_session,
        le_renew_session,
        le_close_session,
        le_try_acquire_in,
        le_acquire_in,
        le_join,
        le_leave,
        le_ack,
        le_assignment
    ]
);
