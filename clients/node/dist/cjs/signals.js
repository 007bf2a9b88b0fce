"use strict";
Object.defineProperty(exports, "__esModule", { value: true });
exports.releaseOnSignals = releaseOnSignals;
// releaseOnSignals: release on SIGTERM and SIGINT (a lease, an elector or a
// session), then end the process as the signal would have. Above both
// lead.ts and session.ts, as it takes either.
const node_os_1 = require("node:os");
const lead_js_1 = require("./lead.js");
const session_js_1 = require("./session.js");
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
    const lease = target instanceof lead_js_1.Elector ? null : target; // a Lease, or a Session: its end removes the handlers
    const handler = (sig) => {
        undo();
        if (exit)
            (0, lead_js_1.endCampaigns)();
        const done = target instanceof lead_js_1.Elector ? target.stop()
            : target instanceof session_js_1.OpenSession ? target.close() : target.release();
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
