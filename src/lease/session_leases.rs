//! Sessions (contract 21): one ttl shared by many keys.
//!
//! A session is a row of `leaderlock_sessions` (id, owner, ttl, expiry). A
//! key acquired under it names it in `leaderlock.session` and stores
//! expires_at infinity, so renewing the session writes its row alone, and
//! every statement that decides liveness reads the session's expiry
//! (`queries::expiry_of!`, `session_live!`). Nothing else makes such a key
//! lapse: it stays held until its session ends, and then every key still
//! held under it is vacated in one transaction (`end`): by le_close_session,
//! by the worker once the session lapsed or its connection ended, or by the
//! next acquisition of one of its keys.
//!
//! An acquisition under a session key-share-locks the session's row until
//! it commits. An end locks the row against renewals only (an acquisition
//! in flight goes on, and a key it adds is ended with the others or at the
//! next look), vacates the keys, and deletes the row only once no key is
//! held under it, with the row locked against acquisitions and at READ
//! COMMITTED (a snapshot older than an acquisition would miss its key):
//! until then the row stays, lapsed, and the worker ends the session again.
//! So no key ever names a session whose row is gone.

use crate::base::clock::{micros, now, ts};
use crate::base::ttl::Ttl;
use crate::lease::failover;
use crate::lease::tenure;
use crate::shmem::sessions;
use crate::shmem::worker_wakeup;
use crate::store::call;
use crate::store::plans;
use crate::store::queries;
use leaderlock_protocol::vacate::{Announce, SessionEnd};
use pgrx::datum::DatumWithOid;
use pgrx::prelude::*;
use pgrx::spi::SpiTupleTable;
use pgrx::Uuid;

/// What le_open_session asks for besides the id.
pub struct Options {
    pub ttl: Ttl,
    /// Ends with the connection that opened it, too (contract 10).
    pub bound: bool,
    /// Microseconds its keys stay unacquirable after it expires or its
    /// connection ends.
    pub lock_delay: i64,
    /// Its keys keep their values when vacated.
    pub keep_values: bool,
}

/// Contract 21: opens a session of `id`, owned by the caller. Its handle.
pub fn open(id: &str, options: &Options) -> Uuid {
    let now = now();
    let expires_at = leaderlock_protocol::expiry(now, options.ttl.0);
    let (pid, started) = if options.bound {
        let s = sessions::this_session();
        (s.pid.into(), ts(s.started).into())
    } else {
        (
            DatumWithOid::null::<i32>(),
            DatumWithOid::null::<TimestampWithTimeZone>(),
        )
    };
    let args = [
        id.into(),
        call::caller().into(),
        options.ttl.as_interval().into(),
        ts(now).into(),
        ts(expires_at).into(),
        Ttl(options.lock_delay).as_interval().into(),
        options.keep_values.into(),
        pid,
        started,
    ];
    let session = plans::run(queries::OPEN_SESSION, &args, |t| {
        t.first()
            .get_one::<Uuid>()
            .expect("session")
            .expect("an insert returns its row")
    });
    worker_wakeup::expiry_written(expires_at);
    failover::commit_durably();
    session
}

/// Contract 21: extends the caller's live session by `ttl` (its own when
/// None): one row. It waits for the owner's own other calls on the row
/// (`queries::RENEW_SESSION`), so a live session is never answered false;
/// `nowait` (le_renew of one of its keys, contract 3.2): it does not, and
/// is false while another transaction holds the row. False when it is not
/// the caller's live session.
pub fn renew(session: Uuid, ttl: Option<Ttl>, nowait: bool) -> bool {
    let args = [
        session.into(),
        ts(now()).into(),
        Ttl::or_stored(ttl),
        call::caller().into(),
    ];
    let sql = if nowait {
        queries::RENEW_SESSION_NOWAIT
    } else {
        queries::RENEW_SESSION
    };
    let expires_at = plans::run(sql, &args, |t| {
        let row = t.into_iter().next()?;
        micros(row.get::<TimestampWithTimeZone>(1).expect("expires_at"))
    });
    let Some(expires_at) = expires_at else {
        return false;
    };
    worker_wakeup::expiry_written(expires_at);
    failover::commit_durably();
    true
}

