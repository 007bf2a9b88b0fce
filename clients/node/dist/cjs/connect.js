"use strict";
Object.defineProperty(exports, "__esModule", { value: true });
exports.targets = targets;
exports.databaseOf = databaseOf;
exports.connect = connect;
exports.callNamed = callNamed;
exports.bounded = bounded;
exports.drop = drop;
exports.workerServes = workerServes;
const errors_js_1 = require("./errors.js");
const load_js_1 = require("./load.js");
const options_js_1 = require("./options.js");
const statements_js_1 = require("./statements.js");
const SESSION_ATTRS = ["any", "read-write", "read-only", "primary", "standby", "prefer-standby"];
function sessionAttrs(v) {
    if (v == null || v === "")
        return "any";
    if (!SESSION_ATTRS.includes(v)) {
        throw new errors_js_1.BadArgumentError(`target_session_attrs must be one of ${SESSION_ATTRS.join(", ")}, not ${JSON.stringify(v)}`);
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
        throw new errors_js_1.BadArgumentError(`${hosts.length} hosts but ${ports.length} ports`);
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
/** Each connection's leaderlock schema, as the server quoted it: what bounded() puts for @extschema@. */
const extSchemas = new WeakMap();
/**
 * Finds leaderlock's schema on a new connection (FIND_SCHEMA): the one
 * schema, else NotInstalledError (none) or BadArgumentError (several: the
 * `schema` option or LEADERLOCK_SCHEMA must name one).
 */
async function findSchema(c, until, schema, database) {
    const found = (await bounded(c, until, statements_js_1.FIND_SCHEMA, [schema.named])).map((r) => Object.values(r)[0]);
    if (found.length === 0)
        throw new errors_js_1.NotInstalledError(database ?? "(unknown)", undefined, schema.named);
    if (found.length > 1) {
        throw new errors_js_1.BadArgumentError(`leaderlock's functions are in several schemas of database ${database ?? "(unknown)"}: ` +
            `${found.map((f) => JSON.stringify(f)).join(", ")}; name the one to use with the schema ` +
            "option or LEADERLOCK_SCHEMA");
    }
    extSchemas.set(c, found[0]);
    schema.found = found[0];
}
/** One host, given up after `timeoutMs` (a frozen server accepts and never answers). */
async function connectOne(h, timeoutMs, applicationName = "leaderlock node") {
    const c = new load_js_1.pg.Client({ application_name: applicationName, ...h,
        connectionTimeoutMillis: Math.min(Math.max(Math.ceil(timeoutMs), 1), options_js_1.MAX_DELAY) });
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
                const by = (0, options_js_1.now)() + timeoutMs;
                if (want !== "any") {
                    const kind = (await bounded(c, by, statements_js_1.SESSION_KIND))[0];
                    const fits = want === "read-write" ? !kind.read_only : want === "read-only" ? kind.read_only
                        : want === "primary" ? !kind.standby : kind.standby;
                    if (!fits) {
                        drop(c);
                        last = new errors_js_1.ConnectionError(`${where(h)} is ${kind.standby ? "a standby" : kind.read_only ? "read-only" : "read-write"}, ` +
                            `not ${want} (target_session_attrs)`);
                        continue;
                    }
                }
                await findSchema(c, by, schema, c.database ?? database);
                return c;
            }
            catch (e) {
                const err = (0, errors_js_1.classify)(e, c?.database ?? database);
                drop(c);
                if (err instanceof errors_js_1.ConnectionError)
                    last = err;
                else
                    rejected ??= err;
            }
        }
    }
    throw rejected ?? last ?? new errors_js_1.ConnectionError("no host to connect to");
}
/** RENEW or RELEASE naming the tenure's term (the last value); on a schema before 0.5.0, without it. */
async function callNamed(c, until, text, values) {
    try {
        return (await bounded(c, until, text, values))[0].ok;
    }
    catch (e) {
        if (!(0, errors_js_1.isDbError)(e) || e.code !== errors_js_1.UNDEFINED_FUNCTION)
            throw e;
        return (await bounded(c, until, statements_js_1.LEGACY.get(text), values.slice(0, -1)))[0].ok;
    }
}
/** The rows of `text`, the call abandoned (TimeoutError) at `until`. */
async function bounded(c, until, text, values = []) {
    const left = Math.floor(until - (0, options_js_1.now)());
    if (left <= 0)
        throw new TimeoutError("the call's time ran out");
    const query = { text: (0, statements_js_1.inSchema)(text, extSchemas.get(c)), values, query_timeout: Math.min(left, options_js_1.MAX_DELAY) };
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
        return (await bounded(c, until, statements_js_1.WORKER_SERVES))[0].ok;
    }
    catch (e) {
        if (e?.code !== errors_js_1.UNDEFINED_FUNCTION)
            throw e;
        return (await bounded(c, until, statements_js_1.WORKER_RUNNING))[0].ok; // before 0.5.0
    }
}
