// Groups (contract 26, docs/groups.md): a member's share of a group's
// partitions, which the server assigns. The loop of the Rust client's
// Member (crates/client/src/group.rs, the reference) with the Python
// member's callbacks. A round every ttl/3, on a connection of its own,
// joins (le_join: the first join makes the group, every later one renews
// the membership and all its partitions), then reads the assignment
// (le_assignment). Every partition owned has the local deadline of the last
// round whose assignment was read: the instant its join was sent + ttl -
// ttl/200 (performance.now()), read at each owns(); every call is given up
// at it, so that losses are told on time. A revoked partition goes to
// onRevoked, and is given back (le_ack) once its promise settles (drained);
// one gone from the assignment, or whose deadline passed, goes to onLost at
// once and is not given back (it is not ours to give). A notification of
// the group naming the member brings the next round sooner (a hint: the
// assignment read is what counts), at most once per max(ttl/30, 50 ms).
import type PG from "pg";
import {
  BadArgumentError, ConnectionError, LeaderlockError, NOT_LEADER, RejectedError, classify, isDbError,
} from "./errors.js";
import { bounded, connect, databaseOf, drop } from "./connect.js";
import { namesMember } from "./hints.js";
import { type PoolLike, type Queryable, fencedTransaction } from "./lease.js";
import { type ConnectionConfig, type Timing, checkName, defaultId, later, now, timing } from "./options.js";
import { type Schema, inSchema, schemaOf } from "./statements.js";

// "group" is a reserved word: every statement names its arguments. Terms
// come back as text and go as text (bigint, exact).
const JOIN_GROUP = "SELECT @extschema@.le_join(\"group\" => $1, member => $2, ttl => pg_catalog.make_interval(secs => $3), " +
  "partitions => $4::pg_catalog.int4, drain => pg_catalog.make_interval(secs => $5))::pg_catalog.text AS session";
const ASSIGNMENT = "SELECT partition, term::pg_catalog.text AS term, state " +
  "FROM @extschema@.le_assignment(\"group\" => $1, member => $2) ORDER BY partition";
const ACK_PARTITION = "SELECT @extschema@.le_ack(\"group\" => $1, member => $2, partition => $3::pg_catalog.int4, " +
  "term => $4::bigint) AS ok";
const LEAVE_GROUP = "SELECT @extschema@.le_leave(\"group\" => $1, member => $2) AS ok";
/** The guard, in the caller's transaction. */
const ASSERT_PARTITION = "SELECT @extschema@.le_assert_partition(\"group\" => $1, partition => $2::pg_catalog.int4, " +
  "member => $3, term => $4::bigint)::pg_catalog.text AS term";
/** le_join's refusal when the role has made leaderlock.max_jobs_per_role groups: retrying cannot help. */
const TOO_MANY_GROUPS = "53400";
/** The shortest time between two rounds when hints ask for one sooner (ms), and its share of the ttl. */
const SOONEST_MIN = 50;
const SOONEST_SHARE = 30;

export interface MemberOptions {
  /** The group's name. Required. */
  group: string;
  /** This member's name in the group. Default host:pid:random. */
  member?: string;
  /** Seconds the membership lives without a renewal (renewed every ttl/3). Default 10. */
  ttl?: number;
  /** The group's partition count (1 to 100000), for its first join (or its maker's change). Default: as it is. */
  partitions?: number | null;
  /** Seconds a live owner has to give a revoked partition back, for the first join (or its maker's change). Default: as it is (10 s for a new group). */
  drain?: number | null;
  /** `partition` is ours in `term`: start work on it. Its result is not awaited. */
  onAssigned?: (partition: number, term: bigint) => void | Promise<void>;
  /**
   * The server revoked `partition` (ours in `term`): stop work on it and
   * drain; it is given back (le_ack) once the returned promise settles
   * (its next owner gets it then, or at the group's drain budget). Also
   * told for every partition at leave(), and instead of onLost when there
   * is no onLost.
   */
  onRevoked?: (partition: number, term: bigint) => void | Promise<void>;
  /** `partition` is not ours any more (gone from the assignment, or past the local deadline): stop at once. Not awaited. */
  onLost?: (partition: number, term: bigint) => void | Promise<void>;
  /** The server refused for good (a RejectedError): the member has stopped, every partition lost first. Default: a process warning. */
  onError?: (error: LeaderlockError) => void;
  /** Aborting it leaves the group (leave()). */
  signal?: AbortSignal;
  /** The schema that holds leaderlock, as LeadOptions.schema. Default LEADERLOCK_SCHEMA, else found. */
  schema?: string | null;
}

