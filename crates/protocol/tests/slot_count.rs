//! A key changing its number of slots (contract 17), model-checked with
//! stateright: clients acquire one key asking for 1, 2 or 3 slots, renew
//! nothing, release, and let their tenures lapse, while the worker vacates
//! lapsed ones, in any order. Every acquisition is decided as the extension
//! decides it (src/lease/look.rs): the key's row read without
//! locking, `acquisition`; for a key of many slots (or asked for), what it
//! read of them, `slots::slot_acquisition`; under the key's row lock
//! (taken only while no live holder has it), `slots::slot_take` on what
//! was read of its slots after the lock; the key made one of one slot ends
//! its lapsed tenures first (`vacate`, which never vacates a live one),
//! then `acquisition` under the lock. Releases are `release`'s, the
//! worker's vacating `vacate`'s. Each step is atomic, as the statements
//! under the key's row lock are for what the model checks: a tenure
//! starts only under that lock, and the read of the slots runs after it.
//!
//! One key, three clients (ids 0 to 2), ttl 2 ticks, horizon 3 ticks, at
//! most four tenures. Each broken variant must be caught with a printed
//! trace.
//!
//! `cargo test -p leaderlock-protocol --test slot_count` (seconds).
use leaderlock_protocol as p;
use p::acquire::{Ask, Context, Row};
use p::slots::{Locked, Own, Read, SlotAcquisition, SlotTake};
use stateright::{Checker, Model, Property};

mod common;

const TTL: i64 = 2;
const HORIZON: i64 = 4;
const CLIENTS: usize = 3;
const MAX_TENURES: u8 = 4;
/// The numbers of slots a client may ask for.
const ASKED: [i32; 3] = [1, 2, 3];

const AT_MOST: &str = "no more live tenures than the key admits";
const WHILE_FREE: &str = "a key's number of slots changes only while no tenure of it is live";
const ONE_EACH: &str = "an id holds one live tenure of a key at most";
const TERMS: &str = "a key's terms grow with each tenure";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Variant {
    Correct,
    /// The reads count no taken slot (a summary and a locked read that
    /// forget the live tenures).
    LiveUncounted,
    /// The reads forget the caller's own live tenure (the summary's, and
    /// the locked read's).
    OwnUnread,
}

