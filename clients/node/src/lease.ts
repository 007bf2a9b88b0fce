// A lease: its local deadline (read from the clock by every reader, kept by
// a renewal every ttl/3: Renewing, which a session shares), its fenced
// writes (guard, guarded), and its release; and the releases that heard no
// answer, which a campaign or a session's acquisition under the same id
// sends again first.
import type PG from "pg";
import {
  ConnectionError, LeaderlockError, LeaseLost, type LossReason, NOT_LEADER, UNDEFINED_FUNCTION, classify, isDbError,
} from "./errors.js";
import { bounded, callNamed, connect, databaseOf, drop } from "./connect.js";
import { type ConnectionConfig, type Timing, later, now } from "./options.js";
import { ASSERT_LEADER, HOLDS, RELEASE, RENEW, STILL_OURS, type Schema, inSchema } from "./statements.js";

/** What a guarded write runs on: a PG.Client, a pool's client, anything with pg's query(). */
export interface Queryable {
  query(config: { text: string; values?: unknown[] }): Promise<{ rows: any[]; command?: string }>;
}

/** A PG.Pool (or anything with connect() giving a client with release()). */
export interface PoolLike {
  connect(): Promise<Queryable & { release(err?: Error | boolean): void }>;
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

// Releases that heard no answer, by server, key and id: their term. Such a
// release may still reach the server, so a campaign under the same id sends
// it again, and hears an answer, before its first try: a try before that
// would extend the very tenure the late release then ends, while this
// process leads in it (docs/verification.md).
export const unanswered = new Map<string, string>();
export const releaseSlot = (config: ConnectionConfig, key: string, id: string): string =>
  JSON.stringify([typeof config === "string" ? config : [config.connectionString, config.host, config.port, config.database],
                  key, id]);

/**
 * Sends again the release under this id that heard no answer, if any; false while the tenure it ends
 * is still held (its row was locked), when the campaign must not try yet.
 */
export async function releaseAgain(c: PG.Client, until: number, slot: string, key: string, id: string): Promise<boolean> {
  const term = unanswered.get(slot);
  if (term === undefined) return true;
  if (!(await callNamed(c, until, RELEASE, [key, id, term]))) {
    try {
      if ((await bounded(c, until, HOLDS, [key, id, term]))[0].ok) return false;
    } catch (e: any) {
      if (!isDbError(e) || e.code !== UNDEFINED_FUNCTION) throw e; // before 0.5.0: nothing to go by
    }
  }
  if (unanswered.get(slot) === term) unanswered.delete(slot);
  return true;
}

// The signal's own state, under the getters readsTheClock puts on it (which call these).
export const abortedOf = Object.getOwnPropertyDescriptor(AbortSignal.prototype, "aborted")!.get!;
export const reasonOf = Object.getOwnPropertyDescriptor(AbortSignal.prototype, "reason")!.get!;

/** Makes `signal`'s `aborted`, `reason` and `throwIfAborted()` call `expire` first (it aborts the signal once the deadline has passed). */
export function readsTheClock(signal: AbortSignal, expire: () => void): void {
  Object.defineProperty(signal, "aborted", { configurable: true, get: () => { expire(); return abortedOf.call(signal); } });
  Object.defineProperty(signal, "reason", { configurable: true, get: () => { expire(); return reasonOf.call(signal); } });
  Object.defineProperty(signal, "throwIfAborted", {
    configurable: true, value: () => { if (signal.aborted) throw signal.reason; },
  });
}

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
export async function guardWith(l: Fenced, client: PG.ClientBase | Queryable): Promise<number> {
  l.check();
  let rows;
  try {
    const text = inSchema(ASSERT_LEADER, l.schema.found);
    rows = (await (client as Queryable).query({ text, values: [l.key, l.id, String(l.term)] })).rows;
  } catch (e: any) {
    if (e?.code === NOT_LEADER) throw l.lose("fenced", `the server refused a guarded write: ${e.message}`, e);
    throw e;
  }
  return Number(rows[0].term);
}

/** Lease.guarded: BEGIN, guardWith, fn(tx), COMMIT; ROLLBACK on any error. */
export async function guardedWith<T>(l: Fenced, db: PG.ClientBase | PG.Pool | Queryable | PoolLike,
                              fn: (tx: PG.ClientBase) => Promise<T>): Promise<T> {
  l.check();
  return fencedTransaction(db, (tx) => guardWith(l, tx), fn);
}

/** BEGIN, guard(tx), fn(tx), COMMIT; ROLLBACK on any error (a lease's guarded(), a group member's). */
export async function fencedTransaction<T>(db: PG.ClientBase | PG.Pool | Queryable | PoolLike,
                                           guard: (tx: Queryable) => Promise<unknown>,
                                           fn: (tx: PG.ClientBase) => Promise<T>): Promise<T> {
  const pooled = typeof (db as any).connect === "function" && typeof (db as any).totalCount === "number";
  const tx: Queryable & { release?(err?: Error | boolean): void } = pooled ? await (db as PoolLike).connect() : (db as Queryable);
  let broken: Error | undefined;
  try {
    await tx.query({ text: "BEGIN" });
    try {
      await guard(tx);
      const result = await fn(tx as unknown as PG.ClientBase);
      // COMMIT of a transaction an error aborted rolls back, and says so
      if ((await tx.query({ text: "COMMIT" })).command === "ROLLBACK") {
        throw new LeaderlockError("the guarded transaction was rolled back: a statement in it had failed");
      }
      return result;
    } catch (e) {
      await tx.query({ text: "ROLLBACK" }).catch((re: Error) => { broken = re; });
      throw e;
    }
  } finally {
    if (pooled) tx.release?.(broken);
  }
}

/**
 * A local deadline kept by a renewal every ttl/3 on a connection of its own
 * (a lease's, a session's): every reader checks the clock, a timer enforces
 * the deadline whatever a renewal is doing, and a renewal that fails is
 * tried again every ttl/10 until the deadline. Subclasses say what one
 * renewal is (`renewOnce`) and what losing means (`lose`).
 */
export abstract class Renewing {
  protected readonly controller = new AbortController();
  private watchdog?: NodeJS.Timeout;
  private timer?: NodeJS.Timeout;
  protected stopped = false;
  protected running?: Promise<void>;

