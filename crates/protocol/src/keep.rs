//! Contract 3.2, 3.3 and 9: what a holder's renewal and release do, and
//! the tenure a release hands to a waiting candidate, decided by the
//! extension (`src/lease/keep.rs`, `slots.rs`) and by the model
//! (`tests/model.rs`) alike. The statements that lock keep the rule a
//! locking statement must hold in their WHERE (`sql.rs`: only the holder's
//! own live tenure is ever locked, so a rival never locks it); what the
//! call then does with the row it got back is decided here: the answer,
//! the worker's cue, the announcement and who wakes.

use crate::acquire::Facts;
use crate::{expiry, leads, next_term, Lease, Micros};

/// What a renewal does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Renewal {
    /// Extended, same term: true, and the worker's cue is the new expiry.
    /// Nothing is announced and no waiter wakes: the holder did not change.
    Extend { term: i64, expires_at: Micros },
    /// Nothing renewed here: false (or the next place the key may be
    /// held in is asked: a slot of a key of many, a session).
    Refuse,
}

/// Contract 3.2: what a renewal by `id` at `now` (of the tenure of `term`,
/// when named) does, given `extended`: the tenure its statement extended
/// (the WHERE holds `leads`; the SET wrote `expiry`), as it returned it;
/// None when `id` leads in no tenure of the key, or another transaction
/// holds the row. Only a tenure `id` still leads in, in the term asked,
/// counts as renewed.
pub fn renewal<Id: PartialEq>(
    extended: Option<&Lease<Id>>,
    id: &Id,
    term: Option<i64>,
    now: Micros,
) -> Renewal {
    match extended {
        Some(l) if leads(l, id, term, now) => Renewal::Extend {
            term: l.term,
            expires_at: l.expires_at,
        },
        _ => Renewal::Refuse,
    }
}

/// What the caller asks of a release.
#[derive(Clone, Copy, Debug)]
pub struct Letting<'a, Id> {
    pub id: &'a Id,
    /// Only the tenure of this term (le_release's `term`).
    pub term: Option<i64>,
    /// The release's transaction ends with its statement (autocommit):
    /// nothing of the releaser's can undo a tenure it hands over.
    pub implicit: bool,
    /// How many holders the key admits (17).
    pub slots: i32,
}

/// What a release does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Release {
    /// Not the caller's to release (lapsed since, or of another term):
    /// false, nothing written.
    Refuse,
    /// Vacated (term kept), announced as released, its waiters woken at
    /// commit; `offer`: then handed, in the same transaction, to the
    /// candidate first in line if one may be handed it (`hand_over`), which
    /// is knocked on at commit instead.
    Vacate { offer: bool },
}

/// Contract 3.3 and 9: what a release asked as `ask` at `now` does with
/// `locked`, the tenure its statement locked (the WHERE: held live by the
/// id and owned by the caller; None when there is none, or another
/// transaction holds it). Read under that lock, so `now` is after every
/// write to the row. A release is offered to a waiting candidate only from
/// an implicit transaction, for a key of one slot, and once held leases
/// outlast a failover (8.2: the hand-over starts a tenure).
pub fn release<Id: PartialEq>(
    locked: Option<&Lease<Id>>,
    ask: &Letting<'_, Id>,
    facts: &mut impl Facts,
    now: Micros,
) -> Release {
    match locked {
        Some(l) if leads(l, ask.id, ask.term, now) => Release::Vacate {
            offer: ask.implicit && ask.slots == 1 && facts.ready(),
        },
        _ => Release::Refuse,
    }
}

/// Contract 9: the tenure a release at `now` of `released` hands to the
/// candidate `to`, which asked for `ttl`: the next term (never below
/// `floor`), expiring `ttl` from the release. (Not at the released lease's
/// expiry: the candidate counts its window from its own call, which may
/// have been sent long before.)
pub fn hand_over<Id>(
    released: &Lease<Id>,
    to: Id,
    ttl: Micros,
    floor: i64,
    now: Micros,
) -> Lease<Id> {
    Lease {
        holder: Some(to),
        term: next_term(Some(released.term), floor),
        expires_at: expiry(now, ttl),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acquire::Context;

    fn ctx(ready: bool) -> Context {
        Context {
            locked: true,
            floor: 1,
            ready,
            outranked_until: None,
            handed: None,
        }
    }

    const HELD: Lease<u8> = Lease {
        holder: Some(1),
        term: 4,
        expires_at: 10,
    };

    #[test]
    fn a_renewal_counts_only_for_the_tenure_asked() {
        assert_eq!(
            renewal(Some(&HELD), &1, Some(4), 6),
            Renewal::Extend {
                term: 4,
                expires_at: 10
            }
        );
        assert_eq!(renewal(Some(&HELD), &1, Some(3), 6), Renewal::Refuse);
        assert_eq!(renewal(Some(&HELD), &2, None, 6), Renewal::Refuse);
        assert_eq!(renewal(Some(&HELD), &1, None, 10), Renewal::Refuse);
        assert_eq!(renewal::<u8>(None, &1, None, 6), Renewal::Refuse);
    }

    #[test]
    fn a_release_offers_the_lease_only_where_it_may() {
        let ask = Letting {
            id: &1,
            term: Some(4),
            implicit: true,
            slots: 1,
        };
        assert_eq!(
            release(Some(&HELD), &ask, &mut ctx(true), 6),
            Release::Vacate { offer: true }
        );
        assert_eq!(
            release(Some(&HELD), &ask, &mut ctx(false), 6),
            Release::Vacate { offer: false }
        );
        let in_block = Letting {
            implicit: false,
            ..ask
        };
        assert_eq!(
            release(Some(&HELD), &in_block, &mut ctx(true), 6),
            Release::Vacate { offer: false }
        );
        let many = Letting { slots: 2, ..ask };
        assert_eq!(
            release(Some(&HELD), &many, &mut ctx(true), 6),
            Release::Vacate { offer: false }
        );
        let other_term = Letting {
            term: Some(3),
            ..ask
        };
        assert_eq!(
            release(Some(&HELD), &other_term, &mut ctx(true), 6),
            Release::Refuse
        );
        assert_eq!(
            release(Some(&HELD), &ask, &mut ctx(true), 10),
            Release::Refuse
        );
    }

    #[test]
    fn a_handed_tenure_gets_a_new_term_and_a_ttl_from_the_release() {
        let handed = hand_over(&HELD, 2, 5, 1, 6);
        assert_eq!(
            handed,
            Lease {
                holder: Some(2),
                term: 5,
                expires_at: 11
            }
        );
        assert_eq!(hand_over(&HELD, 2, 5, 100, 6).term, 100);
    }
}