/// The key's row: a key of one slot's lease, or the head of a key of many
/// (no holder, the key's last term and its number of slots).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Head {
    lease: p::Lease<u8>,
    slots: i32,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct State {
    t: i64,
    head: Option<Head>,
    /// The key's slot rows, slot 1 first (kept when vacated).
    rows: Vec<p::Lease<u8>>,
    highest: i64,
    tenures: u8,
    terms_broken: bool,
    changed_while_live: bool,
    /// Witnesses: the number of slots went down, and up.
    shrank: bool,
    grew: bool,
    refused_differ: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Action {
    Tick,
    Acquire(usize, i32),
    Release(usize),
    Expire,
}

#[derive(Clone)]
struct SlotModel {
    variant: Variant,
}

fn id(c: usize) -> u8 {
    c as u8
}

impl SlotModel {
    fn live_tenures(s: &State) -> usize {
        let head = s.head.is_some_and(|h| h.lease.is_live(s.t)) as usize;
        head + s.rows.iter().filter(|l| l.is_live(s.t)).count()
    }

    fn facts(locked: bool) -> Context {
        Context {
            locked,
            floor: 1,
            ready: true,
            outranked_until: None,
            handed: None,
        }
    }

    /// A tenure in `term` starts: terms must grow.
    fn issued(s: &mut State, term: i64) {
        s.terms_broken |= term <= s.highest;
        s.highest = s.highest.max(term);
        s.tenures += 1;
    }

    /// The key admits `slots` from now on.
    fn resize(s: &mut State, slots: i32) {
        let Some(h) = s.head.as_mut() else {
            return;
        };
        if h.slots != slots {
            s.shrank |= slots < h.slots;
            s.grew |= slots > h.slots;
            h.slots = slots;
            s.changed_while_live |= Self::live_tenures(s) > 0;
        }
    }

    /// Taken slots as the reads count them.
    fn taken(&self, s: &State) -> (i64, Option<i64>) {
        let live = s.rows.iter().filter(|l| l.is_live(s.t));
        match self.variant {
            Variant::LiveUncounted => (0, None),
            _ => (
                live.clone().count() as i64,
                live.map(|l| l.expires_at).min(),
            ),
        }
    }

    fn acquire(&self, s: &mut State, c: usize, asked: i32) {
        let now = s.t;
        let id = id(c);
        let ask = Ask {
            id: &id,
            slots: asked,
            session: None,
            value: false,
        };
        // READ_LEASE, decided without locking.
        let row = s.head.map(|h| Row::<u8, ()> {
            holder: h.lease.holder,
            term: h.lease.term,
            expires_at: Some(h.lease.expires_at),
            owned: true,
            slots: h.slots,
            session: None,
            delayed_until: None,
        });
        match p::acquisition(row.as_ref(), &ask, &mut Self::facts(false), now) {
            p::Acquisition::ManySlots => self.many(s, c, asked),
            p::Acquisition::Start { term } => {
                // A key never used: its first tenure.
                Self::issued(s, term);
                s.head = Some(Head {
                    lease: p::Lease {
                        holder: Some(id),
                        term,
                        expires_at: p::expiry(now, TTL),
                    },
                    slots: 1,
                });
            }
            p::Acquisition::Extend => {
                s.head.as_mut().expect("held").lease.expires_at = p::expiry(now, TTL);
            }
            p::Acquisition::Lock => self.take_one(s, c, asked),
            p::Acquisition::Wait(_) | p::Acquisition::NotNow => {}
            other => panic!("not a decision without sessions: {other:?}"),
        }
    }

    /// A key of one slot, its row locked (`LOCK_ACQUIRABLE`: not live, or
    /// the caller's own), decided again.
    fn take_one(&self, s: &mut State, c: usize, asked: i32) {
        let now = s.t;
        let id = id(c);
        let Some(h) = s.head.filter(|h| h.slots == 1) else {
            return;
        };
        if h.lease.is_live(now) && h.lease.holder != Some(id) {
            return;
        }
        let row = Row::<u8, ()> {
            holder: h.lease.holder,
            term: h.lease.term,
            expires_at: Some(h.lease.expires_at),
            owned: true,
            slots: 1,
            session: None,
            delayed_until: None,
        };
        let ask = Ask {
            id: &id,
            slots: asked,
            session: None,
            value: false,
        };
        match p::acquisition(Some(&row), &ask, &mut Self::facts(true), now) {
            p::Acquisition::Start { term } => {
                Self::issued(s, term);
                s.head = Some(Head {
                    lease: p::Lease {
                        holder: Some(id),
                        term,
                        expires_at: p::expiry(now, TTL),
                    },
                    slots: 1,
                });
            }
            p::Acquisition::Extend => {
                s.head.as_mut().expect("held").lease.expires_at = p::expiry(now, TTL);
            }
            _ => {}
        }
    }

    /// A key of many slots, or asked for (`slots.rs`).
    fn many(&self, s: &mut State, c: usize, asked: i32) {
        let now = s.t;
        let id = id(c);
        let ask = Ask {
            id: &id,
            slots: asked,
            session: None,
            value: false,
        };
        let has = s.head.map(|h| h.slots);
        let holder_live = s.head.is_some_and(|h| h.lease.is_live(now));
        let own = s.rows.iter().position(|l| l.is_held_by(&id, now));
        let read = match has {
            Some(has) if has > 1 && !holder_live => {
                let (taken, earliest) = self.taken(s);
                Read {
                    has: Some(has),
                    holder_live,
                    own: own
                        .filter(|_| self.variant != Variant::OwnUnread)
                        .map(|i| Own {
                            slot: i as i32 + 1,
                            expires_at: Some(s.rows[i].expires_at),
                            owned: true,
                            session: None::<()>,
                        }),
                    taken,
                    earliest,
                }
            }
            _ => Read {
                has,
                holder_live,
                own: None,
                taken: 0,
                earliest: None,
            },
        };
        match p::slots::slot_acquisition(&read, &ask, &mut Self::facts(false)) {
            SlotAcquisition::SlotsDiffer(_) => s.refused_differ = true,
            SlotAcquisition::Wait(_) | SlotAcquisition::NotNow => {}
            SlotAcquisition::FirstTenure => {
                // INSERT_KEY_HEAD and START_SLOT: slot 1 in the floor's term.
                let term = p::next_term(None, 1);
                Self::issued(s, term);
                s.head = Some(Head {
                    lease: p::Lease {
                        holder: None,
                        term,
                        expires_at: now,
                    },
                    slots: asked,
                });
                s.rows = vec![p::Lease {
                    holder: Some(id),
                    term,
                    expires_at: p::expiry(now, TTL),
                }];
            }
            SlotAcquisition::Extend => {
                s.rows[own.expect("its own")].expires_at = p::expiry(now, TTL);
            }
            SlotAcquisition::OneSlot | SlotAcquisition::Take => self.take(s, c, asked),
            other => panic!("not a decision without sessions: {other:?}"),
        }
    }

    /// Under the key's row lock (`LOCK_KEY_HEAD`: only while no live
    /// holder has it), `slot_take` on the read of the slots (`SLOT_TAKE`),
    /// and what it decided written (`TAKE_SLOT`).
    fn take(&self, s: &mut State, c: usize, asked: i32) {
        let now = s.t;
        let id = id(c);
        let Some(h) = s.head.filter(|h| !h.lease.is_live(now)) else {
            return;
        };
        let (taken, earliest) = self.taken(s);
        let in_range = |i: usize| (i as i32) < asked;
        let locked = Locked {
            has: h.slots,
            term: h.lease.term,
            own_until: s
                .rows
                .iter()
                .filter(|l| l.is_held_by(&id, now) && self.variant != Variant::OwnUnread)
                .map(|l| l.expires_at)
                .min(),
            free: (0..s.rows.len())
                .find(|&i| in_range(i) && !s.rows[i].is_live(now))
                .map(|i| i as i32 + 1),
            new: (s.rows.len() as i32 + 1..=asked).next(),
            taken,
            earliest,
        };
        let ask = Ask {
            id: &id,
            slots: asked,
            session: None::<()>,
            value: false,
        };
        match p::slots::slot_take(&locked, &ask, &mut Self::facts(true)) {
            SlotTake::SlotsDiffer(_) => s.refused_differ = true,
            SlotTake::Wait(_) | SlotTake::NotNow => {}
            SlotTake::OneSlot => {
                // Its lapsed tenures end first (`end_stale_tenures`): a
                // tenure the decision keeps makes the change wait.
                if !Self::end_stale(s, 0, now) {
                    return;
                }
                Self::resize(s, 1);
                self.take_one(s, c, 1);
            }
            SlotTake::Start {
                slot, term, resize, ..
            } => {
                if resize && !Self::end_stale(s, asked, now) {
                    return;
                }
                Self::resize(s, asked);
                Self::issued(s, term);
                let h = s.head.as_mut().expect("locked");
                h.lease.holder = None;
                h.lease.term = term;
                let i = slot as usize - 1;
                if i == s.rows.len() {
                    s.rows.push(p::Lease {
                        holder: None,
                        term: 0,
                        expires_at: now,
                    });
                }
                s.rows[i] = p::Lease {
                    holder: Some(id),
                    term,
                    expires_at: p::expiry(now, TTL),
                };
            }
        }
    }

    /// The tenures in slots above `above` with a holder, locked, each
    /// vacated as `vacate` says; false (nothing changed) when it keeps one.
    fn end_stale(s: &mut State, above: i32, now: i64) -> bool {
        let stale: Vec<usize> = (0..s.rows.len())
            .filter(|&i| i as i32 + 1 > above && s.rows[i].holder.is_some())
            .collect();
        let all = stale.iter().all(|&i| {
            matches!(
                p::vacate(&s.rows[i], p::vacate::Cause::Lapsed, now),
                p::vacate::Vacating::Expire { .. }
            )
        });
        if all {
            for i in stale {
                s.rows[i].holder = None;
            }
        }
        all
    }

    fn release(&self, s: &mut State, c: usize) {
        let now = s.t;
        let id = id(c);
        let ask = p::keep::Letting {
            id: &id,
            term: None,
            implicit: true,
            slots: s.head.map_or(1, |h| h.slots),
        };
        // LOCK_OWN, then LOCK_OWN_SLOT: the id's live tenure, locked.
        if let Some(h) = s.head.as_mut().filter(|h| h.lease.is_held_by(&id, now)) {
            if let p::keep::Release::Vacate { .. } =
                p::release(Some(&h.lease), &ask, &mut Self::facts(true), now)
            {
                h.lease.holder = None;
            }
            return;
        }
        if let Some(l) = s.rows.iter_mut().find(|l| l.is_held_by(&id, now)) {
            if let p::keep::Release::Vacate { .. } =
                p::release(Some(l), &ask, &mut Self::facts(true), now)
            {
                l.holder = None;
            }
        }
    }
}

impl Model for SlotModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![State {
            t: 0,
            head: None,
            rows: Vec::new(),
            highest: 0,
            tenures: 0,
            terms_broken: false,
            changed_while_live: false,
            shrank: false,
            grew: false,
            refused_differ: false,
        }]
    }

    fn actions(&self, s: &State, actions: &mut Vec<Action>) {
        if s.t < HORIZON {
            actions.push(Action::Tick);
        }
        for c in 0..CLIENTS {
            let holds = s.head.is_some_and(|h| h.lease.is_held_by(&id(c), s.t))
                || s.rows.iter().any(|l| l.is_held_by(&id(c), s.t));
            if holds {
                actions.push(Action::Release(c));
            }
            if s.tenures < MAX_TENURES {
                for n in ASKED {
                    actions.push(Action::Acquire(c, n));
                }
            }
        }
        let lapsed = |l: &p::Lease<u8>| p::may_vacate(l, s.t);
        if s.head.is_some_and(|h| lapsed(&h.lease)) || s.rows.iter().any(lapsed) {
            actions.push(Action::Expire);
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut s = last.clone();
        match action {
            Action::Tick => s.t += 1,
            Action::Acquire(c, n) => self.acquire(&mut s, c, n),
            Action::Release(c) => self.release(&mut s, c),
            Action::Expire => {
                // LOCK_LAPSED, LOCK_LAPSED_SLOTS: one lapsed tenure locked.
                let now = s.t;
                let expire = |l: &mut p::Lease<u8>| {
                    if let p::vacate::Vacating::Expire { .. } =
                        p::vacate(l, p::vacate::Cause::Lapsed, now)
                    {
                        l.holder = None;
                    }
                };
                match s.head.as_mut().filter(|h| p::may_vacate(&h.lease, now)) {
                    Some(h) => expire(&mut h.lease),
                    None => {
                        let l = s.rows.iter_mut().find(|l| p::may_vacate(l, now))?;
                        expire(l);
                    }
                }
            }
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(AT_MOST, |_, s: &State| {
                Self::live_tenures(s) <= s.head.map_or(0, |h| h.slots) as usize
            }),
            Property::always(WHILE_FREE, |_, s: &State| !s.changed_while_live),
            Property::always(ONE_EACH, |_, s: &State| {
                (0..CLIENTS).all(|c| {
                    let head = s.head.is_some_and(|h| h.lease.is_held_by(&id(c), s.t)) as usize;
                    head + s.rows.iter().filter(|l| l.is_held_by(&id(c), s.t)).count() <= 1
                })
            }),
            Property::always(TERMS, |_, s: &State| !s.terms_broken),
            Property::sometimes(
                "a key of many slots becomes one of fewer",
                |_, s: &State| s.shrank,
            ),
            Property::sometimes("a key becomes one of more slots", |_, s: &State| s.grew),
            Property::sometimes(
                "an acquisition asking for another number of slots is refused",
                |_, s: &State| s.refused_differ,
            ),
            Property::sometimes(
                "as many tenures live as the key admits, two or more",
                |_, s: &State| {
                    let n = Self::live_tenures(s);
                    n >= 2 && n == s.head.map_or(0, |h| h.slots) as usize
                },
            ),
        ]
    }

    fn within_boundary(&self, s: &State) -> bool {
        s.t <= HORIZON
    }

    fn format_action(&self, action: &Action) -> String {
        match action {
            Action::Tick => "time passes one tick".into(),
            Action::Acquire(c, n) => format!("client {c} acquires, asking for {n} slots"),
            Action::Release(c) => format!("client {c} releases"),
            Action::Expire => "the worker vacates a lapsed tenure".into(),
        }
    }
}

fn show(s: &State) -> String {
    let tenure = |l: &p::Lease<u8>| format!("{:?}/{}/{}", l.holder, l.term, l.expires_at);
    format!(
        "t={} key {} slots {:?}",
        s.t,
        s.head.map_or("none".into(), |h| format!(
            "{} of {} slots",
            tenure(&h.lease),
            h.slots
        )),
        s.rows.iter().map(tenure).collect::<Vec<_>>()
    )
}

#[test]
fn slots_change_only_while_the_key_is_free() {
    common::check(
        "slot count Correct",
        SlotModel {
            variant: Variant::Correct,
        },
        None,
    )
    .assert_properties();
}

#[test]
fn live_tenures_not_counted_are_caught() {
    common::must_catch(
        "slot count LiveUncounted",
        SlotModel {
            variant: Variant::LiveUncounted,
        },
        WHILE_FREE,
        show,
    );
}

#[test]
fn the_own_tenure_not_read_is_caught() {
    common::must_catch(
        "slot count OwnUnread",
        SlotModel {
            variant: Variant::OwnUnread,
        },
        ONE_EACH,
        show,
    );
}
