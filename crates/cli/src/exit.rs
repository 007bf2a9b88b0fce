//! Exit codes of `leaderlock`, besides the command's own (documented in
//! the README and in `leaderlock run --help`).

/// Bad flags (clap's own code for usage errors).
pub const USAGE: i32 = 2;
/// `--timeout` passed (or, with `--timeout 0`, the one try failed) and
/// another candidate holds the key.
pub const NOT_ACQUIRED: i32 = 120;
/// The lease was lost while the command ran: refused renewal, taken over,
/// or resigned after the command was stopped at the local deadline.
pub const LEASE_LOST: i32 = 121;
/// The database could not be reached: at the start, during `--timeout`, or
/// while leading (the command was stopped at the local deadline).
pub const UNREACHABLE: i32 = 122;
/// The server rejected the request for good: extension not installed, a
/// key or id it refuses, no privilege.
pub const REJECTED: i32 = 123;
/// The supervisor process died: should not happen.
pub const INTERNAL: i32 = 124;
/// The command could not be started (not found, not executable), as in a
/// shell.
pub const CANNOT_RUN: i32 = 127;
