//! One look at a key (contracts 3.1, 9, 17, 18, 21) as one state machine
//! with three doors: `drive`, its one switch, runs each step's statement
//! through the store's gate (`store::keys`); `next` asks the decision core
//! (`decide`, its one door) what the reply leads to: another statement, or
//! the end and what follows its write (`tenure::Follow`, done once). A lock
//! and the writes under it share one subtransaction, kept only when the
//! look acquired. The first read takes no lock (a rival that cannot win
//! must never lock the holder's row); a free key's first tenure, a
//! holder's renewal and a takeover of a lapsed lease each write with one
//! statement after it.

use crate::base::clock;
use crate::base::ttl::Ttl;
use crate::lease::expiry;
use crate::lease::failover;
use crate::lease::row::{self, Claim, KeyFacts, Lease};
use crate::lease::session_leases;
use crate::lease::slots::Own;
use crate::lease::tenure::{self, Follow};
use crate::shmem::candidates;
use crate::store::call;
use crate::store::keys::{self, Held, Reply, Statement, Tenure};
use crate::store::plans;
use crate::store::schema_version;
use leaderlock_protocol::acquire::{Ask, Row};
use leaderlock_protocol::slots::{self as rules, slot_acquisition, slot_take};
use leaderlock_protocol::slots::{SlotAcquisition, SlotTake};
use leaderlock_protocol::{acquisition, Acquisition};
use pgrx::prelude::*;
use pgrx::Uuid;

/// The result of one look.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Attempt {
    Acquired,
    /// Live and held by another until this time.
    HeldUntil(i64),
    /// Locked by another transaction, or changed under us: look again soon.
    Busy,
    /// The session it was asked under is not live (or not the caller's):
    /// no look can succeed.
    Refused,
    /// The key has live holders and admits this many slots, not the number
    /// asked (contract 17).
    SlotsDiffer(i32),
}

/// Where a look stands.
enum Step<'a> {
    /// Run this statement; `then` says what its reply leads to.
    Run(Statement<'a>, Then),
    /// The same, a lock, in a subtransaction that holds the writes under it
    /// and is kept only when the look acquired (or made the key one of one
    /// slot).
    Locked(Statement<'a>, Then),
    /// A key of many slots made one of one slot under its lock: decided
    /// again as one.
    AsOneSlot,
    Done(Attempt, Follow),
}

impl Step<'_> {
    fn kept(&self) -> bool {
        matches!(self, Step::Done(Attempt::Acquired, _) | Step::AsOneSlot)
    }
}

