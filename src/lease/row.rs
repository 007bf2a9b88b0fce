//! A key's row in `leaderlock` as the transitions read and write it: the
//! lease read, what a caller asks for, the parameters of a new tenure, and
//! a holder's extension (shared by acquiring and renewing).

use crate::base::ttl::Ttl;
use crate::lease::failover;
use crate::lease::tenure::{self, SessionClaim};
use crate::shmem::candidates;
use crate::shmem::databases::{self, Counter};
use crate::shmem::sessions;
use crate::store::call;
use crate::store::keys::Tenure;
use leaderlock_protocol::acquire::{Facts, Row};
use pgrx::prelude::*;
use pgrx::Uuid;

pub(crate) use crate::store::keys::Lease;

impl Lease {
    pub(super) fn is_live(&self, now: i64) -> bool {
        leaderlock_protocol::is_live(self.holder.is_some(), self.expires_at, now)
    }

    /// Contract 3.4: `id` leads in it (in `term`, when named), and the
    /// caller may act as its owner.
    pub(super) fn is_led_by(&self, id: &str, term: Option<i64>, now: i64) -> bool {
        let lease = leaderlock_protocol::Lease {
            holder: self.holder.as_deref(),
            term: self.term,
            expires_at: self.expires_at.unwrap_or(i64::MIN),
        };
        self.owned && leaderlock_protocol::leads(&lease, &id, term, now)
    }
}

impl Lease {
    /// As the decision core reads it (`leaderlock_protocol::acquire`).
    pub(super) fn row(&self) -> Row<&str, Uuid> {
        Row {
            holder: self.holder.as_deref(),
            term: self.term,
            expires_at: self.expires_at,
            owned: self.owned,
            slots: self.slots,
            session: self.session,
            delayed_until: self.delayed_until,
        }
    }
}

pub(super) use crate::store::keys::first_lease;

/// The acting role (contract 13): current_user at the call (`call.rs`).
pub(super) fn caller() -> pg_sys::Oid {
    call::caller()
}

/// What a caller asks for besides key, id and ttl (contracts 10, 11, 17).
#[derive(Clone, Copy, Debug)]
pub struct Claim<'a> {
    /// The lease also ends when this session ends.
    pub session_bound: bool,
    /// The leader value (jsonb text); None: none for a new tenure, kept
    /// for an extension.
    pub value: Option<&'a str>,
    /// How many holders the key admits at once.
    pub slots: i32,
    /// Contract 18: while a candidate of higher priority waits for the key,
    /// this one starts no tenure (le_try_acquire's is 0).
    pub priority: i32,
    /// Contract 21: acquired under this session (the tenure lives as long
    /// as the session does).
    pub session: Option<SessionClaim>,
}

impl Default for Claim<'_> {
    fn default() -> Self {
        Claim {
            session_bound: false,
            value: None,
            slots: 1,
            priority: 0,
            session: None,
        }
    }
}

/// Counts a call's outcome (contract 14): `success` when it succeeded,
/// else a refusal. Returns `succeeded`.
pub(super) fn counted(succeeded: bool, success: Counter) -> bool {
    databases::count(if succeeded { success } else { Counter::Refused });
    succeeded
}

/// The session binding (contract 10) a claim asks for: this backend's pid
/// and start.
pub(super) fn binding(claim: Claim<'_>) -> Option<(i32, i64)> {
    claim.session_bound.then(|| {
        let s = sessions::this_session();
        (s.pid, s.started)
    })
}

/// A new tenure of `key` for `id` at `now`, stored to expire at `stored`,
/// owned by `owner`.
pub(super) fn tenure<'a>(
    key: &'a str,
    id: &'a str,
    now: i64,
    stored: i64,
    ttl: Ttl,
    claim: Claim<'a>,
    owner: pg_sys::Oid,
) -> Tenure<'a> {
    Tenure {
        key,
        id,
        now,
        stored,
        ttl,
        floor: failover::term_floor(),
        value: claim.value,
        binding: binding(claim),
        owner,
        session: claim.session.map(|s| s.session),
    }
}

/// Extends the lease `id` holds live at `now` by `ttl` (the stored one when
/// None), same term: one statement that never waits (`queries::RENEW`).
/// Its term, or None when it was not extended.
pub(super) fn extend(
    key: &str,
    id: &str,
    now: i64,
    ttl: Option<Ttl>,
    term: Option<i64>,
) -> Option<i64> {
    tenure::extend(false, key, id, now, ttl, term)
}

/// What an acquisition of a key knows besides what it read, asked only
/// when the decision needs it (a renewal through le_try_acquire asks for
/// none of it): the term floor and the failover step (8), a candidate of
/// higher priority waiting (18), a tenure handed to a waiting le_acquire
/// (9). For keys of one slot and of many alike (`look.rs`).
pub(super) struct KeyFacts<'a> {
    pub(super) key: &'a str,
    pub(super) priority: i32,
    pub(super) locked: bool,
    /// A waiting le_acquire (a release may have handed it the lease).
    pub(super) waiting: bool,
}

impl Facts for KeyFacts<'_> {
    fn locked(&self) -> bool {
        self.locked
    }
    fn floor(&mut self) -> i64 {
        failover::term_floor()
    }
    fn ready(&mut self) -> bool {
        failover::ready_for_new_tenures()
    }
    fn outranked_until(&mut self) -> Option<i64> {
        candidates::outranked(self.key, self.priority)
    }
    fn handed(&mut self) -> Option<i64> {
        self.waiting
            .then(candidates::granted)
            .flatten()
            .map(|(term, _)| term)
    }
}
