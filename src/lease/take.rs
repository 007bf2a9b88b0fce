//! Lease state transitions (contract sections 2 and 3).
//!
//! Every decision uses the server clock (`GetCurrentTimestamp`, the value
//! behind `clock_timestamp()`), read once per call. Takeovers and releases
//! read it after taking the row lock, so writes to a row are ordered the
//! same way by lock and by clock; a renewal, one statement, reads it just
//! before (harmless: nobody else can change a row its holder has locked, and
//! a renewal can only be backdated by that instant). Timestamps are
//! `TimestampTz` microseconds.

use crate::announce::notify::Event;
use crate::base::clock::{now, ts};
use crate::base::ttl::Ttl;
use crate::lease::row::{
    binding, caller, counted, extend, first_lease, start_term, tenure_args, Claim, KeyFacts, Lease,
};
use crate::lease::session_leases;
use crate::lease::slots::{self, Outcome};
use crate::lease::tenure::{self, SessionClaim};
use crate::shmem::candidates;
use crate::shmem::databases::Counter;
use crate::shmem::waiters;
use crate::store::call;
use crate::store::plans;
use crate::store::queries;
use crate::store::schema_version;
use leaderlock_protocol::acquire::{Ask, Row};
use leaderlock_protocol::{acquisition, Acquisition};
use pgrx::datum::DatumWithOid;
use pgrx::prelude::*;
use pgrx::Uuid;

/// What `claim` asks of the decision core.
fn ask<'a>(id: &'a &'a str, claim: Claim<'_>) -> Ask<'a, &'a str, Uuid> {
    Ask {
        id,
        slots: claim.slots,
        session: claim.session.map(|s| s.session),
        value: claim.value.is_some(),
    }
}

/// The result of one attempt to take or extend a lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Attempt {
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

/// An acquisition the SQL face refuses (22023): the key has live holders
/// and admits this many slots, not the number asked (contract 17).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotsDiffer(pub i32);

/// Whether an attempt acquired, or why the call is refused.
fn acquired(attempt: Attempt) -> Result<bool, SlotsDiffer> {
    match attempt {
        Attempt::SlotsDiffer(has) => Err(SlotsDiffer(has)),
        a => Ok(counted(a == Attempt::Acquired, Counter::Acquired)),
    }
}

/// Contract 3.1.
pub fn try_acquire(key: &str, id: &str, ttl: Ttl, claim: Claim<'_>) -> Result<bool, SlotsDiffer> {
    acquired(attempt(key, id, ttl, claim, None))
}

/// Contract 21: le_try_acquire_in (`wait` None) and le_acquire_in: acquires
/// `key` for the id of the caller's live `session`, the tenure living as
/// long as the session. False at once when the session is unknown, another
/// role's, or not live (or ends while le_acquire_in waits).
pub fn acquire_in(
    session: Uuid,
    key: &str,
    wait: Option<i64>,
    claim: Claim<'_>,
) -> Result<bool, SlotsDiffer> {
    let Some((id, ttl)) = session_leases::id_of(session) else {
        return Ok(counted(false, Counter::Acquired));
    };
    let claim = Claim {
        session: Some(SessionClaim {
            session,
            expires_at: 0,
        }),
        ..claim
    };
    match wait {
        None => try_acquire(key, &id, ttl, claim),
        Some(wait) => acquire(key, &id, ttl, wait, claim),
    }
}

/// Ends the session `lease` is held under if it lapsed by `now`.
fn end_lapsed_session(lease: &Lease, now: i64) {
    if let (Some(session), Some(_)) = (lease.session, &lease.holder) {
        if !lease.is_live(now) {
            session_leases::end_lapsed(session, now);
        }
    }
}

/// First retry delay of a waiter that found the row locked by another
/// transaction (whose end may come without a broadcast, e.g. a rival's
/// le_assert_leader); doubles up to `BUSY_RETRY_MAX_MS`.
const BUSY_RETRY_MS: i64 = 10;
const BUSY_RETRY_MAX_MS: i64 = 200;

