import type PG from "pg";
import { LeaseLost, type LossReason } from "./errors.js";
import { type Lease, type PoolLike, type Queryable, Renewing } from "./lease.js";
import { type ConnectionConfig, type Timing } from "./options.js";
import { type Schema } from "./statements.js";
export interface SessionOptions {
    /** Seconds the session lives without a renewal (renewed every ttl/3). Default 10. */
    ttl?: number;
    /** The holder's id. Default host:pid:random. */
    id?: string;
    /** Seconds a key of the session stays unacquirable after the session lapsed (not after a close or a release). Default 0. */
    lockDelay?: number;
    /** A vacated key keeps its last value. Default false. */
    keepValues?: boolean;
    /** The schema that holds leaderlock, as LeadOptions.schema. Default LEADERLOCK_SCHEMA, else found. */
    schema?: string | null;
}
/** A key held under a session: a Lease, alive while its session is and the key was not released. `release()` releases this key alone. */
export interface SessionLease extends Lease {
    readonly session: Session;
}
/**
 * A session of this process (openSession()): many keys that live as long
 * as it does, renewed together. `valid` / `alive`, `check()`, `remaining`
 * and `signal.aborted` read the clock when asked, as a lease's do.
 */
export interface Session {
    /** The server's handle of the session (a uuid). */
    readonly handle: string;
    readonly id: string;
    /** Seconds. */
    readonly ttl: number;
    /** Aborted (reason: SessionLost) when the session is lost, closed, or at the local deadline; its `aborted` reads the clock. */
    readonly signal: AbortSignal;
    /** The local deadline, on performance.now()'s clock; moves at each renewal. */
    readonly deadline: number;
    /** Whether the session is still ours, computed now from the monotonic clock and the deadline. */
    readonly valid: boolean;
    /** The same as `valid`. */
    readonly alive: boolean;
    /** Milliseconds left before the local deadline (0 once lost). */
    readonly remaining: number;
    /** The leases acquired under the session and not released. */
    readonly leases: SessionLease[];
    /** Throws SessionLost (a LeaseLost) unless `valid`. */
    check(): void;
    /** le_try_acquire_in: the key's lease, or null when another holds it. */
    tryAcquire(key: string, options?: {
        value?: unknown;
    }): Promise<SessionLease | null>;
    /**
     * le_acquire_in: waits up to `timeout` seconds (0: one try) for the key;
     * NotAcquired when it passes, SessionLost when the session ended
     * meanwhile. While it waits, no candidate of lower `priority` takes it.
     */
    acquire(key: string, options: {
        timeout: number;
        value?: unknown;
        priority?: number;
    }): Promise<SessionLease>;
    /** le_release(key, id, term): the key's lease ends here first; the session goes on. True when the server released it. */
    release(key: string): Promise<boolean>;
    /**
     * Ends every lease of the session here, then closes it on the server
     * (le_close_session: every key vacated at once), best effort within
     * ttl/3. True when the server closed it; later calls get the same answer.
     */
    close(): Promise<boolean>;
}
/** The session is gone (see `reason`): so is every lease of it. `key` is "" and `term` 0 (a session has neither). */
export declare class SessionLost extends LeaseLost {
    readonly session: string;
    readonly id: string;
    constructor(session: string, id: string, reason: LossReason, detail: string, options?: {
        cause?: unknown;
    });
}
export declare class OpenSession extends Renewing implements Session {
    readonly handle: string;
    readonly id: string;
    private closing?;
    private readonly held;
    private readonly idle;
    constructor(handle: string, id: string, deadline: number, conn: PG.Client | null, config: ConnectionConfig, schema: Schema, t: Timing);
    get ttl(): number;
    /** Why it ended (once lost). */
    get why(): SessionLost;
    get leases(): SessionLease[];
    check(): void;
    /** Ends the session, and every lease of it, for good (the first reason stays). */
    lose(reason: LossReason, detail: string, cause?: unknown): SessionLost;
    /** One le_renew_session: the deadline moves; refused, the session is lost. */
    protected renewOnce(conn: PG.Client, by: number): Promise<true | "retry" | string>;
    tryAcquire(key: string, options?: {
        value?: unknown;
    }): Promise<SessionLease | null>;
    acquire(key: string, options: {
        timeout: number;
        value?: unknown;
        priority?: number;
    }): Promise<SessionLease>;
    /** After a refused acquisition: SessionLost (the session ends here) when the server has no row of it any more. */
    private endedThere;
    /**
     * The acquisition `text` and the key's term, in one transaction: the
     * lease, or who holds the key and whether the session is live there
     * (null: a release of the key that heard no answer is still held).
     */
    private take;
    release(key: string): Promise<boolean>;
    /** Releases `key` (with the term of its lease; of any term when this process holds no lease of it); `lease`: only if it is the key's current one. */
    releaseKey(key: string, lease?: KeyLease): Promise<boolean>;
    /** One call on a connection of the pool (a new one when none is idle); a connection whose call failed is dropped. */
    private withConn;
    close(): Promise<boolean>;
    private shutDown;
}
declare class KeyLease implements SessionLease {
    readonly session: OpenSession;
    readonly key: string;
    readonly term: number;
    readonly value: unknown;
    private readonly controller;
    constructor(session: OpenSession, key: string, term: number, value: unknown);
    get id(): string;
    get schema(): Schema;
    get signal(): AbortSignal;
    private get lost();
    /** Ends the lease once its session is not valid (which reads the clock). */
    private expireIfDue;
    get deadline(): number;
    get valid(): boolean;
    get alive(): boolean;
    get remaining(): number;
    check(): void;
    lose(reason: LossReason, detail: string, cause?: unknown): LeaseLost;
    guard(client: PG.ClientBase | Queryable): Promise<number>;
    guarded<T>(db: PG.ClientBase | PG.Pool | Queryable | PoolLike, fn: (tx: PG.ClientBase) => Promise<T>): Promise<T>;
    release(): Promise<boolean>;
}
/**
 * Opens a session (le_open_session) and starts its renewals: one
 * le_renew_session every ttl/3 on a connection of its own, for every key
 * acquired under it. `config` is what lead() takes; also
 * openSession({ dsn, ...options }). Rejects with a RejectedError
 * (NotInstalledError, PrivilegeError, BadArgumentError) when the server or
 * this client refuses, a ConnectionError when the server cannot be
 * reached.
 */
export declare function openSession(config: ConnectionConfig | (SessionOptions & {
    dsn: ConnectionConfig;
}), options?: SessionOptions): Promise<Session>;
export {};
