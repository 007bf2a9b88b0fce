//! leaderlock: leader election inside PostgreSQL.
//!
//! Modules, from the bottom up (each uses only modules above it in this
//! list; scripts/check_imports.py keeps it so):
//! - `clock` (the lease clock), `settings` (GUCs), `preload` (the one
//!   switch: preloaded or not), `notify` (LISTEN/NOTIFY payloads), `value`
//!   (the leader value's jsonb), `queries` (all SQL text the extension
//!   runs), `guard` (what a statement may touch);
//! - `call` (the acting role and the extension's schema during a call),
//!   `plans` (runs statements: SPI plan cache, subtransactions),
//!   `schema_version` (which statements fit the installed schema),
//!   `bgworker` (what every background process shares);
//! - `databases` (shared memory per database), `waiters` (where le_acquire
//!   waits), `worker_wakeup` (waking the worker early), `sessions` (ends of
//!   sessions holding session-bound leases), `input` (argument checks);
//! - `failover` (terms and durability across crashes and failover),
//!   `session_leases` (contract 21's sessions: one ttl for many keys),
//!   `lease` (the holder's state transitions), `expiry` (the worker's
//!   steps), `runs` (scheduled runs: claims, renewals, outcomes);
//! - `worker` (the background worker of one database), `launcher` (a
//!   worker per database), `hooks` (utility commands that concern the
//!   workers), `api` (the SQL-callable functions).
//!
//! DDL lives in `src/ddl/*.sql`.

use pgrx::prelude::*;

mod api;
mod bgworker;
mod call;
mod candidates;
mod clock;
mod databases;
mod expiry;
mod failover;
mod guard;
mod handover;
mod history;
mod hooks;
mod input;
mod launcher;
mod lease;
mod names;
mod notify;
mod plans;
mod preload;
mod queries;
mod runs;
mod schema_version;
mod session_leases;
mod sessions;
mod settings;
mod slots;
mod tenure;
mod value;
mod waiters;
mod worker;
mod worker_wakeup;

#[cfg(any(test, feature = "pg_test"))]
mod tests;

::pgrx::pg_module_magic!(name, version);

extension_sql_file!("ddl/schema.sql", name = "schema", bootstrap);

#[pg_guard]
pub extern "C-unwind" fn _PG_init() {
    // An error passing through Rust frames (a hook's, a function's) would
    // carry a Rust backtrace in its DETAIL when the server's environment
    // asks for backtraces (RUST_BACKTRACE): never show one to clients.
    // Read once per process by the standard library; set before any is
    // taken (in the postmaster when preloaded, single-threaded).
    std::env::set_var("RUST_LIB_BACKTRACE", "0");
    settings::init();
    guard::init();
    // The worker and the shared memory that wakes it exist only when
    // preloaded; otherwise expiry is lazy (contract 1).
    if unsafe { pg_sys::process_shared_preload_libraries_in_progress } {
        preload::mark();
        clock::init();
        databases::init();
        worker_wakeup::init();
        waiters::init();
        candidates::init();
        sessions::init();
        handover::init();
        hooks::init();
        launcher::register();
    }
}

/// Required by `cargo pgrx test`.
#[cfg(test)]
pub mod pg_test {
    pub fn setup(_options: Vec<&str>) {}

    #[must_use]
    pub fn postgresql_conf_options() -> Vec<&'static str> {
        vec![]
    }
}