/// Contract 9: like `try_acquire`, waiting up to `wait` microseconds for a
/// live lease of another to be released, expire or end with its session.
/// Sleeps on its latch (`waiters.rs`), woken by the commit that vacates
/// the lease, and at the holder's expiry at the latest.
pub fn acquire(
    key: &str,
    id: &str,
    ttl: Ttl,
    wait: i64,
    claim: Claim<'_>,
) -> Result<bool, SlotsDiffer> {
    // A hot standby cannot write: try once (a refusal works there, a
    // takeover fails as any write does) instead of waiting for nothing.
    let wait = if unsafe { pg_sys::RecoveryInProgress() } {
        0
    } else {
        wait
    };
    // Contract 18: a candidate that waits is known, with its priority, for
    // as long as it waits (however the call ends).
    let started = now();
    let deadline = started.saturating_add(wait);
    if wait == 0 {
        return wait_for_lease(key, id, ttl, deadline, claim);
    }
    let ranked = candidates::register(
        key,
        id,
        call::caller(),
        claim.priority,
        started,
        grantable(ttl, claim),
    );
    let outcome = std::cell::Cell::new(Ok(false));
    PgTryBuilder::new(std::panic::AssertUnwindSafe(|| {
        outcome.set(wait_for_lease(key, id, ttl, deadline, claim));
    }))
    .finally(|| {
        let acquired = || outcome.get() == Ok(true);
        candidates::leave(acquired());
        if ranked && !acquired() {
            // Gave up or failed: those it outranked may take the key now.
            waiters::candidate_left(key);
        } else if ranked && claim.slots > 1 {
            // Took a slot: another may be free (its knock came to this
            // candidate too, or found the next one outranked by it), so
            // the next candidate looks. (A winner of a key of one slot
            // holds it: the others learn so at their next look.)
            waiters::slot_taken(key);
        }
    })
    .execute();
    outcome.get()
}

/// Whether a release may hand this waiting call the lease in its own
/// transaction (`hand_over`), and what tenure it asks for. Only a plain
/// tenure of a key of one slot (no value to carry, no session to bind),
/// and only in an implicit transaction: one that ends as the statement
/// does, so that le_acquire returning true is all there is to undo.
fn grantable(ttl: Ttl, claim: Claim<'_>) -> Option<candidates::Grantable> {
    let plain = claim.slots == 1
        && !claim.session_bound
        && claim.value.is_none()
        && claim.session.is_none();
    (plain && !unsafe { pg_sys::IsTransactionBlock() }).then(|| candidates::Grantable {
        role: caller(),
        ttl_us: ttl.0,
    })
}

/// le_acquire's loop: look, sleep until woken or the lease could have
/// lapsed, look again, until `deadline`.
fn wait_for_lease(
    key: &str,
    id: &str,
    ttl: Ttl,
    deadline: i64,
    claim: Claim<'_>,
) -> Result<bool, SlotsDiffer> {
    let mut busy_ms = BUSY_RETRY_MS;
    loop {
        let seen = waiters::wakes(key);
        let reserved = candidates::reserved();
        // Each look in a subtransaction, rolled back unless it acquired:
        // a waiter keeps no lock while it sleeps, not even on the table
        // (DDL on the extension would queue behind it, and every renewal
        // behind the DDL).
        waiters::look_begins();
        let outcome = plans::in_subtransaction(
            || attempt(key, id, ttl, claim, Some(deadline)),
            |a| *a == Attempt::Acquired,
        );
        waiters::look_ends();
        candidates::looked(reserved);
        let now = now();
        let until = match outcome {
            Attempt::Acquired | Attempt::Refused | Attempt::SlotsDiffer(_) => {
                return acquired(outcome)
            }
            Attempt::HeldUntil(expires_at) => {
                busy_ms = BUSY_RETRY_MS;
                expires_at
            }
            Attempt::Busy => {
                // Locked by another transaction, whose end may come without
                // a broadcast (a rival's le_assert_leader): look again soon.
                let until = now + busy_ms * 1000;
                busy_ms = (busy_ms * 2).min(BUSY_RETRY_MAX_MS);
                until
            }
        };
        if now >= deadline {
            // (A lease a release is handing us meanwhile goes to the worker
            // when we leave: `candidates::leave`.)
            return Ok(counted(false, Counter::Acquired));
        }
        // Registered only now (a rolled-back subtransaction cancels it); a
        // release that committed since the look is seen by its knock or
        // broadcast.
        waiters::prepare(key);
        if waiters::wakes(key) != seen {
            waiters::done();
            continue;
        }
        // Rounded up: waking before the expiry would find it still live.
        let sleep_us = until.min(deadline) - now;
        waiters::sleep(key, seen, (sleep_us + 999) / 1000);
        waiters::done();
    }
}

