//! Argument validation (contract section 6). Every SQL-callable function
//! runs these before touching anything, so a rejected call changes nothing.

use crate::settings;
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;

/// Longest key or id, in bytes.
pub const MAX_NAME_BYTES: usize = 255;

const MICROS_PER_DAY: i128 = 86_400_000_000;

/// A validated ttl: a positive span of time in microseconds, with no month
/// part. A day counts as exactly 24 hours: a lease lasts a duration, not a
/// calendar span, whatever the session's time zone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ttl(pub i64);

impl Ttl {
    /// The ttl as stored in the table: microseconds only, no day part, so
    /// `timestamptz + ttl` is exact in any time zone.
    pub fn as_interval(self) -> Interval {
        Interval::new(0, 0, self.0).expect("a microseconds-only interval is always valid")
    }
}

fn reject(code: PgSqlErrorCode, message: String, hint: Option<&str>) -> ! {
    let mut report = ErrorReport::new(code, message, "leaderlock");
    if let Some(hint) = hint {
        report = report.set_hint(hint);
    }
    report.report(PgLogLevel::ERROR);
    unreachable!("an ERROR does not return")
}

/// `key` or `id`: not NULL, not empty, at most 255 bytes.
pub fn name<'a>(arg: &str, value: Option<&'a str>) -> &'a str {
    let Some(value) = value else {
        reject(
            PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
            format!("leaderlock: {arg} must not be NULL"),
            None,
        );
    };
    if value.is_empty() {
        reject(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("leaderlock: {arg} must not be empty"),
            None,
        );
    }
    if value.len() > MAX_NAME_BYTES {
        reject(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!(
                "leaderlock: {arg} is {} bytes long; the limit is {MAX_NAME_BYTES} bytes",
                value.len()
            ),
            None,
        );
    }
    value
}

/// A required ttl.
pub fn ttl(value: Option<Interval>) -> Ttl {
    let Some(value) = value else {
        reject(
            PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
            "leaderlock: ttl must not be NULL".to_string(),
            None,
        );
    };
    check_ttl(value)
}

/// An optional ttl (le_renew): NULL keeps the stored one.
pub fn optional_ttl(value: Option<Interval>) -> Option<Ttl> {
    value.map(check_ttl)
}

fn check_ttl(value: Interval) -> Ttl {
    if value.months() != 0 {
        reject(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("leaderlock: ttl must not have a month or year part (got {value})"),
            Some("A month has no fixed length; give the ttl in days, hours, minutes or seconds."),
        );
    }
    let total = i128::from(value.days()) * MICROS_PER_DAY + i128::from(value.micros());
    if total <= 0 {
        reject(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("leaderlock: ttl must be positive (got {value})"),
            None,
        );
    }
    let max = settings::max_ttl_micros();
    if total > i128::from(max) {
        reject(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!(
                "leaderlock: ttl {value} is above leaderlock.max_ttl ({})",
                seconds(max)
            ),
            Some("Give a shorter ttl, or raise leaderlock.max_ttl (superuser)."),
        );
    }
    Ttl(total as i64)
}

/// `term` of le_assert_leader: NULL (no check) or not negative.
pub fn term(value: Option<i64>) -> Option<i64> {
    if let Some(term) = value {
        if term < 0 {
            reject(
                PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                format!("leaderlock: term must not be negative (got {term})"),
                None,
            );
        }
    }
    value
}

/// Microseconds as a short human duration, e.g. `86400s` or `0.25s`.
pub fn seconds(micros: i64) -> String {
    if micros % 1_000_000 == 0 {
        format!("{}s", micros / 1_000_000)
    } else {
        let s = format!("{:.6}", micros as f64 / 1e6);
        format!("{}s", s.trim_end_matches('0'))
    }
}
