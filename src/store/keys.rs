//! The statements an acquisition runs (`lease/look.rs`), as data: each
//! `Statement` names one statement of `queries` (its schema's version where
//! older schemas differ) with its parameters, `run` runs it and reads its
//! rows into a `Reply`. One gate for every statement of a look: the look
//! decides on replies, nothing here decides.

use crate::base::clock::{micros, ts};
use crate::base::settings;
use crate::base::ttl::Ttl;
use crate::store::plans;
use crate::store::queries;
use crate::store::schema_version;
use leaderlock_protocol::slots::{Locked, Own, Read};
use pgrx::datum::DatumWithOid;
use pgrx::prelude::*;
use pgrx::spi::{SpiHeapTupleData, SpiTupleTable};
use pgrx::Uuid;

/// One lease row: holder, term, expires_at (a session's, for a tenure
/// held under one: contract 21), whether the caller may act as its owner
/// (contract 13), how many slots the key admits (17; 1 where the statement
/// does not say), its session and its lock-delay (21; None where it does
/// not say).
#[derive(Clone)]
pub struct Lease {
    pub holder: Option<String>,
    pub term: i64,
    pub expires_at: Option<i64>,
    pub owned: bool,
    pub slots: i32,
    pub session: Option<Uuid>,
    pub delayed_until: Option<i64>,
}

/// The lease row a statement returned, if any (`Lease`'s columns).
pub fn first_lease(table: SpiTupleTable<'_>) -> Option<Lease> {
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

/// A held row locked to be vacated: key, holder, term, expires_at (the
/// first four columns of the statements that lock them).
pub struct Held {
    pub key: String,
    pub holder: String,
    pub term: i64,
    pub expires_at: i64,
}

impl Held {
    pub fn of(row: &SpiHeapTupleData<'_>) -> Held {
        Held {
            key: row.get::<String>(1).expect("key").expect("key is NOT NULL"),
            holder: row
                .get::<String>(2)
                .expect("holder")
                .expect("only held rows are locked"),
            term: row.get::<i64>(3).expect("term").expect("term is NOT NULL"),
            expires_at: micros(row.get::<TimestampWithTimeZone>(4).expect("expires_at"))
                .expect("held rows have one"),
        }
    }
}

/// A new tenure's parameters (`INSERT_FIRST_TERM`, `START_TERM`,
/// `TAKE_AS_READ`, and the slot tenures'): stored to expire at `stored`
/// (infinity under a session, whose row has the expiry), bound to the
/// backend `binding` (pid, start) when session-bound, owned by `owner`.
#[derive(Clone, Copy)]
pub struct Tenure<'a> {
    pub key: &'a str,
    pub id: &'a str,
    pub now: i64,
    pub stored: i64,
    pub ttl: Ttl,
    pub floor: i64,
    pub value: Option<&'a str>,
    pub binding: Option<(i32, i64)>,
    pub owner: pg_sys::Oid,
    pub session: Option<Uuid>,
}

impl<'a> Tenure<'a> {
    /// `INSERT_FIRST_TERM`'s and `START_TERM`'s eleven parameters.
    pub fn args(&self) -> [DatumWithOid<'a>; 11] {
        let (pid, started) = binding_args(self.binding);
        [
            self.key.into(),
            self.id.into(),
            ts(self.now).into(),
            ts(self.stored).into(),
            self.ttl.as_interval().into(),
            self.floor.into(),
            text_or_null(self.value),
            pid,
            started,
            self.owner.into(),
            uuid_or_null(self.session),
        ]
    }

    /// `START_SLOT`'s ten parameters, and the first ten of `TAKE_SLOT`'s:
    /// the tenure in `slot`, `term` its term (`START_SLOT`) or the floor
    /// of the key's next one (`TAKE_SLOT`).
    fn slot_args(&self, slot: i32, term: i64) -> Vec<DatumWithOid<'a>> {
        vec![
            self.key.into(),
            slot.into(),
            self.id.into(),
            term.into(),
            ts(self.now).into(),
            ts(self.stored).into(),
            self.ttl.as_interval().into(),
            text_or_null(self.value),
            self.owner.into(),
            uuid_or_null(self.session),
        ]
    }
}

