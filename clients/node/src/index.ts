// Leader election on PostgreSQL with the leaderlock extension (compiled or
// portable edition), with the Rust client's guarantees: renew every ttl/3,
// a local deadline on the monotonic clock (start of the last successful
// call + ttl - ttl/200) enforced by a timer that aborts `lease.signal`,
// every call bounded by that deadline, LISTEN as a hint with polling as the
// fallback, release on the way out, id host:pid:random.
import { EventEmitter } from "node:events";
import { hostname } from "node:os";
import { randomBytes } from "node:crypto";
import { performance } from "node:perf_hooks";
import pg from "pg";

// One round trip each, bind parameters, arguments by name.
const TRY_ACQUIRE = "SELECT le_try_acquire(key => $1, id => $2, ttl => make_interval(secs => $3)) AS ok";
const RENEW = "SELECT le_renew(key => $1, id => $2, ttl => make_interval(secs => $3)) AS ok";
const RELEASE = "SELECT le_release(key => $1, id => $2) AS ok";
const TERM_OF = "SELECT term::text AS term FROM le_lease(key => $1) WHERE holder = $2";
const STILL_OURS =
  "SELECT coalesce(holder = $1 AND term = $2::bigint AND expires_at > clock_timestamp(), false) AS ok " +
  "FROM le_lease(key => $3)";
const LEADER = "SELECT le_leader(key => $1) AS holder";
const WORKER_SERVES = "SELECT coalesce((le_capabilities()->>'worker')::boolean, true) AS ok";
const WORKER_RUNNING = "SELECT le_worker_running() AS ok";
const EXPIRE_LAPSED = "SELECT le_expire_lapsed() AS n";
const UNDEFINED_FUNCTION = "42883";
/**
 * Notifications are hints, and any role may send them (docs/clients.md): a
 * hint brings the next try forward, but never to less than HINT_FLOOR ms
 * after the start of the previous one; hints that arrive meanwhile make
 * that one try, and the first hint after a quiet period is acted on at
 * once. The same rule, and the same name, in every leaderlock client.
 */
const HINT_FLOOR = 10;
/**
 * The DETAIL both editions give (SQLSTATE 22023) when a key with live
 * holders is asked for with another number of slots than it admits
 * (contract 17): the key is not ours now, not a request to give up.
 */
const SLOTS_DIFFER_DETAIL = "While a key has live holders, every acquisition must give the same slots.";

/** Whether the server refused a try because the key is held with another number of slots. */
function slotsDiffer(e: any): boolean {
  return e?.code === "22023" && typeof e.detail === "string" && e.detail.startsWith(SLOTS_DIFFER_DETAIL);
}

export class NotAcquired extends Error {
  constructor(readonly key: string, readonly holder: string | null) {
    super(`not the leader of ${JSON.stringify(key)}` + (holder ? ` (held by ${JSON.stringify(holder)})` : ""));
    this.name = "NotAcquired";
  }
}

export class LeaseLost extends Error {
  constructor(readonly key: string, readonly term: number, readonly reason: string) {
    super(`lost the lease of ${JSON.stringify(key)} (term ${term}): ${reason}`);
    this.name = "LeaseLost";
  }
}

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
}

export interface Lease {
  readonly key: string;
  readonly id: string;
  /** The fencing token: pass it to le_assert_leader(key, id, term) with each write. */
  readonly term: number;
  /** The value announced with this leadership (options.value), or undefined. */
  readonly value: unknown;
  /** Aborted (reason: LeaseLost) at a loss or at the local deadline. */
  readonly signal: AbortSignal;
  /** The local deadline, on performance.now()'s clock; moves at each renewal. */
  readonly deadline: number;
  readonly alive: boolean;
  /** Throws LeaseLost unless the lease is still ours by the local clock. */
  check(): void;
}

export function defaultId(): string {
  return `${hostname()}:${process.pid}:${randomBytes(4).toString("hex")}`;
}

const now = () => performance.now();

interface Timing {
  ttl: number; // seconds
  renewEvery: number; // ms from here on
  margin: number;
  callTimeout: number;
  retryEvery: number;
  poll?: number;
}

function timing(options: LeadOptions): Timing {
  const ttl = options.ttl ?? 10;
  if (!(typeof ttl === "number" && ttl > 0 && Number.isFinite(ttl))) throw new RangeError(`ttl must be a positive number of seconds, not ${ttl}`);
  if (options.poll !== undefined && !(options.poll > 0)) throw new RangeError(`poll must be a positive number of seconds, not ${options.poll}`);
  if (options.timeout != null && !(options.timeout >= 0)) throw new RangeError(`timeout must be at least 0, not ${options.timeout}`);
  const ms = ttl * 1000;
  return {
    ttl, renewEvery: ms / 3, margin: ms / 200, callTimeout: Math.max(ms / 3, 100),
    retryEvery: Math.min(Math.max(ms / 10, 50), 1000), poll: options.poll === undefined ? undefined : options.poll * 1000,
  };
}

