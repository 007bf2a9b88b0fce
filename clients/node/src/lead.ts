// Leading: the campaign (tries on one connection, hints between them), the
// election across connections (elect()), and its two idioms: lead() (run a
// body while leading) and the Elector (campaign for as long as it runs).
import { EventEmitter } from "node:events";
import type PG from "pg";
import {
  ConnectionError, type LeaderlockError, type LeaseLost, NotAcquired, classify, isDbError, slotsDiffer,
} from "./errors.js";
import { bounded, connect, databaseOf, drop, workerServes } from "./connect.js";
import { frees, hint, probe } from "./hints.js";
import { type Lease, Tenure, releaseAgain, releaseSlot } from "./lease.js";
import {
  type ConnectionConfig, type LeadOptions, type Timing, backoff, checkName, defaultId, now, pause, pollEvery, timing,
} from "./options.js";
import { EXPIRE_LAPSED, LEADER, PROCLAIM, type Schema, TERM_OF, TRY_ACQUIRE, schemaOf } from "./statements.js";

class Stopped extends Error {}

/** Set once releaseOnSignals has released for a signal and is ending the process. */
let exiting = false;

/** releaseOnSignals, ending the process: no lead() or Elector of it starts a new campaign from now on. */
export function endCampaigns(): void {
  exiting = true;
}

/**
 * Tries on one connection until it leads (the send time of the winning try
 * + ttl - margin is its deadline), `giveUp` passes (NotAcquired) or `stop`
 * aborts; any other failure is thrown for elect() to sort.
 */
async function campaign(c: PG.Client, key: string, id: string, t: Timing, giveUp: number, stop: AbortSignal | undefined,
                        refused: ((holder: string | null) => void) | undefined, value: unknown,
                        answered: () => void, slot: string): Promise<{ term: number; deadline: number }> {
  const by = now() + t.callTimeout;
  const worker = await workerServes(c, by);
  answered();
  let expire = !worker;
  await bounded(c, by, "LISTEN leaderlock");
  const notifications = await probe(c, by);
  let slotsDiffered = false; // the last try met the key held with other slots
  // Hints heard at any time, tries in flight included (see hint()).
  let heardAt = -Infinity;
  const heardFree = (n: PG.Notification) => {
    if (frees(n.payload, key)) heardAt = now();
  };
  c.on("notification", heardFree);
  try {
    for (;;) {
      if (stop?.aborted) throw new Stopped();
      const lastTry = now();
      // a release under this id that heard no answer may still arrive: send it again, and hear the answer, first
      const free = await releaseAgain(c, now() + t.callTimeout, slot, key, id);
      if (free && expire) {
        try {
          await bounded(c, now() + t.callTimeout, EXPIRE_LAPSED);
        } catch (e: any) {
          // refused (or missing before 0.5.0): the try takes a lapsed lease anyway, unannounced
          if (!isDbError(e)) throw e; // the connection, not the server
          expire = false;
        }
      }
      const sent = now();
      let won = false;
      try {
        // (not while the tenure that release ends is still held: its row was locked)
        if (free) won = (await bounded(c, sent + t.callTimeout, TRY_ACQUIRE, [key, id, t.ttl]))[0].ok;
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
        const rows = await bounded(c, sent + t.callTimeout, TERM_OF, [key, id]);
        if (rows.length) {
          if (value !== undefined) {
            await bounded(c, sent + t.callTimeout, PROCLAIM, [key, id, JSON.stringify(value)]);
          }
          return { term: Number(rows[0].term), deadline: sent + t.ttl * 1000 - t.margin };
        }
      }
      const n = now();
      if (refused || n >= giveUp) {
        const holder = (await bounded(c, n + t.callTimeout, LEADER, [key]))[0].holder;
        refused?.(holder);
        if (n >= giveUp) throw new NotAcquired(key, holder);
      }
      await hint(c, key, Math.min(pollEvery(t, worker, notifications), giveUp - n), lastTry, stop, heardAt);
    }
  } finally {
    c.off("notification", heardFree);
  }
}

/** The winning connection, done listening (null when that failed: the first renewal connects anew). */
async function quiet(c: PG.Client, t: Timing): Promise<PG.Client | null> {
  try {
    await bounded(c, now() + t.callTimeout, "UNLISTEN *");
    return c;
  } catch {
    drop(c);
    return null;
  }
}

interface Won {
  term: number;
  deadline: number;
  conn: PG.Client;
}

interface ElectOptions {
  schema: Schema;
  timeout?: number | null;
  stop?: AbortSignal;
  refused?: (holder: string | null) => void;
  value?: unknown;
  retrying?: (error: ConnectionError, ms: number) => void;
}

/**
 * Campaigns until it leads, across connections: whatever breaks the
 * connection or the server for a while (a restart, a failover, a dropped
 * connection, a standby) is retried on a new connection after a jittered
 * pause, until the timeout (then the last ConnectionError, or NotAcquired
 * when the last try was refused). A RejectedError ends it at once; `stop`
 * with Stopped.
 */