/// The session binding (contract 10) as parameters: pid and start, or
/// NULLs.
pub fn binding_args(binding: Option<(i32, i64)>) -> (DatumWithOid<'static>, DatumWithOid<'static>) {
    match binding {
        Some((pid, started)) => (pid.into(), ts(started).into()),
        None => (
            DatumWithOid::null::<i32>(),
            DatumWithOid::null::<TimestampWithTimeZone>(),
        ),
    }
}

fn text_or_null(text: Option<&str>) -> DatumWithOid<'_> {
    text.map_or_else(DatumWithOid::null::<&str>, Into::into)
}

fn uuid_or_null(uuid: Option<Uuid>) -> DatumWithOid<'static> {
    uuid.map_or_else(DatumWithOid::null::<Uuid>, Into::into)
}

fn ts_or_null(at: Option<i64>) -> DatumWithOid<'static> {
    at.map_or_else(DatumWithOid::null::<TimestampWithTimeZone>, |t| {
        ts(t).into()
    })
}

/// One statement of an acquisition, with its parameters.
pub enum Statement<'a> {
    /// The key's row, as anyone may read it (`READ_LEASE`).
    Read { key: &'a str, owner: pg_sys::Oid },
    /// A brand-new key's row and first tenure (`INSERT_FIRST_TERM`),
    /// waiting for a concurrent inserter until `deadline` (`insert_first`).
    InsertFirst {
        tenure: Tenure<'a>,
        deadline: Option<i64>,
    },
    /// A takeover of the row as it was read (`TAKE_AS_READ`): the term,
    /// holder, session and lock-delay of `seen` unchanged.
    TakeAsRead { tenure: Tenure<'a>, seen: Lease },
    /// The row, locked only if `id` may take or extend it
    /// (`LOCK_ACQUIRABLE`, never waiting).
    Lock {
        key: &'a str,
        id: &'a str,
        owner: pg_sys::Oid,
        now: i64,
    },
    /// A new tenure on the locked row (`START_TERM`).
    StartTerm { tenure: Tenure<'a> },
    /// `id`'s live tenure (in `term` when named) extended by `ttl` (the
    /// stored one when None; `RENEW`; `RENEW_SLOT` for a key of many
    /// slots), same term, never waiting.
    Renew {
        key: &'a str,
        id: &'a str,
        now: i64,
        ttl: Option<Ttl>,
        owner: pg_sys::Oid,
        term: Option<i64>,
        many: bool,
    },
    /// The holder's locked live tenure moved into `session` or out of
    /// sessions (`REBIND`; `REBIND_SLOT` for a slot's), stored to expire
    /// at `stored`.
    Rebind {
        key: &'a str,
        session: Option<Uuid>,
        stored: i64,
        ttl: Ttl,
        now: i64,
        binding: Option<(i32, i64)>,
        slot: Option<i32>,
    },
    /// The holder's value (`SET_VALUE`; `SET_SLOT_VALUE` for a slot's).
    SetValue {
        key: &'a str,
        slot: Option<i32>,
        value: &'a str,
    },
    /// How many slots the key admits (`KEY_SLOTS`).
    KeySlots { key: &'a str },
    /// A key of `has` slots as `id` reads it at `now` (`SLOT_SUMMARY`).
    Summary {
        key: &'a str,
        id: &'a str,
        owner: pg_sys::Oid,
        has: i32,
        now: i64,
    },
    /// A brand-new key of `slots` slots: its head row (`INSERT_KEY_HEAD`),
    /// waiting as `InsertFirst` does.
    InsertHead {
        key: &'a str,
        floor: i64,
        now: i64,
        slots: i32,
        deadline: Option<i64>,
    },
    /// A tenure in `slot` in `term` (`START_SLOT`).
    StartSlot {
        tenure: Tenure<'a>,
        slot: i32,
        term: i64,
    },
    /// The key's head row, locked never waiting (`LOCK_KEY_HEAD`).
    LockHead { key: &'a str },
    /// Under the head's lock: its slots, the first free one of those up to
    /// `free_up_to` locked (`SLOT_TAKE`), for a head of `has` slots and
    /// last term `term`.
    SlotTake {
        key: &'a str,
        id: &'a str,
        free_up_to: i32,
        has: i32,
        term: i64,
    },
    /// The lapsed tenures of slots above `above` (all: 0), locked
    /// (`LOCK_STALE_TENURES`, skipping locked ones).
    Stale { key: &'a str, above: i32 },
    /// How many there are, locked or not (`STALE_TENURES`).
    StaleCount { key: &'a str, above: i32 },
    /// The key becomes one of one slot (`SET_ONE_SLOT`).
    SetOneSlot { key: &'a str },
    /// The key's next term and a tenure in `slot`, the key now admitting
    /// `slots` (`TAKE_SLOT`).
    TakeSlot {
        tenure: Tenure<'a>,
        slot: i32,
        slots: i32,
    },
    /// `id`'s live tenure of a slot, locked never waiting (`LOCK_OWN_SLOT`).
    LockOwnSlot {
        key: &'a str,
        id: &'a str,
        owner: pg_sys::Oid,
    },
}

/// What a statement returned.
pub enum Reply {
    /// A lease row (`Read`, `Lock`).
    Lease(Option<Lease>),
    /// A term (a tenure written), None when nothing was written.
    Term(Option<i64>),
    /// A tenure extended: its term and expiry.
    Extended(Option<(i64, i64)>),
    /// The key's slots (`KeySlots`).
    Slots(Option<i32>),
    /// A key of many slots as read, and the lapsed sessions holding a slot.
    Summary(Read<Uuid>, Vec<Uuid>),
    /// The locked head: its lapsed holder, slots and term.
    Head(Option<(Option<String>, i32, i64)>),
    /// The key's slots under the head's lock, and the free slot's lapsed
    /// holder.
    Taking(Locked, Option<String>),
    /// The lapsed tenures locked, each with its slot.
    Stale(Vec<(Held, i32)>),
    /// How many rows there are.
    Count(i64),
    /// The caller's live slot locked: slot, term, expiry.
    OwnSlot(Option<(i32, i64, i64)>),
    /// Written, nothing returned.
    Done,
}

/// How a statement runs.
enum How {
    /// As it is.
    Plain,
    /// In a subtransaction rolled back when it wrote nothing: a row written
    /// since the statement's snapshot is locked in its latest version
    /// before the re-check, and would stay locked (`plans::under_lock`).
    Undone,
    /// A first insert, waiting for a concurrent one until `deadline`
    /// (`insert_first`).
    Waiting { now: i64, deadline: Option<i64> },
    /// Not at all: the installed schema has no such table (before 0.5.0),
    /// so nothing is there.
    Nothing(Reply),
}

/// How a statement's rows are read.
enum Rows {
    Lease,
    Term,
    /// A term the statement was given (it returns none).
    Given(i64),
    Extended,
    Slots,
    Summary {
        has: i32,
        now: i64,
    },
    Head,
    Taking {
        has: i32,
        term: i64,
    },
    Stale,
    Count,
    OwnSlot,
    Nothing,
}

/// Runs `statement`: its text, parameters and reading planned first, then
/// run once.
pub fn run(statement: Statement<'_>) -> Reply {
    let (sql, args, rows, how) = planned(statement);
    match how {
        How::Waiting { now, deadline } => Reply::Term(insert_first(sql, &args, now, deadline)),
        How::Plain => plans::run(sql, &args, |t| rows.read(t)),
        How::Undone => Reply::Term(plans::in_subtransaction(
            || plans::run(sql, &args, first_term),
            Option::is_some,
        )),
        How::Nothing(reply) => reply,
    }
}

type Planned<'a> = (&'static str, Vec<DatumWithOid<'a>>, Rows, How);

/// A statement run as it is.
fn plain<'a>(sql: &'static str, args: Vec<DatumWithOid<'a>>, rows: Rows) -> Planned<'a> {
    (sql, args, rows, How::Plain)
}

/// `statement`'s text (as the installed schema has it), parameters, how
/// its rows are read and how it runs.
fn planned(statement: Statement<'_>) -> Planned<'_> {
    let slots = schema_version::has_slots();
    match statement {
        Statement::Read { key, owner } => plain(
            schema_version::read_lease(),
            vec![key.into(), owner.into()],
            Rows::Lease,
        ),
        Statement::InsertFirst { tenure, deadline } => {
            let how = How::Waiting {
                now: tenure.now,
                deadline,
            };
            let sql = schema_version::insert_first_term();
            (sql, tenure.args().into(), Rows::Term, how)
        }
        Statement::TakeAsRead { tenure, seen } => {
            let seen = [
                seen.term.into(),
                seen.holder
                    .map_or_else(DatumWithOid::null::<&str>, Into::into),
                uuid_or_null(seen.session),
                ts_or_null(seen.delayed_until),
            ];
            let args = tenure.args().into_iter().chain(seen).collect();
            (queries::TAKE_AS_READ, args, Rows::Term, How::Undone)
        }
        Statement::Lock {
            key,
            id,
            owner,
            now,
        } => plain(
            schema_version::lock_acquirable(),
            vec![key.into(), id.into(), owner.into(), ts(now).into()],
            Rows::Lease,
        ),
        Statement::StartTerm { tenure } => plain(
            schema_version::start_term(),
            tenure.args().into(),
            Rows::Term,
        ),
        Statement::Renew { many, .. } if many && !slots => (
            "",
            vec![],
            Rows::Nothing,
            How::Nothing(Reply::Extended(None)),
        ),
        Statement::Renew {
            key,
            id,
            now,
            ttl,
            owner,
            term,
            many,
        } => {
            let sql = if many {
                queries::RENEW_SLOT
            } else {
                schema_version::renew()
            };
            let args = vec![
                key.into(),
                id.into(),
                ts(now).into(),
                Ttl::or_stored(ttl),
                owner.into(),
                plans::term_or_any(term),
            ];
            plain(sql, args, Rows::Extended)
        }
        Statement::Rebind {
            key,
            session,
            stored,
            ttl,
            now,
            binding,
            slot,
        } => {
            let head = [
                key.into(),
                uuid_or_null(session),
                ts(stored).into(),
                ttl.as_interval().into(),
                ts(now).into(),
            ];
            match slot {
                Some(slot) => {
                    let args = head.into_iter().chain([slot.into()]).collect();
                    plain(queries::REBIND_SLOT, args, Rows::Term)
                }
                None => {
                    let (pid, started) = binding_args(binding);
                    let args = head.into_iter().chain([pid, started]).collect();
                    plain(queries::REBIND, args, Rows::Term)
                }
            }
        }
        Statement::SetValue { key, slot, value } => match slot {
            Some(slot) => plain(
                queries::SET_SLOT_VALUE,
                vec![key.into(), slot.into(), value.into()],
                Rows::Nothing,
            ),
            None => plain(
                queries::SET_VALUE,
                vec![key.into(), value.into()],
                Rows::Nothing,
            ),
        },
        Statement::KeySlots { .. } if !slots => {
            ("", vec![], Rows::Nothing, How::Nothing(Reply::Slots(None)))
        }
        Statement::KeySlots { key } => plain(queries::KEY_SLOTS, vec![key.into()], Rows::Slots),
        Statement::Summary {
            key,
            id,
            owner,
            has,
            now,
        } => plain(
            queries::SLOT_SUMMARY,
            vec![key.into(), ts(now).into(), id.into(), owner.into()],
            Rows::Summary { has, now },
        ),
        Statement::InsertHead {
            key,
            floor,
            now,
            slots,
            deadline,
        } => {
            let args = vec![key.into(), floor.into(), ts(now).into(), slots.into()];
            let how = How::Waiting { now, deadline };
            (queries::INSERT_KEY_HEAD, args, Rows::Term, how)
        }
        Statement::StartSlot { tenure, slot, term } => plain(
            queries::START_SLOT,
            tenure.slot_args(slot, term),
            Rows::Given(term),
        ),
        Statement::LockHead { key } => plain(queries::LOCK_KEY_HEAD, vec![key.into()], Rows::Head),
        Statement::SlotTake {
            key,
            id,
            free_up_to,
            has,
            term,
        } => plain(
            queries::SLOT_TAKE,
            vec![key.into(), id.into(), free_up_to.into()],
            Rows::Taking { has, term },
        ),
        Statement::Stale { key, above } => plain(
            queries::LOCK_STALE_TENURES,
            vec![key.into(), above.into()],
            Rows::Stale,
        ),
        Statement::StaleCount { key, above } => plain(
            queries::STALE_TENURES,
            vec![key.into(), above.into()],
            Rows::Count,
        ),
        Statement::SetOneSlot { key } => {
            plain(queries::SET_ONE_SLOT, vec![key.into()], Rows::Nothing)
        }
        Statement::TakeSlot {
            tenure,
            slot,
            slots,
        } => {
            // (the key's next term, from its floor at least)
            let mut args = tenure.slot_args(slot, tenure.floor);
            args.push(slots.into());
            plain(queries::TAKE_SLOT, args, Rows::Term)
        }
        Statement::LockOwnSlot { .. } if !slots => (
            "",
            vec![],
            Rows::Nothing,
            How::Nothing(Reply::OwnSlot(None)),
        ),
        Statement::LockOwnSlot { key, id, owner } => plain(
            queries::LOCK_OWN_SLOT,
            vec![key.into(), id.into(), owner.into()],
            Rows::OwnSlot,
        ),
    }
}

impl Rows {
    fn read(self, t: SpiTupleTable<'_>) -> Reply {
        match self {
            Rows::Lease => Reply::Lease(first_lease(t)),
            Rows::Term => Reply::Term(first_term(t)),
            Rows::Given(term) => Reply::Term(Some(term)),
            Rows::Extended => Reply::Extended(t.into_iter().next().and_then(|row| {
                let expires_at = micros(row.get::<TimestampWithTimeZone>(1).expect("expires_at"))?;
                let term = row.get::<i64>(2).expect("term").expect("term is NOT NULL");
                Some((term, expires_at))
            })),
            Rows::Slots => Reply::Slots(
                t.into_iter()
                    .next()
                    .and_then(|row| row.get::<i32>(1).expect("slots")),
            ),
            Rows::Summary { has, now } => {
                let row = t.first();
                let own = row.get::<i32>(3).expect("slot").map(|slot| Own {
                    slot,
                    expires_at: micros(row.get::<TimestampWithTimeZone>(5).expect("expires_at")),
                    owned: row.get::<bool>(6).expect("owned").unwrap_or(false),
                    session: row.get::<Uuid>(7).expect("session"),
                });
                let read = Read {
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
                Reply::Summary(read, lapsed.into_iter().flatten().collect())
            }
            Rows::Head => Reply::Head(t.into_iter().next().map(|row| {
                (
                    row.get::<String>(1).expect("holder"),
                    row.get::<i32>(2).expect("slots").unwrap_or(1),
                    row.get::<i64>(3).expect("term").expect("term is NOT NULL"),
                )
            })),
            Rows::Taking { has, term } => {
                let row = t.first();
                let locked = Locked {
                    has,
                    term,
                    own_until: micros(row.get::<TimestampWithTimeZone>(1).expect("own")),
                    free: row.get::<i32>(2).expect("free slot"),
                    new: row.get::<i32>(4).expect("new slot"),
                    taken: row.get::<i64>(5).expect("taken").unwrap_or(0),
                    earliest: micros(row.get::<TimestampWithTimeZone>(6).expect("earliest")),
                };
                Reply::Taking(locked, row.get::<String>(3).expect("slot's holder"))
            }
            Rows::Stale => Reply::Stale(
                t.into_iter()
                    .map(|row| {
                        let slot = row.get::<i32>(5).expect("slot").expect("slot is NOT NULL");
                        (Held::of(&row), slot)
                    })
                    .collect(),
            ),
            Rows::Count => Reply::Count(t.first().get_one::<i64>().expect("count").unwrap_or(0)),
            Rows::OwnSlot => Reply::OwnSlot(t.into_iter().next().and_then(|row| {
                Some((
                    row.get::<i32>(1).expect("slot").expect("slot is NOT NULL"),
                    row.get::<i64>(2).expect("term").expect("term is NOT NULL"),
                    micros(row.get::<TimestampWithTimeZone>(3).expect("expires_at"))?,
                ))
            })),
            Rows::Nothing => Reply::Done,
        }
    }
}

/// The term in the first column of the first row, if any.
fn first_term(t: SpiTupleTable<'_>) -> Option<i64> {
    t.into_iter()
        .next()
        .and_then(|row| row.get::<i64>(1).expect("term"))
}

/// Shortest wait behind a concurrent first insert of the same key, in
/// microseconds: enough for one that is committing, not for one left open.
const FIRST_INSERT_WAIT_US: i64 = 10_000;

/// The first insert of a brand-new row (`sql`: an INSERT ... ON CONFLICT
/// DO NOTHING RETURNING a term). It waits for a concurrent inserter of the
/// same row (contract 3.1: le_try_acquire waits for its outcome), but only
/// until `deadline` when there is one (at least `FIRST_INSERT_WAIT_US`): a
/// rival's uncommitted insert never holds a waiting caller beyond its own
/// `wait`. The term, or None when the other won or is still open past the
/// deadline.
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
                plans::run(sql, args, first_term)
            }))
            .catch_when(PgSqlErrorCode::ERRCODE_LOCK_NOT_AVAILABLE, |_| None)
            .execute()
        },
        Option::is_some,
    )
}
