//! Lease state transitions (contract sections 2 and 3).
//!
//! Every decision uses the server clock (`GetCurrentTimestamp`, the value
//! behind `clock_timestamp()`), read once per call. Takeovers and releases
//! read it after taking the row lock, so writes to a row are ordered the
//! same way by lock and by clock; a renewal, one statement, reads it just
//! before (harmless: nobody else can change a row its holder has locked, and
//! a renewal can only be backdated by that instant). Timestamps are
//! `TimestampTz` microseconds.

use crate::call;
use crate::candidates;
use crate::clock::{micros, now, ts};
use crate::databases::{self, Counter};
use crate::failover;
use crate::input::Ttl;
use crate::notify::Event;
use crate::plans;
use crate::queries;
use crate::schema_version;
use crate::session_leases;
use crate::sessions;
use crate::slots::{self, Outcome};
use crate::tenure::{self, SessionClaim};
use crate::value::JsonbText;
use crate::waiters;
use crate::worker_wakeup;
use leaderlock_protocol::acquire::{Ask, Facts, Row};
use leaderlock_protocol::{acquisition, Acquisition};
use pgrx::datum::DatumWithOid;
use pgrx::prelude::*;
use pgrx::spi::SpiTupleTable;
use pgrx::Uuid;

/// One lease row: holder, term, expires_at (a session's, for a tenure
/// held under one: contract 21), whether the caller may act as its owner
/// (contract 13), how many slots the key admits (17; 1 where the statement
/// does not say), its session and its lock-delay (21; None where it does
/// not say).
struct Lease {
    holder: Option<String>,
    term: i64,
    expires_at: Option<i64>,
    owned: bool,
    slots: i32,
    session: Option<Uuid>,
    delayed_until: Option<i64>,
}

impl Lease {
    fn is_live(&self, now: i64) -> bool {
        leaderlock_protocol::is_live(self.holder.is_some(), self.expires_at, now)
    }

