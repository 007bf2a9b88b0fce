//! Which statements fit the installed schema. A newer library serves an
//! older schema until `ALTER EXTENSION leaderlock UPDATE` (contract 15).
//!
//! Support window: the library of version N serves every schema from 0.1.0
//! up to N, for as long as it takes to run the update; the statements for
//! older schemas (`queries::*_0_2`, `*_0_3`) are only ever picked here.
//! A schema that drops a version from the window says so in UPDATING.md.
use crate::store::call;
use crate::store::queries;
use pgrx::pg_sys;

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Level {
    /// 0.1.0 and 0.2.0.
    V0_2,
    /// value and session binding.
    V0_3,
    /// owner and per-key counters.
    V0_4,
    /// keys of many slots (contract 17).
    V0_5,
}

/// Which columns the table has. Catalog cache lookups, no query: cheap
/// enough to ask on every call, so a session follows an ALTER EXTENSION
/// ... UPDATE (or a DROP and CREATE of another version) at once.
fn level() -> Level {
    unsafe {
        // In the extension's schema, as the statements name it.
        let table = pg_sys::get_relname_relid(c"leaderlock".as_ptr(), call::current().schema);
        let has = |column: &std::ffi::CStr| {
            table != pg_sys::InvalidOid
                && pg_sys::get_attnum(table, column.as_ptr())
                    != pg_sys::InvalidAttrNumber as pg_sys::AttrNumber
        };
        if has(c"slots") {
            Level::V0_5
        } else if has(c"owner") {
            Level::V0_4
        } else if has(c"session_pid") {
            Level::V0_3
        } else {
            Level::V0_2
        }
    }
}

/// Whether session-bound leases exist in this schema.
pub fn has_0_3() -> bool {
    level() >= Level::V0_3
}

/// Whether keys of many slots exist in this schema (contract 17).
pub fn has_slots() -> bool {
    level() >= Level::V0_5
}

/// Whether the history of transitions exists in this schema (contract 23).
pub fn has_history() -> bool {
    unsafe {
        pg_sys::get_relname_relid(c"leaderlock_history_head".as_ptr(), call::current().schema)
            != pg_sys::InvalidOid
    }
}

/// `pick`, with the statement for 0.5.0 (sessions, contract 21) apart.
fn pick5(
    v0_5: &'static str,
    v0_4: &'static str,
    v0_3: &'static str,
    v0_2: &'static str,
) -> &'static str {
    if level() == Level::V0_5 {
        v0_5
    } else {
        pick(v0_4, v0_3, v0_2)
    }
}

fn pick(v0_4: &'static str, v0_3: &'static str, v0_2: &'static str) -> &'static str {
    match level() {
        Level::V0_5 | Level::V0_4 => v0_4,
        Level::V0_3 => v0_3,
        Level::V0_2 => v0_2,
    }
}

pub fn read_lease() -> &'static str {
    if has_slots() {
        return queries::READ_LEASE;
    }
    let old = queries::READ_LEASE_0_3;
    pick(queries::READ_LEASE_0_4, old, old)
}

pub fn lock_acquirable() -> &'static str {
    if has_slots() {
        return queries::LOCK_ACQUIRABLE;
    }
    let old = queries::LOCK_ACQUIRABLE_0_3;
    pick(queries::LOCK_ACQUIRABLE_0_4, old, old)
}

pub fn lock_own() -> &'static str {
    if has_slots() {
        return queries::LOCK_OWN;
    }
    let old = queries::LOCK_OWN_0_3;
    pick(queries::LOCK_OWN_0_4, old, old)
}

/// le_force_release's lock (the function exists from 0.4.0 on).
pub fn lock_live() -> &'static str {
    if has_slots() {
        queries::LOCK_LIVE
    } else {
        queries::LOCK_LIVE_0_4
    }
}

pub fn renew() -> &'static str {
    let old = queries::RENEW_0_3;
    pick5(queries::RENEW, queries::RENEW_0_4, old, old)
}

pub fn share_lock_lease() -> &'static str {
    let old = queries::SHARE_LOCK_LEASE_0_3;
    pick5(
        queries::SHARE_LOCK_LEASE,
        queries::SHARE_LOCK_LEASE_0_4,
        old,
        old,
    )
}

pub fn insert_first_term() -> &'static str {
    pick5(
        queries::INSERT_FIRST_TERM,
        queries::INSERT_FIRST_TERM_0_4,
        queries::INSERT_FIRST_TERM_0_3,
        queries::INSERT_FIRST_TERM_0_2,
    )
}

pub fn start_term() -> &'static str {
    pick5(
        queries::START_TERM,
        queries::START_TERM_0_4,
        queries::START_TERM_0_3,
        queries::START_TERM_0_2,
    )
}

/// le_leader's read (the 0.3.0 schema reads as 0.4.0's).
pub fn live_holder() -> &'static str {
    if has_slots() {
        queries::LIVE_HOLDER
    } else {
        queries::LIVE_HOLDER_0_4
    }
}

/// le_lease's read.
pub fn lease_row() -> &'static str {
    if has_slots() {
        queries::LEASE_ROW
    } else {
        queries::LEASE_ROW_0_4
    }
}

/// le_renew_all's statement (from 0.4.0 on).
pub fn renew_all() -> &'static str {
    if has_slots() {
        queries::RENEW_ALL
    } else {
        queries::RENEW_ALL_0_4
    }
}

/// le_release_all's lock (from 0.4.0 on).
pub fn lock_all_own() -> &'static str {
    if has_slots() {
        queries::LOCK_ALL_OWN
    } else {
        queries::LOCK_ALL_OWN_0_4
    }
}

pub fn vacate() -> &'static str {
    pick(queries::VACATE, queries::VACATE_0_3, queries::VACATE_0_2)
}

pub fn vacate_keys() -> &'static str {
    pick(
        queries::VACATE_KEYS,
        queries::VACATE_KEYS_0_3,
        queries::VACATE_KEYS_0_2,
    )
}
