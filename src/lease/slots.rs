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
//! delays a holder. Only `take.rs` calls in here; the outcome types are
//! this module's own.
//!
//! A tenure acquired under a session (contract 21) is stored as a key of one
//! slot is: expires_at infinity, its session's row has the expiry, only the
//! session's end vacates it (`session_leases`), and a slot vacated with a
//! lock-delay (`delayed_until`) is taken, not free, until the delay ends.

use crate::announce::notify::Event;
use crate::base::clock::{micros, now, ts};
use crate::base::ttl::Ttl;
use crate::lease::expiry;
use crate::lease::failover;
use crate::lease::row::KeyFacts;
use crate::lease::session_leases;
use crate::lease::tenure::{self, SessionClaim};
use crate::store::call;
use crate::store::plans;
use crate::store::queries;
use crate::store::schema_version;
use leaderlock_protocol::acquire::Ask;
use leaderlock_protocol::keep::{Letting, Release};
use leaderlock_protocol::slots::{
    self as rules, slot_acquisition, slot_take, SlotAcquisition, SlotTake,
};
use pgrx::datum::DatumWithOid;
use pgrx::prelude::*;
use pgrx::Uuid;

/// The result of one attempt at a slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Acquired,
    /// Every slot is live until at least this time.
    HeldUntil(i64),
    /// The key's row is locked by another transaction: look again soon.
    Busy,
    /// The key, with no live holder, admits one holder from now on (its
    /// row is locked): the caller takes it as a key of one slot.
    OneSlot,
    /// The key has live holders and admits this many slots, not the number
    /// asked (contract 17): the SQL face refuses the call (22023).
    SlotsDiffer(i32),
}

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
    if !schema_version::has_slots() {
        return None;
    }
    plans::run(queries::KEY_SLOTS, &[key.into()], |t| {
        t.into_iter()
            .next()
            .and_then(|row| row.get::<i32>(1).expect("slots"))
    })
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

/// One look at a key acquired with `slots` > 1, or a key that admits more
/// than one (`has`: its slots, None for an unknown key); `holder_live`: its
/// row in `leaderlock` has a live holder (a key of one slot, held). Takes a
/// free slot, extends the caller's own tenure, or says why not
/// (`SlotsDiffer` when the key has live holders and admits another number
/// of slots).
#[allow(clippy::too_many_arguments)]
pub fn attempt(
    key: &str,
    id: &str,
    ttl: Ttl,
    slots: i32,
    has: Option<i32>,
    holder_live: bool,
    value: Option<&str>,
    priority: i32,
    deadline: Option<i64>,
    under: Option<SessionClaim>,
) -> Outcome {
    let mut facts = KeyFacts {
        key,
        priority,
        locked: false,
        waiting: false,
    };
    let ask = Ask {
        id: &id,
        slots,
        session: under.map(|u| u.session),
        value: value.is_some(),
    };
    let now = now();
    let read = match has {
        Some(has) if has > 1 && !holder_live => summary(key, id, has, now),
        _ => rules::Read {
            has,
            holder_live,
            own: None,
            taken: 0,
            earliest: None,
        },
    };
    match slot_acquisition(&read, &ask, &mut facts) {
        SlotAcquisition::SlotsDiffer(has) => Outcome::SlotsDiffer(has),
        SlotAcquisition::Wait(until) => Outcome::HeldUntil(until),
        SlotAcquisition::NotNow => Outcome::Busy,
        SlotAcquisition::FirstTenure => {
            match first_tenure(key, id, ttl, slots, value, deadline, under) {
                // A concurrent first acquisition of the key won: a free slot
                // may be left in it.
                Outcome::Busy => match key_slots(key) {
                    Some(has) if has > 1 => attempt(
                        key,
                        id,
                        ttl,
                        slots,
                        Some(has),
                        false,
                        value,
                        priority,
                        deadline,
                        under,
                    ),
                    _ => Outcome::Busy,
                },
                outcome => outcome,
            }
        }
        // Held under this very session, which is what lives: nothing to
        // extend; a value is set under the tenure's lock, never waiting.
        SlotAcquisition::Held => done(
            value.is_none()
                || with_own_live(key, id, None, |slot, term, now| {
                    set_value(key, id, slot, term, now, value, slots)
                })
                .is_some(),
        ),
        // Into another session or out of one: moved, same slot and term.
        SlotAcquisition::Rebind => done(rebind(key, id, ttl, under, value, slots).is_some()),
        SlotAcquisition::Extend => match extend(key, id, now, Some(ttl), None) {
            Some(term) => {
                let slot = read.own.map_or(0, |o| o.slot);
                set_value(key, id, slot, term, now, value, slots);
                Outcome::Acquired
            }
            None => Outcome::Busy,
        },
        // No live holder and one slot asked: the key becomes one of one
        // slot, or a free slot is taken, under the key's row lock (`take`),
        // in a subtransaction kept only if it did, so that a candidate that
        // finds every slot taken keeps no lock.
        SlotAcquisition::OneSlot | SlotAcquisition::Take => plans::in_subtransaction(
            || take(key, id, ttl, &ask, &mut facts, value, under),
            |o| matches!(o, Outcome::Acquired | Outcome::OneSlot),
        ),
    }
}