/// What a look asks the decision core, on what it read.
enum Question<'q> {
    /// A key's row (None: never used), read at an instant, with its lock
    /// held or not.
    Row(Option<&'q Row<&'q str, Uuid>>, bool, i64),
    /// A key of many slots as read.
    Slots(&'q rules::Read<Uuid>),
    /// Its slots as read under its head's lock.
    Taking(&'q rules::Locked),
}

/// The decision core's answer.
enum Answer {
    Row(Acquisition),
    Slots(SlotAcquisition),
    Taking(SlotTake),
}

/// What a statement's reply leads to.
enum Then {
    /// The key's row, read without a lock.
    Read,
    /// A takeover as read (then as `Started`); the lock decides when it
    /// took nothing.
    AsRead(Box<Then>),
    /// The row locked: decided again under the lock.
    Locked,
    /// A new tenure written (a brand-new key's first: None when a rival
    /// made the key first).
    Started {
        now: i64,
        expires_at: i64,
        previous: Option<String>,
    },
    /// The holder's renewal (of `slot`'s tenure for a key of many); when
    /// it did not extend, the lock decides (`lock`) or the look ends.
    Renewed {
        slot: Option<i32>,
        now: i64,
        lock: bool,
    },
    /// The holder's tenure moved into a session or out of one.
    Rebound {
        slot: Option<i32>,
        now: i64,
        stored: i64,
    },
    /// The holder's value set.
    Proclaimed {
        term: i64,
        now: i64,
        cue: Option<i64>,
    },
    /// A key of many slots as read (its lapsed sessions ended, once).
    Summary { now: i64, retried: bool },
    /// A brand-new key of many slots: its head row.
    HeadInserted { now: i64 },
    /// How many slots the key admits, after a rival made it first.
    KeySlots,
    /// The caller's live slot locked, to move it (`rebind`) or to set its
    /// value.
    OwnSlot { rebind: bool },
    /// The key's head locked.
    Head,
    /// The key's slots under the head's lock.
    Taking { head_holder: Option<String> },
    /// The lapsed tenures in the way (of slots above `above`), locked.
    Stale {
        above: i32,
        slot: Option<i32>,
        previous: Option<String>,
        now: i64,
    },
    /// And how many there are: vacated when all are locked, then the key
    /// made one of one slot (`slot` None) or `slot` taken.
    Counted {
        locked: Vec<(Held, i32)>,
        slot: Option<i32>,
        previous: Option<String>,
        now: i64,
    },
    /// The key made one of one slot.
    OneSlot,
}

/// One look at `key` for `id` (`claim`'s session checked live by the
/// caller). `deadline`, le_acquire's, bounds the only wait there is (a
/// rival's first insert of the key: `keys::insert_first`).
pub(super) fn look(
    key: &str,
    id: &str,
    ttl: Ttl,
    claim: Claim<'_>,
    deadline: Option<i64>,
) -> Attempt {
    let mut look = Look {
        key,
        id,
        ttl,
        claim,
        deadline,
        owner: call::caller(),
        seen: None,
        read_at: 0,
    };
    let owner = look.owner;
    match look.drive(Step::Run(Statement::Read { key, owner }, Then::Read), false) {
        Step::Done(attempt, follow) => {
            follow.done(key, id, claim.value, claim.slots);
            attempt
        }
        _ => unreachable!("a look ends done"),
    }
}

/// A look in progress: what it asks, and what its first read found.
struct Look<'a> {
    key: &'a str,
    id: &'a str,
    ttl: Ttl,
    claim: Claim<'a>,
    deadline: Option<i64>,
    owner: pg_sys::Oid,
    /// The key's row as the first read found it, and when.
    seen: Option<Lease>,
    read_at: i64,
}

