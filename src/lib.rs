//! leaderlock: leader election inside PostgreSQL.
//!
//! Modules: `api` (SQL-callable functions), `call` (the acting role and the
//! extension's schema during a call), `guard` (what statements may touch),
//! `lease` (state transitions),
//! `failover` (terms and durability across crashes and failover),
//! `launcher` (starts a worker per database), `worker` (the background
//! worker of one database), `databases` (shared memory per database),
//! `hooks` (utility commands that concern the workers), `notify` (LISTEN/NOTIFY payloads),
//! `settings` (GUCs), `input` (argument validation), `value` (the leader
//! value's jsonb), `queries` (all SQL text), `plans` (SPI plan cache),
//! `wakeup` (shared memory to wake the worker early), `waiters` (where
//! le_acquire waits), `sessions` (ends of sessions holding session-bound
//! leases).

use pgrx::prelude::*;

mod api;
mod call;
mod databases;
mod failover;
mod guard;
mod hooks;
mod input;
mod launcher;
mod lease;
mod notify;
mod plans;
mod queries;
mod sessions;
mod settings;
mod value;
mod waiters;
mod wakeup;
mod worker;

#[cfg(any(test, feature = "pg_test"))]
mod tests;

::pgrx::pg_module_magic!(name, version);

extension_sql_file!("schema.sql", name = "schema", bootstrap);

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
        databases::init();
        wakeup::init();
        waiters::init();
        sessions::init();
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