fn done(acquired: bool) -> Outcome {
    if acquired {
        Outcome::Acquired
    } else {
        Outcome::Busy
    }
}

/// A key of `has` slots as an acquisition by `id` at `now` reads it, in
/// one statement (`queries::SLOT_SUMMARY`): the slots taken, and the id's
/// live tenure. The lapsed sessions that still hold a slot of it (contract
/// 21) end first, each with all its keys, as a takeover vacates a lapsed
/// tenure (until then their slots are not free), and the key is read
/// again. (In le_acquire's look, only if the look acquires: it rolls back
/// otherwise.)
fn summary(key: &str, id: &str, has: i32, now: i64) -> rules::Read<Uuid> {
    let (read, lapsed) = summary_at(key, id, has, now);
    if lapsed.is_empty() {
        return read;
    }
    for session in lapsed {
        session_leases::end_lapsed(session, now);
    }
    summary_at(key, id, has, crate::base::clock::now()).0
}

/// `summary`'s one statement at `now`, and the lapsed sessions it found.
fn summary_at(key: &str, id: &str, has: i32, now: i64) -> (rules::Read<Uuid>, Vec<Uuid>) {
    let args = [key.into(), ts(now).into(), id.into(), caller().into()];
    plans::run(queries::SLOT_SUMMARY, &args, |t| {
        let row = t.first();
        let own = row.get::<i32>(3).expect("slot").map(|slot| rules::Own {
            slot,
            expires_at: micros(row.get::<TimestampWithTimeZone>(5).expect("expires_at")),
            owned: row.get::<bool>(6).expect("owned").unwrap_or(false),
            session: row.get::<Uuid>(7).expect("session"),
        });
        let read = rules::Read {
            has: Some(has),
            holder_live: false,
            own: own.filter(|o| leaderlock_protocol::is_live(true, o.expires_at, now)),
            taken: row.get::<i64>(1).expect("count").unwrap_or(0),
            earliest: micros(row.get::<TimestampWithTimeZone>(2).expect("min")),
        };
        let lapsed = row
            .get::<Vec<Option<Uuid>>>(8)
            .expect("sessions")
            .unwrap_or_default();
        (read, lapsed.into_iter().flatten().collect())
    })
}

/// Moves the caller's live tenure of `key`, its row locked here (never
/// waiting), into the session it acquires under or out of sessions (then
/// by `ttl`), with `value` when given (the key admits `slots`). Its term;
/// None when the row is locked or it lapsed.
fn rebind(
    key: &str,
    id: &str,
    ttl: Ttl,
    under: Option<SessionClaim>,
    value: Option<&str>,
    slots: i32,
) -> Option<i64> {
    with_own_live(key, id, None, |slot, _, now| {
        let (stored, _) = tenure::ends(now, ttl, under);
        let args = [
            key.into(),
            SessionClaim::arg(under),
            ts(stored).into(),
            ttl.as_interval().into(),
            ts(now).into(),
            slot.into(),
        ];
        let term = tenure::rebind(queries::REBIND_SLOT, &args, stored);
        set_value(key, id, slot, term, now, value, slots);
        term
    })
}

