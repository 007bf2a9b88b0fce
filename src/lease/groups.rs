//! Contract 26: groups. A member is a session (contract 21): joining opens
//! it (or renews it: one renewal keeps the membership and every partition
//! it owns), leaving or its end moves its partitions. The server assigns:
//! every change of a group takes its row's lock, reads its members and
//! partitions once, asks `leaderlock_protocol::groups` for the target
//! (`assign`) and for each partition's step (`step`), and writes the
//! steps; the worker steps a group when a revocation runs out or a
//! member's session may have lapsed (`check_at`).

use crate::announce::groups::PartitionEvent;
use crate::base::clock::{micros, ts};
use crate::base::ttl::{interval_micros, micros_interval, Ttl};
use crate::lease::failover;
use crate::lease::session_leases::{self, Options};
use crate::lease::turns::{Queue, Turns};
use crate::shmem::worker_wakeup;
use crate::store::call;
use crate::store::plans;
use crate::store::queries;
use leaderlock_protocol::groups::{after_ack, assign, revoke_until, step, AfterAck, Holding, Step};
use leaderlock_protocol::{is_live, leads, Lease};
use pgrx::prelude::*;
use pgrx::spi::SpiHeapTupleData;
use pgrx::Uuid;
use std::collections::BTreeMap;

/// How soon a step skipped for a guarded transaction comes again.
const RETRY_LOCKED: i64 = 100_000;

/// Groups the worker steps per round, at most.
pub const GROUPS_PER_ROUND: usize = 100;

/// A group as its locked row holds it.
#[derive(Clone, Copy)]
struct Group {
    partitions: i32,
    drain: i64,
    may_change: bool,
}

/// What a join asked for besides the member.
pub struct Join {
    pub ttl: Ttl,
    /// The partitions the group has (a new group needs it; an existing
    /// one's owner may change it).
    pub partitions: Option<i32>,
    /// The drain budget of a revocation (microseconds).
    pub drain: Option<i64>,
}

/// Why a join or an ack did not act.
pub enum Refusal {
    /// A new group needs its number of partitions.
    NoPartitions,
    /// Only a member of its owner's role changes a group.
    NotGroupOwner,
    /// The member is live under another role's session.
    MemberOfAnotherRole,
}

/// The drain budget of a group made without one: 10 seconds.
pub const DEFAULT_DRAIN: i64 = 10_000_000;

fn lock_group(group: &str) -> Option<Group> {
    let args = [group.into(), call::caller().into()];
    plans::run(queries::LOCK_GROUP, &args, |t| {
        let row = t.into_iter().next()?;
        Some(Group {
            partitions: row.get::<i32>(1).ok().flatten()?,
            drain: interval_micros(&row.get::<Interval>(2).ok().flatten()?),
            may_change: row.get::<bool>(3).ok().flatten().unwrap_or(false),
        })
    })
}

/// Group `group` as it is at `now`: partitions, drain, whether a step is
/// due.
fn group_row(group: &str, now: i64) -> Option<(i32, i64, bool)> {
    plans::run(queries::GROUP_ROW, &[group.into(), ts(now).into()], |t| {
        let row = t.into_iter().next()?;
        Some((
            row.get::<i32>(1).ok().flatten()?,
            interval_micros(&row.get::<Interval>(2).ok().flatten()?),
            row.get::<bool>(3).ok().flatten().unwrap_or(false),
        ))
    })
}

/// Steps `group` if a step is due at `now` and nobody else is changing
/// it: a member's renewal does so, so that where no worker serves the
/// database a revocation's end or a lapsed member still moves partitions
/// (a worker, or a join in progress, is doing it otherwise: skipped).
fn settle_if_due(group: &str, now: i64) {
    let args = [group.into(), ts(now).into()];
    let due = plans::run(queries::LOCK_GROUP_IF_DUE, &args, |t| {
        due_group(&t.into_iter().next()?, 1)
    });
    if let Some((g, restep)) = due {
        step_due(group, g, restep, now);
    }
}

