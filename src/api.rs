//! The SQL-callable API (contract section 3). Each function enters its call
//! (`call.rs`: the acting role, the extension's schema), validates its
//! arguments (section 6) before touching anything, then hands over to
//! `lease.rs`. Every function pins `search_path = pg_catalog, pg_temp`;
//! writers act as the table's owner for their own statements only
//! (section 7, SECURITY.md); arguments are never spliced into SQL.

use crate::call::{self, Access};
use crate::candidates;
use crate::clock;
use crate::databases;
use crate::expiry;
use crate::input::{self, Ttl};
use crate::lease::{self, Claim};
use crate::preload;
use crate::runs;
use crate::session_leases;
use crate::settings;
use crate::value::JsonbText;
use crate::waiters;
use crate::worker_wakeup;
use pgrx::prelude::*;
use std::ffi::{c_char, c_int, CString};

/// The arguments le_try_acquire and le_acquire share, checked (contract 6)
/// before anything is touched.
struct Asked<'a> {
    key: &'a str,
    id: &'a str,
    ttl: Ttl,
    session_bound: bool,
    value: Option<JsonbText>,
    slots: i32,
}

impl<'a> Asked<'a> {
    fn checked(
        key: Option<&'a str>,
        id: Option<&'a str>,
        ttl: Option<Interval>,
        session_bound: Option<bool>,
        value: Option<JsonbText>,
        slots: Option<i32>,
    ) -> Asked<'a> {
        let key = input::name("key", key);
        let id = input::name("id", id);
        let ttl = input::ttl(ttl);
        let session_bound = input::session_bound(session_bound);
        let value = input::value(value);
        let slots = input::slots(slots, session_bound);
        Asked {
            key,
            id,
            ttl,
            session_bound,
            value,
            slots,
        }
    }

    fn claim(&self, priority: i32) -> Claim<'_> {
        Claim {
            session_bound: self.session_bound,
            value: self.value.as_ref().map(|v| v.0.as_str()),
            slots: self.slots,
            priority,
            session: None,
        }
    }
}

/// Contract 3.1: SQL `le_try_acquire` with all its arguments. Its Rust name
/// differs because the C symbols of the earlier signatures (below) belong
/// to the older schemas' functions, which a library must keep serving until
/// ALTER EXTENSION leaderlock UPDATE.
#[pg_extern(name = "le_try_acquire", volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn le_try_acquire_slots(
    key: Option<&str>,
    id: Option<&str>,
    ttl: Option<Interval>,
    session_bound: default!(Option<bool>, false),
    value: default!(Option<JsonbText>, "NULL"),
    slots: default!(Option<i32>, 1),
    fcinfo: pg_sys::FunctionCallInfo,
) -> bool {
    let _call = unsafe { call::enter(fcinfo, Access::Write) };
    let a = Asked::checked(key, id, ttl, session_bound, value, slots);
    lease::try_acquire(a.key, a.id, a.ttl, a.claim(0))
}

/// le_try_acquire(text, text, interval, boolean, jsonb) of schemas 0.3.0 to
/// 0.4.0: what that SQL function calls until ALTER EXTENSION leaderlock UPDATE.
#[pg_extern(sql = false, volatile, parallel_unsafe)]
fn le_try_acquire_with(
    key: Option<&str>,
    id: Option<&str>,
    ttl: Option<Interval>,
    session_bound: Option<bool>,
    value: Option<JsonbText>,
    fcinfo: pg_sys::FunctionCallInfo,
) -> bool {
    let _call = unsafe { call::enter(fcinfo, Access::Write) };
    let a = Asked::checked(key, id, ttl, session_bound, value, Some(1));
    lease::try_acquire(a.key, a.id, a.ttl, a.claim(0))
}

/// le_try_acquire(text, text, interval) of schema 0.1.0 and 0.2.0: what
/// that SQL function calls until ALTER EXTENSION leaderlock UPDATE.
#[pg_extern(sql = false, volatile, parallel_unsafe)]
fn le_try_acquire(
    key: Option<&str>,
    id: Option<&str>,
    ttl: Option<Interval>,
    fcinfo: pg_sys::FunctionCallInfo,
) -> bool {
    let _call = unsafe { call::enter(fcinfo, Access::Write) };
    let key = input::name("key", key);
    let id = input::name("id", id);
    let ttl = input::ttl(ttl);
    lease::try_acquire(key, id, ttl, Claim::default())
}