async function elect(config: ConnectionConfig, key: string, id: string, t: Timing, o: ElectOptions): Promise<Won> {
  // releaseOnSignals has released and the process is on its way out: no new campaign starts
  if (exiting) await new Promise<never>(() => {});
  const giveUp = o.timeout == null ? Infinity : now() + o.timeout * 1000;
  let failures = 0;
  for (;;) {
    if (o.stop?.aborted) throw new Stopped();
    let c: PG.Client | null = null;
    try {
      const connectFor = Math.min(Math.max(t.callTimeout, 2000), Math.max(giveUp - now(), 1000));
      c = await connect(config, o.schema, connectFor);
      const won = await campaign(c, key, id, t, giveUp, o.stop, o.refused, o.value, () => { failures = 0; },
                                 releaseSlot(config, key, id));
      return { ...won, conn: c };
    } catch (e) {
      const database = c?.database ?? databaseOf(config);
      drop(c);
      if (o.stop?.aborted || e instanceof Stopped) throw new Stopped();
      const err = classify(e, database);
      if (!(err instanceof ConnectionError)) throw err;
      if (now() >= giveUp) throw err;
      const ms = Math.min(backoff(failures++), giveUp - now());
      o.retrying?.(err, ms);
      await pause(ms, o.stop);
    }
  }
}

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
export async function lead<T>(config: ConnectionConfig, key: string, options: LeadOptions,
                              body: (lease: Lease) => Promise<T>): Promise<T> {
  checkName("key", key);
  const id = options.id === undefined ? defaultId() : checkName("id", options.id);
  const t = timing(options);
  const schema = schemaOf(options.schema);
  const stop = options.signal;
  let won: Won;
  try {
    won = await elect(config, key, id, t, { schema, timeout: options.timeout, stop, value: options.value });
  } catch (e) {
    if (e instanceof Stopped) throw stop!.reason;
    throw e;
  }
  const tenure = new Tenure(key, id, won.term, won.deadline, await quiet(won.conn, t), config, schema, t, options.value);
  const onAbort = () => { void tenure.release(); };
  stop?.addEventListener("abort", onAbort);
  if (stop?.aborted) onAbort();
  try {
    return await body(tenure);
  } finally {
    stop?.removeEventListener("abort", onAbort);
    await tenure.finish();
  }
}

export interface ElectorOptions extends Omit<LeadOptions, "signal" | "timeout"> {}

/**
 * Campaigns until stop(), again after each loss. Events: "elected"
 * (lease), "revoked" (reason, lease), "leader" (holder, or null when
 * vacant), "retrying" (ConnectionError, ms: the server is unreachable; it
 * reconnects after ms), "error" (RejectedError: a refusal retrying cannot
 * change; emitted once, the elector has stopped, `failed` holds it).
 */
export class Elector extends EventEmitter {
  private readonly stopper = new AbortController();
  private loop?: Promise<void>;
  private readonly schema: Schema;
  readonly id: string;
  /** The error that stopped this elector, if one did. */
  failed: LeaderlockError | undefined;

  constructor(private readonly config: ConnectionConfig, readonly key: string, private readonly options: ElectorOptions = {}) {
    super();
    checkName("key", key);
    this.id = options.id === undefined ? defaultId() : checkName("id", options.id);
    timing(options);
    this.schema = schemaOf(options.schema);
  }

  start(): this {
    this.loop ??= this.run().catch((e) => this.fail(classify(e, databaseOf(this.config))));
    return this;
  }

  /** Whether it campaigns or leads: started, not stopped, not failed. */
  get running(): boolean { return this.loop !== undefined && !this.stopper.signal.aborted && !this.failed; }

  /** A listener that throws must not stop the elector with a lease it would neither renew nor release. */
  private tell(event: string, ...args: unknown[]): void {
    try {
      this.emit(event, ...args);
    } catch (e) {
      process.emitWarning(`leaderlock: a listener of "${event}" threw: ${e}`);
    }
  }

  /** Reports the error that stops it, once: to "error" listeners, else as a process warning. */
  private fail(e: LeaderlockError): void {
    if (this.failed) return;
    this.failed = e;
    if (this.listenerCount("error")) this.tell("error", e);
    else process.emitWarning(`leaderlock: the elector of ${JSON.stringify(this.key)} stopped: ${e.message}`);
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
      let won: Won;
      try {
        won = await elect(this.config, this.key, this.id, t, {
          schema: this.schema, timeout: null, stop, refused, value: this.options.value,
          retrying: (err, ms) => this.tell("retrying", err, ms),
        });
      } catch (e) {
        if (e instanceof Stopped) return;
        return this.fail(classify(e, databaseOf(this.config)));
      }
      const tenure = new Tenure(this.key, this.id, won.term, won.deadline, await quiet(won.conn, t), this.config, this.schema, t,
                                this.options.value);
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
      const lost = tenure.signal.reason as LeaseLost;
      this.tell("revoked", released ? "released" : lost.reason, tenure);
    }
  }
}