/// le_renew of a key `id` holds under a session (in `term`, when named):
/// renews that session. False when it holds the key under none.
pub fn renew_key(key: &str, id: &str, ttl: Option<Ttl>, term: Option<i64>) -> bool {
    let args = [key.into(), id.into(), plans::term_or_any(term)];
    let session = plans::run(queries::SESSION_OF_KEY, &args, |t| {
        t.into_iter()
            .next()
            .and_then(|row| row.get::<Uuid>(1).expect("session"))
    });
    session.is_some_and(|s| renew(s, ttl, true))
}

/// le_renew_all (contract 16) for sessions: renews every live session of
/// `id` the caller may act on. How many keys are held under them, and the
/// earliest new expiry (for the worker's cue, which the caller gives).
pub fn renew_all(id: &str, now: i64) -> (i64, Option<i64>) {
    let args = [id.into(), ts(now).into(), call::caller().into()];
    let (keys, earliest) = plans::run(queries::RENEW_ALL_SESSIONS, &args, |t| {
        let row = t.first();
        (
            row.get::<i64>(1).expect("count").unwrap_or(0),
            micros(row.get::<TimestampWithTimeZone>(2).expect("min")),
        )
    });
    (keys, earliest)
}

/// The id and ttl of the caller's session (a snapshot read): None when it
/// is unknown or owned by a role the caller is not a member of.
pub fn id_of(session: Uuid) -> Option<(String, Ttl)> {
    let args = [session.into(), call::caller().into()];
    plans::run(queries::SESSION_ID, &args, |t| {
        let row = t.into_iter().next()?;
        let owned = row.get::<bool>(2).expect("owned").unwrap_or(false);
        let ttl = row
            .get::<Interval>(3)
            .expect("ttl")
            .expect("ttl is NOT NULL");
        owned.then(|| {
            (
                row.get::<String>(1).expect("id").expect("id is NOT NULL"),
                Ttl(interval_micros(ttl)),
            )
        })
    })
}

/// An interval the extension stored (days and microseconds, no months) in
/// microseconds.
fn interval_micros(i: Interval) -> i64 {
    i64::from(i.days()) * 86_400_000_000 + i.micros()
}

/// For an acquisition under `session`: its expiry when it is live and the
/// caller's, its row key-share-locked until the transaction (or the
/// subtransaction of le_acquire's look) ends; None otherwise, and while it
/// is ending.
pub fn share(session: Uuid) -> Option<i64> {
    let args = [session.into(), call::caller().into()];
    plans::run(queries::SHARE_SESSION, &args, |t| {
        let row = t.into_iter().next()?;
        micros(row.get::<TimestampWithTimeZone>(1).expect("expires_at"))
    })
}

/// A session locked to be ended.
struct Ending {
    session: Uuid,
    lock_delay: i64,
    keep_values: bool,
    expires_at: i64,
}

/// The sessions a `LOCK_*_SESSION(S)` statement locked.
fn endings(t: SpiTupleTable<'_>) -> Vec<Ending> {
    t.into_iter()
        .map(|row| Ending {
            session: row
                .get::<Uuid>(1)
                .expect("session")
                .expect("session is NOT NULL"),
            lock_delay: row
                .get::<Interval>(2)
                .expect("lock_delay")
                .map_or(0, interval_micros),
            keep_values: row.get::<bool>(3).expect("keep_values").unwrap_or(false),
            expires_at: micros(row.get::<TimestampWithTimeZone>(4).expect("expires_at"))
                .expect("expires_at is NOT NULL"),
        })
        .collect()
}

/// A key held under an ending session, locked: a key of one slot (slot
/// 0), or a slot of a key of `slots`.
struct Held {
    key: String,
    holder: String,
    term: i64,
    slot: i32,
    slots: i32,
}

impl Held {
    /// From a row of `LOCK_SESSION_KEYS` (`slot`: `LOCK_SESSION_SLOTS`).
    fn of(row: &pgrx::spi::SpiHeapTupleData<'_>, slot: bool) -> Held {
        Held {
            key: row.get::<String>(1).expect("key").expect("key is NOT NULL"),
            holder: row.get::<String>(2).expect("holder").expect("held"),
            term: row.get::<i64>(3).expect("term").expect("term is NOT NULL"),
            slot: if slot {
                row.get::<i32>(4).expect("slot").expect("slot is NOT NULL")
            } else {
                0
            },
            slots: if slot {
                row.get::<i32>(5).expect("slots").unwrap_or(1)
            } else {
                1
            },
        }
    }
}

