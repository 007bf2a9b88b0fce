//! Contract 17 (with 13, 18 and 21): what an acquisition of a key of many
//! slots does, decided from what was read, by the extension
//! (`src/lease/slots.rs`, on a read without locking) and by the model
//! (`tests/model.rs`) alike. Which free slot a tenure takes, and its term,
//! are chosen under the key's row lock by statements built from the SQL
//! rules (`sql.rs`).

use crate::acquire::{Ask, Facts};
use crate::Micros;

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
}
