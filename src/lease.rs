//! Lease state transitions (contract sections 2 and 3).
//!
//! Every decision uses the server clock (`GetCurrentTimestamp`, the value
//! behind `clock_timestamp()`), read once per call. Takeovers and releases
//! read it after taking the row lock, so writes to a row are ordered the
//! same way by lock and by clock; a renewal, one statement, reads it just
//! before (harmless: nobody else can change a row its holder has locked, and
//! a renewal can only be backdated by that instant). Timestamps are
//! `TimestampTz` microseconds.

use crate::failover;
use crate::input::Ttl;
use crate::notify::Event;
use crate::plans;
use crate::queries;
use crate::wakeup;
use pgrx::datum::DatumWithOid;
use pgrx::prelude::*;
use pgrx::spi::SpiTupleTable;

/// The server clock, as `clock_timestamp()` reads it.
pub fn now() -> i64 {
    unsafe { pg_sys::GetCurrentTimestamp() }
}

pub fn ts(micros: i64) -> TimestampWithTimeZone {
    TimestampWithTimeZone::try_from(micros)
        .unwrap_or_else(|_| error!("leaderlock: timestamp out of range"))
}

fn micros(t: Option<TimestampWithTimeZone>) -> Option<i64> {
    t.map(i64::from)
}

/// One lease row: holder, term, expires_at.
struct Lease {
    holder: Option<String>,
    term: i64,
    expires_at: Option<i64>,
}

impl Lease {
    fn is_live(&self, now: i64) -> bool {
        self.holder.is_some() && self.expires_at.is_some_and(|e| e > now)
    }
}

fn first_lease(table: SpiTupleTable<'_>) -> Option<Lease> {
    let row = table.into_iter().next()?;
    Some(Lease {
        holder: row.get::<String>(1).expect("holder"),
        term: row.get::<i64>(2).expect("term").expect("term is NOT NULL"),
        expires_at: micros(row.get::<TimestampWithTimeZone>(3).expect("expires_at")),
    })
}

/// Contract 3.1.
pub fn try_acquire(key: &str, id: &str, ttl: Ttl) -> bool {
    if !failover::leases_outlast_failover() {
        return false;
    }
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
    if lease.is_live(now) {
        // Live and, by the lock's condition, ours: extend, same term.
        return extend(key, id, now, Some(ttl));
    }

    // Vacant or lapsed: a new tenure.
    let expires_at = now + ttl.0;
    let term = plans::run(
        queries::START_TERM,
        &[
            key.into(),
            id.into(),
            ts(now).into(),
            ts(expires_at).into(),
            ttl.as_interval().into(),
            failover::term_floor().into(),
        ],
        |t| {
            t.first()
                .get_one::<i64>()
                .expect("term")
                .expect("term is NOT NULL")
        },
    );
    wakeup::expiry_written(expires_at);
    failover::commit_durably();
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
            failover::term_floor().into(),
        ],
        |t| {
            t.into_iter()
                .next()
                .and_then(|row| row.get::<i64>(1).expect("term"))
        },
    );
    let Some(term) = inserted else {
        // A concurrent first acquisition of the same key won.
        return false;
    };
    wakeup::expiry_written(expires_at);
    failover::commit_durably();
    Event::Acquired {
        key,
        holder: id,
        term,
        at: now,
        previous_holder: None,
        expires_at,
    }
    .send();
    true
}

/// Extends the lease `id` holds live at `now` by `ttl` (the stored one when
/// None), same term: one statement that never waits (`queries::RENEW`).
fn extend(key: &str, id: &str, now: i64, ttl: Option<Ttl>) -> bool {
    let ttl = match ttl {
        Some(t) => t.as_interval().into(),
        None => DatumWithOid::null::<Interval>(),
    };
    let args = [key.into(), id.into(), ts(now).into(), ttl];
    let expires_at = plans::run(queries::RENEW, &args, |t| {
        t.into_iter()
            .next()
            .and_then(|row| micros(row.get::<TimestampWithTimeZone>(1).expect("expires_at")))
    });
    match expires_at {
        Some(e) => {
            wakeup::expiry_written(e);
            failover::commit_durably();
            true
        }
        None => false,
    }
}

/// Contract 3.2.
pub fn renew(key: &str, id: &str, ttl: Option<Ttl>) -> bool {
    if !failover::leases_outlast_failover() {
        return false;
    }
    extend(key, id, now(), ttl)
}

/// Contract 3.3.
pub fn release(key: &str, id: &str) -> bool {
    if !failover::leases_outlast_failover() {
        return false;
    }
    let locked = plans::run(queries::LOCK_OWN, &[key.into(), id.into()], |t| {
        let row = t.into_iter().next()?;
        Some((
            row.get::<i64>(1).expect("term").expect("term is NOT NULL"),
            micros(row.get::<TimestampWithTimeZone>(2).expect("expires_at"))?,
        ))
    });
    let Some((term, expires_at)) = locked else {
        return false;
    };
    let now = now();
    if expires_at <= now {
        return false;
    }
    plans::run(queries::VACATE, &[key.into(), ts(now).into()], |_| ());
    failover::commit_durably();
    Event::Released {
        key,
        holder: id,
        term,
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

/// A lease the worker turns vacant.
struct Expired {
    key: String,
    holder: String,
    term: i64,
    expires_at: i64,
}

/// Worker: vacate up to `batch` leases lapsed at `now`, skipping locked
/// rows, and queue one `expired` notification each (contract 5). Returns
/// how many.
pub fn expire_lapsed(now: i64, batch: i64) -> usize {
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
        return 0;
    }
    let keys: Vec<String> = expired.iter().map(|e| e.key.clone()).collect();
    plans::run(queries::VACATE_KEYS, &[keys.into()], |_| ());
    failover::commit_durably();
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
    expired.len()
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
