//! The worker's steps (contract 5 and 10): vacate lapsed leases and the
//! leases of ended sessions, each with one `expired` notification, in the
//! worker's transaction; and when to check next. `worker.rs` runs them.
//! The statements lock only what may be vacated (`lapsed!`); what becomes
//! of each row locked is `leaderlock_protocol::vacate`'s decision.
use crate::announce::notify::ExpiryReason;
use crate::base::clock::{micros, now, ts};
use crate::lease::failover;
use crate::lease::session_leases;
use crate::lease::tenure;
use crate::shmem::handover;
use crate::shmem::sessions::Session;
use crate::store::keys::Held;
use crate::store::plans;
use crate::store::queries;
use crate::store::schema_version;
use leaderlock_protocol::vacate::{Cause, Vacating};
use pgrx::prelude::*;
use pgrx::spi::SpiTupleTable;

fn locked_expired(t: SpiTupleTable<'_>) -> Vec<Held> {
    t.into_iter().map(|row| Held::of(&row)).collect()
}

impl Held {
    /// What the decision core does with it, locked for `cause` at `now`
    /// (`leaderlock_protocol::vacate`): the reason to announce, or None to
    /// leave it.
    fn decide(&self, cause: Cause, now: i64) -> Option<(ExpiryReason, i64)> {
        let lease = leaderlock_protocol::Lease {
            holder: Some(self.holder.as_str()),
            term: self.term,
            expires_at: self.expires_at,
        };
        match leaderlock_protocol::vacate(&lease, cause, now) {
            Vacating::Expire { reason, expires_at } => Some((reason, expires_at)),
            Vacating::Keep => None,
        }
    }
}

/// Worker: vacates the leases just locked for `cause` that the decision
/// core says to, and queues one `expired` notification each, in the
/// current transaction. Returns how many.
fn vacate_locked(locked: &[Held], now: i64, cause: Cause) -> usize {
    let expired: Vec<_> = locked
        .iter()
        .filter_map(|e| Some((e, e.decide(cause, now)?)))
        .collect();
    if expired.is_empty() {
        return 0;
    }
    let keys: Vec<String> = expired.iter().map(|(e, _)| e.key.clone()).collect();
    plans::run(
        schema_version::vacate_keys(),
        &[keys.into(), ts(now).into()],
        |_| (),
    );
    failover::commit_durably();
    for (e, (reason, expires_at)) in &expired {
        tenure::expired(&e.key, &e.holder, e.term, now, *expires_at, *reason, 1);
    }
    expired.len()
}

/// Worker (contract 9): vacates the tenures of this database handed over by
/// releases and never taken up (`handover.rs`), each if it is still as
/// handed, and queues one `expired` notification each. A locked one is
/// left to lapse at its ttl.
pub fn end_abandoned(now: i64) {
    let database = unsafe { pg_sys::MyDatabaseId }.to_u32();
    for a in handover::take(database) {
        let (key, id) = (a.key.text(), a.id.text());
        let args = [
            key.as_str().into(),
            id.as_str().into(),
            a.term.into(),
            ts(a.acquired_at).into(),
            ts(now).into(),
        ];
        let locked = plans::run(queries::LOCK_ABANDONED, &args, locked_expired);
        vacate_locked(&locked, now, Cause::Abandoned);
    }
}

/// Worker: vacate up to `batch` leases lapsed at `now`, up to `batch`
/// tenures of keys of many slots and the keys of up to `batch` lapsed
/// sessions, skipping locked rows, and queue one `expired` notification
/// each (contract 5). Returns how many it vacated, and whether a batch was
/// full (more may wait).
pub fn expire_lapsed(now: i64, batch: i64) -> (usize, bool) {
    let expired = plans::run(
        queries::LOCK_LAPSED,
        &[ts(now).into(), batch.into()],
        locked_expired,
    );
    let leases = vacate_locked(&expired, now, Cause::Lapsed);
    let tenures = expire_lapsed_tenures(now, batch);
    let (keys, sessions_full) = expire_lapsed_sessions(now, batch);
    let full = leases as i64 >= batch || tenures as i64 >= batch || sessions_full;
    (leases + tenures + keys, full)
}

