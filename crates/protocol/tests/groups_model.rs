//! Groups, model-checked with stateright: two members join, renew (their
//! replies may be lost), give revoked partitions back, leave or crash,
//! while time passes; the server reassigns with
//! `leaderlock_protocol::groups::assign` and moves each partition with
//! `groups::step` (revocations end at `groups::revoke_until`); an ack
//! grants its partition to the member its revocation named, or steps the
//! group, as `groups::after_ack` says.
//!
//! Each member acts on a partition only inside its window: until its
//! local deadline (its last renewal whose reply it got, plus the ttl), and
//! once it has heard of a revocation, until the revocation's end. The
//! properties: never two members inside their windows on one partition;
//! each partition's terms grow with each grant; every grant goes to a live
//! member; every partition is owned again once the members stay (a
//! witness).
//!
//! Two partitions, two members, ttl 2 ticks, a drain budget of 1 tick
//! (shorter than the ttl: the session's expiry decides), horizon 4 ticks;
//! each member joins at most twice (a crash or a leave, then again).
//! Each broken variant must be caught with a printed trace.
//!
//! `cargo test -p leaderlock-protocol --test groups_model` (seconds).
use leaderlock_protocol::groups::{after_ack, assign, revoke_until, step, AfterAck, Holding, Step};
use stateright::{Checker, Model, Property};

mod common;

const PARTITIONS: usize = 2;
const MEMBERS: u8 = 2;
const TTL: i64 = 2;
const DRAIN: i64 = 1;
const HORIZON: i64 = 4;

const ONE_OWNER: &str = "never two members inside their windows on one partition";
const TERMS: &str = "each partition's terms grow with each grant";
const TO_THE_LIVE: &str = "every grant goes to a live member";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Variant {
    Correct,
    /// A revoked partition is granted without waiting for the ack or the end.
    NoWait,
    /// The revocation's end is the drain budget alone (the session's
    /// expiry forgotten).
    BudgetOnly,
    /// A grant keeps the partition's term.
    SameTerm,
    /// An ack grants to the member its revocation named, live or not.
    AckToAnyone,
}