  constructor(public deadline: number, protected conn: PG.Client | null,
              protected readonly config: ConnectionConfig, readonly schema: Schema, protected readonly t: Timing) {
    // The signal's own `aborted` and `reason` read the clock first: after a
    // pause of the process, code that looks at the signal before the timer
    // below has run still sees the deadline.
    readsTheClock(this.controller.signal, () => this.expireIfDue());
    this.arm();
    this.schedule(deadline + t.margin - t.ttl * 1000 + t.renewEvery);
  }

  get signal(): AbortSignal { return this.controller.signal; }

  protected get lost(): boolean { return abortedOf.call(this.controller.signal); }

  /** Ends it once the local deadline has passed: called by every reader, and by the timer. */
  protected expireIfDue(): void {
    if (!this.lost && now() >= this.deadline) this.lose("deadline", "no renewal succeeded before the local deadline");
  }

  get valid(): boolean {
    this.expireIfDue();
    return !this.lost;
  }

  get alive(): boolean { return this.valid; }

  get remaining(): number { return this.valid ? Math.max(0, this.deadline - now()) : 0; }

  /** Ends it for good (the first reason stays). */
  abstract lose(reason: LossReason, detail: string, cause?: unknown): LeaseLost;

  /** One renewal on `conn`, within `by`: renewed, "retry" (its row was locked: again until the deadline), or refused (the detail). */
  protected abstract renewOnce(conn: PG.Client, by: number): Promise<true | "retry" | string>;

  protected disarm(): void { clearTimeout(this.watchdog); }

  /** The local deadline, enforced by a timer whatever a renewal is doing (the readers check the clock as well). */
  private arm(): void {
    clearTimeout(this.watchdog);
    this.watchdog = later(() => {
      this.expireIfDue();
      if (!this.lost) this.arm(); // a timer may fire a little early, or a renewal moved the deadline
    }, Math.max(0, this.deadline - now()));
  }

