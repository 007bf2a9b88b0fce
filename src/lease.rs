//! Lease state transitions (contract sections 2 and 3).
//!
//! Every decision uses the server clock (`GetCurrentTimestamp`, the value
//! behind `clock_timestamp()`), read once per call after the row lock is
//! taken, so writes to a row are ordered the same way by lock and by clock.
//! Timestamps are `TimestampTz` microseconds.

use crate::input::Ttl;
use crate::notify::Event;
use crate::plans;
use crate::queries;
use crate::wakeup;
use pgrx::prelude::*;
use pgrx::spi::SpiTupleTable;

/// The server clock, as `clock_timestamp()` reads it.
pub fn now() -> i64 {
    unsafe { pg_sys::GetCurrentTimestamp() }
}

fn ts(micros: i64) -> TimestampWithTimeZone {
    TimestampWithTimeZone::try_from(micros)
        .unwrap_or_else(|_| error!("leaderlock: timestamp out of range"))
}

fn micros(t: Option<TimestampWithTimeZone>) -> Option<i64> {
    t.map(i64::from)
}

/// An interval of days and microseconds (no months: input.rs rejects them).
fn interval_micros(i: Interval) -> i64 {
    i64::from(i.days()) * 86_400_000_000 + i.micros()
}

/// One lease row: holder, term, expires_at (and recheck_at when locked
/// for a change).
struct Lease {
    holder: Option<String>,
    term: i64,
    expires_at: Option<i64>,
    recheck_at: Option<i64>,
}

impl Lease {
    fn is_live(&self, now: i64) -> bool {
        self.holder.is_some() && self.expires_at.is_some_and(|e| e > now)
    }
}

fn first_lease(table: SpiTupleTable<'_>) -> Option<Lease> {
    let columns = table.columns().expect("columns");
    let row = table.into_iter().next()?;
    Some(Lease {
        holder: row.get::<String>(1).expect("holder"),
        term: row.get::<i64>(2).expect("term").expect("term is NOT NULL"),
        expires_at: micros(row.get::<TimestampWithTimeZone>(3).expect("expires_at")),
        recheck_at: if columns >= 4 {
            micros(row.get::<TimestampWithTimeZone>(4).expect("recheck_at"))
        } else {
            None
        },
    })
}

/// recheck_at after extending a live lease to `expires_at` at `now`.
///
/// It is the worker's cue (an indexed lower bound of expires_at), kept
/// unchanged when possible so the renewal is a HOT update: it moves only if
/// it would now lie past the new expiry (a shorter ttl), or within half a
/// ttl of now. A holder renewing more often than every ttl/2 thus always
/// has its recheck_at ahead of now, and the worker never looks at it.
pub fn recheck_after_extend(old: Option<i64>, now: i64, expires_at: i64, ttl: Ttl) -> i64 {
    match old {
        Some(old) if old <= expires_at && old - now >= ttl.0 / 2 => old,
        _ => expires_at,
    }
}

/// Contract 3.1.
pub fn try_acquire(key: &str, id: &str, ttl: Ttl) -> bool {
    // Read without locking first: a rival that cannot win must never lock
    // the holder's row, or the holder's renewals would fail meanwhile.
    let seen = plans::run(queries::READ_LEASE, &[key.into()], first_lease);
    match seen {
        None => return insert_first_term(key, id, ttl),
        Some(lease) if lease.is_live(now()) && lease.holder.as_deref() != Some(id) => return false,
        Some(_) => {}
    }

    // Lock it only if we may take or extend it; SKIP LOCKED: never wait.
    let locked = plans::run(
        queries::LOCK_ACQUIRABLE,
        &[key.into(), id.into()],
        first_lease,
    );
    let Some(lease) = locked else { return false };

    let now = now();
    let expires_at = now + ttl.0;
    if lease.is_live(now) {
        // Live and, by the lock's condition, ours: extend, same term.
        extend(key, now, expires_at, ttl, lease.recheck_at);
        return true;
    }

    // Vacant or lapsed: a new tenure.
    let term = plans::run(
        queries::START_TERM,
        &[
            key.into(),
            id.into(),
            ts(now).into(),
            ts(expires_at).into(),
            ttl.as_interval().into(),
        ],
        |t| {
            t.first()
                .get_one::<i64>()
                .expect("term")
                .expect("term is NOT NULL")
        },
    );
    wakeup::expiry_written(expires_at);
    Event::Acquired {
        key,
        holder: id,
        term,
        at: now,
        previous_holder: lease.holder.as_deref(),
        expires_at,
    }
    .send();
    true
}

