//! Sessions (contract 21): open, renew, close.

use crate::api::input::{self};
use crate::lease::session_leases;
use crate::shmem::databases;
use crate::store::call::{self, Access};
use pgrx::prelude::*;

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