function pollEvery(t: Timing, worker: boolean, notifications: boolean): number {
  if (t.poll !== undefined) return t.poll;
  if (!worker) return Math.min(Math.max(t.ttl * 250, 100), 1000); // ttl/4: nobody announces an expiry
  return notifications ? Math.max(t.ttl * 500, 1000) : 1000;
}

/** Whether a notification this session sends itself comes back (not behind transaction pooling). */
async function probe(c: pg.Client, until: number): Promise<boolean> {
  const token = randomBytes(8).toString("hex");
  let heard: (n: pg.Notification) => void = () => {};
  const back = new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => resolve(false), 200);
    heard = (n) => { if (n.channel === "leaderlock_probe" && n.payload === token) { clearTimeout(timer); resolve(true); } };
    c.on("notification", heard);
  });
  try {
    await bounded(c, until, "LISTEN leaderlock_probe");
    await bounded(c, until, "SELECT pg_notify('leaderlock_probe', $1)", [token]);
    return await back;
  } finally {
    c.off("notification", heard);
  }
}

function checkName(what: string, v: unknown): string {
  if (typeof v !== "string" || v === "") throw new TypeError(`${what} must be a non-empty string`);
  return v;
}

type Config = string | pg.ClientConfig;

/** A connection, given up after `timeoutMs` (a frozen server accepts and never answers). */
async function connect(config: Config, timeoutMs: number): Promise<pg.Client> {
  const c = new pg.Client({ application_name: "leaderlock node", connectionTimeoutMillis: Math.max(Math.ceil(timeoutMs), 1),
                            ...(typeof config === "string" ? { connectionString: config } : config) });
  c.on("error", () => {}); // a dropped connection surfaces as the next call's error
  await c.connect();
  return c;
}

/** The rows of `text`, the call abandoned (TimeoutError) at `until`. */
async function bounded(c: pg.Client, until: number, text: string, values: unknown[] = []): Promise<any[]> {
  const left = Math.floor(until - now());
  if (left <= 0) throw new TimeoutError();
  return (await c.query({ text, values, query_timeout: left } as pg.QueryConfig)).rows;
}

class TimeoutError extends Error {}

function drop(c: pg.Client | null): void {
  if (!c) return;
  // end() waits for the server; a frozen one may never answer
  (c as any).connection?.stream?.destroy();
  c.end().catch(() => {});
}

async function workerServes(c: pg.Client, until: number): Promise<boolean> {
  try {
    return (await bounded(c, until, WORKER_SERVES))[0].ok;
  } catch (e: any) {
    if (e?.code !== UNDEFINED_FUNCTION) throw e;
    return (await bounded(c, until, WORKER_RUNNING))[0].ok; // before 0.5.0
  }
}

function frees(payload: string | undefined, key: string): boolean {
  try {
    const a = JSON.parse(payload ?? "");
    return a?.key === key && (a.event === "released" || a.event === "expired");
  } catch {
    return false;
  }
}

/**
 * Until a notification says `key` is free (a hint only; never sooner than
 * HINT_FLOOR after `lastTry`, the start of the last try: hints heard
 * meanwhile make one try), `ms` pass, or `stop` aborts.
 */
function hint(c: pg.Client, key: string, ms: number, lastTry: number, stop?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      c.off("notification", heard);
      stop?.removeEventListener("abort", done);
      resolve();
    };
    let until = now() + Math.max(ms, 0);
    const heard = (n: pg.Notification) => {
      if (!frees(n.payload, key)) return;
      const due = Math.max(now(), lastTry + HINT_FLOOR);
      if (due >= until) return; // a try is due by then anyway
      until = due;
      clearTimeout(timer);
      timer = setTimeout(done, due - now());
    };
    let timer = setTimeout(done, Math.max(ms, 0));
    c.on("notification", heard);
    stop?.addEventListener("abort", done);
  });
}

