import { type LeaderlockError, RejectedError } from "./errors.js";
import { type ConnectionConfig } from "./options.js";
/** What the history records. */
export type HistoryEvent = "acquired" | "released" | "expired" | "proclaimed" | "run_claimed" | "run_finished" | "run_missed" | "schedule_paused" | "schedule_resumed" | "leaderless" | "leaderless_end";
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
