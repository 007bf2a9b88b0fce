// Sessions (contract 21). Many keys under one ttl (docs/sessions.md): the
// process opens a session (le_open_session), acquires its keys under it
// (le_try_acquire_in, le_acquire_in), renews the session alone every ttl/3
// on a connection of its own (le_renew_session: one row written however
// many keys it holds), and closes it (le_close_session: every key vacated
// at once). The session has a lease's local deadline (the send time of the
// open or of the last successful renewal + ttl - ttl/200), read from the
// clock at each question; a lease of it is alive while the session is and
// its key was not released. Acquisitions and releases run on other
// connections (a few kept idle), so a waiting acquire never holds a
// renewal back.
import type PG from "pg";
import {
  BadArgumentError, ConnectionError, LeaderlockError, LeaseLost, type LossReason, NotAcquired, classify,
} from "./errors.js";
import { bounded, connect, databaseOf, drop } from "./connect.js";
import {
  type Lease, type PoolLike, type Queryable, Renewing, abortedOf, guardWith, guardedWith, readsTheClock, reasonOf,
  releaseAgain, releaseSlot, unanswered,
} from "./lease.js";
import { type ConnectionConfig, type Timing, checkName, defaultId, now, timing } from "./options.js";
import { RELEASE, type Schema, schemaOf } from "./statements.js";

const OPEN_SESSION = "SELECT @extschema@.le_open_session(id => $1, ttl => pg_catalog.make_interval(secs => $2), " +
  "lock_delay => pg_catalog.make_interval(secs => $3), keep_values => $4)::pg_catalog.text AS session";
const RENEW_SESSION = "SELECT @extschema@.le_renew_session(session => $1::pg_catalog.uuid) AS ok";
const CLOSE_SESSION = "SELECT @extschema@.le_close_session(session => $1::pg_catalog.uuid) AS ok";
const TRY_ACQUIRE_IN = "SELECT @extschema@.le_try_acquire_in(session => $1::pg_catalog.uuid, key => $2, " +
  "value => $3::pg_catalog.jsonb) AS ok";
const ACQUIRE_IN = "SELECT @extschema@.le_acquire_in(session => $1::pg_catalog.uuid, key => $2, " +
  "wait => pg_catalog.make_interval(secs => $3), value => $4::pg_catalog.jsonb, priority => $5) AS ok";
/** In the acquisition's transaction: the key's term, held by this session. */
const TERM_IN = "SELECT term::pg_catalog.text AS term FROM @extschema@.leaderlock WHERE key OPERATOR(pg_catalog.=) $1 " +
  "AND holder OPERATOR(pg_catalog.=) $2 AND session OPERATOR(pg_catalog.=) $3::pg_catalog.uuid";
/** After a refused acquisition: who holds the key, and whether the session still has its row on the server (gone: it ended there). */
const AFTER_REFUSAL = "SELECT @extschema@.le_leader(key => $1) AS holder, " +
  "EXISTS (SELECT FROM @extschema@.leaderlock_sessions WHERE session OPERATOR(pg_catalog.=) $2::pg_catalog.uuid) AS live";
/** How many idle connections a session keeps for acquisitions and releases. */
const IDLE_CONNECTIONS = 4;

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
  tryAcquire(key: string, options?: { value?: unknown }): Promise<SessionLease | null>;
  /**
   * le_acquire_in: waits up to `timeout` seconds (0: one try) for the key;
   * NotAcquired when it passes, SessionLost when the session ended
   * meanwhile. While it waits, no candidate of lower `priority` takes it.
   */
  acquire(key: string, options: { timeout: number; value?: unknown; priority?: number }): Promise<SessionLease>;
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
export class SessionLost extends LeaseLost {
  constructor(readonly session: string, readonly id: string, reason: LossReason, detail: string, options?: { cause?: unknown }) {
    super("", 0, reason, detail, options);
    this.message = `lost the session ${session} of ${JSON.stringify(id)}: ${detail}`;
  }
}

const jsonOf = (value: unknown): string | null => (value === undefined ? null : JSON.stringify(value));

export class OpenSession extends Renewing implements Session {
  private closing?: Promise<boolean>;
  private readonly held = new Map<string, KeyLease>();
  private readonly idle: PG.Client[] = [];

  constructor(readonly handle: string, readonly id: string, deadline: number, conn: PG.Client | null,
              config: ConnectionConfig, schema: Schema, t: Timing) {
    super(deadline, conn, config, schema, t);
  }

  get ttl(): number { return this.t.ttl; }

  /** Why it ended (once lost). */
  get why(): SessionLost { return reasonOf.call(this.controller.signal); }

  get leases(): SessionLease[] { return [...this.held.values()]; }

  check(): void {
    if (!this.valid) throw this.why;
  }

