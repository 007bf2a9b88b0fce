//! The rules of a key that `model.rs` leaves out, model-checked with
//! stateright: owners (contract 13), sessions, their end and their
//! lock-delay (21), priorities among candidates waiting in le_acquire
//! (18). Every acquisition is decided by `leaderlock_protocol::acquisition`,
//! the function the extension's acquisition calls (src/lease/look.rs), fed
//! what the extension reads: the key's row (its owner as whether the caller
//! may act for it, its session, its lock-delay) and the facts it asks for
//! (a candidate of higher priority waiting); every end of a session (the
//! worker's, once it lapsed, or a close) by `session_end`, as the extension
//! ends one (src/lease/session_leases.rs), fed the session it locked. The
//! model keeps the truth beside it (which role owns the tenure, when the
//! session holding it lapsed, who waits with what priority) and checks
//! every decision against that truth.
//!
//! One key of one slot, three clients: 0 and 1 of role A with ids 0 and 1,
//! 2 of role B with id 0 (an id is free text: another role may use the
//! same). Discrete time, ttl and session ttl 2 ticks, lock-delay 2 ticks.
//! Each broken variant feeds the decision what an extension that forgot
//! to read one thing would; each must be caught with a printed trace.
//!
//! `cargo test -p leaderlock-protocol --test key_rules` (seconds).
use leaderlock_protocol as p;
use p::acquire::{Ask, Context, Row};
use p::vacate::{Ending, SessionEnd};
use stateright::{Checker, Model, Property};

mod common;

const TTL: i64 = 2;
const LOCK_DELAY: i64 = 2;
const HORIZON: i64 = 5;
const CLIENTS: usize = 3;
/// How long a caller is kept back by a candidate of higher priority (the
/// extension's reservation; any positive span).
const RESERVED: i64 = 1;

const OWNER: &str = "a tenure is extended or kept only by a role that owns it";
const DELAY: &str =
    "no tenure starts within the lock-delay after the session holding the key lapsed";
const PRIORITY: &str = "no tenure starts while a candidate of higher priority waits";
const SESSION_END: &str = "no key stays held under a session that ended";
const DELAY_ENDS: &str =
    "a lock-delay ends the lock-delay after the session's expiry, whoever ends it and whenever";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Variant {
    Correct,
    /// The row read says the caller may act for the tenure whoever owns it.
    OwnerUnread,
    /// The row read says nothing of a lock-delay.
    DelayUnread,
    /// The row read says nothing of the session a tenure is held under.
    SessionUnread,
    /// The waiting candidates are not asked for.
    CandidatesUnread,
    /// A session's end does not lock the keys held under it.
    SessionKeysUnlocked,
    /// A session's end reads not when the session lapsed: the lock-delay
    /// counts from the end.
    SessionExpiryUnread,
}

fn id(c: usize) -> u8 {
    [0, 1, 0][c]
}

fn role(c: usize) -> u8 {
    [0, 0, 1][c]
}

