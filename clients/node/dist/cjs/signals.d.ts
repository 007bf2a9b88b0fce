import { Elector } from "./lead.js";
import type { Lease } from "./lease.js";
import { type Session } from "./session.js";
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
export declare function releaseOnSignals(target: Lease | Elector | Session, options?: {
    signals?: NodeJS.Signals[];
    exit?: boolean;
}): () => void;
