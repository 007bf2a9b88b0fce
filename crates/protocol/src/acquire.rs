//! Contract 3.1 (with 9, 17, 18 and 21): what an acquisition of a key does,
//! decided from what was read, by the extension (`src/lease.rs`, once on a
//! read without locking and again under the row's lock) and by the model
//! (`tests/model.rs`) alike. The statements that write keep the rule a
//! locking statement must hold in their WHERE (`sql.rs`); what to write is
//! decided here.

use crate::{is_live, next_term, Micros};

/// A key's row as an acquisition reads it: the key's one tenure (a key of
/// one slot), or the head of a key of many.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Row<Id, S> {
    pub holder: Option<Id>,
    pub term: i64,
    /// The tenure's end (its session's, for one held under a session).
    pub expires_at: Option<Micros>,
    /// The caller may act as the owner of the tenure (contract 13).
    pub owned: bool,
    /// How many holders the key admits (17).
    pub slots: i32,
    /// The session the tenure is held under (21).
    pub session: Option<S>,
    /// A vacant key kept from every taker until then (21's lock-delay).
    pub delayed_until: Option<Micros>,
}

/// What the caller asks for.
#[derive(Clone, Copy, Debug)]
pub struct Ask<'a, Id, S> {
    pub id: &'a Id,
    /// How many holders the key is to admit (17).
    pub slots: i32,
    /// The session to hold the key under (21).
    pub session: Option<S>,
    /// A leader value comes with it (11).
    pub value: bool,
}

/// What the acquisition knows besides the row, asked only when the
/// decision needs it (the extension reads shared memory or a table for
/// some: a renewal asks for none of them).
pub trait Facts {
    /// The row was read under its lock (taken only when the caller may
    /// extend or take it); else read without locking, which never starts a
    /// tenure on an existing row: a rival that cannot win must never lock
    /// the holder's row.
    fn locked(&self) -> bool;
    /// The term floor of the timeline (8.1).
    fn floor(&mut self) -> i64;
    /// Held leases outlast a failover (8.2): new tenures may start.
    fn ready(&mut self) -> bool;
    /// A candidate of higher priority waits for the key until then (18).
    fn outranked_until(&mut self) -> Option<Micros>;
    /// The term of a tenure a release handed to this waiting call (9).
    fn handed(&mut self) -> Option<i64>;
}

/// `Facts` known in advance.
#[derive(Clone, Copy, Debug)]
pub struct Context {
    pub locked: bool,
    pub floor: i64,
    pub ready: bool,
    pub outranked_until: Option<Micros>,
    pub handed: Option<i64>,
}

impl Facts for Context {
    fn locked(&self) -> bool {
        self.locked
    }
    fn floor(&mut self) -> i64 {
        self.floor
    }
    fn ready(&mut self) -> bool {
        self.ready
    }
    fn outranked_until(&mut self) -> Option<Micros> {
        self.outranked_until
    }
    fn handed(&mut self) -> Option<i64> {
        self.handed
    }
}

/// What to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Acquisition {
    /// A key of many slots, or asked for: decided per slot.
    ManySlots,
    /// Kept from the caller until then: held live by another, in a
    /// lock-delay, or waited for by a candidate of higher priority.
    Wait(Micros),
    /// Not now; look again soon: a lapsed session holding it is not ended
    /// yet, a lock-delay began since the read, or the failover step is to
    /// come.
    NotNow,
    /// Held as asked, under the very session asked: nothing to extend (a
    /// value, when given, is set under the lock).
    Held,
    /// Handed to this waiting call by a release, as it asked: nothing to
    /// write.
    Handed,
    /// Held live by the caller: extended, same term (one statement that
    /// never waits; when it cannot, the lock decides).
    Extend,
    /// Held live by the caller, moved into or out of a session: same term.
    Rebind,
    /// Take the row's lock (never waiting) and decide again under it.
    Lock,
    /// A new tenure, in this term (for a key never used, its first).
    Start { term: i64 },
}