impl<'a> Look<'a> {
    /// The one switch: runs steps until the look ends (inside a lock's
    /// subtransaction, `locked`, until it leaves it).
    fn drive(&mut self, mut step: Step<'a>, locked: bool) -> Step<'a> {
        loop {
            let (then, reply) = match step {
                Step::Run(statement, then) => (then, keys::run(statement)),
                Step::Locked(statement, then) => {
                    step = plans::in_subtransaction(
                        || self.drive(Step::Run(statement, then), true),
                        Step::kept,
                    );
                    continue;
                }
                Step::AsOneSlot if !locked => {
                    step = self.as_one_slot();
                    continue;
                }
                end => return end,
            };
            step = self.next(then, reply);
        }
    }

    /// What `reply` leads to.
    fn next(&mut self, then: Then, reply: Reply) -> Step<'a> {
        match (then, reply) {
            (Then::Read, Reply::Lease(seen)) => {
                self.read_at = clock::now();
                // A key of a lapsed session: the session ends first (all its
                // keys), as a takeover vacates a lapsed lease; the lock then
                // finds the row vacant. (In le_acquire's look, only if the look
                // acquires: it rolls back otherwise, and the lock-delay counts
                // from the session's expiry, whoever ends it.)
                let lapsed = seen
                    .as_ref()
                    .filter(|l| l.holder.is_some() && !l.is_live(self.read_at));
                if let Some(session) = lapsed.and_then(|l| l.session) {
                    session_leases::end_lapsed(session, self.read_at);
                }
                self.seen = seen;
                let row = self.seen.as_ref().map(Lease::row);
                let decided = self.acquisition(row.as_ref(), false, self.read_at);
                self.unlocked(decided, true)
            }
            // A takeover as read that took nothing: the lock decides.
            (Then::AsRead(_), Reply::Term(None)) => self.lock(),
            (Then::AsRead(then), reply) => self.next(*then, reply),
            (Then::Locked, Reply::Lease(lease)) => match lease {
                Some(lease) => self.locked(lease),
                None => end(Attempt::Busy),
            },
            (
                Then::Started {
                    now,
                    expires_at,
                    previous,
                },
                Reply::Term(term),
            ) => match term {
                Some(term) => started(term, now, expires_at, previous),
                // A concurrent first acquisition of the same key won, or is
                // still open past our deadline.
                None => end(Attempt::Busy),
            },
            (Then::Renewed { slot, now, lock }, Reply::Extended(extended)) => {
                match tenure::renewed(extended, self.id, now) {
                    Some((term, expires_at)) => self.keep(slot, term, now, Some(expires_at)),
                    None if lock => self.lock(),
                    None => end(Attempt::Busy),
                }
            }
            (Then::Rebound { slot, now, stored }, Reply::Term(term)) => {
                self.keep(slot, term.expect("a tenure's term"), now, Some(stored))
            }
            (Then::Proclaimed { term, now, cue }, Reply::Done) => Step::Done(
                Attempt::Acquired,
                Follow::Kept {
                    term,
                    now,
                    cue,
                    proclaimed: true,
                },
            ),
            (Then::Summary { now, retried }, Reply::Summary(read, lapsed)) => {
                if lapsed.is_empty() || retried {
                    return self.slots_decided(&read, now);
                }
                // The lapsed sessions that still hold a slot end first, each
                // with all its keys, as a takeover vacates a lapsed tenure
                // (until then their slots are not free); then the key is
                // read again. (In le_acquire's look, only if the look
                // acquires: it rolls back otherwise.)
                for session in lapsed {
                    session_leases::end_lapsed(session, now);
                }
                let has = read.has.expect("a summary of a key of many slots");
                self.summary(has, now, true)
            }
            (Then::HeadInserted { now }, Reply::Term(term)) => match term {
                Some(term) => {
                    let (tenure, then) = self.start(now, None);
                    let slot = 1;
                    Step::Run(Statement::StartSlot { tenure, slot, term }, then)
                }
                // A concurrent first acquisition of the key won: a free slot
                // may be left in it.
                None => Step::Run(Statement::KeySlots { key: self.key }, Then::KeySlots),
            },
            (Then::KeySlots, Reply::Slots(has)) => match has {
                Some(has) if has > 1 => self.slots_read(Some(has), false),
                _ => end(Attempt::Busy),
            },
            (Then::OwnSlot { rebind }, Reply::OwnSlot(own)) => self.own_slot(own, rebind),
            (Then::Head, Reply::Head(head)) => match head {
                // Locked by another candidate or writer, or (a key of one
                // slot) taken live meanwhile: look again.
                None => end(Attempt::Busy),
                Some((head_holder, has, term)) => {
                    // (no free slot to look for when one slot is asked: the
                    // key becomes one of one slot)
                    let slots = self.claim.slots;
                    let take = Statement::SlotTake {
                        key: self.key,
                        id: self.id,
                        free_up_to: if slots > 1 { slots } else { 0 },
                        has,
                        term,
                    };
                    Step::Run(take, Then::Taking { head_holder })
                }
            },
            (Then::Taking { head_holder }, Reply::Taking(locked, previous)) => {
                // (a lapsed holder: of the free slot, else of the row, a key
                // of one slot changing its number)
                self.taking(&locked, previous.or(head_holder))
            }
            (
                Then::Stale {
                    above,
                    slot,
                    previous,
                    now,
                },
                Reply::Stale(locked),
            ) => {
                let count = Statement::StaleCount {
                    key: self.key,
                    above,
                };
                let then = Then::Counted {
                    locked,
                    slot,
                    previous,
                    now,
                };
                Step::Run(count, then)
            }
            (
                Then::Counted {
                    locked,
                    slot,
                    previous,
                    now,
                },
                Reply::Count(all),
            ) => {
                // A locked one makes the change wait.
                if expiry::vacate_stale(&locked, all, self.claim.slots, now).is_none() {
                    return end(Attempt::Busy);
                }
                match slot {
                    Some(slot) => self.take_slot(slot, previous, now),
                    None => Step::Run(Statement::SetOneSlot { key: self.key }, Then::OneSlot),
                }
            }
            (Then::OneSlot, Reply::Done) => Step::AsOneSlot,
            _ => unreachable!("a statement replies as its kind does"),
        }
    }