    /// Contract 3.4: `id` leads in it (in `term`, when named), and the
    /// caller may act as its owner.
    fn is_led_by(&self, id: &str, term: Option<i64>, now: i64) -> bool {
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
    fn row(&self) -> Row<&str, Uuid> {
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

/// What a look at a key knows besides its row, read only when the decision
/// asks (a renewal through le_try_acquire asks for none of it).
struct LookFacts<'a> {
    key: &'a str,
    priority: i32,
    locked: bool,
    /// A waiting le_acquire (a release may have handed it the lease).
    waiting: bool,
}

impl Facts for LookFacts<'_> {
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

/// What `claim` asks of the decision core.
fn ask<'a>(id: &'a &'a str, claim: Claim<'_>) -> Ask<'a, &'a str, Uuid> {
    Ask {
        id,
        slots: claim.slots,
        session: claim.session.map(|s| s.session),
        value: claim.value.is_some(),
    }
}

fn first_lease(table: SpiTupleTable<'_>) -> Option<Lease> {
    let row = table.into_iter().next()?;
    Some(Lease {
        holder: row.get::<String>(1).expect("holder"),
        term: row.get::<i64>(2).expect("term").expect("term is NOT NULL"),
        expires_at: micros(row.get::<TimestampWithTimeZone>(3).expect("expires_at")),
        owned: row.get::<bool>(4).expect("owned").unwrap_or(false),
        slots: row.get::<i32>(5).ok().flatten().unwrap_or(1),
        session: row.get::<Uuid>(6).ok().flatten(),
        delayed_until: micros(row.get::<TimestampWithTimeZone>(7).ok().flatten()),
    })
}

/// The acting role (contract 13): current_user at the call (`call.rs`).
fn caller() -> pg_sys::Oid {
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
}

/// Contract 3.1.
pub fn try_acquire(key: &str, id: &str, ttl: Ttl, claim: Claim<'_>) -> bool {
    counted(
        attempt(key, id, ttl, claim, None) == Attempt::Acquired,
        Counter::Acquired,
    )
}

/// Contract 21: le_try_acquire_in (`wait` None) and le_acquire_in: acquires
/// `key` for the id of the caller's live `session`, the tenure living as
/// long as the session. False at once when the session is unknown, another
/// role's, or not live (or ends while le_acquire_in waits).
pub fn acquire_in(session: Uuid, key: &str, wait: Option<i64>, claim: Claim<'_>) -> bool {
    let Some((id, ttl)) = session_leases::id_of(session) else {
        return counted(false, Counter::Acquired);
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

/// Counts a call's outcome (contract 14): `success` when it succeeded,
/// else a refusal. Returns `succeeded`.
fn counted(succeeded: bool, success: Counter) -> bool {
    databases::count(if succeeded { success } else { Counter::Refused });
    succeeded
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
pub fn acquire(key: &str, id: &str, ttl: Ttl, wait: i64, claim: Claim<'_>) -> bool {
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
    let acquired = std::cell::Cell::new(false);
    PgTryBuilder::new(std::panic::AssertUnwindSafe(|| {
        acquired.set(wait_for_lease(key, id, ttl, deadline, claim));
    }))
    .finally(|| {
        candidates::leave(acquired.get());
        if ranked && !acquired.get() {
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
    acquired.get()
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
fn wait_for_lease(key: &str, id: &str, ttl: Ttl, deadline: i64, claim: Claim<'_>) -> bool {
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
            Attempt::Acquired => return counted(true, Counter::Acquired),
            Attempt::Refused => return counted(false, Counter::Acquired),
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
            return counted(false, Counter::Acquired);
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
    let mut facts = LookFacts {
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
    // Lock it only if we may take or extend it (SKIP LOCKED: never wait),
    // and write under that lock.
    plans::under_lock(
        || {
            plans::run(
                schema_version::lock_acquirable(),
                &[key.into(), id.into(), caller().into()],
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
    let mut facts = LookFacts {
        key,
        priority: claim.priority,
        locked: true,
        waiting: false,
    };
    let term = match acquisition(Some(&lease.row()), &ask(&id, claim), &mut facts, now) {
        Acquisition::Held => lease.term,
        Acquisition::Rebind => rebind(key, now, ttl, claim),
        Acquisition::Extend => extend(key, id, now, Some(ttl), None)?,
        Acquisition::Start { .. } => {
            let (stored, expires_at) = tenure::ends(now, ttl, claim.session);
            let term = start_term(&tenure_args(key, id, now, stored, ttl, claim, caller()));
            let previous = lease.holder.as_deref();
            tenure::started(key, id, term, now, expires_at, previous, claim.value, 1);
            return Some(Attempt::Acquired);
        }
        _ => return None,
    };
    proclaim_extended(key, id, term, now, claim.value);
    Some(Attempt::Acquired)
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

/// The session binding (contract 10) a claim asks for: this backend's pid
/// and start, or NULLs.
fn binding(claim: Claim<'_>) -> (DatumWithOid<'static>, DatumWithOid<'static>) {
    if claim.session_bound {
        let s = sessions::this_session();
        (s.pid.into(), ts(s.started).into())
    } else {
        (
            DatumWithOid::null::<i32>(),
            DatumWithOid::null::<TimestampWithTimeZone>(),
        )
    }
}

/// Starts a tenure on the locked row (`queries::START_TERM`); its term.
fn start_term(args: &[DatumWithOid<'_>; 11]) -> i64 {
    plans::run(schema_version::start_term(), args, |t| {
        t.first()
            .get_one::<i64>()
            .expect("term")
            .expect("term is NOT NULL")
    })
}

/// The parameters of `queries::INSERT_FIRST_TERM` and `START_TERM`, for a
/// tenure owned by `owner` (contract 13).
fn tenure_args<'a>(
    key: &'a str,
    id: &'a str,
    now: i64,
    expires_at: i64,
    ttl: Ttl,
    claim: Claim<'a>,
    owner: pg_sys::Oid,
) -> [DatumWithOid<'a>; 11] {
    let (pid, started) = binding(claim);
    [
        key.into(),
        id.into(),
        ts(now).into(),
        ts(expires_at).into(),
        ttl.as_interval().into(),
        failover::term_floor().into(),
        claim
            .value
            .map_or_else(DatumWithOid::null::<&str>, Into::into),
        pid,
        started,
        owner.into(),
        SessionClaim::arg(claim.session),
    ]
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

/// Extends the lease `id` holds live at `now` by `ttl` (the stored one when
/// None), same term: one statement that never waits (`queries::RENEW`).
/// Its term, or None when it was not extended.
fn extend(key: &str, id: &str, now: i64, ttl: Option<Ttl>, term: Option<i64>) -> Option<i64> {
    tenure::extend(schema_version::renew(), key, id, now, ttl, term)
}

/// Contract 3.2: with `term`, only the tenure of that term.
pub fn renew(key: &str, id: &str, ttl: Option<Ttl>, term: Option<i64>) -> bool {
    // (a renewal never shortens a lease: it needs no failover step first)
    let now = now();
    let renewed = extend(key, id, now, ttl, term).is_some()
        || slots::extend(key, id, now, ttl, term).is_some()
        || (schema_version::has_slots() && session_leases::renew_key(key, id, ttl, term));
    counted(renewed, Counter::Renewed)
}

/// Contract 16, le_renew_all: extends every lease `id` holds live (and the
/// caller may act on as owner) by its own ttl, in one statement that never
/// waits. Returns how many.
pub fn renew_all(id: &str) -> i64 {
    let now = now();
    let args = [id.into(), ts(now).into(), caller().into()];
    let (renewed, earliest) = plans::run(schema_version::renew_all(), &args, |t| {
        let row = t.first();
        (
            row.get::<i64>(1).expect("count").unwrap_or(0),
            micros(row.get::<TimestampWithTimeZone>(2).expect("min")),
        )
    });
    let (tenures, earliest_tenure) = slots::renew_all(id, now);
    let (held, earliest_session) = if schema_version::has_slots() {
        session_leases::renew_all(id, now)
    } else {
        (0, None)
    };
    let renewed = renewed + tenures + held;
    let earliest = [earliest, earliest_tenure, earliest_session]
        .into_iter()
        .flatten()
        .min();
    if let Some(earliest) = earliest {
        worker_wakeup::expiry_written(earliest);
        failover::commit_durably();
    }
    databases::count_n(Counter::Renewed, renewed);
    renewed
}

/// Contract 16, le_release_all: releases every lease `id` holds live (and
/// the caller may act on as owner), skipping rows locked by another
/// transaction, and announces each. Returns how many.
pub fn release_all(id: &str) -> i64 {
    let keys: Vec<String> = plans::run(
        schema_version::lock_all_own(),
        &[id.into(), caller().into()],
        |t| {
            t.into_iter()
                .map(|row| row.get::<String>(1).expect("key").expect("key is NOT NULL"))
                .collect()
        },
    );
    let tenures = slots::release_all(id) as i64;
    if keys.is_empty() {
        return tenures;
    }
    // Read after the locks, as `release` does.
    let now = now();
    let released: Vec<(String, i64)> = plans::run(
        queries::VACATE_LIVE_KEYS,
        &[keys.into(), ts(now).into()],
        |t| {
            t.into_iter()
                .map(|row| {
                    (
                        row.get::<String>(1).expect("key").expect("key is NOT NULL"),
                        row.get::<i64>(2).expect("term").expect("term is NOT NULL"),
                    )
                })
                .collect()
        },
    );
    for (key, term) in &released {
        tenure::released(key, id, *term, now, false, 1);
    }
    released.len() as i64 + tenures
}

/// Locks the lease `id` holds live (in `term`, when given) and runs `write`
/// with its term and the time it was found live (`under_lock`). None when
/// not held live by `id` in that term, or locked by another transaction.
fn with_own_live<T>(
    key: &str,
    id: &str,
    term: Option<i64>,
    write: impl FnOnce(i64, i64) -> T,
) -> Option<T> {
    plans::under_lock(
        || {
            let args = [key.into(), id.into(), caller().into()];
            plans::run(schema_version::lock_own(), &args, |t| {
                let row = t.into_iter().next()?;
                Some((
                    row.get::<i64>(1).expect("term").expect("term is NOT NULL"),
                    micros(row.get::<TimestampWithTimeZone>(2).expect("expires_at"))?,
                ))
            })
        },
        |(held, expires_at)| {
            let now = now();
            let lease = leaderlock_protocol::Lease {
                holder: Some(id),
                term: held,
                expires_at,
            };
            leaderlock_protocol::leads(&lease, &id, term, now).then(|| write(held, now))
        },
    )
}

/// Contract 3.3.
/// Contract 3.3: with `term`, only the tenure of that term.
pub fn release(key: &str, id: &str, term: Option<i64>) -> bool {
    // Asked before `with_own_live`'s subtransaction, inside which every
    // transaction looks like a block.
    let implicit = !unsafe { pg_sys::IsTransactionBlock() };
    with_own_live(key, id, term, |term, now| {
        vacate(key, id, term, now, false);
        if implicit {
            hand_over(key, now);
        }
    })
    .is_some()
        || slots::release(key, id, term)
}

/// Contract 9: a release hands the lease it just vacated to the candidate
/// its key serves first, when that one is grantable (`grantable`), in the
/// releasing transaction: one commit for the handover, not the release's
/// and then the winner's. Only when that transaction is implicit too (it
/// ends with its statement), and once new tenures may start. Should the
/// candidate stop waiting first, the tenure goes to the worker
/// (`handover.rs`).
fn hand_over(key: &str, now: i64) {
    // (The worker's statement for a tenure never taken up is written for
    // the current schema.)
    if !schema_version::has_slots() || !failover::ready_for_new_tenures() {
        return;
    }
    let xid = unsafe { pg_sys::GetTopTransactionIdIfAny() }.into_inner();
    if xid == 0 {
        return;
    }
    let Some(grant) = candidates::claim_grant(key, xid, call::caller(), now) else {
        return;
    };
    // Known to the commit and abort callbacks from here on: should the
    // tenure fail to start, the abort frees the candidate's entry.
    waiters::granted_at_commit(key, grant.clone());
    let ttl = Ttl(grant.asked.ttl_us);
    let (id, expires_at) = (grant.id.text(), leaderlock_protocol::expiry(now, ttl.0));
    let args = tenure_args(
        key,
        &id,
        now,
        expires_at,
        ttl,
        Claim::default(),
        grant.asked.role,
    );
    let term = start_term(&args);
    waiters::grant_started(term);
    tenure::started(key, &id, term, now, expires_at, None, None, 1);
}

/// Vacates a locked, live lease and announces it.
fn vacate(key: &str, holder: &str, term: i64, now: i64, forced: bool) {
    plans::run(
        schema_version::vacate(),
        &[key.into(), ts(now).into()],
        |_| (),
    );
    tenure::released(key, holder, term, now, forced, 1);
}

/// Contract 13, le_force_release: vacates the live lease of `key`, whoever
/// holds it; false when it is vacant, lapsed or unknown. The caller's
/// right to do so is checked by the API.
pub fn force_release(key: &str) -> bool {
    let Some(lease) = plans::run(schema_version::lock_live(), &[key.into()], first_lease) else {
        // No live tenure of one slot: the slots' tenures, and a lock-delay.
        let vacated = slots::force_release(key) > 0;
        return session_leases::lift_delay(key) || vacated;
    };
    let now = now();
    if !lease.is_live(now) {
        return false; // lapsed while we waited for the lock: the worker's
    }
    let holder = lease.holder.as_deref().expect("a live lease has a holder");
    vacate(key, holder, lease.term, now, true);
    true
}

/// Contract 3, le_leader: the live holder, else None.
pub fn leader(key: &str) -> Option<String> {
    plans::run(
        schema_version::live_holder(),
        &[key.into(), ts(now()).into()],
        |t| {
            t.into_iter()
                .next()
                .and_then(|row| row.get::<String>(1).expect("holder"))
        },
    )
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
    /// The lease is owned by a role the caller is not a member of.
    pub foreign_owner: bool,
    /// How many holders the key admits (contract 17).
    pub slots: i32,
}

impl NotLeader {
    pub fn message(&self) -> String {
        let (key, id) = (&self.key, &self.id);
        let state = match (&self.term, &self.holder, self.live) {
            (None, _, _) => "the key has never been acquired".to_string(),
            (Some(term), None, _) if self.slots > 1 => format!(
                "it holds none of the key's {} slots (last term {term})",
                self.slots
            ),
            (Some(term), None, _) => format!("the lease is vacant (term {term})"),
            (Some(term), Some(h), true) if self.foreign_owner && h == id => format!(
                "the lease of \"{h}\" (term {term}) is owned by a role the current role \
                 is not a member of"
            ),
            (Some(term), Some(h), true) => format!("the holder is \"{h}\" (term {term})"),
            (Some(term), Some(h), false) => {
                format!("the lease of \"{h}\" (term {term}) has lapsed")
            }
        };
        match self.expected_term {
            Some(t)
                if self.live
                    && !self.foreign_owner
                    && self.holder.as_deref() == Some(id.as_str()) =>
            {
                format!(
                    "leaderlock: \"{id}\" leads \"{key}\" in term {}, not in term {t}",
                    self.term.unwrap_or_default()
                )
            }
            _ => format!("leaderlock: \"{id}\" is not the leader of \"{key}\": {state}"),
        }
    }
}

/// Contract 3.4: the current term when `id` is the live holder (and the
/// term matches); the share lock stays until the transaction ends.
pub fn assert_leader(key: &str, id: &str, expected_term: Option<i64>) -> Result<i64, NotLeader> {
    // Without a lock first: only the holder itself ever locks its row (a
    // rival's lock would make the holder's renewals fail meanwhile).
    let args = [key.into(), caller().into()];
    let seen = plans::run(schema_version::read_lease(), &args, first_lease);
    if let Some(l) = seen.as_ref().filter(|l| l.slots > 1) {
        return assert_tenure(key, id, expected_term, l.term, l.slots);
    }
    let read_at = now();
    let lease = match seen {
        Some(l) if l.is_led_by(id, expected_term, read_at) => {
            plans::run(schema_version::share_lock_lease(), &args, first_lease)
        }
        other => other,
    };
    let now = now();
    let refuse = |lease: Option<&Lease>| NotLeader {
        key: key.to_string(),
        id: id.to_string(),
        expected_term,
        term: lease.map(|l| l.term),
        holder: lease.and_then(|l| l.holder.clone()),
        live: lease.is_some_and(|l| l.is_live(now)),
        foreign_owner: lease.is_some_and(|l| !l.owned),
        slots: 1,
    };
    match lease {
        Some(l) if l.is_led_by(id, expected_term, now) => Ok(l.term),
        other => Err(refuse(other.as_ref())),
    }
}

/// Contract 3.4 on a key of many slots (17): the caller's own tenure.
/// `key_term`: the key's last term, named when `id` has none; the key
/// admits `slots`.
fn assert_tenure(
    key: &str,
    id: &str,
    expected_term: Option<i64>,
    key_term: i64,
    slots: i32,
) -> Result<i64, NotLeader> {
    let own = slots::assert_own(key, id, expected_term);
    let now = now();
    match own {
        Some(o) if o.is_led(expected_term, now) => Ok(o.term),
        other => Err(NotLeader {
            key: key.to_string(),
            id: id.to_string(),
            expected_term,
            term: Some(other.map_or(key_term, |o| o.term)),
            holder: other.map(|_| id.to_string()),
            live: other.is_some_and(|o| o.is_live(now)),
            foreign_owner: other.is_some_and(|o| !o.owned),
            slots,
        }),
    }
}

/// Contract 11: sets the value of the lease `id` holds live.
pub fn proclaim(key: &str, id: &str, value: Option<&str>) -> bool {
    let set = |term| {
        let value_arg = value.map_or_else(DatumWithOid::null::<&str>, Into::into);
        plans::run(queries::SET_VALUE, &[key.into(), value_arg], |_| ());
        failover::commit_durably();
        Event::Proclaimed {
            key,
            holder: id,
            term,
            at: now(),
            value,
        }
        .send();
    };
    with_own_live(key, id, None, |term, _| set(term)).is_some() || slots::proclaim(key, id, value)
}

/// Contract 11, le_lease: the lease as it stands now. Holder, remaining and
/// value only while it is live; term and expires_at as stored; all None for
/// an unknown key.
#[derive(Debug, Default)]
pub struct LeaseNow {
    pub holder: Option<String>,
    pub term: Option<i64>,
    pub expires_at: Option<i64>,
    /// Microseconds left.
    pub remaining: Option<i64>,
    pub value: Option<String>,
}

pub fn lease_now(key: &str) -> LeaseNow {
    plans::run(schema_version::lease_row(), &[key.into()], |t| {
        let Some(row) = t.into_iter().next() else {
            return LeaseNow::default();
        };
        let holder = row.get::<String>(1).expect("holder");
        let expires_at = micros(row.get::<TimestampWithTimeZone>(3).expect("expires_at"));
        let now = now();
        let remaining = expires_at
            .filter(|_| leaderlock_protocol::is_live(holder.is_some(), expires_at, now))
            .map(|e| e - now);
        let live = remaining.is_some();
        LeaseNow {
            holder: holder.filter(|_| live),
            term: row.get::<i64>(2).expect("term"),
            expires_at,
            remaining,
            value: row
                .get::<JsonbText>(4)
                .expect("value")
                .filter(|_| live)
                .map(|v| v.0),
        }
    })
}

/// Contract 17, le_holders: the live holders of `key`, one `LeaseNow` each
/// (one at most for a key of one slot).
pub fn holders(key: &str) -> Vec<LeaseNow> {
    if slots::slots_of(key) > 1 {
        let now = now();
        return slots::holders(key)
            .into_iter()
            .map(|(holder, term, expires_at, value)| LeaseNow {
                holder: Some(holder),
                term: Some(term),
                expires_at: Some(expires_at),
                remaining: Some((expires_at - now).max(0)),
                value,
            })
            .collect();
    }
    let lease = lease_now(key);
    if lease.holder.is_some() {
        vec![lease]
    } else {
        Vec::new()
    }
}
