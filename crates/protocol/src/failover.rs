//! Contract 8.2: the failover step, decided by the extension
//! (`src/lease/failover.rs`) and by the model (`tests/model.rs`) alike:
//! whether held leases already outlast the server's move to its timeline,
//! and if not, from when each lasts its ttl again. The statements that
//! write the new expiries are built from `expiry!` (`sql.rs`), which
//! mirrors `expiry_after_promotion`.

use crate::Micros;

/// What the failover step does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Held leases already outlast this server's timeline (and its lease
    /// clock's start): nothing to do, and new tenures may start.
    Covered,
    /// A promotion (or a recovery's end) began a later timeline: every
    /// held lease lasts exactly its ttl from `from`
    /// (`expiry_after_promotion`).
    Promoted { from: Micros },
    /// Same timeline, but the lease clock started afresh at `from` (the
    /// server's start: another boot of the host, 2.2): every held lease
    /// lasts at least its ttl from then.
    ClockFresh { from: Micros },
}

/// Contract 8.2: the step on a server writing on `timeline`, at `now`,
/// where held leases were last made to outlast timeline `recorded` at
/// `recorded_at`, and the lease clock started afresh at `fresh_since`
/// (None: it continues the last run's clock).
pub fn promotion(
    recorded: i64,
    recorded_at: Micros,
    timeline: u32,
    fresh_since: Option<Micros>,
    now: Micros,
) -> Step {
    let timeline = i64::from(timeline);
    if recorded >= timeline && fresh_since.is_none_or(|start| recorded_at >= start) {
        return Step::Covered;
    }
    match fresh_since {
        Some(start) if recorded >= timeline => Step::ClockFresh { from: start },
        _ => Step::Promoted { from: now },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_later_timeline_restarts_every_lease_from_the_step() {
        assert_eq!(promotion(1, 0, 1, None, 50), Step::Covered);
        assert_eq!(promotion(1, 0, 2, None, 50), Step::Promoted { from: 50 });
        assert_eq!(
            promotion(1, 0, 2, Some(40), 50),
            Step::Promoted { from: 50 }
        );
        assert_eq!(
            promotion(2, 30, 2, Some(40), 50),
            Step::ClockFresh { from: 40 }
        );
        assert_eq!(promotion(2, 45, 2, Some(40), 50), Step::Covered);
    }
}
