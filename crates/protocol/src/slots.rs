//! Contract 17 (with 13, 18 and 21): what an acquisition of a key of many
//! slots does, decided from what was read, by the extension
//! (`src/lease/slots.rs`: on a read without locking, `slot_acquisition`,
//! then on one read under the key's row lock, `slot_take`) and by the
//! models (`tests/model.rs`, `tests/slot_count.rs`) alike. The statements
//! that lock keep the rule of what they may lock in their WHERE (the key's
//! row only while no live holder has it, a free slot only when no tenure
//! lives in it: `not_live!`); the read under the lock runs after the key's
//! row is locked, so what it reads of the slots is as of then (a tenure
//! starts only under that lock).

use crate::acquire::{Ask, Facts};
use crate::{next_term, Micros};

/// The caller's id's live tenure of the key, as read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Own<S> {
    /// Its slot (carried for the caller: the decision does not need it).
    pub slot: i32,
    pub expires_at: Option<Micros>,
    /// The caller may act as its owner (contract 13).
    pub owned: bool,
    /// The session it is held under (21).
    pub session: Option<S>,
}

/// What an acquisition of a key of many slots reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Read<S> {
    /// How many slots the key admits; None for a key never used.
    pub has: Option<i32>,
    /// The key is one of one slot with a live holder.
    pub holder_live: bool,
    /// The caller's id's live tenure, if any.
    pub own: Option<Own<S>>,
    /// The slots taken (live, or in a lock-delay), and the earliest end.
    pub taken: i64,
    pub earliest: Option<Micros>,
}

/// What to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotAcquisition {
    /// The key has live holders and admits this many slots, not the number
    /// asked: the call is refused (22023).
    SlotsDiffer(i32),
    /// Kept from the caller until then: every slot taken, the id's tenure
    /// owned by a role the caller is not a member of, or a candidate of
    /// higher priority waiting.
    Wait(Micros),
    /// A key never used: its head row and a first tenure.
    FirstTenure,
    /// The caller's live tenure, under the very session asked: nothing to
    /// extend (a value, when given, is set under the tenure's lock).
    Held,
    /// The caller's live tenure moved into the session asked, or out of one.
    Rebind,
    /// The caller's live tenure extended, same slot and term.
    Extend,
    /// No live holder and one slot asked: the key becomes one of one slot
    /// (under its row's lock), and is taken as such.
    OneSlot,
    /// Not now: the failover step is to come.
    NotNow,
    /// Lock the key's row and take a free slot under it.
    Take,
}

/// Contract 17: what an acquisition asked as `ask` does with what was read.
pub fn slot_acquisition<Id, S: PartialEq + Copy>(
    read: &Read<S>,
    ask: &Ask<'_, Id, S>,
    facts: &mut impl Facts,
) -> SlotAcquisition {
    if read.holder_live {
        // A key of one slot with a live holder, asked for more.
        return SlotAcquisition::SlotsDiffer(read.has.unwrap_or(1));
    }
    let Some(has) = read.has else {
        return match facts.outranked_until() {
            Some(until) => SlotAcquisition::Wait(until),
            None => SlotAcquisition::FirstTenure,
        };
    };
    if let Some(own) = read.own {
        // The id's live tenure, owned by a role the caller is not a member
        // of: not the caller's to extend, nor to hold twice (contract 13).
        if !own.owned {
            return SlotAcquisition::Wait(own.expires_at.unwrap_or(Micros::MAX));
        }
        if has != ask.slots {
            return SlotAcquisition::SlotsDiffer(has);
        }
        if own.session.is_some() || ask.session.is_some() {
            return if own.session == ask.session {
                SlotAcquisition::Held
            } else {
                SlotAcquisition::Rebind
            };
        }
        return SlotAcquisition::Extend;
    }
    if has != ask.slots && read.taken > 0 {
        return SlotAcquisition::SlotsDiffer(has);
    }
    if ask.slots == 1 {
        return if let Some(until) = facts.outranked_until() {
            SlotAcquisition::Wait(until)
        } else if !facts.ready() {
            SlotAcquisition::NotNow
        } else {
            SlotAcquisition::OneSlot
        };
    }
    if has == ask.slots && read.taken >= i64::from(ask.slots) {
        return SlotAcquisition::Wait(read.earliest.unwrap_or(Micros::MAX));
    }
    match facts.outranked_until() {
        Some(until) => SlotAcquisition::Wait(until),
        None => SlotAcquisition::Take,
    }
}

