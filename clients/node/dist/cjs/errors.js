"use strict";
// The typed errors, and classify(), which sorts a failure into one: retry
// (ConnectionError) or give up (RejectedError). SessionLost, RunLost and
// HistoryPrunedError live with their parts (session.ts, schedule.ts,
// history.ts).
Object.defineProperty(exports, "__esModule", { value: true });
exports.NotAcquiredError = exports.LeaseLostError = exports.ConnectionError = exports.BadArgumentError = exports.PrivilegeError = exports.NotInstalledError = exports.RejectedError = exports.LeaseLost = exports.NotAcquired = exports.LeaderlockError = exports.NOT_LEADER = exports.UNDEFINED_FUNCTION = void 0;
exports.slotsDiffer = slotsDiffer;
exports.isDbError = isDbError;
exports.classify = classify;
/** No such function: leaderlock not installed, or a schema before 0.5.0 (then the older call). */
exports.UNDEFINED_FUNCTION = "42883";
/** le_assert_leader's refusal: the id is not the live holder in that term. */
exports.NOT_LEADER = "LE001";
/**
 * The DETAIL both editions give (SQLSTATE 22023) when a key with live
 * holders is asked for with another number of slots than it admits
 * (contract 17): the key is not ours now, not a request to give up.
 */
const SLOTS_DIFFER_DETAIL = "While a key has live holders, every acquisition must give the same slots.";
/** Whether the server refused a try because the key is held with another number of slots. */
function slotsDiffer(e) {
    return e?.code === "22023" && typeof e.detail === "string" && e.detail.startsWith(SLOTS_DIFFER_DETAIL);
}
/** Base of this package's errors. */
class LeaderlockError extends Error {
    constructor(message, options) {
        super(message, options);
        this.name = new.target.name;
    }
}
exports.LeaderlockError = LeaderlockError;
/** `timeout` passed without becoming leader (0: the one try failed); `holder` holds the key. */
class NotAcquired extends LeaderlockError {
    key;
    holder;
    constructor(key, holder) {
        super(`not the leader of ${JSON.stringify(key)}` + (holder ? ` (held by ${JSON.stringify(holder)})` : ""));
        this.key = key;
        this.holder = holder;
    }
}
exports.NotAcquired = NotAcquired;
exports.NotAcquiredError = NotAcquired;
/** The lease is gone (see `reason`): stop acting as leader. */
class LeaseLost extends LeaderlockError {
    key;
    term;
    reason;
    detail;
    constructor(key, term, reason, detail, options) {
        super(`lost the lease of ${JSON.stringify(key)} (term ${term}): ${detail}`, options);
        this.key = key;
        this.term = term;
        this.reason = reason;
        this.detail = detail;
    }
}
exports.LeaseLost = LeaseLost;
exports.LeaseLostError = LeaseLost;
/**
 * A refusal that retrying cannot change: waiting ends with it, an Elector
 * reports it once ("error") and stops. `sqlstate` is the server's, or
 * undefined when this client refused the arguments itself.
 */
class RejectedError extends LeaderlockError {
    sqlstate;
    constructor(message, cause) {
        super(message, cause === undefined ? undefined : { cause });
        this.sqlstate = typeof cause?.code === "string" ? cause.code : undefined;
    }
}
exports.RejectedError = RejectedError;
/**
 * The database has no leaderlock functions (no CREATE EXTENSION, no schema
 * holding the portable edition's), or not in `schema`, the one named (the
 * `schema` option or LEADERLOCK_SCHEMA).
 */
class NotInstalledError extends RejectedError {
    database;
    schema;
    constructor(database, cause, schema = null) {
        super(`extension leaderlock is not installed in database ${database}` +
            (schema !== null ? ` (schema ${JSON.stringify(schema)} does not hold leaderlock's functions)` : "") +
            (cause?.message ? ` (${cause.message})` : ""), cause);
        this.database = database;
        this.schema = schema;
    }
}
exports.NotInstalledError = NotInstalledError;
/** The role may not do this: no EXECUTE on leaderlock's functions (42501), or the server refuses its login (28xxx). */
class PrivilegeError extends RejectedError {
}
exports.PrivilegeError = PrivilegeError;
/** An argument the server (class 22, e.g. a ttl above leaderlock.max_ttl) or this client refuses. */
class BadArgumentError extends RejectedError {
}
exports.BadArgumentError = BadArgumentError;
/**
 * The server could not be reached or could not answer now: refused or
 * dropped connections, a restart, a standby (read-only), a call past its
 * time. Waiting calls retry these until their timeout; `sqlstate` when the
 * server said why.
 */
class ConnectionError extends LeaderlockError {
    sqlstate;
    constructor(message, cause) {
        super(message, cause === undefined ? undefined : { cause });
        this.sqlstate = isDbError(cause) ? cause.code : undefined;
    }
}
exports.ConnectionError = ConnectionError;
function isDbError(e) {
    return typeof e?.code === "string" && typeof e?.severity === "string";
}
const NOT_INSTALLED = new Set([exports.UNDEFINED_FUNCTION, "42P01", "3F000"]);
/** A failure sorted by what to do about it: retry (ConnectionError) or give up (RejectedError). */
function classify(e, database) {
    if (e instanceof LeaderlockError)
        return e;
    if (isDbError(e)) {
        const code = e.code;
        if (NOT_INSTALLED.has(code))
            return new NotInstalledError(database ?? "(unknown)", e);
        if (code === "42501" || code.startsWith("28"))
            return new PrivilegeError(`${e.message} (SQLSTATE ${code})`, e);
        if (code.startsWith("22") && !slotsDiffer(e))
            return new BadArgumentError(`${e.message} (SQLSTATE ${code})`, e);
        if (code === "3D000")
            return new RejectedError(`${e.message} (SQLSTATE ${code})`, e);
        const standby = code === "25006" ? "; the server is a standby or read-only (with several hosts, target_session_attrs=read-write picks the primary)" : "";
        return new ConnectionError(`${e.message} (SQLSTATE ${code})${standby}`, e);
    }
    return new ConnectionError(e instanceof Error ? e.message : String(e), e);
}
