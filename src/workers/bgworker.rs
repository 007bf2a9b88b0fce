//! The toolbox every background process of ours shares (the launcher, the
//! workers, the one-shot failover worker, and a backend waiting for one):
//! PostgreSQL's signal handlers, the latch wait, settings reload, and how a
//! worker finds the extension's schema and pins its session settings.
use crate::shmem::waiters;
use crate::store::call;
use crate::store::plans;
use crate::store::queries;
use pgrx::bgworkers::BackgroundWorker;
use pgrx::prelude::*;
use std::ffi::c_int;

unsafe extern "C-unwind" {
    // PostgreSQL's own handlers; pg_sys only exposes guarded wrappers.
    fn die(signal: c_int);
    fn SignalHandlerForConfigReload(signal: c_int);
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

/// Reads the settings again when a SIGHUP (or `ask_reload`) asked for it;
/// whether it did.
pub fn reload_config() -> bool {
    unsafe {
        if pg_sys::ConfigReloadPending == 0 {
            return false;
        }
        pg_sys::ConfigReloadPending = 0;
        pg_sys::ProcessConfigFile(pg_sys::GucContext::PGC_SIGHUP);
    }
    true
}

/// Asks for the settings to be read again, as a SIGHUP does.
pub fn ask_reload() {
    unsafe { pg_sys::ConfigReloadPending = 1 };
}

/// Whether a SIGHUP asked for the settings to be read again.
pub fn reload_pending() -> bool {
    unsafe { pg_sys::ConfigReloadPending != 0 }
}

/// Waits up to `sleep_ms`, but wakes at least every `beat_ms`; true when
/// the latch was set (someone asked for a round), false on a timeout.
pub fn wait_woken(sleep_ms: i64, beat_ms: i64) -> bool {
    waiters::latch_wait(sleep_ms.clamp(0, beat_ms.max(1)))
}

pub fn wait(sleep_ms: i64) {
    wait_woken(sleep_ms, i64::MAX);
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

/// The worker's session settings (`queries::PIN_SESSION`), in the current
/// transaction and every later one of this session.
pub fn pin_settings() {
    plans::run(queries::PIN_SESSION, &[], |_| ());
}

/// Connects this background process to database `oid` and, where the
/// extension is installed, pins its session settings in a transaction of
/// its own, before any that writes: the database's defaults (applied at
/// connection) could otherwise make every transaction read-only, or time
/// each one out.
pub fn connect(oid: pg_sys::Oid) {
    BackgroundWorker::connect_worker_to_spi_by_oid(Some(oid), None);
    BackgroundWorker::transaction(|| {
        if let Some(schema) = extension_schema() {
            let _call = call::enter_worker(schema);
            pin_settings();
        }
    });
}
