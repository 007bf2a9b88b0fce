//! Keys of many slots (contract 17): up to `slots` live holders at once.
//!
//! Their tenures live in `leaderlock_slots`, one row per slot, kept when
//! vacated and taken again. The key's row in `leaderlock` (its head) holds
//! no holder, only the key's last term and how many slots it admits: every
//! tenure's term is issued from it, under its row lock, so terms increase
//! across all holders of the key, and no two candidates take one slot.
//! Holders never lock the head: renewals, releases and the worker touch
//! their slot's row only, so a candidate (which locks the head for an
//! instant, or for the rest of its own transaction, as 3.1 allows) never
//! delays a holder. A tenure is taken by `look.rs`'s acquisition (the same
//! machine as for a key of one slot); here are what a holder does with it
//! and what anyone reads of it.
//!
//! A tenure acquired under a session (contract 21) is stored as a key of one
//! slot is: expires_at infinity, its session's row has the expiry, only the
//! session's end vacates it (`session_leases`), and a slot vacated with a
//! lock-delay (`delayed_until`) is taken, not free, until the delay ends.

use crate::announce::notify::Event;
use crate::base::clock::{micros, now, ts};
use crate::base::ttl::Ttl;
use crate::lease::failover;
use crate::lease::row::KeyFacts;
use crate::lease::tenure;
use crate::store::call;
use crate::store::keys::{self, Reply, Statement};
use crate::store::plans;
use crate::store::queries;
use crate::store::schema_version;
use leaderlock_protocol::keep::{Letting, Release};
use pgrx::datum::DatumWithOid;
use pgrx::prelude::*;
use pgrx::Uuid;

/// The caller's tenure of a key of many slots, as read without a lock.
#[derive(Clone, Copy, Debug)]
pub struct Own {
    pub slot: i32,
    pub term: i64,
    pub expires_at: Option<i64>,
    /// The caller may act as its owner (contract 13).
    pub owned: bool,
    /// The session it is held under (contract 21).
    pub session: Option<Uuid>,
}

impl Own {
    pub fn is_live(&self, now: i64) -> bool {
        leaderlock_protocol::is_live(true, self.expires_at, now)
    }

    /// Contract 3.4: its id leads in it (in `term`, when named), and the
    /// caller may act as its owner.
    pub fn is_led(&self, term: Option<i64>, now: i64) -> bool {
        let lease = leaderlock_protocol::Lease {
            holder: Some(()),
            term: self.term,
            expires_at: self.expires_at.unwrap_or(i64::MIN),
        };
        self.owned && leaderlock_protocol::leads(&lease, &(), term, now)
    }
}

fn caller() -> pg_sys::Oid {
    call::caller()
}

fn value_arg(value: Option<&str>) -> DatumWithOid<'_> {
    value.map_or_else(DatumWithOid::null::<&str>, Into::into)
}

/// How many slots `key` admits: 1 for a key of one holder, an unknown key,
/// or a schema from before 0.5.0.
pub fn slots_of(key: &str) -> i32 {
    key_slots(key).unwrap_or(1)
}

/// How many slots `key` admits; None for an unknown key (or before 0.5.0).
fn key_slots(key: &str) -> Option<i32> {
    let Reply::Slots(slots) = keys::run(Statement::KeySlots { key }) else {
        unreachable!("KEY_SLOTS replies with a number")
    };
    slots
}

/// The latest tenure `id` has on `key`, read without a lock.
pub fn read_own(key: &str, id: &str) -> Option<Own> {
    plans::run(
        queries::READ_OWN_SLOT,
        &[key.into(), id.into(), caller().into()],
        |t| {
            let row = t.into_iter().next()?;
            Some(Own {
                slot: row.get::<i32>(1).expect("slot").expect("slot is NOT NULL"),
                term: row.get::<i64>(2).expect("term").expect("term is NOT NULL"),
                expires_at: micros(row.get::<TimestampWithTimeZone>(3).expect("expires_at")),
                owned: row.get::<bool>(4).expect("owned").unwrap_or(false),
                session: row.get::<Uuid>(5).expect("session"),
            })
        },
    )
}