/// A member as it sees itself.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Member {
    /// Its session, as the server has it (expiry), None: not a member.
    session: Option<i64>,
    /// Its local deadline (last renewal whose reply it got, plus the ttl).
    deadline: i64,
    /// Its windows: (partition, term, until) it acts on.
    windows: Vec<(usize, i64, i64)>,
    /// Partitions it gave back (acked), as the server has it.
    acked: Vec<usize>,
    /// Memberships begun (bounded).
    joins: u8,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct State {
    t: i64,
    members: Vec<Member>,
    holdings: Vec<Holding<u8>>,
    /// Whom each revoked partition goes to (the target when last stepped).
    next: Vec<Option<u8>>,
    one_owner_broken: bool,
    terms_broken: bool,
    granted_to_the_dead: bool,
    revoked: bool,
    granted_after_death: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Action {
    Tick,
    /// Joins or renews: the server keeps the session, reassigns, and the
    /// reply (its assignment) reaches the member.
    Renew(u8),
    /// The same, but the reply is lost.
    RenewLost(u8),
    /// Gives a partition it heard was revoked back.
    Ack(u8, usize),
    /// Leaves: gives everything back and closes its session.
    Leave(u8),
    /// Stops acting at once (its session lapses by itself).
    Crash(u8),
    /// The worker's round: reassigns (a dead member's partitions, a
    /// revocation's end).
    Rebalance,
}

#[derive(Clone)]
struct GroupsModel {
    variant: Variant,
}

impl GroupsModel {
    fn live(s: &State, m: usize) -> bool {
        s.members[m].session.is_some_and(|e| e > s.t)
    }

    /// The server moves every partition toward its target.
    #[allow(clippy::needless_range_loop)] // (p indexes the holdings and the targets alike)
    fn rebalance(&self, s: &mut State) {
        let live: Vec<u8> = (0..MEMBERS)
            .filter(|m| Self::live(s, usize::from(*m)))
            .collect();
        let current: Vec<Option<u8>> = s.holdings.iter().map(|h| h.owner().copied()).collect();
        let revoking: Vec<bool> = s
            .holdings
            .iter()
            .map(|h| matches!(h, Holding::Revoking { .. }))
            .collect();
        let target = assign(&live, &current, &revoking);
        for p in 0..PARTITIONS {
            let h = s.holdings[p].clone();
            let owner = h.owner().copied();
            let owner_live = owner.is_some_and(|m| Self::live(s, usize::from(m)));
            let acked = owner.is_some_and(|m| s.members[usize::from(m)].acked.contains(&p));
            let session = owner
                .and_then(|m| s.members[usize::from(m)].session)
                .unwrap_or(s.t);
            let until = match self.variant {
                Variant::BudgetOnly => s.t + DRAIN,
                _ => revoke_until(s.t, DRAIN, session),
            };
            let mut decision = step(&h, target[p].as_ref(), owner_live, acked, until, s.t, 1);
            if self.variant == Variant::NoWait
                && matches!(decision, Step::Revoke { .. } | Step::Keep)
            {
                if let (
                    Holding::Owned { member, term } | Holding::Revoking { member, term, .. },
                    Some(t),
                ) = (&h, target[p])
                {
                    if *member != t {
                        decision = Step::Grant {
                            member: t,
                            term: term + 1,
                        };
                    }
                }
            }
            match decision {
                Step::Keep => {}
                Step::Revoke { until } => {
                    let (member, term) = (owner.expect("owned"), h.term());
                    s.holdings[p] = Holding::Revoking {
                        member,
                        term,
                        until,
                    };
                    s.revoked = true;
                }
                Step::Withdraw => {
                    s.holdings[p] = Holding::Owned {
                        member: owner.expect("owned"),
                        term: h.term(),
                    };
                }
                Step::Grant { member, term } => {
                    let term = if self.variant == Variant::SameTerm {
                        h.term().max(1)
                    } else {
                        term
                    };
                    s.terms_broken |= term <= h.term();
                    s.granted_to_the_dead |= !Self::live(s, usize::from(member));
                    s.granted_after_death |= owner.is_some() && !owner_live;
                    if let Some(o) = owner {
                        s.members[usize::from(o)].acked.retain(|q| *q != p);
                    }
                    s.holdings[p] = Holding::Owned { member, term };
                }
                Step::Free => {
                    if let Some(o) = owner {
                        s.members[usize::from(o)].acked.retain(|q| *q != p);
                    }
                    s.holdings[p] = Holding::Free { term: h.term() };
                }
            }
            // (a revocation names whom it is for, as each step sees it)
            s.next[p] = match s.holdings[p] {
                Holding::Revoking { .. } => target[p],
                _ => None,
            };
        }
    }

    /// Member `m` gives partition `p` back: granted at once to whom its
    /// revocation named (`after_ack`), or the group stepped.
    fn ack(&self, s: &mut State, m: usize, p: usize) {
        if !s.members[m].acked.contains(&p) {
            s.members[m].acked.push(p);
        }
        let h = s.holdings[p].clone();
        let next = s.next[p];
        let next_live = match self.variant {
            Variant::AckToAnyone => next.is_some(),
            _ => next.is_some_and(|n| Self::live(s, usize::from(n))),
        };
        match after_ack(&h, next.as_ref(), next_live, true, false, s.t, 1) {
            AfterAck::Grant { member, term } => {
                s.terms_broken |= term <= h.term();
                s.granted_to_the_dead |= !Self::live(s, usize::from(member));
                s.members[m].acked.retain(|q| *q != p);
                s.holdings[p] = Holding::Owned { member, term };
                s.next[p] = None;
            }
            AfterAck::Step => self.rebalance(s),
        }
    }

    /// What member `m` learns from a reply sent at `sent`: its windows.
    fn learn(s: &mut State, m: usize, sent: i64) {
        let deadline = sent + TTL;
        s.members[m].deadline = deadline;
        let mine: Vec<(usize, i64, i64)> =
            s.holdings
                .iter()
                .enumerate()
                .filter_map(|(p, h)| match h {
                    Holding::Owned { member, term } if usize::from(*member) == m => {
                        Some((p, *term, deadline))
                    }
                    Holding::Revoking {
                        member,
                        term,
                        until,
                    } if usize::from(*member) == m => (!s.members[m].acked.contains(&p))
                        .then_some((p, *term, deadline.min(*until))),
                    _ => None,
                })
                .collect();
        s.members[m].windows = mine;
    }

    fn check(s: &mut State) {
        for p in 0..PARTITIONS {
            let inside = s
                .members
                .iter()
                .filter(|m| {
                    m.windows
                        .iter()
                        .any(|(q, _, until)| *q == p && s.t < *until)
                })
                .count();
            s.one_owner_broken |= inside > 1;
        }
    }
}

impl Model for GroupsModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let member = Member {
            session: None,
            deadline: 0,
            windows: vec![],
            acked: vec![],
            joins: 0,
        };
        vec![State {
            t: 0,
            members: vec![member; usize::from(MEMBERS)],
            holdings: vec![Holding::Free { term: 0 }; PARTITIONS],
            next: vec![None; PARTITIONS],
            one_owner_broken: false,
            terms_broken: false,
            granted_to_the_dead: false,
            revoked: false,
            granted_after_death: false,
        }]
    }

    fn actions(&self, s: &State, actions: &mut Vec<Action>) {
        if s.t < HORIZON {
            actions.push(Action::Tick);
        }
        actions.push(Action::Rebalance);
        for m in 0..MEMBERS {
            actions.push(Action::Renew(m));
            actions.push(Action::RenewLost(m));
            let me = &s.members[usize::from(m)];
            if me.session.is_some() {
                actions.push(Action::Leave(m));
                actions.push(Action::Crash(m));
            }
            for p in 0..PARTITIONS {
                let heard = me.windows.iter().any(|(q, _, _)| *q == p)
                    && matches!(&s.holdings[p], Holding::Revoking { member, .. } if *member == m);
                if heard {
                    actions.push(Action::Ack(m, p));
                }
            }
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut s = last.clone();
        match action {
            Action::Tick => s.t += 1,
            Action::Rebalance => self.rebalance(&mut s),
            Action::Renew(m) | Action::RenewLost(m) => {
                let i = usize::from(m);
                // a lapsed session is a new membership (its partitions went)
                if !Self::live(&s, i) {
                    s.members[i].joins += 1;
                }
                s.members[i].session = Some(s.t + TTL);
                self.rebalance(&mut s);
                if action == Action::Renew(m) {
                    let sent = s.t;
                    Self::learn(&mut s, i, sent);
                }
            }
            Action::Ack(m, p) => {
                let i = usize::from(m);
                s.members[i].windows.retain(|(q, _, _)| *q != p);
                self.ack(&mut s, i, p);
            }
            Action::Leave(m) => {
                let i = usize::from(m);
                s.members[i].windows.clear();
                s.members[i].session = None;
                s.members[i].acked.clear();
                self.rebalance(&mut s);
            }
            Action::Crash(m) => {
                s.members[usize::from(m)].windows.clear();
            }
        }
        Self::check(&mut s);
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(ONE_OWNER, |_, s: &State| !s.one_owner_broken),
            Property::always(TERMS, |_, s: &State| !s.terms_broken),
            Property::always(TO_THE_LIVE, |_, s: &State| !s.granted_to_the_dead),
            Property::sometimes(
                "a live owner is told to give a partition back",
                |_, s: &State| s.revoked,
            ),
            Property::sometimes(
                "a dead member's partition is granted at once",
                |_, s: &State| s.granted_after_death,
            ),
            Property::sometimes(
                "every partition is owned by a live member",
                |_, s: &State| {
                    s.holdings.iter().all(|h| {
                        h.owner().is_some_and(|m| {
                            s.members[usize::from(*m)].session.is_some_and(|e| e > s.t)
                        })
                    }) && s.members.iter().all(|m| m.session.is_some_and(|e| e > s.t))
                },
            ),
        ]
    }

    fn within_boundary(&self, s: &State) -> bool {
        s.t <= HORIZON && s.members.iter().all(|m| m.joins <= 2)
    }

    fn format_action(&self, action: &Action) -> String {
        match action {
            Action::Tick => "time passes one tick".into(),
            Action::Renew(m) => format!("member {m} joins or renews"),
            Action::RenewLost(m) => format!("member {m} renews, its reply lost"),
            Action::Ack(m, p) => format!("member {m} gives partition {p} back"),
            Action::Leave(m) => format!("member {m} leaves"),
            Action::Crash(m) => format!("member {m} crashes"),
            Action::Rebalance => "the worker's round".into(),
        }
    }
}

