//! The background worker (contract section 5): turns lapsed leases vacant
//! and announces each with an `expired` notification, in one transaction;
//! likewise session-bound leases whose session ended (contract 10). One per
//! served database, started by the launcher (`launcher.rs`, contract 12).
//!
//! It sleeps until the next check is due (index probes find it: see
//! `queries::NEXT_CHECK`), capped by `leaderlock.naptime`, and is woken
//! early by a commit that sets an earlier expiry (`worker_worker_wakeup.rs`). An idle
//! check is that one query. Laid out after
//! pg_cron's and worker_spi's main loops: standard `die`/reload signal
//! handlers, latch waits that exit with the postmaster.

use crate::bgworker;
use crate::call;
use crate::clock;
use crate::databases::{self, Slot};
use crate::expiry;
use crate::failover;
use crate::history;
use crate::sessions::{self, Session};
use crate::settings;
use crate::worker_wakeup;
use pgrx::bgworkers::BackgroundWorker;
use pgrx::prelude::*;
use std::sync::atomic::Ordering;

/// The worker's name, and its `backend_type` in pg_stat_activity.
pub const BACKEND_TYPE: &str = "leaderlock worker";

/// First retry delay when lapsed leases had to be skipped because another
/// transaction holds them locked; doubles up to the naptime.
const LOCKED_RETRY_MS: i64 = 10;

/// What the worker knows between checks.
#[derive(Default)]
struct State {
    /// Extension OID in this database when last seen; None when absent.
    extension: Option<pg_sys::Oid>,
    told_standby: bool,
    /// Current retry delay for locked lapsed rows, in ms (0: none pending).
    locked_retry_ms: i64,
    /// Ended sessions whose bound leases are not all vacated yet.
    ended_sessions: Vec<Session>,
    /// When sessions gone without a word were last looked for (0: never,
    /// so the first check after a start, or a crash, looks).
    last_sweep: i64,
    /// Retry delay while ended sessions' leases are locked, in ms.
    session_retry_ms: i64,
    /// Sessions that found the ended-sessions queue full, as last seen.
    queue_overflows: u64,
    /// The session settings are still to be pinned (new, or re-created).
    pin_settings: bool,
    /// When the history was last numbered (0: never).
    last_numbered: i64,
    /// Since when committed transitions await a position (None: none known).
    pending_since: Option<i64>,
    /// The check found the history due for numbering (done after it commits).
    number_due: bool,
}

/// Contract 23: how long after the first commit of a transition the
/// history is numbered, in milliseconds. A transition is readable about
/// this long after its commit; the transitions committed meanwhile cost one
/// numbering (one commit), not one each, and it comes after a hand-over's
/// critical moments, not during them.
pub const HISTORY_GAP_MS: i64 = 50;

/// The longest the history goes without a numbering round (its pruning
/// by age, rows no commit announced: a worker started after them).
const HISTORY_ROUND_MS: i64 = 1_000;

#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn leaderlock_worker_main(arg: pg_sys::Datum) {
    bgworker::standard_signal_handlers();
    let oid = pg_sys::Oid::from(arg.value() as u32);
    bgworker::connect(oid);
    // A catalog lookup: inside a transaction.
    let database = BackgroundWorker::transaction(databases::current_name);
    let mut state = State::default();
    // A database without the extension takes no slot in shared memory (a
    // role that may only create databases could otherwise fill them all).
    let found = {
        let mut state = std::panic::AssertUnwindSafe(&mut state);
        let database = database.as_str();
        BackgroundWorker::transaction(move || extension_ready(&mut state, database).is_some())
    };
    if !found {
        if let Some(slot) = databases::find(oid.to_u32()) {
            slot.absent.store(true, Ordering::SeqCst);
        }
        return;
    }
    let Some(slot) = databases::mine() else {
        log!(
            "leaderlock worker: cannot serve database \"{database}\": leaderlock.max_databases \
             ({}) databases with the extension are served already; raise it (restart needed)",
            settings::MAX_DATABASES.get()
        );
        return;
    };
    if slot.paused() || !worker_wakeup::register_worker(slot) {
        return; // a command needs the database, or another worker serves it
    }
    slot.absent.store(false, Ordering::SeqCst);

    loop {
        bgworker::reload_config();
        if let Some(why) = must_stop(slot, &database) {
            log!("leaderlock worker for database \"{database}\": {why}; exiting");
            slot.stepped_aside.store(true, Ordering::SeqCst);
            return;
        }
        worker_wakeup::check_started();
        match check(&mut state, &database) {
            Some(sleep_ms) => {
                let more =
                    std::mem::take(&mut state.number_due) && number_history(&mut state, &database);
                bgworker::wait(if more {
                    sleep_ms.min(HISTORY_GAP_MS)
                } else {
                    sleep_ms
                })
            }
            None => {
                // Not installed: the launcher starts a worker again when a
                // CREATE EXTENSION commits here.
                slot.absent.store(true, Ordering::SeqCst);
                return;
            }
        }
    }
}

