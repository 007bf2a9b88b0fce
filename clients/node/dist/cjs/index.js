"use strict";
Object.defineProperty(exports, "__esModule", { value: true });
exports.member = exports.PartitionNotOwned = exports.watchHistory = exports.HistoryWatcher = exports.HistoryPrunedError = exports.schedule = exports.nextDue = exports.RunLost = exports.openSession = exports.SessionLost = exports.releaseOnSignals = exports.lead = exports.Elector = exports.defaultId = exports.RejectedError = exports.PrivilegeError = exports.NotInstalledError = exports.NotAcquiredError = exports.NotAcquired = exports.LeaseLostError = exports.LeaseLost = exports.LeaderlockError = exports.ConnectionError = exports.BadArgumentError = void 0;
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
var errors_js_1 = require("./errors.js");
Object.defineProperty(exports, "BadArgumentError", { enumerable: true, get: function () { return errors_js_1.BadArgumentError; } });
Object.defineProperty(exports, "ConnectionError", { enumerable: true, get: function () { return errors_js_1.ConnectionError; } });
Object.defineProperty(exports, "LeaderlockError", { enumerable: true, get: function () { return errors_js_1.LeaderlockError; } });
Object.defineProperty(exports, "LeaseLost", { enumerable: true, get: function () { return errors_js_1.LeaseLost; } });
Object.defineProperty(exports, "LeaseLostError", { enumerable: true, get: function () { return errors_js_1.LeaseLostError; } });
Object.defineProperty(exports, "NotAcquired", { enumerable: true, get: function () { return errors_js_1.NotAcquired; } });
Object.defineProperty(exports, "NotAcquiredError", { enumerable: true, get: function () { return errors_js_1.NotAcquiredError; } });
Object.defineProperty(exports, "NotInstalledError", { enumerable: true, get: function () { return errors_js_1.NotInstalledError; } });
Object.defineProperty(exports, "PrivilegeError", { enumerable: true, get: function () { return errors_js_1.PrivilegeError; } });
Object.defineProperty(exports, "RejectedError", { enumerable: true, get: function () { return errors_js_1.RejectedError; } });
var options_js_1 = require("./options.js");
Object.defineProperty(exports, "defaultId", { enumerable: true, get: function () { return options_js_1.defaultId; } });
var lead_js_1 = require("./lead.js");
Object.defineProperty(exports, "Elector", { enumerable: true, get: function () { return lead_js_1.Elector; } });
Object.defineProperty(exports, "lead", { enumerable: true, get: function () { return lead_js_1.lead; } });
var signals_js_1 = require("./signals.js");
Object.defineProperty(exports, "releaseOnSignals", { enumerable: true, get: function () { return signals_js_1.releaseOnSignals; } });
var session_js_1 = require("./session.js");
Object.defineProperty(exports, "SessionLost", { enumerable: true, get: function () { return session_js_1.SessionLost; } });
Object.defineProperty(exports, "openSession", { enumerable: true, get: function () { return session_js_1.openSession; } });
var schedule_js_1 = require("./schedule.js");
Object.defineProperty(exports, "RunLost", { enumerable: true, get: function () { return schedule_js_1.RunLost; } });
Object.defineProperty(exports, "nextDue", { enumerable: true, get: function () { return schedule_js_1.nextDue; } });
Object.defineProperty(exports, "schedule", { enumerable: true, get: function () { return schedule_js_1.schedule; } });
var history_js_1 = require("./history.js");
Object.defineProperty(exports, "HistoryPrunedError", { enumerable: true, get: function () { return history_js_1.HistoryPrunedError; } });
Object.defineProperty(exports, "HistoryWatcher", { enumerable: true, get: function () { return history_js_1.HistoryWatcher; } });
Object.defineProperty(exports, "watchHistory", { enumerable: true, get: function () { return history_js_1.watchHistory; } });
var group_js_1 = require("./group.js");
Object.defineProperty(exports, "PartitionNotOwned", { enumerable: true, get: function () { return group_js_1.PartitionNotOwned; } });
Object.defineProperty(exports, "member", { enumerable: true, get: function () { return group_js_1.member; } });
