//! A ttl once checked (`api::input::ttl`): what every transition takes.

use pgrx::datum::DatumWithOid;
use pgrx::prelude::*;

/// A validated ttl: a positive span of time in microseconds, with no month
/// part. A day counts as exactly 24 hours: a lease lasts a duration, not a
/// calendar span, whatever the session's time zone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ttl(pub i64);

impl Ttl {
    /// The ttl as stored in the table: microseconds only, no day part, so
    /// `timestamptz + ttl` is exact in any time zone.
    pub fn as_interval(self) -> Interval {
        micros_interval(self.0)
    }

    /// A renewal's ttl as a statement's parameter: this one, or NULL (the
    /// stored ttl is kept).
    pub fn or_stored(ttl: Option<Ttl>) -> DatumWithOid<'static> {
        match ttl {
            Some(t) => t.as_interval().into(),
            None => DatumWithOid::null::<Interval>(),
        }
    }
}

/// An interval the extension stored (no month part: a day is 24 hours) in
/// microseconds.
pub fn interval_micros(value: &Interval) -> i64 {
    i64::from(value.days()) * 86_400_000_000 + value.micros()
}

/// Microseconds as an interval of microseconds only (no day or month part:
/// `timestamptz + it` is exact in any time zone); `interval_micros`'s inverse.
pub fn micros_interval(us: i64) -> Interval {
    Interval::new(0, 0, us).expect("a microseconds-only interval is always valid")
}
