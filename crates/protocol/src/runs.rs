//! Contract 22: what a claim of a scheduled run does, decided by the
//! extension (`src/lease/runs.rs`) and the model (`tests/runs_model.rs`)
//! alike. Which run may be locked is the rule of the locking statement's
//! WHERE (unfinished, and its last claim not live: `not_live!`); a job's
//! next term is `next_term`.

use crate::Micros;

/// What a claim does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunClaim {
    /// Nothing: due before what the retention keeps (its row may be gone,
    /// or a claim of it forgotten), finished or missed already, claimed
    /// live by another, or its row locked by a concurrent claim.
    Refuse,
    /// Past its misfire grace: recorded missed, once, and not run.
    Missed,
    /// Claimed, in the job's next term.
    Claim,
}

/// Before anything is written: a run due before `kept_from` (now minus the
/// retention, or a shorter retention's cut recorded in the job's row) is
/// never claimed.
pub fn run_forgotten(due: Micros, kept_from: Micros) -> bool {
    due < kept_from
}

/// Under the job's lock: what a claim at `now` of the run due at `due`,
/// with `grace` (None: no limit), does; `locked`: the run's row was locked
/// by the statement that holds the rule (unfinished, last claim not live).
pub fn run_claim(due: Micros, now: Micros, grace: Option<Micros>, locked: bool) -> RunClaim {
    if !locked {
        RunClaim::Refuse
    } else if grace.is_some_and(|g| now > due.saturating_add(g)) {
        RunClaim::Missed
    } else {
        RunClaim::Claim
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_is_claimed_once_within_its_grace() {
        assert_eq!(run_claim(10, 12, Some(2), true), RunClaim::Claim);
        assert_eq!(run_claim(10, 13, Some(2), true), RunClaim::Missed);
        assert_eq!(run_claim(10, 99, None, true), RunClaim::Claim);
        assert_eq!(run_claim(10, 11, Some(2), false), RunClaim::Refuse);
        assert!(run_forgotten(9, 10));
        assert!(!run_forgotten(10, 10));
    }
}