/// Contract 21: ends up to `batch` sessions lapsed at `now` (each with all
/// its keys, in this transaction). Returns how many keys it vacated, and
/// whether more sessions may wait.
fn expire_lapsed_sessions(now: i64, batch: i64) -> (usize, bool) {
    if !schema_version::has_slots() {
        return (0, false);
    }
    session_leases::expire_lapsed(now, batch)
}

/// The same for tenures of keys of many slots (contract 17): each on its
/// own, announced with its key's slots.
fn expire_lapsed_tenures(now: i64, batch: i64) -> usize {
    if !schema_version::has_slots() {
        return 0;
    }
    let expired = plans::run(
        queries::LOCK_LAPSED_SLOTS,
        &[ts(now).into(), batch.into()],
        |t| {
            t.into_iter()
                .map(|row| {
                    let slot = row.get::<i32>(5).expect("slot").expect("slot is NOT NULL");
                    let slots = row.get::<i32>(6).expect("slots").unwrap_or(1);
                    (Held::of(&row), (slot, slots))
                })
                .collect::<Vec<_>>()
        },
    );
    vacate_tenures(expired.iter().map(|(e, s)| (e, *s)), now)
}

/// Vacates the tenures just locked, lapsed (`slots`: each one's slot and
/// its key's slots), that the decision core says to, and queues one
/// `expired` notification each. Returns how many.
fn vacate_tenures<'h>(locked: impl Iterator<Item = (&'h Held, (i32, i32))>, now: i64) -> usize {
    let expired: Vec<_> = locked
        .filter_map(|(e, s)| Some((e, s, e.decide(Cause::Lapsed, now)?)))
        .collect();
    if expired.is_empty() {
        return 0;
    }
    let keys: Vec<String> = expired.iter().map(|(e, _, _)| e.key.clone()).collect();
    let numbers: Vec<i32> = expired.iter().map(|(_, s, _)| s.0).collect();
    plans::run(
        queries::VACATE_SLOTS,
        &[keys.into(), numbers.into(), ts(now).into()],
        |_| (),
    );
    failover::commit_durably();
    for (e, (_, key_slots), (reason, expires_at)) in &expired {
        tenure::expired(
            &e.key,
            &e.holder,
            e.term,
            now,
            *expires_at,
            *reason,
            *key_slots,
        );
    }
    expired.len()
}

/// Contract 17: a key (its head row locked) admits `slots` from now on and
/// has no live tenure: its lapsed tenures in the slots in the way, locked
/// (`locked`, each with its slot; `all` of them there are), end now, as
/// expiries. None, and nothing changed, when one of them is locked by
/// another transaction (a fenced transaction of its holder, the worker):
/// the change must wait.
pub fn vacate_stale(locked: &[(Held, i32)], all: i64, slots: i32, now: i64) -> Option<usize> {
    // (Each of them lapsed: the key has no live tenure.)
    let lapsed = locked
        .iter()
        .all(|(e, _)| e.decide(Cause::Lapsed, now).is_some());
    if (locked.len() as i64) < all || !lapsed {
        return None;
    }
    Some(vacate_tenures(
        locked.iter().map(|(e, slot)| (e, (*slot, slots))),
        now,
    ))
}

/// Most leases one statement (and, in the worker, one transaction) vacates;
/// the worker takes more by its next check right away.
pub const BATCH: i64 = 1_000;

/// le_expire_lapsed where no worker serves the database (contract 19):
/// vacate every lease lapsed now, in the caller's transaction, a batch at a
/// time as the worker does. Returns how many.
pub fn expire_all_lapsed() -> usize {
    let mut vacated = 0;
    loop {
        let now = now();
        let leases = plans::run(
            queries::LOCK_LAPSED,
            &[ts(now).into(), BATCH.into()],
            locked_expired,
        );
        let n = vacate_locked(&leases, now, Cause::Lapsed);
        let tenures = expire_lapsed_tenures(now, BATCH);
        let (held, sessions_full) = expire_lapsed_sessions(now, BATCH);
        vacated += n + tenures + held;
        if (n as i64) < BATCH && (tenures as i64) < BATCH && !sessions_full {
            return vacated;
        }
    }
}