/**
 * A member of a group (member()): its partitions, renewed in the
 * background. owns() and owned() read the clock at each call.
 */
export interface Member {
  readonly group: string;
  /** This member's name in the group. */
  readonly member: string;
  /** Seconds. */
  readonly ttl: number;
  /** The local deadline of every partition owned, on performance.now()'s clock (-Infinity: none); moves at each round. */
  readonly deadline: number;
  /** The error that stopped this member, if one did. */
  readonly failed: LeaderlockError | undefined;
  /** The term `partition` is owned in, or null: not ours, revoked, or past the local deadline (checked now). Ask before each side effect. */
  owns(partition: number): bigint | null;
  /** Every partition owned now (partition -> term, by partition), as owns() says. */
  owned(): Map<number, bigint>;
  /**
   * In the caller's open transaction on `client`: le_assert_partition,
   * which raises (LE001) unless this member owns `partition` now in the
   * term it was assigned, and holds it so until that transaction ends.
   * Resolves with the term; rejects with PartitionNotOwned when the
   * server refuses, or at once, without a call, when owns() says null.
   */
  guard(client: PG.ClientBase | Queryable, partition: number): Promise<bigint>;
  /** Runs `fn` in a transaction fenced by guard(): BEGIN, guard, fn(tx), COMMIT; ROLLBACK on any error. `db` as Lease.guarded's. */
  guarded<T>(db: PG.ClientBase | PG.Pool | Queryable | PoolLike, partition: number,
             fn: (tx: PG.ClientBase) => Promise<T>): Promise<T>;
  /**
   * Leaves the group: nothing is ours from the call on, every partition
   * goes to onRevoked; once those promises (and any drain) settle,
   * le_leave hands them to the others at once. True when the server knew
   * the member; false (and a process warning) when it could not be
   * reached: its partitions then lapse with its ttl. Later calls get the
   * same answer.
   */
  leave(): Promise<boolean>;
}

/**
 * A partition that is not this member's now (SQLSTATE LE001): owns() said
 * null, or the server refused the guard (the error, in `cause`, aborted the
 * transaction). Stop acting on it.
 */
export class PartitionNotOwned extends LeaderlockError {
  readonly sqlstate = NOT_LEADER;
  constructor(readonly group: string, readonly partition: number, readonly member: string, detail: string, cause?: unknown) {
    super(`partition ${partition} of group ${JSON.stringify(group)} is not ${JSON.stringify(member)}'s now: ${detail}`,
          cause === undefined ? undefined : { cause });
  }
}

type Callback = ((partition: number, term: bigint) => void | Promise<void>) | undefined;

function callback(name: string, v: unknown): Callback {
  if (v !== undefined && typeof v !== "function") throw new BadArgumentError(`${name} must be a function`);
  return v as Callback;
}

class GroupMember implements Member {
  readonly group: string;
  readonly member: string;
  private readonly t: Timing;
  private readonly schema: Schema;
  private readonly partitions: number | null;
  private readonly drain: number | null;
  private readonly soonest: number;
  private readonly onAssigned: Callback;
  private readonly onRevoked: Callback;
  private readonly onLost: Callback;
  private readonly onError: ((error: LeaderlockError) => void) | undefined;
  private readonly signal: AbortSignal | undefined;
  /** partition -> term, owned until `until` (unless revoked or lost before). */
  private terms = new Map<number, bigint>();
  private until = -Infinity;
  private conn: PG.Client | null = null;
  /** Revocations told ("partition:term"), not yet gone from the assignment. */
  private readonly revoking = new Set<string>();
  /** Drained revocations, to give back. */
  private readonly acks: [number, bigint][] = [];
  /** Callbacks whose partitions must not be handed over before they settle. */
  private readonly drains = new Set<Promise<void>>();
  private lastRound = -Infinity;
  private nextRound = 0;
  private wakeUp: (() => void) | null = null;
  private watchdog?: NodeJS.Timeout;
  private stopping = false;
  private loop?: Promise<void>;
  private leaving?: Promise<boolean>;
  failed: LeaderlockError | undefined;

