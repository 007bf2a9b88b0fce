import type PG from "pg";
export interface LeadOptions {
    /** Seconds each acquire and renewal asks for (renewed every ttl/3). Default 10. */
    ttl?: number;
    /** Seconds to wait for leadership: undefined or null waits for ever, 0 tries once. */
    timeout?: number | null;
    /** This candidate's id. Default host:pid:random. */
    id?: string;
    /** Seconds between tries without a notification (default 1 s, ttl/2 where a worker announces expiries, ttl/4 where none does). */
    poll?: number;
    /** A JSON value announced with the leadership (le_proclaim), e.g. this leader's address. */
    value?: unknown;
    /** lead() only: aborting it stops the waiting (lead() rejects with its reason) or, while leading, releases the lease. */
    signal?: AbortSignal;
    /**
     * The schema that holds leaderlock, to name when several do (the portable
     * edition installed by its script next to another copy). Default: the
     * environment variable LEADERLOCK_SCHEMA, else the schema CREATE EXTENSION
     * put it in (or the one schema holding the portable edition's functions),
     * found on each new connection. Every statement names that schema, never
     * the session's search_path (SECURITY.md). The same in every option
     * object that connects.
     */
    schema?: string | null;
}
/**
 * What to connect to: a connection string (postgresql://user@host1:5432,host2:5432/db?target_session_attrs=read-write)
 * or a `pg` client configuration (host may list several, comma-separated).
 * Several hosts are tried in order, as libpq does; target_session_attrs
 * (any, read-write, read-only, primary, standby, prefer-standby) picks the
 * session, as libpq's.
 */
export type ConnectionConfig = string | (PG.ClientConfig & {
    target_session_attrs?: string;
});
export declare function defaultId(): string;
export declare const now: () => number;
/** Node's timers hold at most 2^31 - 1 ms (a longer delay fires after 1 ms): longer ones fire early, and their callers check. */
export declare const MAX_DELAY: number;
export declare function later(fn: () => void, ms: number): NodeJS.Timeout;
export interface Timing {
    ttl: number;
    renewEvery: number;
    margin: number;
    callTimeout: number;
    retryEvery: number;
    poll?: number;
}
export declare function timing(options: LeadOptions): Timing;
export declare function pollEvery(t: Timing, worker: boolean, notifications: boolean): number;
/** The n-th pause between reconnections: doubling from BACKOFF_FIRST to BACKOFF_MAX, jittered down to half. */
export declare function backoff(n: number): number;
export declare function checkName(what: string, v: unknown): string;
/** `ms`, or until `stop` aborts. */
export declare function pause(ms: number, stop?: AbortSignal): Promise<void>;
