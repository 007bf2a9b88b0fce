//! Reading (contracts 11, 14, 17, 18, 19, 2.2): a lease, its holders and
//! candidates, the leader, the database's counters, what the server offers,
//! the lease clock's now.

use crate::api::input::{self};
use crate::base::clock;
use crate::base::preload;
use crate::base::settings;
use crate::base::value::JsonbText;
use crate::lease::{self};
use crate::shmem::candidates;
use crate::shmem::databases;
use crate::shmem::waiters;
use crate::store::call::{self, Access};
use pgrx::prelude::*;

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
    let remaining = lease.remaining.map(crate::base::ttl::micros_interval);
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

// The per-database counters as a view, readable by all (contract 14).
extension_sql_file!(
    "../ddl/database_stats_view.sql",
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
        "schedules": true,
        "expected_leaders": true,
        "groups": true,
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