/// A group due a step, from its row's columns `at` (partitions), `at + 1`
/// (drain) and `at + 2` (restep: a step skipped a guarded partition, the
/// next looks at every one).
fn due_group(row: &SpiHeapTupleData<'_>, at: usize) -> Option<(Group, bool)> {
    let g = Group {
        partitions: row.get::<i32>(at).ok().flatten()?,
        drain: interval_micros(&row.get::<Interval>(at + 1).ok().flatten()?),
        may_change: false, // (a step changes nothing of the group)
    };
    Some((g, row.get::<bool>(at + 2).ok().flatten().unwrap_or(true)))
}

/// Contract 26, le_join: `member` joins `group` (made with `join`'s
/// partitions if new), or renews its membership, at `now`. Its session.
pub fn join(
    group: &str,
    member: &str,
    join: &Join,
    now: i64,
    may_make: impl FnOnce(),
) -> Result<Uuid, Refusal> {
    // A live member's renewal that changes nothing of the group takes no
    // lock of it: a step in progress never delays a member's renewal (the
    // step holds the members' sessions share-locked only while it runs).
    if let Some((partitions, drain, due)) = group_row(group, now) {
        let same = join.partitions.is_none_or(|p| p == partitions)
            && join.drain.is_none_or(|d| d == drain);
        if let Some(&(session, Some(expires_at))) = members(group).get(member) {
            if same && expires_at > now {
                if session_leases::renew(session, Some(join.ttl), false) {
                    if due {
                        settle_if_due(group, now);
                    }
                    return Ok(session);
                }
                if session_leases::id_of(session).is_none() {
                    return Err(Refusal::MemberOfAnotherRole);
                }
                // ours, lapsed while the renewal waited for its row (a
                // transaction held it across the expiry): joins again below
            }
        }
    }
    let mut found = lock_group(group);
    if found.is_none() {
        let partitions = join.partitions.ok_or(Refusal::NoPartitions)?;
        may_make();
        let drain = join.drain.unwrap_or(DEFAULT_DRAIN);
        let args = [
            group.into(),
            partitions.into(),
            micros_interval(drain).into(),
            call::caller().into(),
            ts(now).into(),
        ];
        plans::run(queries::NEW_GROUP, &args, |_| ());
        let args = [group.into(), partitions.into(), ts(now).into()];
        plans::run(queries::ADD_PARTITIONS, &args, |_| ());
        found = lock_group(group);
    }
    let mut g = found.expect("made above, or by a racing join");
    let changed = join.partitions.is_some_and(|p| p != g.partitions)
        || join.drain.is_some_and(|d| d != g.drain);
    if changed {
        if !g.may_change {
            return Err(Refusal::NotGroupOwner);
        }
        g.partitions = join.partitions.unwrap_or(g.partitions);
        g.drain = join.drain.unwrap_or(g.drain);
        let args = [
            group.into(),
            g.partitions.into(),
            micros_interval(g.drain).into(),
            ts(now).into(),
        ];
        plans::run(queries::CHANGE_GROUP, &args, |_| ());
        let args = [group.into(), g.partitions.into(), ts(now).into()];
        plans::run(queries::ADD_PARTITIONS, &args, |_| ());
    }
    let members = members(group);
    let renewed = match members.get(member) {
        // renewed: the membership and every partition with it
        Some(&(session, Some(expires_at))) if expires_at > now => {
            if session_leases::renew(session, Some(join.ttl), false) {
                Some(session)
            } else if session_leases::id_of(session).is_none() {
                return Err(Refusal::MemberOfAnotherRole);
            } else {
                None // ours, lapsed meanwhile: a new session
            }
        }
        _ => None,
    };
    let session = match renewed {
        Some(session) if !changed => return Ok(session),
        Some(session) => session,
        None => {
            let options = Options {
                ttl: join.ttl,
                bound: false,
                lock_delay: 0,
                keep_values: false,
            };
            let session = session_leases::open(member, &options);
            let args = [group.into(), member.into(), session.into(), ts(now).into()];
            plans::run(queries::PUT_MEMBER, &args, |_| ());
            session
        }
    };
    settle(group, g, now);
    Ok(session)
}