/// One look at the lease: take it, extend it, or say why not. `deadline`,
/// le_acquire's, bounds the only wait there is (see `insert_first_term`).
fn attempt(key: &str, id: &str, ttl: Ttl, claim: Claim<'_>, deadline: Option<i64>) -> Attempt {
    // Under a session: only while it is live and the caller's, and it
    // cannot end before this look does (`session_leases::share`); a waiter
    // looks again when it could have lapsed.
    let Some(asked) = claim.session else {
        return look(key, id, ttl, claim, deadline);
    };
    let Some(expires_at) = session_leases::share(asked.session) else {
        return Attempt::Refused;
    };
    let claim = Claim {
        session: Some(SessionClaim {
            expires_at,
            ..asked
        }),
        ..claim
    };
    match look(key, id, ttl, claim, deadline) {
        Attempt::HeldUntil(until) => Attempt::HeldUntil(until.min(expires_at)),
        outcome => outcome,
    }
}

/// `attempt`'s look, the session (if any) checked: read without locking,
/// decided by the core (`leaderlock_protocol::acquisition`), and what it
/// decided written; a new tenure on an existing row only under its lock.
fn look(key: &str, id: &str, ttl: Ttl, claim: Claim<'_>, deadline: Option<i64>) -> Attempt {
    // Read without locking first: a rival that cannot win must never lock
    // the holder's row, or the holder's renewals would fail meanwhile.
    let seen = plans::run(
        schema_version::read_lease(),
        &[key.into(), caller().into()],
        first_lease,
    );
    let read_at = now();
    if let Some(lease) = &seen {
        // A key of a lapsed session: its session ended first (all its keys),
        // as a takeover vacates a lapsed lease; the lock below finds it
        // vacant. (In le_acquire's look, only if the look acquires: it rolls
        // back otherwise, and the lock-delay counts from the session's
        // expiry, whoever ends it.)
        end_lapsed_session(lease, read_at);
    }
    let mut facts = KeyFacts {
        key,
        priority: claim.priority,
        locked: false,
        waiting: deadline.is_some(),
    };
    let row = seen.as_ref().map(Lease::row);
    let mut decided = acquisition(row.as_ref(), &ask(&id, claim), &mut facts, read_at);
    if decided == Acquisition::ManySlots {
        // A key of many slots, or asked for: its tenures are `slots.rs`'s.
        let has = seen.as_ref().map(|l| l.slots);
        let live = seen.as_ref().is_some_and(|l| l.is_live(read_at));
        let outcome = slots::attempt(
            key,
            id,
            ttl,
            claim.slots,
            has,
            live,
            claim.value,
            claim.priority,
            deadline,
            claim.session,
        );
        decided = match (outcome, &row) {
            (Outcome::Acquired, _) => return Attempt::Acquired,
            (Outcome::SlotsDiffer(has), _) => return Attempt::SlotsDiffer(has),
            (Outcome::HeldUntil(t), _) => return Attempt::HeldUntil(t),
            (Outcome::Busy, _) | (Outcome::OneSlot, None) => return Attempt::Busy,
            // Now a key of one slot, its row locked by us: decided as one.
            (Outcome::OneSlot, Some(r)) => {
                let one = Row { slots: 1, ..*r };
                acquisition(Some(&one), &ask(&id, claim), &mut facts, read_at)
            }
        };
    }
    match decided {
        Acquisition::Wait(until) => return Attempt::HeldUntil(until),
        Acquisition::NotNow | Acquisition::ManySlots => return Attempt::Busy,
        // Held under this very session, which is what lives: nothing to
        // extend (a value is set under the lock, which never waits).
        Acquisition::Held => return Attempt::Acquired,
        Acquisition::Handed => {
            // Handed to this waiting call by a release (`hand_over`), as it
            // asked for it: nothing left to write. (True as of this read, as
            // any answer is as of its call: a le_force_release may follow,
            // and the term tells.)
            if let Some(tenure) = candidates::granted() {
                candidates::took(key, id, tenure);
                return Attempt::Acquired;
            }
        }
        Acquisition::Extend => {
            // Ours: extended as le_renew does, in one statement that never
            // waits, without the subtransaction and lock below (this is how
            // holders that call le_try_acquire periodically renew). If that
            // fails (lapsed meanwhile, or the row is locked), the lock
            // decides.
            if let Some(term) = extend(key, id, read_at, Some(ttl), None) {
                proclaim_extended(key, id, term, read_at, claim.value);
                return Attempt::Acquired;
            }
        }
        // A key never used: its first tenure.
        Acquisition::Start { .. } => return insert_first_term(key, id, ttl, claim, deadline),
        Acquisition::Lock | Acquisition::Rebind => {}
    }
    // A takeover of a row that was not live as read: in one statement that
    // takes it only if it is still as read, never waiting; else the lock
    // below decides again.
    if decided == Acquisition::Lock {
        if let Some(lease) = seen.as_ref().filter(|l| !l.is_live(read_at)) {
            if let Some(attempt) = take_as_read(key, id, ttl, claim, lease) {
                return attempt;
            }
        }
    }
    // Lock it only if we may take or extend it (SKIP LOCKED: never wait),
    // and write under that lock.
    plans::under_lock(
        || {
            plans::run(
                schema_version::lock_acquirable(),
                &[key.into(), id.into(), caller().into(), ts(now()).into()],
                first_lease,
            )
        },
        |lease| take_locked(key, id, ttl, claim, lease),
    )
    .unwrap_or(Attempt::Busy)
}

