//! What a holder does with its lease (contracts 3.2, 3.3, 11, 13, 16):
//! renew, release, proclaim a value; an administrator's forced release.

use crate::api::input::{self};
use crate::base::value::JsonbText;
use crate::lease::{self};
use crate::store::call::{self, Access};
use pgrx::prelude::*;

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