/// Contract 26, le_leave: `member` leaves `group` at `now`; its partitions
/// go to the others at once (it stopped acting on them). Whether it was a
/// member of the caller's.
pub fn leave(group: &str, member: &str, now: i64) -> bool {
    let Some(g) = lock_group(group) else {
        return false;
    };
    let Some((session, expires_at)) = members(group).get(member).copied() else {
        return false;
    };
    if !session_leases::close(session) && expires_at.is_some_and(|e| e > now) {
        return false; // live, and another role's
    }
    plans::run(queries::DROP_MEMBER, &[group.into(), member.into()], |_| ());
    settle(group, g, now);
    true
}

/// Contract 26, le_ack: `member` gives back `partition` of `group`, revoked
/// from it in `term`; it is granted to its next owner at once. Whether it
/// was so revoked.
pub fn ack(group: &str, member: &str, partition: i32, term: i64, now: i64) -> bool {
    let args = [
        group.into(),
        partition.into(),
        member.into(),
        term.into(),
        call::caller().into(),
    ];
    // Only the member's own role gives its partitions back (another would
    // hand one over while its owner still drains it).
    if !plans::run(queries::LOCK_REVOKED_PARTITION, &args, |t| !t.is_empty()) {
        return false;
    }
    let Some(g) = lock_group(group) else {
        return false;
    };
    let members = members(group);
    let args = [group.into(), partition.into(), member.into(), term.into()];
    let acked = plans::run(queries::ACK_PARTITION, &args, |t| {
        let row = t.into_iter().next()?;
        Some((
            micros(row.get::<TimestampWithTimeZone>(1).ok().flatten())?,
            row.get::<String>(2).ok().flatten(),
            row.get::<bool>(3).ok().flatten().unwrap_or(false),
            row.get::<bool>(4).ok().flatten().unwrap_or(true),
        ))
    });
    let Some((until, next_member, within, restep)) = acked else {
        return false;
    };
    let next = next_member.and_then(|m| Some((members.get(&m).copied()?, m)));
    let holding = Holding::Revoking {
        member: member.to_owned(),
        term,
        until,
    };
    let next_live = next
        .as_ref()
        .is_some_and(|((_, expires_at), _)| is_live(true, *expires_at, now));
    let decided = after_ack(
        &holding,
        next.as_ref().map(|(_, m)| m),
        next_live,
        within,
        restep,
        now,
        failover::term_floor(),
    );
    let granted = match (decided, next) {
        (AfterAck::Grant { member, term }, Some(((session, _), _))) => {
            Some((member, session, term))
        }
        _ => None,
    };
    match granted {
        Some((m, session, term)) => grant(group, partition, &m, session, term, now),
        None => settle(group, g, now),
    }
    true
}

/// Grants `partition` of `group` to member `m` (session `session`) in
/// `term`, and announces it.
fn grant(group: &str, partition: i32, m: &str, session: Uuid, term: i64, now: i64) {
    let args = [
        group.into(),
        partition.into(),
        m.into(),
        session.into(),
        term.into(),
        ts(now).into(),
    ];
    plans::run(queries::GRANT_PARTITION, &args, |_| ());
    PartitionEvent::Granted.send(group, partition, m, term, now);
}