  /** Ends the session, and every lease of it, for good (the first reason stays). */
  lose(reason: LossReason, detail: string, cause?: unknown): SessionLost {
    if (!this.lost) {
      this.controller.abort(new SessionLost(this.handle, this.id, reason, detail, cause === undefined ? undefined : { cause }));
      const why = this.why;
      // (a lease of it may not exist yet while the session is constructed)
      for (const lease of this.held?.values() ?? []) lease.lose(why.reason, why.detail, why);
    }
    this.disarm();
    return this.why;
  }

  /** One le_renew_session: the deadline moves; refused, the session is lost. */
  protected async renewOnce(conn: PG.Client, by: number): Promise<true | "retry" | string> {
    if ((await bounded(conn, by, RENEW_SESSION, [this.handle]))[0].ok) return true;
    return "the server refused the renewal: the session is not live there (closed, lapsed or unknown)";
  }

  async tryAcquire(key: string, options: { value?: unknown } = {}): Promise<SessionLease | null> {
    checkName("key", key);
    this.check();
    const value = options?.value;
    const by = now() + this.t.callTimeout;
    const got = await this.take(key, value, by, TRY_ACQUIRE_IN, [this.handle, key, jsonOf(value)]);
    if (got instanceof KeyLease) return got;
    this.endedThere(got);
    return null;
  }

  async acquire(key: string, options: { timeout: number; value?: unknown; priority?: number }): Promise<SessionLease> {
    checkName("key", key);
    const timeout = options?.timeout;
    if (!(typeof timeout === "number" && timeout >= 0 && Number.isFinite(timeout))) {
      throw new BadArgumentError(`timeout must be a number of seconds, at least 0, not ${timeout}`);
    }
    const priority = options.priority ?? 0;
    if (!Number.isInteger(priority)) throw new BadArgumentError(`priority must be an integer, not ${priority}`);
    this.check();
    const by = now() + timeout * 1000 + this.t.callTimeout;
    const got = await this.take(key, options.value, by, ACQUIRE_IN, [this.handle, key, timeout, jsonOf(options.value), priority]);
    if (got instanceof KeyLease) return got;
    this.endedThere(got);
    throw new NotAcquired(key, got?.holder ?? null);
  }

  /** After a refused acquisition: SessionLost (the session ends here) when the server has no row of it any more. */
  private endedThere(refused: { holder: string | null; live: boolean } | null): void {
    if (refused && !refused.live) {
      this.lose("refused", "the server has ended the session (an acquisition under it was refused and its row is gone)");
      this.check();
    }
  }

  /**
   * The acquisition `text` and the key's term, in one transaction: the
   * lease, or who holds the key and whether the session is live there
   * (null: a release of the key that heard no answer is still held).
   */
  private take(key: string, value: unknown, by: number, text: string, values: unknown[]):
      Promise<KeyLease | { holder: string | null; live: boolean } | null> {
    return this.withConn(by, async (c) => {
      if (!(await releaseAgain(c, by, releaseSlot(this.config, key, this.id), key, this.id))) return null;
      await bounded(c, by, "BEGIN");
      const won = (await bounded(c, by, text, values))[0].ok;
      const rows = won ? await bounded(c, by, TERM_IN, [key, this.id, this.handle]) : [];
      const after = rows.length ? null : (await bounded(c, by, AFTER_REFUSAL, [key, this.handle]))[0];
      await bounded(c, by, "COMMIT");
      if (!rows.length) return after ? { holder: after.holder ?? null, live: after.live } : null;
      const lease = new KeyLease(this, key, Number(rows[0].term), value);
      this.held.set(key, lease); // (the same id acquiring again keeps the term)
      return lease;
    });
  }

  async release(key: string): Promise<boolean> {
    checkName("key", key);
    return this.releaseKey(key);
  }

  /** Releases `key` (with the term of its lease; of any term when this process holds no lease of it); `lease`: only if it is the key's current one. */
  async releaseKey(key: string, lease?: KeyLease): Promise<boolean> {
    const held = this.held.get(key);
    if (lease && held !== lease) {
      lease.lose("released", "released"); // an older lease of the key: it ends, the key stays held
      return false;
    }
    this.held.delete(key);
    held?.lose("released", "released");
    if (this.closing) return false;
    const term = held ? String(held.term) : null;
    const by = now() + this.t.callTimeout;
    try {
      return await this.withConn(by, async (c) => (await bounded(c, by, RELEASE, [key, this.id, term]))[0].ok);
    } catch (e) {
      if (!(e instanceof ConnectionError)) throw e;
      // it may still arrive: sent again (and answered) before this key is acquired again
      if (term !== null) unanswered.set(releaseSlot(this.config, key, this.id), term);
      return false;
    }
  }

