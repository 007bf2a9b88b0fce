//! Contract 22 and 24: what a claim of a scheduled run does, decided by
//! the extension (`src/lease/runs.rs`; the worker settles a due instant
//! nobody claimed with the same decision, `src/lease/schedules.rs`) and
//! the model (`tests/runs_model.rs`) alike. Which run may be locked is the rule of the locking statement's
//! WHERE (unfinished, and its last claim not live: `not_live!`); a job's
//! next term is `next_term`.

use crate::Micros;

/// What the locking statements found of the run due, its row locked or not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Found {
    /// Nothing locked: finished, claimed live by another, or its row locked
    /// by a concurrent claim.
    Nothing,
    /// Unfinished and its last claim not live (`not_live!`).
    Claimable,
    /// Recorded missed, never taken up since, and one of the job's
    /// `backfill` latest instants recorded missed (`may_backfill`).
    MissedToRun,
}

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
    /// How many of its latest missed instants may still be run late
    /// (`backfill`, 0: none).
    pub backfill: u16,
}

/// Contract 24's backfill: whether a run recorded missed and never taken
/// up may be run late, `later` instants of the job recorded missed (taken
/// up since or not) being due after it: only the job's `backfill` latest.
/// The rule of the statement that locks it (`LOCK_BACKFILL_RUN`).
pub fn may_backfill(later: usize, backfill: u16) -> bool {
    later < usize::from(backfill)
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
/// with `grace` (None: no limit), does; `found`: what the statements that
/// hold the rules found and locked of it; `job`: its schedule's rules;
/// `other_live`: another run of the job is claimed live (read only when
/// the overlap is not `allow`). A missed run taken up again (backfill) is
/// run whatever its grace: it is past it by definition.
pub fn run_claim(
    due: Micros,
    now: Micros,
    grace: Option<Micros>,
    found: Found,
    job: JobRules,
    other_live: bool,
) -> RunClaim {
    match found {
        Found::Nothing => RunClaim::Refuse,
        _ if !claim_may_act(due, job) => RunClaim::Refuse,
        Found::MissedToRun if job.backfill == 0 => RunClaim::Refuse,
        Found::Claimable if past_grace(due, now, grace) => RunClaim::Missed,
        _ if !other_live => RunClaim::Claim,
        _ => match job.overlap {
            Overlap::Allow => RunClaim::Claim,
            Overlap::Forbid => RunClaim::Refuse,
            Overlap::Replace => RunClaim::Replace,
        },
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
            run_claim(10, 12, Some(2), Found::Claimable, any, false),
            RunClaim::Claim
        );
        assert_eq!(
            run_claim(10, 13, Some(2), Found::Claimable, any, false),
            RunClaim::Missed
        );
        assert_eq!(
            run_claim(10, 99, None, Found::Claimable, any, false),
            RunClaim::Claim
        );
        assert_eq!(
            run_claim(10, 11, Some(2), Found::Nothing, any, false),
            RunClaim::Refuse
        );
        assert_eq!(
            run_claim(10, 11, Some(2), Found::Claimable, any, true),
            RunClaim::Claim
        );
        let paused = JobRules {
            paused: true,
            ..any
        };
        assert_eq!(
            run_claim(10, 13, Some(2), Found::Claimable, paused, false),
            RunClaim::Refuse
        );
        // judged from 11: the run due at 10 is neither run nor missed
        let changed = JobRules {
            judged_from: Some(11),
            ..any
        };
        assert_eq!(
            run_claim(10, 12, Some(2), Found::Claimable, changed, false),
            RunClaim::Refuse
        );
        assert_eq!(
            run_claim(10, 13, Some(2), Found::Claimable, changed, false),
            RunClaim::Refuse
        );
        assert_eq!(
            run_claim(11, 12, Some(2), Found::Claimable, changed, false),
            RunClaim::Claim
        );
        assert_eq!(
            run_claim(11, 14, Some(2), Found::Claimable, changed, false),
            RunClaim::Missed
        );
        assert!(!claim_may_act(10, changed));
        assert!(claim_may_act(11, changed));
        let forbid = JobRules {
            overlap: Overlap::Forbid,
            ..any
        };
        assert_eq!(
            run_claim(10, 11, Some(2), Found::Claimable, forbid, true),
            RunClaim::Refuse
        );
        assert_eq!(
            run_claim(10, 13, Some(2), Found::Claimable, forbid, true),
            RunClaim::Missed
        );
        let replace = JobRules {
            overlap: Overlap::Replace,
            ..any
        };
        assert_eq!(
            run_claim(10, 11, Some(2), Found::Claimable, replace, true),
            RunClaim::Replace
        );
        assert_eq!(
            run_claim(10, 11, Some(2), Found::Claimable, replace, false),
            RunClaim::Claim
        );
        // backfill: a missed run taken up again runs past its grace, under
        // the overlap as any run, never while paused or before a change
        let backfill = JobRules { backfill: 2, ..any };
        assert_eq!(
            run_claim(10, 99, Some(2), Found::MissedToRun, backfill, false),
            RunClaim::Claim
        );
        assert_eq!(
            run_claim(10, 99, Some(2), Found::MissedToRun, any, false),
            RunClaim::Refuse
        );
        let forbid_backfill = JobRules {
            backfill: 2,
            ..forbid
        };
        assert_eq!(
            run_claim(10, 99, Some(2), Found::MissedToRun, forbid_backfill, true),
            RunClaim::Refuse
        );
        let paused_backfill = JobRules {
            backfill: 2,
            ..paused
        };
        assert_eq!(
            run_claim(10, 99, Some(2), Found::MissedToRun, paused_backfill, false),
            RunClaim::Refuse
        );
        assert!(may_backfill(1, 2));
        assert!(!may_backfill(2, 2));
        assert!(!may_backfill(0, 0));
        assert!(run_forgotten(9, 10));
        assert!(!run_forgotten(10, 10));
    }
}
