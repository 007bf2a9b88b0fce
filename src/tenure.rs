//! What follows a change of holder, for a key of one slot (`lease.rs`) and
//! for a tenure of a key of many (`slots.rs`) alike: the worker's cue,
//! wake-ups, the counters, durability, and the announcement (contract 4).

use crate::databases::{self, Counter};
use crate::failover;
use crate::notify::Event;
use crate::waiters;
use crate::worker_wakeup;

/// A new tenure was written: `previous_holder`, the holder of a lapsed
/// lease taken over before the worker vacated it (counted as an expiry).
#[allow(clippy::too_many_arguments)]
pub fn started(
    key: &str,
    id: &str,
    term: i64,
    now: i64,
    expires_at: i64,
    previous_holder: Option<&str>,
    value: Option<&str>,
    slots: i32,
) {
    worker_wakeup::expiry_written(expires_at);
    if previous_holder.is_some() {
        databases::count(Counter::Expired);
    }
    // Rolled back, the lease is vacant again: its waiters must look again.
    waiters::wake_at_abort(key);
    failover::commit_durably();
    Event::Acquired {
        key,
        holder: id,
        term,
        at: now,
        previous_holder,
        expires_at,
        value,
    }
    .send_for(slots);
}

/// A live lease (or tenure) was vacated by its holder or, `forced`, by
/// le_force_release: its waiters wake when this commits.
pub fn released(key: &str, holder: &str, term: i64, now: i64, forced: bool, slots: i32) {
    databases::count(Counter::Released);
    waiters::wake_at_commit(key);
    failover::commit_durably();
    Event::Released {
        key,
        holder,
        term,
        at: now,
        forced,
    }
    .send_for(slots);
}