/// Contract 9: le_try_acquire that waits up to `wait` for the lease (for a
/// key of many slots, for a free slot), ranked by `priority` (18).
#[pg_extern(name = "le_acquire", volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
#[allow(clippy::too_many_arguments)]
fn le_acquire_slots(
    key: Option<&str>,
    id: Option<&str>,
    ttl: Option<Interval>,
    wait: Option<Interval>,
    session_bound: default!(Option<bool>, false),
    value: default!(Option<JsonbText>, "NULL"),
    slots: default!(Option<i32>, 1),
    priority: default!(Option<i32>, 0),
    fcinfo: pg_sys::FunctionCallInfo,
) -> bool {
    let _call = unsafe { call::enter(fcinfo, Access::Write) };
    let a = Asked::checked(key, id, ttl, session_bound, value, slots);
    let wait = input::wait(wait);
    let priority = input::priority(priority);
    lease::acquire(a.key, a.id, a.ttl, wait, a.claim(priority))
}

/// le_acquire(text, text, interval, interval, boolean, jsonb) of schemas
/// 0.3.0 to 0.4.0, until ALTER EXTENSION leaderlock UPDATE.
#[pg_extern(sql = false, volatile, parallel_unsafe)]
fn le_acquire(
    key: Option<&str>,
    id: Option<&str>,
    ttl: Option<Interval>,
    wait: Option<Interval>,
    session_bound: Option<bool>,
    value: Option<JsonbText>,
    fcinfo: pg_sys::FunctionCallInfo,
) -> bool {
    let _call = unsafe { call::enter(fcinfo, Access::Write) };
    let a = Asked::checked(key, id, ttl, session_bound, value, Some(1));
    let wait = input::wait(wait);
    lease::acquire(a.key, a.id, a.ttl, wait, a.claim(0))
}

/// Contract 21: opens a session of `id` for `ttl`; its handle.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn le_open_session(
    id: Option<&str>,
    ttl: Option<Interval>,
    session_bound: default!(Option<bool>, false),
    lock_delay: default!(Option<Interval>, "'0'"),
    keep_values: default!(Option<bool>, false),
    fcinfo: pg_sys::FunctionCallInfo,
) -> pgrx::Uuid {
    let _call = unsafe { call::enter(fcinfo, Access::Write) };
    let id = input::name("id", id);
    let ttl = input::ttl(ttl);
    let bound = input::session_bound(session_bound);
    let lock_delay = input::lock_delay(lock_delay);
    let keep_values = input::flag("keep_values", keep_values);
    let options = session_leases::Options {
        ttl,
        bound,
        lock_delay,
        keep_values,
    };
    session_leases::open(id, &options)
}

/// Contract 21: renews the caller's live session (every key held under
/// it) by `ttl`, or its own.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn le_renew_session(
    session: Option<pgrx::Uuid>,
    ttl: default!(Option<Interval>, "NULL"),
    fcinfo: pg_sys::FunctionCallInfo,
) -> bool {
    let _call = unsafe { call::enter(fcinfo, Access::Write) };
    let session = input::session(session);
    let ttl = input::optional_ttl(ttl);
    let renewed = session_leases::renew(session, ttl, false);
    databases::count(if renewed {
        databases::Counter::Renewed
    } else {
        databases::Counter::Refused
    });
    renewed
}

/// Contract 21: releases every key of the caller's live session and ends it.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn le_close_session(session: Option<pgrx::Uuid>, fcinfo: pg_sys::FunctionCallInfo) -> bool {
    let _call = unsafe { call::enter(fcinfo, Access::Write) };
    let session = input::session(session);
    session_leases::close(session)
}

/// Contract 21: le_try_acquire under the caller's session.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn le_try_acquire_in(
    session: Option<pgrx::Uuid>,
    key: Option<&str>,
    value: default!(Option<JsonbText>, "NULL"),
    slots: default!(Option<i32>, 1),
    fcinfo: pg_sys::FunctionCallInfo,
) -> bool {
    let _call = unsafe { call::enter(fcinfo, Access::Write) };
    acquire_in(session, key, None, value, slots, Some(0))
}

/// Contract 21: le_acquire under the caller's session.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn le_acquire_in(
    session: Option<pgrx::Uuid>,
    key: Option<&str>,
    wait: Option<Interval>,
    value: default!(Option<JsonbText>, "NULL"),
    slots: default!(Option<i32>, 1),
    priority: default!(Option<i32>, 0),
    fcinfo: pg_sys::FunctionCallInfo,
) -> bool {
    let _call = unsafe { call::enter(fcinfo, Access::Write) };
    acquire_in(session, key, Some(wait), value, slots, priority)
}