/// The key's row: the tenure (holder's id, owner's role, term, its own
/// expiry or the session it is held under) and the lock-delay.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Tenure {
    holder: Option<u8>,
    owner: u8,
    term: i64,
    expires_at: i64,
    session: Option<u8>,
    delayed_until: Option<i64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Session {
    expires_at: i64,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct State {
    t: i64,
    row: Option<Tenure>,
    /// Each client's session (at most one), until the worker ends it.
    sessions: [Option<Session>; CLIENTS],
    /// Each client waiting in le_acquire, with its priority.
    waiting: [Option<i32>; CLIENTS],
    /// Truth: until when no tenure may start (a lapsed session's end plus
    /// the lock-delay), whatever the row says.
    kept_until: i64,
    tenures: u8,
    owner_broken: bool,
    delay_broken: bool,
    priority_broken: bool,
    /// A lock-delay set to end after the lock-delay past its session's
    /// expiry.
    delay_late: bool,
    /// Liveness witnesses.
    delayed_takeover: bool,
    outranked_refused: bool,
    other_role_refused: bool,
    closed_held: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Action {
    Tick,
    /// le_try_acquire (priority 0), or a waiting candidate's look.
    Acquire(usize),
    /// le_try_acquire_in under the client's session.
    AcquireIn(usize),
    OpenSession(usize),
    RenewSession(usize),
    /// le_acquire: the client waits with this priority (1: above every
    /// caller of le_try_acquire, which has 0).
    Wait(usize, i32),
    /// The worker ends a lapsed session: the key it holds is vacated, kept
    /// from takers for the lock-delay.
    EndSession(usize),
    /// le_close_session of a live session: the key it holds is released.
    CloseSession(usize),
}

#[derive(Clone)]
struct KeyModel {
    variant: Variant,
}

impl KeyModel {
    /// The session's expiry as the statements apply it (`expiry_of!`): gone
    /// once ended.
    fn session_expiry(s: &State, session: u8) -> i64 {
        s.sessions[session as usize].map_or(i64::MIN, |x| x.expires_at)
    }

    /// The row as the extension reads it for caller `c`, maybe missing
    /// what a broken variant forgets.
    fn read(&self, s: &State, c: usize) -> Option<Row<u8, u8>> {
        s.row.map(|r| Row {
            holder: r.holder,
            term: r.term,
            expires_at: Some(match r.session {
                Some(x) if r.holder.is_some() => Self::session_expiry(s, x),
                _ => r.expires_at,
            }),
            owned: self.variant == Variant::OwnerUnread || r.owner == role(c),
            slots: 1,
            session: if self.variant == Variant::SessionUnread {
                None
            } else {
                r.session
            },
            delayed_until: if self.variant == Variant::DelayUnread {
                None
            } else {
                r.delayed_until
            },
        })
    }

    /// What the shared memory says of the candidates for caller `c` of
    /// `priority`: kept back while another of higher priority waits.
    fn outranked(&self, s: &State, c: usize, priority: i32) -> Option<i64> {
        let higher = (0..CLIENTS).any(|o| o != c && s.waiting[o].is_some_and(|q| q > priority));
        (higher && self.variant != Variant::CandidatesUnread).then_some(s.t + RESERVED)
    }

    fn acquire(&self, s: &mut State, c: usize, session: Option<u8>) {
        let now = s.t;
        let priority = s.waiting[c].unwrap_or(0);
        let ask = Ask {
            id: &id(c),
            slots: 1,
            session,
            value: false,
        };
        let mut facts = Context {
            locked: false,
            floor: 1,
            ready: true,
            outranked_until: self.outranked(s, c, priority),
            handed: None,
        };
        let row = self.read(s, c);
        let mut decided = p::acquisition(row.as_ref(), &ask, &mut facts, now);
        if decided == p::Acquisition::Lock {
            facts.locked = true;
            decided = p::acquisition(row.as_ref(), &ask, &mut facts, now);
        }
        let owner = s.row.map(|r| r.owner);
        let ends = |s: &State| match session {
            Some(x) => Self::session_expiry(s, x),
            None => p::expiry(now, TTL),
        };
        match decided {
            p::Acquisition::Start { term } => {
                s.delay_broken |= now < s.kept_until;
                s.priority_broken |=
                    (0..CLIENTS).any(|o| o != c && s.waiting[o].is_some_and(|q| q > priority));
                s.delayed_takeover |= s.kept_until > 0 && now >= s.kept_until;
                s.row = Some(Tenure {
                    holder: Some(id(c)),
                    owner: role(c),
                    term,
                    expires_at: ends(s),
                    session,
                    delayed_until: None,
                });
                s.waiting[c] = None;
                s.tenures += 1;
            }
            p::Acquisition::Extend | p::Acquisition::Held | p::Acquisition::Rebind => {
                s.owner_broken |= owner != Some(role(c));
                let expires_at = ends(s);
                let r = s.row.as_mut().expect("a held row");
                r.expires_at = expires_at;
                r.session = session;
                s.waiting[c] = None;
            }
            p::Acquisition::Wait(_) | p::Acquisition::NotNow => {
                let live_other = s.row.is_some_and(|r| {
                    r.holder.is_some() && r.owner != role(c) && r.holder == Some(id(c))
                });
                s.other_role_refused |= live_other;
                s.outranked_refused |= facts.outranked_until.is_some();
            }
            other => panic!("not a decision for a key of one slot: {other:?}"),
        }
    }

    /// Ends client `c`'s session as `ending` says: the key held under it,
    /// locked (`LOCK_SESSION_KEYS`), is vacated with its expiry and
    /// lock-delay; the session's row goes. Whether it held the key.
    fn end_session(&self, s: &mut State, c: usize, ending: Ending) -> bool {
        s.sessions[c] = None;
        let held = s
            .row
            .is_some_and(|r| r.holder.is_some() && r.session == Some(c as u8));
        if self.variant == Variant::SessionKeysUnlocked {
            return held;
        }
        if let Some(r) = s.row.as_mut().filter(|r| r.session == Some(c as u8)) {
            if r.holder.is_some() {
                r.holder = None;
                r.expires_at = ending.expires_at;
                r.delayed_until = ending.delayed_until;
            }
            r.session = None;
        }
        held
    }
}

impl Model for KeyModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![State {
            t: 0,
            row: None,
            sessions: [None; CLIENTS],
            waiting: [None; CLIENTS],
            kept_until: 0,
            tenures: 0,
            owner_broken: false,
            delay_broken: false,
            priority_broken: false,
            delay_late: false,
            delayed_takeover: false,
            outranked_refused: false,
            other_role_refused: false,
            closed_held: false,
        }]
    }

    fn actions(&self, s: &State, actions: &mut Vec<Action>) {
        if s.t < HORIZON {
            actions.push(Action::Tick);
        }
        for c in 0..CLIENTS {
            actions.push(Action::Acquire(c));
            match s.sessions[c] {
                None => actions.push(Action::OpenSession(c)),
                Some(x) if x.expires_at > s.t => {
                    actions.push(Action::AcquireIn(c));
                    actions.push(Action::RenewSession(c));
                    if c == CLIENTS - 1 {
                        actions.push(Action::CloseSession(c));
                    }
                }
                Some(_) => actions.push(Action::EndSession(c)),
            }
            if s.waiting[c].is_none() {
                actions.push(Action::Wait(c, 1));
            }
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut s = last.clone();
        match action {
            Action::Tick => s.t += 1,
            Action::Acquire(c) => self.acquire(&mut s, c, None),
            Action::AcquireIn(c) => self.acquire(&mut s, c, Some(c as u8)),
            Action::OpenSession(c) => {
                s.sessions[c] = Some(Session {
                    expires_at: p::expiry(s.t, TTL),
                })
            }
            Action::RenewSession(c) => {
                s.sessions[c] = Some(Session {
                    expires_at: p::expiry(s.t, TTL),
                })
            }
            Action::Wait(c, priority) => s.waiting[c] = Some(priority),
            Action::EndSession(c) => {
                let lapsed_at = s.sessions[c].expect("a session").expires_at;
                let read = match self.variant {
                    Variant::SessionExpiryUnread => s.t,
                    _ => lapsed_at,
                };
                let ending = p::session_end(SessionEnd::Expired, read, LOCK_DELAY, s.t);
                if self.end_session(&mut s, c, ending) {
                    s.kept_until = s.kept_until.max(lapsed_at + LOCK_DELAY);
                    s.delay_late |= ending
                        .delayed_until
                        .is_some_and(|d| d > lapsed_at + LOCK_DELAY);
                }
            }
            Action::CloseSession(c) => {
                let expires_at = s.sessions[c].expect("a session").expires_at;
                let ending = p::session_end(SessionEnd::Closed, expires_at, LOCK_DELAY, s.t);
                s.closed_held |= s
                    .row
                    .is_some_and(|r| r.holder.is_some() && r.session == Some(c as u8));
                self.end_session(&mut s, c, ending);
            }
        }
        // A session-held key whose session lapsed is kept until its end
        // plus the lock-delay, even before the worker ends it.
        if let Some(r) = s.row.filter(|r| r.holder.is_some()) {
            if let Some(x) = r.session {
                let ends = Self::session_expiry(&s, x);
                if ends <= s.t {
                    s.kept_until = s.kept_until.max(ends + LOCK_DELAY);
                }
            }
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(OWNER, |_, s: &State| !s.owner_broken),
            Property::always(DELAY, |_, s: &State| !s.delay_broken),
            Property::always(PRIORITY, |_, s: &State| !s.priority_broken),
            Property::always(SESSION_END, |_, s: &State| {
                s.row.is_none_or(|r| {
                    r.holder.is_none() || r.session.is_none_or(|x| s.sessions[x as usize].is_some())
                })
            }),
            Property::always(DELAY_ENDS, |_, s: &State| !s.delay_late),
            Property::sometimes("a key is taken after a lock-delay", |_, s: &State| {
                s.delayed_takeover
            }),
            Property::sometimes(
                "a caller is kept back by a candidate of higher priority",
                |_, s: &State| s.outranked_refused,
            ),
            Property::sometimes(
                "another role's caller with the holder's id is refused",
                |_, s: &State| s.other_role_refused,
            ),
            Property::sometimes(
                "a session is closed while it holds the key",
                |_, s: &State| s.closed_held,
            ),
        ]
    }

    fn within_boundary(&self, s: &State) -> bool {
        s.t <= HORIZON && s.tenures <= 2
    }

    fn format_action(&self, action: &Action) -> String {
        match action {
            Action::Tick => "time passes one tick".into(),
            Action::Acquire(c) => format!("client {c} (id {}, role {}) acquires", id(*c), role(*c)),
            Action::AcquireIn(c) => format!("client {c} acquires under its session"),
            Action::OpenSession(c) => format!("client {c} opens a session"),
            Action::RenewSession(c) => format!("client {c} renews its session"),
            Action::Wait(c, q) => format!("client {c} waits in le_acquire with priority {q}"),
            Action::EndSession(c) => format!("the worker ends client {c}'s lapsed session"),
            Action::CloseSession(c) => format!("client {c} closes its session"),
        }
    }
}

fn check(variant: Variant, property: Option<&'static str>) -> impl Checker<KeyModel> {
    common::check(
        &format!("key rules {variant:?}"),
        KeyModel { variant },
        property,
    )
}

/// The variant must break `property`, with a trace printed.
fn must_catch(variant: Variant, property: &'static str) {
    common::must_catch(
        &format!("key rules {variant:?}"),
        KeyModel { variant },
        property,
        |s| {
            format!(
                "t={} row {:?} sessions {:?} waiting {:?}",
                s.t, s.row, s.sessions, s.waiting
            )
        },
    );
}

#[test]
fn the_key_rules_hold() {
    check(Variant::Correct, None).assert_properties();
}

#[test]
fn a_tenure_extended_for_another_role_is_caught() {
    must_catch(Variant::OwnerUnread, OWNER);
}

#[test]
fn a_lock_delay_not_read_is_caught() {
    must_catch(Variant::DelayUnread, DELAY);
}

#[test]
fn a_lapsed_session_not_read_is_caught() {
    must_catch(Variant::SessionUnread, DELAY);
}

#[test]
fn candidates_not_asked_for_are_caught() {
    must_catch(Variant::CandidatesUnread, PRIORITY);
}

#[test]
fn keys_outliving_their_session_are_caught() {
    must_catch(Variant::SessionKeysUnlocked, SESSION_END);
}

#[test]
fn a_lock_delay_counted_from_the_end_is_caught() {
    must_catch(Variant::SessionExpiryUnread, DELAY_ENDS);
}
