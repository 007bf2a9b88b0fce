//! The background worker (contract section 5): turns lapsed leases vacant
//! and announces each with an `expired` notification, in one transaction;
//! likewise session-bound leases whose session ended (contract 10). One per
//! served database, started by the launcher (`launcher.rs`, contract 12).
//!
//! It sleeps until the next check is due (index probes find it: see
//! `queries::NEXT_CHECK`), capped by `leaderlock.naptime`, and is woken
//! early by a commit that sets an earlier expiry (`wakeup.rs`). An idle
//! check is that one query. Laid out after
//! pg_cron's and worker_spi's main loops: standard `die`/reload signal
//! handlers, latch waits that exit with the postmaster.

use crate::call;
use crate::databases::{self, Slot};
use crate::failover;
use crate::lease;
use crate::plans;
use crate::queries;
use crate::sessions::{self, Session};
use crate::settings;
use crate::wakeup;
use pgrx::bgworkers::BackgroundWorker;
use pgrx::prelude::*;
use std::ffi::c_int;
use std::sync::atomic::Ordering;

/// The worker's name, and its `backend_type` in pg_stat_activity.
pub const BACKEND_TYPE: &str = "leaderlock worker";

/// Most leases one transaction expires; more are taken by the next check
/// right away.
const BATCH: i64 = 1_000;

/// First retry delay when lapsed leases had to be skipped because another
/// transaction holds them locked; doubles up to the naptime.
const LOCKED_RETRY_MS: i64 = 10;

unsafe extern "C-unwind" {
    // PostgreSQL's own handlers; pg_sys only exposes guarded wrappers.
    fn die(signal: c_int);
    fn SignalHandlerForConfigReload(signal: c_int);
}

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
}

#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn leaderlock_worker_main(arg: pg_sys::Datum) {
    standard_signal_handlers();
    let oid = pg_sys::Oid::from(arg.value() as u32);
    BackgroundWorker::connect_worker_to_spi_by_oid(Some(oid), None);
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
    if slot.paused() || !wakeup::register_worker(slot) {
        return; // a command needs the database, or another worker serves it
    }
    slot.absent.store(false, Ordering::SeqCst);

    loop {
        reload_config();
        if let Some(why) = must_stop(slot, &database) {
            log!("leaderlock worker for database \"{database}\": {why}; exiting");
            slot.stepped_aside.store(true, Ordering::SeqCst);
            return;
        }
        wakeup::check_started();
        match check(&mut state, &database) {
            Some(sleep_ms) => wait(sleep_ms),
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

/// SIGHUP reloads the settings; SIGTERM exits with status 1 (PostgreSQL's
/// `die`), so that the launcher (or, for the launcher, the postmaster)
/// starts it again after pg_terminate_backend; at shutdown nothing is
/// restarted.
pub fn standard_signal_handlers() {
    unsafe {
        set_signal_handler(pg_sys::SIGHUP, Some(SignalHandlerForConfigReload));
        set_signal_handler(pg_sys::SIGTERM, Some(die));
        pg_sys::BackgroundWorkerUnblockSignals();
    }
}

/// Installs a signal handler in this process.
///
/// # Safety
/// `handler` must be async-signal-safe (PostgreSQL's own handlers are).
unsafe fn set_signal_handler(signal: u32, handler: pg_sys::pqsigfunc) {
    // PostgreSQL 18 renamed the backend's pqsignal() to pqsignal_be()
    // (`pqsignal` became a macro choosing the frontend or backend one), so
    // the binding has a different name there.
    #[cfg(not(feature = "pg18"))]
    unsafe {
        pg_sys::pqsignal(signal as c_int, handler)
    };
    #[cfg(feature = "pg18")]
    unsafe {
        pg_sys::pqsignal_be(signal as c_int, handler)
    };
}

pub fn reload_config() {
    unsafe {
        if pg_sys::ConfigReloadPending != 0 {
            pg_sys::ConfigReloadPending = 0;
            pg_sys::ProcessConfigFile(pg_sys::GucContext::PGC_SIGHUP);
        }
    }
}

pub fn wait(sleep_ms: i64) {
    unsafe {
        pg_sys::WaitLatch(
            pg_sys::MyLatch,
            (pg_sys::WL_LATCH_SET | pg_sys::WL_TIMEOUT | pg_sys::WL_EXIT_ON_PM_DEATH) as c_int,
            sleep_ms.max(0) as std::ffi::c_long,
            pg_sys::PG_WAIT_EXTENSION,
        );
        pg_sys::ResetLatch(pg_sys::MyLatch);
    }
    pg_sys::check_for_interrupts!();
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
            pin_settings();
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
        let now = lease::now();
        end_sessions(state, now);
        let mut next = lease::next_check(now);
        let mut expired_all = 0usize;
        if next.is_some_and(|n| n <= now) {
            expired_all = lease::expire_lapsed(now, BATCH);
            if expired_all as i64 == BATCH {
                return Some(0); // more are waiting: go again at once
            }
            next = lease::next_check(now);
        }
        let sleep_ms = sleep_after_check(state, next, expired_all, naptime);
        Some(if state.ended_sessions.is_empty() {
            sleep_ms
        } else {
            // some of their leases were locked: again soon, backing off
            sleep_ms.min(state.session_retry_ms)
        })
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
            let (locked, vacated) = lease::end_orphaned_sessions(BATCH);
            if (locked as i64) < BATCH || vacated == 0 {
                break;
            }
        }
        state.last_sweep = now;
    }
    state.ended_sessions.retain(|s| !lease::end_session(s));
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
    let now = lease::now();
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
    wakeup::sleeping_until(now + sleep_ms * 1000);
    sleep_ms
}

/// The schema of the extension in this database, or None when it is not
/// installed (or the database is not UTF8, which it does not support).
pub fn extension_schema() -> Option<pg_sys::Oid> {
    let oid = unsafe { pg_sys::get_extension_oid(c"leaderlock".as_ptr(), true) };
    if oid == pg_sys::InvalidOid
        || unsafe { pg_sys::GetDatabaseEncoding() } != pg_sys::pg_enc::PG_UTF8 as i32
    {
        return None;
    }
    // A fixed catalog query, run before any call context exists; `select`,
    // which takes no transaction ID (a standby has none to give).
    Spi::connect(|client| {
        client
            .select(queries::EXTENSION_NAMESPACE, None, &[oid.into()])
            .ok()?
            .first()
            .get_one::<pg_sys::Oid>()
            .ok()
            .flatten()
    })
}

/// The worker's session settings, as the functions pin them: statements
/// resolve in pg_catalog only, and use index plans.
pub fn pin_settings() {
    plans::run(queries::PIN_SEARCH_PATH, &[], |_| ());
    plans::run(queries::NO_SEQSCAN, &[], |_| ());
}

/// The extension's schema here, or None when it is not installed; logs
/// when it is not and was expected (named in `leaderlock.databases`, or
/// dropped while we served it), and when it (re)appears.
fn extension_ready(state: &mut State, database: &str) -> Option<pg_sys::Oid> {
    let oid = unsafe { pg_sys::get_extension_oid(c"leaderlock".as_ptr(), true) };
    let schema = extension_schema();
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