/// Vacates every key held under the session `s` (its row locked), keys of
/// one slot and slots of keys of many alike, and announces each, then
/// deletes the session's row if none is held any more (`finish`). `wait`:
/// for rows other transactions hold (a guarded write of the holder ends
/// first; le_close_session); otherwise they are skipped and the session
/// stays, lapsed, for the worker's next look. How many keys it vacated,
/// and whether the session's row is gone.
fn end(s: &Ending, how: SessionEnd, wait: bool) -> (usize, bool) {
    let (lock, lock_slots) = if wait {
        (
            queries::LOCK_SESSION_KEYS_WAIT,
            queries::LOCK_SESSION_SLOTS_WAIT,
        )
    } else {
        (queries::LOCK_SESSION_KEYS, queries::LOCK_SESSION_SLOTS)
    };
    let mut held: Vec<Held> = plans::run(lock, &[s.session.into()], |t| {
        t.into_iter().map(|row| Held::of(&row, false)).collect()
    });
    plans::run(lock_slots, &[s.session.into()], |t| {
        held.extend(t.into_iter().map(|row| Held::of(&row, true)))
    });
    // Read after the locks, as a release does.
    let now = now();
    if !held.is_empty() {
        let closed = how == SessionEnd::Closed;
        // What every key held under it gets: its expiry as stored and
        // announced, the lock-delay (counted from the session's expiry:
        // the same whoever ends the session and whenever, so a look that
        // ends it and rolls back, as le_acquire's do, moves nothing), and
        // what is announced.
        let ending = leaderlock_protocol::session_end(how, s.expires_at, s.lock_delay, now);
        let delayed_until = || {
            ending
                .delayed_until
                .map_or_else(DatumWithOid::null::<TimestampWithTimeZone>, |d| {
                    ts(d).into()
                })
        };
        // Keys of one slot, then slots of keys of many (by their numbers).
        let (slots, keys): (Vec<&Held>, Vec<&Held>) = held.iter().partition(|k| k.slot > 0);
        for (sql, group, numbered) in [
            (queries::VACATE_SESSION_KEYS, &keys, false),
            (queries::VACATE_SESSION_SLOTS, &slots, true),
        ] {
            if group.is_empty() {
                continue;
            }
            let names: Vec<String> = group.iter().map(|k| k.key.clone()).collect();
            let mut args = vec![
                names.into(),
                ts(now).into(),
                s.keep_values.into(),
                delayed_until(),
                ts(ending.expires_at).into(),
                closed.into(),
            ];
            if numbered {
                let numbers: Vec<i32> = group.iter().map(|k| k.slot).collect();
                args.push(numbers.into());
            }
            plans::run(sql, &args, |_| ());
        }
        failover::commit_durably();
        for Held {
            key,
            holder,
            term,
            slots,
            ..
        } in &held
        {
            match ending.announce {
                Announce::Released => tenure::released(key, holder, *term, now, false, *slots),
                Announce::Expired(reason) => {
                    tenure::expired(key, holder, *term, now, ending.expires_at, reason, *slots);
                }
            }
        }
    }
    (
        held.len(),
        finish(s.session, now, how == SessionEnd::Closed, wait),
    )
}

/// Deletes an ended session's row once no key is held under it: only at
/// READ COMMITTED (a newer snapshot than the transaction's sees every
/// acquisition committed meanwhile) and with the row locked for it (no
/// acquisition under it in flight, none to come: `wait`, or skipped while
/// one is). Otherwise the row stays, lapsed (`MARK_ENDED`), and the worker
/// ends it again. Whether it was deleted.
fn finish(session: Uuid, now: i64, closed: bool, wait: bool) -> bool {
    let read_committed = unsafe { pg_sys::XactIsoLevel } < pg_sys::XACT_REPEATABLE_READ as i32;
    let locked = read_committed
        && (wait
            || plans::run(queries::LOCK_SESSION_TO_DELETE, &[session.into()], |t| {
                !t.is_empty()
            }));
    let left = !locked
        || plans::run(queries::SESSION_KEYS_LEFT, &[session.into()], |t| {
            t.first().get_one::<i64>().expect("count").unwrap_or(0)
        }) > 0;
    if left {
        let args = [session.into(), ts(now).into(), closed.into()];
        plans::run(queries::MARK_ENDED, &args, |_| ());
        return false;
    }
    plans::run(queries::DELETE_SESSION, &[session.into()], |_| ());
    true
}