/// With the lease's row locked (`under_lock`): what the core decides on
/// it, written: an extension (same term; the session binding stays with
/// the session that acquired it), a move into or out of a session, or a
/// new tenure. None when nothing can be done now.
fn take_locked(key: &str, id: &str, ttl: Ttl, claim: Claim<'_>, lease: Lease) -> Option<Attempt> {
    let now = now();
    let term = match decide_locked(key, id, claim, &lease, now) {
        Acquisition::Held => lease.term,
        Acquisition::Rebind => rebind(key, now, ttl, claim),
        Acquisition::Extend => extend(key, id, now, Some(ttl), None)?,
        Acquisition::Start { .. } => {
            let previous = lease.holder.as_deref();
            return start(key, id, ttl, claim, now, previous, |args| {
                Some(start_term(&args))
            });
        }
        _ => return None,
    };
    proclaim_extended(key, id, term, now, claim.value);
    Some(Attempt::Acquired)
}

/// What the core decides on `lease` as its row lock holds it (or as a
/// statement that takes the row only unchanged will find it).
fn decide_locked(key: &str, id: &str, claim: Claim<'_>, lease: &Lease, now: i64) -> Acquisition {
    let mut facts = KeyFacts {
        key,
        priority: claim.priority,
        locked: true,
        waiting: false,
    };
    acquisition(Some(&lease.row()), &ask(&id, claim), &mut facts, now)
}

