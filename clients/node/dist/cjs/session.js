"use strict";
Object.defineProperty(exports, "__esModule", { value: true });
exports.OpenSession = exports.SessionLost = void 0;
exports.openSession = openSession;
const errors_js_1 = require("./errors.js");
const connect_js_1 = require("./connect.js");
const lease_js_1 = require("./lease.js");
const options_js_1 = require("./options.js");
const statements_js_1 = require("./statements.js");
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
class SessionLost extends errors_js_1.LeaseLost {
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
class OpenSession extends lease_js_1.Renewing {
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
    get why() { return lease_js_1.reasonOf.call(this.controller.signal); }
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
        if ((await (0, connect_js_1.bounded)(conn, by, RENEW_SESSION, [this.handle]))[0].ok)
            return true;
        return "the server refused the renewal: the session is not live there (closed, lapsed or unknown)";
    }
    async tryAcquire(key, options = {}) {
        (0, options_js_1.checkName)("key", key);
        this.check();
        const value = options?.value;
        const by = (0, options_js_1.now)() + this.t.callTimeout;
        const got = await this.take(key, value, by, TRY_ACQUIRE_IN, [this.handle, key, jsonOf(value)]);
        if (got instanceof KeyLease)
            return got;
        this.endedThere(got);
        return null;
    }
    async acquire(key, options) {
        (0, options_js_1.checkName)("key", key);
        const timeout = options?.timeout;
        if (!(typeof timeout === "number" && timeout >= 0 && Number.isFinite(timeout))) {
            throw new errors_js_1.BadArgumentError(`timeout must be a number of seconds, at least 0, not ${timeout}`);
        }
        const priority = options.priority ?? 0;
        if (!Number.isInteger(priority))
            throw new errors_js_1.BadArgumentError(`priority must be an integer, not ${priority}`);
        this.check();
        const by = (0, options_js_1.now)() + timeout * 1000 + this.t.callTimeout;
        const got = await this.take(key, options.value, by, ACQUIRE_IN, [this.handle, key, timeout, jsonOf(options.value), priority]);
        if (got instanceof KeyLease)
            return got;
        this.endedThere(got);
        throw new errors_js_1.NotAcquired(key, got?.holder ?? null);
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
            if (!(await (0, lease_js_1.releaseAgain)(c, by, (0, lease_js_1.releaseSlot)(this.config, key, this.id), key, this.id)))
                return null;
            await (0, connect_js_1.bounded)(c, by, "BEGIN");
            const won = (await (0, connect_js_1.bounded)(c, by, text, values))[0].ok;
            const rows = won ? await (0, connect_js_1.bounded)(c, by, TERM_IN, [key, this.id, this.handle]) : [];
            const after = rows.length ? null : (await (0, connect_js_1.bounded)(c, by, AFTER_REFUSAL, [key, this.handle]))[0];
            await (0, connect_js_1.bounded)(c, by, "COMMIT");
            if (!rows.length)
                return after ? { holder: after.holder ?? null, live: after.live } : null;
            const lease = new KeyLease(this, key, Number(rows[0].term), value);
            this.held.set(key, lease); // (the same id acquiring again keeps the term)
            return lease;
        });
    }
    async release(key) {
        (0, options_js_1.checkName)("key", key);
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
        const by = (0, options_js_1.now)() + this.t.callTimeout;
        try {
            return await this.withConn(by, async (c) => (await (0, connect_js_1.bounded)(c, by, statements_js_1.RELEASE, [key, this.id, term]))[0].ok);
        }
        catch (e) {
            if (!(e instanceof errors_js_1.ConnectionError))
                throw e;
            // it may still arrive: sent again (and answered) before this key is acquired again
            if (term !== null)
                lease_js_1.unanswered.set((0, lease_js_1.releaseSlot)(this.config, key, this.id), term);
            return false;
        }
    }
    /** One call on a connection of the pool (a new one when none is idle); a connection whose call failed is dropped. */
    async withConn(by, fn) {
        if (this.closing)
            throw new errors_js_1.LeaderlockError("the session is closed");
        let c = this.idle.pop() ?? null;
        try {
            c ??= await (0, connect_js_1.connect)(this.config, this.schema, Math.max(by - (0, options_js_1.now)(), this.t.callTimeout, 2000));
            const result = await fn(c);
            if (this.closing || this.idle.length >= IDLE_CONNECTIONS)
                (0, connect_js_1.drop)(c);
            else
                this.idle.push(c);
            return result;
        }
        catch (e) {
            const database = c?.database ?? (0, connect_js_1.databaseOf)(this.config);
            (0, connect_js_1.drop)(c);
            throw (0, errors_js_1.classify)(e, database);
        }
    }
    close() {
        this.closing ??= this.shutDown();
        return this.closing;
    }
    async shutDown() {
        this.lose("released", "the session was closed"); // every lease here first
        if (await this.stopRenewing()) {
            (0, connect_js_1.drop)(this.conn);
            this.conn = null;
        }
        let closed = false;
        try {
            this.conn ??= await (0, connect_js_1.connect)(this.config, this.schema, Math.max(this.t.callTimeout, 2000));
            closed = (await (0, connect_js_1.bounded)(this.conn, (0, options_js_1.now)() + this.t.callTimeout, CLOSE_SESSION, [this.handle]))[0].ok;
        }
        catch (e) {
            process.emitWarning(`leaderlock: session ${this.handle} of ${JSON.stringify(this.id)}: could not close it ` +
                `(${JSON.stringify(String(e?.message ?? e))}); its keys lapse with its ttl`);
        }
        (0, connect_js_1.drop)(this.conn);
        this.conn = null;
        for (const c of this.idle.splice(0))
            (0, connect_js_1.drop)(c);
        this.held.clear();
        return closed;
    }
}
exports.OpenSession = OpenSession;
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
        (0, lease_js_1.readsTheClock)(this.controller.signal, () => this.expireIfDue());
    }
    get id() { return this.session.id; }
    get schema() { return this.session.schema; }
    get signal() { return this.controller.signal; }
    get lost() { return lease_js_1.abortedOf.call(this.controller.signal); }
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
    get remaining() { return this.valid ? Math.max(0, this.deadline - (0, options_js_1.now)()) : 0; }
    check() {
        if (!this.valid)
            throw lease_js_1.reasonOf.call(this.controller.signal);
    }
    lose(reason, detail, cause) {
        if (!this.lost) {
            this.controller.abort(new errors_js_1.LeaseLost(this.key, this.term, reason, detail, cause === undefined ? undefined : { cause }));
        }
        return lease_js_1.reasonOf.call(this.controller.signal);
    }
    guard(client) { return (0, lease_js_1.guardWith)(this, client); }
    guarded(db, fn) {
        return (0, lease_js_1.guardedWith)(this, db, fn);
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
    const id = options.id === undefined ? (0, options_js_1.defaultId)() : (0, options_js_1.checkName)("id", options.id);
    const t = (0, options_js_1.timing)({ ttl: options.ttl });
    const lockDelay = options.lockDelay ?? 0;
    if (!(typeof lockDelay === "number" && lockDelay >= 0 && Number.isFinite(lockDelay))) {
        throw new errors_js_1.BadArgumentError(`lockDelay must be a number of seconds, at least 0, not ${lockDelay}`);
    }
    const keepValues = options.keepValues ?? false;
    if (typeof keepValues !== "boolean")
        throw new errors_js_1.BadArgumentError(`keepValues must be true or false, not ${keepValues}`);
    const schema = (0, statements_js_1.schemaOf)(options.schema);
    let c = null;
    try {
        c = await (0, connect_js_1.connect)(config, schema, Math.max(t.callTimeout, 2000));
        // the deadline counts from the moment the open is sent
        const sent = (0, options_js_1.now)();
        const handle = (await (0, connect_js_1.bounded)(c, sent + t.callTimeout, OPEN_SESSION, [id, t.ttl, lockDelay, keepValues]))[0].session;
        return new OpenSession(handle, id, sent + t.ttl * 1000 - t.margin, c, config, schema, t);
    }
    catch (e) {
        const database = c?.database ?? (0, connect_js_1.databaseOf)(config);
        (0, connect_js_1.drop)(c);
        throw (0, errors_js_1.classify)(e, database);
    }
}
