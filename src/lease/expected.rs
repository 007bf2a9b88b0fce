//! Contract 25: keys expected to be led. A key's owner-made mark says how
//! long it may stay without a live holder; the worker checks each mark
//! when it is due (`leaderlock_protocol::expected::check` decides over
//! what the status view shows of the key) and records, announces and
//! counts each interval that went past the bound: its start when it goes
//! past, its end when the key is led again.

use crate::announce::notify::LeaderlessEvent;
use crate::base::clock::{micros, ts};
use crate::base::ttl::{interval_micros, micros_interval};
use crate::lease::turns::{Queue, Turns};
use crate::store::plans;
use crate::store::queries;
use leaderlock_protocol::expected::{check, Led, Mark, Step};
use pgrx::prelude::*;

/// Marks checked per round, at most.
pub const MARKS_PER_ROUND: usize = 1_000;

/// What a change of a mark found.
pub enum Marked {
    Done(bool),
    NotOwner,
}

fn owner_member(key: &str, caller: pg_sys::Oid) -> Option<bool> {
    plans::run(queries::LOCK_EXPECTED, &[key.into(), caller.into()], |t| {
        t.into_iter()
            .next()
            .map(|r| r.get::<bool>(1).ok().flatten().unwrap_or(false))
    })
}

/// Marks `key` as expected to be led within `within` microseconds, at
/// `now`, for `caller`; a new mark is bounded per role by `may_mark`.
/// Whether it changed (the same bound again changes nothing).
pub fn mark(
    key: &str,
    within: i64,
    now: i64,
    caller: pg_sys::Oid,
    may_mark: impl FnOnce(),
) -> Marked {
    match owner_member(key, caller) {
        Some(false) => return Marked::NotOwner,
        Some(true) => {}
        None => may_mark(),
    }
    let args = [
        key.into(),
        micros_interval(within).into(),
        ts(now).into(),
        caller.into(),
        ts(now).into(),
    ];
    let changed = plans::run(queries::MARK_EXPECTED, &args, |t| !t.is_empty());
    if changed {
        crate::shmem::worker_wakeup::expiry_written(now.saturating_add(within));
    }
    Marked::Done(changed)
}

/// How many keys `caller` marked.
pub fn marks_made_by(caller: pg_sys::Oid) -> i64 {
    plans::run(queries::EXPECTED_MADE_BY, &[caller.into()], |t| {
        t.first().get_one::<i64>().ok().flatten().unwrap_or(0)
    })
}

/// `key`'s mark goes at `now`: Some(whether it had one), None: another
/// role's. An open leaderless interval ends with it (recorded then).
pub fn unmark(key: &str, now: i64, caller: pg_sys::Oid) -> Option<bool> {
    match owner_member(key, caller) {
        None => Some(false),
        Some(false) => None,
        Some(true) => {
            let open = plans::run(queries::UNMARK_EXPECTED, &[key.into()], |t| {
                micros(t.first().get_one::<TimestampWithTimeZone>().ok().flatten())
            });
            if let Some(since) = open {
                LeaderlessEvent::Ended { since, until: now }.send(key, now);
            }
            Some(true)
        }
    }
}

/// When the worker next has a mark to check.
pub fn next_check() -> Option<i64> {
    plans::run(queries::NEXT_EXPECTED_CHECK, &[], |t| {
        micros(t.first().get_one::<TimestampWithTimeZone>().ok().flatten())
    })
}

/// The worker's round: the marks due a check by `now`, up to
/// `MARKS_PER_ROUND`, their owners in turn and for the round's budget
/// (`turns`). How many it checked (the worker goes again at once when that
/// is the bound, as it is when the budget ran out).
pub fn check_due(now: i64) -> usize {
    let turns = Turns::begin(Queue::Marks);
    let args = [
        ts(now).into(),
        (MARKS_PER_ROUND as i64).into(),
        turns.last(),
    ];
    let marks: Vec<(String, Mark, pg_sys::Oid)> =
        plans::run(queries::LOCK_EXPECTED_TO_CHECK, &args, |t| {
            t.into_iter()
                .filter_map(|row| {
                    let key = row.get::<String>(1).ok().flatten()?;
                    let within = interval_micros(&row.get::<Interval>(2).ok().flatten()?);
                    let marked_at = micros(row.get::<TimestampWithTimeZone>(3).ok().flatten())?;
                    let open_since = micros(row.get::<TimestampWithTimeZone>(4).ok().flatten());
                    let owner = row.get::<pg_sys::Oid>(5).ok().flatten()?;
                    let mark = Mark {
                        within,
                        marked_at,
                        open_since,
                    };
                    Some((key, mark, owner))
                })
                .collect()
        });
    let mut checked = marks.len();
    for (i, (key, mark, owner)) in marks.into_iter().enumerate() {
        if !turns.more(i) {
            checked = MARKS_PER_ROUND; // (a full round: the next comes at once)
            break;
        }
        turns.served(owner);
        let led = plans::run(queries::EXPECTED_STATE, &[key.as_str().into()], |t| {
            let row = t.first();
            let at = |i| micros(row.get::<TimestampWithTimeZone>(i).ok().flatten());
            Led {
                since: at(1),
                until: at(2),
                last_end: at(3),
            }
        });
        let (step, next) = check(mark, led, now);
        let (open, opened, closed) = match step {
            Step::Wait => (mark.open_since, 0i64, 0),
            Step::Open { since } => (Some(since), 1, 0),
            Step::Close { since, until } => (None, 0, until - since),
        };
        let args = [
            key.as_str().into(),
            open.map(ts).into(),
            opened.into(),
            micros_interval(closed).into(),
            ts(next).into(),
        ];
        plans::run(queries::CHECKED_EXPECTED, &args, |_| ());
        match step {
            Step::Wait => {}
            Step::Open { since } => {
                LeaderlessEvent::Started {
                    since,
                    within: mark.within,
                }
                .send(&key, now);
            }
            Step::Close { since, until } => {
                LeaderlessEvent::Ended { since, until }.send(&key, now);
            }
        }
    }
    checked
}

/// `check_due` in a subtransaction, for le_expire_lapsed where no worker
/// serves: a failure is rolled back alone and told as a WARNING.
pub fn check_or_warn(now: i64) {
    crate::lease::settle::or_warn("the keys expected to be led were not checked", || {
        check_due(now)
    });
}
