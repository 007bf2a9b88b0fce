//! What follows a change of holder, for a key of one slot (`take.rs`, `keep.rs`) and
//! for a tenure of a key of many (`slots.rs`) alike: the worker's cue,
//! wake-ups, the counters, durability, and the announcement (contract 4).

use crate::announce::notify::{Event, ExpiryReason};
use crate::base::clock::{micros, ts};
use crate::base::settings;
use crate::base::ttl::Ttl;
use crate::lease::failover;
use crate::shmem::databases::{self, Counter};
use crate::shmem::waiters;
use crate::shmem::worker_wakeup;
use crate::store::call;
use crate::store::plans;
use leaderlock_protocol::keep::Renewal;
use pgrx::datum::DatumWithOid;
use pgrx::prelude::*;
use pgrx::Uuid;

/// Shortest wait behind a concurrent first insert of the same key, in
/// microseconds: enough for one that is committing, not for one left open.
const FIRST_INSERT_WAIT_US: i64 = 10_000;

/// The first insert of a brand-new key's row (`sql`: an INSERT ... ON
/// CONFLICT DO NOTHING RETURNING term). It waits for a concurrent inserter
/// of the same key (contract 3.1: le_try_acquire waits for its outcome),
/// but in le_acquire only until its `deadline` (at least
/// `FIRST_INSERT_WAIT_US`, its `wait => 0` too): a rival's uncommitted
/// insert never holds a waiting caller beyond its own `wait`. The term, or
/// None when the other won or is still open past the deadline.
pub fn insert_first(
    sql: &'static str,
    args: &[DatumWithOid<'_>],
    now: i64,
    deadline: Option<i64>,
) -> Option<i64> {
    let timeout_ms = deadline.map(|d| ((d - now).max(FIRST_INSERT_WAIT_US) + 999) / 1000);
    plans::in_subtransaction(
        || {
            PgTryBuilder::new(std::panic::AssertUnwindSafe(|| {
                let _lock_timeout =
                    timeout_ms.map(|ms| settings::Local::set(c"lock_timeout", &ms.to_string()));
                plans::run(sql, args, |t| {
                    t.into_iter()
                        .next()
                        .and_then(|row| row.get::<i64>(1).expect("term"))
                })
            }))
            .catch_when(PgSqlErrorCode::ERRCODE_LOCK_NOT_AVAILABLE, |_| None)
            .execute()
        },
        Option::is_some,
    )
}

/// A new tenure was written: `previous_holder`, the holder of a lapsed
/// lease taken over before the worker vacated it (counted as an expiry).
#[allow(clippy::too_many_arguments)]
pub fn started(
    key: &str,
    id: &str,
    term: i64,
    now: i64,
    expires_at: i64,
    previous_holder: Option<&str>,
    value: Option<&str>,
    slots: i32,
) {
    worker_wakeup::expiry_written(expires_at);
    if previous_holder.is_some() {
        databases::count(Counter::Expired);
    }
    // Rolled back, the lease is vacant again: its waiters must look again.
    waiters::wake_at_abort(key);
    failover::commit_durably();
    Event::Acquired {
        key,
        holder: id,
        term,
        at: now,
        previous_holder,
        expires_at,
        value,
    }
    .send_for(slots);
}

/// A lapsed lease (or tenure), or one whose session ended, was vacated
/// (the worker, le_expire_lapsed, a change of a key's slots): its waiters
/// wake when this commits.
#[allow(clippy::too_many_arguments)]
pub fn expired(
    key: &str,
    holder: &str,
    term: i64,
    now: i64,
    expires_at: i64,
    reason: ExpiryReason,
    slots: i32,
) {
    databases::count(Counter::Expired);
    waiters::wake_at_commit(key);
    Event::Expired {
        key,
        holder,
        term,
        at: now,
        expires_at,
        reason,
    }
    .send_for(slots);
}

/// A live lease (or tenure) was vacated by its holder or, `forced`, by
/// le_force_release: its waiters wake when this commits.
pub fn released(key: &str, holder: &str, term: i64, now: i64, forced: bool, slots: i32) {
    databases::count(Counter::Released);
    waiters::wake_at_commit(key);
    failover::commit_durably();
    Event::Released {
        key,
        holder,
        term,
        at: now,
        forced,
    }
    .send_for(slots);
}

/// Runs a renewal (`queries::RENEW`, `RENEW_SLOT`: same parameters) of the
/// tenure `id` holds live on `key` at `now`, by `ttl` (the stored one when
/// None), in `term` when named; what the decision core makes of the tenure
/// it extended (`leaderlock_protocol::renewal`) is done: the worker's cue,
/// durability. Its term, or None when nothing was renewed.
pub fn extend(
    sql: &'static str,
    key: &str,
    id: &str,
    now: i64,
    ttl: Option<Ttl>,
    term: Option<i64>,
) -> Option<i64> {
    let args = [
        key.into(),
        id.into(),
        ts(now).into(),
        Ttl::or_stored(ttl),
        call::caller().into(),
        plans::term_or_any(term),
    ];
    let extended = plans::run(sql, &args, |t| {
        let row = t.into_iter().next()?;
        let expires_at = micros(row.get::<TimestampWithTimeZone>(1).expect("expires_at"))?;
        let term = row.get::<i64>(2).expect("term").expect("term is NOT NULL");
        Some(leaderlock_protocol::Lease {
            holder: Some(id),
            term,
            expires_at,
        })
    });
    match leaderlock_protocol::renewal(extended.as_ref(), &id, term, now) {
        Renewal::Extend { term, expires_at } => {
            worker_wakeup::expiry_written(expires_at);
            failover::commit_durably();
            Some(term)
        }
        Renewal::Refuse => None,
    }
}

/// Contract 21: runs a move of a live tenure, its row locked, into or out
/// of a session (`queries::REBIND`, `REBIND_SLOT`), stored to expire at
/// `stored`; gives the worker its cue and makes it durable. Its term.
pub fn rebind(sql: &'static str, args: &[DatumWithOid<'_>], stored: i64) -> i64 {
    let term = plans::run(sql, args, |t| {
        t.first()
            .get_one::<i64>()
            .expect("term")
            .expect("term is NOT NULL")
    });
    worker_wakeup::expiry_written(stored);
    failover::commit_durably();
    term
}

/// Contract 21: an acquisition under a session: its handle, and its expiry
/// as of the look (what announcements of the tenure say; its row is
/// key-share-locked meanwhile).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionClaim {
    pub session: Uuid,
    pub expires_at: i64,
}

impl SessionClaim {
    /// The session parameter of a tenure's statement: `claim`'s, or NULL.
    pub fn arg(claim: Option<SessionClaim>) -> DatumWithOid<'static> {
        claim.map_or_else(DatumWithOid::null::<Uuid>, |c| c.session.into())
    }
}

/// A new tenure's expiry at `now`, as stored and as announced: now + ttl;
/// or, under a session, infinity (its session's row has the expiry) and
/// the session's expiry (contract 21).
pub fn ends(now: i64, ttl: Ttl, under: Option<SessionClaim>) -> (i64, i64) {
    match under {
        Some(s) => (i64::MAX, s.expires_at),
        None => {
            let at = leaderlock_protocol::expiry(now, ttl.0);
            (at, at)
        }
    }
}