/// A step due by time (a revocation's end, a member's expiry, a retry):
/// one that finds every member live, no revocation ended and nothing
/// skipped before only moves the group's cue, without reading its
/// partitions (members renewing move their expiries past the cue every
/// ttl or so).
fn step_due(group: &str, g: Group, restep: bool, now: i64) {
    let members = members(group);
    let lapsed = members.values().any(|(_, e)| !is_live(true, *e, now));
    let first_end = plans::run(queries::FIRST_REVOCATION_END, &[group.into()], |t| {
        micros(t.first().get_one::<TimestampWithTimeZone>().ok().flatten())
    });
    if restep || lapsed || first_end.is_some_and(|e| e <= now) {
        return settle(group, g, now);
    }
    let next = members
        .values()
        .filter_map(|(_, e)| *e)
        .chain(first_end)
        .min();
    set_check(group, next, false);
}

/// When `group` next needs a step without a call (`next`), and whether
/// that step must look at every partition (`restep`); the worker is woken
/// for it.
fn set_check(group: &str, next: Option<i64>, restep: bool) {
    let args = [group.into(), next.map(ts).into(), restep.into()];
    plans::run(queries::SET_GROUP_CHECK, &args, |_| ());
    if let Some(next) = next {
        worker_wakeup::expiry_written(next);
    }
}

/// A partition of the member's assignment.
pub struct Assigned {
    pub partition: i32,
    pub term: i64,
    /// Revoked: drain it and give it back (le_ack) by then.
    pub revoke_until: Option<i64>,
}

/// Contract 26, le_assignment: `member`'s partitions of `group`.
pub fn assignment(group: &str, member: &str) -> Vec<Assigned> {
    plans::run(queries::ASSIGNMENT, &[group.into(), member.into()], |t| {
        t.into_iter()
            .filter_map(|row| {
                Some(Assigned {
                    partition: row.get::<i32>(1).ok().flatten()?,
                    term: row.get::<i64>(2).ok().flatten()?,
                    revoke_until: micros(row.get::<TimestampWithTimeZone>(3).ok().flatten()),
                })
            })
            .collect()
    })
}

/// The guard of a partition (contract 3.4 for groups): under a share lock
/// on its row (a grant to another waits for the guarded transaction),
/// whether `member` owns `partition` of `group` at `now`, in `term` when
/// named: its session live and, when revoked, before the revocation's end.
/// Its term.
pub fn assert_owner(
    group: &str,
    partition: i32,
    member: &str,
    term: Option<i64>,
    now: i64,
) -> Option<i64> {
    let args = [
        group.into(),
        partition.into(),
        member.into(),
        call::caller().into(),
    ];
    let (held, until, expires_at) = plans::run(queries::SHARE_LOCK_PARTITION, &args, |t| {
        let row = t.into_iter().next()?;
        // Another role's member is not the caller's to guard: refused (the
        // error ends the lock with the transaction or its savepoint), so a
        // rival cannot hold a partition's steps back.
        row.get::<bool>(4).ok().flatten().filter(|owned| *owned)?;
        Some((
            row.get::<i64>(1).ok().flatten()?,
            micros(row.get::<TimestampWithTimeZone>(2).ok().flatten()),
            micros(row.get::<TimestampWithTimeZone>(3).ok().flatten()),
        ))
    })?;
    // held until the session's expiry, and a revoked one no later than
    // the revocation's end: contract 3.4's rule over that window
    let lease = Lease {
        holder: Some(member),
        term: held,
        expires_at: expires_at?.min(until.unwrap_or(i64::MAX)),
    };
    leads(&lease, &member, term, now).then_some(held)
}

/// The members of `group`: session and its expiry (None once it ended).
fn members(group: &str) -> BTreeMap<String, (Uuid, Option<i64>)> {
    plans::run(queries::MEMBERS, &[group.into()], |t| {
        t.into_iter()
            .filter_map(|row| {
                Some((
                    row.get::<String>(1).ok().flatten()?,
                    (
                        row.get::<Uuid>(2).ok().flatten()?,
                        micros(row.get::<TimestampWithTimeZone>(3).ok().flatten()),
                    ),
                ))
            })
            .collect()
    })
}

/// A partition's row.
struct Partition {
    partition: i32,
    member: Option<String>,
    session: Option<Uuid>,
    term: i64,
    revoke_until: Option<i64>,
    acked: bool,
    next_member: Option<String>,
}

