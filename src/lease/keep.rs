//! What a holder does with its lease of a key of one slot, and the calls
//! on every lease of an id (contracts 3.2, 3.3, 9, 11, 13, 16): extend,
//! renew, release and hand over, vacate, force release, set the value.

use crate::announce::notify::Event;
use crate::base::clock::{micros, now, ts};
use crate::base::ttl::Ttl;
use crate::lease::failover;
use crate::lease::row::{self as row, caller, counted, extend, first_lease, Claim, KeyFacts};
use crate::lease::session_leases;
use crate::lease::slots::{self};
use crate::lease::tenure::{self};
use crate::shmem::candidates;
use crate::shmem::databases::{self, Counter};
use crate::shmem::waiters;
use crate::shmem::worker_wakeup;
use crate::store::call;
use crate::store::keys::{self, Reply, Statement};
use crate::store::plans;
use crate::store::queries;
use crate::store::schema_version;
use leaderlock_protocol::keep::{Letting, Release};
use leaderlock_protocol::Lease;
use pgrx::datum::DatumWithOid;
use pgrx::prelude::*;

/// Contract 3.2: with `term`, only the tenure of that term.
pub fn renew(key: &str, id: &str, ttl: Option<Ttl>, term: Option<i64>) -> bool {
    // (a renewal never shortens a lease: it needs no failover step first;
    // but one refused may be of a lease that step gives its ttl again)
    let renewed = past_rivals(key, id, term, || renew_once(key, id, ttl, term), |r| *r)
        || (failover::step_taken_for_holder() && renew_once(key, id, ttl, term));
    counted(renewed, Counter::Renewed)
}

/// One try of `renew`, at the lease clock's now.
fn renew_once(key: &str, id: &str, ttl: Option<Ttl>, term: Option<i64>) -> bool {
    let now = now();
    extend(key, id, now, ttl, term).is_some()
        || slots::extend(key, id, now, ttl, term).is_some()
        || (schema_version::has_slots() && session_leases::renew_key(key, id, ttl, term))
}

/// Contract 16, le_renew_all: extends every lease `id` holds live (and the
/// caller may act on as owner) by its own ttl, in one statement that never
/// waits. Returns how many.
pub fn renew_all(id: &str) -> i64 {
    let now = now();
    let args = [id.into(), ts(now).into(), caller().into()];
    let (renewed, earliest) = plans::run(schema_version::renew_all(), &args, |t| {
        let row = t.first();
        (
            row.get::<i64>(1).expect("count").unwrap_or(0),
            micros(row.get::<TimestampWithTimeZone>(2).expect("min")),
        )
    });
    let (tenures, earliest_tenure) = slots::renew_all(id, now);
    let (held, earliest_session) = if schema_version::has_slots() {
        session_leases::renew_all(id, now)
    } else {
        (0, None)
    };
    let renewed = renewed + tenures + held;
    let earliest = [earliest, earliest_tenure, earliest_session]
        .into_iter()
        .flatten()
        .min();
    if let Some(earliest) = earliest {
        worker_wakeup::expiry_written(earliest);
        failover::commit_durably();
    }
    databases::count_n(Counter::Renewed, renewed);
    renewed
}

/// Contract 16, le_release_all: releases every lease `id` holds live (and
/// the caller may act on as owner), skipping rows locked by another
/// transaction, and announces each. Returns how many.
pub fn release_all(id: &str) -> i64 {
    let keys: Vec<String> = plans::run(
        schema_version::lock_all_own(),
        &[id.into(), caller().into(), ts(now()).into()],
        |t| {
            t.into_iter()
                .map(|row| row.get::<String>(1).expect("key").expect("key is NOT NULL"))
                .collect()
        },
    );
    let tenures = slots::release_all(id) as i64;
    if keys.is_empty() {
        return tenures;
    }
    // Read after the locks, as `release` does.
    let now = now();
    let released: Vec<(String, i64)> = plans::run(
        queries::VACATE_LIVE_KEYS,
        &[keys.into(), ts(now).into()],
        |t| {
            t.into_iter()
                .map(|row| {
                    (
                        row.get::<String>(1).expect("key").expect("key is NOT NULL"),
                        row.get::<i64>(2).expect("term").expect("term is NOT NULL"),
                    )
                })
                .collect()
        },
    );
    for (key, term) in &released {
        tenure::released(key, id, *term, now, false, 1);
    }
    released.len() as i64 + tenures
}

