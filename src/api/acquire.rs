//! Acquiring a key (contracts 3.1, 9, 17, 18, 21): le_try_acquire,
//! le_acquire and their forms under a session, and the older schemas'
//! signatures of the first two.

use crate::api::input::{self, Ttl};
use crate::base::value::JsonbText;
use crate::lease::{self, Claim, SlotsDiffer};
use crate::store::call::{self, Access};
use pgrx::prelude::*;

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

    fn done(&self, acquired: Result<bool, SlotsDiffer>) -> bool {
        done(self.key, self.slots, acquired)
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

/// Whether the key was acquired; an error (22023) when it has live holders
/// and admits another number of slots than `asked` (contract 17).
fn done(key: &str, asked: i32, acquired: Result<bool, SlotsDiffer>) -> bool {
    acquired.unwrap_or_else(|SlotsDiffer(has)| input::slots_differ(key, has, asked))
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
    a.done(lease::try_acquire(a.key, a.id, a.ttl, a.claim(0)))
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
    a.done(lease::try_acquire(a.key, a.id, a.ttl, a.claim(0)))
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
    done(key, 1, lease::try_acquire(key, id, ttl, Claim::default()))
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
    a.done(lease::acquire(a.key, a.id, a.ttl, wait, a.claim(priority)))
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
    a.done(lease::acquire(a.key, a.id, a.ttl, wait, a.claim(0)))
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
    done(key, slots, lease::acquire_in(session, key, wait, claim))
}
