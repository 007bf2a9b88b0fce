//! A key's transitions (contracts 2, 3, 8-11, 13, 16-18, 21, 22): each
//! reads what it needs, asks `leaderlock_protocol` what to do, and writes
//! it. `take` acquires (each look `look`'s state machine, a key of one slot
//! or of many; `slots` what a holder of a slot does), `keep`
//! is what a holder does with its lease, `read` what anyone may ask of a
//! key; `tenure` is what follows every change of holder, `failover` keeps
//! terms and leases across crashes and promotions, `session_leases` holds
//! contract 21's sessions, `runs` the scheduled runs, `schedules` the
//! schedules kept in the database (`settle` the worker's settling of
//! their instants), `expected` the
//! keys expected to be led, `groups` contract 26's groups, `expiry` the
//! worker's vacating; `turns` shares the worker's rounds out per role.

pub mod expected;
pub mod expiry;
pub mod failover;
pub mod groups;
mod keep;
mod look;
mod read;
mod row;
pub mod runs;
pub mod schedules;
pub mod session_leases;
pub mod settle;
pub mod slots;
mod take;
pub mod tenure;
mod turns;

pub use keep::{force_release, proclaim, release, release_all, renew, renew_all};
pub use read::{assert_leader, holders, leader, lease_now, LeaseNow};
pub use row::Claim;
pub use take::{acquire, acquire_in, try_acquire, SlotsDiffer};