async function campaign(c: pg.Client, key: string, id: string, t: Timing, timeout: number | null | undefined,
                        stop?: AbortSignal, refused?: (holder: string | null) => void,
                        value?: unknown): Promise<{ term: number; deadline: number }> {
  const by = now() + t.callTimeout;
  const worker = await workerServes(c, by);
  let expire = !worker;
  await bounded(c, by, "LISTEN leaderlock");
  const notifications = await probe(c, by);
  const giveUp = timeout == null ? Infinity : now() + timeout * 1000;
  let slotsDiffered = false; // the last try met the key held with other slots
  for (;;) {
    if (stop?.aborted) throw new NotAcquired(key, null);
    const lastTry = now();
    if (expire) {
      try {
        await bounded(c, now() + t.callTimeout, EXPIRE_LAPSED);
      } catch (e: any) {
        // refused (or missing before 0.5.0): the try takes a lapsed lease anyway, unannounced
        if (!e?.code) throw e; // the connection, not the server
        expire = false;
      }
    }
    const start = now();
    let won = false;
    try {
      won = (await bounded(c, start + t.callTimeout, TRY_ACQUIRE, [key, id, t.ttl]))[0].ok;
      slotsDiffered = false;
    } catch (e: any) {
      if (!slotsDiffer(e)) throw e;
      // held with another number of slots: not ours now, a refusal
      if (!slotsDiffered) {
        process.emitWarning(`leaderlock: key ${JSON.stringify(key)} is held with another number of slots: ` +
                            `not ours now; trying again until those tenures end (server: ${JSON.stringify(String(e.message))})`);
      }
      slotsDiffered = true;
    }
    if (won) {
      const rows = await bounded(c, start + t.callTimeout, TERM_OF, [key, id]);
      if (rows.length) {
        if (value !== undefined) {
          await bounded(c, start + t.callTimeout, "SELECT le_proclaim(key => $1, id => $2, value => $3::jsonb) AS ok",
                        [key, id, JSON.stringify(value)]);
        }
        return { term: Number(rows[0].term), deadline: start + t.ttl * 1000 - t.margin };
      }
    }
    const n = now();
    if (refused || n >= giveUp) {
      const holder = (await bounded(c, n + t.callTimeout, LEADER, [key]))[0].holder;
      refused?.(holder);
      if (n >= giveUp) throw new NotAcquired(key, holder);
    }
    await hint(c, key, Math.min(pollEvery(t, worker, notifications), giveUp - n), lastTry, stop);
  }
}

class Tenure implements Lease {
  readonly controller = new AbortController();
  private watchdog?: NodeJS.Timeout;
  private timer?: NodeJS.Timeout;
  private stopped = false;
  private running?: Promise<void>;

  constructor(readonly key: string, readonly id: string, readonly term: number, public deadline: number,
              private conn: pg.Client | null, private readonly config: Config, private readonly t: Timing,
              readonly value: unknown = undefined) {
    this.arm();
    this.schedule(deadline + t.margin - t.ttl * 1000 + t.renewEvery);
  }

  get signal(): AbortSignal { return this.controller.signal; }
  get alive(): boolean { return !this.controller.signal.aborted && now() < this.deadline; }

  check(): void {
    if (!this.alive) throw this.controller.signal.reason ?? new LeaseLost(this.key, this.term, "the local deadline passed");
  }

  lose(reason: string): void {
    if (!this.controller.signal.aborted) this.controller.abort(new LeaseLost(this.key, this.term, reason));
    clearTimeout(this.watchdog);
  }

  /** The local deadline, enforced by a timer whatever a renewal is doing. */
  private arm(): void {
    clearTimeout(this.watchdog);
    this.watchdog = setTimeout(() => this.lose("no renewal succeeded before the local deadline"),
                               Math.max(0, this.deadline - now()));
  }

  private schedule(at: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => { this.running = this.renew(); }, Math.max(0, at - now()));
  }

  private async renew(): Promise<void> {
    if (this.stopped || !this.alive) return;
    const start = now();
    // one call may take ttl/3 at most (then reconnect and retry), never past the deadline
    const by = Math.min(start + this.t.callTimeout, this.deadline);
    try {
      this.conn ??= await connect(this.config, by - now());
      if ((await bounded(this.conn, by, RENEW, [this.key, this.id, this.t.ttl]))[0].ok) {
        if (!this.alive) return;
        this.deadline = start + this.t.ttl * 1000 - this.t.margin;
        this.arm();
        return this.schedule(start + this.t.renewEvery);
      }
      if ((await bounded(this.conn, by, STILL_OURS, [this.id, String(this.term), this.key]))[0].ok) {
        return this.schedule(start + this.t.retryEvery); // its row was locked: retry until the deadline
      }
      this.lose("the server refused the renewal (lease lapsed or taken)");
    } catch {
      drop(this.conn);
      this.conn = null;
      this.schedule(start + this.t.retryEvery);
    }
  }

  /** Stops renewing and hands over at once when the lease is still ours. */
  async finish(): Promise<boolean> {
    this.stopped = true;
    clearTimeout(this.timer);
    let hung = false;
    if (this.running) {
      let timer: NodeJS.Timeout | undefined;
      hung = await Promise.race([this.running.then(() => false),
                                 new Promise<boolean>((r) => { timer = setTimeout(() => r(true), this.t.callTimeout + 1000); })]);
      clearTimeout(timer);
    }
    let released = false;
    if (!hung && this.alive) {
      this.lose("released");
      const by = now() + this.t.callTimeout;
      try {
        this.conn ??= await connect(this.config, this.t.callTimeout);
        released = (await bounded(this.conn, by, RELEASE, [this.key, this.id]))[0].ok;
      } catch {
        released = false;
      }
    }
    this.lose("released");
    drop(this.conn);
    this.conn = null;
    return released;
  }
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * Runs `body` while this process leads `key`; resolves with its result.
 * `lease.signal` is aborted at a loss or at the local deadline: pass it to
 * everything the body awaits. Rejects with NotAcquired when `timeout` passes.
 */
