import { EventEmitter } from "node:events";
import type PG from "pg";
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
export declare function defaultId(): string;
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
/** When a job is due: every `every` ms since the Unix epoch, or by a `cron` expression in time zone `tz`. */
export interface DueRule {
    /** A period in whole milliseconds (at least 1): due at its multiples since the Unix epoch, so every replica computes the same instants. */
    every?: number;
    /**
     * A cron expression (cron-parser): five fields (minute hour day-of-month
     * month day-of-week), or six with seconds first. Refused, so that every
     * client reads an expression alike: days of the week by number (name
     * them: MON-FRI, SUN), both day-of-month and day-of-week restricted, and
     * H, L, W, #.
     */
    cron?: string;
    /** The time zone of `cron` (IANA name, e.g. Europe/Paris). Default UTC. */
    tz?: string;
}
export interface ScheduleOptions extends DueRule {
    /** Milliseconds each claim and renewal asks for (renewed every ttl/3). Required. */
    ttlMs: number;
    /**
     * A run not claimed within this many ms after its due instant is not run,
     * and is recorded missed (once); also how far back a schedule that starts
     * looks. null: no limit (and no look back). Default: the period of
     * `every`, 5 minutes with `cron` (as `leaderlock run`).
     */
    misfireGraceMs?: number | null;
    /** This replica's id. Default host:pid:random. */
    id?: string;
    /** How often, at most, a run another replica claimed is looked at (ms; claimed again if that claim lapses unfinished). Default 1000. */
    pollMs?: number;
    /**
     * Aborting it stops the schedule: schedule() resolves. A run in progress
     * is told (its `signal` aborts, `isOurs()` turns false, reason
     * "released"), and finished with the callback's outcome first.
     */
    signal?: AbortSignal;
    /** The schema that holds leaderlock, as LeadOptions.schema. Default LEADERLOCK_SCHEMA, else found. */
    schema?: string | null;
}
/** A run this replica claimed: act for it only while `isOurs()`. */
export interface Run {
    readonly job: string;
    readonly id: string;
    /** The due instant (on the server's lease clock). */
    readonly due: Date;
    /** The claim's fencing term: above every earlier claim of any run of the job (a bigint: exact). */
    readonly term: bigint;
    /** The local deadline, on performance.now()'s clock; moves at each renewal. */
    readonly deadline: number;
    /**
     * Aborted (reason: RunLost) when the run is lost (a renewal refused), at
     * the local deadline, or when the schedule is stopped. Its `aborted`
     * reads the clock too.
     */
    readonly signal: AbortSignal;
    /** Milliseconds left before the local deadline (0 once lost). */
    readonly remaining: number;
    /** Whether this replica may still act for the run, from the monotonic clock and the deadline: call it right before each side effect. */
    isOurs(): boolean;
    /** Throws RunLost (a LeaseLost) unless `isOurs()`. */
    check(): void;
}
/** A run is no longer this replica's (see `reason`, as LeaseLost's; `key` is the job). `term` is the run's term as a number; `runTerm` exact. */
export declare class RunLost extends LeaseLost {
    readonly job: string;
    readonly due: Date;
    readonly runTerm: bigint;
    constructor(job: string, due: Date, runTerm: bigint, reason: LossReason, detail: string, options?: {
        cause?: unknown;
    });
}
/**
 * The first due instant of `when` strictly after `after`, or null when
 * there is none. What every replica computes alike (with `every`: the
 * next multiple of the period since the Unix epoch).
 */
export declare function nextDue(when: DueRule, after: Date): Date | null;
/**
 * Runs `fn` once per due instant of a schedule (`every` ms, or `cron` in
 * `tz`), on one replica among all those that schedule `job` alike, until
 * `options.signal` aborts (then resolves). Each run is claimed on the
 * server with a fencing term and handed to `fn` as a Run: act only while
 * `run.isOurs()` (or `run.check()`), and fence side effects with
 * `run.term`. It is renewed every ttl/3 while `fn` runs; `fn` resolving
 * records the run succeeded (failed, if the run was lost by then), rejecting
 * records it failed with the error's name and message (the schedule goes on). Waiting survives the connection
 * (reconnects with jittered backoff); rejects with a RejectedError
 * (NotInstalledError, PrivilegeError, BadArgumentError) at once.
 */