  /** One call on a connection of the pool (a new one when none is idle); a connection whose call failed is dropped. */
  private async withConn<T>(by: number, fn: (c: PG.Client) => Promise<T>): Promise<T> {
    if (this.closing) throw new LeaderlockError("the session is closed");
    let c: PG.Client | null = this.idle.pop() ?? null;
    try {
      c ??= await connect(this.config, this.schema, Math.max(by - now(), this.t.callTimeout, 2000));
      const result = await fn(c);
      if (this.closing || this.idle.length >= IDLE_CONNECTIONS) drop(c);
      else this.idle.push(c);
      return result;
    } catch (e) {
      const database = c?.database ?? databaseOf(this.config);
      drop(c);
      throw classify(e, database);
    }
  }

  close(): Promise<boolean> {
    this.closing ??= this.shutDown();
    return this.closing;
  }

  private async shutDown(): Promise<boolean> {
    this.lose("released", "the session was closed"); // every lease here first
    if (await this.stopRenewing()) {
      drop(this.conn);
      this.conn = null;
    }
    let closed = false;
    try {
      this.conn ??= await connect(this.config, this.schema, Math.max(this.t.callTimeout, 2000));
      closed = (await bounded(this.conn, now() + this.t.callTimeout, CLOSE_SESSION, [this.handle]))[0].ok;
    } catch (e) {
      process.emitWarning(`leaderlock: session ${this.handle} of ${JSON.stringify(this.id)}: could not close it ` +
                          `(${JSON.stringify(String((e as Error)?.message ?? e))}); its keys lapse with its ttl`);
    }
    drop(this.conn);
    this.conn = null;
    for (const c of this.idle.splice(0)) drop(c);
    this.held.clear();
    return closed;
  }
}

class KeyLease implements SessionLease {
  private readonly controller = new AbortController();

  constructor(readonly session: OpenSession, readonly key: string, readonly term: number, readonly value: unknown) {
    readsTheClock(this.controller.signal, () => this.expireIfDue());
  }

  get id(): string { return this.session.id; }

  get schema(): Schema { return this.session.schema; }

  get signal(): AbortSignal { return this.controller.signal; }

  private get lost(): boolean { return abortedOf.call(this.controller.signal); }

  /** Ends the lease once its session is not valid (which reads the clock). */
  private expireIfDue(): void {
    if (!this.lost && !this.session.valid) {
      const why = this.session.why;
      this.lose(why.reason, why.detail, why);
    }
  }

  get deadline(): number { return this.session.deadline; }

  get valid(): boolean {
    this.expireIfDue();
    return !this.lost;
  }

  get alive(): boolean { return this.valid; }

  get remaining(): number { return this.valid ? Math.max(0, this.deadline - now()) : 0; }

  check(): void {
    if (!this.valid) throw reasonOf.call(this.controller.signal);
  }

  lose(reason: LossReason, detail: string, cause?: unknown): LeaseLost {
    if (!this.lost) {
      this.controller.abort(new LeaseLost(this.key, this.term, reason, detail, cause === undefined ? undefined : { cause }));
    }
    return reasonOf.call(this.controller.signal);
  }

  guard(client: PG.ClientBase | Queryable): Promise<number> { return guardWith(this, client); }

  guarded<T>(db: PG.ClientBase | PG.Pool | Queryable | PoolLike, fn: (tx: PG.ClientBase) => Promise<T>): Promise<T> {
    return guardedWith(this, db, fn);
  }

  release(): Promise<boolean> { return this.session.releaseKey(this.key, this); }
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
export async function openSession(config: ConnectionConfig | (SessionOptions & { dsn: ConnectionConfig }),
                                  options: SessionOptions = {}): Promise<Session> {
  if (typeof config === "object" && config !== null && "dsn" in config) {
    const { dsn, ...rest } = config;
    options = { ...rest, ...options };
    config = dsn;
  }
  const id = options.id === undefined ? defaultId() : checkName("id", options.id);
  const t = timing({ ttl: options.ttl });
  const lockDelay = options.lockDelay ?? 0;
  if (!(typeof lockDelay === "number" && lockDelay >= 0 && Number.isFinite(lockDelay))) {
    throw new BadArgumentError(`lockDelay must be a number of seconds, at least 0, not ${lockDelay}`);
  }
  const keepValues = options.keepValues ?? false;
  if (typeof keepValues !== "boolean") throw new BadArgumentError(`keepValues must be true or false, not ${keepValues}`);
  const schema = schemaOf(options.schema);
  let c: PG.Client | null = null;
  try {
    c = await connect(config, schema, Math.max(t.callTimeout, 2000));
    // the deadline counts from the moment the open is sent
    const sent = now();
    const handle = (await bounded(c, sent + t.callTimeout, OPEN_SESSION, [id, t.ttl, lockDelay, keepValues]))[0].session;
    return new OpenSession(handle, id, sent + t.ttl * 1000 - t.margin, c, config, schema, t);
  } catch (e) {
    const database = c?.database ?? databaseOf(config);
    drop(c);
    throw classify(e, database);
  }
}
