//! The background worker (contract section 5): turns lapsed leases vacant
//! and announces each with an `expired` notification, in one transaction;
//! likewise session-bound leases whose session ended (contract 10).
//!
//! It sleeps until the next check is due (index probes find it: see
//! `queries::NEXT_CHECK`), capped by `leaderlock.naptime`, and is woken
//! early by a commit that sets an earlier expiry (`wakeup.rs`). An idle
//! check is that one query. Laid out after
//! pg_cron's and worker_spi's main loops: standard `die`/reload signal
//! handlers, latch waits that exit with the postmaster.

use crate::failover;
use crate::lease;
use crate::plans;
use crate::queries;
use crate::sessions::{self, Session};
use crate::settings;
use crate::wakeup;
use pgrx::bgworkers::{BackgroundWorker, BackgroundWorkerBuilder, BgWorkerStartTime};
use pgrx::prelude::*;
use pgrx::{pg_shmem_init, PgAtomic};
use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::Duration;

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

/// Set while the worker connects to its database. Still set when the next
/// worker starts means the last one died connecting (a missing database is
/// a FATAL error), so the next one backs off instead of looping every second.
static CONNECTING: PgAtomic<AtomicBool> = unsafe { PgAtomic::new(c"leaderlock worker connecting") };
static CONNECT_FAILURES: PgAtomic<AtomicI32> =
    unsafe { PgAtomic::new(c"leaderlock worker connect failures") };

/// Longest wait before retrying a failed connection, in seconds.
const MAX_CONNECT_BACKOFF_S: i64 = 60;

/// Registers the worker; only possible while preloading.
pub fn register() {
    pg_shmem_init!(CONNECTING = AtomicBool::new(false));
    pg_shmem_init!(CONNECT_FAILURES = AtomicI32::new(0));
    BackgroundWorkerBuilder::new(BACKEND_TYPE)
        .set_type(BACKEND_TYPE)
        .set_library("leaderlock")
        .set_function("leaderlock_worker_main")
        .enable_spi_access()
        // Start on a hot standby too, to wait there for promotion.
        .set_start_time(BgWorkerStartTime::ConsistentState)
        .set_restart_time(Some(Duration::from_secs(1)))
        .load();
}

/// What the worker knows between checks.
#[derive(Default)]
struct State {
    /// Extension OID in this database when last seen; None when absent.
    extension: Option<pg_sys::Oid>,
    /// Whether "not installed" was already logged since it was last present.
    told_absent: bool,
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
}

