"use strict";
Object.defineProperty(exports, "__esModule", { value: true });
exports.probe = probe;
exports.frees = frees;
exports.namesMember = namesMember;
exports.hint = hint;
// Notifications as hints: whether they reach this session at all (probe;
// not behind transaction pooling), the wait for one that says a key is
// free, at a bounded rate (a campaign's wait between tries), and a group's
// announcement naming a member (group.ts).
const node_crypto_1 = require("node:crypto");
const connect_js_1 = require("./connect.js");
const options_js_1 = require("./options.js");
const statements_js_1 = require("./statements.js");
/**
 * Notifications are hints, and any role may send them (docs/clients.md): a
 * hint brings the next try forward, but never to less than HINT_FLOOR ms
 * after the start of the previous one; hints that arrive meanwhile make
 * that one try, and the first hint after a quiet period is acted on at
 * once. The same rule, and the same name, in every leaderlock client.
 */
const HINT_FLOOR = 10;
/** Whether a notification this session sends itself comes back (not behind transaction pooling). */
async function probe(c, until) {
    const token = (0, node_crypto_1.randomBytes)(8).toString("hex");
    let heard = () => { };
    const back = new Promise((resolve) => {
        const timer = (0, options_js_1.later)(() => resolve(false), 200);
        heard = (n) => { if (n.channel === "leaderlock_probe" && n.payload === token) {
            clearTimeout(timer);
            resolve(true);
        } };
        c.on("notification", heard);
    });
    try {
        await (0, connect_js_1.bounded)(c, until, "LISTEN leaderlock_probe");
        await (0, connect_js_1.bounded)(c, until, statements_js_1.NOTIFY_PROBE, [token]);
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
const PARTITION_EVENTS = ["partition_granted", "partition_revoked", "partition_freed"];
/**
 * Whether `payload` is a group's announcement (contract 26) as the server
 * writes it (the Rust client's Announcement::well_formed_partition) naming
 * `member` of `group`: a hint that its assignment changed.
 */
function namesMember(payload, group, member) {
    try {
        const a = JSON.parse(payload ?? "");
        return typeof a === "object" && a !== null && PARTITION_EVENTS.includes(a.event) &&
            typeof a.group === "string" && typeof a.member === "string" && typeof a.at === "string" &&
            Number.isInteger(a.term) && a.term >= 0 && Number.isInteger(a.partition) && a.partition > 0 &&
            a.group === group && a.member === member;
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
        let until = (0, options_js_1.now)() + Math.max(ms, 0);
        const heard = (n) => {
            if (!frees(n.payload, key))
                return;
            const due = Math.max((0, options_js_1.now)(), lastTry + HINT_FLOOR);
            if (due >= until)
                return; // a try is due by then anyway
            until = due;
            clearTimeout(timer);
            timer = (0, options_js_1.later)(done, due - (0, options_js_1.now)());
        };
        if (heardAt >= lastTry)
            until = Math.min(until, Math.max((0, options_js_1.now)(), lastTry + HINT_FLOOR));
        let timer = (0, options_js_1.later)(done, until - (0, options_js_1.now)());
        c.on("notification", heard);
        c.on("end", done); // dropped: the next call fails and the candidate reconnects
        stop?.addEventListener("abort", done);
    });
}
