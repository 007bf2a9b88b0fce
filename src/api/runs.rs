//! Scheduled runs (contract 22): claim, renew, finish.

use crate::api::input::{self};
use crate::base::clock;
use crate::lease::runs;
use crate::lease::schedules;
use crate::store::call::{self, Access};
use pgrx::prelude::*;

/// Contract 22: claims the run of `job` due at `due` (on the lease clock)
/// for `id` by `ttl`; its fencing term, from the job's one sequence, or
/// NULL: finished or missed already, claimed live by another, or past its
/// `misfire_grace` (NULL: no limit), which this call then records as missed.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn le_claim_run(
    job: Option<&str>,
    due: Option<TimestampWithTimeZone>,
    id: Option<&str>,
    ttl: Option<Interval>,
    misfire_grace: default!(Option<Interval>, "NULL"),
    fcinfo: pg_sys::FunctionCallInfo,
) -> Option<i64> {
    let _call = unsafe { call::enter(fcinfo, Access::Write) };
    let job = input::name("job", job);
    let due = input::due(due);
    let id = input::name("id", id);
    let ttl = input::ttl(ttl);
    let grace = input::misfire_grace(misfire_grace);
    let now = clock::now();
    input::not_before_due(due, now);
    if let Err(why) = schedules::may_claim(job, due, call::caller()) {
        input::claim_refused(job, why);
    }
    runs::claim(job, due, id, ttl, grace, now)
}

/// Contract 22: extends `id`'s live claim of an unfinished run (of `term`
/// when named) by `ttl` (NULL: the claim's own); whether it did.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn le_renew_run(
    job: Option<&str>,
    due: Option<TimestampWithTimeZone>,
    id: Option<&str>,
    ttl: default!(Option<Interval>, "NULL"),
    term: default!(Option<i64>, "NULL"),
    fcinfo: pg_sys::FunctionCallInfo,
) -> bool {
    let _call = unsafe { call::enter(fcinfo, Access::Write) };
    let job = input::name("job", job);
    let due = input::due(due);
    let id = input::name("id", id);
    let ttl = input::optional_ttl(ttl);
    let term = input::term(term);
    runs::renew(job, due, id, ttl, term)
}

/// Contract 22: records the outcome of the run `id` claimed in `term`
/// (live, or lapsed but not claimed again since); whether it did. A
/// finished run is never claimed again.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn le_finish_run(
    job: Option<&str>,
    due: Option<TimestampWithTimeZone>,
    id: Option<&str>,
    term: Option<i64>,
    succeeded: Option<bool>,
    detail: default!(Option<&str>, "NULL"),
    fcinfo: pg_sys::FunctionCallInfo,
) -> bool {
    let _call = unsafe { call::enter(fcinfo, Access::Write) };
    let job = input::name("job", job);
    let due = input::due(due);
    let id = input::name("id", id);
    let term = input::required_term(term);
    let succeeded = input::succeeded(succeeded);
    let detail = input::detail(detail);
    runs::finish(job, due, id, term, succeeded, detail)
}