    /// The one door to the decision core: its answer to `question`.
    fn decide(&self, question: Question<'_>) -> Answer {
        let locked = matches!(question, Question::Row(_, true, _));
        let mut facts = KeyFacts {
            key: self.key,
            priority: self.claim.priority,
            locked,
            // (only a key of one slot is handed over)
            waiting: !locked && self.deadline.is_some() && matches!(question, Question::Row(..)),
        };
        let ask = self.ask();
        match question {
            Question::Row(row, _, at) => Answer::Row(acquisition(row, &ask, &mut facts, at)),
            Question::Slots(read) => Answer::Slots(slot_acquisition(read, &ask, &mut facts)),
            Question::Taking(locked) => Answer::Taking(slot_take(locked, &ask, &mut facts)),
        }
    }

    /// The core's decision on `row` (None: a key never used), read at `at`,
    /// with the row lock held (`locked`) or not.
    fn acquisition(&self, row: Option<&Row<&str, Uuid>>, locked: bool, at: i64) -> Acquisition {
        match self.decide(Question::Row(row, locked, at)) {
            Answer::Row(decided) => decided,
            _ => unreachable!("the core answers as asked"),
        }
    }

    /// What `claim` asks of the decision core.
    fn ask(&self) -> Ask<'_, &'a str, Uuid> {
        Ask {
            id: &self.id,
            slots: self.claim.slots,
            session: self.claim.session.map(|s| s.session),
            value: self.claim.value.is_some(),
        }
    }

