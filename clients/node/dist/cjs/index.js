"use strict";
Object.defineProperty(exports, "__esModule", { value: true });
exports.HistoryWatcher = exports.HistoryPrunedError = exports.RunLost = exports.SessionLost = exports.Elector = exports.NotAcquiredError = exports.LeaseLostError = exports.ConnectionError = exports.BadArgumentError = exports.PrivilegeError = exports.NotInstalledError = exports.RejectedError = exports.LeaseLost = exports.NotAcquired = exports.LeaderlockError = void 0;
exports.defaultId = defaultId;
exports.lead = lead;
exports.releaseOnSignals = releaseOnSignals;
exports.openSession = openSession;
exports.nextDue = nextDue;
exports.schedule = schedule;
exports.watchHistory = watchHistory;
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
// deadline; contract 22) and the history of transitions (watchHistory():
// each transition once, in order, across lost connections; contract 23),
// at the end of this file.
const node_events_1 = require("node:events");
const node_os_1 = require("node:os");
const node_crypto_1 = require("node:crypto");
const node_perf_hooks_1 = require("node:perf_hooks");
const node_module_1 = require("node:module");
const node_path_1 = require("node:path");
/**
 * Module `name` as this file finds it, else as the application finds it
 * (from its entry script, then its working directory), else undefined: a
 * folder installed with `npm install /path/to/clients/node` is a link,
 * Node resolves from its real path, outside the application's
 * node_modules, and npm installs none of the folder's dependencies.
 */
function requireHereOrInApp(name) {
    try {
        return require(name);
    }
    catch (e) {
        if (e?.code !== "MODULE_NOT_FOUND")
            throw e;
    }
    for (const from of [process.argv[1], (0, node_path_1.join)(process.cwd(), "[leaderlock]")]) {
        if (!from)
            continue;
        try {
            return (0, node_module_1.createRequire)(from)(name);
        }
        catch {
            // not there either
        }
    }
    return undefined;
}
/** `pg` (a peer dependency), here or in the application. */
function loadPg() {
    const found = requireHereOrInApp("pg");
    if (found)
        return found;
    throw new Error("leaderlock needs the package pg (8.x): npm install pg in your application. (A folder installed " +
        "as a link finds it from your application's entry script or working directory; " +
        "npm install --install-links copies the folder instead.)");
}
const pg = loadPg();
// One round trip each, bind parameters, arguments by name. No statement
// depends on the session's search_path (SECURITY.md; a database owner may
// put her own functions, operators, types and views first on it): every
// function and type of PostgreSQL's is written pg_catalog.name, every
// operator OPERATOR(pg_catalog.op), and every object of leaderlock
// @extschema@.name, where @extschema@ is the extension's schema as the
// server quoted it (FIND_SCHEMA, on each new connection), put in when the
// statement is sent (bounded()). test/statements.test.mjs checks them all.
const EXTSCHEMA = "@extschema@";
/**
 * The extension's schema, quoted by the server: where CREATE EXTENSION put
 * it, else (the portable edition, installed by its script) every schema
 * holding a le_capabilities(); $1 the schema named (the `schema` option or
 * LEADERLOCK_SCHEMA), or NULL. The same statement in every client.
 */
const FIND_SCHEMA = `SELECT pg_catalog.quote_ident(n.nspname::pg_catalog.text)
FROM pg_catalog.pg_namespace n
WHERE ($1::pg_catalog.text IS NULL OR n.nspname OPERATOR(pg_catalog.=) $1::pg_catalog.name)
  AND CASE WHEN EXISTS (SELECT FROM pg_catalog.pg_extension e
                        WHERE e.extname OPERATOR(pg_catalog.=) 'leaderlock'::pg_catalog.name)
      THEN n.oid OPERATOR(pg_catalog.=) ANY (ARRAY(
             SELECT e.extnamespace FROM pg_catalog.pg_extension e
             WHERE e.extname OPERATOR(pg_catalog.=) 'leaderlock'::pg_catalog.name))
      ELSE EXISTS (SELECT FROM pg_catalog.pg_proc p
                   WHERE p.pronamespace OPERATOR(pg_catalog.=) n.oid
                     AND p.proname OPERATOR(pg_catalog.=) 'le_capabilities'::pg_catalog.name
                     AND p.pronargs OPERATOR(pg_catalog.=) 0::pg_catalog.int2)
  END
ORDER BY 1`;
const TRY_ACQUIRE = "SELECT @extschema@.le_try_acquire(key => $1, id => $2, ttl => pg_catalog.make_interval(secs => $3)) AS ok";
// the term: a renewal extends that tenure only, never a later one of the same id
const RENEW = "SELECT @extschema@.le_renew(key => $1, id => $2, ttl => pg_catalog.make_interval(secs => $3), term => $4) AS ok";
// the term: a release sent in one tenure never ends a later one of the same id
const RELEASE = "SELECT @extschema@.le_release(key => $1, id => $2, term => $3) AS ok";
// Releases that heard no answer, by server, key and id: their term. Such a
// release may still reach the server, so a campaign under the same id sends
// it again, and hears an answer, before its first try: a try before that
// would extend the very tenure the late release then ends, while this
// process leads in it (docs/verification.md).
const unanswered = new Map();
const releaseSlot = (config, key, id) => JSON.stringify([typeof config === "string" ? config : [config.connectionString, config.host, config.port, config.database],
    key, id]);
// The same on a schema before 0.5.0 (no `term`): a client updated before the extension keeps working,
// without that protection (UPDATING.md).
const RENEW_LEGACY = "SELECT @extschema@.le_renew(key => $1, id => $2, ttl => pg_catalog.make_interval(secs => $3)) AS ok";
const RELEASE_LEGACY = "SELECT @extschema@.le_release(key => $1, id => $2) AS ok";
const LEGACY = new Map([[RENEW, RENEW_LEGACY], [RELEASE, RELEASE_LEGACY]]);
// After a release sent again was answered false: whether `id` still holds that tenure live
// (the release met its row locked by another transaction).
const HOLDS = "SELECT EXISTS (SELECT FROM @extschema@.le_holders(key => $1) " +
    "WHERE holder OPERATOR(pg_catalog.=) $2 AND term OPERATOR(pg_catalog.=) $3::bigint) AS ok";
const TERM_OF = "SELECT term::pg_catalog.text AS term FROM @extschema@.le_lease(key => $1) WHERE holder OPERATOR(pg_catalog.=) $2";
// live by the server's own lease clock: `remaining` is NULL unless live (expires_at is on
// that clock, le_now() where the server has one, which need not agree with clock_timestamp())
const STILL_OURS = "SELECT coalesce(holder OPERATOR(pg_catalog.=) $1 AND term OPERATOR(pg_catalog.=) $2::bigint " +
    "AND remaining IS NOT NULL, false) AS ok FROM @extschema@.le_lease(key => $3)";
const LEADER = "SELECT @extschema@.le_leader(key => $1) AS holder";
const ASSERT_LEADER = "SELECT @extschema@.le_assert_leader(key => $1, id => $2, term => $3::bigint)::pg_catalog.text AS term";
const PROCLAIM = "SELECT @extschema@.le_proclaim(key => $1, id => $2, value => $3::pg_catalog.jsonb) AS ok";
const WORKER_SERVES = "SELECT coalesce((@extschema@.le_capabilities() OPERATOR(pg_catalog.->>) 'worker')::boolean, true) AS ok";
const WORKER_RUNNING = "SELECT @extschema@.le_worker_running() AS ok";
const EXPIRE_LAPSED = "SELECT @extschema@.le_expire_lapsed() AS n";
const SESSION_KIND = "SELECT pg_catalog.current_setting('transaction_read_only') OPERATOR(pg_catalog.=) 'on' AS read_only, " +
    "pg_catalog.pg_is_in_recovery() AS standby";
const NOTIFY_PROBE = "SELECT pg_catalog.pg_notify('leaderlock_probe', $1)";
const UNDEFINED_FUNCTION = "42883";
/** le_assert_leader's refusal: the id is not the live holder in that term. */
const NOT_LEADER = "LE001";
/**
 * Notifications are hints, and any role may send them (docs/clients.md): a
 * hint brings the next try forward, but never to less than HINT_FLOOR ms
 * after the start of the previous one; hints that arrive meanwhile make
 * that one try, and the first hint after a quiet period is acted on at
 * once. The same rule, and the same name, in every leaderlock client.
 */
const HINT_FLOOR = 10;
/**
 * The DETAIL both editions give (SQLSTATE 22023) when a key with live
 * holders is asked for with another number of slots than it admits
 * (contract 17): the key is not ours now, not a request to give up.
 */
