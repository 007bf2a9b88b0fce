//! le_assert_leader (contract 3.4) and le_assert_partition (26), plain V1
//! C functions: the file `ddl/le_assert_leader.sql` says why.

use crate::api::input::{self};
use crate::base::clock;
use crate::lease::groups;
use crate::lease::{self};
use crate::store::call::{self, Access};
use pgrx::prelude::*;
use std::ffi::{c_char, c_int, CStr, CString};

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
    unsafe {
        answer(
            outcome,
            c"Stop acting as leader; call le_try_acquire to run for a new term.",
            c"le_assert_leader",
        )
    }
}

#[unsafe(no_mangle)]
#[doc(hidden)]
pub extern "C" fn pg_finfo_le_assert_partition_c() -> &'static pg_sys::Pg_finfo_record {
    const V1: pg_sys::Pg_finfo_record = pg_sys::Pg_finfo_record { api_version: 1 };
    &V1
}

/// Contract 26 (3.4 for a partition), le_assert_partition: the same
/// refusal, SQLSTATE LE001, as le_assert_leader's.
/// # Safety
/// Called by PostgreSQL's fmgr with a valid `fcinfo` of four arguments.
#[unsafe(no_mangle)]
#[doc(hidden)]
pub unsafe extern "C-unwind" fn le_assert_partition_c(
    fcinfo: pg_sys::FunctionCallInfo,
) -> pg_sys::Datum {
    let outcome = unsafe { assert_partition_guarded(fcinfo) };
    unsafe {
        answer(
            outcome,
            c"Stop acting on the partition; read le_assignment again.",
            c"le_assert_partition",
        )
    }
}

/// The term, or the refusal raised out here, where no Rust frame is left.
unsafe fn answer(outcome: AssertOutcome, hint: &CStr, function: &CStr) -> pg_sys::Datum {
    if outcome.refusal.is_null() {
        return pg_sys::Datum::from(outcome.term);
    }
    unsafe {
        if errstart(PgLogLevel::ERROR as c_int, std::ptr::null()) {
            errcode(make_sqlstate(NOT_LEADER_SQLSTATE));
            errmsg(c"%s".as_ptr(), outcome.refusal);
            errhint(c"%s".as_ptr(), hint.as_ptr());
            errfinish(c"api.rs".as_ptr(), line!() as c_int, function.as_ptr());
        }
    }
    unreachable!("ereport(ERROR) does not return")
}

/// A refusal's message as `AssertOutcome` carries it (palloc'd).
fn refused(message: String) -> AssertOutcome {
    let message = CString::new(message).unwrap_or_else(|_| c"leaderlock: not the leader".into());
    AssertOutcome {
        term: 0,
        refusal: unsafe { pg_sys::pstrdup(message.as_ptr()) },
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn assert_partition_guarded(
    fcinfo: pg_sys::FunctionCallInfo,
) -> AssertOutcome {
    let (group, partition, member, term) = unsafe {
        (
            pgrx::fcinfo::pg_getarg::<&str>(fcinfo, 0),
            pgrx::fcinfo::pg_getarg::<i32>(fcinfo, 1),
            pgrx::fcinfo::pg_getarg::<&str>(fcinfo, 2),
            pgrx::fcinfo::pg_getarg::<i64>(fcinfo, 3),
        )
    };
    let _call = unsafe { call::enter(fcinfo, Access::Write) };
    let group = input::name("group", group);
    let partition = input::partition(partition);
    let member = input::name("member", member);
    let term = input::term(term);
    match groups::assert_owner(group, partition, member, term, clock::now()) {
        Some(term) => AssertOutcome {
            term,
            refusal: std::ptr::null_mut(),
        },
        None => refused(format!(
            "leaderlock: {member:?} does not own partition {partition} of group {group:?}{}",
            term.map_or(String::new(), |t| format!(" in term {t}"))
        )),
    }
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
        Err(refusal) => refused(refusal.message()),
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