fn show(s: &State) -> String {
    format!(
        "t={} holdings {:?} next {:?} members {:?}",
        s.t, s.holdings, s.next, s.members
    )
}

#[test]
fn the_groups_rules_hold() {
    common::check(
        "groups",
        GroupsModel {
            variant: Variant::Correct,
        },
        None,
    )
    .assert_properties();
}

#[test]
fn a_grant_before_the_ack_or_the_end_is_caught() {
    common::must_catch(
        "groups NoWait",
        GroupsModel {
            variant: Variant::NoWait,
        },
        ONE_OWNER,
        show,
    );
}

#[test]
fn a_revocation_ended_by_the_budget_alone_is_caught() {
    common::must_catch(
        "groups BudgetOnly",
        GroupsModel {
            variant: Variant::BudgetOnly,
        },
        ONE_OWNER,
        show,
    );
}

#[test]
fn a_grant_in_the_same_term_is_caught() {
    common::must_catch(
        "groups SameTerm",
        GroupsModel {
            variant: Variant::SameTerm,
        },
        TERMS,
        show,
    );
}

#[test]
fn an_ack_granting_to_a_dead_member_is_caught() {
    common::must_catch(
        "groups AckToAnyone",
        GroupsModel {
            variant: Variant::AckToAnyone,
        },
        TO_THE_LIVE,
        show,
    );
}
