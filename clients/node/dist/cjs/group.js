"use strict";
Object.defineProperty(exports, "__esModule", { value: true });
exports.PartitionNotOwned = void 0;
exports.member = member;
const errors_js_1 = require("./errors.js");
const connect_js_1 = require("./connect.js");
const hints_js_1 = require("./hints.js");
const lease_js_1 = require("./lease.js");
const options_js_1 = require("./options.js");
const statements_js_1 = require("./statements.js");
// "group" is a reserved word: every statement names its arguments. Terms
// come back as text and go as text (bigint, exact).
const JOIN_GROUP = "SELECT @extschema@.le_join(\"group\" => $1, member => $2, ttl => pg_catalog.make_interval(secs => $3), " +
    "partitions => $4::pg_catalog.int4, drain => pg_catalog.make_interval(secs => $5))::pg_catalog.text AS session";
const ASSIGNMENT = "SELECT partition, term::pg_catalog.text AS term, state " +
    "FROM @extschema@.le_assignment(\"group\" => $1, member => $2) ORDER BY partition";
const ACK_PARTITION = "SELECT @extschema@.le_ack(\"group\" => $1, member => $2, partition => $3::pg_catalog.int4, " +
    "term => $4::bigint) AS ok";
const LEAVE_GROUP = "SELECT @extschema@.le_leave(\"group\" => $1, member => $2) AS ok";
/** The guard, in the caller's transaction. */
const ASSERT_PARTITION = "SELECT @extschema@.le_assert_partition(\"group\" => $1, partition => $2::pg_catalog.int4, " +
    "member => $3, term => $4::bigint)::pg_catalog.text AS term";
/** le_join's refusal when the role has made leaderlock.max_jobs_per_role groups: retrying cannot help. */
const TOO_MANY_GROUPS = "53400";
/** The shortest time between two rounds when hints ask for one sooner (ms), and its share of the ttl. */
const SOONEST_MIN = 50;
const SOONEST_SHARE = 30;
/**
 * A partition that is not this member's now (SQLSTATE LE001): owns() said
 * null, or the server refused the guard (the error, in `cause`, aborted the
 * transaction). Stop acting on it.
 */
