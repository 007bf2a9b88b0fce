//! Scheduled runs (contract 22), model-checked with stateright: replicas
//! claim, renew and finish the runs of one job, in any order, while time
//! passes and claims lapse. Every claim is decided as the extension
//! decides it (src/lease/runs.rs): the run's row may be locked only when
//! unfinished and its last claim not live (the rule of the locking
//! statement's WHERE, `not_live!`, here `leaderlock_protocol::is_live`),
//! then `leaderlock_protocol::runs::run_claim` says claim, missed or
//! refused, and the term is the job's next (`next_term`). Renewals and
//! outcomes are accepted only from the claim's holder in its term
//! (`leads`, the rule of their statements).
//!
//! The worker settles a due instant whose grace passed unclaimed with the
//! same decision (src/lease/schedules.rs), and the job's overlap policy
//! (contract 24: allow, forbid, replace) is an input of it: with forbid or
//! replace, no two runs of the job are ever claimed live at once.
//!
//! Backfill (contract 24): a run recorded missed may be claimed once more,
//! whatever its grace, when it is one of the job's `BACKFILL` latest
//! instants recorded missed (the rule of `LOCK_BACKFILL_RUN`'s WHERE,
//! `may_backfill`).
//!
//! One job, runs due at ticks 1 and 2, a misfire grace of 1 tick, claims
//! of 1 tick (2 where runs could overlap), two replicas, horizon 5 ticks.
//! Each broken variant must be caught with a printed trace.
//!
//! `cargo test -p leaderlock-protocol --test runs_model` (seconds).
use leaderlock_protocol as p;
use p::runs::{Found, JobRules, Overlap, RunClaim};
use stateright::{Checker, Model, Property};

mod common;

const DUE: [i64; 2] = [1, 2];
const GRACE: i64 = 1;
const HORIZON: i64 = 5;
const REPLICAS: u8 = 2;
const BACKFILL: u16 = 1;

