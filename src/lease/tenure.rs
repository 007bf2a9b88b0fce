//! What follows a change of holder, for a key of one slot (`look.rs`, `keep.rs`) and
//! for a tenure of a key of many (`slots.rs`) alike: the worker's cue,
//! wake-ups, the counters, durability, and the announcement (contract 4).

use crate::announce::notify::{Event, ExpiryReason};
use crate::base::ttl::Ttl;
use crate::lease::failover;
use crate::shmem::candidates;
use crate::shmem::databases::{self, Counter};
use crate::shmem::waiters;
use crate::shmem::worker_wakeup;
use crate::store::call;
use crate::store::keys::{self, Reply, Statement};
use leaderlock_protocol::keep::Renewal;
use pgrx::Uuid;

/// What follows an acquisition's write (`look.rs`), done once after it
/// (`done`).
pub enum Follow {
    Nothing,
    /// A new tenure (`tenure::started`), following `previous`'s lapsed one.
    Started {
        term: i64,
        now: i64,
        expires_at: i64,
        previous: Option<String>,
    },
    /// The holder kept its tenure in `term`: the worker's cue at its new
    /// expiry when it was extended or moved (`cue`), its value proclaimed
    /// when one was set.
    Kept {
        term: i64,
        now: i64,
        cue: Option<i64>,
        proclaimed: bool,
    },
    /// A release handed this waiting call the lease (`candidates::took`).
    Took((i64, i64)),
}

impl Follow {
    /// Done for `id`'s tenure of `key` (of `slots` slots), `value` its
    /// value when one was given: the worker's cue, durability, wake-ups,
    /// and one announcement.
    pub fn done(&self, key: &str, id: &str, value: Option<&str>, slots: i32) {
        let event = match *self {
            Follow::Nothing => return,
            Follow::Started {
                term,
                now,
                expires_at,
                ref previous,
            } => {
                begun(key, expires_at, previous.is_some());
                Event::Acquired {
                    key,
                    holder: id,
                    term,
                    at: now,
                    previous_holder: previous.as_deref(),
                    expires_at,
                    value,
                }
            }
            Follow::Kept {
                term,
                now,
                cue,
                proclaimed,
            } => {
                if let Some(expires_at) = cue {
                    worker_wakeup::expiry_written(expires_at);
                    failover::commit_durably();
                }
                if !proclaimed {
                    return;
                }
                Event::Proclaimed {
                    key,
                    holder: id,
                    term,
                    at: now,
                    value,
                }
            }
            Follow::Took(tenure) => return candidates::took(key, id, tenure),
        };
        event.send_for(slots);
    }
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
    begun(key, expires_at, previous_holder.is_some());
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

/// What a new tenure expiring at `expires_at` sets off besides its
/// announcement: the worker's cue, the counters (a lapsed tenure it
/// followed counts as an expiry, `after_lapsed`), wake-ups at rollback
/// (the lease is vacant again: its waiters must look again), durability.
fn begun(key: &str, expires_at: i64, after_lapsed: bool) {
    worker_wakeup::expiry_written(expires_at);
    if after_lapsed {
        databases::count(Counter::Expired);
    }
    waiters::wake_at_abort(key);
    failover::commit_durably();
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

/// Runs a renewal (`keys::Statement::Renew`; `many`: of a slot's tenure)
/// of the tenure `id` holds live on `key` at `now`, by `ttl` (the stored
/// one when None), in `term` when named; what the decision core makes of
/// the tenure it extended (`leaderlock_protocol::renewal`) is done: the
/// worker's cue, durability. Its term, or None when nothing was renewed.
pub fn extend(
    many: bool,
    key: &str,
    id: &str,
    now: i64,
    ttl: Option<Ttl>,
    term: Option<i64>,
) -> Option<i64> {
    let renew = Statement::Renew {
        key,
        id,
        now,
        ttl,
        owner: call::caller(),
        term,
        many,
    };
    let Reply::Extended(extended) = keys::run(renew) else {
        unreachable!("a renewal replies with what it extended")
    };
    let (term, expires_at) = renewed_in(extended, id, term, now)?;
    worker_wakeup::expiry_written(expires_at);
    failover::commit_durably();
    Some(term)
}

/// What the decision core makes of the tenure a renewal of `id`'s at `now`
/// extended (term, expiry; `leaderlock_protocol::renewal`): its term and
/// expiry, or None. What follows (the worker's cue, durability) is the
/// caller's.
pub fn renewed(extended: Option<(i64, i64)>, id: &str, now: i64) -> Option<(i64, i64)> {
    renewed_in(extended, id, None, now)
}

/// The same, in `term` when named.
fn renewed_in(
    extended: Option<(i64, i64)>,
    id: &str,
    term: Option<i64>,
    now: i64,
) -> Option<(i64, i64)> {
    let lease = extended.map(|(term, expires_at)| leaderlock_protocol::Lease {
        holder: Some(id),
        term,
        expires_at,
    });
    match leaderlock_protocol::renewal(lease.as_ref(), &id, term, now) {
        Renewal::Extend { term, expires_at } => Some((term, expires_at)),
        Renewal::Refuse => None,
    }
}

/// Contract 21: an acquisition under a session: its handle, and its expiry
/// as of the look (what announcements of the tenure say; its row is
/// key-share-locked meanwhile).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionClaim {
    pub session: Uuid,
    pub expires_at: i64,
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