/// Moves every partition of `group` (its row `g`, locked by the caller)
/// toward its target at
/// `now`: reads the members and the partitions once, decides with the
/// protocol crate, writes each step and announces it, and sets when the
/// group next needs a step without a call.
fn settle(group: &str, g: Group, now: i64) {
    let mut members = members(group);
    let sessions: Vec<Uuid> = members.values().map(|(s, _)| *s).collect();
    let locked: BTreeMap<Uuid, Option<i64>> =
        plans::run(queries::SHARE_MEMBER_SESSIONS, &[sessions.into()], |t| {
            t.into_iter()
                .filter_map(|row| {
                    Some((
                        row.get::<Uuid>(1).ok().flatten()?,
                        micros(row.get::<TimestampWithTimeZone>(2).ok().flatten()),
                    ))
                })
                .collect()
        });
    for (session, expires_at) in members.values_mut() {
        *expires_at = locked.get(session).copied().flatten();
    }
    let live: Vec<String> = members
        .iter()
        .filter(|(_, (_, e))| is_live(true, *e, now))
        .map(|(m, _)| m.clone())
        .collect();
    let parts: Vec<Partition> = plans::run(queries::PARTITIONS, &[group.into()], |t| {
        t.into_iter()
            .filter_map(|row| {
                Some(Partition {
                    partition: row.get::<i32>(1).ok().flatten()?,
                    member: row.get::<String>(2).ok().flatten(),
                    session: row.get::<Uuid>(3).ok().flatten(),
                    term: row.get::<i64>(4).ok().flatten()?,
                    revoke_until: micros(row.get::<TimestampWithTimeZone>(5).ok().flatten()),
                    acked: row.get::<bool>(6).ok().flatten().unwrap_or(false),
                    next_member: row.get::<String>(7).ok().flatten(),
                })
            })
            .collect()
    });
    // An owner is live while its member's session is the one it was
    // granted under and that session is live.
    let owner_expiry = |p: &Partition| -> Option<i64> {
        let (session, expires_at) = members.get(p.member.as_ref()?)?;
        (Some(*session) == p.session)
            .then_some(*expires_at)
            .flatten()
            .filter(|e| is_live(true, Some(*e), now))
    };
    let counted: Vec<&Partition> = parts
        .iter()
        .filter(|p| p.partition <= g.partitions)
        .collect();
    let current: Vec<Option<String>> = counted
        .iter()
        .map(|p| owner_expiry(p).and(p.member.clone()))
        .collect();
    let revoking: Vec<bool> = counted.iter().map(|p| p.revoke_until.is_some()).collect();
    let target = assign(&live, &current, &revoking);
    let floor = failover::term_floor();
    let mut next: Option<i64> = members
        .values()
        .filter_map(|(_, e)| e.filter(|e| *e > now))
        .min();
    let mut skipped = false;
    for p in &parts {
        let target = (p.partition <= g.partitions)
            .then(|| target[(p.partition - 1) as usize].clone())
            .flatten();
        let holding = match (&p.member, p.revoke_until) {
            (None, _) => Holding::Free { term: p.term },
            (Some(m), None) => Holding::Owned {
                member: m.clone(),
                term: p.term,
            },
            (Some(m), Some(until)) => Holding::Revoking {
                member: m.clone(),
                term: p.term,
                until,
            },
        };
        let expiry = owner_expiry(p);
        let until = revoke_until(now, g.drain, expiry.unwrap_or(now));
        let decided = step(
            &holding,
            target.as_ref(),
            expiry.is_some(),
            p.acked,
            until,
            now,
            floor,
        );
        let (g_, n_) = (group, p.partition);
        // (whom an ack grants a revoked one to follows the assignment)
        let retarget = matches!(holding, Holding::Revoking { .. }) && p.next_member != target;
        if (decided != Step::Keep || retarget)
            && !plans::run(queries::LOCK_PARTITION, &[g_.into(), n_.into()], |t| {
                !t.is_empty()
            })
        {
            // a guarded transaction holds it: its step comes soon after
            next = next.into_iter().chain([now + RETRY_LOCKED]).min();
            skipped = true;
            continue;
        }
        match decided {
            Step::Keep => {
                if let Holding::Revoking { until, .. } = holding {
                    next = next.into_iter().chain([until]).min();
                    if retarget {
                        let args = [g_.into(), n_.into(), target.as_deref().into()];
                        plans::run(queries::RETARGET_PARTITION, &args, |_| ());
                    }
                }
            }
            Step::Revoke { until } => {
                let args = [
                    g_.into(),
                    n_.into(),
                    ts(until).into(),
                    ts(now).into(),
                    target.as_deref().into(),
                ];
                plans::run(queries::REVOKE_PARTITION, &args, |_| ());
                next = next.into_iter().chain([until]).min();
                let member = p.member.as_deref().expect("revoked: owned");
                PartitionEvent::Revoked { until }.send(group, n_, member, p.term, now);
            }
            Step::Withdraw => {
                let args = [g_.into(), n_.into(), ts(now).into()];
                plans::run(queries::WITHDRAW_PARTITION, &args, |_| ());
                let member = p.member.as_deref().expect("withdrawn: owned");
                PartitionEvent::Granted.send(group, n_, member, p.term, now);
            }
            Step::Grant { member, term } => {
                let session = members.get(&member).expect("a live member").0;
                grant(group, n_, &member, session, term, now);
            }
            Step::Free => {
                let args = [g_.into(), n_.into(), ts(now).into()];
                plans::run(queries::FREE_PARTITION, &args, |_| ());
                let member = p.member.as_deref().unwrap_or("");
                PartitionEvent::Freed.send(group, n_, member, p.term, now);
            }
        }
    }
    set_check(group, next, skipped);
}