/// What a take of a slot reads under the key's row lock: the row
/// (`LOCK_KEY_HEAD`), then its slots, in one statement (`SLOT_TAKE`: its
/// first free slot locked).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Locked {
    /// How many slots the key admits, as its row says, and its last term.
    pub has: i32,
    pub term: i64,
    /// The end of the caller's id's live tenure of the key (whoever owns
    /// it: an id holds one tenure of a key at most).
    pub own_until: Option<Micros>,
    /// The first slot of those asked for that no tenure lives in (nor a
    /// lock-delay runs in), its row locked; else the lowest number asked
    /// for that has no row yet.
    pub free: Option<i32>,
    pub new: Option<i32>,
    /// The slots taken (live, or in a lock-delay), and the earliest end.
    pub taken: i64,
    pub earliest: Option<Micros>,
}

/// What a take under the key's row lock does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotTake {
    /// The key has taken slots and admits this many, not the number asked.
    SlotsDiffer(i32),
    /// Kept from the caller until then: the id holds a tenure already, or
    /// every slot is taken.
    Wait(Micros),
    /// Not now; look again soon (the failover step is to come, or a slot
    /// is locked by another transaction).
    NotNow,
    /// One slot asked: the key becomes one of one slot, its stale tenures
    /// ended, and is taken as such (`acquisition`, under the same lock).
    OneSlot,
    /// A new tenure in `slot`, in `term`, the key admitting the number
    /// asked from now on; `resize`: it admitted another number, and its
    /// lapsed tenures above the new one end first.
    Start { slot: i32, term: i64, resize: bool },
}