const ONE_CLAIM: &str = "a run is never claimed while another claim of it is live";
const ONCE: &str = "a finished run is never claimed again, a missed one at most once more";
const LATEST: &str = "only the job's latest missed runs are run late";
const MISFIRE: &str = "no run is claimed past its misfire grace";
const TERMS: &str = "a job's terms grow with each claim";
const NO_OVERLAP: &str = "with forbid or replace, no two runs of the job are claimed live at once";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Variant {
    Correct,
    /// The locking statement's rule forgets the claim's liveness.
    LiveClaimIgnored,
    /// The locking statement's rule forgets that the run finished.
    FinishedIgnored,
    /// The claim is decided without the misfire grace.
    GraceIgnored,
    /// The claim is decided without looking at the job's other runs.
    OverlapIgnored,
    /// `replace` claims without ending the other runs' claims.
    OthersKept,
    /// The backfill's locking rule forgets that a run was taken up.
    TakenUpIgnored,
    /// The backfill's locking rule forgets the job's later misses.
    LaterIgnored,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Run {
    holder: Option<u8>,
    term: i64,
    expires_at: i64,
    finished: bool,
    /// Recorded missed (last finished so).
    missed: bool,
    /// Claimed again after it was missed (backfill).
    taken_up: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct State {
    t: i64,
    runs: [Option<Run>; 2],
    job_term: i64,
    claims: u8,
    one_claim_broken: bool,
    once_broken: bool,
    misfire_broken: bool,
    terms_broken: bool,
    overlap_broken: bool,
    latest_broken: bool,
    /// Witnesses.
    retried: bool,
    missed: bool,
    finished: bool,
    refused_for_overlap: bool,
    replaced: bool,
    run_late: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Action {
    Tick,
    /// The worker settles the run due at DUE[d] (contract 24).
    Settle(usize),
    Claim(u8, usize),
    Renew(u8, usize),
    Finish(u8, usize),
}

#[derive(Clone)]
struct RunsModel {
    variant: Variant,
    overlap: Overlap,
}

impl RunsModel {
    /// Claims last 2 ticks where runs could overlap, else 1.
    fn ttl(&self) -> i64 {
        if self.overlap == Overlap::Allow {
            1
        } else {
            2
        }
    }

    fn live(r: &Run, now: i64) -> bool {
        !r.finished && p::is_live(r.holder.is_some(), Some(r.expires_at), now)
    }

    /// The worker, at the end of a due instant's grace: records it missed
    /// when no claim took it, with the decision a late claim makes.
    fn settle(&self, s: &mut State, d: usize) {
        let (due, now) = (DUE[d], s.t);
        if !p::runs::past_grace(due, now, Some(GRACE)) {
            return;
        }
        let run = s.runs[d];
        let found = if run.is_some_and(|r| r.finished || Self::live(&r, now)) {
            Found::Nothing
        } else {
            Found::Claimable
        };
        if p::runs::run_claim(due, now, Some(GRACE), found, self.rules(), false) == RunClaim::Missed
        {
            Self::record_missed(s, d, now);
        }
    }

    /// The run due at DUE[d] recorded missed at `now` (its row made if new).
    fn record_missed(s: &mut State, d: usize, now: i64) {
        s.runs[d] = Some(Run {
            finished: true,
            missed: true,
            ..s.runs[d].unwrap_or(Run {
                holder: None,
                term: 0,
                expires_at: now,
                finished: true,
                missed: true,
                taken_up: false,
            })
        });
        s.missed = true;
    }

    fn rules(&self) -> JobRules {
        JobRules {
            overlap: self.overlap,
            backfill: BACKFILL,
            ..JobRules::default()
        }
    }

    fn claim(&self, s: &mut State, c: u8, d: usize) {
        let now = s.t;
        let due = DUE[d];
        if p::runs::run_forgotten(due, i64::MIN) {
            return;
        }
        let run = s.runs[d];
        let live = run.is_some_and(|r| p::is_live(r.holder.is_some(), Some(r.expires_at), now));
        let finished = run.is_some_and(|r| r.finished);
        let locked = match self.variant {
            Variant::LiveClaimIgnored => !finished,
            Variant::FinishedIgnored => !live,
            _ => !finished && !live,
        };
        // The job's instants recorded missed due after this one (taken up
        // since or not), as LOCK_BACKFILL_RUN counts them.
        let later = Self::later_missed(s, d);
        let to_run_late = run.is_some_and(|r| {
            r.finished
                && r.missed
                && (!r.taken_up || self.variant == Variant::TakenUpIgnored)
                && (p::runs::may_backfill(later, BACKFILL) || self.variant == Variant::LaterIgnored)
        });
        let found = if locked {
            Found::Claimable
        } else if to_run_late {
            Found::MissedToRun
        } else {
            Found::Nothing
        };
        let grace = (self.variant != Variant::GraceIgnored).then_some(GRACE);
        let other_live = self.variant != Variant::OverlapIgnored
            && (0..DUE.len()).any(|o| o != d && s.runs[o].is_some_and(|r| Self::live(&r, now)));
        let decision = p::runs::run_claim(due, now, grace, found, self.rules(), other_live);
        if decision == RunClaim::Replace && self.variant != Variant::OthersKept {
            for o in (0..DUE.len()).filter(|o| *o != d) {
                if let Some(r) = s.runs[o].as_mut().filter(|r| Self::live(r, now)) {
                    r.finished = true;
                    r.expires_at = r.expires_at.min(now);
                    s.replaced = true;
                }
            }
        }
        match decision {
            RunClaim::Refuse => {
                s.refused_for_overlap |= locked && other_live;
            }
            RunClaim::Missed => Self::record_missed(s, d, now),
            RunClaim::Claim | RunClaim::Replace => {
                let term = p::next_term((s.job_term > 0).then_some(s.job_term), 1);
                let late = run.is_some_and(|r| r.missed);
                s.one_claim_broken |= live;
                s.once_broken |= finished && (!late || run.is_some_and(|r| r.taken_up));
                s.misfire_broken |= now > due + GRACE && !late;
                s.latest_broken |= late && later >= usize::from(BACKFILL);
                s.run_late |= late;
                s.terms_broken |= term <= s.job_term;
                s.retried |= run.is_some_and(|r| r.holder.is_some());
                s.job_term = term;
                s.claims += 1;
                s.runs[d] = Some(Run {
                    holder: Some(c),
                    term,
                    expires_at: p::expiry(now, self.ttl()),
                    finished: false,
                    missed: false,
                    taken_up: run.is_some_and(|r| r.taken_up || r.missed),
                });
                s.overlap_broken |= self.overlap != Overlap::Allow
                    && (0..DUE.len())
                        .filter(|o| *o != d)
                        .any(|o| s.runs[o].is_some_and(|r| Self::live(&r, now)));
            }
        }
    }

    /// How many of the job's runs due after DUE[d] were recorded missed
    /// (taken up since or not).
    fn later_missed(s: &State, d: usize) -> usize {
        (d + 1..DUE.len())
            .filter(|o| s.runs[*o].is_some_and(|r| r.missed || r.taken_up))
            .count()
    }

    /// The claim `c` holds live in its term, as the statements of le_renew_run
    /// and le_finish_run find it (`leads`).
    fn held(s: &State, c: u8, d: usize) -> Option<Run> {
        s.runs[d].filter(|r| {
            let lease = p::Lease {
                holder: r.holder,
                term: r.term,
                expires_at: r.expires_at,
            };
            !r.finished && p::leads(&lease, &c, Some(r.term), s.t)
        })
    }
}

impl Model for RunsModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![State {
            t: 0,
            runs: [None; 2],
            job_term: 0,
            claims: 0,
            one_claim_broken: false,
            once_broken: false,
            misfire_broken: false,
            terms_broken: false,
            overlap_broken: false,
            latest_broken: false,
            retried: false,
            missed: false,
            finished: false,
            refused_for_overlap: false,
            replaced: false,
            run_late: false,
        }]
    }

    fn actions(&self, s: &State, actions: &mut Vec<Action>) {
        if s.t < HORIZON {
            actions.push(Action::Tick);
        }
        for d in 0..DUE.len() {
            actions.push(Action::Settle(d));
        }
        for c in 0..REPLICAS {
            for (d, due) in DUE.iter().enumerate() {
                if s.t >= *due {
                    actions.push(Action::Claim(c, d));
                }
                if Self::held(s, c, d).is_some() {
                    actions.push(Action::Renew(c, d));
                    actions.push(Action::Finish(c, d));
                }
            }
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut s = last.clone();
        match action {
            Action::Tick => s.t += 1,
            Action::Settle(d) => self.settle(&mut s, d),
            Action::Claim(c, d) => self.claim(&mut s, c, d),
            Action::Renew(c, d) => {
                Self::held(&s, c, d)?;
                let now = s.t;
                s.runs[d].as_mut()?.expires_at = p::expiry(now, self.ttl());
            }
            Action::Finish(c, d) => {
                Self::held(&s, c, d)?;
                s.runs[d].as_mut()?.finished = true;
                s.finished = true;
            }
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let mut properties = vec![
            Property::always(ONE_CLAIM, |_, s: &State| !s.one_claim_broken),
            Property::always(ONCE, |_, s: &State| !s.once_broken),
            Property::always(MISFIRE, |_, s: &State| !s.misfire_broken),
            Property::always(TERMS, |_, s: &State| !s.terms_broken),
            Property::sometimes("a run is missed", |_, s: &State| s.missed),
            Property::sometimes("a run finishes", |_, s: &State| s.finished),
            Property::always(NO_OVERLAP, |_, s: &State| !s.overlap_broken),
            Property::always(LATEST, |_, s: &State| !s.latest_broken),
            Property::sometimes("a missed run is run late", |_, s: &State| s.run_late),
        ];
        // (Claims of 2 ticks lapse only past the grace of 1.)
        match self.overlap {
            Overlap::Allow => properties.push(Property::sometimes(
                "a lapsed claim is claimed again",
                |_, s: &State| s.retried,
            )),
            Overlap::Forbid => properties.push(Property::sometimes(
                "a claim waits for the job's other run",
                |_, s: &State| s.refused_for_overlap,
            )),
            Overlap::Replace => properties.push(Property::sometimes(
                "a claim ends the job's other run",
                |_, s: &State| s.replaced,
            )),
        }
        properties
    }

    fn within_boundary(&self, s: &State) -> bool {
        s.t <= HORIZON && s.claims <= 3
    }

    fn format_action(&self, action: &Action) -> String {
        match action {
            Action::Tick => "time passes one tick".into(),
            Action::Settle(d) => format!("the worker settles the run due at {}", DUE[*d]),
            Action::Claim(c, d) => format!("replica {c} claims the run due at {}", DUE[*d]),
            Action::Renew(c, d) => {
                format!("replica {c} renews its claim of the run due at {}", DUE[*d])
            }
            Action::Finish(c, d) => format!("replica {c} finishes the run due at {}", DUE[*d]),
        }
    }
}

fn check(variant: Variant, overlap: Overlap) -> impl Checker<RunsModel> {
    common::check(
        &format!("runs {variant:?} {overlap:?}"),
        RunsModel { variant, overlap },
        None,
    )
}

/// The variant must break `property`, with a trace printed.
fn must_catch(variant: Variant, overlap: Overlap, property: &'static str) {
    common::must_catch(
        &format!("runs {variant:?} {overlap:?}"),
        RunsModel { variant, overlap },
        property,
        |s| format!("t={} runs {:?} job term {}", s.t, s.runs, s.job_term),
    );
}

#[test]
fn the_runs_rules_hold() {
    for overlap in [Overlap::Allow, Overlap::Forbid, Overlap::Replace] {
        check(Variant::Correct, overlap).assert_properties();
    }
}

#[test]
fn a_claim_blind_to_the_other_runs_is_caught() {
    must_catch(Variant::OverlapIgnored, Overlap::Forbid, NO_OVERLAP);
}

#[test]
fn a_replace_that_keeps_the_other_claim_is_caught() {
    must_catch(Variant::OthersKept, Overlap::Replace, NO_OVERLAP);
}

#[test]
fn a_claim_beside_a_live_one_is_caught() {
    must_catch(Variant::LiveClaimIgnored, Overlap::Allow, ONE_CLAIM);
}

#[test]
fn a_finished_run_claimed_again_is_caught() {
    must_catch(Variant::FinishedIgnored, Overlap::Allow, ONCE);
}

#[test]
fn a_missed_run_run_late_twice_is_caught() {
    must_catch(Variant::TakenUpIgnored, Overlap::Allow, ONCE);
}

#[test]
fn an_older_missed_run_run_late_is_caught() {
    must_catch(Variant::LaterIgnored, Overlap::Allow, LATEST);
}

#[test]
fn a_claim_past_the_misfire_grace_is_caught() {
    must_catch(Variant::GraceIgnored, Overlap::Allow, MISFIRE);
}
