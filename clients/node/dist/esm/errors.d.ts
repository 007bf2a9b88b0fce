/** No such function: leaderlock not installed, or a schema before 0.5.0 (then the older call). */
export declare const UNDEFINED_FUNCTION = "42883";
/** le_assert_leader's refusal: the id is not the live holder in that term. */
export declare const NOT_LEADER = "LE001";
/** Whether the server refused a try because the key is held with another number of slots. */
export declare function slotsDiffer(e: any): boolean;
/** Base of this package's errors. */
export declare class LeaderlockError extends Error {
    constructor(message: string, options?: {
        cause?: unknown;
    });
}
/** `timeout` passed without becoming leader (0: the one try failed); `holder` holds the key. */
export declare class NotAcquired extends LeaderlockError {
    readonly key: string;
    readonly holder: string | null;
    constructor(key: string, holder: string | null);
}
/**
 * Why a lease ended:
 * - `deadline`: no renewal succeeded before the local deadline;
 * - `refused`: the server refused a renewal (the lease lapsed or was taken);
 * - `fenced`: le_assert_leader refused a guarded write (LE001);
 * - `rejected`: a renewal failed for good (e.g. a privilege revoked);
 * - `released`: this process gave it up (lead()'s body returned, release(),
 *   Elector.stop(), options.signal, releaseOnSignals).
 */
export type LossReason = "deadline" | "refused" | "fenced" | "rejected" | "released";
/** The lease is gone (see `reason`): stop acting as leader. */
export declare class LeaseLost extends LeaderlockError {
    readonly key: string;
    readonly term: number;
    readonly reason: LossReason;
    readonly detail: string;
    constructor(key: string, term: number, reason: LossReason, detail: string, options?: {
        cause?: unknown;
    });
}
/**
 * A refusal that retrying cannot change: waiting ends with it, an Elector
 * reports it once ("error") and stops. `sqlstate` is the server's, or
 * undefined when this client refused the arguments itself.
 */
export declare class RejectedError extends LeaderlockError {
    readonly sqlstate: string | undefined;
    constructor(message: string, cause?: unknown);
}
/**
 * The database has no leaderlock functions (no CREATE EXTENSION, no schema
 * holding the portable edition's), or not in `schema`, the one named (the
 * `schema` option or LEADERLOCK_SCHEMA).
 */
export declare class NotInstalledError extends RejectedError {
    readonly database: string;
    readonly schema: string | null;
    constructor(database: string, cause?: unknown, schema?: string | null);
}
/** The role may not do this: no EXECUTE on leaderlock's functions (42501), or the server refuses its login (28xxx). */
export declare class PrivilegeError extends RejectedError {
}
/** An argument the server (class 22, e.g. a ttl above leaderlock.max_ttl) or this client refuses. */
export declare class BadArgumentError extends RejectedError {
}
/**
 * The server could not be reached or could not answer now: refused or
 * dropped connections, a restart, a standby (read-only), a call past its
 * time. Waiting calls retry these until their timeout; `sqlstate` when the
 * server said why.
 */
export declare class ConnectionError extends LeaderlockError {
    readonly sqlstate: string | undefined;
    constructor(message: string, cause?: unknown);
}
export { LeaseLost as LeaseLostError, NotAcquired as NotAcquiredError };
export declare function isDbError(e: any): e is {
    code: string;
    message: string;
    severity: string;
    detail?: string;
};
/** A failure sorted by what to do about it: retry (ConnectionError) or give up (RejectedError). */
export declare function classify(e: unknown, database: string | undefined): LeaderlockError;