/// Why this worker must stop now, if it must.
fn must_stop(slot: &Slot, database: &str) -> Option<&'static str> {
    if !settings::served().includes(database) {
        Some("no longer included by leaderlock.databases")
    } else if slot.paused() {
        Some("the database is being dropped, renamed, copied or made a template")
    } else {
        None
    }
}

/// One check. Returns how long to sleep, in milliseconds; None when the
/// extension is not installed here (any more).
fn check(state: &mut State, database: &str) -> Option<i64> {
    let naptime = i64::from(settings::NAPTIME.get());
    let mut state = std::panic::AssertUnwindSafe(state);
    BackgroundWorker::transaction(move || {
        let state = &mut **state;
        // Looked for on a standby too: a worker stays only where the
        // extension is installed.
        let schema = extension_ready(state, database)?;
        let _call = call::enter_worker(schema);
        if state.pin_settings {
            bgworker::pin_settings();
            state.pin_settings = false;
        }
        if unsafe { pg_sys::RecoveryInProgress() } {
            // Hot standby: write nothing, poll for promotion.
            if !state.told_standby {
                log!(
                    "leaderlock worker for database \"{database}\": server is in recovery; \
                     waiting for promotion"
                );
                state.told_standby = true;
            }
            return Some(naptime.min(1_000));
        }
        if state.told_standby {
            log!("leaderlock worker for database \"{database}\": server promoted; expiring leases");
            state.told_standby = false;
        }
        if !failover::make_leases_outlast_failover() {
            return Some(LOCKED_RETRY_MS); // another transaction is taking the step
        }
        let now = clock::now();
        end_sessions(state, now);
        expiry::end_abandoned(now);
        let mut next = expiry::next_check(now);
        let mut expired_all = 0usize;
        if next.is_some_and(|n| n <= now) {
            expired_all = expiry::expire_lapsed(now, expiry::BATCH);
            if expired_all as i64 >= expiry::BATCH {
                return Some(0); // more are waiting: go again at once
            }
            next = expiry::next_check(now);
        }
        if state.pending_since.is_none() && worker_wakeup::take_history_pending() {
            state.pending_since = Some(now);
        }
        let due = state.pending_since.map(|t| t + HISTORY_GAP_MS * 1000);
        let mut history_wait = None;
        if now - state.last_numbered >= HISTORY_ROUND_MS * 1000 || due.is_some_and(|d| now >= d) {
            state.number_due = true; // number_history, once this commits
        } else if let Some(d) = due {
            history_wait = Some((d - now + 999) / 1000);
        }
        let sleep_ms = sleep_after_check(state, next, expired_all, naptime);
        let sleep_ms = history_wait.map_or(sleep_ms, |w| sleep_ms.min(w.max(1)));
        Some(if state.ended_sessions.is_empty() {
            sleep_ms
        } else {
            // some of their leases were locked: again soon, backing off
            sleep_ms.min(state.session_retry_ms)
        })
    })
}

/// Contract 23: numbers and prunes the history, in a transaction of its
/// own after the check's: the check's expiries commit (their rows free for
/// takers, their announcements sent) without waiting for a numbering a
/// flood of transitions made long, and are numbered here with the rest.
/// Whether rows are left for another round.
fn number_history(state: &mut State, database: &str) -> bool {
    let mut state = std::panic::AssertUnwindSafe(state);
    BackgroundWorker::transaction(move || {
        let state = &mut **state;
        let Some(schema) = extension_ready(state, database) else {
            return false;
        };
        let _call = call::enter_worker(schema);
        let now = clock::now();
        state.last_numbered = now;
        state.pending_since = None;
        // What commits before the numbering's snapshot it numbers; what
        // commits after sets the flag again.
        worker_wakeup::take_history_pending();
        let more = history::number_and_prune(now);
        if more {
            state.pending_since = Some(now);
        }
        more
    })
}

