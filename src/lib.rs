//! leaderlock: leader election inside PostgreSQL.
//!
//! Parts, from the bottom up (each uses only the parts above it in this
//! list; scripts/check_imports.py keeps it so):
//! - `base`: the lease clock, settings, the preload switch, names, values;
//! - `store`: the statements by table and how they run (SPI plans, the
//!   acting role, the installed schema's version, the last check);
//! - `shmem`: shared memory (databases, candidates, waiters, wake-ups);
//! - `announce`: notifications and the history;
//! - `lease`: a key's transitions (one slot or many, sessions, runs,
//!   terms across failover, the worker's vacating);
//! - `workers`: the launcher, the workers, the utility hook;
//! - `api`: the SQL face and its argument checks.
//!
//! DDL lives in `src/ddl/*.sql`.

use pgrx::prelude::*;

mod announce;
mod api;
mod base;
mod lease;
mod shmem;
mod store;
mod workers;

use base::{clock, preload, settings};
use shmem::{candidates, databases, handover, sessions, waiters, worker_wakeup};
use store::guard;
use workers::{hooks, launcher};

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
