//! Shared memory, present only when preloaded: the databases' table
//! (`databases`), the candidates waiting in le_acquire (`candidates`) and
//! where they sleep (`waiters`), waking the worker early
//! (`worker_wakeup`), ended sessions (`sessions`) and abandoned hand-overs
//! (`handover`) queued for the worker.

pub mod candidates;
pub mod databases;
pub mod handover;
pub mod sessions;
pub mod waiters;
pub mod worker_wakeup;
