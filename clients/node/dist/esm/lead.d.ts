import { EventEmitter } from "node:events";
import { type LeaderlockError } from "./errors.js";
import { type Lease } from "./lease.js";
import { type ConnectionConfig, type LeadOptions } from "./options.js";
/** releaseOnSignals, ending the process: no lead() or Elector of it starts a new campaign from now on. */
export declare function endCampaigns(): void;
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
export declare function lead<T>(config: ConnectionConfig, key: string, options: LeadOptions, body: (lease: Lease) => Promise<T>): Promise<T>;
export interface ElectorOptions extends Omit<LeadOptions, "signal" | "timeout"> {
}
/**
 * Campaigns until stop(), again after each loss. Events: "elected"
 * (lease), "revoked" (reason, lease), "leader" (holder, or null when
 * vacant), "retrying" (ConnectionError, ms: the server is unreachable; it
 * reconnects after ms), "error" (RejectedError: a refusal retrying cannot
 * change; emitted once, the elector has stopped, `failed` holds it).
 */
export declare class Elector extends EventEmitter {
    private readonly config;
    readonly key: string;
    private readonly options;
    private readonly stopper;
    private loop?;
    private readonly schema;
    readonly id: string;
    /** The error that stopped this elector, if one did. */
    failed: LeaderlockError | undefined;
    constructor(config: ConnectionConfig, key: string, options?: ElectorOptions);
    start(): this;
    /** Whether it campaigns or leads: started, not stopped, not failed. */
    get running(): boolean;
    /** A listener that throws must not stop the elector with a lease it would neither renew nor release. */
    private tell;
    /** Reports the error that stops it, once: to "error" listeners, else as a process warning. */
    private fail;
    /** Stops campaigning; releases a lease it holds (hands over at once). */
    stop(): Promise<void>;
    private run;
}
