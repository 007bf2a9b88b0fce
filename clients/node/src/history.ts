// The history of transitions (contract 23). The server records every
// transition (acquired, released, expired, proclaimed, run_claimed,
// run_finished, run_missed) with the notification that announced it; its
// worker numbers them in commit order shortly after they commit, then says
// so on channel leaderlock_history. A watcher reads le_history after the
// last position it delivered, in pages until a short one, and hands each
// row out once, in order; then it waits for a notification or the poll
// interval. A notification is a hint (any role may send one): it brings the
// next read forward, never to less than MIN_READ_GAP after the start of the
// last one; only rows le_history returns are delivered. A lost connection
// is made again with backoff, and reading goes on after the last position
// delivered: nothing is missed or repeated. The Rust client's
// HistoryWatcher (crates/client/src/history.rs) is the reference. Positions
// and terms are bigints (exact), as Run.term.
import type PG from "pg";
import { BadArgumentError, ConnectionError, type LeaderlockError, RejectedError, classify, isDbError } from "./errors.js";
import { bounded, connect, databaseOf, drop, targets } from "./connect.js";
import { type ConnectionConfig, checkName, later, now, pause } from "./options.js";
import { EXPIRE_LAPSED, type Schema, WORKER_SERVES, schemaOf } from "./statements.js";

// With the last position numbered, read in the same statement (one snapshot:
// both functions are STABLE): after a short page, every transition the filter
// selects up to it has been read. No transition: one row, NULL but that.
const HISTORY = "SELECT h.\"position\"::pg_catalog.text AS position, " +
  "pg_catalog.floor(extract(epoch FROM h.at) OPERATOR(pg_catalog.*) 1000)::pg_catalog.float8 AS at_ms, " +
  "h.event, h.key, h.holder, h.term::pg_catalog.text AS term, h.role::pg_catalog.text AS role, " +
  "h.payload::pg_catalog.text AS payload, p.head::pg_catalog.text AS head " +
  "FROM (SELECT @extschema@.le_history_position() AS head) p " +
  "LEFT JOIN @extschema@.le_history(after => $1::bigint, for_key => $2, key_prefix => $3, max_rows => $4) h ON true " +
  "ORDER BY h.\"position\"";
/** The last position numbered: where a watcher of "only what happens from now on" starts. */
const HISTORY_POSITION = "SELECT @extschema@.le_history_position()::pg_catalog.text AS position";
const HISTORY_CHANNEL = "leaderlock_history";
/** le_history's refusal: the position asked for is older than the retention keeps. */
const PRUNED = "LE002";
/** Rows read per call. */
const HISTORY_PAGE = 1000;
/** Least time between two reads of the history (ms), however many notifications arrive. */
const MIN_READ_GAP = 50;
/** Longest a connection attempt, or one statement, of a watcher may take (ms). */
const HISTORY_CALL = 10_000;
/** A watcher reconnecting: the first pause and the largest (ms), doubling, each jittered down to half; reset by a read. */
const HISTORY_BACKOFF_FIRST = 100;
const HISTORY_BACKOFF_MAX = 5_000;
const MAX_POSITION = 2n ** 63n - 1n;

/**
 * SQLSTATEs of a watcher's statement that a new connection may heal: a
 * connection lost or refused for now (08), the server shutting down, the
 * backend terminated, a statement cancelled (57), short of resources (53),
 * a transaction rolled back (40), a standby (25006). Any other error from
 * the server stops the watcher.
 */
function transient(code: string): boolean {
  return /^(08|40|53|57)/.test(code) || code === "25006";
}

function historyBackoff(n: number): number {
  const ms = Math.min(HISTORY_BACKOFF_MAX, HISTORY_BACKOFF_FIRST * 2 ** Math.min(n, 16));
  return ms / 2 + Math.random() * (ms / 2);
}

/** What the history records. */
export type HistoryEvent = "acquired" | "released" | "expired" | "proclaimed" | "run_claimed" | "run_finished" | "run_missed"
  | "schedule_paused" | "schedule_resumed" | "leaderless" | "leaderless_end";

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
export class HistoryPrunedError extends RejectedError {
  constructor(readonly position: bigint, cause?: unknown) {
    super(`${(cause as any)?.message ?? `leaderlock: history position ${position} is no longer kept`} (SQLSTATE ${PRUNED})`, cause);
  }
}

function positionOf(v: unknown): bigint {
  let p: bigint | undefined;
  if (typeof v === "bigint") p = v;
  else if (typeof v === "number" && Number.isSafeInteger(v)) p = BigInt(v);
  else if (typeof v === "string" && /^[0-9]{1,19}$/.test(v)) p = BigInt(v);
  if (p === undefined || p < 0n || p > MAX_POSITION) {
    throw new BadArgumentError(`since must be a history position (a whole number, at least 0), not ${String(v)}`);
  }
  return p;
}

