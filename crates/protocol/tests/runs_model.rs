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
//! One job, runs due at ticks 1 and 2, a misfire grace of 1 tick, claims
//! of 1 tick, two replicas, horizon 5 ticks. Each broken variant must be
//! caught with a printed trace.
//!
//! `cargo test -p leaderlock-protocol --test runs_model` (seconds).
use leaderlock_protocol as p;
use p::runs::RunClaim;
use stateright::{Checker, Model, Property};

mod common;

const DUE: [i64; 2] = [1, 2];
const GRACE: i64 = 1;
const TTL: i64 = 1;
const HORIZON: i64 = 5;
const REPLICAS: u8 = 2;

const ONE_CLAIM: &str = "a run is never claimed while another claim of it is live";
const ONCE: &str = "a finished or missed run is never claimed again";
const MISFIRE: &str = "no run is claimed past its misfire grace";
const TERMS: &str = "a job's terms grow with each claim";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Variant {
    Correct,
    /// The locking statement's rule forgets the claim's liveness.
    LiveClaimIgnored,
    /// The locking statement's rule forgets that the run finished.
    FinishedIgnored,
    /// The claim is decided without the misfire grace.
    GraceIgnored,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Run {
    holder: Option<u8>,
    term: i64,
    expires_at: i64,
    finished: bool,
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
    /// Witnesses.
    retried: bool,
    missed: bool,
    finished: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Action {
    Tick,
    Claim(u8, usize),
    Renew(u8, usize),
    Finish(u8, usize),
}

#[derive(Clone)]
struct RunsModel {
    variant: Variant,
}

impl RunsModel {
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
        let grace = (self.variant != Variant::GraceIgnored).then_some(GRACE);
        match p::runs::run_claim(due, now, grace, locked) {
            RunClaim::Refuse => {}
            RunClaim::Missed => {
                s.runs[d] = Some(Run {
                    finished: true,
                    ..run.unwrap_or(Run {
                        holder: None,
                        term: 0,
                        expires_at: now,
                        finished: true,
                    })
                });
                s.missed = true;
            }
            RunClaim::Claim => {
                let term = p::next_term((s.job_term > 0).then_some(s.job_term), 1);
                s.one_claim_broken |= live;
                s.once_broken |= finished;
                s.misfire_broken |= now > due + GRACE;
                s.terms_broken |= term <= s.job_term;
                s.retried |= run.is_some_and(|r| r.holder.is_some());
                s.job_term = term;
                s.claims += 1;
                s.runs[d] = Some(Run {
                    holder: Some(c),
                    term,
                    expires_at: p::expiry(now, TTL),
                    finished: false,
                });
            }
        }
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
            retried: false,
            missed: false,
            finished: false,
        }]
    }

    fn actions(&self, s: &State, actions: &mut Vec<Action>) {
        if s.t < HORIZON {
            actions.push(Action::Tick);
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
            Action::Claim(c, d) => self.claim(&mut s, c, d),
            Action::Renew(c, d) => {
                Self::held(&s, c, d)?;
                let now = s.t;
                s.runs[d].as_mut()?.expires_at = p::expiry(now, TTL);
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
        vec![
            Property::always(ONE_CLAIM, |_, s: &State| !s.one_claim_broken),
            Property::always(ONCE, |_, s: &State| !s.once_broken),
            Property::always(MISFIRE, |_, s: &State| !s.misfire_broken),
            Property::always(TERMS, |_, s: &State| !s.terms_broken),
            Property::sometimes("a lapsed claim is claimed again", |_, s: &State| s.retried),
            Property::sometimes("a run is missed", |_, s: &State| s.missed),
            Property::sometimes("a run finishes", |_, s: &State| s.finished),
        ]
    }

    fn within_boundary(&self, s: &State) -> bool {
        s.t <= HORIZON && s.claims <= 3
    }

    fn format_action(&self, action: &Action) -> String {
        match action {
            Action::Tick => "time passes one tick".into(),
            Action::Claim(c, d) => format!("replica {c} claims the run due at {}", DUE[*d]),
            Action::Renew(c, d) => {
                format!("replica {c} renews its claim of the run due at {}", DUE[*d])
            }
            Action::Finish(c, d) => format!("replica {c} finishes the run due at {}", DUE[*d]),
        }
    }
}

fn check(variant: Variant, property: Option<&'static str>) -> impl Checker<RunsModel> {
    common::check(
        &format!("runs {variant:?}"),
        RunsModel { variant },
        property,
    )
}

/// The variant must break `property`, with a trace printed.
fn must_catch(variant: Variant, property: &'static str) {
    common::must_catch(
        &format!("runs {variant:?}"),
        RunsModel { variant },
        property,
        |s| format!("t={} runs {:?} job term {}", s.t, s.runs, s.job_term),
    );
}

#[test]
fn the_runs_rules_hold() {
    check(Variant::Correct, None).assert_properties();
}

#[test]
fn a_claim_beside_a_live_one_is_caught() {
    must_catch(Variant::LiveClaimIgnored, ONE_CLAIM);
}

#[test]
fn a_finished_run_claimed_again_is_caught() {
    must_catch(Variant::FinishedIgnored, ONCE);
}

#[test]
fn a_claim_past_the_misfire_grace_is_caught() {
    must_catch(Variant::GraceIgnored, MISFIRE);
}