/// le_force_release of a key that a lock-delay keeps from takers (no
/// tenure holds it): the delay is lifted, and waiting le_acquire calls are
/// woken when this commits; nothing is announced (no tenure ended). True
/// when there was one.
pub fn lift_delay(key: &str) -> bool {
    if !crate::store::schema_version::has_slots() {
        return false;
    }
    let lifted = plans::run(queries::LIFT_DELAY, &[key.into(), ts(now()).into()], |t| {
        t.first().get_one::<i64>().ok().flatten().unwrap_or(0)
    });
    if lifted > 0 {
        crate::shmem::waiters::wake_at_commit(key);
        failover::commit_durably();
    }
    lifted > 0
}

/// Contract 21, le_close_session: releases every key of the caller's live
/// session, waiting for acquisitions under it in flight and for rows a
/// guarded write holds, and ends it. False when it is not the caller's
/// live session.
pub fn close(session: Uuid) -> bool {
    let args = [session.into(), call::caller().into()];
    let keep_values = plans::run(queries::LOCK_OWN_SESSION, &args, |t| {
        let row = t.into_iter().next()?;
        Some(row.get::<bool>(1).expect("keep_values").unwrap_or(false))
    });
    let Some(keep_values) = keep_values else {
        return false;
    };
    let s = Ending {
        session,
        lock_delay: 0,
        keep_values,
        expires_at: now(),
    };
    end(&s, SessionEnd::Closed, true);
    true
}

/// An acquisition found a key held under `session`, which lapsed by
/// `now`: ends that session first (all its keys), without waiting. Whether
/// it ended (false: another transaction is ending or renewing it, or a row
/// of its keys is locked).
pub fn end_lapsed(session: Uuid, now: i64) -> bool {
    let locked = plans::run(
        queries::LOCK_LAPSED_SESSION,
        &[session.into(), ts(now).into()],
        endings,
    );
    locked.iter().all(|s| end(s, SessionEnd::Expired, false).1) && !locked.is_empty()
}

/// Worker (and le_expire_lapsed): ends up to `batch` sessions lapsed at
/// `now`, skipping those other transactions hold. Returns how many keys it
/// vacated, and whether more may wait: the batch was full and some of it
/// ended (a full batch of sessions that cannot end yet is no reason to go
/// again at once: `MARK_ENDED` puts them behind the others).
pub fn expire_lapsed(now: i64, batch: i64) -> (usize, bool) {
    let locked = plans::run(
        queries::LOCK_LAPSED_SESSIONS,
        &[ts(now).into(), batch.into()],
        endings,
    );
    let mut keys = 0;
    let mut ended = 0;
    for s in &locked {
        let (vacated, deleted) = end(s, SessionEnd::Expired, false);
        keys += vacated;
        ended += usize::from(deleted || vacated > 0);
    }
    (keys, locked.len() as i64 >= batch && ended > 0)
}

/// Worker (contract 10): ends the sessions bound to the backend of `pid`
/// started at `started`, which ended. False when one of them could not end
/// yet (a row locked by another transaction).
pub fn end_bound(pid: i32, started: i64) -> bool {
    let locked = plans::run(
        queries::LOCK_BOUND_SESSIONS,
        &[pid.into(), ts(started).into()],
        endings,
    );
    // Each one, whatever the others did.
    let mut all = true;
    for s in &locked {
        all &= end(s, SessionEnd::ConnectionEnded, false).1;
    }
    all
}

/// Worker: ends up to `batch` sessions bound to backends that no longer
/// exist (ended without a word: a crash, or the queue of ended backends
/// overflowed). Returns how many it locked.
pub fn end_orphaned(batch: i64) -> usize {
    plans::run(queries::FRESH_ACTIVITY, &[], |_| ());
    let locked = plans::run(queries::LOCK_ORPHANED_SESSIONS, &[batch.into()], endings);
    for s in &locked {
        end(s, SessionEnd::ConnectionEnded, false);
    }
    locked.len()
}

/// Worker: when a session needs a look next, as of `now`.
pub fn next_check(now: i64) -> Option<i64> {
    plans::run(queries::NEXT_CHECK_SESSIONS, &[ts(now).into()], |t| {
        micros(
            t.first()
                .get_one::<TimestampWithTimeZone>()
                .expect("next check"),
        )
    })
}