fn insert_first_term(key: &str, id: &str, ttl: Ttl) -> bool {
    let now = now();
    let expires_at = now + ttl.0;
    let inserted = plans::run(
        queries::INSERT_FIRST_TERM,
        &[
            key.into(),
            id.into(),
            ts(now).into(),
            ts(expires_at).into(),
            ttl.as_interval().into(),
        ],
        |t| !t.is_empty(),
    );
    if !inserted {
        // A concurrent first acquisition of the same key won.
        return false;
    }
    wakeup::expiry_written(expires_at);
    Event::Acquired {
        key,
        holder: id,
        term: 1,
        at: now,
        previous_holder: None,
        expires_at,
    }
    .send();
    true
}

fn extend(key: &str, now: i64, expires_at: i64, ttl: Ttl, old_recheck: Option<i64>) {
    let recheck_at = recheck_after_extend(old_recheck, now, expires_at, ttl);
    plans::run(
        queries::EXTEND,
        &[
            key.into(),
            ts(now).into(),
            ts(expires_at).into(),
            ttl.as_interval().into(),
            ts(recheck_at).into(),
        ],
        |_| (),
    );
    wakeup::expiry_written(expires_at);
}

/// A live lease of `id`, locked.
struct Own {
    term: i64,
    expires_at: i64,
    ttl: Interval,
    recheck_at: Option<i64>,
}

/// The live lease of `id` on `key`, locked; None when it is not live and
/// ours, or when another transaction holds the row locked.
fn lock_own(key: &str, id: &str) -> Option<Own> {
    plans::run(queries::LOCK_OWN, &[key.into(), id.into()], |t| {
        let row = t.into_iter().next()?;
        Some(Own {
            term: row.get::<i64>(1).expect("term").expect("term is NOT NULL"),
            expires_at: micros(row.get::<TimestampWithTimeZone>(2).expect("expires_at"))?,
            ttl: row.get::<Interval>(3).expect("ttl")?,
            recheck_at: micros(row.get::<TimestampWithTimeZone>(4).expect("recheck_at")),
        })
    })
}

/// Contract 3.2.
pub fn renew(key: &str, id: &str, ttl: Option<Ttl>) -> bool {
    let Some(own) = lock_own(key, id) else {
        return false;
    };
    let now = now();
    if own.expires_at <= now {
        // It lapsed between the lock and now: renew never revives a lease.
        return false;
    }
    let ttl = ttl.unwrap_or(Ttl(interval_micros(own.ttl)));
    extend(key, now, now + ttl.0, ttl, own.recheck_at);
    true
}

/// Contract 3.3.
pub fn release(key: &str, id: &str) -> bool {
    let Some(own) = lock_own(key, id) else {
        return false;
    };
    let now = now();
    if own.expires_at <= now {
        return false;
    }
    plans::run(queries::VACATE, &[key.into(), ts(now).into()], |_| ());
    Event::Released {
        key,
        holder: id,
        term: own.term,
        at: now,
    }
    .send();
    true
}

/// Contract 3, le_leader: the live holder, else None.
pub fn leader(key: &str) -> Option<String> {
    plans::run(queries::LIVE_HOLDER, &[key.into(), ts(now()).into()], |t| {
        t.into_iter()
            .next()
            .and_then(|row| row.get::<String>(1).expect("holder"))
    })
}

/// Why le_assert_leader refused: everything its message names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotLeader {
    pub key: String,
    pub id: String,
    pub expected_term: Option<i64>,
    /// None when the key was never acquired.
    pub term: Option<i64>,
    pub holder: Option<String>,
    pub live: bool,
}

impl NotLeader {
    pub fn message(&self) -> String {
        let (key, id) = (&self.key, &self.id);
        let state = match (&self.term, &self.holder, self.live) {
            (None, _, _) => "the key has never been acquired".to_string(),
            (Some(term), None, _) => format!("the lease is vacant (term {term})"),
            (Some(term), Some(h), true) => format!("the holder is \"{h}\" (term {term})"),
            (Some(term), Some(h), false) => {
                format!("the lease of \"{h}\" (term {term}) has lapsed")
            }
        };
        match self.expected_term {
            Some(t) if self.live && self.holder.as_deref() == Some(id.as_str()) => format!(
                "leaderlock: \"{id}\" leads \"{key}\" in term {}, not in term {t}",
                self.term.unwrap_or_default()
            ),
            _ => format!("leaderlock: \"{id}\" is not the leader of \"{key}\": {state}"),
        }
    }
}