/// Worker (contract 10): vacate the held leases bound to `session`, which
/// ended. Returns false when some were locked by another transaction and
/// must be tried again.
pub fn end_session(session: &Session) -> bool {
    if !schema_version::has_0_3() {
        return true;
    }
    let args = [session.pid.into(), ts(session.started).into()];
    let expired = plans::run(queries::LOCK_SESSION_LEASES, &args, locked_expired);
    vacate_locked(&expired, now(), Cause::ConnectionEnded);
    let left = plans::run(queries::SESSION_LEASES_LEFT, &args, |t| {
        t.first().get_one::<i64>().expect("count").unwrap_or(0)
    });
    // Contract 21: and the sessions bound to it.
    let bound =
        !schema_version::has_slots() || session_leases::end_bound(session.pid, session.started);
    left == 0 && bound
}

/// Worker: vacate up to `batch` held leases bound to sessions that no
/// longer exist (ended without a word: the server crashed, or the queue of
/// ended sessions overflowed). Returns how many it locked and how many of
/// those it vacated (the others' sessions turned out to be alive).
pub fn end_orphaned_sessions(batch: i64) -> (usize, usize) {
    if !schema_version::has_0_3() {
        return (0, 0);
    }
    if schema_version::has_slots() {
        // Contract 21: the sessions bound to them, each with its keys.
        session_leases::end_orphaned(batch);
    }
    let mut sessions: Vec<(i32, TimestampWithTimeZone)> = Vec::new();
    let candidates = plans::run(queries::LOCK_ORPHANED, &[batch.into()], |t| {
        t.into_iter()
            .map(|row| {
                sessions.push((
                    row.get::<i32>(5).expect("pid").expect("session-bound"),
                    row.get::<TimestampWithTimeZone>(6)
                        .expect("start")
                        .expect("session-bound"),
                ));
                Held::of(&row)
            })
            .collect::<Vec<_>>()
    });
    if candidates.is_empty() {
        return (0, 0);
    }
    // Locked now: decide on a fresh list of backends.
    plans::run(queries::FRESH_ACTIVITY, &[], |_| ());
    let keys: Vec<String> = candidates.iter().map(|e| e.key.clone()).collect();
    let pids: Vec<i32> = sessions.iter().map(|s| s.0).collect();
    let starts: Vec<TimestampWithTimeZone> = sessions.iter().map(|s| s.1).collect();
    let gone: std::collections::HashSet<String> = plans::run(
        queries::STILL_ORPHANED,
        &[keys.into(), pids.into(), starts.into()],
        |t| {
            t.into_iter()
                .map(|row| row.get::<String>(1).expect("key").expect("key"))
                .collect()
        },
    );
    let orphaned: Vec<Held> = candidates
        .into_iter()
        .filter(|e| gone.contains(&e.key))
        .collect();
    let locked = sessions.len();
    (
        locked,
        vacate_locked(&orphaned, now(), Cause::ConnectionEnded),
    )
}

/// Worker: when to check next, as of `now` (see `queries::NEXT_CHECK`).
pub fn next_check(now: i64) -> Option<i64> {
    let at = |sql| {
        plans::run(sql, &[ts(now).into()], |t| {
            micros(
                t.first()
                    .get_one::<TimestampWithTimeZone>()
                    .expect("next check"),
            )
        })
    };
    let leases = at(queries::NEXT_CHECK);
    if !schema_version::has_slots() {
        return leases;
    }
    [
        leases,
        at(queries::NEXT_CHECK_SLOTS),
        session_leases::next_check(now),
    ]
    .into_iter()
    .flatten()
    .min()
}