/// le_try_acquire_in (`wait` None) and le_acquire_in: their arguments
/// checked in order (contract 6), then the acquisition.
fn acquire_in(
    session: Option<pgrx::Uuid>,
    key: Option<&str>,
    wait: Option<Option<Interval>>,
    value: Option<JsonbText>,
    slots: Option<i32>,
    priority: Option<i32>,
) -> bool {
    let session = input::session(session);
    let key = input::name("key", key);
    let wait = wait.map(input::wait);
    let value = input::value(value);
    let slots = input::slots(slots, false);
    let priority = input::priority(priority);
    let claim = Claim {
        value: value.as_ref().map(|v| v.0.as_str()),
        slots,
        priority,
        ..Claim::default()
    };
    lease::acquire_in(session, key, wait, claim)
}

/// Contract 11: the live holder sets its value (NULL clears it).
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn le_proclaim(
    key: Option<&str>,
    id: Option<&str>,
    value: Option<JsonbText>,
    fcinfo: pg_sys::FunctionCallInfo,
) -> bool {
    let _call = unsafe { call::enter(fcinfo, Access::Write) };
    let key = input::name("key", key);
    let id = input::name("id", id);
    let value = input::value(value);
    lease::proclaim(key, id, value.as_ref().map(|v| v.0.as_str()))
}

/// Contract 11: the lease as one record (see `lease::LeaseNow`).
#[pg_extern(volatile, parallel_safe)]
#[search_path(pg_catalog, pg_temp)]
fn le_lease(
    key: Option<&str>,
    fcinfo: pg_sys::FunctionCallInfo,
) -> pgrx::composite_type!('static, "leaderlock_lease") {
    let _call = unsafe { call::enter(fcinfo, Access::Read) };
    let key = input::name("key", key);
    lease_record(fcinfo, key, lease::lease_now(key))
}

/// A `leaderlock_lease` record: the function's own result type, the
/// extension's leaderlock_lease, by OID (a name would be looked up in the
/// search path).
fn lease_record(
    fcinfo: pg_sys::FunctionCallInfo,
    key: &str,
    lease: lease::LeaseNow,
) -> pgrx::composite_type!('static, "leaderlock_lease") {
    let result_type = unsafe { pg_sys::get_func_rettype((*(*fcinfo).flinfo).fn_oid) };
    let mut row = PgHeapTuple::new_composite_type_by_oid(result_type)
        .unwrap_or_else(|e| error!("leaderlock: type leaderlock_lease: {e}"));
    let remaining = lease
        .remaining
        .map(|us| Interval::new(0, 0, us).expect("a microseconds-only interval is valid"));
    set_field(&mut row, "key", Some(key.to_string()));
    set_field(&mut row, "holder", lease.holder);
    set_field(&mut row, "term", lease.term);
    set_field(&mut row, "expires_at", lease.expires_at.map(clock::ts));
    set_field(&mut row, "remaining", remaining);
    set_field(&mut row, "value", lease.value.map(JsonbText));
    row
}

/// Contract 18: the candidates waiting in le_acquire for `key` now, in the
/// order they would be served (higher priority first, then longest waiting).
#[pg_extern(volatile, parallel_safe)]
#[search_path(pg_catalog, pg_temp)]
#[allow(clippy::type_complexity)]
fn le_candidates(
    key: Option<&str>,
    fcinfo: pg_sys::FunctionCallInfo,
) -> TableIterator<
    'static,
    (
        name!(id, String),
        name!(priority, i32),
        name!(waiting_since, TimestampWithTimeZone),
    ),
> {
    let _call = unsafe { call::enter(fcinfo, Access::Read) };
    let key = input::name("key", key);
    let rows: Vec<_> = candidates::list(key)
        .into_iter()
        .map(|(id, priority, since)| (id, priority, clock::ts(since)))
        .collect();
    TableIterator::new(rows)
}