#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn leaderlock_worker_main(_arg: pg_sys::Datum) {
    unsafe {
        set_signal_handler(pg_sys::SIGHUP, Some(SignalHandlerForConfigReload));
        // Exit status 1 on SIGTERM, so that pg_terminate_backend gets the
        // worker restarted (at shutdown the postmaster does not restart it).
        set_signal_handler(pg_sys::SIGTERM, Some(die));
        pg_sys::BackgroundWorkerUnblockSignals();
    }
    let database = connect_with_backoff();
    wakeup::register_worker();
    log!("leaderlock worker started, serving database \"{database}\"");

    let mut state = State::default();
    loop {
        reload_settings(&database);
        wakeup::check_started();
        let sleep_ms = check(&mut state);
        wait(sleep_ms);
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

/// Connects to `leaderlock.database` and returns its name.
fn connect_with_backoff() -> String {
    if CONNECTING.get().swap(true, Ordering::SeqCst) {
        let database = settings::database();
        let failures = CONNECT_FAILURES.get().fetch_add(1, Ordering::SeqCst) + 1;
        let backoff_s = (1i64 << failures.min(6)).min(MAX_CONNECT_BACKOFF_S);
        log!(
            "leaderlock worker: could not connect to database \"{database}\" ({failures} times); \
             retrying in {backoff_s} s (set leaderlock.database to an existing database)"
        );
        wait(backoff_s * 1000);
        reload_config();
    }
    let database = settings::database();
    BackgroundWorker::connect_worker_to_spi(Some(&database), None);
    CONNECTING.get().store(false, Ordering::SeqCst);
    CONNECT_FAILURES.get().store(0, Ordering::SeqCst);
    database
}

fn reload_config() {
    unsafe {
        if pg_sys::ConfigReloadPending != 0 {
            pg_sys::ConfigReloadPending = 0;
            pg_sys::ProcessConfigFile(pg_sys::GucContext::PGC_SIGHUP);
        }
    }
}

fn reload_settings(database: &str) {
    reload_config();
    let wanted = settings::database();
    if wanted != database {
        // A worker cannot switch databases: exit non-zero, the postmaster
        // restarts it connected to the new one.
        log!("leaderlock worker: leaderlock.database is now \"{wanted}\"; restarting");
        unsafe { pg_sys::proc_exit(1) };
    }
}

fn wait(sleep_ms: i64) {
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

/// One check. Returns how long to sleep, in milliseconds.
fn check(state: &mut State) -> i64 {
    let naptime = i64::from(settings::NAPTIME.get());

    if unsafe { pg_sys::RecoveryInProgress() } {
        // Hot standby: write nothing, poll for promotion.
        if !state.told_standby {
            log!("leaderlock worker: server is in recovery; waiting for promotion");
            state.told_standby = true;
        }
        return naptime.min(1_000);
    }
    if state.told_standby {
        log!("leaderlock worker: server promoted; expiring leases");
        state.told_standby = false;
    }

    let mut state = std::panic::AssertUnwindSafe(state);
    BackgroundWorker::transaction(move || {
        let state = &mut **state;
        if !extension_ready(state) {
            return naptime;
        }
        if !failover::leases_outlast_failover() {
            return LOCKED_RETRY_MS; // a backend is extending leases after a failover
        }
        let now = lease::now();
        end_sessions(state, now);
        let mut next = lease::next_check(now);
        let mut expired_all = 0usize;
        if next.is_some_and(|n| n <= now) {
            expired_all = lease::expire_lapsed(now, BATCH);
            if expired_all as i64 == BATCH {
                return 0; // more are waiting: go again at once
            }
            next = lease::next_check(now);
        }
        let sleep_ms = sleep_after_check(state, next, expired_all, naptime);
        if state.ended_sessions.is_empty() {
            sleep_ms
        } else {
            // some of their leases were locked: again soon, backing off
            sleep_ms.min(state.session_retry_ms)
        }
    })
}

/// Contract 10: vacates the leases of sessions that ended, as the exiting
/// backends reported them (`sessions.rs`), and, at start, after a report
/// was lost, and every `SWEEP_INTERVAL_MS`, those of any session gone.
fn end_sessions(state: &mut State, now: i64) {
    let (ended, overflowed) = sessions::take_ended();
    let here = unsafe { pg_sys::MyDatabaseId }.to_u32();
    state
        .ended_sessions
        .extend(ended.into_iter().filter(|s| s.database == here));
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

/// Whether the extension is installed here; logs once when it is not, and
/// points the search_path at its schema when it (re)appears.
fn extension_ready(state: &mut State) -> bool {
    let oid = unsafe { pg_sys::get_extension_oid(c"leaderlock".as_ptr(), true) };
    if oid == pg_sys::InvalidOid {
        if !state.told_absent {
            log!(
                "leaderlock worker: extension \"leaderlock\" is not installed in database \"{}\"; \
                 run CREATE EXTENSION leaderlock there (checking again every leaderlock.naptime)",
                settings::database()
            );
            state.told_absent = true;
        }
        state.extension = None;
        return false;
    }
    if state.extension != Some(oid) {
        let schema = plans::run(queries::EXTENSION_SCHEMA, &[oid.into()], |t| {
            t.first().get_one::<String>().expect("schema")
        });
        if let Some(schema) = schema {
            plans::run(queries::SET_SEARCH_PATH, &[schema.as_str().into()], |_| ());
            plans::run(queries::NO_SEQSCAN, &[], |_| ());
            log!("leaderlock worker: extension found in schema {schema}");
        }
        state.extension = Some(oid);
        state.told_absent = false;
    }
    true
}