/// A new tenure of `key` for `id` at `now`, following `previous`: written
/// by `write` from `START_TERM`'s parameters (its term; None when it wrote
/// nothing), then followed (`tenure::started`).
fn start<'a>(
    key: &'a str,
    id: &'a str,
    ttl: Ttl,
    claim: Claim<'a>,
    now: i64,
    previous: Option<&str>,
    write: impl FnOnce([DatumWithOid<'a>; 11]) -> Option<i64>,
) -> Option<Attempt> {
    let (stored, expires_at) = tenure::ends(now, ttl, claim.session);
    let term = write(tenure_args(key, id, now, stored, ttl, claim, caller()))?;
    tenure::started(key, id, term, now, expires_at, previous, claim.value, 1);
    Some(Attempt::Acquired)
}

/// A takeover of `lease` as read without locking: decided on the row as
/// if locked (`acquisition`), then written by `queries::TAKE_AS_READ`,
/// which takes the row only if no write has ended, moved or delayed its
/// tenure since the read and it is still not live (the term, holder,
/// session and lock-delay read are unchanged, and the row is not locked).
/// The clock is read before the row is locked, and the row must not be
/// live at that instant: a write to it since (a renewal that made it live
/// again included) changes one of those or its expiry, so the take does not
/// happen, and a new tenure never starts before the expiry of the one it
/// follows. None when it did not take the row (the caller locks it and
/// decides again).
fn take_as_read(key: &str, id: &str, ttl: Ttl, claim: Claim<'_>, lease: &Lease) -> Option<Attempt> {
    if !schema_version::has_slots() {
        return None;
    }
    let now = now();
    let Acquisition::Start { .. } = decide_locked(key, id, claim, lease, now) else {
        return None;
    };
    let seen = [
        lease.term.into(),
        lease
            .holder
            .as_deref()
            .map_or_else(DatumWithOid::null::<&str>, Into::into),
        lease
            .session
            .map_or_else(DatumWithOid::null::<Uuid>, Into::into),
        lease
            .delayed_until
            .map_or_else(DatumWithOid::null::<TimestampWithTimeZone>, |d| {
                ts(d).into()
            }),
    ];
    start(key, id, ttl, claim, now, lease.holder.as_deref(), |args| {
        let args: Vec<_> = args.into_iter().chain(seen).collect();
        // In a subtransaction rolled back when nothing was taken: a row
        // written since the statement's snapshot is locked in its latest
        // version before the re-check, and would stay locked
        // (`plans::under_lock`).
        plans::in_subtransaction(
            || {
                plans::run(queries::TAKE_AS_READ, &args, |t| {
                    t.into_iter()
                        .next()
                        .and_then(|row| row.get::<i64>(1).expect("term"))
                })
            },
            Option::is_some,
        )
    })
}

/// Contract 21: the holder moves its live lease, its row locked, into the
/// session it acquires under, or out of sessions (then by `ttl`). Same
/// term.
fn rebind(key: &str, now: i64, ttl: Ttl, claim: Claim<'_>) -> i64 {
    let (stored, _) = tenure::ends(now, ttl, claim.session);
    let (pid, started) = binding(claim);
    let args = [
        key.into(),
        SessionClaim::arg(claim.session),
        ts(stored).into(),
        ttl.as_interval().into(),
        ts(now).into(),
        pid,
        started,
    ];
    tenure::rebind(queries::REBIND, &args, stored)
}

/// A brand-new key (`tenure::insert_first` says how long it may wait).
fn insert_first_term(
    key: &str,
    id: &str,
    ttl: Ttl,
    claim: Claim<'_>,
    deadline: Option<i64>,
) -> Attempt {
    let now = now();
    let (stored, expires_at) = tenure::ends(now, ttl, claim.session);
    let args = tenure_args(key, id, now, stored, ttl, claim, caller());
    let inserted = tenure::insert_first(schema_version::insert_first_term(), &args, now, deadline);
    let Some(term) = inserted else {
        // A concurrent first acquisition of the same key won, or is still
        // open past our deadline.
        return Attempt::Busy;
    };
    tenure::started(key, id, term, now, expires_at, None, claim.value, 1);
    Attempt::Acquired
}

/// The holder extended its lease with le_try_acquire and a value: set it
/// and announce it, as le_proclaim would.
fn proclaim_extended(key: &str, id: &str, term: i64, now: i64, value: Option<&str>) {
    if let Some(value) = value {
        plans::run(queries::SET_VALUE, &[key.into(), value.into()], |_| ());
        Event::Proclaimed {
            key,
            holder: id,
            term,
            at: now,
            value: Some(value),
        }
        .send();
    }
}