/// The lease `id` holds live, owned by a role the caller is a member of,
/// locked (`LOCK_OWN`, never waiting): its term and expiry. None when
/// there is none, or another transaction holds it.
fn lock_own(key: &str, id: &str) -> Option<(i64, i64)> {
    let args = [key.into(), id.into(), caller().into(), ts(now()).into()];
    plans::run(schema_version::lock_own(), &args, |t| {
        let row = t.into_iter().next()?;
        Some((
            row.get::<i64>(1).expect("term").expect("term is NOT NULL"),
            micros(row.get::<TimestampWithTimeZone>(2).expect("expires_at"))?,
        ))
    })
}

/// Locks the lease `id` holds live (in `term`, when given) and runs `write`
/// with its term and the time it was found live (`under_lock`). None when
/// not held live by `id` in that term, or locked by another transaction.
fn with_own_live<T>(
    key: &str,
    id: &str,
    term: Option<i64>,
    write: impl FnOnce(i64, i64) -> T,
) -> Option<T> {
    plans::under_lock(
        || lock_own(key, id),
        |(held, expires_at)| {
            let now = now();
            let lease = Lease {
                holder: Some(id),
                term: held,
                expires_at,
            };
            leaderlock_protocol::leads(&lease, &id, term, now).then(|| write(held, now))
        },
    )
}

/// Contract 3.3: with `term`, only the tenure of that term. The lease `id`
/// holds live is locked (`LOCK_OWN`, never waiting), and what the decision
/// core makes of it (`leaderlock_protocol::release`) is written: vacated,
/// and maybe handed over (contract 9).
pub fn release(key: &str, id: &str, term: Option<i64>) -> bool {
    // (one refused may be of a lease the failover step gives its ttl again)
    past_rivals(key, id, term, || release_once(key, id, term), |r| *r)
        || (failover::step_taken_for_holder() && release_once(key, id, term))
}

/// The pauses, in milliseconds, before each new try of a holder's call
/// refused for a lock on its row (`past_rivals`): the first at once.
const PAST_RIVALS_MS: [i64; 4] = [0, 1, 2, 4];

/// `call`, the holder `id`'s on `key` (of its tenure in `term`, when
/// named), made again while `done` says it was refused and `id` still
/// holds `key` live there, owned by a role the caller is a member of, after each pause of
/// `PAST_RIVALS_MS`. A rival that lost a race for the row locks its
/// latest version before the re-check that fails, until its
/// subtransaction rolls back a moment later (`plans::under_lock`): that
/// must not cost the holder a renewal or a release. Never waits for
/// another transaction (contracts 3.1, 3.2): a row locked longer (by
/// le_assert_leader, or the holder's own open transaction) still gets its
/// call refused, a few milliseconds later.
pub(super) fn past_rivals<T>(
    key: &str,
    id: &str,
    term: Option<i64>,
    call: impl Fn() -> T,
    done: impl Fn(&T) -> bool,
) -> T {
    let mut result = call();
    for pause in PAST_RIVALS_MS {
        if done(&result) || !holds_live(key, id, term) {
            break;
        }
        if pause > 0 {
            waiters::latch_wait(pause);
        }
        result = call();
    }
    result
}

/// Whether `id` holds `key` live in `term` (any when None), owned by a
/// role the caller is a member of (`HOLDS_LIVE`; before 0.5.0, taken as
/// not: a refused call is not tried again there).
fn holds_live(key: &str, id: &str, term: Option<i64>) -> bool {
    let args = [
        key.into(),
        id.into(),
        caller().into(),
        plans::term_or_any(term),
    ];
    schema_version::has_slots()
        && plans::run(queries::HOLDS_LIVE, &args, |t| {
            t.first().get::<bool>(1).ok().flatten().unwrap_or(false)
        })
}

