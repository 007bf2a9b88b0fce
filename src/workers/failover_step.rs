//! The one-shot background worker that takes the failover step
//! (`lease::failover`) where no worker serves the database: started by the
//! first call that needs the step, it exits once the step is taken.

use crate::lease::failover;
use crate::store::call;
use crate::workers::bgworker;
use pgrx::bgworkers::BackgroundWorker;
use pgrx::prelude::*;

/// The one-shot worker: takes the step in database `arg` and exits.
#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn leaderlock_failover_main(arg: pg_sys::Datum) {
    bgworker::standard_signal_handlers();
    let oid = pg_sys::Oid::from(arg.value() as u32);
    bgworker::connect(oid);
    for _ in 0..500 {
        let done = BackgroundWorker::transaction(|| {
            let Some(schema) = bgworker::extension_schema() else {
                return true; // not installed (any more): nothing to do
            };
            let _call = call::enter_worker(schema);
            failover::make_leases_outlast_failover()
        });
        if done {
            return;
        }
        bgworker::wait(10); // another transaction takes it: see it end
    }
}