export declare function schedule(config: ConnectionConfig, job: string, options: ScheduleOptions, fn: (run: Run) => Promise<void>): Promise<void>;
/** What the history records. */
export type HistoryEvent = "acquired" | "released" | "expired" | "proclaimed" | "run_claimed" | "run_finished" | "run_missed";
/** One transition, as the history holds it (a row of le_history). */
export interface Transition {
    /** Only grows, in commit order: keep it to resume after it (`since`). */
    readonly position: bigint;
    /** When it happened (the server's lease clock; whole milliseconds: `payload.at` has the microseconds). */
    readonly at: Date;
    readonly event: HistoryEvent | (string & {});
    /** The lease's key, or the run's job. */
    readonly key: string | null;
    readonly holder: string | null;
    /** The tenure's term, or the run's (exact). */
    readonly term: bigint | null;
    /** The role whose call made it; null for the server's worker. */
    readonly role: string | null;
    /** The notification that announced it (parsed JSON; its numbers are JavaScript numbers). */
    readonly payload: any;
}
export interface HistoryOptions {
    /**
     * Deliver the transitions after this position: a bigint, a safe integer
     * or a string of digits (a `position` kept from an earlier watcher).
     * Undefined: only those numbered after the watcher's first connection
     * (le_history_position() then).
     */
    since?: bigint | number | string | null;
    /** This key only. */
    key?: string | null;
    /** Keys starting with this only (not with `key`). */
    keyPrefix?: string | null;
    /** Milliseconds between reads without a notification (default 1000; at least 50). */
    pollMs?: number;
    /** Aborting it closes the watcher (a pending next() resolves done). */
    signal?: AbortSignal;
    /** The schema that holds leaderlock, as LeadOptions.schema. Default LEADERLOCK_SCHEMA, else found. */
    schema?: string | null;
}
/**
 * le_history refused the watcher's position (SQLSTATE LE002): the retention
 * (leaderlock.history_retention, leaderlock.history_max_rows) deleted
 * transitions after it before they were read. The watcher has stopped.
 * Read the current state (leaderlock_status), then watch again from now on
 * (`since` undefined). `position`: the position it asked to read after.
 */
export declare class HistoryPrunedError extends RejectedError {
    readonly position: bigint;
    constructor(position: bigint, cause?: unknown);
}
/**
 * Follows the history of transitions (contract 23): each transition after
 * `since` once, in position order, waiting for new ones. An async iterator
 * (`for await (const t of watcher)`; leaving the loop closes it) with
 * `position`, the last position delivered, and `close()`. Connects at the
 * first next(), on a connection of its own (application_name "leaderlock
 * watch" unless the configuration names one). A lost connection (a
 * restart, a terminated backend, the network) is made again with backoff,
 * from 100 ms doubling to 5 s, and reading goes on after the last position
 * delivered. next() rejects, and the watcher stops, with HistoryPrunedError
 * when the retention has passed that position, and at once with any other
 * refusal (RejectedError: NotInstalledError, PrivilegeError,
 * BadArgumentError, or another error of the server).
 */
export declare class HistoryWatcher implements AsyncIterableIterator<Transition> {
    private readonly config;
    private readonly key;
    private readonly keyPrefix;
    private readonly poll;
    private readonly signal;
    private readonly schema;
    private readonly stopper;
    private readonly stopped;
    /** The last position delivered (or the start). */
    private cursor;
    /** After a short page: the last position numbered, delivered with its last row. */
    private through;
    /** Rows read and not delivered yet, in order. */
    private readonly ready;
    private conn;
    /** A connection being made (closed with the watcher). */
    private opening;
    /** The last read returned a short page: wait for a hint or the poll before the next. */
    private caughtUp;
    private lastRead;
    private heardAt;
    private wake;
    private failures;
    private opened;
    private lost;
    private queue;
    /** The error that stopped this watcher, if one did. */
    failed: LeaderlockError | undefined;
    constructor(config: ConnectionConfig, options?: HistoryOptions);
    private readonly onAbort;
    /** The position up to which every transition of its filter was delivered (the last one delivered, or, when nothing more was for the filter, the last position numbered; before any, the start; undefined until known): resume after it with `since`. */
    get position(): bigint | undefined;
    /** How many times the connection was lost and made again. */
    get reconnects(): number;
    /** Whether it is closed (by close(), its signal, leaving a loop, or the error that stopped it). */
    get closed(): boolean;
    [Symbol.asyncIterator](): this;
    /** The next transition, waiting for one; done once closed. Calls are served in turn. */
    next(): Promise<IteratorResult<Transition>>;
    /** Closes it (as `for await` does when the loop is left). */
    return(): Promise<IteratorResult<Transition>>;
    /** Stops watching and closes the connection; a pending next() resolves done. Resolves when the watcher is idle. */
    close(): Promise<void>;
    /** What close() does, without waiting for a call in progress (which may be the caller). */
    private shut;
    private drop;
    private step;
    /** Retry (ConnectionError) or stop (anything else). */
    private sort;
    /** Connects if need be, waits for its turn (a hint or the poll, once caught up), and reads the next page into `ready`. */
    private readMore;
    /** Until a hint heard since the last read started, the poll interval from it, the connection's end, or close(). */
    private hintOrPoll;
    private open;
}
/**
 * A HistoryWatcher of `config`: `for await (const t of watchHistory(url, { since, keyPrefix })) ...`.
 * Throws BadArgumentError at once for options this client refuses.
 */
export declare function watchHistory(config: ConnectionConfig, options?: HistoryOptions): HistoryWatcher;