/// Contract 3.1: what an acquisition of `row` (None: a key never used)
/// asked as `ask` does at `now`.
pub fn acquisition<Id: PartialEq, S: PartialEq + Copy>(
    row: Option<&Row<Id, S>>,
    ask: &Ask<'_, Id, S>,
    facts: &mut impl Facts,
    now: Micros,
) -> Acquisition {
    let locked = facts.locked();
    let Some(r) = row else {
        return if ask.slots > 1 {
            Acquisition::ManySlots
        } else if let Some(until) = facts.outranked_until() {
            Acquisition::Wait(until)
        } else if !facts.ready() {
            Acquisition::NotNow
        } else {
            Acquisition::Start {
                term: next_term(None, facts.floor()),
            }
        };
    };
    let live = is_live(r.holder.is_some(), r.expires_at, now);
    if r.holder.is_none() {
        if let Some(until) = r.delayed_until.filter(|d| *d > now) {
            // 21: nobody takes it yet, whatever the slots asked (one that
            // began since the read: the next look waits for it).
            return if locked {
                Acquisition::NotNow
            } else {
                Acquisition::Wait(until)
            };
        }
    }
    if !locked && (r.slots > 1 || ask.slots > 1) {
        return Acquisition::ManySlots;
    }
    let own = r.holder.as_ref() == Some(ask.id) && r.owned;
    if live {
        if !own {
            return Acquisition::Wait(r.expires_at.unwrap_or(Micros::MAX));
        }
        if r.session.is_some() || ask.session.is_some() {
            return if r.session != ask.session {
                if locked {
                    Acquisition::Rebind
                } else {
                    Acquisition::Lock
                }
            } else if locked || !ask.value {
                Acquisition::Held
            } else {
                Acquisition::Lock // the value is set under the lock
            };
        }
        if !locked && facts.handed() == Some(r.term) {
            return Acquisition::Handed;
        }
        return Acquisition::Extend;
    }
    // Vacant or lapsed: a new tenure, under the lock, once no candidate of
    // higher priority waits and held leases outlast a failover.
    if !locked {
        return match facts.outranked_until() {
            Some(until) => Acquisition::Wait(until),
            None => Acquisition::Lock,
        };
    }
    if r.session.is_some() && r.holder.is_some() {
        // Held under a session that lapsed and is not ended yet (its row
        // locked by another transaction): the key is the session's until
        // then, and its lock-delay, if any, starts when it ends.
        return Acquisition::NotNow;
    }
    if !facts.ready() {
        return Acquisition::NotNow;
    }
    Acquisition::Start {
        term: next_term(Some(r.term), facts.floor()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(holder: Option<u8>, expires_at: i64) -> Row<u8, u8> {
        Row {
            holder,
            term: 4,
            expires_at: Some(expires_at),
            owned: true,
            slots: 1,
            session: None,
            delayed_until: None,
        }
    }

    fn ask(id: &u8) -> Ask<'_, u8, u8> {
        Ask {
            id,
            slots: 1,
            session: None,
            value: false,
        }
    }

    fn ctx(locked: bool) -> Context {
        Context {
            locked,
            floor: 1,
            ready: true,
            outranked_until: None,
            handed: None,
        }
    }

    #[test]
    fn a_read_without_locking_never_starts_a_tenure_on_a_row() {
        let lapsed = row(Some(2), 5);
        assert_eq!(
            acquisition(Some(&lapsed), &ask(&1), &mut ctx(false), 6),
            Acquisition::Lock
        );
        assert_eq!(
            acquisition(Some(&lapsed), &ask(&1), &mut ctx(true), 6),
            Acquisition::Start { term: 5 }
        );
        assert_eq!(
            acquisition(None, &ask(&1), &mut ctx(false), 6),
            Acquisition::Start { term: 1 }
        );
    }

    #[test]
    fn a_live_holder_extends_and_rivals_wait() {
        let live = row(Some(1), 10);
        assert_eq!(
            acquisition(Some(&live), &ask(&1), &mut ctx(false), 6),
            Acquisition::Extend
        );
        assert_eq!(
            acquisition(Some(&live), &ask(&2), &mut ctx(false), 6),
            Acquisition::Wait(10)
        );
        let foreign = Row {
            owned: false,
            ..live
        };
        assert_eq!(
            acquisition(Some(&foreign), &ask(&1), &mut ctx(false), 6),
            Acquisition::Wait(10)
        );
        let mut handed = Context {
            handed: Some(4),
            ..ctx(false)
        };
        assert_eq!(
            acquisition(Some(&live), &ask(&1), &mut handed, 6),
            Acquisition::Handed
        );
    }

    #[test]
    fn delays_priorities_and_the_failover_step_hold_new_tenures_back() {
        let delayed = Row {
            holder: None,
            delayed_until: Some(9),
            ..row(None, 5)
        };
        assert_eq!(
            acquisition(Some(&delayed), &ask(&1), &mut ctx(false), 6),
            Acquisition::Wait(9)
        );
        assert_eq!(
            acquisition(Some(&delayed), &ask(&1), &mut ctx(true), 6),
            Acquisition::NotNow
        );
        let mut outranked = Context {
            outranked_until: Some(8),
            ..ctx(false)
        };
        assert_eq!(
            acquisition(Some(&row(None, 5)), &ask(&1), &mut outranked, 6),
            Acquisition::Wait(8)
        );
        let mut not_ready = Context {
            ready: false,
            ..ctx(true)
        };
        assert_eq!(
            acquisition(Some(&row(None, 5)), &ask(&1), &mut not_ready, 6),
            Acquisition::NotNow
        );
        let lapsed_session = Row {
            session: Some(3),
            ..row(Some(2), 5)
        };
        assert_eq!(
            acquisition(Some(&lapsed_session), &ask(&1), &mut ctx(true), 6),
            Acquisition::NotNow
        );
    }

    #[test]
    fn sessions_rebind_or_hold() {
        let under = Row {
            session: Some(7),
            ..row(Some(1), 10)
        };
        let same = Ask {
            session: Some(7),
            ..ask(&1)
        };
        assert_eq!(
            acquisition(Some(&under), &same, &mut ctx(false), 6),
            Acquisition::Held
        );
        let with_value = Ask {
            value: true,
            ..same
        };
        assert_eq!(
            acquisition(Some(&under), &with_value, &mut ctx(false), 6),
            Acquisition::Lock
        );
        assert_eq!(
            acquisition(Some(&under), &with_value, &mut ctx(true), 6),
            Acquisition::Held
        );
        assert_eq!(
            acquisition(Some(&under), &ask(&1), &mut ctx(false), 6),
            Acquisition::Lock
        );
        assert_eq!(
            acquisition(Some(&under), &ask(&1), &mut ctx(true), 6),
            Acquisition::Rebind
        );
        let many = Ask {
            slots: 2,
            ..ask(&1)
        };
        assert_eq!(
            acquisition(Some(&row(None, 5)), &many, &mut ctx(false), 6),
            Acquisition::ManySlots
        );
    }
}