    /// What a decision on the row as read leads to (`first`: the first
    /// read's, else the row of a key just made one of one slot).
    fn unlocked(&mut self, decided: Acquisition, first: bool) -> Step<'a> {
        match decided {
            // A key of many slots, or asked for.
            Acquisition::ManySlots if first => {
                let has = self.seen.as_ref().map(|l| l.slots);
                let live = self.seen.as_ref().is_some_and(|l| l.is_live(self.read_at));
                self.slots_read(has, live)
            }
            Acquisition::Wait(until) => end(Attempt::HeldUntil(until)),
            Acquisition::NotNow | Acquisition::ManySlots => end(Attempt::Busy),
            // Held under this very session, which is what lives: nothing to
            // extend (a value is set under the lock, which never waits).
            Acquisition::Held => end(Attempt::Acquired),
            // Handed to this waiting call by a release (`hand_over`), as it
            // asked for it: nothing left to write. (True as of this read, as
            // any answer is as of its call: a le_force_release may follow,
            // and the term tells.)
            Acquisition::Handed => match candidates::granted() {
                Some(tenure) => Step::Done(Attempt::Acquired, Follow::Took(tenure)),
                None => self.lock(),
            },
            // Ours: extended as le_renew does, in one statement that never
            // waits, without the lock (this is how holders that call
            // le_try_acquire periodically renew). If that fails (lapsed
            // meanwhile, or the row is locked), the lock decides.
            Acquisition::Extend => {
                let renew = self.renew(self.read_at, false);
                let then = Then::Renewed {
                    slot: None,
                    now: self.read_at,
                    lock: true,
                };
                Step::Run(renew, then)
            }
            // A key never used: its first tenure.
            Acquisition::Start { .. } => {
                let now = clock::now();
                let (tenure, then) = self.start(now, None);
                let deadline = self.deadline;
                Step::Run(Statement::InsertFirst { tenure, deadline }, then)
            }
            // A takeover of a row that was not live as read: in one
            // statement that takes it only if it is still as read, never
            // waiting (`queries::TAKE_AS_READ`: no write has ended, moved or
            // delayed its tenure since, and it is still not live at a clock
            // read before the row is locked); else the lock decides again.
            Acquisition::Lock => match self.as_read() {
                Some(step) => step,
                None => self.lock(),
            },
            Acquisition::Rebind => self.lock(),
        }
    }

    /// The takeover as read, when the row read was not live and the core,
    /// deciding on it as if locked, starts a tenure.
    fn as_read(&self) -> Option<Step<'a>> {
        if !schema_version::has_slots() {
            return None;
        }
        let lease = self.seen.as_ref().filter(|l| !l.is_live(self.read_at))?;
        let now = clock::now();
        let Acquisition::Start { .. } = self.acquisition(Some(&lease.row()), true, now) else {
            return None;
        };
        let (tenure, then) = self.start(now, lease.holder.clone());
        let seen = lease.clone();
        let take = Statement::TakeAsRead { tenure, seen };
        Some(Step::Run(take, Then::AsRead(Box::new(then))))
    }

    /// Locks the row only if we may take or extend it (SKIP LOCKED: never
    /// wait), to decide and write under that lock.
    fn lock(&self) -> Step<'a> {
        let lock = Statement::Lock {
            key: self.key,
            id: self.id,
            owner: self.owner,
            now: clock::now(),
        };
        Step::Locked(lock, Then::Locked)
    }

    /// With the lease's row locked: an extension (same term; the session
    /// binding stays with the session that acquired it), a move into or
    /// out of a session, or a new tenure.
    fn locked(&self, lease: Lease) -> Step<'a> {
        let now = clock::now();
        match self.acquisition(Some(&lease.row()), true, now) {
            Acquisition::Held => self.keep(None, lease.term, now, None),
            Acquisition::Rebind => self.rebind(None, now),
            Acquisition::Extend => {
                let then = Then::Renewed {
                    slot: None,
                    now,
                    lock: false,
                };
                Step::Run(self.renew(now, false), then)
            }
            Acquisition::Start { .. } => {
                let (tenure, then) = self.start(now, lease.holder);
                Step::Run(Statement::StartTerm { tenure }, then)
            }
            _ => end(Attempt::Busy),
        }
    }

    /// The holder's renewal at `now` (`many`: of its slot's tenure).
    fn renew(&self, now: i64, many: bool) -> Statement<'a> {
        Statement::Renew {
            key: self.key,
            id: self.id,
            now,
            ttl: Some(self.ttl),
            owner: self.owner,
            term: None,
            many,
        }
    }

    /// Contract 21: the holder's live tenure (of `slot` for a key of many),
    /// locked, moved into the session it acquires under, or out of
    /// sessions (then by `ttl`). Same term.
    fn rebind(&self, slot: Option<i32>, now: i64) -> Step<'a> {
        let (stored, _) = tenure::ends(now, self.ttl, self.claim.session);
        let rebind = Statement::Rebind {
            key: self.key,
            session: self.claim.session.map(|s| s.session),
            stored,
            ttl: self.ttl,
            now,
            binding: row::binding(self.claim),
            slot,
        };
        Step::Run(rebind, Then::Rebound { slot, now, stored })
    }

    /// The holder kept its tenure in `term`: its value set, when it gave
    /// one, and announced as le_proclaim would.
    fn keep(&self, slot: Option<i32>, term: i64, now: i64, cue: Option<i64>) -> Step<'a> {
        match self.claim.value {
            Some(value) => {
                let set = Statement::SetValue {
                    key: self.key,
                    slot,
                    value,
                };
                Step::Run(set, Then::Proclaimed { term, now, cue })
            }
            None => Step::Done(
                Attempt::Acquired,
                Follow::Kept {
                    term,
                    now,
                    cue,
                    proclaimed: false,
                },
            ),
        }
    }

    /// A key of `has` slots (None: never used), `live` when it is one of
    /// one slot with a live holder: read (`summary`) when it has many slots
    /// and may have a free one, then decided.
    fn slots_read(&self, has: Option<i32>, live: bool) -> Step<'a> {
        let now = clock::now();
        match has {
            Some(has) if has > 1 && !live => self.summary(has, now, false),
            _ => {
                let read = rules::Read {
                    has,
                    holder_live: live,
                    own: None,
                    taken: 0,
                    earliest: None,
                };
                self.slots_decided(&read, now)
            }
        }
    }

    /// A key of `has` slots as an acquisition by our id reads it at `now`,
    /// in one statement: the slots taken, and the id's live tenure.
    fn summary(&self, has: i32, now: i64, retried: bool) -> Step<'a> {
        let summary = Statement::Summary {
            key: self.key,
            id: self.id,
            owner: self.owner,
            has,
            now: if retried { clock::now() } else { now },
        };
        Step::Run(summary, Then::Summary { now, retried })
    }

    /// What the core decides on a key of many slots as read at `now`.
    fn slots_decided(&self, read: &rules::Read<Uuid>, now: i64) -> Step<'a> {
        let Answer::Slots(decided) = self.decide(Question::Slots(read)) else {
            unreachable!("the core answers as asked")
        };
        match decided {
            SlotAcquisition::SlotsDiffer(has) => end(Attempt::SlotsDiffer(has)),
            SlotAcquisition::Wait(until) => end(Attempt::HeldUntil(until)),
            SlotAcquisition::NotNow => end(Attempt::Busy),
            // A brand-new key of many slots: its head row, and its first
            // tenure in slot 1.
            SlotAcquisition::FirstTenure if !failover::ready_for_new_tenures() => {
                end(Attempt::Busy)
            }
            SlotAcquisition::FirstTenure => {
                let now = clock::now();
                let head = Statement::InsertHead {
                    key: self.key,
                    floor: failover::term_floor(),
                    now,
                    slots: self.claim.slots,
                    deadline: self.deadline,
                };
                Step::Run(head, Then::HeadInserted { now })
            }
            // Held under this very session, which is what lives: nothing to
            // extend; a value is set under the tenure's lock, never waiting.
            SlotAcquisition::Held if self.claim.value.is_none() => end(Attempt::Acquired),
            SlotAcquisition::Held => self.lock_own_slot(false),
            // Into another session or out of one: moved, same slot and term.
            SlotAcquisition::Rebind => self.lock_own_slot(true),
            SlotAcquisition::Extend => {
                let slot = read.own.map_or(0, |o| o.slot);
                let then = Then::Renewed {
                    slot: Some(slot),
                    now,
                    lock: false,
                };
                Step::Run(self.renew(now, true), then)
            }
            // No live holder and one slot asked: the key becomes one of one
            // slot, or a free slot is taken, under the key's head lock, in a
            // subtransaction kept only if it did, so that a candidate that
            // finds every slot taken keeps no lock.
            SlotAcquisition::OneSlot | SlotAcquisition::Take => {
                Step::Locked(Statement::LockHead { key: self.key }, Then::Head)
            }
        }
    }

    /// Locks the caller's live tenure of a slot (never waiting) to move it
    /// (`rebind`) or set its value.
    fn lock_own_slot(&self, rebind: bool) -> Step<'a> {
        let lock = Statement::LockOwnSlot {
            key: self.key,
            id: self.id,
            owner: self.owner,
        };
        Step::Locked(lock, Then::OwnSlot { rebind })
    }

    /// With the caller's live slot locked (slot, term, expiry; None when
    /// there is none or it is locked): moved, or its value set.
    fn own_slot(&self, own: Option<(i32, i64, i64)>, rebind: bool) -> Step<'a> {
        let Some((slot, term, expires_at)) = own else {
            return end(Attempt::Busy);
        };
        let now = clock::now();
        // (locked only if the caller may act as its owner)
        let own = Own {
            slot,
            term,
            expires_at: Some(expires_at),
            owned: true,
            session: None,
        };
        if !own.is_led(None, now) {
            return end(Attempt::Busy);
        }
        if rebind {
            self.rebind(Some(slot), now)
        } else {
            self.keep(Some(slot), term, now, None)
        }
    }

    /// Under the key's head lock, its slots as read after the lock (a
    /// tenure starts only under it, so none started since, and no slot the
    /// read locked holds a live tenure), decided by the core: a tenure in
    /// a free slot, or the key made one of one slot; lapsed tenures in the
    /// way end first.
    fn taking(&self, locked: &rules::Locked, previous: Option<String>) -> Step<'a> {
        let now = clock::now();
        let slots = self.claim.slots;
        let stale = |slot, above, previous| {
            let then = Then::Stale {
                above,
                slot,
                previous,
                now,
            };
            Step::Run(
                Statement::Stale {
                    key: self.key,
                    above,
                },
                then,
            )
        };
        let Answer::Taking(decided) = self.decide(Question::Taking(locked)) else {
            unreachable!("the core answers as asked")
        };
        match decided {
            SlotTake::SlotsDiffer(has) => end(Attempt::SlotsDiffer(has)),
            SlotTake::Wait(until) => end(Attempt::HeldUntil(until)),
            SlotTake::NotNow => end(Attempt::Busy),
            // Its lapsed tenures end first.
            SlotTake::OneSlot => stale(None, 0, previous),
            // Changing the key's slots: its lapsed tenures beyond the new
            // number end first.
            SlotTake::Start { slot, resize, .. } if resize => {
                stale(Some(slot), if slots > 1 { slots } else { 0 }, previous)
            }
            SlotTake::Start { slot, .. } => self.take_slot(slot, previous, now),
        }
    }

    /// The key's next term and a tenure in `slot` (`TAKE_SLOT`).
    fn take_slot(&self, slot: i32, previous: Option<String>, now: i64) -> Step<'a> {
        let (tenure, then) = self.start(now, previous);
        let slots = self.claim.slots;
        Step::Run(
            Statement::TakeSlot {
                tenure,
                slot,
                slots,
            },
            then,
        )
    }

    /// A key of many slots made one of one slot, its row as first read:
    /// decided as one, as read.
    fn as_one_slot(&mut self) -> Step<'a> {
        let Some(row) = self.seen.as_ref().map(|l| Row {
            slots: 1,
            ..l.row()
        }) else {
            return end(Attempt::Busy);
        };
        let decided = self.acquisition(Some(&row), false, self.read_at);
        self.unlocked(decided, false)
    }

    /// A new tenure's parameters at `now`, following `previous`'s lapsed
    /// one, and what its statement's reply leads to.
    fn start(&self, now: i64, previous: Option<String>) -> (Tenure<'a>, Then) {
        let (stored, expires_at) = tenure::ends(now, self.ttl, self.claim.session);
        let tenure = row::tenure(
            self.key, self.id, now, stored, self.ttl, self.claim, self.owner,
        );
        let then = Then::Started {
            now,
            expires_at,
            previous,
        };
        (tenure, then)
    }
}

/// The look ends with nothing written.
fn end(attempt: Attempt) -> Step<'static> {
    Step::Done(attempt, Follow::Nothing)
}

/// A new tenure was written in `term`.
fn started(term: i64, now: i64, expires_at: i64, previous: Option<String>) -> Step<'static> {
    let follow = Follow::Started {
        term,
        now,
        expires_at,
        previous,
    };
    Step::Done(Attempt::Acquired, follow)
}