/// The worker's round: the groups due a step by `now`, up to
/// `GROUPS_PER_ROUND`, their owners taking turns, stepped until the
/// round's budget is spent. How many it stepped; `GROUPS_PER_ROUND` when
/// more wait.
pub fn settle_due(now: i64) -> usize {
    let turns = Turns::begin(Queue::Groups);
    let args = [
        ts(now).into(),
        (GROUPS_PER_ROUND as i64).into(),
        turns.last(),
    ];
    let due: Vec<(String, (Group, bool), pg_sys::Oid)> =
        plans::run(queries::LOCK_GROUPS_DUE, &args, |t| {
            t.into_iter()
                .filter_map(|row| {
                    Some((
                        row.get::<String>(1).ok().flatten()?,
                        due_group(&row, 2)?,
                        row.get::<pg_sys::Oid>(5).ok().flatten()?,
                    ))
                })
                .collect()
        });
    for (i, (group, (g, restep), owner)) in due.iter().enumerate() {
        if !turns.more(i) {
            return GROUPS_PER_ROUND; // (a full round: the next comes at once)
        }
        step_due(group, *g, *restep, now);
        turns.served(*owner);
    }
    due.len()
}

/// `settle_due` in a subtransaction, for le_expire_lapsed where no worker
/// serves: a failure is rolled back alone and told as a WARNING.
pub fn settle_or_warn(now: i64) {
    crate::lease::settle::or_warn("the groups were not stepped", || settle_due(now));
}

/// When the worker next has a group to step.
pub fn next_check() -> Option<i64> {
    plans::run(queries::NEXT_GROUP_CHECK, &[], |t| {
        micros(t.first().get_one::<TimestampWithTimeZone>().ok().flatten())
    })
}

/// How many groups `caller` made.
pub fn groups_made_by(caller: pg_sys::Oid) -> i64 {
    plans::run(queries::GROUPS_MADE_BY, &[caller.into()], |t| {
        t.first().get_one::<i64>().ok().flatten().unwrap_or(0)
    })
}
