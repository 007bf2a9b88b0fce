//! Groups: fenced work assignment among live members. A group has P
//! partitions; each live member (a session: its membership and its
//! partitions live and die together) owns some, and the server decides who
//! owns what, not the members:
//!
//! - `assign`: the target owner of every partition, balanced (each live
//!   member owns floor(P/N) or ceil(P/N)) and sticky (a member keeps what
//!   it owns up to its share; a join moves only what the new member needs,
//!   a leave or a death only the leaver's partitions);
//! - `step`: what the server does with one partition to reach its target:
//!   a partition whose owner is dead, or that nobody owns, is granted at
//!   once in the partition's next term; a live owner's is revoked first,
//!   and granted only once the owner gave it back (acked), or its window
//!   on it has surely ended (`revoke_until`): never two owners inside
//!   their windows, and each grant fences off the earlier owners' writes
//!   with a higher term.
//!
//! Called by the model (`tests/groups_model.rs`), which explores joins,
//! leaves, crashes, lost replies and time through them.

use crate::Micros;
use std::collections::BTreeMap;

/// The target owner of each of `current.len()` partitions among the live
/// `members`, given who owns each now (`current`: an owner that is not a
/// live member is dead) and which of them are being given back
/// (`revoking`). Balanced: each member's share is floor(P/N), and the
/// P mod N members that own the most now, not counting what they are
/// giving back (then by name), get one more: so the extra ones stay with
/// the same members while revoked partitions come back one by one (counted
/// with them, the lead would pass from owner to owner as they ack, and a
/// revocation be withdrawn and issued again). Sticky: a member keeps its
/// partitions up to its share, lowest first; the rest go to the members
/// below their share, in name order.
pub fn assign<M: Ord + Clone>(
    members: &[M],
    current: &[Option<M>],
    revoking: &[bool],
) -> Vec<Option<M>> {
    let mut live: Vec<&M> = members.iter().collect();
    live.sort();
    live.dedup();
    if live.is_empty() {
        return vec![None; current.len()];
    }
    let mut owned: BTreeMap<&M, usize> = live.iter().map(|m| (*m, 0)).collect();
    for (i, m) in current.iter().enumerate() {
        let settled = !revoking.get(i).copied().unwrap_or(false);
        if let Some(n) = m
            .as_ref()
            .filter(|_| settled)
            .and_then(|m| owned.get_mut(m))
        {
            *n += 1;
        }
    }
    let (base, extra) = (current.len() / live.len(), current.len() % live.len());
    let mut by_owned = live.clone();
    by_owned.sort_by(|a, b| owned[b].cmp(&owned[a]).then(a.cmp(b)));
    let share: BTreeMap<&M, usize> = by_owned
        .iter()
        .enumerate()
        .map(|(i, m)| (*m, base + usize::from(i < extra)))
        .collect();
    let mut kept: BTreeMap<&M, usize> = live.iter().map(|m| (*m, 0)).collect();
    let mut target: Vec<Option<M>> = current
        .iter()
        .map(|owner| {
            let m = owner.as_ref()?;
            let k = kept.get_mut(m)?;
            (*k < share[m]).then(|| {
                *k += 1;
                m.clone()
            })
        })
        .collect();
    let mut wanting = live
        .iter()
        .flat_map(|m| std::iter::repeat_n(*m, share[m] - kept[m]));
    for t in target.iter_mut().filter(|t| t.is_none()) {
        *t = wanting.next().cloned();
    }
    target
}

/// Who holds a partition, as the server keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Holding<M> {
    /// Nobody: never granted, or given back with no one to take it.
    Free { term: i64 },
    /// `member` owns it in `term`.
    Owned { member: M, term: i64 },
    /// `member` owns it in `term` and was told to give it back; it is
    /// granted to another once acked, or from `until` on.
    Revoking { member: M, term: i64, until: Micros },
}

impl<M> Holding<M> {
    pub fn term(&self) -> i64 {
        match self {
            Holding::Free { term }
            | Holding::Owned { term, .. }
            | Holding::Revoking { term, .. } => *term,
        }
    }

    pub fn owner(&self) -> Option<&M> {
        match self {
            Holding::Free { .. } => None,
            Holding::Owned { member, .. } | Holding::Revoking { member, .. } => Some(member),
        }
    }
}

/// What the server does with one partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step<M> {
    /// Nothing (as it should be, or waiting for the owner to give it back).
    Keep,
    /// Tell the live owner to give it back, by `until`.
    Revoke { until: Micros },
    /// The target again is its live owner: the revocation is withdrawn.
    Withdraw,
    /// Granted to `member` in `term` (the partition's next).
    Grant { member: M, term: i64 },
    /// Its owner is gone and nobody is to have it.
    Free,
}

