//! Acquiring a key (contracts 3.1, 9, 18, 21): le_try_acquire's one look,
//! le_acquire's looks while it waits, under a session or not. Each look is
//! `look.rs`'s.
//!
//! Every decision uses the server clock (`GetCurrentTimestamp`, the value
//! behind `clock_timestamp()`), read once per call. Takeovers and releases
//! read it after taking the row lock, so writes to a row are ordered the
//! same way by lock and by clock; a renewal, one statement, reads it just
//! before (harmless: nobody else can change a row its holder has locked, and
//! a renewal can only be backdated by that instant). Timestamps are
//! `TimestampTz` microseconds.

use crate::base::clock::now;
use crate::base::ttl::Ttl;
use crate::lease::keep::past_rivals;
use crate::lease::look::{look, Attempt};
use crate::lease::row::{caller, counted, Claim};
use crate::lease::session_leases;
use crate::lease::tenure::SessionClaim;
use crate::shmem::candidates;
use crate::shmem::databases::Counter;
use crate::shmem::waiters;
use crate::store::call;
use crate::store::plans;
use pgrx::prelude::*;
use pgrx::Uuid;

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
    // (a holder's renewal that found its row locked by a rival's lost race
    // looks again once that lock is gone)
    let once = || attempt(key, id, ttl, claim, None);
    acquired(past_rivals(key, id, None, once, |a| *a != Attempt::Busy))
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

/// One look at the lease: take it, extend it, or say why not (`look.rs`).
/// `deadline`, le_acquire's, bounds the only wait there is.
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
