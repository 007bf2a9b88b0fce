//! The one clock: the server's, as `clock_timestamp()` reads it, in
//! microseconds since 2000-01-01 (PostgreSQL's own representation). Every
//! liveness test and every expiry the extension computes reads it here.
use pgrx::prelude::*;

/// Now, by the server's clock.
pub fn now() -> i64 {
    unsafe { pg_sys::GetCurrentTimestamp() }
}

/// `micros` as a timestamptz (an error when out of range).
pub fn ts(micros: i64) -> TimestampWithTimeZone {
    TimestampWithTimeZone::try_from(micros)
        .unwrap_or_else(|_| error!("leaderlock: timestamp out of range"))
}

/// A timestamptz read from a row, as microseconds.
pub fn micros(t: Option<TimestampWithTimeZone>) -> Option<i64> {
    t.map(i64::from)
}