/// Contract 17: the live holders of `key`, one record each (of a key of
/// one slot: its holder while live).
#[pg_extern(volatile, parallel_safe)]
#[search_path(pg_catalog, pg_temp)]
fn le_holders(
    key: Option<&str>,
    fcinfo: pg_sys::FunctionCallInfo,
) -> SetOfIterator<'static, pgrx::composite_type!('static, "leaderlock_lease")> {
    let _call = unsafe { call::enter(fcinfo, Access::Read) };
    let key = input::name("key", key);
    let rows: Vec<_> = lease::holders(key)
        .into_iter()
        .map(|l| lease_record(fcinfo, key, l))
        .collect();
    SetOfIterator::new(rows)
}

fn set_field<T: IntoDatum>(row: &mut PgHeapTuple<'static, AllocatedByRust>, name: &str, value: T) {
    row.set_by_name(name, value)
        .unwrap_or_else(|e| error!("leaderlock: leaderlock_lease.{name}: {e}"));
}

/// Contract 3.2: SQL `le_renew`; with `term`, only the tenure of that term
/// is renewed (a renewal left over from an earlier tenure of the same id
/// never extends a later one).
#[pg_extern(name = "le_renew", volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn le_renew_term(
    key: Option<&str>,
    id: Option<&str>,
    ttl: default!(Option<Interval>, "NULL"),
    term: default!(Option<i64>, "NULL"),
    fcinfo: pg_sys::FunctionCallInfo,
) -> bool {
    let _call = unsafe { call::enter(fcinfo, Access::Write) };
    let key = input::name("key", key);
    let id = input::name("id", id);
    let ttl = input::optional_ttl(ttl);
    lease::renew(key, id, ttl, term)
}

/// le_renew(text, text, interval) of schemas 0.1.0 to 0.4.0, until ALTER
/// EXTENSION leaderlock UPDATE.
#[pg_extern(sql = false, volatile, parallel_unsafe)]
fn le_renew(
    key: Option<&str>,
    id: Option<&str>,
    ttl: Option<Interval>,
    fcinfo: pg_sys::FunctionCallInfo,
) -> bool {
    let _call = unsafe { call::enter(fcinfo, Access::Write) };
    let key = input::name("key", key);
    let id = input::name("id", id);
    let ttl = input::optional_ttl(ttl);
    lease::renew(key, id, ttl, None)
}

/// Contract 3.3: SQL `le_release`; with `term`, only the tenure of that
/// term is released (a release left over from an earlier tenure of the
/// same id never ends a later one).
#[pg_extern(name = "le_release", volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn le_release_term(
    key: Option<&str>,
    id: Option<&str>,
    term: default!(Option<i64>, "NULL"),
    fcinfo: pg_sys::FunctionCallInfo,
) -> bool {
    let _call = unsafe { call::enter(fcinfo, Access::Write) };
    let key = input::name("key", key);
    let id = input::name("id", id);
    lease::release(key, id, term)
}

/// le_release(text, text) of schemas 0.1.0 to 0.4.0, until ALTER EXTENSION
/// leaderlock UPDATE.
#[pg_extern(sql = false, volatile, parallel_unsafe)]
fn le_release(key: Option<&str>, id: Option<&str>, fcinfo: pg_sys::FunctionCallInfo) -> bool {
    let _call = unsafe { call::enter(fcinfo, Access::Write) };
    let key = input::name("key", key);
    let id = input::name("id", id);
    lease::release(key, id, None)
}

/// Contract 16: renews every lease `id` holds live by its own ttl; how many.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn le_renew_all(id: Option<&str>, fcinfo: pg_sys::FunctionCallInfo) -> i32 {
    let _call = unsafe { call::enter(fcinfo, Access::Write) };
    let id = input::name("id", id);
    i32::try_from(lease::renew_all(id)).unwrap_or(i32::MAX)
}

/// Contract 16: releases every lease `id` holds live, announcing each; how many.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn le_release_all(id: Option<&str>, fcinfo: pg_sys::FunctionCallInfo) -> i32 {
    let _call = unsafe { call::enter(fcinfo, Access::Write) };
    let id = input::name("id", id);
    i32::try_from(lease::release_all(id)).unwrap_or(i32::MAX)
}

/// Contract 13: vacates the live lease of `key`, whoever holds it; for
/// superusers and members of role `leaderlock_admin`.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn le_force_release(key: Option<&str>, fcinfo: pg_sys::FunctionCallInfo) -> bool {
    let _call = unsafe { call::enter(fcinfo, Access::Write) };
    let key = input::name("key", key);
    input::may_force_release();
    lease::force_release(key)
}