class PartitionNotOwned extends errors_js_1.LeaderlockError {
    group;
    partition;
    member;
    sqlstate = errors_js_1.NOT_LEADER;
    constructor(group, partition, member, detail, cause) {
        super(`partition ${partition} of group ${JSON.stringify(group)} is not ${JSON.stringify(member)}'s now: ${detail}`, cause === undefined ? undefined : { cause });
        this.group = group;
        this.partition = partition;
        this.member = member;
    }
}
exports.PartitionNotOwned = PartitionNotOwned;
function callback(name, v) {
    if (v !== undefined && typeof v !== "function")
        throw new errors_js_1.BadArgumentError(`${name} must be a function`);
    return v;
}
class GroupMember {
    config;
    group;
    member;
    t;
    schema;
    partitions;
    drain;
    soonest;
    onAssigned;
    onRevoked;
    onLost;
    onError;
    signal;
    /** partition -> term, owned until `until` (unless revoked or lost before). */
    terms = new Map();
    until = -Infinity;
    conn = null;
    /** Revocations told ("partition:term"), not yet gone from the assignment. */
    revoking = new Set();
    /** Drained revocations, to give back. */
    acks = [];
    /** Callbacks whose partitions must not be handed over before they settle. */
    drains = new Set();
    lastRound = -Infinity;
    nextRound = 0;
    wakeUp = null;
    watchdog;
    stopping = false;
    loop;
    leaving;
    failed;
    constructor(config, options) {
        this.config = config;
        const o = options ?? {};
        this.group = (0, options_js_1.checkName)("group", o.group);
        this.member = o.member === undefined ? (0, options_js_1.defaultId)() : (0, options_js_1.checkName)("member", o.member);
        this.t = (0, options_js_1.timing)({ ttl: o.ttl });
        const partitions = o.partitions ?? null;
        if (partitions !== null && !Number.isInteger(partitions)) {
            throw new errors_js_1.BadArgumentError(`partitions must be an integer, not ${JSON.stringify(partitions)}`);
        }
        const drain = o.drain ?? null;
        if (drain !== null && !(typeof drain === "number" && drain >= 0 && Number.isFinite(drain))) {
            throw new errors_js_1.BadArgumentError(`drain must be a number of seconds, at least 0, not ${JSON.stringify(drain)}`);
        }
        this.partitions = partitions;
        this.drain = drain;
        this.onAssigned = callback("onAssigned", o.onAssigned);
        this.onRevoked = callback("onRevoked", o.onRevoked);
        this.onLost = callback("onLost", o.onLost);
        if (o.onError !== undefined && typeof o.onError !== "function")
            throw new errors_js_1.BadArgumentError("onError must be a function");
        this.onError = o.onError;
        this.signal = o.signal;
        this.schema = (0, statements_js_1.schemaOf)(o.schema);
        this.soonest = Math.max(this.t.ttl * 1000 / SOONEST_SHARE, SOONEST_MIN);
    }
    get ttl() { return this.t.ttl; }
    get deadline() { return this.until; }
    owns(partition) {
        if ((0, options_js_1.now)() >= this.until)
            return null;
        return this.terms.get(partition) ?? null;
    }
    owned() {
        if ((0, options_js_1.now)() >= this.until)
            return new Map();
        return new Map([...this.terms].sort((a, b) => a[0] - b[0]));
    }
    async guard(client, partition) {
        const term = this.owns(partition);
        if (term === null)
            throw this.notOwned(partition, "not owned here (or its local deadline has passed)");
        try {
            // (the schema the member's connection found, never the search_path)
            const text = (0, statements_js_1.inSchema)(ASSERT_PARTITION, this.schema.found);
            await client.query({ text, values: [this.group, partition, this.member, String(term)] });
        }
        catch (e) {
            if (e?.code === errors_js_1.NOT_LEADER)
                throw this.notOwned(partition, `the server refused the guard: ${e.message}`, e);
            throw e;
        }
        return term;
    }
    guarded(db, partition, fn) {
        if (this.owns(partition) === null) {
            return Promise.reject(this.notOwned(partition, "not owned here (or its local deadline has passed)"));
        }
        return (0, lease_js_1.fencedTransaction)(db, (tx) => this.guard(tx, partition), fn);
    }
    notOwned(partition, detail, cause) {
        return new PartitionNotOwned(this.group, partition, this.member, detail, cause);
    }
    leave() {
        this.leaving ??= this.shutDown();
        return this.leaving;
    }
    onAbort = () => { void this.leave(); };
    /** The first round here (its refusal or failure is member()'s), then the loop. */
    async start() {
        this.signal?.throwIfAborted();
        try {
            await this.round();
        }
        catch (e) {
            this.disconnect();
            throw this.sort(e);
        }
        this.loop = this.run();
        this.signal?.addEventListener("abort", this.onAbort);
        if (this.signal?.aborted)
            this.onAbort();
    }
    async run() {
        while (!this.stopping) {
            await this.idle();
            while (this.acks.length > 0 && !this.stopping) {
                const [partition, term] = this.acks.shift();
                this.revoking.delete(`${partition}:${term}`);
                try {
                    await this.ack(partition, term);
                }
                catch {
                    this.disconnect(); // still revoked at the next round: given back then
                }
            }
            if (this.stopping || (0, options_js_1.now)() < this.nextRound)
                continue;
            try {
                await this.round();
            }
            catch (e) {
                this.disconnect();
                const err = this.sort(e);
                if (!(err instanceof errors_js_1.ConnectionError))
                    return this.fail(err);
            }
        }
    }
    /** Until the next round is due, a drained revocation waits, or the member stops. */
    idle() {
        if (this.stopping || this.acks.length > 0 || (0, options_js_1.now)() >= this.nextRound)
            return Promise.resolve();
        return new Promise((resolve) => {
            const done = () => {
                clearTimeout(timer);
                this.wakeUp = null;
                resolve();
            };
            const timer = (0, options_js_1.later)(done, this.nextRound - (0, options_js_1.now)());
            this.wakeUp = done;
        });
    }
    /** Retry (ConnectionError) or stop (anything else). */
    sort(e) {
        if ((0, errors_js_1.isDbError)(e) && e.code === TOO_MANY_GROUPS)
            return new errors_js_1.RejectedError(`${e.message} (SQLSTATE ${e.code})`, e);
        return (0, errors_js_1.classify)(e, (0, connect_js_1.databaseOf)(this.config));
    }
    fail(err) {
        this.failed = err;
        this.stopping = true;
        this.loseAll();
        this.disconnect();
        if (this.onError) {
            try {
                this.onError(err);
            }
            catch (e) {
                process.emitWarning(`leaderlock: group ${JSON.stringify(this.group)}: onError threw: ${e}`);
            }
        }
        else {
            process.emitWarning(`leaderlock: member ${JSON.stringify(this.member)} of group ${JSON.stringify(this.group)} ` +
                `stopped: ${err.message}`);
        }
    }
    /** When a call is given up: ttl/3 from now, and never past the local deadline, so that losses are told on time. */
    callBy() {
        const at = (0, options_js_1.now)();
        const by = at + this.t.callTimeout;
        return this.until > at ? Math.min(by, this.until) : by;
    }
    /** The member's connection, LISTENing for hints; made within the deadline when one is live (else 2 s at least). */
    async client() {
        if (this.conn)
            return this.conn;
        const at = (0, options_js_1.now)();
        const budget = this.until > at ? this.callBy() - at : Math.max(this.t.callTimeout, 2000);
        const c = await (0, connect_js_1.connect)(this.config, this.schema, budget, "leaderlock member");
        c.on("notification", (n) => this.heard(c, n));
        try {
            await (0, connect_js_1.bounded)(c, at + budget, "LISTEN leaderlock");
        }
        catch (e) {
            (0, connect_js_1.drop)(c);
            throw e;
        }
        this.conn = c;
        return c;
    }
    disconnect() {
        (0, connect_js_1.drop)(this.conn);
        this.conn = null;
    }
    /** A notification naming this member of this group: the next round sooner, at a bounded rate. */
    heard(c, n) {
        if (c !== this.conn || n.channel !== "leaderlock" || !(0, hints_js_1.namesMember)(n.payload, this.group, this.member))
            return;
        const soonest = Math.max(this.lastRound + this.soonest, (0, options_js_1.now)());
        if (soonest < this.nextRound) {
            this.nextRound = soonest;
            this.wakeUp?.();
        }
    }
    /** Join (renew), read the assignment, tell what changed. */
    async round() {
        this.lastRound = (0, options_js_1.now)();
        this.nextRound = this.lastRound + this.t.renewEvery;
        const c = await this.client();
        const by = this.callBy();
        const sent = (0, options_js_1.now)();
        await (0, connect_js_1.bounded)(c, by, JOIN_GROUP, [this.group, this.member, this.t.ttl, this.partitions, this.drain]);
        const rows = await (0, connect_js_1.bounded)(c, by, ASSIGNMENT, [this.group, this.member]);
        if (this.stopping)
            return; // leaving: nothing is ours from leave() on
        const owned = new Map();
        const revoked = new Map();
        for (const r of rows)
            (r.state === "owned" ? owned : revoked).set(Number(r.partition), BigInt(r.term));
        // Ours no more: revoked (told, drained, then given back), or gone or in another term (lost).
        const told = [];
        const lost = [];
        for (const [p, term] of this.terms) {
            if (revoked.get(p) === term)
                told.push([p, term]);
            else if (owned.get(p) !== term)
                lost.push([p, term]);
        }
        for (const [p] of [...told, ...lost])
            this.terms.delete(p);
        const fresh = [...owned].filter(([p]) => !this.terms.has(p));
        for (const [p, term] of fresh)
            this.terms.set(p, term);
        this.until = sent + this.t.ttl * 1000 - this.t.margin;
        this.arm();
        for (const [p, term] of lost)
            this.tell("onLost", this.onLost ?? this.onRevoked, p, term);
        for (const key of this.revoking) {
            const [p, term] = key.split(":");
            if (revoked.get(Number(p)) !== BigInt(term))
                this.revoking.delete(key);
        }
        for (const [p, term] of told)
            this.drainThenAck(p, term);
        for (const [p, term] of fresh)
            this.tell("onAssigned", this.onAssigned, p, term);
        // Revoked, but nothing of ours runs on it (never seen granted, or lost at the deadline): given back at once.
        for (const [p, term] of revoked) {
            if (!this.revoking.has(`${p}:${term}`))
                await this.ack(p, term);
        }
    }
    async ack(partition, term) {
        const c = await this.client();
        await (0, connect_js_1.bounded)(c, this.callBy(), ACK_PARTITION, [this.group, this.member, partition, String(term)]);
    }
    /** `fn(partition, term)`, its promise settled (a throw or a rejection is a process warning). */
    async settle(what, fn, partition, term) {
        try {
            await fn?.(partition, term);
        }
        catch (e) {
            process.emitWarning(`leaderlock: group ${JSON.stringify(this.group)}: ${what}(${partition}) threw: ${e}`);
        }
    }
    tell(what, fn, partition, term) {
        void this.settle(what, fn, partition, term);
    }
    /** onRevoked, then (unless the member stops meanwhile) the ack. */
    drainThenAck(partition, term) {
        this.revoking.add(`${partition}:${term}`);
        const drained = this.settle("onRevoked", this.onRevoked, partition, term).then(() => {
            this.drains.delete(drained);
            if (this.stopping)
                return;
            this.acks.push([partition, term]);
            this.wakeUp?.();
        });
        this.drains.add(drained);
    }
    /** Every partition lost (the deadline passed, the member stopped). */
    loseAll() {
        const lost = [...this.terms];
        this.terms = new Map();
        this.until = -Infinity;
        clearTimeout(this.watchdog);
        for (const [p, term] of lost)
            this.tell("onLost", this.onLost ?? this.onRevoked, p, term);
    }
    /** The local deadline, told by a timer (owns() reads the clock as well). */
    arm() {
        clearTimeout(this.watchdog);
        this.watchdog = (0, options_js_1.later)(() => {
            if ((0, options_js_1.now)() >= this.until)
                this.loseAll();
            else
                this.arm(); // a timer may fire a little early
        }, this.until - (0, options_js_1.now)());
    }
    async shutDown() {
        // nothing is ours from here on, told at once
        const had = [...this.terms];
        this.terms = new Map();
        this.until = -Infinity;
        clearTimeout(this.watchdog);
        this.stopping = true;
        this.wakeUp?.();
        this.signal?.removeEventListener("abort", this.onAbort);
        for (const [p, term] of had)
            this.drains.add(this.settle("onRevoked", this.onRevoked, p, term));
        await this.loop; // a round in flight ends within its calls' bound
        await Promise.all([...this.drains]); // nothing of ours runs on a partition when it is handed over
        let left = false;
        try {
            this.conn ??= await (0, connect_js_1.connect)(this.config, this.schema, Math.max(this.t.callTimeout, 2000), "leaderlock member");
            left = (await (0, connect_js_1.bounded)(this.conn, (0, options_js_1.now)() + this.t.callTimeout, LEAVE_GROUP, [this.group, this.member]))[0].ok;
        }
        catch (e) {
            process.emitWarning(`leaderlock: member ${JSON.stringify(this.member)} of group ${JSON.stringify(this.group)} ` +
                `could not leave (${JSON.stringify(String(e?.message ?? e))}); its membership lapses ` +
                "with its ttl");
        }
        this.disconnect();
        return left;
    }
}
/**
 * Joins `options.group` as `options.member` (docs/groups.md) and keeps the
 * membership: the server assigns its partitions; onAssigned(partition,
 * term) when one is ours, onRevoked(partition, term) when the server takes
 * it back (drain, then settle: it is given back then), onLost when it is
 * gone without notice. Resolves once the first round (join, assignment) is
 * answered; rejects with a RejectedError (BadArgumentError,
 * NotInstalledError, PrivilegeError) when the server or this client
 * refuses, a ConnectionError when the server cannot be reached. Needs a
 * connection of its own (LISTEN): a configuration, not a pool.
 */
async function member(config, options) {
    const m = new GroupMember(config, options);
    await m.start();
    return m;
}
