//! The rules that decide a lease's outcomes, as plain functions: no I/O, no
//! PostgreSQL, no clock reads (every time is an argument). The extension
//! decides with them (`acquire`: what an acquisition does, from what it
//! read; `keep`: a holder's renewal and release, and the hand-over;
//! `vacate`: the worker's vacating and a session's end; `failover`: the
//! step after a promotion), the Rust client keeps its local deadline with them,
//! and the model in `tests/model.rs` explores every interleaving of calls,
//! replies, pauses, clock drift, a promotion and a clock step through them,
//! so the model checks the rules the code runs (docs/verification.md).
//! `sql` holds the same rules as SQL text, for the extension's statements.
//!
//! Times are microseconds on one clock, the caller's: the server's lease
//! clock for server decisions, the client's monotonic clock for its
//! deadline. Ids are whatever identifies a holder (`&str` in the
//! extension, small integers in the model).

pub mod acquire;
#[cfg(feature = "calendar")]
pub mod calendar;
pub mod expected;
pub mod failover;
pub mod groups;
pub mod history;
pub mod keep;
pub mod runs;
pub mod slots;
pub mod sql;
pub mod vacate;

pub use acquire::{acquisition, Acquisition};
pub use failover::promotion;
pub use keep::{hand_over, release, renewal};
pub use vacate::{session_end, vacate};

/// Microseconds.
pub type Micros = i64;

/// Terms one WAL timeline can issue before the next timeline's floor
/// (contract 8.1).
pub const TERMS_PER_TIMELINE: i64 = 1 << 32;

/// The bound on how much slower than the server's clock a client's
/// monotonic clock may run, in parts per million, that the default safety
/// margin covers (a quartz clock drifts by tens of ppm; 5,000 leaves room
/// for scheduling as well).
pub const CLOCK_RATE_BOUND_PPM: i64 = 5_000;

/// A lease as a decision needs it: its holder (None when vacant), term and
/// expiry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Lease<Id> {
    pub holder: Option<Id>,
    pub term: i64,
    pub expires_at: Micros,
}

/// Contract 2: live when it has a holder and its expiry is later than now.
/// At `expires_at` itself it has lapsed (a rival may take it then).
pub fn is_live(has_holder: bool, expires_at: Option<Micros>, now: Micros) -> bool {
    has_holder && expires_at.is_some_and(|e| e > now)
}

impl<Id: PartialEq> Lease<Id> {
    pub fn is_live(&self, now: Micros) -> bool {
        is_live(self.holder.is_some(), Some(self.expires_at), now)
    }

    /// Held live by `id`.
    pub fn is_held_by(&self, id: &Id, now: Micros) -> bool {
        self.is_live(now) && self.holder.as_ref() == Some(id)
    }
}

/// The lowest term a tenure may get on WAL timeline `timeline` (8.1):
/// `(timeline - 1) * 2^32 + 1`, so that terms issued after a promotion are
/// above every term an older timeline could have issued. None past the
/// last timeline that fits.
pub fn term_floor(timeline: u32) -> Option<i64> {
    i64::from(timeline.max(1) - 1)
        .checked_mul(TERMS_PER_TIMELINE)
        .map(|base| base + 1)
}

/// The term of a new tenure (2.1, 8.1): one above the key's last, never
/// below the floor; the floor itself for a key never held.
pub fn next_term(previous: Option<i64>, floor: i64) -> i64 {
    previous.map_or(floor, |p| (p + 1).max(floor))
}

/// Contract 3.2 to 3.4: `id` leads, so that its renewal, release or
/// assertion acts: it holds the lease live (a lapsed one must be acquired
/// again, in a new term) and, when the call names a term, in that term: a
/// call sent in one tenure and served after a later one of the same id
/// began must not act on the later one.
pub fn leads<Id: PartialEq>(lease: &Lease<Id>, id: &Id, term: Option<i64>, now: Micros) -> bool {
    lease.is_held_by(id, now) && term.is_none_or(|t| t == lease.term)
}

/// Contract 5: the worker vacates a lease that has a holder and lapsed.
pub fn may_vacate<Id: PartialEq>(lease: &Lease<Id>, now: Micros) -> bool {
    lease.holder.is_some() && !lease.is_live(now)
}

/// The expiry a lease gets from a grant or a renewal at `now`.
pub fn expiry(now: Micros, ttl: Micros) -> Micros {
    now.saturating_add(ttl)
}

/// Contract 8.2: after a promotion, a held lease lasts exactly its ttl from
/// the failover step, taken at `now` on the new primary's lease clock:
/// every holder heard its answer before the promotion, so its window closes
/// before then, and a stored expiry set by the old primary's clock (another
/// host's) could be far ahead.
pub fn expiry_after_promotion(now: Micros, ttl: Micros) -> Micros {
    expiry(now, ttl)
}

/// The client's safety margin for a ttl: what its clock may lose against
/// the server's over one ttl at `rate_bound_ppm`, rounded up.
pub fn margin(ttl: Micros, rate_bound_ppm: i64) -> Micros {
    let scaled = i128::from(ttl) * i128::from(rate_bound_ppm);
    let m = (scaled + 999_999) / 1_000_000;
    m.clamp(0, i128::from(ttl)) as Micros
}

/// How long after the *send* time of the call that granted or renewed its
/// lease a client may act as leader: the server set the expiry after the
/// call was sent, so the window, counted from the send on the client's own
/// clock and shortened by the margin, closes before the server's expiry.
/// (Counted from the reply it would not: the reply may come late.)
pub fn window(ttl: Micros, margin: Micros) -> Micros {
    ttl - margin
}

/// Contract 18: the order in which waiting candidates are served, greatest
/// first: higher priority, then the one waiting longer (`waiting_since`
/// earlier). A release hands the lease to the greatest (contract 9).
pub fn serving_rank(priority: i32, waiting_since: Micros) -> (i32, std::cmp::Reverse<Micros>) {
    (priority, std::cmp::Reverse(waiting_since))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floors_start_each_timeline_above_the_last() {
        assert_eq!(term_floor(0), Some(1));
        assert_eq!(term_floor(1), Some(1));
        assert_eq!(term_floor(2), Some(TERMS_PER_TIMELINE + 1));
        assert_eq!(next_term(Some(7), 1), 8);
        assert_eq!(
            next_term(Some(7), TERMS_PER_TIMELINE + 1),
            TERMS_PER_TIMELINE + 1
        );
        assert_eq!(next_term(None, 1), 1);
        assert_eq!(term_floor(3), Some((2 << 32) + 1));
        assert_eq!(term_floor(1 << 31), Some(((1 << 31) - 1) * (1 << 32) + 1));
        assert_eq!(term_floor((1 << 31) + 1), None);
    }

    #[test]
    fn a_lease_lapses_at_its_expiry() {
        let l = Lease {
            holder: Some(1),
            term: 1,
            expires_at: 10,
        };
        assert!(l.is_live(9));
        assert!(!l.is_live(10));
        assert!(!leads(&l, &1, None, 10));
        assert!(leads(&l, &1, Some(1), 9));
        assert!(!leads(&l, &1, Some(0), 9));
        assert!(may_vacate(&l, 10));
        assert!(!may_vacate(&l, 9));
    }

    #[test]
    fn margins_round_up() {
        assert_eq!(margin(30_000_000, CLOCK_RATE_BOUND_PPM), 150_000);
        assert_eq!(margin(4, 250_000), 1);
        assert_eq!(margin(3, 250_000), 1);
        assert_eq!(margin(4, 0), 0);
        assert_eq!(window(30, 1), 29);
    }
}