/// Contract 3.4: the current term when `id` is the live holder (and the
/// term matches); the share lock stays until the transaction ends.
pub fn assert_leader(key: &str, id: &str, expected_term: Option<i64>) -> Result<i64, NotLeader> {
    let lease = plans::run(queries::SHARE_LOCK_LEASE, &[key.into()], first_lease);
    let now = now();
    let refuse = |lease: Option<&Lease>| NotLeader {
        key: key.to_string(),
        id: id.to_string(),
        expected_term,
        term: lease.map(|l| l.term),
        holder: lease.and_then(|l| l.holder.clone()),
        live: lease.is_some_and(|l| l.is_live(now)),
    };
    match lease {
        Some(l)
            if l.is_live(now)
                && l.holder.as_deref() == Some(id)
                && expected_term.is_none_or(|t| t == l.term) =>
        {
            Ok(l.term)
        }
        other => Err(refuse(other.as_ref())),
    }
}

/// A lease the worker turned vacant.
pub struct Expired {
    pub key: String,
    pub holder: String,
    pub term: i64,
    pub expires_at: i64,
}

/// Worker: vacate up to `batch` leases lapsed at `now`, skipping locked
/// rows, and queue one `expired` notification each (contract 5).
pub fn expire_lapsed(now: i64, batch: i64) -> Vec<Expired> {
    let expired: Vec<Expired> =
        plans::run(queries::LOCK_LAPSED, &[ts(now).into(), batch.into()], |t| {
            t.into_iter()
                .map(|row| Expired {
                    key: row.get::<String>(1).expect("key").expect("key is NOT NULL"),
                    holder: row
                        .get::<String>(2)
                        .expect("holder")
                        .expect("lapsed rows have one"),
                    term: row.get::<i64>(3).expect("term").expect("term is NOT NULL"),
                    expires_at: micros(row.get::<TimestampWithTimeZone>(4).expect("expires_at"))
                        .expect("lapsed rows have one"),
                })
                .collect()
        });
    if expired.is_empty() {
        return expired;
    }
    let keys: Vec<String> = expired.iter().map(|e| e.key.clone()).collect();
    plans::run(queries::VACATE_KEYS, &[keys.into()], |_| ());
    for e in &expired {
        Event::Expired {
            key: &e.key,
            holder: &e.holder,
            term: e.term,
            at: now,
            expires_at: e.expires_at,
        }
        .send();
    }
    expired
}

/// Worker: when to check next, as of `now` (see `queries::NEXT_CHECK`).
pub fn next_check(now: i64) -> Option<i64> {
    plans::run(queries::NEXT_CHECK, &[ts(now).into()], |t| {
        micros(
            t.first()
                .get_one::<TimestampWithTimeZone>()
                .expect("next check"),
        )
    })
}

#[cfg(test)]
mod unit {
    use super::recheck_after_extend;
    use crate::input::Ttl;

    const S: i64 = 1_000_000;

    #[test]
    fn recheck_is_kept_while_more_than_half_a_ttl_ahead() {
        // acquired at 0 with ttl 30 s: recheck 30 s; renewed at 10 s
        assert_eq!(
            recheck_after_extend(Some(30 * S), 10 * S, 40 * S, Ttl(30 * S)),
            30 * S
        );
        // renewed at exactly 15 s: 15 s ahead is still half the ttl
        assert_eq!(
            recheck_after_extend(Some(30 * S), 15 * S, 45 * S, Ttl(30 * S)),
            30 * S
        );
    }

    #[test]
    fn recheck_moves_to_the_expiry_when_close_or_past_it() {
        // renewed at 20 s: only 10 s ahead, under half the ttl
        assert_eq!(
            recheck_after_extend(Some(30 * S), 20 * S, 50 * S, Ttl(30 * S)),
            50 * S
        );
        // a shorter ttl: the new expiry (12 s) is before the old recheck
        assert_eq!(
            recheck_after_extend(Some(30 * S), 10 * S, 12 * S, Ttl(2 * S)),
            12 * S
        );
        // none stored
        assert_eq!(
            recheck_after_extend(None, 10 * S, 40 * S, Ttl(30 * S)),
            40 * S
        );
    }

    #[test]
    fn recheck_never_exceeds_the_expiry() {
        for old in [0, 5, 10, 29, 30, 31, 60] {
            for now in [0, 1, 10, 14, 15, 16, 29] {
                for ttl in [1, 2, 15, 30, 60] {
                    let expires = (now + ttl) * S;
                    let r = recheck_after_extend(Some(old * S), now * S, expires, Ttl(ttl * S));
                    assert!(
                        r <= expires,
                        "old {old} now {now} ttl {ttl}: {r} > {expires}"
                    );
                    assert!(r >= now * S + ttl * S / 2 || r == expires);
                }
            }
        }
    }
}