/// Contract 14: per-database counters since the database's counting began
/// (server start, or its first call after): one row per database with
/// any. Empty when the library is not preloaded.
#[pg_extern(volatile, parallel_safe)]
#[allow(clippy::type_complexity)]
fn le_database_stats() -> TableIterator<
    'static,
    (
        name!(datid, pg_sys::Oid),
        name!(datname, String),
        name!(acquired, i64),
        name!(renewed, i64),
        name!(refused, i64),
        name!(released, i64),
        name!(expired, i64),
        name!(since, TimestampWithTimeZone),
    ),
> {
    let rows: Vec<_> = databases::claimed()
        .filter_map(|(oid, slot)| {
            let oid = pg_sys::Oid::from(oid);
            // A dropped database keeps its slot until the launcher frees it.
            let name = databases::name_of(oid)?;
            let [acquired, renewed, refused, released, expired] = slot
                .counters()
                .map(|c| i64::try_from(c).unwrap_or(i64::MAX));
            Some((
                oid,
                name,
                acquired,
                renewed,
                refused,
                released,
                expired,
                clock::ts(slot.since()),
            ))
        })
        .collect();
    TableIterator::new(rows)
}

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
    runs::claim(job, due, id, ttl, grace)
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

// The per-database counters as a view, readable by all (contract 14).
extension_sql_file!(
    "ddl/database_stats_view.sql",
    name = "database_stats_view",
    requires = [le_database_stats]
);

#[pg_extern(volatile, parallel_safe)]
#[search_path(pg_catalog, pg_temp)]
fn le_leader(key: Option<&str>, fcinfo: pg_sys::FunctionCallInfo) -> Option<String> {
    let _call = unsafe { call::enter(fcinfo, Access::Read) };
    let key = input::name("key", key);
    lease::leader(key)
}

/// True when the background worker runs and serves this database: read
/// from shared memory, so every role gets the same answer.
#[pg_extern(volatile, parallel_safe)]
#[search_path(pg_catalog, pg_temp)]
fn le_worker_running() -> bool {
    databases::worker_serves_this_database()
}

/// Contract 19: what this server offers, as one jsonb object with the keys
/// of the portable edition's (docs/sql-reference.md), so that client code can
/// adapt to either edition and to a library that is not preloaded.
#[pg_extern(volatile, parallel_safe)]
#[search_path(pg_catalog, pg_temp)]
fn le_capabilities() -> pgrx::JsonB {
    let preloaded = preload::preloaded();
    let seconds = |micros: i64| -> serde_json::Value {
        // Whole seconds as integers, as the portable edition's numeric gives them.
        if micros % 1_000_000 == 0 {
            (micros / 1_000_000).into()
        } else {
            (micros as f64 / 1e6).into()
        }
    };
    pgrx::JsonB(serde_json::json!({
        "edition": "compiled",
        "version": env!("CARGO_PKG_VERSION"),
        "worker": databases::worker_serves_this_database(),
        "blocking_acquire": if preloaded { "wakeup" } else { "polling" },
        "poll_interval_ms": if preloaded {
            serde_json::Value::Null
        } else {
            serde_json::json!([waiters::UNPRELOADED_RECHECK_MS, waiters::UNPRELOADED_RECHECK_MS])
        },
        "session_bound": input::session_bound_offered(),
        "expire_lapsed": true,
        "database_stats": preloaded,
        "max_ttl_s": seconds(settings::max_ttl_micros()),
        "max_wait_s": seconds(settings::max_wait_micros()),
        "max_slots": input::MAX_SLOTS,
        "priority": preloaded,
        "clock": if clock::monotonic_here() { "monotonic" } else { "wall" },
        "runs": true,
        "sessions": true,
    }))
}

/// Contract 2.2: now by the lease clock, the one every decision reads (the
/// wall clock where the library is not preloaded). Compare `expires_at`
/// with it, not with `now()` or `clock_timestamp()`, which follow the wall
/// clock's steps. Declared in `ddl/schema.sql` (its views read it).
#[pg_extern(sql = false, volatile, parallel_safe)]
fn le_now() -> TimestampWithTimeZone {
    clock::ts(clock::now())
}

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
    // No worker prunes runs here either (contract 22).
    runs::prune_expired_or_warn(clock::now());
    i32::try_from(vacated).unwrap_or(i32::MAX)
}

// le_assert_leader is a plain V1 C function (le_assert_leader_c below):
// the file says why.
extension_sql_file!(
    "ddl/le_assert_leader.sql",
    name = "le_assert_leader",
    requires = ["schema"]
);