/// Contract 10: vacates the leases of sessions that ended, as the exiting
/// backends reported them (`sessions.rs`), and, at start, after a report
/// was lost, and every `SWEEP_INTERVAL_MS`, those of any session gone.
fn end_sessions(state: &mut State, now: i64) {
    let here = unsafe { pg_sys::MyDatabaseId }.to_u32();
    let (ended, overflowed) = sessions::take_ended(here, &mut state.queue_overflows);
    state.ended_sessions.extend(ended);
    if overflowed || now - state.last_sweep >= sessions::SWEEP_INTERVAL_MS * 1000 {
        // Again while a full batch was locked and some of it vacated (rows
        // of live sessions stay locked by us and come back; they stop it).
        loop {
            let (locked, vacated) = expiry::end_orphaned_sessions(expiry::BATCH);
            if (locked as i64) < expiry::BATCH || vacated == 0 {
                break;
            }
        }
        state.last_sweep = now;
    }
    state.ended_sessions.retain(|s| !expiry::end_session(s));
    state.session_retry_ms = if state.ended_sessions.is_empty() {
        0
    } else {
        backoff(state.session_retry_ms, i64::from(settings::NAPTIME.get()))
    };
}

/// The next retry delay for locked rows: `LOCKED_RETRY_MS` first
/// (`current` 0), then doubling up to the naptime.
fn backoff(current: i64, naptime: i64) -> i64 {
    if current == 0 {
        LOCKED_RETRY_MS
    } else {
        (current * 2).min(naptime)
    }
}

/// Decides the sleep after a check, and tells backends when we will wake.
fn sleep_after_check(state: &mut State, next: Option<i64>, expired: usize, naptime: i64) -> i64 {
    let now = clock::now();
    let sleep_ms = match next {
        None => naptime,
        Some(n) if n > now => {
            state.locked_retry_ms = 0;
            // Round up: waking before the expiry would find nothing to do.
            ((n - now + 999) / 1000).min(naptime)
        }
        Some(_) => {
            // Lapsed leases remain: locked by another transaction (retry with
            // backoff) or lapsed during this check (retry at once).
            if expired > 0 {
                state.locked_retry_ms = 0;
                0
            } else {
                state.locked_retry_ms = backoff(state.locked_retry_ms, naptime);
                state.locked_retry_ms
            }
        }
    };
    worker_wakeup::sleeping_until(now + sleep_ms * 1000);
    sleep_ms
}

/// The extension's schema here, or None when it is not installed; logs
/// when it is not and was expected (named in `leaderlock.databases`, or
/// dropped while we served it), and when it (re)appears.
fn extension_ready(state: &mut State, database: &str) -> Option<pg_sys::Oid> {
    let oid = unsafe { pg_sys::get_extension_oid(c"leaderlock".as_ptr(), true) };
    let schema = bgworker::extension_schema();
    let Some(schema) = schema else {
        if state.extension.is_some() {
            log!("leaderlock worker for database \"{database}\": extension dropped; exiting");
        } else if oid != pg_sys::InvalidOid {
            log!(
                "leaderlock worker: database \"{database}\" is not UTF8; leaderlock supports \
                 UTF8 databases only; not serving it"
            );
        } else if settings::served().names(database) {
            log!(
                "leaderlock worker: extension \"leaderlock\" is not installed in database \
                 \"{database}\", which leaderlock.databases names; run CREATE EXTENSION \
                 leaderlock there (a worker starts when it commits)"
            );
        } else {
            debug1!("leaderlock worker: extension not installed in database \"{database}\"");
        }
        return None;
    };
    if state.extension != Some(oid) {
        log!("leaderlock worker started, serving database \"{database}\"");
        state.extension = Some(oid);
        state.pin_settings = true;
    }
    Some(schema)
}
