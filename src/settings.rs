//! Settings (GUCs), all under `leaderlock.`.

use pgrx::{GucContext, GucFlags, GucRegistry, GucSetting};
use std::ffi::CString;

/// Database the background worker serves (contract 1).
pub static DATABASE: GucSetting<Option<CString>> =
    GucSetting::<Option<CString>>::new(Some(c"postgres"));

/// Upper bound on any ttl, in seconds (contract 6). Default 1 day.
pub static MAX_TTL: GucSetting<i32> = GucSetting::<i32>::new(86_400);

/// Longest sleep of the worker between two checks, in milliseconds. The
/// worker normally sleeps until the next expiry and is woken early by a
/// commit that sets an earlier one; this bounds the sleep regardless.
pub static NAPTIME: GucSetting<i32> = GucSetting::<i32>::new(1_000);

/// Longest `wait` of le_acquire, in seconds. Default 5 minutes.
pub static MAX_WAIT: GucSetting<i32> = GucSetting::<i32>::new(300);

pub fn init() {
    GucRegistry::define_int_guc(
        c"leaderlock.max_wait",
        c"Longest wait le_acquire may be given.",
        c"A waiting le_acquire holds its statement's snapshot, which keeps vacuum from \
          removing dead rows meanwhile; this bounds how long. Longer waits are rejected \
          with SQLSTATE 22023.",
        &MAX_WAIT,
        0,
        86_400,
        GucContext::Suset,
        GucFlags::UNIT_S,
    );
    GucRegistry::define_string_guc(
        c"leaderlock.database",
        c"Database the leaderlock background worker serves.",
        c"The worker expires lapsed leases and announces them in this database only. \
          A change takes effect on reload: the worker restarts and reconnects.",
        &DATABASE,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"leaderlock.max_ttl",
        c"Largest ttl a lease may be given.",
        c"le_try_acquire and le_renew reject a longer ttl with SQLSTATE 22023.",
        &MAX_TTL,
        1,
        i32::MAX,
        GucContext::Suset,
        GucFlags::UNIT_S,
    );
    GucRegistry::define_int_guc(
        c"leaderlock.naptime",
        c"Longest sleep of the leaderlock worker between two checks.",
        c"The worker sleeps until the next lease expiry, woken early when a shorter lease \
          commits; this caps that sleep.",
        &NAPTIME,
        10,
        3_600_000,
        GucContext::Sighup,
        GucFlags::UNIT_MS,
    );
}

/// The worker's database name, `postgres` when unset.
pub fn database() -> String {
    DATABASE
        .get()
        .and_then(|c| c.into_string().ok())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "postgres".to_string())
}

/// `leaderlock.max_ttl` in microseconds.
pub fn max_ttl_micros() -> i64 {
    i64::from(MAX_TTL.get()) * 1_000_000
}

/// `leaderlock.max_wait` in microseconds.
pub fn max_wait_micros() -> i64 {
    i64::from(MAX_WAIT.get()) * 1_000_000
}
