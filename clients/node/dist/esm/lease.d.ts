import type PG from "pg";
import { LeaseLost, type LossReason } from "./errors.js";
import { type ConnectionConfig, type Timing } from "./options.js";
import { type Schema } from "./statements.js";
/** What a guarded write runs on: a PG.Client, a pool's client, anything with pg's query(). */
export interface Queryable {
    query(config: {
        text: string;
        values?: unknown[];
    }): Promise<{
        rows: any[];
        command?: string;
    }>;
}
/** A PG.Pool (or anything with connect() giving a client with release()). */
export interface PoolLike {
    connect(): Promise<Queryable & {
        release(err?: Error | boolean): void;
    }>;
    totalCount: number;
}
export interface Lease {
    readonly key: string;
    readonly id: string;
    /** The fencing token: le_assert_leader(key, id, term), which guard() and guarded() run for you. */
    readonly term: number;
    /** The value announced with this leadership (options.value), or undefined. */
    readonly value: unknown;
    /**
     * Aborted (reason: LeaseLost) at a loss or at the local deadline. Its
     * `aborted` reads the clock too: true from the deadline on, even before
     * the timer that aborts it has run.
     */
    readonly signal: AbortSignal;
    /** The local deadline, on performance.now()'s clock; moves at each renewal. */
    readonly deadline: number;
    /** Whether the lease is still ours, computed now from the monotonic clock and the deadline. */
    readonly valid: boolean;
    /** The same as `valid`. */
    readonly alive: boolean;
    /** Milliseconds left before the local deadline (0 once lost). */
    readonly remaining: number;
    /** Throws LeaseLost unless `valid`. Call it before each unit of work. */
    check(): void;
    /**
     * Fences the caller's open transaction on `client`: runs
     * le_assert_leader(key, id, term), whose lock keeps any takeover from
     * committing until that transaction ends. Resolves with the term; throws
     * LeaseLost (reason "fenced", the lease then ends) when the server says
     * another leads, or at once when `valid` is false. The error aborts the
     * transaction: nothing in it commits.
     */
    guard(client: PG.ClientBase | Queryable): Promise<number>;
    /**
     * Runs `fn` in a transaction fenced by the lease: BEGIN, le_assert_leader,
     * fn(tx), COMMIT; ROLLBACK on any error (LeaseLost when fenced). `db` is a
     * pg.Client with no transaction open, or a pg.Pool (a client is checked
     * out for it).
     */
    guarded<T>(db: PG.ClientBase | PG.Pool | Queryable | PoolLike, fn: (tx: PG.ClientBase) => Promise<T>): Promise<T>;
    /** Ends the lease now (the signal aborts, reason "released") and hands it over; true when the server released it. */
    release(): Promise<boolean>;
}
export declare const unanswered: Map<string, string>;
export declare const releaseSlot: (config: ConnectionConfig, key: string, id: string) => string;
/**
 * Sends again the release under this id that heard no answer, if any; false while the tenure it ends
 * is still held (its row was locked), when the campaign must not try yet.
 */
export declare function releaseAgain(c: PG.Client, until: number, slot: string, key: string, id: string): Promise<boolean>;
export declare const abortedOf: () => any;
export declare const reasonOf: () => any;
/** Makes `signal`'s `aborted`, `reason` and `throwIfAborted()` call `expire` first (it aborts the signal once the deadline has passed). */
export declare function readsTheClock(signal: AbortSignal, expire: () => void): void;
/** What guardWith and guardedWith fence with: a lease of either kind. */
interface Fenced {
    readonly key: string;
    readonly id: string;
    readonly term: number;
    /** Where leaderlock was found (the lease's own connections). */
    readonly schema: Schema;
    check(): void;
    lose(reason: LossReason, detail: string, cause?: unknown): LeaseLost;
}
/** Lease.guard: le_assert_leader(key, id, term) in the caller's transaction; LeaseLost "fenced" (the lease ends) on LE001. */
export declare function guardWith(l: Fenced, client: PG.ClientBase | Queryable): Promise<number>;
/** Lease.guarded: BEGIN, guardWith, fn(tx), COMMIT; ROLLBACK on any error. */
export declare function guardedWith<T>(l: Fenced, db: PG.ClientBase | PG.Pool | Queryable | PoolLike, fn: (tx: PG.ClientBase) => Promise<T>): Promise<T>;
/** BEGIN, guard(tx), fn(tx), COMMIT; ROLLBACK on any error (a lease's guarded(), a group member's). */
export declare function fencedTransaction<T>(db: PG.ClientBase | PG.Pool | Queryable | PoolLike, guard: (tx: Queryable) => Promise<unknown>, fn: (tx: PG.ClientBase) => Promise<T>): Promise<T>;
/**
 * A local deadline kept by a renewal every ttl/3 on a connection of its own
 * (a lease's, a session's): every reader checks the clock, a timer enforces
 * the deadline whatever a renewal is doing, and a renewal that fails is
 * tried again every ttl/10 until the deadline. Subclasses say what one
 * renewal is (`renewOnce`) and what losing means (`lose`).
 */
export declare abstract class Renewing {
    deadline: number;
    protected conn: PG.Client | null;
    protected readonly config: ConnectionConfig;
    readonly schema: Schema;
    protected readonly t: Timing;
    protected readonly controller: AbortController;
    private watchdog?;
    private timer?;
    protected stopped: boolean;
    protected running?: Promise<void>;
    constructor(deadline: number, conn: PG.Client | null, config: ConnectionConfig, schema: Schema, t: Timing);
    get signal(): AbortSignal;
    protected get lost(): boolean;
    /** Ends it once the local deadline has passed: called by every reader, and by the timer. */
    protected expireIfDue(): void;
    get valid(): boolean;
    get alive(): boolean;
    get remaining(): number;
    /** Ends it for good (the first reason stays). */
    abstract lose(reason: LossReason, detail: string, cause?: unknown): LeaseLost;
    /** One renewal on `conn`, within `by`: renewed, "retry" (its row was locked: again until the deadline), or refused (the detail). */
    protected abstract renewOnce(conn: PG.Client, by: number): Promise<true | "retry" | string>;
    protected disarm(): void;
    /** The local deadline, enforced by a timer whatever a renewal is doing (the readers check the clock as well). */
    private arm;
    private schedule;
    private renew;
    /** Stops renewing; waits for a renewal in flight, ttl/3 and a second at most. Whether it hung. */
    protected stopRenewing(): Promise<boolean>;
}
export declare class Tenure extends Renewing implements Lease {
    readonly key: string;
    readonly id: string;
    readonly term: number;
    readonly value: unknown;
    private finishing?;
    constructor(key: string, id: string, term: number, deadline: number, conn: PG.Client | null, config: ConnectionConfig, schema: Schema, t: Timing, value?: unknown);
    check(): void;
    lose(reason: LossReason, detail: string, cause?: unknown): LeaseLost;
    guard(client: PG.ClientBase | Queryable): Promise<number>;
    guarded<T>(db: PG.ClientBase | PG.Pool | Queryable | PoolLike, fn: (tx: PG.ClientBase) => Promise<T>): Promise<T>;
    protected renewOnce(conn: PG.Client, by: number): Promise<true | "retry" | string>;
    release(): Promise<boolean>;
    /** Stops renewing and hands over at once when the lease is still ours (once; later calls get the same answer). */
    finish(): Promise<boolean>;
    private handOver;
}
export {};