/// Under the key's row lock (`queries::LOCK_KEY_HEAD`): one read of its
/// slots (`queries::SLOT_TAKE`, its first free slot locked), what the
/// decision core makes of it (`leaderlock_protocol::slots::slot_take`),
/// and one write (`queries::TAKE_SLOT`: the key's next term and the
/// tenure), or the key made one of one slot (`Outcome::OneSlot`, which the
/// caller takes as such). The read runs after the lock: a tenure starts
/// only under it, so none started since the read, and no slot the read
/// locks holds a live tenure.
fn take(
    key: &str,
    id: &str,
    ttl: Ttl,
    ask: &Ask<'_, &str, Uuid>,
    facts: &mut KeyFacts<'_>,
    value: Option<&str>,
    under: Option<SessionClaim>,
) -> Outcome {
    let head = plans::run(queries::LOCK_KEY_HEAD, &[key.into()], |t| {
        t.into_iter().next().map(|row| {
            (
                row.get::<String>(1).expect("holder"),
                row.get::<i32>(2).expect("slots").unwrap_or(1),
                row.get::<i64>(3).expect("term").expect("term is NOT NULL"),
            )
        })
    });
    // Locked by another candidate or writer, or (a key of one slot) taken
    // live meanwhile: look again.
    let Some((lapsed_head_holder, has, term)) = head else {
        return Outcome::Busy;
    };
    // (no free slot to look for when one slot is asked: the key becomes
    // one of one slot)
    let free_up_to = if ask.slots > 1 { ask.slots } else { 0 };
    let args = [key.into(), id.into(), free_up_to.into()];
    let (locked, previous) = plans::run(queries::SLOT_TAKE, &args, |t| {
        let row = t.first();
        let locked = rules::Locked {
            has,
            term,
            own_until: micros(row.get::<TimestampWithTimeZone>(1).expect("own")),
            free: row.get::<i32>(2).expect("free slot"),
            new: row.get::<i32>(4).expect("new slot"),
            taken: row.get::<i64>(5).expect("taken").unwrap_or(0),
            earliest: micros(row.get::<TimestampWithTimeZone>(6).expect("earliest")),
        };
        (locked, row.get::<String>(3).expect("slot's holder"))
    });
    // (a lapsed holder: of the free slot, else of the row, a key of one
    // slot changing its number)
    let previous = previous.or(lapsed_head_holder);
    let now = now();
    let (slot, resize) = match slot_take(&locked, ask, facts) {
        SlotTake::SlotsDiffer(has) => return Outcome::SlotsDiffer(has),
        SlotTake::Wait(until) => return Outcome::HeldUntil(until),
        SlotTake::NotNow => return Outcome::Busy,
        SlotTake::OneSlot => {
            // Its lapsed tenures end first (a locked one makes it wait).
            if expiry::end_stale_tenures(key, 1, now).is_none() {
                return Outcome::Busy;
            }
            plans::run(queries::SET_ONE_SLOT, &[key.into()], |_| ());
            return Outcome::OneSlot;
        }
        SlotTake::Start { slot, resize, .. } => (slot, resize),
    };
    // Changing the key's slots: its lapsed tenures beyond the new number
    // end first.
    if resize && expiry::end_stale_tenures(key, ask.slots, now).is_none() {
        return Outcome::Busy;
    }
    let (stored, expires_at) = tenure::ends(now, ttl, under);
    let args = [
        key.into(),
        slot.into(),
        id.into(),
        failover::term_floor().into(),
        ts(now).into(),
        ts(stored).into(),
        ttl.as_interval().into(),
        value_arg(value),
        caller().into(),
        SessionClaim::arg(under),
        ask.slots.into(),
    ];
    let term = plans::run(queries::TAKE_SLOT, &args, |t| {
        t.first()
            .get_one::<i64>()
            .expect("term")
            .expect("term is NOT NULL")
    });
    tenure::started(
        key,
        id,
        term,
        now,
        expires_at,
        previous.as_deref(),
        value,
        ask.slots,
    );
    Outcome::Acquired
}