  private schedule(at: number): void {
    if (this.stopped) return;
    this.timer = later(() => { this.running = this.renew(); }, Math.max(0, at - now()));
  }

  private async renew(): Promise<void> {
    if (this.stopped || !this.valid) return;
    const start = now();
    // one call may take ttl/3 at most (then reconnect and retry), never past the deadline
    const by = Math.min(start + this.t.callTimeout, this.deadline);
    try {
      this.conn ??= await connect(this.config, this.schema, by - now());
      const sent = now();
      const outcome = await this.renewOnce(this.conn, by);
      if (outcome === true) {
        if (!this.valid) return; // the deadline passed meanwhile: a loss is final
        this.deadline = sent + this.t.ttl * 1000 - this.t.margin;
        this.arm();
        return this.schedule(sent + this.t.renewEvery);
      }
      if (outcome === "retry") return this.schedule(start + this.t.retryEvery);
      this.lose("refused", outcome);
    } catch (e) {
      drop(this.conn);
      this.conn = null;
      const err = classify(e, databaseOf(this.config));
      if (err instanceof ConnectionError) return this.schedule(start + this.t.retryEvery);
      this.lose("rejected", `a renewal was refused for good: ${err.message}`, err);
    }
  }

  /** Stops renewing; waits for a renewal in flight, ttl/3 and a second at most. Whether it hung. */
  protected async stopRenewing(): Promise<boolean> {
    this.stopped = true;
    clearTimeout(this.timer);
    if (!this.running) return false;
    let timer: NodeJS.Timeout | undefined;
    const hung = await Promise.race([this.running.then(() => false),
                                     new Promise<boolean>((r) => { timer = later(() => r(true), this.t.callTimeout + 1000); })]);
    clearTimeout(timer);
    return hung;
  }
}

export class Tenure extends Renewing implements Lease {
  private finishing?: Promise<boolean>;

  constructor(readonly key: string, readonly id: string, readonly term: number, deadline: number,
              conn: PG.Client | null, config: ConnectionConfig, schema: Schema, t: Timing,
              readonly value: unknown = undefined) {
    super(deadline, conn, config, schema, t);
  }

  check(): void {
    if (!this.valid) throw reasonOf.call(this.controller.signal);
  }

  lose(reason: LossReason, detail: string, cause?: unknown): LeaseLost {
    if (!this.lost) {
      this.controller.abort(new LeaseLost(this.key, this.term, reason, detail, cause === undefined ? undefined : { cause }));
    }
    this.disarm();
    return reasonOf.call(this.controller.signal);
  }

  guard(client: PG.ClientBase | Queryable): Promise<number> { return guardWith(this, client); }

  guarded<T>(db: PG.ClientBase | PG.Pool | Queryable | PoolLike, fn: (tx: PG.ClientBase) => Promise<T>): Promise<T> {
    return guardedWith(this, db, fn);
  }

  protected async renewOnce(conn: PG.Client, by: number): Promise<true | "retry" | string> {
    if (await callNamed(conn, by, RENEW, [this.key, this.id, this.t.ttl, String(this.term)])) return true;
    if ((await bounded(conn, by, STILL_OURS, [this.id, String(this.term), this.key]))[0].ok) return "retry";
    return "the server refused the renewal (lease lapsed or taken)";
  }

  release(): Promise<boolean> { return this.finish(); }

  /** Stops renewing and hands over at once when the lease is still ours (once; later calls get the same answer). */
  finish(): Promise<boolean> {
    this.finishing ??= this.handOver();
    return this.finishing;
  }

  private async handOver(): Promise<boolean> {
    const hung = await this.stopRenewing();
    let released = false;
    if (!hung && this.valid) {
      this.lose("released", "released");
      const by = now() + this.t.callTimeout;
      try {
        this.conn ??= await connect(this.config, this.schema, this.t.callTimeout);
        released = await callNamed(this.conn, by, RELEASE, [this.key, this.id, String(this.term)]);
      } catch {
        released = false;
        unanswered.set(releaseSlot(this.config, this.key, this.id), String(this.term));
      }
    }
    this.lose("released", "released");
    this.disarm();
    drop(this.conn);
    this.conn = null;
    return released;
  }
}