/// Contract 17 under the key's row lock: what a take asked as `ask` does
/// with `locked`. Slots change only while no slot is taken; an id holds
/// one tenure of a key at most; the term is the key's next.
pub fn slot_take<Id, S>(locked: &Locked, ask: &Ask<'_, Id, S>, facts: &mut impl Facts) -> SlotTake {
    let resize = locked.has != ask.slots && locked.has > 1;
    if resize && locked.taken > 0 {
        return SlotTake::SlotsDiffer(locked.has);
    }
    if ask.slots == 1 {
        return SlotTake::OneSlot;
    }
    if let Some(until) = locked.own_until {
        return SlotTake::Wait(until);
    }
    if !facts.ready() {
        return SlotTake::NotNow;
    }
    let slot = match (locked.free, locked.new) {
        (Some(slot), _) | (None, Some(slot)) => slot,
        // Every slot taken (or one locked by the worker expiring it).
        (None, None) => {
            return locked.earliest.map_or(SlotTake::NotNow, SlotTake::Wait);
        }
    };
    SlotTake::Start {
        slot,
        term: next_term(Some(locked.term), facts.floor()),
        resize,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acquire::Context;

    fn ask(slots: i32) -> Ask<'static, u8, u8> {
        Ask {
            id: &1,
            slots,
            session: None,
            value: false,
        }
    }

    fn ctx() -> Context {
        Context {
            locked: false,
            floor: 1,
            ready: true,
            outranked_until: None,
            handed: None,
        }
    }

    const FREE: Read<u8> = Read {
        has: Some(2),
        holder_live: false,
        own: None,
        taken: 1,
        earliest: Some(9),
    };

    #[test]
    fn a_free_slot_is_taken_and_a_full_key_waits() {
        assert_eq!(
            slot_acquisition(&FREE, &ask(2), &mut ctx()),
            SlotAcquisition::Take
        );
        let full = Read { taken: 2, ..FREE };
        assert_eq!(
            slot_acquisition(&full, &ask(2), &mut ctx()),
            SlotAcquisition::Wait(9)
        );
        let never = Read {
            has: None,
            taken: 0,
            earliest: None,
            ..FREE
        };
        assert_eq!(
            slot_acquisition(&never, &ask(2), &mut ctx()),
            SlotAcquisition::FirstTenure
        );
    }

    #[test]
    fn slots_differ_only_while_the_key_has_live_holders() {
        assert_eq!(
            slot_acquisition(&FREE, &ask(3), &mut ctx()),
            SlotAcquisition::SlotsDiffer(2)
        );
        let idle = Read {
            taken: 0,
            earliest: None,
            ..FREE
        };
        assert_eq!(
            slot_acquisition(&idle, &ask(3), &mut ctx()),
            SlotAcquisition::Take
        );
        assert_eq!(
            slot_acquisition(&idle, &ask(1), &mut ctx()),
            SlotAcquisition::OneSlot
        );
        let one_held = Read {
            has: Some(1),
            holder_live: true,
            ..idle
        };
        assert_eq!(
            slot_acquisition(&one_held, &ask(2), &mut ctx()),
            SlotAcquisition::SlotsDiffer(1)
        );
    }

    #[test]
    fn the_own_tenure_is_extended_by_its_owner_only() {
        let own = Own {
            slot: 2,
            expires_at: Some(12),
            owned: true,
            session: None,
        };
        let held = Read {
            own: Some(own),
            ..FREE
        };
        assert_eq!(
            slot_acquisition(&held, &ask(2), &mut ctx()),
            SlotAcquisition::Extend
        );
        let foreign = Read {
            own: Some(Own {
                owned: false,
                ..own
            }),
            ..FREE
        };
        assert_eq!(
            slot_acquisition(&foreign, &ask(2), &mut ctx()),
            SlotAcquisition::Wait(12)
        );
        let under = Read {
            own: Some(Own {
                session: Some(4),
                ..own
            }),
            ..FREE
        };
        assert_eq!(
            slot_acquisition(&under, &ask(2), &mut ctx()),
            SlotAcquisition::Rebind
        );
        let same = Ask {
            session: Some(4),
            ..ask(2)
        };
        assert_eq!(
            slot_acquisition(&under, &same, &mut ctx()),
            SlotAcquisition::Held
        );
    }

    #[test]
    fn candidates_and_the_failover_step_hold_new_tenures_back() {
        let mut outranked = Context {
            outranked_until: Some(7),
            ..ctx()
        };
        assert_eq!(
            slot_acquisition(&FREE, &ask(2), &mut outranked),
            SlotAcquisition::Wait(7)
        );
        let idle = Read {
            taken: 0,
            earliest: None,
            ..FREE
        };
        let mut not_ready = Context {
            ready: false,
            ..ctx()
        };
        assert_eq!(
            slot_acquisition(&idle, &ask(1), &mut not_ready),
            SlotAcquisition::NotNow
        );
    }

    const LOCKED: Locked = Locked {
        has: 2,
        term: 7,
        own_until: None,
        free: Some(2),
        new: None,
        taken: 1,
        earliest: Some(9),
    };

    #[test]
    fn under_the_lock_a_free_slot_gets_the_key_s_next_term() {
        assert_eq!(
            slot_take(&LOCKED, &ask(2), &mut ctx()),
            SlotTake::Start {
                slot: 2,
                term: 8,
                resize: false
            }
        );
        let fresh = Locked {
            free: None,
            new: Some(2),
            ..LOCKED
        };
        assert_eq!(
            slot_take(&fresh, &ask(2), &mut ctx()),
            SlotTake::Start {
                slot: 2,
                term: 8,
                resize: false
            }
        );
        let full = Locked {
            free: None,
            taken: 2,
            ..LOCKED
        };
        assert_eq!(slot_take(&full, &ask(2), &mut ctx()), SlotTake::Wait(9));
        let own = Locked {
            own_until: Some(12),
            ..LOCKED
        };
        assert_eq!(slot_take(&own, &ask(2), &mut ctx()), SlotTake::Wait(12));
        let mut not_ready = Context {
            ready: false,
            ..ctx()
        };
        assert_eq!(
            slot_take(&LOCKED, &ask(2), &mut not_ready),
            SlotTake::NotNow
        );
    }

    #[test]
    fn under_the_lock_slots_change_only_while_none_is_taken() {
        assert_eq!(
            slot_take(&LOCKED, &ask(3), &mut ctx()),
            SlotTake::SlotsDiffer(2)
        );
        assert_eq!(
            slot_take(&LOCKED, &ask(1), &mut ctx()),
            SlotTake::SlotsDiffer(2)
        );
        let idle = Locked {
            taken: 0,
            earliest: None,
            ..LOCKED
        };
        assert_eq!(
            slot_take(&idle, &ask(3), &mut ctx()),
            SlotTake::Start {
                slot: 2,
                term: 8,
                resize: true
            }
        );
        assert_eq!(slot_take(&idle, &ask(1), &mut ctx()), SlotTake::OneSlot);
        let one = Locked { has: 1, ..idle };
        assert_eq!(
            slot_take(&one, &ask(2), &mut ctx()),
            SlotTake::Start {
                slot: 2,
                term: 8,
                resize: false
            }
        );
    }
}
