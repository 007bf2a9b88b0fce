//! Keys expected to be led (contract 25): mark, unmark.

use crate::api::input;
use crate::base::clock;
use crate::base::settings;
use crate::lease::expected::{self, Marked};
use crate::store::call::{self, Access};
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;

fn not_owner(key: &str) -> ! {
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
        format!(
            "leaderlock: permission denied to change the mark of key {key:?}: another role made it"
        ),
        "leaderlock",
    )
    .set_hint("A mark is the role's that made it, or that holds the key now.")
    .report(PgLogLevel::ERROR);
    unreachable!("an ERROR does not return")
}

/// A role that is not a superuser marks at most
/// `leaderlock.max_jobs_per_role` keys (53400 beyond, nothing written).
fn may_mark() {
    let caller = call::caller();
    if unsafe { pg_sys::superuser_arg(caller) } {
        return;
    }
    let limit = i64::from(settings::MAX_JOBS_PER_ROLE.get());
    if expected::marks_made_by(caller) >= limit {
        ErrorReport::new(
            PgSqlErrorCode::ERRCODE_CONFIGURATION_LIMIT_EXCEEDED,
            format!(
                "leaderlock: this role has marked leaderlock.max_jobs_per_role ({limit}) keys as \
                 expected to be led; no new mark is made"
            ),
            "may_mark",
        )
        .set_hint("Unmark a key (le_unexpect_leader); a superuser may raise the limit.")
        .report(PgLogLevel::ERROR);
    }
}

/// Contract 25: marks `key` as expected to have a live holder: each time
/// it stays without one for longer than `within`, the worker records a
/// `leaderless` interval in the history (start and end) and announces
/// both. Whether the mark changed.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn le_expect_leader(
    key: Option<&str>,
    within: Option<Interval>,
    fcinfo: pg_sys::FunctionCallInfo,
) -> bool {
    let _call = unsafe { call::enter(fcinfo, Access::Write) };
    let key = input::name("key", key);
    let within = input::within(within);
    match expected::mark(key, within, clock::now(), call::caller(), may_mark) {
        Marked::Done(changed) => changed,
        Marked::NotOwner => not_owner(key),
    }
}

/// Contract 25: `key` is no longer expected to be led; whether it was.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn le_unexpect_leader(key: Option<&str>, fcinfo: pg_sys::FunctionCallInfo) -> bool {
    let _call = unsafe { call::enter(fcinfo, Access::Write) };
    let key = input::name("key", key);
    expected::unmark(key, clock::now(), call::caller()).unwrap_or_else(|| not_owner(key))
}
