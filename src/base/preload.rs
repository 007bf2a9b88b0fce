//! The one switch: whether the library was preloaded
//! (`shared_preload_libraries`). Only then does shared memory exist (the
//! databases' table, the waiters' condition variables, the ended-sessions
//! queue) and do workers run; without it every function still works and
//! expiry is lazy (contract 1). Set in the postmaster by `_PG_init` before
//! anything is registered, and inherited by every process it forks.
use std::sync::atomic::{AtomicBool, Ordering};

static PRELOADED: AtomicBool = AtomicBool::new(false);

/// Called once, from `_PG_init` while preloading.
pub fn mark() {
    PRELOADED.store(true, Ordering::SeqCst);
}

pub fn preloaded() -> bool {
    PRELOADED.load(Ordering::Relaxed)
}