const SLOTS_DIFFER_DETAIL = "While a key has live holders, every acquisition must give the same slots.";
/** Reconnecting while waiting: the first pause, and the largest (each pause is jittered down to half). */
const BACKOFF_FIRST = 50;
const BACKOFF_MAX = 1000;
/** Whether the server refused a try because the key is held with another number of slots. */
function slotsDiffer(e) {
    return e?.code === "22023" && typeof e.detail === "string" && e.detail.startsWith(SLOTS_DIFFER_DETAIL);
}
// ---------------------------------------------------------------- errors
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
const NOT_INSTALLED = new Set([UNDEFINED_FUNCTION, "42P01", "3F000"]);
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
function defaultId() {
    return `${(0, node_os_1.hostname)()}:${process.pid}:${(0, node_crypto_1.randomBytes)(4).toString("hex")}`;
}
const now = () => node_perf_hooks_1.performance.now();
/** Node's timers hold at most 2^31 - 1 ms (a longer delay fires after 1 ms): longer ones fire early, and their callers check. */
const MAX_DELAY = 2 ** 31 - 1;
function later(fn, ms) {
    return setTimeout(fn, Math.min(Math.max(ms, 0), MAX_DELAY));
}
/** No single call waits longer than this (a longer ttl still renews every ttl/3). */
const MAX_CALL = 60_000;
function timing(options) {
    const ttl = options.ttl ?? 10;
    if (!(typeof ttl === "number" && ttl > 0 && Number.isFinite(ttl)))
        throw new BadArgumentError(`ttl must be a positive number of seconds, not ${ttl}`);
    if (options.poll !== undefined && !(options.poll > 0))
        throw new BadArgumentError(`poll must be a positive number of seconds, not ${options.poll}`);
    if (options.timeout != null && !(options.timeout >= 0))
        throw new BadArgumentError(`timeout must be at least 0, not ${options.timeout}`);
    const ms = ttl * 1000;
    return {
        ttl, renewEvery: ms / 3, margin: ms / 200, callTimeout: Math.min(Math.max(ms / 3, 100), MAX_CALL),
        retryEvery: Math.min(Math.max(ms / 10, 50), 1000), poll: options.poll === undefined ? undefined : options.poll * 1000,
    };
}
function pollEvery(t, worker, notifications) {
    if (t.poll !== undefined)
        return t.poll;
    if (!worker)
        return Math.min(Math.max(t.ttl * 250, 100), 1000); // ttl/4: nobody announces an expiry
    return notifications ? Math.max(t.ttl * 500, 1000) : 1000;
}
/** The n-th pause between reconnections: doubling from BACKOFF_FIRST to BACKOFF_MAX, jittered down to half. */
function backoff(n) {
    const ms = Math.min(BACKOFF_MAX, BACKOFF_FIRST * 2 ** Math.min(n, 16));
    return ms / 2 + Math.random() * (ms / 2);
}
function checkName(what, v) {
    if (typeof v !== "string" || v === "")
        throw new BadArgumentError(`${what} must be a non-empty string`);
    return v;
}
// ---------------------------------------------------------------- connecting
const SESSION_ATTRS = ["any", "read-write", "read-only", "primary", "standby", "prefer-standby"];
function sessionAttrs(v) {
    if (v == null || v === "")
        return "any";
    if (!SESSION_ATTRS.includes(v)) {
        throw new BadArgumentError(`target_session_attrs must be one of ${SESSION_ATTRS.join(", ")}, not ${JSON.stringify(v)}`);
    }
    return v;
}
/** One connection string per host of `url` (postgres[ql]://[userinfo@]h1[:p1],h2[:p2][/db][?...]), and its target_session_attrs. */
function splitUrl(url) {
    const m = /^(postgres(?:ql)?:\/\/)([^/?#]*)(.*)$/s.exec(url);
    if (!m)
        return { urls: [url], attrs: undefined };
    const [, scheme, authority, rest] = m;
    const at = authority.lastIndexOf("@");
    const userinfo = at >= 0 ? authority.slice(0, at + 1) : "";
    const hostlist = authority.slice(at + 1);
    const q = rest.indexOf("?");
    const path = q >= 0 ? rest.slice(0, q) : rest;
    const params = new URLSearchParams(q >= 0 ? rest.slice(q + 1).split("#")[0] : "");
    const attrs = params.get("target_session_attrs") ?? undefined;
    const hosts = hostlist.split(",");
    let database;
    try {
        database = decodeURIComponent(path.replace(/^\//, "").split("#")[0]) || undefined;
    }
    catch {
        database = undefined;
    }
    if (hosts.length === 1 && attrs === undefined)
        return { urls: [url], attrs, database };
    params.delete("target_session_attrs");
    const query = params.toString();
    return { urls: hosts.map((h) => `${scheme}${userinfo}${h}${path}${query ? `?${query}` : ""}`), attrs, database };
}
function targets(config) {
    if (typeof config === "string") {
        const { urls, attrs, database } = splitUrl(config);
        return { hosts: urls.map((u) => ({ connectionString: u })), attrs: sessionAttrs(attrs), database };
    }
    const { target_session_attrs, ...rest } = config;
    if (typeof rest.connectionString === "string") {
        const { urls, attrs, database } = splitUrl(rest.connectionString);
        return { hosts: urls.map((u) => ({ ...rest, connectionString: u })), attrs: sessionAttrs(target_session_attrs ?? attrs),
            database: database ?? rest.database };
    }
    const hosts = typeof rest.host === "string" && rest.host.includes(",") ? rest.host.split(",") : [rest.host];
    const ports = typeof rest.port === "string" && rest.port.includes(",")
        ? rest.port.split(",").map(Number) : hosts.map(() => rest.port);
    if (ports.length !== hosts.length)
        throw new BadArgumentError(`${hosts.length} hosts but ${ports.length} ports`);
    return { hosts: hosts.map((host, i) => ({ ...rest, host, port: ports[i] })), attrs: sessionAttrs(target_session_attrs),
        database: rest.database };
}
/** The database a configuration names (for messages). */
function databaseOf(config) {
    try {
        return targets(config).database;
    }
    catch {
        return undefined;
    }
}
function where(h) {
    if (h.connectionString) {
        const m = /^postgres(?:ql)?:\/\/(?:[^@/?#]*@)?([^/?#]*)/.exec(h.connectionString);
        return m?.[1] || "the default host";
    }
    return `${h.host ?? "the default host"}${h.port ? `:${h.port}` : ""}`;
}
/** The `schema` option, else LEADERLOCK_SCHEMA (read now), else null. */
function schemaOf(option) {
    const named = option ?? (process.env.LEADERLOCK_SCHEMA || null);
    if (named !== null && (typeof named !== "string" || named === "")) {
        throw new BadArgumentError(`schema must be a non-empty string, not ${JSON.stringify(named)}`);
    }
    return { named };
}
/** Each connection's leaderlock schema, as the server quoted it: what bounded() puts for @extschema@. */
const extSchemas = new WeakMap();
/** `text` naming `schema` (quoted by the server) where it says @extschema@. */
function inSchema(text, schema) {
    if (!text.includes(EXTSCHEMA))
        return text;
    if (schema === undefined)
        throw new LeaderlockError("leaderlock: a statement before its schema was found");
    return text.replaceAll(EXTSCHEMA, schema);
}
/**
 * Finds leaderlock's schema on a new connection (FIND_SCHEMA): the one
 * schema, else NotInstalledError (none) or BadArgumentError (several: the
 * `schema` option or LEADERLOCK_SCHEMA must name one).
 */
async function findSchema(c, until, schema, database) {
    const found = (await bounded(c, until, FIND_SCHEMA, [schema.named])).map((r) => Object.values(r)[0]);
    if (found.length === 0)
        throw new NotInstalledError(database ?? "(unknown)", undefined, schema.named);
    if (found.length > 1) {
        throw new BadArgumentError(`leaderlock's functions are in several schemas of database ${database ?? "(unknown)"}: ` +
            `${found.map((f) => JSON.stringify(f)).join(", ")}; name the one to use with the schema ` +
            "option or LEADERLOCK_SCHEMA");
    }
    extSchemas.set(c, found[0]);
    schema.found = found[0];
}
/** One host, given up after `timeoutMs` (a frozen server accepts and never answers). */
async function connectOne(h, timeoutMs, applicationName = "leaderlock node") {
    const c = new pg.Client({ application_name: applicationName, ...h,
        connectionTimeoutMillis: Math.min(Math.max(Math.ceil(timeoutMs), 1), MAX_DELAY) });
    c.on("error", () => { }); // a dropped connection surfaces as the next call's error
    try {
        await c.connect();
    }
    catch (e) {
        drop(c);
        throw e;
    }
    return c;
}
/**
 * A connection to the first host (in order) that answers and, per
 * target_session_attrs, is the kind of session asked for; prefer-standby
 * goes round the hosts once for a standby, then takes any. Its leaderlock
 * schema is found before it is returned (findSchema). Throws a
 * RejectedError when a host refused for good and none would do, else a
 * ConnectionError.
 */
async function connect(config, schema, timeoutMs, applicationName) {
    const { hosts, attrs, database } = targets(config);
    const rounds = attrs === "prefer-standby" ? ["standby", "any"] : [attrs];
    let rejected;
    let last;
    for (const want of rounds) {
        for (const h of hosts) {
            let c = null;
            try {
                c = await connectOne(h, timeoutMs, applicationName);
                const by = now() + timeoutMs;
                if (want !== "any") {
                    const kind = (await bounded(c, by, SESSION_KIND))[0];
                    const fits = want === "read-write" ? !kind.read_only : want === "read-only" ? kind.read_only
                        : want === "primary" ? !kind.standby : kind.standby;
                    if (!fits) {
                        drop(c);
                        last = new ConnectionError(`${where(h)} is ${kind.standby ? "a standby" : kind.read_only ? "read-only" : "read-write"}, ` +
                            `not ${want} (target_session_attrs)`);
                        continue;
                    }
                }
                await findSchema(c, by, schema, c.database ?? database);
                return c;
            }
            catch (e) {
                const err = classify(e, c?.database ?? database);
                drop(c);
                if (err instanceof ConnectionError)
                    last = err;
                else
                    rejected ??= err;
            }
        }
    }
    throw rejected ?? last ?? new ConnectionError("no host to connect to");
}
/** The rows of `text`, the call abandoned (TimeoutError) at `until`. */
/** RENEW or RELEASE naming the tenure's term (the last value); on a schema before 0.5.0, without it. */
async function callNamed(c, until, text, values) {
    try {
        return (await bounded(c, until, text, values))[0].ok;
    }
    catch (e) {
        if (!isDbError(e) || e.code !== UNDEFINED_FUNCTION)
            throw e;
        return (await bounded(c, until, LEGACY.get(text), values.slice(0, -1)))[0].ok;
    }
}
/**
 * Sends again the release under this id that heard no answer, if any; false while the tenure it ends
 * is still held (its row was locked), when the campaign must not try yet.
 */
async function releaseAgain(c, until, slot, key, id) {
    const term = unanswered.get(slot);
    if (term === undefined)
        return true;
    if (!(await callNamed(c, until, RELEASE, [key, id, term]))) {
        try {
            if ((await bounded(c, until, HOLDS, [key, id, term]))[0].ok)
                return false;
        }
        catch (e) {
            if (!isDbError(e) || e.code !== UNDEFINED_FUNCTION)
                throw e; // before 0.5.0: nothing to go by
        }
    }
    if (unanswered.get(slot) === term)
        unanswered.delete(slot);
    return true;
}
async function bounded(c, until, text, values = []) {
    const left = Math.floor(until - now());
    if (left <= 0)
        throw new TimeoutError("the call's time ran out");
    const query = { text: inSchema(text, extSchemas.get(c)), values, query_timeout: Math.min(left, MAX_DELAY) };
    return (await c.query(query)).rows;
}
class TimeoutError extends Error {
}
function drop(c) {
    if (!c)
        return;
    // end() waits for the server; a frozen one may never answer
    c.connection?.stream?.destroy();
    c.end().catch(() => { });
}
async function workerServes(c, until) {
    try {
        return (await bounded(c, until, WORKER_SERVES))[0].ok;
    }
    catch (e) {
        if (e?.code !== UNDEFINED_FUNCTION)
            throw e;
        return (await bounded(c, until, WORKER_RUNNING))[0].ok; // before 0.5.0
    }
}
/** Whether a notification this session sends itself comes back (not behind transaction pooling). */
async function probe(c, until) {
    const token = (0, node_crypto_1.randomBytes)(8).toString("hex");
    let heard = () => { };
    const back = new Promise((resolve) => {
        const timer = later(() => resolve(false), 200);
        heard = (n) => { if (n.channel === "leaderlock_probe" && n.payload === token) {
            clearTimeout(timer);
            resolve(true);
        } };
        c.on("notification", heard);
    });
    try {
        await bounded(c, until, "LISTEN leaderlock_probe");
        await bounded(c, until, NOTIFY_PROBE, [token]);
        return await back;
    }
    finally {
        c.off("notification", heard);
    }
}
function frees(payload, key) {
    try {
        const a = JSON.parse(payload ?? "");
        return a?.key === key && (a.event === "released" || a.event === "expired");
    }
    catch {
        return false;
    }
}
/**
 * Until a notification says `key` is free (a hint only; never sooner than
 * HINT_FLOOR after `lastTry`, the start of the last try: hints heard
 * meanwhile make one try), `ms` pass, the connection ends, or `stop` aborts.
 * `heardAt`: when the campaign last heard such a hint; one heard since
 * `lastTry` began (while that try was in flight, when no wait listened)
 * counts too, or a release announced during a try would wait for the poll.
 */
function hint(c, key, ms, lastTry, stop, heardAt = -Infinity) {
    return new Promise((resolve) => {
        const done = () => {
            clearTimeout(timer);
            c.off("notification", heard);
            c.off("end", done);
            stop?.removeEventListener("abort", done);
            resolve();
        };
        let until = now() + Math.max(ms, 0);
        const heard = (n) => {
            if (!frees(n.payload, key))
                return;
            const due = Math.max(now(), lastTry + HINT_FLOOR);
            if (due >= until)
                return; // a try is due by then anyway
            until = due;
            clearTimeout(timer);
            timer = later(done, due - now());
        };
        if (heardAt >= lastTry)
            until = Math.min(until, Math.max(now(), lastTry + HINT_FLOOR));
        let timer = later(done, until - now());
        c.on("notification", heard);
        c.on("end", done); // dropped: the next call fails and the candidate reconnects
        stop?.addEventListener("abort", done);
    });
}
/** `ms`, or until `stop` aborts. */
function pause(ms, stop) {
    return new Promise((resolve) => {
        const done = () => {
            clearTimeout(timer);
            stop?.removeEventListener("abort", done);
            resolve();
        };
        const timer = later(done, Math.max(ms, 0));
        stop?.addEventListener("abort", done);
    });
}
class Stopped extends Error {
}
/**
 * Tries on one connection until it leads (the send time of the winning try
 * + ttl - margin is its deadline), `giveUp` passes (NotAcquired) or `stop`
 * aborts; any other failure is thrown for elect() to sort.
 */
async function campaign(c, key, id, t, giveUp, stop, refused, value, answered, slot) {
    const by = now() + t.callTimeout;
    const worker = await workerServes(c, by);
    answered();
    let expire = !worker;
    await bounded(c, by, "LISTEN leaderlock");
    const notifications = await probe(c, by);
    let slotsDiffered = false; // the last try met the key held with other slots
    // Hints heard at any time, tries in flight included (see hint()).
    let heardAt = -Infinity;
    const heardFree = (n) => {
        if (frees(n.payload, key))
            heardAt = now();
    };
    c.on("notification", heardFree);
    try {
        for (;;) {
            if (stop?.aborted)
                throw new Stopped();
            const lastTry = now();
            // a release under this id that heard no answer may still arrive: send it again, and hear the answer, first
            const free = await releaseAgain(c, now() + t.callTimeout, slot, key, id);
            if (free && expire) {
                try {
                    await bounded(c, now() + t.callTimeout, EXPIRE_LAPSED);
                }
                catch (e) {
                    // refused (or missing before 0.5.0): the try takes a lapsed lease anyway, unannounced
                    if (!isDbError(e))
                        throw e; // the connection, not the server
                    expire = false;
                }
            }
            const sent = now();
            let won = false;
            try {
                // (not while the tenure that release ends is still held: its row was locked)
                if (free)
                    won = (await bounded(c, sent + t.callTimeout, TRY_ACQUIRE, [key, id, t.ttl]))[0].ok;
                slotsDiffered = false;
            }
            catch (e) {
                if (!slotsDiffer(e))
                    throw e;
                // held with another number of slots: not ours now, a refusal
                if (!slotsDiffered) {
                    process.emitWarning(`leaderlock: key ${JSON.stringify(key)} is held with another number of slots: ` +
                        `not ours now; trying again until those tenures end (server: ${JSON.stringify(String(e.message))})`);
                }
                slotsDiffered = true;
            }
            if (won) {
                const rows = await bounded(c, sent + t.callTimeout, TERM_OF, [key, id]);
                if (rows.length) {
                    if (value !== undefined) {
                        await bounded(c, sent + t.callTimeout, PROCLAIM, [key, id, JSON.stringify(value)]);
                    }
                    return { term: Number(rows[0].term), deadline: sent + t.ttl * 1000 - t.margin };
                }
            }
            const n = now();
            if (refused || n >= giveUp) {
                const holder = (await bounded(c, n + t.callTimeout, LEADER, [key]))[0].holder;
                refused?.(holder);
                if (n >= giveUp)
                    throw new NotAcquired(key, holder);
            }
            await hint(c, key, Math.min(pollEvery(t, worker, notifications), giveUp - n), lastTry, stop, heardAt);
        }
    }
    finally {
        c.off("notification", heardFree);
    }
}
/** The winning connection, done listening (null when that failed: the first renewal connects anew). */
async function quiet(c, t) {
    try {
        await bounded(c, now() + t.callTimeout, "UNLISTEN *");
        return c;
    }
    catch {
        drop(c);
        return null;
    }
}
/**
 * Campaigns until it leads, across connections: whatever breaks the
 * connection or the server for a while (a restart, a failover, a dropped
 * connection, a standby) is retried on a new connection after a jittered
 * pause, until the timeout (then the last ConnectionError, or NotAcquired
 * when the last try was refused). A RejectedError ends it at once; `stop`
 * with Stopped.
 */
async function elect(config, key, id, t, o) {
    // releaseOnSignals has released and the process is on its way out: no new campaign starts
    if (exiting)
        await new Promise(() => { });
    const giveUp = o.timeout == null ? Infinity : now() + o.timeout * 1000;
    let failures = 0;
    for (;;) {
        if (o.stop?.aborted)
            throw new Stopped();
        let c = null;
        try {
            const connectFor = Math.min(Math.max(t.callTimeout, 2000), Math.max(giveUp - now(), 1000));
            c = await connect(config, o.schema, connectFor);
            const won = await campaign(c, key, id, t, giveUp, o.stop, o.refused, o.value, () => { failures = 0; }, releaseSlot(config, key, id));
            return { ...won, conn: c };
        }
        catch (e) {
            const database = c?.database ?? databaseOf(config);
            drop(c);
            if (o.stop?.aborted || e instanceof Stopped)
                throw new Stopped();
            const err = classify(e, database);
            if (!(err instanceof ConnectionError))
                throw err;
            if (now() >= giveUp)
                throw err;
            const ms = Math.min(backoff(failures++), giveUp - now());
            o.retrying?.(err, ms);
            await pause(ms, o.stop);
        }
    }
}
// ---------------------------------------------------------------- the lease
const abortedOf = Object.getOwnPropertyDescriptor(AbortSignal.prototype, "aborted").get;
const reasonOf = Object.getOwnPropertyDescriptor(AbortSignal.prototype, "reason").get;
/** Makes `signal`'s `aborted`, `reason` and `throwIfAborted()` call `expire` first (it aborts the signal once the deadline has passed). */
function readsTheClock(signal, expire) {
    Object.defineProperty(signal, "aborted", { configurable: true, get: () => { expire(); return abortedOf.call(signal); } });
    Object.defineProperty(signal, "reason", { configurable: true, get: () => { expire(); return reasonOf.call(signal); } });
    Object.defineProperty(signal, "throwIfAborted", {
        configurable: true, value: () => { if (signal.aborted)
            throw signal.reason; },
    });
}
/** Lease.guard: le_assert_leader(key, id, term) in the caller's transaction; LeaseLost "fenced" (the lease ends) on LE001. */
async function guardWith(l, client) {
    l.check();
    let rows;
    try {
        const text = inSchema(ASSERT_LEADER, l.schema.found);
        rows = (await client.query({ text, values: [l.key, l.id, String(l.term)] })).rows;
    }
    catch (e) {
        if (e?.code === NOT_LEADER)
            throw l.lose("fenced", `the server refused a guarded write: ${e.message}`, e);
        throw e;
    }
    return Number(rows[0].term);
}
/** Lease.guarded: BEGIN, guardWith, fn(tx), COMMIT; ROLLBACK on any error. */
async function guardedWith(l, db, fn) {
    l.check();
    const pooled = typeof db.connect === "function" && typeof db.totalCount === "number";
    const tx = pooled ? await db.connect() : db;
    let broken;
    try {
        await tx.query({ text: "BEGIN" });
        try {
            await guardWith(l, tx);
            const result = await fn(tx);
            // COMMIT of a transaction an error aborted rolls back, and says so
            if ((await tx.query({ text: "COMMIT" })).command === "ROLLBACK") {
                throw new LeaderlockError("the guarded transaction was rolled back: a statement in it had failed");
            }
            return result;
        }
        catch (e) {
            await tx.query({ text: "ROLLBACK" }).catch((re) => { broken = re; });
            throw e;
        }
    }
    finally {
        if (pooled)
            tx.release?.(broken);
    }
}
/**
 * A local deadline kept by a renewal every ttl/3 on a connection of its own
 * (a lease's, a session's): every reader checks the clock, a timer enforces
 * the deadline whatever a renewal is doing, and a renewal that fails is
 * tried again every ttl/10 until the deadline. Subclasses say what one
 * renewal is (`renewOnce`) and what losing means (`lose`).
 */
class Renewing {
    deadline;
    conn;
    config;
    schema;
    t;
    controller = new AbortController();
    watchdog;
    timer;
    stopped = false;
    running;
    constructor(deadline, conn, config, schema, t) {
        this.deadline = deadline;
        this.conn = conn;
        this.config = config;
        this.schema = schema;
        this.t = t;
        // The signal's own `aborted` and `reason` read the clock first: after a
        // pause of the process, code that looks at the signal before the timer
        // below has run still sees the deadline.
        readsTheClock(this.controller.signal, () => this.expireIfDue());
        this.arm();
        this.schedule(deadline + t.margin - t.ttl * 1000 + t.renewEvery);
    }
    get signal() { return this.controller.signal; }
    get lost() { return abortedOf.call(this.controller.signal); }
    /** Ends it once the local deadline has passed: called by every reader, and by the timer. */
    expireIfDue() {
        if (!this.lost && now() >= this.deadline)
            this.lose("deadline", "no renewal succeeded before the local deadline");
    }
    get valid() {
        this.expireIfDue();
        return !this.lost;
    }
    get alive() { return this.valid; }
    get remaining() { return this.valid ? Math.max(0, this.deadline - now()) : 0; }
    disarm() { clearTimeout(this.watchdog); }
    /** The local deadline, enforced by a timer whatever a renewal is doing (the readers check the clock as well). */
    arm() {
        clearTimeout(this.watchdog);
        this.watchdog = later(() => {
            this.expireIfDue();
            if (!this.lost)
                this.arm(); // a timer may fire a little early, or a renewal moved the deadline
        }, Math.max(0, this.deadline - now()));
    }
    schedule(at) {
        if (this.stopped)
            return;
        this.timer = later(() => { this.running = this.renew(); }, Math.max(0, at - now()));
    }
    async renew() {
        if (this.stopped || !this.valid)
            return;
        const start = now();
        // one call may take ttl/3 at most (then reconnect and retry), never past the deadline
        const by = Math.min(start + this.t.callTimeout, this.deadline);
        try {
            this.conn ??= await connect(this.config, this.schema, by - now());
            const sent = now();
            const outcome = await this.renewOnce(this.conn, by);
            if (outcome === true) {
                if (!this.valid)
                    return; // the deadline passed meanwhile: a loss is final
                this.deadline = sent + this.t.ttl * 1000 - this.t.margin;
                this.arm();
                return this.schedule(sent + this.t.renewEvery);
            }
            if (outcome === "retry")
                return this.schedule(start + this.t.retryEvery);
            this.lose("refused", outcome);
        }
        catch (e) {
            drop(this.conn);
            this.conn = null;
            const err = classify(e, databaseOf(this.config));
            if (err instanceof ConnectionError)
                return this.schedule(start + this.t.retryEvery);
            this.lose("rejected", `a renewal was refused for good: ${err.message}`, err);
        }
    }
    /** Stops renewing; waits for a renewal in flight, ttl/3 and a second at most. Whether it hung. */
    async stopRenewing() {
        this.stopped = true;
        clearTimeout(this.timer);
        if (!this.running)
            return false;
        let timer;
        const hung = await Promise.race([this.running.then(() => false),
            new Promise((r) => { timer = later(() => r(true), this.t.callTimeout + 1000); })]);
        clearTimeout(timer);
        return hung;
    }
}
class Tenure extends Renewing {
    key;
    id;
    term;
    value;
    finishing;
    constructor(key, id, term, deadline, conn, config, schema, t, value = undefined) {
        super(deadline, conn, config, schema, t);
        this.key = key;
        this.id = id;
        this.term = term;
        this.value = value;
    }
    check() {
        if (!this.valid)
            throw reasonOf.call(this.controller.signal);
    }
    lose(reason, detail, cause) {
        if (!this.lost) {
            this.controller.abort(new LeaseLost(this.key, this.term, reason, detail, cause === undefined ? undefined : { cause }));
        }
        this.disarm();
        return reasonOf.call(this.controller.signal);
    }
    guard(client) { return guardWith(this, client); }
    guarded(db, fn) {
        return guardedWith(this, db, fn);
    }
    async renewOnce(conn, by) {
        if (await callNamed(conn, by, RENEW, [this.key, this.id, this.t.ttl, String(this.term)]))
            return true;
        if ((await bounded(conn, by, STILL_OURS, [this.id, String(this.term), this.key]))[0].ok)
            return "retry";
        return "the server refused the renewal (lease lapsed or taken)";
    }
    release() { return this.finish(); }
    /** Stops renewing and hands over at once when the lease is still ours (once; later calls get the same answer). */
    finish() {
        this.finishing ??= this.handOver();
        return this.finishing;
    }
    async handOver() {
        const hung = await this.stopRenewing();
        let released = false;
        if (!hung && this.valid) {
            this.lose("released", "released");
            const by = now() + this.t.callTimeout;
            try {
                this.conn ??= await connect(this.config, this.schema, this.t.callTimeout);
                released = await callNamed(this.conn, by, RELEASE, [this.key, this.id, String(this.term)]);
            }
            catch {
                released = false;
                unanswered.set(releaseSlot(this.config, this.key, this.id), String(this.term));
            }
        }
        this.lose("released", "released");
        this.disarm();
        drop(this.conn);
        this.conn = null;
        return released;
    }
}
/**
 * Runs `body` while this process leads `key`; resolves with its result.
 * Waiting survives the connection (restarts, failovers, drops: reconnects
 * until `timeout`). The body checks `lease.valid` / `lease.check()` before
 * each unit of work and fences its writes with `lease.guarded()`;
 * `lease.signal` aborts at a loss or at the local deadline. Rejects with
 * NotAcquired (or ConnectionError, the server unreachable) when `timeout`
 * passes, a RejectedError (NotInstalledError, PrivilegeError,
 * BadArgumentError) at once, `options.signal`'s reason when it aborts.
 */
async function lead(config, key, options, body) {
    checkName("key", key);
    const id = options.id === undefined ? defaultId() : checkName("id", options.id);
    const t = timing(options);
    const schema = schemaOf(options.schema);
    const stop = options.signal;
    let won;
    try {
        won = await elect(config, key, id, t, { schema, timeout: options.timeout, stop, value: options.value });
    }
    catch (e) {
        if (e instanceof Stopped)
            throw stop.reason;
        throw e;
    }
    const tenure = new Tenure(key, id, won.term, won.deadline, await quiet(won.conn, t), config, schema, t, options.value);
    const onAbort = () => { void tenure.release(); };
    stop?.addEventListener("abort", onAbort);
    if (stop?.aborted)
        onAbort();
    try {
        return await body(tenure);
    }
    finally {
        stop?.removeEventListener("abort", onAbort);
        await tenure.finish();
    }
}
/**
 * Campaigns until stop(), again after each loss. Events: "elected"
 * (lease), "revoked" (reason, lease), "leader" (holder, or null when
 * vacant), "retrying" (ConnectionError, ms: the server is unreachable; it
 * reconnects after ms), "error" (RejectedError: a refusal retrying cannot
 * change; emitted once, the elector has stopped, `failed` holds it).
 */
class Elector extends node_events_1.EventEmitter {
    config;
    key;
    options;
    stopper = new AbortController();
    loop;
    schema;
    id;
    /** The error that stopped this elector, if one did. */
    failed;
    constructor(config, key, options = {}) {
        super();
        this.config = config;
        this.key = key;
        this.options = options;
        checkName("key", key);
        this.id = options.id === undefined ? defaultId() : checkName("id", options.id);
        timing(options);
        this.schema = schemaOf(options.schema);
    }
    start() {
        this.loop ??= this.run().catch((e) => this.fail(classify(e, databaseOf(this.config))));
        return this;
    }
    /** Whether it campaigns or leads: started, not stopped, not failed. */
    get running() { return this.loop !== undefined && !this.stopper.signal.aborted && !this.failed; }
    /** A listener that throws must not stop the elector with a lease it would neither renew nor release. */
    tell(event, ...args) {
        try {
            this.emit(event, ...args);
        }
        catch (e) {
            process.emitWarning(`leaderlock: a listener of "${event}" threw: ${e}`);
        }
    }
    /** Reports the error that stops it, once: to "error" listeners, else as a process warning. */
    fail(e) {
        if (this.failed)
            return;
        this.failed = e;
        if (this.listenerCount("error"))
            this.tell("error", e);
        else
            process.emitWarning(`leaderlock: the elector of ${JSON.stringify(this.key)} stopped: ${e.message}`);
    }
    /** Stops campaigning; releases a lease it holds (hands over at once). */
    async stop() {
        this.stopper.abort();
        await this.loop;
    }
    async run() {
        const t = timing(this.options);
        const stop = this.stopper.signal;
        let seen = undefined;
        const refused = (holder) => {
            if (holder !== seen)
                this.tell("leader", (seen = holder));
        };
        while (!stop.aborted) {
            let won;
            try {
                won = await elect(this.config, this.key, this.id, t, {
                    schema: this.schema, timeout: null, stop, refused, value: this.options.value,
                    retrying: (err, ms) => this.tell("retrying", err, ms),
                });
            }
            catch (e) {
                if (e instanceof Stopped)
                    return;
                return this.fail(classify(e, databaseOf(this.config)));
            }
            const tenure = new Tenure(this.key, this.id, won.term, won.deadline, await quiet(won.conn, t), this.config, this.schema, t, this.options.value);
            let released = false;
            try {
                this.tell("leader", (seen = this.id));
                this.tell("elected", tenure);
                await new Promise((resolve) => {
                    if (tenure.signal.aborted || stop.aborted)
                        return resolve();
                    const done = () => {
                        tenure.signal.removeEventListener("abort", done);
                        stop.removeEventListener("abort", done);
                        resolve();
                    };
                    tenure.signal.addEventListener("abort", done);
                    stop.addEventListener("abort", done);
                });
            }
            finally {
                released = await tenure.finish();
            }
            const lost = tenure.signal.reason;
            this.tell("revoked", released ? "released" : lost.reason, tenure);
        }
    }
}
exports.Elector = Elector;
/** Set once releaseOnSignals has released for a signal and is ending the process. */
let exiting = false;
/**
 * Opt-in: on SIGTERM or SIGINT (or `options.signals`), release `target` (a
 * Lease: release(); an Elector: stop(); a Session: close(), every key at
 * once), so the next candidate leads at
 * once, then end the process as the signal would have (`options.exit`
 * false: leave that to you). From the signal on, no lead() or Elector of
 * this process starts a new campaign. For a Lease (or a Session) the
 * handlers go when it ends; a second signal while releasing takes its usual course.
 * Returns a function that removes the handlers.
 */
function releaseOnSignals(target, options = {}) {
    const signals = options.signals ?? ["SIGTERM", "SIGINT"];
    const exit = options.exit ?? true;
    const lease = target instanceof Elector ? null : target; // a Lease, or a Session: its end removes the handlers
    const handler = (sig) => {
        undo();
        if (exit)
            exiting = true;
        const done = target instanceof Elector ? target.stop()
            : target instanceof OpenSession ? target.close() : target.release();
        void done.catch(() => false).then(() => {
            if (!exit)
                return;
            // as the signal would have: its default action where nobody else listens, else its status
            if (process.listenerCount(sig) === 0)
                process.kill(process.pid, sig);
            else
                process.exit(128 + (node_os_1.constants.signals[sig] ?? 15));
        });
    };
    const undo = () => {
        for (const s of signals)
            process.off(s, handler);
        lease?.signal.removeEventListener("abort", undo);
    };
    for (const s of signals)
        process.on(s, handler);
    if (lease) {
        if (lease.signal.aborted)
            undo();
        else
            lease.signal.addEventListener("abort", undo);
    }
    return undo;
}
// ---------------------------------------------------------------- sessions (contract 21)
//
// Many keys under one ttl (docs/sessions.md): the process opens a session
// (le_open_session), acquires its keys under it (le_try_acquire_in,
// le_acquire_in), renews the session alone every ttl/3 on a connection of
// its own (le_renew_session: one row written however many keys it holds),
// and closes it (le_close_session: every key vacated at once). The session
// has a lease's local deadline (the send time of the open or of the last
// successful renewal + ttl - ttl/200), read from the clock at each
// question; a lease of it is alive while the session is and its key was
// not released. Acquisitions and releases run on other connections (a few
// kept idle), so a waiting acquire never holds a renewal back.
const OPEN_SESSION = "SELECT @extschema@.le_open_session(id => $1, ttl => pg_catalog.make_interval(secs => $2), " +
    "lock_delay => pg_catalog.make_interval(secs => $3), keep_values => $4)::pg_catalog.text AS session";
const RENEW_SESSION = "SELECT @extschema@.le_renew_session(session => $1::pg_catalog.uuid) AS ok";
const CLOSE_SESSION = "SELECT @extschema@.le_close_session(session => $1::pg_catalog.uuid) AS ok";
const TRY_ACQUIRE_IN = "SELECT @extschema@.le_try_acquire_in(session => $1::pg_catalog.uuid, key => $2, " +
    "value => $3::pg_catalog.jsonb) AS ok";
const ACQUIRE_IN = "SELECT @extschema@.le_acquire_in(session => $1::pg_catalog.uuid, key => $2, " +
    "wait => pg_catalog.make_interval(secs => $3), value => $4::pg_catalog.jsonb, priority => $5) AS ok";
/** In the acquisition's transaction: the key's term, held by this session. */
const TERM_IN = "SELECT term::pg_catalog.text AS term FROM @extschema@.leaderlock WHERE key OPERATOR(pg_catalog.=) $1 " +
    "AND holder OPERATOR(pg_catalog.=) $2 AND session OPERATOR(pg_catalog.=) $3::pg_catalog.uuid";
/** After a refused acquisition: who holds the key, and whether the session still has its row on the server (gone: it ended there). */
const AFTER_REFUSAL = "SELECT @extschema@.le_leader(key => $1) AS holder, " +
    "EXISTS (SELECT FROM @extschema@.leaderlock_sessions WHERE session OPERATOR(pg_catalog.=) $2::pg_catalog.uuid) AS live";
/** How many idle connections a session keeps for acquisitions and releases. */
const IDLE_CONNECTIONS = 4;
/** The session is gone (see `reason`): so is every lease of it. `key` is "" and `term` 0 (a session has neither). */
class SessionLost extends LeaseLost {
    session;
    id;
    constructor(session, id, reason, detail, options) {
        super("", 0, reason, detail, options);
        this.session = session;
        this.id = id;
        this.message = `lost the session ${session} of ${JSON.stringify(id)}: ${detail}`;
    }
}
exports.SessionLost = SessionLost;
const jsonOf = (value) => (value === undefined ? null : JSON.stringify(value));
class OpenSession extends Renewing {
    handle;
    id;
    closing;
    held = new Map();
    idle = [];
    constructor(handle, id, deadline, conn, config, schema, t) {
        super(deadline, conn, config, schema, t);
        this.handle = handle;
        this.id = id;
    }
    get ttl() { return this.t.ttl; }
    /** Why it ended (once lost). */
    get why() { return reasonOf.call(this.controller.signal); }
    get leases() { return [...this.held.values()]; }
    check() {
        if (!this.valid)
            throw this.why;
    }
    /** Ends the session, and every lease of it, for good (the first reason stays). */
    lose(reason, detail, cause) {
        if (!this.lost) {
            this.controller.abort(new SessionLost(this.handle, this.id, reason, detail, cause === undefined ? undefined : { cause }));
            const why = this.why;
            // (a lease of it may not exist yet while the session is constructed)
            for (const lease of this.held?.values() ?? [])
                lease.lose(why.reason, why.detail, why);
        }
        this.disarm();
        return this.why;
    }
    /** One le_renew_session: the deadline moves; refused, the session is lost. */
    async renewOnce(conn, by) {
        if ((await bounded(conn, by, RENEW_SESSION, [this.handle]))[0].ok)
            return true;
        return "the server refused the renewal: the session is not live there (closed, lapsed or unknown)";
    }
    async tryAcquire(key, options = {}) {
        checkName("key", key);
        this.check();
        const value = options?.value;
        const by = now() + this.t.callTimeout;
        const got = await this.take(key, value, by, TRY_ACQUIRE_IN, [this.handle, key, jsonOf(value)]);
        if (got instanceof KeyLease)
            return got;
        this.endedThere(got);
        return null;
    }
    async acquire(key, options) {
        checkName("key", key);
        const timeout = options?.timeout;
        if (!(typeof timeout === "number" && timeout >= 0 && Number.isFinite(timeout))) {
            throw new BadArgumentError(`timeout must be a number of seconds, at least 0, not ${timeout}`);
        }
        const priority = options.priority ?? 0;
        if (!Number.isInteger(priority))
            throw new BadArgumentError(`priority must be an integer, not ${priority}`);
        this.check();
        const by = now() + timeout * 1000 + this.t.callTimeout;
        const got = await this.take(key, options.value, by, ACQUIRE_IN, [this.handle, key, timeout, jsonOf(options.value), priority]);
        if (got instanceof KeyLease)
            return got;
        this.endedThere(got);
        throw new NotAcquired(key, got?.holder ?? null);
    }
    /** After a refused acquisition: SessionLost (the session ends here) when the server has no row of it any more. */
    endedThere(refused) {
        if (refused && !refused.live) {
            this.lose("refused", "the server has ended the session (an acquisition under it was refused and its row is gone)");
            this.check();
        }
    }
    /**
     * The acquisition `text` and the key's term, in one transaction: the
     * lease, or who holds the key and whether the session is live there
     * (null: a release of the key that heard no answer is still held).
     */
    take(key, value, by, text, values) {
        return this.withConn(by, async (c) => {
            if (!(await releaseAgain(c, by, releaseSlot(this.config, key, this.id), key, this.id)))
                return null;
            await bounded(c, by, "BEGIN");
            const won = (await bounded(c, by, text, values))[0].ok;
            const rows = won ? await bounded(c, by, TERM_IN, [key, this.id, this.handle]) : [];
            const after = rows.length ? null : (await bounded(c, by, AFTER_REFUSAL, [key, this.handle]))[0];
            await bounded(c, by, "COMMIT");
            if (!rows.length)
                return after ? { holder: after.holder ?? null, live: after.live } : null;
            const lease = new KeyLease(this, key, Number(rows[0].term), value);
            this.held.set(key, lease); // (the same id acquiring again keeps the term)
            return lease;
        });
    }
    async release(key) {
        checkName("key", key);
        return this.releaseKey(key);
    }
    /** Releases `key` (with the term of its lease; of any term when this process holds no lease of it); `lease`: only if it is the key's current one. */
    async releaseKey(key, lease) {
        const held = this.held.get(key);
        if (lease && held !== lease) {
            lease.lose("released", "released"); // an older lease of the key: it ends, the key stays held
            return false;
        }
        this.held.delete(key);
        held?.lose("released", "released");
        if (this.closing)
            return false;
        const term = held ? String(held.term) : null;
        const by = now() + this.t.callTimeout;
        try {
            return await this.withConn(by, async (c) => (await bounded(c, by, RELEASE, [key, this.id, term]))[0].ok);
        }
        catch (e) {
            if (!(e instanceof ConnectionError))
                throw e;
            // it may still arrive: sent again (and answered) before this key is acquired again
            if (term !== null)
                unanswered.set(releaseSlot(this.config, key, this.id), term);
            return false;
        }
    }
    /** One call on a connection of the pool (a new one when none is idle); a connection whose call failed is dropped. */
    async withConn(by, fn) {
        if (this.closing)
            throw new LeaderlockError("the session is closed");
        let c = this.idle.pop() ?? null;
        try {
            c ??= await connect(this.config, this.schema, Math.max(by - now(), this.t.callTimeout, 2000));
            const result = await fn(c);
            if (this.closing || this.idle.length >= IDLE_CONNECTIONS)
                drop(c);
            else
                this.idle.push(c);
            return result;
        }
        catch (e) {
            const database = c?.database ?? databaseOf(this.config);
            drop(c);
            throw classify(e, database);
        }
    }
    close() {
        this.closing ??= this.shutDown();
        return this.closing;
    }
    async shutDown() {
        this.lose("released", "the session was closed"); // every lease here first
        if (await this.stopRenewing()) {
            drop(this.conn);
            this.conn = null;
        }
        let closed = false;
        try {
            this.conn ??= await connect(this.config, this.schema, Math.max(this.t.callTimeout, 2000));
            closed = (await bounded(this.conn, now() + this.t.callTimeout, CLOSE_SESSION, [this.handle]))[0].ok;
        }
        catch (e) {
            process.emitWarning(`leaderlock: session ${this.handle} of ${JSON.stringify(this.id)}: could not close it ` +
                `(${JSON.stringify(String(e?.message ?? e))}); its keys lapse with its ttl`);
        }
        drop(this.conn);
        this.conn = null;
        for (const c of this.idle.splice(0))
            drop(c);
        this.held.clear();
        return closed;
    }
}
class KeyLease {
    session;
    key;
    term;
    value;
    controller = new AbortController();
    constructor(session, key, term, value) {
        this.session = session;
        this.key = key;
        this.term = term;
        this.value = value;
        readsTheClock(this.controller.signal, () => this.expireIfDue());
    }
    get id() { return this.session.id; }
    get schema() { return this.session.schema; }
    get signal() { return this.controller.signal; }
    get lost() { return abortedOf.call(this.controller.signal); }
    /** Ends the lease once its session is not valid (which reads the clock). */
    expireIfDue() {
        if (!this.lost && !this.session.valid) {
            const why = this.session.why;
            this.lose(why.reason, why.detail, why);
        }
    }
    get deadline() { return this.session.deadline; }
    get valid() {
        this.expireIfDue();
        return !this.lost;
    }
    get alive() { return this.valid; }
    get remaining() { return this.valid ? Math.max(0, this.deadline - now()) : 0; }
    check() {
        if (!this.valid)
            throw reasonOf.call(this.controller.signal);
    }
    lose(reason, detail, cause) {
        if (!this.lost) {
            this.controller.abort(new LeaseLost(this.key, this.term, reason, detail, cause === undefined ? undefined : { cause }));
        }
        return reasonOf.call(this.controller.signal);
    }
    guard(client) { return guardWith(this, client); }
    guarded(db, fn) {
        return guardedWith(this, db, fn);
    }
    release() { return this.session.releaseKey(this.key, this); }
}
/**
 * Opens a session (le_open_session) and starts its renewals: one
 * le_renew_session every ttl/3 on a connection of its own, for every key
 * acquired under it. `config` is what lead() takes; also
 * openSession({ dsn, ...options }). Rejects with a RejectedError
 * (NotInstalledError, PrivilegeError, BadArgumentError) when the server or
 * this client refuses, a ConnectionError when the server cannot be
 * reached.
 */
async function openSession(config, options = {}) {
    if (typeof config === "object" && config !== null && "dsn" in config) {
        const { dsn, ...rest } = config;
        options = { ...rest, ...options };
        config = dsn;
    }
    const id = options.id === undefined ? defaultId() : checkName("id", options.id);
    const t = timing({ ttl: options.ttl });
    const lockDelay = options.lockDelay ?? 0;
    if (!(typeof lockDelay === "number" && lockDelay >= 0 && Number.isFinite(lockDelay))) {
        throw new BadArgumentError(`lockDelay must be a number of seconds, at least 0, not ${lockDelay}`);
    }
    const keepValues = options.keepValues ?? false;
    if (typeof keepValues !== "boolean")
        throw new BadArgumentError(`keepValues must be true or false, not ${keepValues}`);
    const schema = schemaOf(options.schema);
    let c = null;
    try {
        c = await connect(config, schema, Math.max(t.callTimeout, 2000));
        // the deadline counts from the moment the open is sent
        const sent = now();
        const handle = (await bounded(c, sent + t.callTimeout, OPEN_SESSION, [id, t.ttl, lockDelay, keepValues]))[0].session;
        return new OpenSession(handle, id, sent + t.ttl * 1000 - t.margin, c, config, schema, t);
    }
    catch (e) {
        const database = c?.database ?? databaseOf(config);
        drop(c);
        throw classify(e, database);
    }
}
// ---------------------------------------------------------------- scheduled runs (contract 22)
//
// A job that every replica schedules alike runs once per due instant, on one
// of them: the loop of the Rust client's Scheduler (crates/client/src/
// schedule.rs, the reference). Due instants are read on the server's lease
// clock (le_now()), never on this host's. Each due run is claimed
// (le_claim_run: a fencing term, or NULL); a run claimed by another replica
// is watched until it is finished, and claimed again if its claim lapses
// unfinished. A claimed run is handed to the callback with a local deadline
// (the send time of the claim or of its last successful renewal + ttl -
// ttl/200), renewed every ttl/3, and finished with the callback's outcome.
// Instants go to the server as ISO 8601 text (exact, whatever pg's Date
// settings); terms come back as text and go as text (bigint, exact).
/** The lease clock, in whole milliseconds, rounded down: a due instant at or before it is due on the server too. */
const LE_NOW_MS = "SELECT pg_catalog.floor(extract(epoch FROM @extschema@.le_now()) OPERATOR(pg_catalog.*) 1000)::pg_catalog.float8 AS ms";
const CLAIM_RUN = "SELECT @extschema@.le_claim_run(job => $1, due => $2::pg_catalog.timestamptz, id => $3, " +
    "ttl => pg_catalog.make_interval(secs => $4), misfire_grace => pg_catalog.make_interval(secs => $5))::pg_catalog.text AS term";
const RENEW_RUN = "SELECT @extschema@.le_renew_run(job => $1, due => $2::pg_catalog.timestamptz, id => $3, " +
    "ttl => pg_catalog.make_interval(secs => $4), term => $5::bigint) AS ok";
const FINISH_RUN = "SELECT @extschema@.le_finish_run(job => $1, due => $2::pg_catalog.timestamptz, id => $3, term => $4::bigint, " +
    "succeeded => $5, detail => $6) AS ok";
/** After a refused claim: finished (or missed)? seconds until its live claim ends (NULL: none live), its outcome. */
const RUN_STATE = "SELECT r.finished_at IS NOT NULL AS finished, " +
    "CASE WHEN r.holder IS NOT NULL AND r.expires_at OPERATOR(pg_catalog.>) n.now " +
    "THEN extract(epoch FROM r.expires_at OPERATOR(pg_catalog.-) n.now)::pg_catalog.float8 END AS remaining, " +
    "r.outcome FROM @extschema@.leaderlock_runs r, (SELECT @extschema@.le_now() AS now) n " +
    "WHERE r.job OPERATOR(pg_catalog.=) $1 AND r.due OPERATOR(pg_catalog.=) $2::pg_catalog.timestamptz";
/** A run whose row a refused claim cannot find this many times in a row is given up (older than the retention). */
const ABSENT_TRIES = 100;
/** Looks again every RACE_RETRY this many times before backing off. */
const FAST_TRIES = 10;
/** How soon a run is looked at again after a claim raced this one, or found no row. */
const RACE_RETRY = 20;
/** le_finish_run keeps at most this many bytes of detail. */
const DETAIL_MAX_BYTES = 1000;
/** Without misfireGraceMs, a cron schedule's misfire grace (as `leaderlock run --cron`). */
const CRON_GRACE = 5 * 60_000;
/** A wait for the next due instant re-reads the server's clock at least this often. */
const MAX_WAIT = 10_000;
/** A run is no longer this replica's (see `reason`, as LeaseLost's; `key` is the job). `term` is the run's term as a number; `runTerm` exact. */
class RunLost extends LeaseLost {
    job;
    due;
    runTerm;
    constructor(job, due, runTerm, reason, detail, options) {
        super(job, Number(runTerm), reason, detail, options);
        this.job = job;
        this.due = due;
        this.runTerm = runTerm;
        this.message = `lost the run of ${JSON.stringify(job)} due ${due.toISOString()} (term ${runTerm}): ${detail}`;
    }
}
exports.RunLost = RunLost;
// ------------------------------------------------ due instants
let cronModule;
/**
 * cron-parser, loaded when a cron schedule is first asked for: a dependency
 * of this package, which npm does not install for a folder installed as a
 * link (then found in the application, as pg).
 */
function cronParser() {
    cronModule ??= requireHereOrInApp("cron-parser");
    if (!cronModule?.CronExpressionParser) {
        cronModule = undefined;
        throw new BadArgumentError("a cron schedule needs the package cron-parser 5.x, a dependency of leaderlock that npm does " +
            "not install for a folder installed as a link: npm install cron-parser@5.10.6 in your " +
            "application, or install leaderlock with npm install --install-links");
    }
    return cronModule;
}
/** Wall-clock formatters by time zone. */
const walls = new Map();
function wallFormat(tz) {
    let f = walls.get(tz);
    if (!f) {
        try {
            f = new Intl.DateTimeFormat("en-US", {
                timeZone: tz, hourCycle: "h23", year: "numeric", month: "numeric", day: "numeric",
                hour: "numeric", minute: "numeric", second: "numeric",
            });
        }
        catch (e) {
            throw new BadArgumentError(`time zone ${JSON.stringify(tz)}: ${e.message}`);
        }
        walls.set(tz, f);
    }
    return f;
}
/** The wall-clock time in `tz` at instant `t` (whole seconds), as ms since the epoch of a UTC clock showing it. */
function wallAt(tz, t) {
    const p = {};
    for (const part of wallFormat(tz).formatToParts(new Date(Math.floor(t / 1000) * 1000))) {
        if (part.type !== "literal")
            p[part.type] = Number(part.value);
    }
    return Date.UTC(p.year, p.month - 1, p.day, p.hour % 24, p.minute, p.second);
}
/** The offset from UTC in `tz` at instant `t` (ms; whole seconds). */
function offsetAt(tz, t) {
    return wallAt(tz, t) - Math.floor(t / 1000) * 1000;
}
/** The instants at which `tz` shows wall-clock time `wall` (whole seconds): none (skipped forward), one, or two (set back), in order. */
function instantsAt(tz, wall) {
    const day = 86_400_000;
    const offsets = new Set([offsetAt(tz, wall - day), offsetAt(tz, wall), offsetAt(tz, wall + day)]);
    const found = [...offsets].map((o) => wall - o).filter((t) => offsetAt(tz, t) === wall - t);
    return [...new Set(found)].sort((a, b) => a - b);
}
function everyRule(period) {
    if (!(typeof period === "number" && Number.isSafeInteger(period) && period >= 1)) {
        throw new BadArgumentError(`every must be a whole number of milliseconds, at least 1 (got ${period})`);
    }
    return { nextAfter: (t) => (Math.floor(t / period) + 1) * period };
}
/**
 * A cron schedule in a time zone, with the Rust client's rule across
 * daylight saving changes (the cron crate's): the expression is matched
 * against wall-clock times, in order; a wall-clock time that does not exist
 * is skipped, and one that occurs twice is due once, at the first.
 */
function cronRule(expr, tz) {
    if (typeof expr !== "string" || expr.trim() === "")
        throw new BadArgumentError("cron must be a non-empty string");
    const zone = tz ?? "UTC";
    if (typeof zone !== "string" || zone === "")
        throw new BadArgumentError("tz must be a non-empty string");
    wallFormat(zone);
    // Refused, so that every client reads an expression alike: what cron implementations read differently
    // or not at all.
    const refuse = (why) => new BadArgumentError(`cron expression ${JSON.stringify(expr)}: ${why}`);
    let fields = expr.trim().split(/\s+/);
    if (fields.length !== 5 && fields.length !== 6) {
        throw refuse("five fields (minute hour day-of-month month day-of-week), or six with seconds first");
    }
    if (fields.length === 5)
        fields = ["0", ...fields]; // five fields: minutes first (seconds 0)
    // `?` is `*` (a day-of-month or day-of-week left open)
    fields = fields.map((f, i) => (f === "?" && (i === 3 || i === 5) ? "*" : f));
    const [, , , dom, , dow] = fields;
    if (dom !== "*" && dow !== "*") {
        throw refuse("restrict the day of the month or the day of the week, not both (cron implementations combine them differently)");
    }
    for (const item of dow.split(",")) {
        if (/\d/.test(item.split("/")[0]))
            throw refuse("name the days of the week (MON-FRI, SUN): cron implementations number them differently");
    }
    // H: hashed values, different in each process (replicas would disagree); L, W, #: not every client has them
    if (fields.some((f) => /(^|[,\-/(])H(?=$|[,\-/(])/.test(f)) || /[LW#]/i.test(dom) || /[L#]/i.test(dow)) {
        throw refuse("no H, L, W or # (replicas and clients must compute the same instants)");
    }
    let cron;
    try {
        cron = cronParser().CronExpressionParser.parse(fields.join(" "), { tz: "UTC", strict: true, currentDate: new Date(0) });
    }
    catch (e) {
        if (e instanceof LeaderlockError)
            throw e;
        throw new BadArgumentError(`cron expression ${JSON.stringify(expr)}: ${e?.message ?? e}`);
    }
    return {
        nextAfter(t) {
            // Wall-clock times from the one a second after t (whole seconds) on, as the cron crate's; each
            // maps to its first instant, which grows with it; the first instant after t is the answer.
            const from = wallAt(zone, t + 1000);
            try {
                cron.reset(new Date(from - 1000));
                for (let i = 0; i < 200_000; i++) {
                    const wall = cron.next().getTime();
                    const first = instantsAt(zone, wall)[0];
                    if (first !== undefined && first > t)
                        return first;
                }
            }
            catch {
                // no further match (cron-parser's range or loop limit)
            }
            return null;
        },
    };
}
function ruleOf(when) {
    const every = when.every !== undefined && when.every !== null;
    const cron = when.cron !== undefined && when.cron !== null;
    if (every === cron)
        throw new BadArgumentError("give either every (ms) or cron");
    if (every) {
        if (when.tz != null)
            throw new BadArgumentError("tz applies to cron only");
        return everyRule(when.every);
    }
    return cronRule(when.cron, when.tz);
}
/**
 * The first due instant of `when` strictly after `after`, or null when
 * there is none. What every replica computes alike (with `every`: the
 * next multiple of the period since the Unix epoch).
 */
function nextDue(when, after) {
    const t = after.getTime();
    if (Number.isNaN(t))
        throw new BadArgumentError("after must be a valid Date");
    const next = ruleOf(when).nextAfter(t);
    return next === null ? null : new Date(next);
}
/** `t`'s first due instant at or after it (instants are whole milliseconds). */
function atOrAfter(rule, t) {
    return rule.nextAfter(Math.ceil(t) - 1);
}
// ------------------------------------------------ the run
/** What to record of a rejection: its name and message, at most DETAIL_MAX_BYTES of UTF-8, no NUL (text cannot hold one). */
function detailOf(e) {
    let text;
    try {
        text = e instanceof Error ? `${e.name}: ${e.message}` : `rejected with ${String(e)}`;
    }
    catch {
        text = "rejected with a value that has no text";
    }
    return truncateUtf8(text.replace(/\0/g, "\uFFFD"), DETAIL_MAX_BYTES);
}
/** `s` cut to at most `max` bytes of UTF-8, at a character's boundary (lone surrogates become U+FFFD). */
function truncateUtf8(s, max) {
    const bytes = Buffer.from(s, "utf8");
    if (bytes.length <= max)
        return bytes.toString("utf8");
    let end = max;
    while (end > 0 && (bytes[end] & 0xc0) === 0x80)
        end--; // bytes[end] continues a character: cut before its start
    return bytes.subarray(0, end).toString("utf8");
}
class ClaimedRun {
    job;
    id;
    due;
    term;
    deadline;
    controller = new AbortController();
    watchdog;
    constructor(job, id, due, term, deadline) {
        this.job = job;
        this.id = id;
        this.due = due;
        this.term = term;
        this.deadline = deadline;
        readsTheClock(this.controller.signal, () => this.expireIfDue());
        this.arm();
    }
    get signal() { return this.controller.signal; }
    get lost() { return abortedOf.call(this.controller.signal); }
    expireIfDue() {
        if (!this.lost && now() >= this.deadline)
            this.lose("deadline", "no renewal succeeded before the local deadline");
    }
    isOurs() {
        this.expireIfDue();
        return !this.lost;
    }
    get remaining() { return this.isOurs() ? Math.max(0, this.deadline - now()) : 0; }
    check() {
        if (!this.isOurs())
            throw reasonOf.call(this.controller.signal);
    }
    lose(reason, detail, cause) {
        if (!this.lost) {
            this.controller.abort(new RunLost(this.job, this.due, this.term, reason, detail, cause === undefined ? undefined : { cause }));
        }
        clearTimeout(this.watchdog);
    }
    /** A renewal sent at `sent` succeeded: the deadline moves (never for a run already lost). */
    extend(deadline) {
        if (!this.isOurs())
            return;
        this.deadline = deadline;
        this.arm();
    }
    arm() {
        clearTimeout(this.watchdog);
        this.watchdog = later(() => {
            this.expireIfDue();
            if (!this.lost)
                this.arm();
        }, Math.max(0, this.deadline - now()));
    }
}
/** Claims the runs of one job as they come due (the Rust Scheduler's next()), on one connection it reopens when it fails. */
class Claimer {
    config;
    schema;
    job;
    id;
    rule;
    t;
    grace;
    poll;
    conn = null;
    /** The next due instant not yet looked at (ms). */
    cursor = undefined;
    /** Due runs not settled yet: when to look at each again (performance.now()), how often it was found without a row. */
    pending = new Map();
    constructor(config, schema, job, id, rule, t, grace, poll) {
        this.config = config;
        this.schema = schema;
        this.job = job;
        this.id = id;
        this.rule = rule;
        this.t = t;
        this.grace = grace;
        this.poll = poll;
    }
    /** One statement, bounded by the call timeout (and `until`); a connection that failed or timed out is dropped. */
    async query(text, values, until = Infinity) {
        const by = Math.min(now() + this.t.callTimeout, until);
        try {
            this.conn ??= await connect(this.config, this.schema, by - now());
            return await bounded(this.conn, by, text, values);
        }
        catch (e) {
            const err = classify(e, this.conn?.database ?? databaseOf(this.config));
            if (err instanceof ConnectionError) {
                drop(this.conn);
                this.conn = null;
            }
            throw err;
        }
    }
    close() {
        drop(this.conn);
        this.conn = null;
    }
    /** Waits until a due run is claimed by this replica or settled; null when `stop` aborts. Throws LeaderlockErrors. */
    async next(stop) {
        for (;;) {
            if (stop?.aborted)
                return null;
            const serverNow = Number((await this.query(LE_NOW_MS, []))[0].ms);
            const here = now();
            if (this.cursor === undefined) {
                this.cursor = atOrAfter(this.rule, serverNow - (this.grace ?? 0));
                if (this.cursor === null)
                    throw new BadArgumentError("the schedule has no due instant");
            }
            while (this.cursor !== null && this.cursor <= serverNow) {
                if (!this.pending.has(this.cursor))
                    this.pending.set(this.cursor, { at: here, tries: 0 });
                this.cursor = this.rule.nextAfter(this.cursor);
            }
            let ready;
            for (const [due, p] of this.pending) {
                if (p.at <= here && (ready === undefined || due < ready))
                    ready = due;
            }
            if (ready === undefined) {
                let wait = this.cursor === null ? MAX_WAIT : this.cursor - serverNow;
                for (const p of this.pending.values())
                    wait = Math.min(wait, p.at - here);
                await pause(Math.min(Math.max(wait, 0), MAX_WAIT), stop); // then read the server's clock again
                continue;
            }
            const turn = await this.lookAt(ready);
            if (turn)
                return turn;
        }
    }
    /** Tries to claim the run due at `due`: a turn, or null when it is to be looked at again later. */
    async lookAt(due) {
        const iso = new Date(due).toISOString();
        const sent = now();
        const rows = await this.query(CLAIM_RUN, [this.job, iso, this.id, this.t.ttl, this.grace === null ? null : this.grace / 1000]);
        const term = rows[0]?.term;
        if (term !== null && term !== undefined) {
            this.pending.delete(due);
            return { run: true, due, term: BigInt(term), sent };
        }
        const state = (await this.query(RUN_STATE, [this.job, iso]))[0];
        const here = now();
        if (state?.finished) {
            this.pending.delete(due);
            return { run: false, due, outcome: state.outcome ?? null };
        }
        if (state) {
            // claimed live by another: look again when it may have finished or lapsed; not live: a claim raced this one
            const remaining = state.remaining === null ? null : Number(state.remaining);
            const wait = remaining === null ? RACE_RETRY : Math.min(Math.max(remaining * 1000, 0), this.poll) + RACE_RETRY;
            this.pending.set(due, { at: here + wait, tries: 0 });
            return null;
        }
        const tries = (this.pending.get(due)?.tries ?? 0) + 1;
        if (tries >= ABSENT_TRIES) {
            this.pending.delete(due);
            return { run: false, due, outcome: null };
        }
        // refused before its row was made (its job's row taken, the failover step not taken yet, or due before the
        // retention): every 20 ms FAST_TRIES times, then backing off, doubling up to the poll, given up after
        // ABSENT_TRIES (about a minute and a half)
        const back = tries <= FAST_TRIES ? 0 : Math.min(tries - FAST_TRIES, 10);
        this.pending.set(due, { at: here + Math.min(RACE_RETRY * 2 ** back, Math.max(this.poll, RACE_RETRY)), tries });
        return null;
    }
    /** Runs `fn` for a claimed run: renews every ttl/3 until it settles, then records its outcome (tried even past the deadline). */
    async runOne(turn, fn, stop) {
        const t = this.t;
        const due = new Date(turn.due);
        const iso = due.toISOString();
        const run = new ClaimedRun(this.job, this.id, due, turn.term, turn.sent + t.ttl * 1000 - t.margin);
        let over = false;
        let timer;
        let renewing;
        const renewAt = (at) => {
            if (!over)
                timer = later(() => { renewing = renew(); }, at - now());
        };
        const renew = async () => {
            if (over || !run.isOurs())
                return;
            const start = now();
            try {
                const sent = now();
                const rows = await this.query(RENEW_RUN, [this.job, iso, this.id, t.ttl, String(turn.term)], run.deadline);
                if (rows[0]?.ok) {
                    run.extend(sent + t.ttl * 1000 - t.margin);
                    return renewAt(sent + t.renewEvery);
                }
                run.lose("refused", "the server refused the renewal (the claim lapsed and was taken, or the run is finished)");
            }
            catch (e) {
                if (e instanceof ConnectionError)
                    return renewAt(start + t.retryEvery); // until the deadline
                run.lose("rejected", `a renewal was refused for good: ${e.message}`, e);
            }
        };
        const onStop = () => run.lose("released", "the schedule was stopped");
        stop?.addEventListener("abort", onStop);
        if (stop?.aborted)
            onStop();
        renewAt(turn.sent + t.renewEvery);
        let succeeded;
        let detail = null;
        try {
            await fn(run);
            // returning after the run was lost (stopped at its deadline, taken over, the schedule stopped) is no success
            succeeded = run.isOurs();
            if (!succeeded) {
                const lost = reasonOf.call(run.signal);
                detail = truncateUtf8(`returned after the run was lost: ${lost?.message ?? "deadline"}`.replace(/\0/g, "\uFFFD"), DETAIL_MAX_BYTES);
            }
        }
        catch (e) {
            succeeded = false;
            detail = detailOf(e);
        }
        finally {
            over = true;
            clearTimeout(timer);
            stop?.removeEventListener("abort", onStop);
        }
        await renewing;
        run.lose("released", "the run is over");
        for (let tries = 1;; tries++) {
            try {
                await this.query(FINISH_RUN, [this.job, iso, this.id, String(turn.term), succeeded, detail]);
                return; // false: claimed again since (this claim lapsed and another took it)
            }
            catch (e) {
                if (!(e instanceof ConnectionError) || tries >= 3) {
                    if (e instanceof ConnectionError)
                        return; // unrecorded: the claim lapses, and the run may be claimed again
                    throw e;
                }
                await pause(t.retryEvery);
            }
        }
    }
}
/**
 * Runs `fn` once per due instant of a schedule (`every` ms, or `cron` in
 * `tz`), on one replica among all those that schedule `job` alike, until
 * `options.signal` aborts (then resolves). Each run is claimed on the
 * server with a fencing term and handed to `fn` as a Run: act only while
 * `run.isOurs()` (or `run.check()`), and fence side effects with
 * `run.term`. It is renewed every ttl/3 while `fn` runs; `fn` resolving
 * records the run succeeded (failed, if the run was lost by then), rejecting
 * records it failed with the error's name and message (the schedule goes on). Waiting survives the connection
 * (reconnects with jittered backoff); rejects with a RejectedError
 * (NotInstalledError, PrivilegeError, BadArgumentError) at once.
 */
async function schedule(config, job, options, fn) {
    checkName("job", job);
    if (typeof fn !== "function")
        throw new BadArgumentError("fn must be a function");
    const id = options.id === undefined ? defaultId() : checkName("id", options.id);
    const rule = ruleOf(options);
    const ttlMs = options.ttlMs;
    if (!(typeof ttlMs === "number" && ttlMs > 0 && Number.isFinite(ttlMs))) {
        throw new BadArgumentError(`ttlMs must be a positive number of milliseconds, not ${ttlMs}`);
    }
    let grace;
    if (options.misfireGraceMs === undefined)
        grace = options.every != null ? options.every : CRON_GRACE;
    else
        grace = options.misfireGraceMs;
    if (grace !== null && !(typeof grace === "number" && grace >= 0 && Number.isFinite(grace))) {
        throw new BadArgumentError(`misfireGraceMs must be at least 0, or null, not ${grace}`);
    }
    const poll = options.pollMs ?? 1000;
    if (!(typeof poll === "number" && poll > 0 && Number.isFinite(poll))) {
        throw new BadArgumentError(`pollMs must be a positive number of milliseconds, not ${poll}`);
    }
    const stop = options.signal;
    const claimer = new Claimer(config, schemaOf(options.schema), job, id, rule, timing({ ttl: ttlMs / 1000 }), grace, poll);
    let failures = 0;
    try {
        while (!stop?.aborted) {
            let turn;
            try {
                turn = await claimer.next(stop);
                failures = 0;
            }
            catch (e) {
                const err = classify(e, databaseOf(config));
                if (!(err instanceof ConnectionError))
                    throw err;
                await pause(backoff(failures++), stop); // the next call connects again
                continue;
            }
            if (turn === null)
                break;
            if (turn.run)
                await claimer.runOne(turn, fn, stop);
        }
    }
    finally {
        claimer.close();
    }
}
// ---------------------------------------------------------------- the history of transitions (contract 23)
//
// The server records every transition (acquired, released, expired,
// proclaimed, run_claimed, run_finished, run_missed) with the notification
// that announced it; its worker numbers them in commit order shortly after
// they commit, then says so on channel leaderlock_history. A watcher reads
// le_history after the last position it delivered, in pages until a short
// one, and hands each row out once, in order; then it waits for a
// notification or the poll interval. A notification is a hint (any role may
// send one): it brings the next read forward, never to less than
// MIN_READ_GAP after the start of the last one; only rows le_history
// returns are delivered. A lost connection is made again with backoff, and
// reading goes on after the last position delivered: nothing is missed or
// repeated. The Rust client's HistoryWatcher (crates/client/src/history.rs)
// is the reference. Positions and terms are bigints (exact), as Run.term.
// With the last position numbered, read in the same statement (one snapshot:
// both functions are STABLE): after a short page, every transition the filter
// selects up to it has been read. No transition: one row, NULL but that.
const HISTORY = "SELECT h.\"position\"::pg_catalog.text AS position, " +
    "pg_catalog.floor(extract(epoch FROM h.at) OPERATOR(pg_catalog.*) 1000)::pg_catalog.float8 AS at_ms, " +
    "h.event, h.key, h.holder, h.term::pg_catalog.text AS term, h.role::pg_catalog.text AS role, " +
    "h.payload::pg_catalog.text AS payload, p.head::pg_catalog.text AS head " +
    "FROM (SELECT @extschema@.le_history_position() AS head) p " +
    "LEFT JOIN @extschema@.le_history(after => $1::bigint, for_key => $2, key_prefix => $3, max_rows => $4) h ON true " +
    "ORDER BY h.\"position\"";
/** The last position numbered: where a watcher of "only what happens from now on" starts. */
const HISTORY_POSITION = "SELECT @extschema@.le_history_position()::pg_catalog.text AS position";
const HISTORY_CHANNEL = "leaderlock_history";
/** le_history's refusal: the position asked for is older than the retention keeps. */
const PRUNED = "LE002";
/** Rows read per call. */
const HISTORY_PAGE = 1000;
/** Least time between two reads of the history (ms), however many notifications arrive. */
const MIN_READ_GAP = 50;
/** Longest a connection attempt, or one statement, of a watcher may take (ms). */
const HISTORY_CALL = 10_000;
/** A watcher reconnecting: the first pause and the largest (ms), doubling, each jittered down to half; reset by a read. */
const HISTORY_BACKOFF_FIRST = 100;
const HISTORY_BACKOFF_MAX = 5_000;
const MAX_POSITION = 2n ** 63n - 1n;
/**
 * SQLSTATEs of a watcher's statement that a new connection may heal: a
 * connection lost or refused for now (08), the server shutting down, the
 * backend terminated, a statement cancelled (57), short of resources (53),
 * a transaction rolled back (40), a standby (25006). Any other error from
 * the server stops the watcher.
 */
function transient(code) {
    return /^(08|40|53|57)/.test(code) || code === "25006";
}
function historyBackoff(n) {
    const ms = Math.min(HISTORY_BACKOFF_MAX, HISTORY_BACKOFF_FIRST * 2 ** Math.min(n, 16));
    return ms / 2 + Math.random() * (ms / 2);
}
/**
 * le_history refused the watcher's position (SQLSTATE LE002): the retention
 * (leaderlock.history_retention, leaderlock.history_max_rows) deleted
 * transitions after it before they were read. The watcher has stopped.
 * Read the current state (leaderlock_status), then watch again from now on
 * (`since` undefined). `position`: the position it asked to read after.
 */
class HistoryPrunedError extends RejectedError {
    position;
    constructor(position, cause) {
        super(`${cause?.message ?? `leaderlock: history position ${position} is no longer kept`} (SQLSTATE ${PRUNED})`, cause);
        this.position = position;
    }
}
exports.HistoryPrunedError = HistoryPrunedError;
function positionOf(v) {
    let p;
    if (typeof v === "bigint")
        p = v;
    else if (typeof v === "number" && Number.isSafeInteger(v))
        p = BigInt(v);
    else if (typeof v === "string" && /^[0-9]{1,19}$/.test(v))
        p = BigInt(v);
    if (p === undefined || p < 0n || p > MAX_POSITION) {
        throw new BadArgumentError(`since must be a history position (a whole number, at least 0), not ${String(v)}`);
    }
    return p;
}
function transitionOf(r) {
    let payload = null;
    try {
        payload = JSON.parse(r.payload);
    }
    catch {
        // jsonb's text always parses
    }
    return {
        position: BigInt(r.position), at: new Date(r.at_ms), event: r.event, key: r.key, holder: r.holder,
        term: r.term === null ? null : BigInt(r.term), role: r.role, payload,
    };
}
/**
 * Follows the history of transitions (contract 23): each transition after
 * `since` once, in position order, waiting for new ones. An async iterator
 * (`for await (const t of watcher)`; leaving the loop closes it) with
 * `position`, the last position delivered, and `close()`. Connects at the
 * first next(), on a connection of its own (application_name "leaderlock
 * watch" unless the configuration names one). A lost connection (a
 * restart, a terminated backend, the network) is made again with backoff,
 * from 100 ms doubling to 5 s, and reading goes on after the last position
 * delivered. next() rejects, and the watcher stops, with HistoryPrunedError
 * when the retention has passed that position, and at once with any other
 * refusal (RejectedError: NotInstalledError, PrivilegeError,
 * BadArgumentError, or another error of the server).
 */
class HistoryWatcher {
    config;
    key;
    keyPrefix;
    poll;
    signal;
    schema;
    stopper = new AbortController();
    stopped;
    /** The last position delivered (or the start). */
    cursor;
    /** After a short page: the last position numbered, delivered with its last row. */
    through;
    /** Rows read and not delivered yet, in order. */
    ready = [];
    conn = null;
    /** A connection being made (closed with the watcher). */
    opening = null;
    /** The last read returned a short page: wait for a hint or the poll before the next. */
    caughtUp = false;
    lastRead = -Infinity;
    heardAt = -Infinity;
    wake = null;
    failures = 0;
    opened = false;
    lost = 0;
    queue = Promise.resolve();
    /** The error that stopped this watcher, if one did. */
    failed;
    constructor(config, options = {}) {
        this.config = config;
        const key = options.key ?? null;
        const keyPrefix = options.keyPrefix ?? null;
        if (key !== null)
            checkName("key", key);
        if (keyPrefix !== null && typeof keyPrefix !== "string")
            throw new BadArgumentError("keyPrefix must be a string");
        if (key !== null && keyPrefix !== null)
            throw new BadArgumentError("give key or keyPrefix, not both");
        const poll = options.pollMs ?? 1000;
        if (!(typeof poll === "number" && poll > 0 && Number.isFinite(poll))) {
            throw new BadArgumentError(`pollMs must be a positive number of milliseconds, not ${poll}`);
        }
        targets(config); // a configuration this client refuses, refused now
        this.schema = schemaOf(options.schema);
        this.key = key;
        this.keyPrefix = keyPrefix;
        this.poll = Math.max(poll, MIN_READ_GAP);
        this.cursor = options.since == null ? undefined : positionOf(options.since);
        this.stopped = new Promise((resolve) => this.stopper.signal.addEventListener("abort", () => resolve(null)));
        this.signal = options.signal;
        this.signal?.addEventListener("abort", this.onAbort);
        if (this.signal?.aborted)
            this.onAbort();
    }
    onAbort = () => this.shut();
    /** The position up to which every transition of its filter was delivered (the last one delivered, or, when nothing more was for the filter, the last position numbered; before any, the start; undefined until known): resume after it with `since`. */
    get position() { return this.cursor; }
    /** How many times the connection was lost and made again. */
    get reconnects() { return this.lost; }
    /** Whether it is closed (by close(), its signal, leaving a loop, or the error that stopped it). */
    get closed() { return this.stopper.signal.aborted; }
    [Symbol.asyncIterator]() { return this; }
    /** The next transition, waiting for one; done once closed. Calls are served in turn. */
    next() {
        const result = this.queue.then(() => this.step());
        this.queue = result.catch(() => { });
        return result;
    }
    /** Closes it (as `for await` does when the loop is left). */
    async return() {
        await this.close();
        return { done: true, value: undefined };
    }
    /** Stops watching and closes the connection; a pending next() resolves done. Resolves when the watcher is idle. */
    async close() {
        this.shut();
        await this.queue;
    }
    /** What close() does, without waiting for a call in progress (which may be the caller). */
    shut() {
        if (this.closed)
            return;
        this.stopper.abort();
        this.signal?.removeEventListener("abort", this.onAbort);
        this.ready.length = 0;
        this.wake?.();
        this.drop();
        drop(this.opening);
        this.opening = null;
    }
    drop() {
        drop(this.conn?.client ?? null);
        this.conn = null;
    }
    async step() {
        for (;;) {
            if (this.failed)
                throw this.failed;
            if (this.closed)
                return { done: true, value: undefined };
            const t = this.ready.shift();
            if (t) {
                // delivered; the last of a short page: everything up to its head too
                this.cursor = this.ready.length === 0 && this.through !== undefined && this.through > t.position
                    ? this.through : t.position;
                if (this.ready.length === 0)
                    this.through = undefined;
                return { done: false, value: t };
            }
            try {
                await this.readMore();
            }
            catch (e) {
                this.drop();
                if (this.closed)
                    continue;
                const err = this.sort(e);
                if (!(err instanceof ConnectionError)) {
                    this.failed = err;
                    this.shut();
                    throw err;
                }
                await pause(historyBackoff(this.failures++), this.stopper.signal); // then connect again
            }
        }
    }
    /** Retry (ConnectionError) or stop (anything else). */
    sort(e) {
        if (isDbError(e)) {
            if (e.code === PRUNED)
                return new HistoryPrunedError(this.cursor ?? 0n, e);
            const err = classify(e, databaseOf(this.config));
            if (err instanceof ConnectionError && !transient(e.code))
                return new RejectedError(`${e.message} (SQLSTATE ${e.code})`, e);
            return err;
        }
        return classify(e, databaseOf(this.config)); // connect()'s own, or no answer: the connection
    }
    /** Connects if need be, waits for its turn (a hint or the poll, once caught up), and reads the next page into `ready`. */
    async readMore() {
        if (!this.conn)
            await this.open();
        const conn = this.conn;
        if (!conn || this.closed)
            return;
        if (this.caughtUp)
            await this.hintOrPoll();
        const gap = this.lastRead + MIN_READ_GAP - now();
        if (gap > 0)
            await pause(gap, this.stopper.signal);
        if (this.closed)
            return;
        if (conn.ended)
            throw new ConnectionError("the connection of the history watcher was lost");
        this.lastRead = now();
        // No worker numbers the history here (the portable edition, or a library
        // not preloaded): le_expire_lapsed() does, as clients there call it anyway.
        if (!conn.worker)
            await bounded(conn.client, this.lastRead + HISTORY_CALL, EXPIRE_LAPSED);
        const rows = await bounded(conn.client, this.lastRead + HISTORY_CALL, HISTORY, [String(this.cursor), this.key, this.keyPrefix, HISTORY_PAGE]);
        this.failures = 0;
        const head = rows.length > 0 ? BigInt(rows[0].head) : undefined;
        const found = rows.filter((r) => r.position !== null);
        for (const r of found)
            this.ready.push(transitionOf(r));
        this.caughtUp = found.length < HISTORY_PAGE;
        // A short page: nothing more up to head is for this filter, so a
        // watcher of a quiet key is not passed by the retention.
        if (this.caughtUp && head !== undefined && head > (this.cursor ?? 0n)) {
            if (found.length === 0)
                this.cursor = head;
            else
                this.through = head;
        }
    }
    /** Until a hint heard since the last read started, the poll interval from it, the connection's end, or close(). */
    hintOrPoll() {
        if (this.heardAt >= this.lastRead || this.conn?.ended)
            return Promise.resolve();
        return new Promise((resolve) => {
            const done = () => {
                clearTimeout(timer);
                this.wake = null;
                resolve();
            };
            const timer = later(done, this.lastRead + this.poll - now());
            this.wake = done;
        });
    }
    async open() {
        const pending = connect(this.config, this.schema, HISTORY_CALL, "leaderlock watch");
        const client = await Promise.race([pending, this.stopped]);
        if (!client) {
            pending.then(drop, () => { });
            return;
        }
        const conn = { client, ended: false, worker: true };
        client.on("notification", (n) => {
            // Where no worker numbers, the changes themselves are the hints.
            const hint = n.channel === HISTORY_CHANNEL || (!conn.worker && n.channel === "leaderlock");
            if (!hint || this.conn !== conn)
                return;
            this.heardAt = now();
            this.wake?.();
        });
        client.on("end", () => {
            conn.ended = true;
            if (this.conn === conn)
                this.wake?.();
        });
        this.opening = client;
        try {
            const by = now() + HISTORY_CALL;
            conn.worker = (await bounded(client, by, WORKER_SERVES))[0].ok;
            await bounded(client, by, conn.worker ? `LISTEN ${HISTORY_CHANNEL}` : `LISTEN ${HISTORY_CHANNEL}; LISTEN leaderlock`);
            if (this.cursor === undefined)
                this.cursor = BigInt((await bounded(client, by, HISTORY_POSITION))[0].position);
        }
        catch (e) {
            drop(client);
            throw e;
        }
        finally {
            this.opening = null;
        }
        if (this.closed)
            return drop(client);
        if (this.opened)
            this.lost++;
        this.opened = true;
        this.conn = conn;
        this.caughtUp = false; // hints may have gone unheard meanwhile: read at once
    }
}
exports.HistoryWatcher = HistoryWatcher;
/**
 * A HistoryWatcher of `config`: `for await (const t of watchHistory(url, { since, keyPrefix })) ...`.
 * Throws BadArgumentError at once for options this client refuses.
 */
function watchHistory(config, options = {}) {
    return new HistoryWatcher(config, options);
}