// No function or type outside the extension named like one of its
// functions (the file says why): after every function exists.
extension_sql_file!("ddl/names_guard.sql", name = "names_guard", finalize);

// Index plans inside every function whatever the statistics (the file says why).
extension_sql_file!(
    "ddl/index_plans.sql",
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
        le_open_session,
        le_renew_session,
        le_close_session,
        le_try_acquire_in,
        le_acquire_in
    ]
);

/// SQLSTATE of le_assert_leader's refusal: `LE001` (class LE, leaderlock).
const NOT_LEADER_SQLSTATE: &[u8; 5] = b"LE001";

const fn make_sqlstate(s: &[u8; 5]) -> c_int {
    let mut code = 0;
    let mut i = 0;
    while i < 5 {
        code |= ((s[i] - b'0') as c_int & 0x3F) << (6 * i);
        i += 1;
    }
    code
}

unsafe extern "C-unwind" {
    fn errstart(elevel: c_int, domain: *const c_char) -> bool;
    fn errcode(sqlerrcode: c_int) -> c_int;
    fn errmsg(fmt: *const c_char, ...) -> c_int;
    fn errhint(fmt: *const c_char, ...) -> c_int;
    fn errfinish(filename: *const c_char, lineno: c_int, funcname: *const c_char);
}

#[repr(C)]
struct AssertOutcome {
    term: i64,
    /// palloc'd refusal message, or null when `term` holds the answer.
    refusal: *mut c_char,
}

#[unsafe(no_mangle)]
#[doc(hidden)]
pub extern "C" fn pg_finfo_le_assert_leader_c() -> &'static pg_sys::Pg_finfo_record {
    const V1: pg_sys::Pg_finfo_record = pg_sys::Pg_finfo_record { api_version: 1 };
    &V1
}

/// # Safety
/// Called by PostgreSQL's fmgr with a valid `fcinfo` of three arguments.
#[unsafe(no_mangle)]
#[doc(hidden)]
pub unsafe extern "C-unwind" fn le_assert_leader_c(
    fcinfo: pg_sys::FunctionCallInfo,
) -> pg_sys::Datum {
    let outcome = unsafe { assert_leader_guarded(fcinfo) };
    if outcome.refusal.is_null() {
        return pg_sys::Datum::from(outcome.term);
    }
    unsafe {
        if errstart(PgLogLevel::ERROR as c_int, std::ptr::null()) {
            errcode(make_sqlstate(NOT_LEADER_SQLSTATE));
            errmsg(c"%s".as_ptr(), outcome.refusal);
            errhint(c"Stop acting as leader; call le_try_acquire to run for a new term.".as_ptr());
            errfinish(
                c"api.rs".as_ptr(),
                line!() as c_int,
                c"le_assert_leader".as_ptr(),
            );
        }
    }
    unreachable!("ereport(ERROR) does not return")
}

#[pg_guard]
unsafe extern "C-unwind" fn assert_leader_guarded(
    fcinfo: pg_sys::FunctionCallInfo,
) -> AssertOutcome {
    let (key, id, term) = unsafe {
        (
            pgrx::fcinfo::pg_getarg::<&str>(fcinfo, 0),
            pgrx::fcinfo::pg_getarg::<&str>(fcinfo, 1),
            pgrx::fcinfo::pg_getarg::<i64>(fcinfo, 2),
        )
    };
    // (a share lock needs the owner's rights, as a write does)
    let _call = unsafe { call::enter(fcinfo, Access::Write) };
    let key = input::name("key", key);
    let id = input::name("id", id);
    let term = input::term(term);
    match lease::assert_leader(key, id, term) {
        Ok(term) => AssertOutcome {
            term,
            refusal: std::ptr::null_mut(),
        },
        Err(refusal) => {
            let message = CString::new(refusal.message())
                .unwrap_or_else(|_| c"leaderlock: not the leader".into());
            AssertOutcome {
                term: 0,
                refusal: unsafe { pg_sys::pstrdup(message.as_ptr()) },
            }
        }
    }
}

#[cfg(test)]
mod unit {
    #[test]
    fn sqlstate_encoding_matches_postgres() {
        // ERRCODE_INVALID_PARAMETER_VALUE is MAKE_SQLSTATE('2','2','0','2','3')
        assert_eq!(
            super::make_sqlstate(b"22023"),
            pgrx::PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE as i32
        );
    }
}