  constructor(private readonly config: ConnectionConfig, options: MemberOptions) {
    const o = options ?? ({} as MemberOptions);
    this.group = checkName("group", o.group);
    this.member = o.member === undefined ? defaultId() : checkName("member", o.member);
    this.t = timing({ ttl: o.ttl });
    const partitions = o.partitions ?? null;
    if (partitions !== null && !Number.isInteger(partitions)) {
      throw new BadArgumentError(`partitions must be an integer, not ${JSON.stringify(partitions)}`);
    }
    const drain = o.drain ?? null;
    if (drain !== null && !(typeof drain === "number" && drain >= 0 && Number.isFinite(drain))) {
      throw new BadArgumentError(`drain must be a number of seconds, at least 0, not ${JSON.stringify(drain)}`);
    }
    this.partitions = partitions;
    this.drain = drain;
    this.onAssigned = callback("onAssigned", o.onAssigned);
    this.onRevoked = callback("onRevoked", o.onRevoked);
    this.onLost = callback("onLost", o.onLost);
    if (o.onError !== undefined && typeof o.onError !== "function") throw new BadArgumentError("onError must be a function");
    this.onError = o.onError;
    this.signal = o.signal;
    this.schema = schemaOf(o.schema);
    this.soonest = Math.max(this.t.ttl * 1000 / SOONEST_SHARE, SOONEST_MIN);
  }

  get ttl(): number { return this.t.ttl; }

  get deadline(): number { return this.until; }

  owns(partition: number): bigint | null {
    if (now() >= this.until) return null;
    return this.terms.get(partition) ?? null;
  }

  owned(): Map<number, bigint> {
    if (now() >= this.until) return new Map();
    return new Map([...this.terms].sort((a, b) => a[0] - b[0]));
  }

  async guard(client: PG.ClientBase | Queryable, partition: number): Promise<bigint> {
    const term = this.owns(partition);
    if (term === null) throw this.notOwned(partition, "not owned here (or its local deadline has passed)");
    try {
      // (the schema the member's connection found, never the search_path)
      const text = inSchema(ASSERT_PARTITION, this.schema.found);
      await (client as Queryable).query({ text, values: [this.group, partition, this.member, String(term)] });
    } catch (e: any) {
      if (e?.code === NOT_LEADER) throw this.notOwned(partition, `the server refused the guard: ${e.message}`, e);
      throw e;
    }
    return term;
  }

  guarded<T>(db: PG.ClientBase | PG.Pool | Queryable | PoolLike, partition: number,
             fn: (tx: PG.ClientBase) => Promise<T>): Promise<T> {
    if (this.owns(partition) === null) {
      return Promise.reject(this.notOwned(partition, "not owned here (or its local deadline has passed)"));
    }
    return fencedTransaction(db, (tx) => this.guard(tx, partition), fn);
  }

  private notOwned(partition: number, detail: string, cause?: unknown): PartitionNotOwned {
    return new PartitionNotOwned(this.group, partition, this.member, detail, cause);
  }

  leave(): Promise<boolean> {
    this.leaving ??= this.shutDown();
    return this.leaving;
  }

  private readonly onAbort = (): void => { void this.leave(); };

  /** The first round here (its refusal or failure is member()'s), then the loop. */
  async start(): Promise<void> {
    this.signal?.throwIfAborted();
    try {
      await this.round();
    } catch (e) {
      this.disconnect();
      throw this.sort(e);
    }
    this.loop = this.run();
    this.signal?.addEventListener("abort", this.onAbort);
    if (this.signal?.aborted) this.onAbort();
  }

  private async run(): Promise<void> {
    while (!this.stopping) {
      await this.idle();
      while (this.acks.length > 0 && !this.stopping) {
        const [partition, term] = this.acks.shift()!;
        this.revoking.delete(`${partition}:${term}`);
        try {
          await this.ack(partition, term);
        } catch {
          this.disconnect(); // still revoked at the next round: given back then
        }
      }
      if (this.stopping || now() < this.nextRound) continue;
      try {
        await this.round();
      } catch (e) {
        this.disconnect();
        const err = this.sort(e);
        if (!(err instanceof ConnectionError)) return this.fail(err);
      }
    }
  }

