"use strict";
Object.defineProperty(exports, "__esModule", { value: true });
exports.Tenure = exports.Renewing = exports.reasonOf = exports.abortedOf = exports.releaseSlot = exports.unanswered = void 0;
exports.releaseAgain = releaseAgain;
exports.readsTheClock = readsTheClock;
exports.guardWith = guardWith;
exports.guardedWith = guardedWith;
exports.fencedTransaction = fencedTransaction;
const errors_js_1 = require("./errors.js");
const connect_js_1 = require("./connect.js");
const options_js_1 = require("./options.js");
const statements_js_1 = require("./statements.js");
// Releases that heard no answer, by server, key and id: their term. Such a
// release may still reach the server, so a campaign under the same id sends
// it again, and hears an answer, before its first try: a try before that
// would extend the very tenure the late release then ends, while this
// process leads in it (docs/verification.md).
exports.unanswered = new Map();
const releaseSlot = (config, key, id) => JSON.stringify([typeof config === "string" ? config : [config.connectionString, config.host, config.port, config.database],
    key, id]);
exports.releaseSlot = releaseSlot;
/**
 * Sends again the release under this id that heard no answer, if any; false while the tenure it ends
 * is still held (its row was locked), when the campaign must not try yet.
 */
async function releaseAgain(c, until, slot, key, id) {
    const term = exports.unanswered.get(slot);
    if (term === undefined)
        return true;
    if (!(await (0, connect_js_1.callNamed)(c, until, statements_js_1.RELEASE, [key, id, term]))) {
        try {
            if ((await (0, connect_js_1.bounded)(c, until, statements_js_1.HOLDS, [key, id, term]))[0].ok)
                return false;
        }
        catch (e) {
            if (!(0, errors_js_1.isDbError)(e) || e.code !== errors_js_1.UNDEFINED_FUNCTION)
                throw e; // before 0.5.0: nothing to go by
        }
    }
    if (exports.unanswered.get(slot) === term)
        exports.unanswered.delete(slot);
    return true;
}
// The signal's own state, under the getters readsTheClock puts on it (which call these).
exports.abortedOf = Object.getOwnPropertyDescriptor(AbortSignal.prototype, "aborted").get;
exports.reasonOf = Object.getOwnPropertyDescriptor(AbortSignal.prototype, "reason").get;
/** Makes `signal`'s `aborted`, `reason` and `throwIfAborted()` call `expire` first (it aborts the signal once the deadline has passed). */
function readsTheClock(signal, expire) {
    Object.defineProperty(signal, "aborted", { configurable: true, get: () => { expire(); return exports.abortedOf.call(signal); } });
    Object.defineProperty(signal, "reason", { configurable: true, get: () => { expire(); return exports.reasonOf.call(signal); } });
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
        const text = (0, statements_js_1.inSchema)(statements_js_1.ASSERT_LEADER, l.schema.found);
        rows = (await client.query({ text, values: [l.key, l.id, String(l.term)] })).rows;
    }
    catch (e) {
        if (e?.code === errors_js_1.NOT_LEADER)
            throw l.lose("fenced", `the server refused a guarded write: ${e.message}`, e);
        throw e;
    }
    return Number(rows[0].term);
}
/** Lease.guarded: BEGIN, guardWith, fn(tx), COMMIT; ROLLBACK on any error. */
async function guardedWith(l, db, fn) {
    l.check();
    return fencedTransaction(db, (tx) => guardWith(l, tx), fn);
}
/** BEGIN, guard(tx), fn(tx), COMMIT; ROLLBACK on any error (a lease's guarded(), a group member's). */
async function fencedTransaction(db, guard, fn) {
    const pooled = typeof db.connect === "function" && typeof db.totalCount === "number";
    const tx = pooled ? await db.connect() : db;
    let broken;
    try {
        await tx.query({ text: "BEGIN" });
        try {
            await guard(tx);
            const result = await fn(tx);
            // COMMIT of a transaction an error aborted rolls back, and says so
            if ((await tx.query({ text: "COMMIT" })).command === "ROLLBACK") {
                throw new errors_js_1.LeaderlockError("the guarded transaction was rolled back: a statement in it had failed");
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
    get lost() { return exports.abortedOf.call(this.controller.signal); }
    /** Ends it once the local deadline has passed: called by every reader, and by the timer. */
    expireIfDue() {
        if (!this.lost && (0, options_js_1.now)() >= this.deadline)
            this.lose("deadline", "no renewal succeeded before the local deadline");
    }
    get valid() {
        this.expireIfDue();
        return !this.lost;
    }
    get alive() { return this.valid; }
    get remaining() { return this.valid ? Math.max(0, this.deadline - (0, options_js_1.now)()) : 0; }
    disarm() { clearTimeout(this.watchdog); }
    /** The local deadline, enforced by a timer whatever a renewal is doing (the readers check the clock as well). */
    arm() {
        clearTimeout(this.watchdog);
        this.watchdog = (0, options_js_1.later)(() => {
            this.expireIfDue();
            if (!this.lost)
                this.arm(); // a timer may fire a little early, or a renewal moved the deadline
        }, Math.max(0, this.deadline - (0, options_js_1.now)()));
    }
    schedule(at) {
        if (this.stopped)
            return;
        this.timer = (0, options_js_1.later)(() => { this.running = this.renew(); }, Math.max(0, at - (0, options_js_1.now)()));
    }
    async renew() {
        if (this.stopped || !this.valid)
            return;
        const start = (0, options_js_1.now)();
        // one call may take ttl/3 at most (then reconnect and retry), never past the deadline
        const by = Math.min(start + this.t.callTimeout, this.deadline);
        try {
            this.conn ??= await (0, connect_js_1.connect)(this.config, this.schema, by - (0, options_js_1.now)());
            const sent = (0, options_js_1.now)();
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
            (0, connect_js_1.drop)(this.conn);
            this.conn = null;
            const err = (0, errors_js_1.classify)(e, (0, connect_js_1.databaseOf)(this.config));
            if (err instanceof errors_js_1.ConnectionError)
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
            new Promise((r) => { timer = (0, options_js_1.later)(() => r(true), this.t.callTimeout + 1000); })]);
        clearTimeout(timer);
        return hung;
    }
}
exports.Renewing = Renewing;
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
            throw exports.reasonOf.call(this.controller.signal);
    }
    lose(reason, detail, cause) {
        if (!this.lost) {
            this.controller.abort(new errors_js_1.LeaseLost(this.key, this.term, reason, detail, cause === undefined ? undefined : { cause }));
        }
        this.disarm();
        return exports.reasonOf.call(this.controller.signal);
    }
    guard(client) { return guardWith(this, client); }
    guarded(db, fn) {
        return guardedWith(this, db, fn);
    }
    async renewOnce(conn, by) {
        if (await (0, connect_js_1.callNamed)(conn, by, statements_js_1.RENEW, [this.key, this.id, this.t.ttl, String(this.term)]))
            return true;
        if ((await (0, connect_js_1.bounded)(conn, by, statements_js_1.STILL_OURS, [this.id, String(this.term), this.key]))[0].ok)
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
            const by = (0, options_js_1.now)() + this.t.callTimeout;
            try {
                this.conn ??= await (0, connect_js_1.connect)(this.config, this.schema, this.t.callTimeout);
                released = await (0, connect_js_1.callNamed)(this.conn, by, statements_js_1.RELEASE, [this.key, this.id, String(this.term)]);
            }
            catch {
                released = false;
                exports.unanswered.set((0, exports.releaseSlot)(this.config, this.key, this.id), String(this.term));
            }
        }
        this.lose("released", "released");
        this.disarm();
        (0, connect_js_1.drop)(this.conn);
        this.conn = null;
        return released;
    }
}
exports.Tenure = Tenure;
