"use strict";
Object.defineProperty(exports, "__esModule", { value: true });
exports.Elector = void 0;
exports.endCampaigns = endCampaigns;
exports.lead = lead;
// Leading: the campaign (tries on one connection, hints between them), the
// election across connections (elect()), and its two idioms: lead() (run a
// body while leading) and the Elector (campaign for as long as it runs).
const node_events_1 = require("node:events");
const errors_js_1 = require("./errors.js");
const connect_js_1 = require("./connect.js");
const hints_js_1 = require("./hints.js");
const lease_js_1 = require("./lease.js");
const options_js_1 = require("./options.js");
const statements_js_1 = require("./statements.js");
class Stopped extends Error {
}
/** Set once releaseOnSignals has released for a signal and is ending the process. */
let exiting = false;
/** releaseOnSignals, ending the process: no lead() or Elector of it starts a new campaign from now on. */
function endCampaigns() {
    exiting = true;
}
/**
 * Tries on one connection until it leads (the send time of the winning try
 * + ttl - margin is its deadline), `giveUp` passes (NotAcquired) or `stop`
 * aborts; any other failure is thrown for elect() to sort.
 */
async function campaign(c, key, id, t, giveUp, stop, refused, value, answered, slot) {
    const by = (0, options_js_1.now)() + t.callTimeout;
    const worker = await (0, connect_js_1.workerServes)(c, by);
    answered();
    let expire = !worker;
    await (0, connect_js_1.bounded)(c, by, "LISTEN leaderlock");
    const notifications = await (0, hints_js_1.probe)(c, by);
    let slotsDiffered = false; // the last try met the key held with other slots
    // Hints heard at any time, tries in flight included (see hint()).
    let heardAt = -Infinity;
    const heardFree = (n) => {
        if ((0, hints_js_1.frees)(n.payload, key))
            heardAt = (0, options_js_1.now)();
    };
    c.on("notification", heardFree);
    try {
        for (;;) {
            if (stop?.aborted)
                throw new Stopped();
            const lastTry = (0, options_js_1.now)();
            // a release under this id that heard no answer may still arrive: send it again, and hear the answer, first
            const free = await (0, lease_js_1.releaseAgain)(c, (0, options_js_1.now)() + t.callTimeout, slot, key, id);
            if (free && expire) {
                try {
                    await (0, connect_js_1.bounded)(c, (0, options_js_1.now)() + t.callTimeout, statements_js_1.EXPIRE_LAPSED);
                }
                catch (e) {
                    // refused (or missing before 0.5.0): the try takes a lapsed lease anyway, unannounced
                    if (!(0, errors_js_1.isDbError)(e))
                        throw e; // the connection, not the server
                    expire = false;
                }
            }
            const sent = (0, options_js_1.now)();
            let won = false;
            try {
                // (not while the tenure that release ends is still held: its row was locked)
                if (free)
                    won = (await (0, connect_js_1.bounded)(c, sent + t.callTimeout, statements_js_1.TRY_ACQUIRE, [key, id, t.ttl]))[0].ok;
                slotsDiffered = false;
            }
            catch (e) {
                if (!(0, errors_js_1.slotsDiffer)(e))
                    throw e;
                // held with another number of slots: not ours now, a refusal
                if (!slotsDiffered) {
                    process.emitWarning(`leaderlock: key ${JSON.stringify(key)} is held with another number of slots: ` +
                        `not ours now; trying again until those tenures end (server: ${JSON.stringify(String(e.message))})`);
                }
                slotsDiffered = true;
            }
            if (won) {
                const rows = await (0, connect_js_1.bounded)(c, sent + t.callTimeout, statements_js_1.TERM_OF, [key, id]);
                if (rows.length) {
                    if (value !== undefined) {
                        await (0, connect_js_1.bounded)(c, sent + t.callTimeout, statements_js_1.PROCLAIM, [key, id, JSON.stringify(value)]);
                    }
                    return { term: Number(rows[0].term), deadline: sent + t.ttl * 1000 - t.margin };
                }
            }
            const n = (0, options_js_1.now)();
            if (refused || n >= giveUp) {
                const holder = (await (0, connect_js_1.bounded)(c, n + t.callTimeout, statements_js_1.LEADER, [key]))[0].holder;
                refused?.(holder);
                if (n >= giveUp)
                    throw new errors_js_1.NotAcquired(key, holder);
            }
            await (0, hints_js_1.hint)(c, key, Math.min((0, options_js_1.pollEvery)(t, worker, notifications), giveUp - n), lastTry, stop, heardAt);
        }
    }
    finally {
        c.off("notification", heardFree);
    }
}
/** The winning connection, done listening (null when that failed: the first renewal connects anew). */
async function quiet(c, t) {
    try {
        await (0, connect_js_1.bounded)(c, (0, options_js_1.now)() + t.callTimeout, "UNLISTEN *");
        return c;
    }
    catch {
        (0, connect_js_1.drop)(c);
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
    const giveUp = o.timeout == null ? Infinity : (0, options_js_1.now)() + o.timeout * 1000;
    let failures = 0;
    for (;;) {
        if (o.stop?.aborted)
            throw new Stopped();
        let c = null;
        try {
            const connectFor = Math.min(Math.max(t.callTimeout, 2000), Math.max(giveUp - (0, options_js_1.now)(), 1000));
            c = await (0, connect_js_1.connect)(config, o.schema, connectFor);
            const won = await campaign(c, key, id, t, giveUp, o.stop, o.refused, o.value, () => { failures = 0; }, (0, lease_js_1.releaseSlot)(config, key, id));
            return { ...won, conn: c };
        }
        catch (e) {
            const database = c?.database ?? (0, connect_js_1.databaseOf)(config);
            (0, connect_js_1.drop)(c);
            if (o.stop?.aborted || e instanceof Stopped)
                throw new Stopped();
            const err = (0, errors_js_1.classify)(e, database);
            if (!(err instanceof errors_js_1.ConnectionError))
                throw err;
            if ((0, options_js_1.now)() >= giveUp)
                throw err;
            const ms = Math.min((0, options_js_1.backoff)(failures++), giveUp - (0, options_js_1.now)());
            o.retrying?.(err, ms);
            await (0, options_js_1.pause)(ms, o.stop);
        }
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
    (0, options_js_1.checkName)("key", key);
    const id = options.id === undefined ? (0, options_js_1.defaultId)() : (0, options_js_1.checkName)("id", options.id);
    const t = (0, options_js_1.timing)(options);
    const schema = (0, statements_js_1.schemaOf)(options.schema);
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
    const tenure = new lease_js_1.Tenure(key, id, won.term, won.deadline, await quiet(won.conn, t), config, schema, t, options.value);
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
        (0, options_js_1.checkName)("key", key);
        this.id = options.id === undefined ? (0, options_js_1.defaultId)() : (0, options_js_1.checkName)("id", options.id);
        (0, options_js_1.timing)(options);
        this.schema = (0, statements_js_1.schemaOf)(options.schema);
    }
    start() {
        this.loop ??= this.run().catch((e) => this.fail((0, errors_js_1.classify)(e, (0, connect_js_1.databaseOf)(this.config))));
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
        const t = (0, options_js_1.timing)(this.options);
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
                return this.fail((0, errors_js_1.classify)(e, (0, connect_js_1.databaseOf)(this.config)));
            }
            const tenure = new lease_js_1.Tenure(this.key, this.id, won.term, won.deadline, await quiet(won.conn, t), this.config, this.schema, t, this.options.value);
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