/// A brand-new key of `slots` slots: its row, and its first tenure in slot 1.
fn first_tenure(
    key: &str,
    id: &str,
    ttl: Ttl,
    slots: i32,
    value: Option<&str>,
    deadline: Option<i64>,
    under: Option<SessionClaim>,
) -> Outcome {
    if !failover::ready_for_new_tenures() {
        return Outcome::Busy;
    }
    let now = now();
    let args = [
        key.into(),
        failover::term_floor().into(),
        ts(now).into(),
        slots.into(),
    ];
    let Some(term) = tenure::insert_first(queries::INSERT_KEY_HEAD, &args, now, deadline) else {
        return Outcome::Busy;
    };
    start(key, 1, id, term, now, ttl, value, slots, None, under);
    Outcome::Acquired
}

/// Writes a new tenure in `slot` and does what follows one: the worker's
/// cue, wake-ups at rollback, durability, the announcement.
#[allow(clippy::too_many_arguments)]
fn start(
    key: &str,
    slot: i32,
    id: &str,
    term: i64,
    now: i64,
    ttl: Ttl,
    value: Option<&str>,
    slots: i32,
    previous_holder: Option<&str>,
    under: Option<SessionClaim>,
) {
    let (stored, expires_at) = tenure::ends(now, ttl, under);
    let args = [
        key.into(),
        slot.into(),
        id.into(),
        term.into(),
        ts(now).into(),
        ts(stored).into(),
        ttl.as_interval().into(),
        value_arg(value),
        caller().into(),
        SessionClaim::arg(under),
    ];
    plans::run(queries::START_SLOT, &args, |_| ());
    tenure::started(
        key,
        id,
        term,
        now,
        expires_at,
        previous_holder,
        value,
        slots,
    );
}

/// Contract 3.2 for a tenure of a key of many slots: extends the one `id`
/// holds live at `now`. Its term, or None.
pub fn extend(key: &str, id: &str, now: i64, ttl: Option<Ttl>, term: Option<i64>) -> Option<i64> {
    if !schema_version::has_slots() {
        return None;
    }
    tenure::extend(queries::RENEW_SLOT, key, id, now, ttl, term)
}

/// The tenure `id` holds live on `key`, owned by a role the caller is a
/// member of, locked (`LOCK_OWN_SLOT`, never waiting): its slot, term and
/// expiry. None when there is none, or another transaction holds it.
fn lock_own(key: &str, id: &str) -> Option<(i32, i64, i64)> {
    let args = [key.into(), id.into(), caller().into()];
    plans::run(queries::LOCK_OWN_SLOT, &args, |t| {
        let row = t.into_iter().next()?;
        Some((
            row.get::<i32>(1).expect("slot").expect("slot is NOT NULL"),
            row.get::<i64>(2).expect("term").expect("term is NOT NULL"),
            micros(row.get::<TimestampWithTimeZone>(3).expect("expires_at"))?,
        ))
    })
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

/// The holder extended its tenure with a value (if any): set it and
/// announce it.
fn set_value(key: &str, id: &str, slot: i32, term: i64, now: i64, value: Option<&str>, slots: i32) {
    let Some(value) = value else {
        return;
    };
    plans::run(
        queries::SET_SLOT_VALUE,
        &[key.into(), slot.into(), value.into()],
        |_| (),
    );
    Event::Proclaimed {
        key,
        holder: id,
        term,
        at: now,
        value: Some(value),
    }
    .send_for(slots);
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