/// Contract 3.2 for a tenure of a key of many slots: extends the one `id`
/// holds live at `now`. Its term, or None.
pub fn extend(key: &str, id: &str, now: i64, ttl: Option<Ttl>, term: Option<i64>) -> Option<i64> {
    tenure::extend(true, key, id, now, ttl, term)
}

/// The tenure `id` holds live on `key`, owned by a role the caller is a
/// member of, locked (`LOCK_OWN_SLOT`, never waiting): its slot, term and
/// expiry. None when there is none, or another transaction holds it.
fn lock_own(key: &str, id: &str) -> Option<(i32, i64, i64)> {
    let owner = caller();
    let Reply::OwnSlot(own) = keys::run(Statement::LockOwnSlot { key, id, owner }) else {
        unreachable!("LOCK_OWN_SLOT replies with a slot")
    };
    own
}

/// Locks the tenure `id` holds live on `key` and runs `write` with its
/// slot, term and the time it was found live (`plans::under_lock`); None
/// when there is none or it is locked.
fn with_own_live<T>(
    key: &str,
    id: &str,
    term: Option<i64>,
    write: impl FnOnce(i32, i64, i64) -> T,
) -> Option<T> {
    if !schema_version::has_slots() {
        return None;
    }
    plans::under_lock(
        || lock_own(key, id),
        |(slot, held, expires_at)| {
            let now = now();
            // (locked only if the caller may act as its owner)
            let own = Own {
                slot,
                term: held,
                expires_at: Some(expires_at),
                owned: true,
                session: None,
            };
            own.is_led(term, now).then(|| write(slot, held, now))
        },
    )
}

/// Contract 3.3 for a tenure of a key of many slots: the tenure `id` holds
/// live locked (`LOCK_OWN_SLOT`), and what the decision core makes of it
/// (`leaderlock_protocol::release`) written: vacated (never handed over:
/// the key admits more than one holder).
pub fn release(key: &str, id: &str, term: Option<i64>) -> bool {
    if !schema_version::has_slots() {
        return false;
    }
    plans::under_lock(
        || lock_own(key, id),
        |(slot, held, expires_at)| {
            let now = now();
            let slots = slots_of(key);
            let lease = leaderlock_protocol::Lease {
                holder: Some(id),
                term: held,
                expires_at,
            };
            let ask = Letting {
                id: &id,
                term,
                implicit: false,
                slots,
            };
            let mut facts = KeyFacts {
                key,
                priority: 0,
                locked: true,
                waiting: false,
            };
            match leaderlock_protocol::release(Some(&lease), &ask, &mut facts, now) {
                Release::Refuse => None,
                Release::Vacate { .. } => {
                    vacate(key, slot, id, held, now, false, slots);
                    Some(())
                }
            }
        },
    )
    .is_some()
}

#[allow(clippy::too_many_arguments)]
fn vacate(key: &str, slot: i32, holder: &str, term: i64, now: i64, forced: bool, slots: i32) {
    plans::run(
        queries::VACATE_SLOT,
        &[key.into(), slot.into(), ts(now).into()],
        |_| (),
    );
    tenure::released(key, holder, term, now, forced, slots);
}

/// Contract 13 for a key of many slots: vacates every live tenure; how many.
pub fn force_release(key: &str) -> usize {
    if !schema_version::has_slots() {
        return 0;
    }
    let live: Vec<(i32, String, i64)> = plans::run(queries::LOCK_LIVE_SLOTS, &[key.into()], |t| {
        t.into_iter()
            .map(|row| {
                (
                    row.get::<i32>(1).expect("slot").expect("slot is NOT NULL"),
                    row.get::<String>(2).expect("holder").expect("live"),
                    row.get::<i64>(3).expect("term").expect("term is NOT NULL"),
                )
            })
            .collect()
    });
    let now = now();
    let slots = slots_of(key);
    for (slot, holder, term) in &live {
        vacate(key, *slot, holder, *term, now, true, slots);
    }
    live.len()
}

/// Contract 11 for a tenure of a key of many slots.
pub fn proclaim(key: &str, id: &str, value: Option<&str>) -> bool {
    with_own_live(key, id, None, |slot, term, now| {
        plans::run(
            queries::SET_SLOT_VALUE,
            &[key.into(), slot.into(), value_arg(value)],
            |_| (),
        );
        failover::commit_durably();
        Event::Proclaimed {
            key,
            holder: id,
            term,
            at: now,
            value,
        }
        .send_for(slots_of(key));
    })
    .is_some()
}