/// One try of `release`.
fn release_once(key: &str, id: &str, term: Option<i64>) -> bool {
    // Asked before the lock's subtransaction, inside which every
    // transaction looks like a block.
    let implicit = !unsafe { pg_sys::IsTransactionBlock() };
    let ask = Letting {
        id: &id,
        term,
        implicit,
        slots: 1,
    };
    let released = plans::under_lock(
        || lock_own(key, id),
        |(held, expires_at)| {
            let now = now();
            let lease = Lease {
                holder: Some(id),
                term: held,
                expires_at,
            };
            let mut facts = KeyFacts {
                key,
                priority: 0,
                locked: true,
                waiting: false,
            };
            match leaderlock_protocol::release(Some(&lease), &ask, &mut facts, now) {
                Release::Refuse => None,
                Release::Vacate { offer } => {
                    vacate(key, id, held, now, false);
                    if offer {
                        hand_over(key, &lease, now);
                    }
                    Some(())
                }
            }
        },
    );
    released.is_some() || slots::release(key, id, term)
}

/// Contract 9: a release hands the lease it just vacated (`released`) to
/// the candidate its key serves first, when that one is grantable
/// (`grantable`), in the releasing transaction: one commit for the
/// handover, not the release's and then the winner's. Only when that
/// transaction is implicit too (it ends with its statement), and once new
/// tenures may start (`leaderlock_protocol::release` decided both). Should
/// the candidate stop waiting first, the tenure goes to the worker
/// (`handover.rs`).
fn hand_over(key: &str, released: &Lease<&str>, now: i64) {
    // (The worker's statement for a tenure never taken up is written for
    // the current schema.)
    if !schema_version::has_slots() {
        return;
    }
    let xid = unsafe { pg_sys::GetTopTransactionIdIfAny() }.into_inner();
    if xid == 0 {
        return;
    }
    let Some(grant) = candidates::claim_grant(key, xid, call::caller(), now) else {
        return;
    };
    // Known to the commit and abort callbacks from here on: should the
    // tenure fail to start, the abort frees the candidate's entry.
    waiters::granted_at_commit(key, grant.clone());
    let ttl = Ttl(grant.asked.ttl_us);
    let id = grant.id.text();
    let handed =
        leaderlock_protocol::hand_over(released, id.as_str(), ttl.0, failover::term_floor(), now);
    let tenure = row::tenure(
        key,
        &id,
        now,
        handed.expires_at,
        ttl,
        Claim::default(),
        grant.asked.role,
    );
    let Reply::Term(Some(term)) = keys::run(Statement::StartTerm { tenure }) else {
        unreachable!("a tenure's term")
    };
    waiters::grant_started(term);
    tenure::started(key, &id, term, now, handed.expires_at, None, None, 1);
}

/// Vacates a locked, live lease and announces it.
fn vacate(key: &str, holder: &str, term: i64, now: i64, forced: bool) {
    plans::run(
        schema_version::vacate(),
        &[key.into(), ts(now).into()],
        |_| (),
    );
    tenure::released(key, holder, term, now, forced, 1);
}

/// Contract 13, le_force_release: vacates the live lease of `key`, whoever
/// holds it; false when it is vacant, lapsed or unknown. The caller's
/// right to do so is checked by the API.
pub fn force_release(key: &str) -> bool {
    let args = [key.into(), ts(now()).into()];
    let Some(lease) = plans::run(schema_version::lock_live(), &args, first_lease) else {
        // No live tenure of one slot: the slots' tenures, and a lock-delay.
        let vacated = slots::force_release(key) > 0;
        return session_leases::lift_delay(key) || vacated;
    };
    let now = now();
    if !lease.is_live(now) {
        return false; // lapsed while we waited for the lock: the worker's
    }
    let holder = lease.holder.as_deref().expect("a live lease has a holder");
    vacate(key, holder, lease.term, now, true);
    true
}

/// Contract 11: sets the value of the lease `id` holds live.
pub fn proclaim(key: &str, id: &str, value: Option<&str>) -> bool {
    let set = |term| {
        let value_arg = value.map_or_else(DatumWithOid::null::<&str>, Into::into);
        plans::run(queries::SET_VALUE, &[key.into(), value_arg], |_| ());
        failover::commit_durably();
        Event::Proclaimed {
            key,
            holder: id,
            term,
            at: now(),
            value,
        }
        .send();
    };
    let once = || {
        with_own_live(key, id, None, |term, _| set(term)).is_some()
            || slots::proclaim(key, id, value)
    };
    past_rivals(key, id, None, once, |r| *r)
}