  /** Until the next round is due, a drained revocation waits, or the member stops. */
  private idle(): Promise<void> {
    if (this.stopping || this.acks.length > 0 || now() >= this.nextRound) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.wakeUp = null;
        resolve();
      };
      const timer = later(done, this.nextRound - now());
      this.wakeUp = done;
    });
  }

  /** Retry (ConnectionError) or stop (anything else). */
  private sort(e: unknown): LeaderlockError {
    if (isDbError(e) && e.code === TOO_MANY_GROUPS) return new RejectedError(`${e.message} (SQLSTATE ${e.code})`, e);
    return classify(e, databaseOf(this.config));
  }

  private fail(err: LeaderlockError): void {
    this.failed = err;
    this.stopping = true;
    this.loseAll();
    this.disconnect();
    if (this.onError) {
      try {
        this.onError(err);
      } catch (e) {
        process.emitWarning(`leaderlock: group ${JSON.stringify(this.group)}: onError threw: ${e}`);
      }
    } else {
      process.emitWarning(`leaderlock: member ${JSON.stringify(this.member)} of group ${JSON.stringify(this.group)} ` +
                          `stopped: ${err.message}`);
    }
  }

  /** When a call is given up: ttl/3 from now, and never past the local deadline, so that losses are told on time. */
  private callBy(): number {
    const at = now();
    const by = at + this.t.callTimeout;
    return this.until > at ? Math.min(by, this.until) : by;
  }

  /** The member's connection, LISTENing for hints; made within the deadline when one is live (else 2 s at least). */
  private async client(): Promise<PG.Client> {
    if (this.conn) return this.conn;
    const at = now();
    const budget = this.until > at ? this.callBy() - at : Math.max(this.t.callTimeout, 2000);
    const c = await connect(this.config, this.schema, budget, "leaderlock member");
    c.on("notification", (n) => this.heard(c, n));
    try {
      await bounded(c, at + budget, "LISTEN leaderlock");
    } catch (e) {
      drop(c);
      throw e;
    }
    this.conn = c;
    return c;
  }

  private disconnect(): void {
    drop(this.conn);
    this.conn = null;
  }

  /** A notification naming this member of this group: the next round sooner, at a bounded rate. */
  private heard(c: PG.Client, n: PG.Notification): void {
    if (c !== this.conn || n.channel !== "leaderlock" || !namesMember(n.payload, this.group, this.member)) return;
    const soonest = Math.max(this.lastRound + this.soonest, now());
    if (soonest < this.nextRound) {
      this.nextRound = soonest;
      this.wakeUp?.();
    }
  }

  /** Join (renew), read the assignment, tell what changed. */
  private async round(): Promise<void> {
    this.lastRound = now();
    this.nextRound = this.lastRound + this.t.renewEvery;
    const c = await this.client();
    const by = this.callBy();
    const sent = now();
    await bounded(c, by, JOIN_GROUP, [this.group, this.member, this.t.ttl, this.partitions, this.drain]);
    const rows = await bounded(c, by, ASSIGNMENT, [this.group, this.member]);
    if (this.stopping) return; // leaving: nothing is ours from leave() on
    const owned = new Map<number, bigint>();
    const revoked = new Map<number, bigint>();
    for (const r of rows) (r.state === "owned" ? owned : revoked).set(Number(r.partition), BigInt(r.term));
    // Ours no more: revoked (told, drained, then given back), or gone or in another term (lost).
    const told: [number, bigint][] = [];
    const lost: [number, bigint][] = [];
    for (const [p, term] of this.terms) {
      if (revoked.get(p) === term) told.push([p, term]);
      else if (owned.get(p) !== term) lost.push([p, term]);
    }
    for (const [p] of [...told, ...lost]) this.terms.delete(p);
    const fresh = [...owned].filter(([p]) => !this.terms.has(p));
    for (const [p, term] of fresh) this.terms.set(p, term);
    this.until = sent + this.t.ttl * 1000 - this.t.margin;
    this.arm();
    for (const [p, term] of lost) this.tell("onLost", this.onLost ?? this.onRevoked, p, term);
    for (const key of this.revoking) {
      const [p, term] = key.split(":");
      if (revoked.get(Number(p)) !== BigInt(term)) this.revoking.delete(key);
    }
    for (const [p, term] of told) this.drainThenAck(p, term);
    for (const [p, term] of fresh) this.tell("onAssigned", this.onAssigned, p, term);
    // Revoked, but nothing of ours runs on it (never seen granted, or lost at the deadline): given back at once.
    for (const [p, term] of revoked) {
      if (!this.revoking.has(`${p}:${term}`)) await this.ack(p, term);
    }
  }

  private async ack(partition: number, term: bigint): Promise<void> {
    const c = await this.client();
    await bounded(c, this.callBy(), ACK_PARTITION, [this.group, this.member, partition, String(term)]);
  }

  /** `fn(partition, term)`, its promise settled (a throw or a rejection is a process warning). */
  private async settle(what: string, fn: Callback, partition: number, term: bigint): Promise<void> {
    try {
      await fn?.(partition, term);
    } catch (e) {
      process.emitWarning(`leaderlock: group ${JSON.stringify(this.group)}: ${what}(${partition}) threw: ${e}`);
    }
  }

  private tell(what: string, fn: Callback, partition: number, term: bigint): void {
    void this.settle(what, fn, partition, term);
  }

  /** onRevoked, then (unless the member stops meanwhile) the ack. */
  private drainThenAck(partition: number, term: bigint): void {
    this.revoking.add(`${partition}:${term}`);
    const drained: Promise<void> = this.settle("onRevoked", this.onRevoked, partition, term).then(() => {
      this.drains.delete(drained);
      if (this.stopping) return;
      this.acks.push([partition, term]);
      this.wakeUp?.();
    });
    this.drains.add(drained);
  }

  /** Every partition lost (the deadline passed, the member stopped). */
  private loseAll(): void {
    const lost = [...this.terms];
    this.terms = new Map();
    this.until = -Infinity;
    clearTimeout(this.watchdog);
    for (const [p, term] of lost) this.tell("onLost", this.onLost ?? this.onRevoked, p, term);
  }

  /** The local deadline, told by a timer (owns() reads the clock as well). */
  private arm(): void {
    clearTimeout(this.watchdog);
    this.watchdog = later(() => {
      if (now() >= this.until) this.loseAll();
      else this.arm(); // a timer may fire a little early
    }, this.until - now());
  }

  private async shutDown(): Promise<boolean> {
    // nothing is ours from here on, told at once
    const had = [...this.terms];
    this.terms = new Map();
    this.until = -Infinity;
    clearTimeout(this.watchdog);
    this.stopping = true;
    this.wakeUp?.();
    this.signal?.removeEventListener("abort", this.onAbort);
    for (const [p, term] of had) this.drains.add(this.settle("onRevoked", this.onRevoked, p, term));
    await this.loop; // a round in flight ends within its calls' bound
    await Promise.all([...this.drains]); // nothing of ours runs on a partition when it is handed over
    let left = false;
    try {
      this.conn ??= await connect(this.config, this.schema, Math.max(this.t.callTimeout, 2000), "leaderlock member");
      left = (await bounded(this.conn, now() + this.t.callTimeout, LEAVE_GROUP, [this.group, this.member]))[0].ok;
    } catch (e) {
      process.emitWarning(`leaderlock: member ${JSON.stringify(this.member)} of group ${JSON.stringify(this.group)} ` +
                          `could not leave (${JSON.stringify(String((e as Error)?.message ?? e))}); its membership lapses ` +
                          "with its ttl");
    }
    this.disconnect();
    return left;
  }
}

/**
 * Joins `options.group` as `options.member` (docs/groups.md) and keeps the
 * membership: the server assigns its partitions; onAssigned(partition,
 * term) when one is ours, onRevoked(partition, term) when the server takes
 * it back (drain, then settle: it is given back then), onLost when it is
 * gone without notice. Resolves once the first round (join, assignment) is
 * answered; rejects with a RejectedError (BadArgumentError,
 * NotInstalledError, PrivilegeError) when the server or this client
 * refuses, a ConnectionError when the server cannot be reached. Needs a
 * connection of its own (LISTEN): a configuration, not a pool.
 */
export async function member(config: ConnectionConfig, options: MemberOptions): Promise<Member> {
  const m = new GroupMember(config, options);
  await m.start();
  return m;
}