/// Contract 3.4 for a tenure of a key of many slots: the caller's latest
/// tenure, share-locked when it is live, owned and of `expected_term`.
pub fn assert_own(key: &str, id: &str, expected_term: Option<i64>) -> Option<Own> {
    let seen = read_own(key, id)?;
    let fits = |o: &Own, now: i64| o.is_led(expected_term, now);
    if !fits(&seen, now()) {
        return Some(seen);
    }
    let args = [key.into(), seen.slot.into(), caller().into()];
    plans::run(queries::SHARE_LOCK_SLOT, &args, |t| {
        let row = t.into_iter().next()?;
        let holder = row.get::<String>(1).expect("holder");
        let own = Own {
            slot: seen.slot,
            term: row.get::<i64>(2).expect("term").expect("term is NOT NULL"),
            expires_at: micros(row.get::<TimestampWithTimeZone>(3).expect("expires_at"))
                .filter(|_| holder.as_deref() == Some(id)),
            owned: row.get::<bool>(4).expect("owned").unwrap_or(false),
            session: seen.session,
        };
        Some(own)
    })
}

/// le_holders for a key of many slots: (holder, term, expires_at, value)
/// of each live tenure, by slot.
pub fn holders(key: &str) -> Vec<(String, i64, i64, Option<String>)> {
    if !schema_version::has_slots() {
        return Vec::new();
    }
    plans::run(queries::HOLDERS, &[key.into(), ts(now()).into()], |t| {
        t.into_iter()
            .filter_map(|row| {
                Some((
                    row.get::<String>(1).expect("holder")?,
                    row.get::<i64>(2).expect("term")?,
                    micros(row.get::<TimestampWithTimeZone>(3).expect("expires_at"))?,
                    row.get::<crate::base::value::JsonbText>(4)
                        .expect("value")
                        .map(|v| v.0),
                ))
            })
            .collect()
    })
}

/// Contract 16 over tenures of keys of many slots: renewed, and the
/// earliest new expiry.
pub fn renew_all(id: &str, now: i64) -> (i64, Option<i64>) {
    if !schema_version::has_slots() {
        return (0, None);
    }
    let args = [id.into(), ts(now).into(), caller().into()];
    plans::run(queries::RENEW_ALL_SLOTS, &args, |t| {
        let row = t.first();
        (
            row.get::<i64>(1).expect("count").unwrap_or(0),
            micros(row.get::<TimestampWithTimeZone>(2).expect("min")),
        )
    })
}

/// Contract 16 over tenures of keys of many slots: releases and announces
/// each; how many.
pub fn release_all(id: &str) -> usize {
    if !schema_version::has_slots() {
        return 0;
    }
    let locked: Vec<(String, i32)> = plans::run(
        queries::LOCK_ALL_OWN_SLOTS,
        &[id.into(), caller().into()],
        |t| {
            t.into_iter()
                .map(|row| {
                    (
                        row.get::<String>(1).expect("key").expect("key is NOT NULL"),
                        row.get::<i32>(2).expect("slot").expect("slot is NOT NULL"),
                    )
                })
                .collect()
        },
    );
    if locked.is_empty() {
        return 0;
    }
    let now = now();
    let (keys, slots): (Vec<String>, Vec<i32>) = locked.into_iter().unzip();
    let released: Vec<(String, i64, i32)> = plans::run(
        queries::VACATE_LIVE_SLOTS,
        &[keys.into(), slots.into(), ts(now).into()],
        |t| {
            t.into_iter()
                .map(|row| {
                    (
                        row.get::<String>(1).expect("key").expect("key is NOT NULL"),
                        row.get::<i64>(2).expect("term").expect("term is NOT NULL"),
                        row.get::<i32>(3).expect("slots").unwrap_or(1),
                    )
                })
                .collect()
        },
    );
    for (key, term, slots) in &released {
        tenure::released(key, id, *term, now, false, *slots);
    }
    released.len()
}