/// Until when a live owner told at `now` to give a partition back may
/// still act on it: its drain budget, and never before its session's
/// expiry as the server knows it then (`session_expires_at`): an owner
/// that has not heard of the revocation (its renewals' replies lost, or
/// none sent) acts until its local deadline, which is never later than
/// that expiry.
pub fn revoke_until(now: Micros, drain: Micros, session_expires_at: Micros) -> Micros {
    now.saturating_add(drain).max(session_expires_at)
}

/// What the server does with a partition held as `holding`, whose target
/// is `target` (`assign`), at `now`: `owner_live` whether its owner's
/// session is live, `acked` whether the owner gave it back, `until` the
/// revocation's end if it is revoked now (`revoke_until`), `floor` the
/// least term this timeline may issue (`next_term`: terms never go back,
/// even across a failover).
#[allow(clippy::too_many_arguments)]
pub fn step<M: PartialEq + Clone>(
    holding: &Holding<M>,
    target: Option<&M>,
    owner_live: bool,
    acked: bool,
    until: Micros,
    now: Micros,
    floor: i64,
) -> Step<M> {
    let grant = |term: i64| match target {
        Some(m) => Step::Grant {
            member: m.clone(),
            term: crate::next_term(Some(term), floor),
        },
        None => Step::Free,
    };
    match holding {
        Holding::Free { term } => match target {
            Some(_) => grant(*term),
            None => Step::Keep,
        },
        Holding::Owned { member, term } => {
            if !owner_live {
                grant(*term)
            } else if target == Some(member) {
                Step::Keep
            } else {
                Step::Revoke { until }
            }
        }
        Holding::Revoking {
            member,
            term,
            until: by,
        } => {
            if owner_live && !acked && target == Some(member) {
                Step::Withdraw
            } else if acked || !owner_live || now >= *by {
                grant(*term)
            } else {
                Step::Keep
            }
        }
    }
}

/// What an ack of a revoked partition (`le_ack`) leads to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AfterAck<M> {
    /// That one partition granted to `member` in `term`: the member its
    /// revocation named, the group not stepped.
    Grant { member: M, term: i64 },
    /// A step of the whole group decides.
    Step,
}