export async function lead<T>(config: Config, key: string, options: LeadOptions,
                              body: (lease: Lease) => Promise<T>): Promise<T> {
  checkName("key", key);
  const id = options.id === undefined ? defaultId() : checkName("id", options.id);
  const t = timing(options);
  const c = await connect(config, Math.max(t.callTimeout, 2000));
  let won;
  try {
    won = await campaign(c, key, id, t, options.timeout, undefined, undefined, options.value);
    await bounded(c, now() + t.callTimeout, "UNLISTEN *");
  } catch (e) {
    drop(c);
    throw e;
  }
  const tenure = new Tenure(key, id, won.term, won.deadline, c, config, t, options.value);
  try {
    return await body(tenure);
  } finally {
    await tenure.finish();
  }
}

export interface ElectorOptions extends LeadOptions {}

/**
 * Campaigns until stop(), again after each loss. Events: "elected"
 * (lease), "revoked" (reason, lease), "leader" (holder, or null when
 * vacant), "error" (err: a call failed; it tries again).
 */
export class Elector extends EventEmitter {
  private readonly stopper = new AbortController();
  private loop?: Promise<void>;
  readonly id: string;

  constructor(private readonly config: Config, readonly key: string, private readonly options: ElectorOptions = {}) {
    super();
    checkName("key", key);
    this.id = options.id === undefined ? defaultId() : checkName("id", options.id);
    timing(options);
  }

  start(): this {
    this.loop ??= this.run().catch((e) => { this.tell("error", e); });
    return this;
  }

  /** A listener that throws must not stop the elector with a lease it would neither renew nor release. */
  private tell(event: string, ...args: unknown[]): void {
    try {
      if (event !== "error" || this.listenerCount("error")) this.emit(event, ...args);
    } catch (e) {
      process.emitWarning(`leaderlock: a listener of "${event}" threw: ${e}`);
    }
  }

  /** Stops campaigning; releases a lease it holds (hands over at once). */
  async stop(): Promise<void> {
    this.stopper.abort();
    await this.loop;
  }

  private async run(): Promise<void> {
    const t = timing(this.options);
    const stop = this.stopper.signal;
    let seen: string | null | undefined = undefined;
    const refused = (holder: string | null) => {
      if (holder !== seen) this.tell("leader", (seen = holder));
    };
    while (!stop.aborted) {
      let c: pg.Client | null = null;
      let won;
      try {
        c = await connect(this.config, Math.max(t.callTimeout, 2000));
        won = await campaign(c, this.key, this.id, t, null, stop, refused, this.options.value);
        await bounded(c, now() + t.callTimeout, "UNLISTEN *");
      } catch (e) {
        drop(c);
        if (e instanceof NotAcquired) return;
        this.tell("error", e);
        await sleep(t.retryEvery);
        continue;
      }
      const tenure = new Tenure(this.key, this.id, won.term, won.deadline, c, this.config, t, this.options.value);
      let released = false;
      try {
        this.tell("leader", (seen = this.id));
        this.tell("elected", tenure);
        await new Promise<void>((resolve) => {
          if (tenure.signal.aborted || stop.aborted) return resolve();
          const done = () => {
            tenure.signal.removeEventListener("abort", done);
            stop.removeEventListener("abort", done);
            resolve();
          };
          tenure.signal.addEventListener("abort", done);
          stop.addEventListener("abort", done);
        });
      } finally {
        released = await tenure.finish();
      }
      const reason = released ? "released" : (tenure.signal.reason as LeaseLost).reason;
      this.tell("revoked", reason, tenure);
    }
  }
}
