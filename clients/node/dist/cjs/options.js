"use strict";
Object.defineProperty(exports, "__esModule", { value: true });
exports.MAX_DELAY = exports.now = void 0;
exports.defaultId = defaultId;
exports.later = later;
exports.timing = timing;
exports.pollEvery = pollEvery;
exports.backoff = backoff;
exports.checkName = checkName;
exports.pause = pause;
// What every part shares: the options of lead() and of what connects, the
// id, the monotonic clock and its timers, the timing a ttl gives, and the
// checks of names.
const node_os_1 = require("node:os");
const node_crypto_1 = require("node:crypto");
const node_perf_hooks_1 = require("node:perf_hooks");
const errors_js_1 = require("./errors.js");
function defaultId() {
    return `${(0, node_os_1.hostname)()}:${process.pid}:${(0, node_crypto_1.randomBytes)(4).toString("hex")}`;
}
const now = () => node_perf_hooks_1.performance.now();
exports.now = now;
/** Node's timers hold at most 2^31 - 1 ms (a longer delay fires after 1 ms): longer ones fire early, and their callers check. */
exports.MAX_DELAY = 2 ** 31 - 1;
function later(fn, ms) {
    return setTimeout(fn, Math.min(Math.max(ms, 0), exports.MAX_DELAY));
}
/** No single call waits longer than this (a longer ttl still renews every ttl/3). */
const MAX_CALL = 60_000;
function timing(options) {
    const ttl = options.ttl ?? 10;
    if (!(typeof ttl === "number" && ttl > 0 && Number.isFinite(ttl)))
        throw new errors_js_1.BadArgumentError(`ttl must be a positive number of seconds, not ${ttl}`);
    if (options.poll !== undefined && !(options.poll > 0))
        throw new errors_js_1.BadArgumentError(`poll must be a positive number of seconds, not ${options.poll}`);
    if (options.timeout != null && !(options.timeout >= 0))
        throw new errors_js_1.BadArgumentError(`timeout must be at least 0, not ${options.timeout}`);
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
/** Reconnecting while waiting: the first pause, and the largest (each pause is jittered down to half). */
const BACKOFF_FIRST = 50;
const BACKOFF_MAX = 1000;
/** The n-th pause between reconnections: doubling from BACKOFF_FIRST to BACKOFF_MAX, jittered down to half. */
function backoff(n) {
    const ms = Math.min(BACKOFF_MAX, BACKOFF_FIRST * 2 ** Math.min(n, 16));
    return ms / 2 + Math.random() * (ms / 2);
}
function checkName(what, v) {
    if (typeof v !== "string" || v === "")
        throw new errors_js_1.BadArgumentError(`${what} must be a non-empty string`);
    return v;
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