/// What follows the ack of a partition held as `holding` (revoked, now
/// given back): granted at once to `next`, the member its revocation was
/// for, when `next_live` (its session still live), the partition is
/// still `within` the group's count, and no step passed a partition over
/// since (`restep`: the assignment the revocation followed may be stale);
/// else the group is stepped. One grant per ack: a join's revocations
/// come back one ack each, without a step of every partition each time.
pub fn after_ack<M: PartialEq + Clone>(
    holding: &Holding<M>,
    next: Option<&M>,
    next_live: bool,
    within: bool,
    restep: bool,
    now: Micros,
    floor: i64,
) -> AfterAck<M> {
    let Holding::Revoking { until, .. } = holding else {
        return AfterAck::Step;
    };
    if !next_live || !within || restep {
        return AfterAck::Step;
    }
    match step(holding, next, true, true, *until, now, floor) {
        Step::Grant { member, term } => AfterAck::Grant { member, term },
        _ => AfterAck::Step,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(target: &[Option<u8>], members: &[u8]) -> Vec<usize> {
        members
            .iter()
            .map(|m| target.iter().filter(|t| **t == Some(*m)).count())
            .collect()
    }

    fn moved(before: &[Option<u8>], after: &[Option<u8>]) -> usize {
        before
            .iter()
            .zip(after)
            .filter(|(b, a)| b.is_some() && b != a)
            .count()
    }

    #[test]
    fn balanced_and_sticky_for_every_small_group() {
        for p in 0..24usize {
            for n in 1..7u8 {
                let members: Vec<u8> = (0..n).collect();
                let start = assign(&members, &vec![None; p], &[]);
                let c = counts(&start, &members);
                assert!(start.iter().all(Option::is_some) || p == 0);
                assert!(
                    c.iter().max().unwrap() - c.iter().min().unwrap() <= 1,
                    "{p} {n}: {c:?}"
                );
                // stable: assigned again, nothing moves
                assert_eq!(assign(&members, &start, &[]), start);
                // a join moves at most ceil(P/N) + 1 (N after the join)
                let mut joined = members.clone();
                joined.push(n);
                let after = assign(&joined, &start, &[]);
                let c = counts(&after, &joined);
                assert!(c.iter().max().unwrap() - c.iter().min().unwrap() <= 1);
                assert!(
                    moved(&start, &after) <= p.div_ceil(joined.len()) + 1,
                    "join {p} {n}"
                );
                // a leave (or a death) moves only the leaver's
                for gone in 0..n {
                    let rest: Vec<u8> = members.iter().copied().filter(|m| *m != gone).collect();
                    let after = assign(&rest, &start, &[]);
                    for (b, a) in start.iter().zip(&after) {
                        if *b != Some(gone) {
                            assert_eq!(b, a, "leave of {gone}: {p} {n}");
                        }
                    }
                    if !rest.is_empty() {
                        let c = counts(&after, &rest);
                        assert!(c.iter().max().unwrap() - c.iter().min().unwrap() <= 1);
                        assert!(after.iter().all(Option::is_some));
                    }
                }
            }
        }
        assert_eq!(assign::<u8>(&[], &[Some(1), None], &[]), vec![None, None]);
    }

    /// A join whose shares are not even (P mod N > 0): while the revoked
    /// partitions are given back and granted one by one, in any order, the
    /// target stays what it was when the revocations were issued (nothing
    /// withdrawn, nothing revoked again).
    #[test]
    fn revocations_given_back_in_any_order_keep_the_target() {
        for p in [7usize, 10, 25, 256] {
            let start = assign(&[0u8, 1], &vec![None; p], &[]);
            let three = [0u8, 1, 2];
            let target = assign(&three, &start, &[]);
            let mut current = start.clone();
            let mut revoking: Vec<bool> =
                current.iter().zip(&target).map(|(c, t)| c != t).collect();
            let mut order: Vec<usize> = (0..p).filter(|i| revoking[*i]).collect();
            // each member's in turn, member 0's (it has the extra one)
            // first: counted with what it gives back, it would fall behind
            // member 1 and the extra one pass to it
            order.sort_by_key(|i| (current[*i] != Some(0), *i));
            for i in order {
                revoking[i] = false;
                current[i] = target[i];
                assert_eq!(
                    assign(&three, &current, &revoking),
                    target,
                    "{p}: after {i}"
                );
            }
        }
    }

    #[test]
    fn a_live_owner_gives_back_before_another_gets_it() {
        let owned = Holding::Owned {
            member: 1u8,
            term: 4,
        };
        assert_eq!(step(&owned, Some(&1), true, false, 50, 10, 0), Step::Keep);
        assert_eq!(
            step(&owned, Some(&2), true, false, 50, 10, 0),
            Step::Revoke { until: 50 }
        );
        // dead: at once, in the next term
        assert_eq!(
            step(&owned, Some(&2), false, false, 50, 10, 0),
            Step::Grant { member: 2, term: 5 }
        );
        let revoking = Holding::Revoking {
            member: 1u8,
            term: 4,
            until: 50,
        };
        assert_eq!(
            step(&revoking, Some(&2), true, false, 60, 20, 0),
            Step::Keep
        );
        assert_eq!(
            step(&revoking, Some(&2), true, true, 60, 20, 0),
            Step::Grant { member: 2, term: 5 }
        );
        assert_eq!(
            step(&revoking, Some(&2), true, false, 60, 50, 0),
            Step::Grant { member: 2, term: 5 }
        );
        assert_eq!(
            step(&revoking, Some(&1), true, false, 60, 20, 0),
            Step::Withdraw
        );
        assert_eq!(step(&revoking, None, true, true, 60, 20, 0), Step::Free);
        let free = Holding::<u8>::Free { term: 7 };
        assert_eq!(
            step(&free, Some(&3), true, false, 0, 0, 0),
            Step::Grant { member: 3, term: 8 }
        );
        // after a failover, the timeline's floor (terms never go back)
        assert_eq!(
            step(&free, Some(&3), true, false, 0, 0, 100),
            Step::Grant {
                member: 3,
                term: 100
            }
        );
        assert_eq!(revoke_until(10, 5, 30), 30);
        assert_eq!(revoke_until(10, 50, 30), 60);
    }

    #[test]
    fn an_ack_grants_to_whom_the_revocation_named_only_when_nothing_changed() {
        let revoking = Holding::Revoking {
            member: 'a',
            term: 4,
            until: 50,
        };
        let grant = AfterAck::Grant {
            member: 'b',
            term: 5,
        };
        assert_eq!(
            after_ack(&revoking, Some(&'b'), true, true, false, 10, 1),
            grant
        );
        // the named member lapsed, the count shrank below it, a step
        // passed a partition over since, or nobody was named: a step
        for (next, live, within, restep) in [
            (Some(&'b'), false, true, false),
            (Some(&'b'), true, false, false),
            (Some(&'b'), true, true, true),
            (None, true, true, false),
        ] {
            assert_eq!(
                after_ack(&revoking, next, live, within, restep, 10, 1),
                AfterAck::Step
            );
        }
        // the floor of a new timeline (terms never go back)
        assert_eq!(
            after_ack(&revoking, Some(&'b'), true, true, false, 10, 1 << 32),
            AfterAck::Grant {
                member: 'b',
                term: 1 << 32
            }
        );
        // not revoked (withdrawn meanwhile): a step
        let owned = Holding::Owned {
            member: 'a',
            term: 4,
        };
        assert_eq!(
            after_ack(&owned, Some(&'b'), true, true, false, 10, 1),
            AfterAck::Step
        );
    }
}
