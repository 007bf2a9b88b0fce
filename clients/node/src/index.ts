// Leader election on PostgreSQL with the leaderlock extension (compiled or
// portable edition), with the Rust client's guarantees: renew every ttl/3,
// a local deadline on the monotonic clock (the send time of the last
// successful acquire or renew + ttl - ttl/200) that `lease.valid`,
// `lease.check()` and `lease.signal.aborted` read from the clock whenever
// they are asked (a timer aborts the signal too, but after a pause of the
// process every due timer runs at once, in no useful order), every call
// bounded by that deadline, LISTEN as a hint with polling as the fallback,
// waiting that survives the connection (reconnects with jittered backoff,
// several hosts as libpq's target_session_attrs), typed errors, fenced
// writes (lease.guard / lease.guarded), release on the way out (and on
// SIGTERM with releaseOnSignals), id host:pid:random. Sessions
// (openSession(): many keys renewed by one le_renew_session, with the same
// local deadline; contract 21) and scheduled runs (schedule(): a job's
// callback once per due instant, on one replica, with the same local
// deadline; contract 22), the history of transitions (watchHistory():
// each transition once, in order, across lost connections; contract 23)
// and a group's member (member(): partitions the server assigns, with the
// same local deadline; contract 26).
//
// This file is the package's face: it re-exports the public API, by name
// (the modules export internals to one another too). The modules, each
// importing only those above it:
//   load.ts        pg and cron-parser, here or in the application
//   errors.ts      the typed errors, and classify()
//   options.ts     lead()'s options, the id, the clock and its timers, timing
//   statements.ts  the leases' statements, and the schema they name
//   connect.ts     connecting (hosts, the schema found), bounded calls
//   hints.ts       notifications as hints (probe, the wait for one)
//   lease.ts       the lease: its deadline and renewals, guards, release
//   lead.ts        the campaign, elect(), lead() and the Elector
//   session.ts     sessions (contract 21)
//   signals.ts     releaseOnSignals
//   schedule.ts    scheduled runs and due instants (contract 22)
//   history.ts     the history watcher (contract 23)
//   group.ts       a group's member (contract 26)
export {
  BadArgumentError, ConnectionError, LeaderlockError, LeaseLost, LeaseLostError, NotAcquired, NotAcquiredError,
  NotInstalledError, PrivilegeError, RejectedError,
} from "./errors.js";
export type { LossReason } from "./errors.js";
export { defaultId } from "./options.js";
export type { ConnectionConfig, LeadOptions } from "./options.js";
export type { Lease, PoolLike, Queryable } from "./lease.js";
export { Elector, lead } from "./lead.js";
export type { ElectorOptions } from "./lead.js";
export { releaseOnSignals } from "./signals.js";
export { SessionLost, openSession } from "./session.js";
export type { Session, SessionLease, SessionOptions } from "./session.js";
export { RunLost, nextDue, schedule } from "./schedule.js";
export type { DueRule, Run, ScheduleOptions } from "./schedule.js";
export { HistoryPrunedError, HistoryWatcher, watchHistory } from "./history.js";
export type { HistoryEvent, HistoryOptions, Transition } from "./history.js";
export { PartitionNotOwned, member } from "./group.js";
export type { Member, MemberOptions } from "./group.js";