function transitionOf(r: any): Transition {
  let payload: unknown = null;
  try {
    payload = JSON.parse(r.payload);
  } catch {
    // jsonb's text always parses
  }
  return {
    position: BigInt(r.position), at: new Date(r.at_ms), event: r.event, key: r.key, holder: r.holder,
    term: r.term === null ? null : BigInt(r.term), role: r.role, payload,
  };
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
export class HistoryWatcher implements AsyncIterableIterator<Transition> {
  private readonly key: string | null;
  private readonly keyPrefix: string | null;
  private readonly poll: number;
  private readonly signal: AbortSignal | undefined;
  private readonly schema: Schema;
  private readonly stopper = new AbortController();
  private readonly stopped: Promise<null>;
  /** The last position delivered (or the start). */
  private cursor: bigint | undefined;
  /** After a short page: the last position numbered, delivered with its last row. */
  private through: bigint | undefined;
  /** Rows read and not delivered yet, in order. */
  private readonly ready: Transition[] = [];
  private conn: { client: PG.Client; ended: boolean; worker: boolean } | null = null;
  /** A connection being made (closed with the watcher). */
  private opening: PG.Client | null = null;
  /** The last read returned a short page: wait for a hint or the poll before the next. */
  private caughtUp = false;
  private lastRead = -Infinity;
  private heardAt = -Infinity;
  private wake: (() => void) | null = null;
  private failures = 0;
  private opened = false;
  private lost = 0;
  private queue: Promise<unknown> = Promise.resolve();
  /** The error that stopped this watcher, if one did. */
  failed: LeaderlockError | undefined;

  constructor(private readonly config: ConnectionConfig, options: HistoryOptions = {}) {
    const key = options.key ?? null;
    const keyPrefix = options.keyPrefix ?? null;
    if (key !== null) checkName("key", key);
    if (keyPrefix !== null && typeof keyPrefix !== "string") throw new BadArgumentError("keyPrefix must be a string");
    if (key !== null && keyPrefix !== null) throw new BadArgumentError("give key or keyPrefix, not both");
    const poll = options.pollMs ?? 1000;
    if (!(typeof poll === "number" && poll > 0 && Number.isFinite(poll))) {
      throw new BadArgumentError(`pollMs must be a positive number of milliseconds, not ${poll}`);
    }
    targets(config); // a configuration this client refuses, refused now
    this.schema = schemaOf(options.schema);
    this.key = key;
    this.keyPrefix = keyPrefix;
    this.poll = Math.max(poll, MIN_READ_GAP);
    this.cursor = options.since == null ? undefined : positionOf(options.since);
    this.stopped = new Promise((resolve) => this.stopper.signal.addEventListener("abort", () => resolve(null)));
    this.signal = options.signal;
    this.signal?.addEventListener("abort", this.onAbort);
    if (this.signal?.aborted) this.onAbort();
  }

  private readonly onAbort = (): void => this.shut();

  /** The position up to which every transition of its filter was delivered (the last one delivered, or, when nothing more was for the filter, the last position numbered; before any, the start; undefined until known): resume after it with `since`. */
  get position(): bigint | undefined { return this.cursor; }

  /** How many times the connection was lost and made again. */
  get reconnects(): number { return this.lost; }

  /** Whether it is closed (by close(), its signal, leaving a loop, or the error that stopped it). */
  get closed(): boolean { return this.stopper.signal.aborted; }

  [Symbol.asyncIterator](): this { return this; }

  /** The next transition, waiting for one; done once closed. Calls are served in turn. */
  next(): Promise<IteratorResult<Transition>> {
    const result = this.queue.then(() => this.step());
    this.queue = result.catch(() => {});
    return result;
  }

  /** Closes it (as `for await` does when the loop is left). */
  async return(): Promise<IteratorResult<Transition>> {
    await this.close();
    return { done: true, value: undefined };
  }

  /** Stops watching and closes the connection; a pending next() resolves done. Resolves when the watcher is idle. */
  async close(): Promise<void> {
    this.shut();
    await this.queue;
  }

  /** What close() does, without waiting for a call in progress (which may be the caller). */
  private shut(): void {
    if (this.closed) return;
    this.stopper.abort();
    this.signal?.removeEventListener("abort", this.onAbort);
    this.ready.length = 0;
    this.wake?.();
    this.drop();
    drop(this.opening);
    this.opening = null;
  }

  private drop(): void {
    drop(this.conn?.client ?? null);
    this.conn = null;
  }

  private async step(): Promise<IteratorResult<Transition>> {
    for (;;) {
      if (this.failed) throw this.failed;
      if (this.closed) return { done: true, value: undefined };
      const t = this.ready.shift();
      if (t) {
        // delivered; the last of a short page: everything up to its head too
        this.cursor = this.ready.length === 0 && this.through !== undefined && this.through > t.position
          ? this.through : t.position;
        if (this.ready.length === 0) this.through = undefined;
        return { done: false, value: t };
      }
      try {
        await this.readMore();
      } catch (e) {
        this.drop();
        if (this.closed) continue;
        const err = this.sort(e);
        if (!(err instanceof ConnectionError)) {
          this.failed = err;
          this.shut();
          throw err;
        }
        await pause(historyBackoff(this.failures++), this.stopper.signal); // then connect again
      }
    }
  }

  /** Retry (ConnectionError) or stop (anything else). */
  private sort(e: unknown): LeaderlockError {
    if (isDbError(e)) {
      if (e.code === PRUNED) return new HistoryPrunedError(this.cursor ?? 0n, e);
      const err = classify(e, databaseOf(this.config));
      if (err instanceof ConnectionError && !transient(e.code)) return new RejectedError(`${e.message} (SQLSTATE ${e.code})`, e);
      return err;
    }
    return classify(e, databaseOf(this.config)); // connect()'s own, or no answer: the connection
  }

  /** Connects if need be, waits for its turn (a hint or the poll, once caught up), and reads the next page into `ready`. */
  private async readMore(): Promise<void> {
    if (!this.conn) await this.open();
    const conn = this.conn;
    if (!conn || this.closed) return;
    if (this.caughtUp) await this.hintOrPoll();
    const gap = this.lastRead + MIN_READ_GAP - now();
    if (gap > 0) await pause(gap, this.stopper.signal);
    if (this.closed) return;
    if (conn.ended) throw new ConnectionError("the connection of the history watcher was lost");
    this.lastRead = now();
    // No worker numbers the history here (the portable edition, or a library
    // not preloaded): le_expire_lapsed() does, as clients there call it anyway.
    if (!conn.worker) await bounded(conn.client, this.lastRead + HISTORY_CALL, EXPIRE_LAPSED);
    const rows = await bounded(conn.client, this.lastRead + HISTORY_CALL, HISTORY,
                               [String(this.cursor), this.key, this.keyPrefix, HISTORY_PAGE]);
    this.failures = 0;
    const head = rows.length > 0 ? BigInt(rows[0].head) : undefined;
    const found = rows.filter((r: any) => r.position !== null);
    for (const r of found) this.ready.push(transitionOf(r));
    this.caughtUp = found.length < HISTORY_PAGE;
    // A short page: nothing more up to head is for this filter, so a
    // watcher of a quiet key is not passed by the retention.
    if (this.caughtUp && head !== undefined && head > (this.cursor ?? 0n)) {
      if (found.length === 0) this.cursor = head;
      else this.through = head;
    }
  }

  /** Until a hint heard since the last read started, the poll interval from it, the connection's end, or close(). */
  private hintOrPoll(): Promise<void> {
    if (this.heardAt >= this.lastRead || this.conn?.ended) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.wake = null;
        resolve();
      };
      const timer = later(done, this.lastRead + this.poll - now());
      this.wake = done;
    });
  }

  private async open(): Promise<void> {
    const pending = connect(this.config, this.schema, HISTORY_CALL, "leaderlock watch");
    const client = await Promise.race([pending, this.stopped]);
    if (!client) {
      pending.then(drop, () => {});
      return;
    }
    const conn = { client, ended: false, worker: true };
    client.on("notification", (n) => {
      // Where no worker numbers, the changes themselves are the hints.
      const hint = n.channel === HISTORY_CHANNEL || (!conn.worker && n.channel === "leaderlock");
      if (!hint || this.conn !== conn) return;
      this.heardAt = now();
      this.wake?.();
    });
    client.on("end", () => {
      conn.ended = true;
      if (this.conn === conn) this.wake?.();
    });
    this.opening = client;
    try {
      const by = now() + HISTORY_CALL;
      conn.worker = (await bounded(client, by, WORKER_SERVES))[0].ok;
      await bounded(client, by, conn.worker ? `LISTEN ${HISTORY_CHANNEL}` : `LISTEN ${HISTORY_CHANNEL}; LISTEN leaderlock`);
      if (this.cursor === undefined) this.cursor = BigInt((await bounded(client, by, HISTORY_POSITION))[0].position);
    } catch (e) {
      drop(client);
      throw e;
    } finally {
      this.opening = null;
    }
    if (this.closed) return drop(client);
    if (this.opened) this.lost++;
    this.opened = true;
    this.conn = conn;
    this.caughtUp = false; // hints may have gone unheard meanwhile: read at once
  }
}

/**
 * A HistoryWatcher of `config`: `for await (const t of watchHistory(url, { since, keyPrefix })) ...`.
 * Throws BadArgumentError at once for options this client refuses.
 */
export function watchHistory(config: ConnectionConfig, options: HistoryOptions = {}): HistoryWatcher {
  return new HistoryWatcher(config, options);
}
