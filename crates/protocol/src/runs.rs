//! Contract 22 and 24: what a claim of a scheduled run does, decided by
//! the extension (`src/lease/runs.rs`; the worker settles a due instant
//! nobody claimed with the same decision, `src/lease/schedules.rs`) and
//! the model (`tests/runs_model.rs`) alike. Which run may be locked is the rule of the locking statement's
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
    /// Claimed, in the job's next term, once the other runs' live claims
    /// are ended (overlap `replace`): the new term fences their runners off.
    Replace,
}

/// Contract 24: whether runs of one job may overlap.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Overlap {
    /// Any number of the job's runs at once (a job without a schedule).
    #[default]
    Allow,
    /// No run starts while another run of the job is claimed live: it is
    /// refused, and tried again within its grace (else it is missed).
    Forbid,
    /// A run that starts ends the other runs' live claims.
    Replace,
}

impl Overlap {
    /// The policy named `name` (`allow`, `forbid`, `replace`).
    pub fn named(name: &str) -> Option<Overlap> {
        match name {
            "allow" => Some(Overlap::Allow),
            "forbid" => Some(Overlap::Forbid),
            "replace" => Some(Overlap::Replace),
            _ => None,
        }
    }
}

/// What a job's schedule (contract 24) asks of every claim of its runs;
/// the default for a job without one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct JobRules {
    pub overlap: Overlap,
    /// A paused schedule's runs start nowhere, and are never missed.
    pub paused: bool,
    /// Since when the schedule is judged (made, changed or resumed then):
    /// a run due before it is neither run nor recorded missed.
    pub judged_from: Option<Micros>,
}

/// Before anything is written: whether a claim of the run due at `due`
/// may do anything (claim it, or record it missed) under the job's
/// `rules`: not while the schedule is paused, nor for a run due before the
/// schedule was made, changed or resumed (a replica that looked back past
/// a change or a pause: a schedule's instants start with it).
pub fn claim_may_act(due: Micros, rules: JobRules) -> bool {
    !rules.paused && rules.judged_from.is_none_or(|j| due >= j)
}

/// Before anything is written: a run due before `kept_from` (now minus the
/// retention, or a shorter retention's cut recorded in the job's row) is
/// never claimed.
pub fn run_forgotten(due: Micros, kept_from: Micros) -> bool {
    due < kept_from
}

/// Under the job's lock: what a claim at `now` of the run due at `due`,
/// with `grace` (None: no limit), does; `locked`: the run's row was locked
/// by the statement that holds the rule (unfinished, last claim not live);
/// `job`: its schedule's rules; `other_live`: another run of the job is
/// claimed live (read only when the overlap is not `allow`).
pub fn run_claim(
    due: Micros,
    now: Micros,
    grace: Option<Micros>,
    locked: bool,
    job: JobRules,
    other_live: bool,
) -> RunClaim {
    if !locked || !claim_may_act(due, job) {
        RunClaim::Refuse
    } else if past_grace(due, now, grace) {
        RunClaim::Missed
    } else if !other_live {
        RunClaim::Claim
    } else {
        match job.overlap {
            Overlap::Allow => RunClaim::Claim,
            Overlap::Forbid => RunClaim::Refuse,
            Overlap::Replace => RunClaim::Replace,
        }
    }
}

/// Whether a run due at `due` may no longer start at `now`: its grace
/// (None: no limit) has passed. The worker settles a due instant once this
/// holds (contract 24), and not before.
pub fn past_grace(due: Micros, now: Micros, grace: Option<Micros>) -> bool {
    grace.is_some_and(|g| now > due.saturating_add(g))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_is_claimed_once_within_its_grace() {
        let any = JobRules::default();
        assert_eq!(
            run_claim(10, 12, Some(2), true, any, false),
            RunClaim::Claim
        );
        assert_eq!(
            run_claim(10, 13, Some(2), true, any, false),
            RunClaim::Missed
        );
        assert_eq!(run_claim(10, 99, None, true, any, false), RunClaim::Claim);
        assert_eq!(
            run_claim(10, 11, Some(2), false, any, false),
            RunClaim::Refuse
        );
        assert_eq!(run_claim(10, 11, Some(2), true, any, true), RunClaim::Claim);
        let paused = JobRules {
            paused: true,
            ..any
        };
        assert_eq!(
            run_claim(10, 13, Some(2), true, paused, false),
            RunClaim::Refuse
        );
        // judged from 11: the run due at 10 is neither run nor missed
        let changed = JobRules {
            judged_from: Some(11),
            ..any
        };
        assert_eq!(
            run_claim(10, 12, Some(2), true, changed, false),
            RunClaim::Refuse
        );
        assert_eq!(
            run_claim(10, 13, Some(2), true, changed, false),
            RunClaim::Refuse
        );
        assert_eq!(
            run_claim(11, 12, Some(2), true, changed, false),
            RunClaim::Claim
        );
        assert_eq!(
            run_claim(11, 14, Some(2), true, changed, false),
            RunClaim::Missed
        );
        assert!(!claim_may_act(10, changed));
        assert!(claim_may_act(11, changed));
        let forbid = JobRules {
            overlap: Overlap::Forbid,
            ..any
        };
        assert_eq!(
            run_claim(10, 11, Some(2), true, forbid, true),
            RunClaim::Refuse
        );
        assert_eq!(
            run_claim(10, 13, Some(2), true, forbid, true),
            RunClaim::Missed
        );
        let replace = JobRules {
            overlap: Overlap::Replace,
            ..any
        };
        assert_eq!(
            run_claim(10, 11, Some(2), true, replace, true),
            RunClaim::Replace
        );
        assert_eq!(
            run_claim(10, 11, Some(2), true, replace, false),
            RunClaim::Claim
        );
        assert!(run_forgotten(9, 10));
        assert!(!run_forgotten(10, 10));
    }
}
