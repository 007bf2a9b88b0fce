// Scheduled runs (contract 22), due instants (every, cron) included. A job
// that every replica schedules alike runs once per due instant, on one of
// them: the loop of the Rust client's Scheduler (crates/client/src/
// schedule.rs, the reference). Due instants are read on the server's lease
// clock (le_now()), never on this host's. Each due run is claimed
// (le_claim_run: a fencing term, or NULL); a run claimed by another replica
// is watched until it is finished, and claimed again if its claim lapses
// unfinished. A claimed run is handed to the callback with a local deadline
// (the send time of the claim or of its last successful renewal + ttl -
// ttl/200), renewed every ttl/3, and finished with the callback's outcome.
// Without `every` and `cron`, the due instants are those of the job's
// schedule kept in the database (contract 24, le_schedule): read from the
// server (le_next_due) at least every poll, so that a change or a pause is
// followed without a restart (the Rust Scheduler's make_registered_pending).
import type PG from "pg";
import { BadArgumentError, ConnectionError, LeaderlockError, LeaseLost, type LossReason, classify } from "./errors.js";
import { bounded, connect, databaseOf, drop } from "./connect.js";
import { abortedOf, readsTheClock, reasonOf } from "./lease.js";
import { requireHereOrInApp } from "./load.js";
import { type ConnectionConfig, type Timing, backoff, checkName, defaultId, later, now, pause, timing } from "./options.js";
import { type Schema, schemaOf } from "./statements.js";

// Instants are whole microseconds since the epoch here (a registered
// schedule's may have any): they come from the server as text and go to it
// as ISO 8601 text with 6 fractional digits (exact, whatever pg's Date
// settings and type parsers); terms come back as text and go as text
// (bigint, exact).
/** The lease clock, in microseconds since the epoch: a due instant at or before it is due on the server too. */
const LE_NOW_US = "SELECT (extract(epoch FROM @extschema@.le_now()) OPERATOR(pg_catalog.*) 1000000)::bigint::pg_catalog.text AS us";
/**
 * Contract 24: job $1's registered schedule's first due instant strictly after $2 (NULL: no schedule, or
 * paused), in microseconds since the epoch, its misfire grace in seconds (NULL: none), and the missed instants
 * its backfill lets run late (microseconds, oldest first).
 */
const NEXT_DUE = "SELECT (extract(epoch FROM d.due) OPERATOR(pg_catalog.*) 1000000)::bigint::pg_catalog.text AS due, " +
  "(SELECT pg_catalog.date_part('epoch'::pg_catalog.text, s.misfire_grace) FROM @extschema@.leaderlock_schedules s " +
  "WHERE s.job OPERATOR(pg_catalog.=) $1) AS grace, " +
  "ARRAY(SELECT (extract(epoch FROM bd) OPERATOR(pg_catalog.*) 1000000)::bigint::pg_catalog.text " +
  "FROM @extschema@.le_backfill_due(job => $1) AS bd) AS late " +
  "FROM (SELECT @extschema@.le_next_due(job => $1, after => $2::pg_catalog.timestamptz) AS due) d";
const CLAIM_RUN = "SELECT @extschema@.le_claim_run(job => $1, due => $2::pg_catalog.timestamptz, id => $3, " +
  "ttl => pg_catalog.make_interval(secs => $4), misfire_grace => pg_catalog.make_interval(secs => $5))::pg_catalog.text AS term";
const RENEW_RUN = "SELECT @extschema@.le_renew_run(job => $1, due => $2::pg_catalog.timestamptz, id => $3, " +
  "ttl => pg_catalog.make_interval(secs => $4), term => $5::bigint) AS ok";
const FINISH_RUN = "SELECT @extschema@.le_finish_run(job => $1, due => $2::pg_catalog.timestamptz, id => $3, term => $4::bigint, " +
  "succeeded => $5, detail => $6) AS ok";
/** After a refused claim: finished (or missed)? seconds until its live claim ends (NULL: none live), its outcome. */
const RUN_STATE = "SELECT r.finished_at IS NOT NULL AS finished, " +
  "CASE WHEN r.holder IS NOT NULL AND r.expires_at OPERATOR(pg_catalog.>) n.now " +
  "THEN extract(epoch FROM r.expires_at OPERATOR(pg_catalog.-) n.now)::pg_catalog.float8 END AS remaining, " +
  "r.outcome FROM @extschema@.leaderlock_runs r, (SELECT @extschema@.le_now() AS now) n " +
  "WHERE r.job OPERATOR(pg_catalog.=) $1 AND r.due OPERATOR(pg_catalog.=) $2::pg_catalog.timestamptz";
/** A run whose row a refused claim cannot find this many times in a row is given up (older than the retention). */
const ABSENT_TRIES = 100;
/** Looks again every RACE_RETRY this many times before backing off. */
const FAST_TRIES = 10;
/** How soon a run is looked at again after a claim raced this one, or found no row. */
const RACE_RETRY = 20;
/** le_finish_run keeps at most this many bytes of detail. */
const DETAIL_MAX_BYTES = 1000;
/** Without misfireGraceMs, a cron schedule's misfire grace (as `leaderlock run --cron`). */
const CRON_GRACE = 5 * 60_000;
/** A wait for the next due instant re-reads the server's clock at least this often. */
const MAX_WAIT = 10_000;

/**
 * When a job is due: every `every` ms since the Unix epoch, or by a `cron`
 * expression in time zone `tz`. To schedule(), neither: the job's schedule
 * kept in the database (le_schedule).
 */
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

/**
 * What schedule() takes. With `every` or `cron`, the due instants are
 * computed here; with neither, they are those of the job's schedule kept in
 * the database (contract 24: le_schedule, by an operator or another
 * client), read from the server (le_next_due) at least every `pollMs`, so
 * that a change or a pause is followed without a restart; that schedule's
 * misfire grace and overlap policy apply.
 */
export interface ScheduleOptions extends DueRule {
  /** Milliseconds each claim and renewal asks for (renewed every ttl/3). Required. */
  ttlMs: number;
  /**
   * A run not claimed within this many ms after its due instant is not run,
   * and is recorded missed (once); also how far back a schedule that starts
   * looks. null: no limit (and no look back). Default: the period of
   * `every`, 5 minutes with `cron` (as `leaderlock run`). Not with a
   * schedule kept in the database: its own misfire grace applies.
   */
  misfireGraceMs?: number | null;
  /** This replica's id. Default host:pid:random. */
  id?: string;
  /**
   * How often, at most, a run another replica claimed is looked at (ms;
   * claimed again if that claim lapses unfinished), and a schedule kept in
   * the database is read again. Default 1000.
   */
  pollMs?: number;
  /**
   * Aborting it stops the schedule: schedule() resolves. A run in progress
   * is told (its `signal` aborts, `isOurs()` turns false, reason
   * "released"), and finished with the callback's outcome first.
   */
  signal?: AbortSignal;
  /** The schema that holds leaderlock, as LeadOptions.schema. Default LEADERLOCK_SCHEMA, else found. */
  schema?: string | null;
  /**
   * A schedule kept in the database only: called with false once when the job has no schedule there or it is
   * paused (nothing runs meanwhile), and with true when it runs again. Default: nothing is said.
   */
  onScheduleFound?: (found: boolean) => void;
}

/** A run this replica claimed: act for it only while `isOurs()`. */
export interface Run {
  readonly job: string;
  readonly id: string;
  /** The due instant (on the server's lease clock; a Date drops any microseconds of a registered schedule's). */
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
export class RunLost extends LeaseLost {
  constructor(readonly job: string, readonly due: Date, readonly runTerm: bigint, reason: LossReason, detail: string,
              options?: { cause?: unknown }) {
    super(job, Number(runTerm), reason, detail, options);
    this.message = `lost the run of ${JSON.stringify(job)} due ${due.toISOString()} (term ${runTerm}): ${detail}`;
  }
}

// ------------------------------------------------ due instants

let cronModule: typeof import("cron-parser") | undefined;

/**
 * cron-parser, loaded when a cron schedule is first asked for: a dependency
 * of this package, which npm does not install for a folder installed as a
 * link (then found in the application, as pg).
 */
function cronParser(): typeof import("cron-parser") {
  cronModule ??= requireHereOrInApp("cron-parser");
  if (!cronModule?.CronExpressionParser) {
    cronModule = undefined;
    throw new BadArgumentError("a cron schedule needs the package cron-parser 5.x, a dependency of leaderlock that npm does " +
                               "not install for a folder installed as a link: npm install cron-parser@5.10.6 in your " +
                               "application, or install leaderlock with npm install --install-links");
  }
  return cronModule;
}

type CronExpr = import("cron-parser").CronExpression;

interface Rule {
  /** The first due instant strictly after `t` (ms since the epoch), or null. */
  nextAfter(t: number): number | null;
}

/** Wall-clock formatters by time zone. */
const walls = new Map<string, Intl.DateTimeFormat>();

function wallFormat(tz: string): Intl.DateTimeFormat {
  let f = walls.get(tz);
  if (!f) {
    try {
      f = new Intl.DateTimeFormat("en-US", {
        timeZone: tz, hourCycle: "h23", year: "numeric", month: "numeric", day: "numeric",
        hour: "numeric", minute: "numeric", second: "numeric",
      });
    } catch (e) {
      throw new BadArgumentError(`time zone ${JSON.stringify(tz)}: ${(e as Error).message}`);
    }
    walls.set(tz, f);
  }
  return f;
}

/** The wall-clock time in `tz` at instant `t` (whole seconds), as ms since the epoch of a UTC clock showing it. */
function wallAt(tz: string, t: number): number {
  const p: Record<string, number> = {};
  for (const part of wallFormat(tz).formatToParts(new Date(Math.floor(t / 1000) * 1000))) {
    if (part.type !== "literal") p[part.type] = Number(part.value);
  }
  return Date.UTC(p.year, p.month - 1, p.day, p.hour % 24, p.minute, p.second);
}

/** The offset from UTC in `tz` at instant `t` (ms; whole seconds). */
function offsetAt(tz: string, t: number): number {
  return wallAt(tz, t) - Math.floor(t / 1000) * 1000;
}

/** The instants at which `tz` shows wall-clock time `wall` (whole seconds): none (skipped forward), one, or two (set back), in order. */
function instantsAt(tz: string, wall: number): number[] {
  const day = 86_400_000;
  const offsets = new Set([offsetAt(tz, wall - day), offsetAt(tz, wall), offsetAt(tz, wall + day)]);
  const found = [...offsets].map((o) => wall - o).filter((t) => offsetAt(tz, t) === wall - t);
  return [...new Set(found)].sort((a, b) => a - b);
}

function everyRule(period: unknown): Rule {
  if (!(typeof period === "number" && Number.isSafeInteger(period) && period >= 1)) {
    throw new BadArgumentError(`every must be a whole number of milliseconds, at least 1 (got ${period})`);
  }
  return { nextAfter: (t) => (Math.floor(t / period) + 1) * period };
}

/**
 * A cron schedule in a time zone, with the Rust client's rule across
 * daylight saving changes (the cron crate's): the expression is matched
 * against wall-clock times, in order; a wall-clock time that does not exist
 * is skipped, and one that occurs twice is due once, at the first.
 */
function cronRule(expr: unknown, tz: unknown): Rule {
  if (typeof expr !== "string" || expr.trim() === "") throw new BadArgumentError("cron must be a non-empty string");
  const zone = tz ?? "UTC";
  if (typeof zone !== "string" || zone === "") throw new BadArgumentError("tz must be a non-empty string");
  wallFormat(zone);
  // Refused, so that every client reads an expression alike: what cron implementations read differently
  // or not at all.
  const refuse = (why: string) => new BadArgumentError(`cron expression ${JSON.stringify(expr)}: ${why}`);
  let fields = expr.trim().split(/\s+/);
  if (fields.length !== 5 && fields.length !== 6) {
    throw refuse("five fields (minute hour day-of-month month day-of-week), or six with seconds first");
  }
  if (fields.length === 5) fields = ["0", ...fields]; // five fields: minutes first (seconds 0)
  // `?` is `*` (a day-of-month or day-of-week left open)
  fields = fields.map((f, i) => (f === "?" && (i === 3 || i === 5) ? "*" : f));
  const [, , , dom, , dow] = fields;
  if (dom !== "*" && dow !== "*") {
    throw refuse("restrict the day of the month or the day of the week, not both (cron implementations combine them differently)");
  }
  for (const item of dow.split(",")) {
    if (/\d/.test(item.split("/")[0])) throw refuse("name the days of the week (MON-FRI, SUN): cron implementations number them differently");
  }
  // H: hashed values, different in each process (replicas would disagree); L, W, #: not every client has them
  if (fields.some((f) => /(^|[,\-/(])H(?=$|[,\-/(])/.test(f)) || /[LW#]/i.test(dom) || /[L#]/i.test(dow)) {
    throw refuse("no H, L, W or # (replicas and clients must compute the same instants)");
  }
  let cron: CronExpr;
  try {
    cron = cronParser().CronExpressionParser.parse(fields.join(" "), { tz: "UTC", strict: true, currentDate: new Date(0) });
  } catch (e) {
    if (e instanceof LeaderlockError) throw e;
    throw new BadArgumentError(`cron expression ${JSON.stringify(expr)}: ${(e as Error)?.message ?? e}`);
  }
  return {
    nextAfter(t: number): number | null {
      // Wall-clock times from the one a second after t (whole seconds) on, as the cron crate's; each
      // maps to its first instant, which grows with it; the first instant after t is the answer.
      const from = wallAt(zone, t + 1000);
      try {
        cron.reset(new Date(from - 1000));
        for (let i = 0; i < 200_000; i++) {
          const wall = cron.next().getTime();
          const first = instantsAt(zone, wall)[0];
          if (first !== undefined && first > t) return first;
        }
      } catch {
        // no further match (cron-parser's range or loop limit)
      }
      return null;
    },
  };
}

function ruleOf(when: DueRule): Rule {
  const every = when.every !== undefined && when.every !== null;
  const cron = when.cron !== undefined && when.cron !== null;
  if (every === cron) {
    throw new BadArgumentError("give either every (ms) or cron (to schedule(): neither, for the job's schedule kept in the database)");
  }
  if (every) {
    if (when.tz != null) throw new BadArgumentError("tz applies to cron only");
    return everyRule(when.every);
  }
  return cronRule(when.cron, when.tz);
}

/**
 * The first due instant of `when` strictly after `after`, or null when
 * there is none. What every replica computes alike (with `every`: the
 * next multiple of the period since the Unix epoch).
 */
export function nextDue(when: DueRule, after: Date): Date | null {
  const t = after.getTime();
  if (Number.isNaN(t)) throw new BadArgumentError("after must be a valid Date");
  const next = ruleOf(when).nextAfter(t);
  return next === null ? null : new Date(next);
}

/** `t`'s first due instant at or after it (instants are whole milliseconds). */
function atOrAfter(rule: Rule, t: number): number | null {
  return rule.nextAfter(Math.ceil(t) - 1);
}

/** Instant `us` (microseconds since the epoch, a whole number) as ISO 8601 text with 6 fractional digits. */
function isoOfMicros(us: number): string {
  const ms = Math.floor(us / 1000);
  return new Date(ms).toISOString().replace(/Z$/, `${String(us - ms * 1000).padStart(3, "0")}Z`);
}

// ------------------------------------------------ the run

/** What to record of a rejection: its name and message, at most DETAIL_MAX_BYTES of UTF-8, no NUL (text cannot hold one). */
function detailOf(e: unknown): string {
  let text: string;
  try {
    text = e instanceof Error ? `${e.name}: ${e.message}` : `rejected with ${String(e)}`;
  } catch {
    text = "rejected with a value that has no text";
  }
  return truncateUtf8(text.replace(/\0/g, "\uFFFD"), DETAIL_MAX_BYTES);
}

/** `s` cut to at most `max` bytes of UTF-8, at a character's boundary (lone surrogates become U+FFFD). */
function truncateUtf8(s: string, max: number): string {
  const bytes = Buffer.from(s, "utf8");
  if (bytes.length <= max) return bytes.toString("utf8");
  let end = max;
  while (end > 0 && (bytes[end] & 0xc0) === 0x80) end--; // bytes[end] continues a character: cut before its start
  return bytes.subarray(0, end).toString("utf8");
}

class ClaimedRun implements Run {
  private readonly controller = new AbortController();
  private watchdog?: NodeJS.Timeout;

  constructor(readonly job: string, readonly id: string, readonly due: Date, readonly term: bigint, public deadline: number) {
    readsTheClock(this.controller.signal, () => this.expireIfDue());
    this.arm();
  }

  get signal(): AbortSignal { return this.controller.signal; }

  private get lost(): boolean { return abortedOf.call(this.controller.signal); }

  private expireIfDue(): void {
    if (!this.lost && now() >= this.deadline) this.lose("deadline", "no renewal succeeded before the local deadline");
  }

  isOurs(): boolean {
    this.expireIfDue();
    return !this.lost;
  }

  get remaining(): number { return this.isOurs() ? Math.max(0, this.deadline - now()) : 0; }

  check(): void {
    if (!this.isOurs()) throw reasonOf.call(this.controller.signal);
  }

  lose(reason: LossReason, detail: string, cause?: unknown): void {
    if (!this.lost) {
      this.controller.abort(new RunLost(this.job, this.due, this.term, reason, detail, cause === undefined ? undefined : { cause }));
    }
    clearTimeout(this.watchdog);
  }

  /** A renewal sent at `sent` succeeded: the deadline moves (never for a run already lost). */
  extend(deadline: number): void {
    if (!this.isOurs()) return;
    this.deadline = deadline;
    this.arm();
  }

  private arm(): void {
    clearTimeout(this.watchdog);
    this.watchdog = later(() => {
      this.expireIfDue();
      if (!this.lost) this.arm();
    }, Math.max(0, this.deadline - now()));
  }
}

/** `due`: microseconds since the epoch. */
type Turn = { run: true; due: number; term: bigint; sent: number } | { run: false; due: number; outcome: string | null };

/**
 * Claims the runs of one job as they come due (the Rust Scheduler's next()), on one connection it reopens when
 * it fails. Instants in microseconds since the epoch. `rule` null: the job's schedule kept in the database.
 */
class Claimer {
  private conn: PG.Client | null = null;
  /** The next due instant not yet looked at; a registered schedule: the last one made pending (null: start from now less its grace). */
  private cursor: number | null | undefined = undefined;
  /** Due runs not settled yet: when to look at each again (performance.now()), how often it was found without a row. */
  private readonly pending = new Map<number, { at: number; tries: number }>();
  /** A registered schedule: whether it was found at the last look (null: not looked yet). */
  private found: boolean | null = null;
  /** Told when a registered schedule goes absent or paused (false), and when it runs again (true). */
  onFound: ((found: boolean) => void) | undefined = undefined;

  constructor(private readonly config: ConnectionConfig, private readonly schema: Schema, readonly job: string, readonly id: string,
              private readonly rule: Rule | null, readonly t: Timing, private readonly grace: number | null,
              private readonly poll: number) {}

  /** One statement, bounded by the call timeout (and `until`); a connection that failed or timed out is dropped. */
  async query(text: string, values: unknown[], until = Infinity): Promise<any[]> {
    const by = Math.min(now() + this.t.callTimeout, until);
    try {
      this.conn ??= await connect(this.config, this.schema, by - now());
      return await bounded(this.conn, by, text, values);
    } catch (e) {
      const err = classify(e, this.conn?.database ?? databaseOf(this.config));
      if (err instanceof ConnectionError) {
        drop(this.conn);
        this.conn = null;
      }
      throw err;
    }
  }

  close(): void {
    drop(this.conn);
    this.conn = null;
  }

  /** Waits until a due run is claimed by this replica or settled; null when `stop` aborts. Throws LeaderlockErrors. */
  async next(stop?: AbortSignal): Promise<Turn | null> {
    for (;;) {
      if (stop?.aborted) return null;
      const serverNow = Number((await this.query(LE_NOW_US, []))[0].us);
      const here = now();
      const next = this.rule === null ? await this.makeRegisteredPending(serverNow, here) : this.makePending(this.rule, serverNow, here);
      let ready: number | undefined;
      for (const [due, p] of this.pending) {
        if (p.at <= here && (ready === undefined || due < ready)) ready = due;
      }
      if (ready === undefined) {
        // a registered schedule is read again every poll: a change or a pause is followed without a restart
        const most = this.rule === null ? this.poll : MAX_WAIT;
        let wait = next === null ? most : (next - serverNow) / 1000;
        for (const p of this.pending.values()) wait = Math.min(wait, p.at - here);
        await pause(Math.min(Math.max(wait, 0), most), stop); // then read the server's clock again
        continue;
      }
      const turn = await this.lookAt(ready);
      if (turn) return turn;
    }
  }

  /** Makes every due instant up to `serverNow` pending (looking back one misfire grace at the start); the next one after it. */
  private makePending(rule: Rule, serverNow: number, here: number): number | null {
    if (this.cursor === undefined) {
      const first = atOrAfter(rule, serverNow / 1000 - (this.grace ?? 0));
      if (first === null) throw new BadArgumentError("the schedule has no due instant");
      this.cursor = first * 1000;
    }
    while (this.cursor !== null && this.cursor <= serverNow) {
      if (!this.pending.has(this.cursor)) this.pending.set(this.cursor, { at: here, tries: 0 });
      const next = rule.nextAfter(this.cursor / 1000);
      this.cursor = next === null ? null : next * 1000;
    }
    return this.cursor;
  }

  /** Says once that a registered schedule was found absent or paused, and once that it runs again. */
  private tell(found: boolean): void {
    if (this.found !== found && !(found && this.found === null)) this.onFound?.(found);
    this.found = found;
  }

  /**
   * makePending for the job's schedule kept in the database: the instants come from the server (le_next_due),
   * after the last one made pending, or after now less the schedule's misfire grace at the start. null while
   * the job has no schedule or it is paused (then looked at from the start again: no instant of the pause is
   * ever claimed past its grace).
   */
  private async makeRegisteredPending(serverNow: number, here: number): Promise<number | null> {
    let from = this.cursor ?? null;
    for (;;) {
      const row = (await this.query(NEXT_DUE, [this.job, isoOfMicros(from ?? serverNow)]))[0];
      // missed instants the backfill lets run late: claimed as any due run (the server decides, each once)
      for (const late of (row?.late ?? []) as string[]) {
        const due = Number(late);
        if (!this.pending.has(due)) this.pending.set(due, { at: here, tries: 0 });
      }
      if (row?.due === null || row?.due === undefined) {
        this.cursor = null;
        this.tell(false);
        return null;
      }
      this.tell(true);
      const next = Number(row.due);
      // Back one misfire grace at the first look (none: from now), and never further: after a change to a
      // shorter period, the instants since the last one made pending are past their grace (the server
      // refuses them all).
      const grace = row.grace === null ? 0 : Math.max(Number(row.grace), 0);
      const back = serverNow - Math.round(grace * 1e6) - 1;
      if (from === null || (next <= back && from < back)) {
        from = back;
        continue;
      }
      if (next > serverNow) return next;
      if (!this.pending.has(next)) this.pending.set(next, { at: here, tries: 0 });
      this.cursor = from = next;
    }
  }

  /** Tries to claim the run due at `due`: a turn, or null when it is to be looked at again later. */
  private async lookAt(due: number): Promise<Turn | null> {
    const iso = isoOfMicros(due);
    const sent = now();
    // a registered schedule: NULL, the server applies the schedule's misfire grace
    const rows = await this.query(CLAIM_RUN, [this.job, iso, this.id, this.t.ttl, this.grace === null ? null : this.grace / 1000]);
    const term = rows[0]?.term;
    if (term !== null && term !== undefined) {
      this.pending.delete(due);
      return { run: true, due, term: BigInt(term), sent };
    }
    const state = (await this.query(RUN_STATE, [this.job, iso]))[0];
    const here = now();
    if (state?.finished) {
      this.pending.delete(due);
      return { run: false, due, outcome: state.outcome ?? null };
    }
    if (state) {
      // claimed live by another: look again when it may have finished or lapsed; not live: a claim raced this one
      const remaining = state.remaining === null ? null : Number(state.remaining);
      const wait = remaining === null ? RACE_RETRY : Math.min(Math.max(remaining * 1000, 0), this.poll) + RACE_RETRY;
      this.pending.set(due, { at: here + wait, tries: 0 });
      return null;
    }
    const tries = (this.pending.get(due)?.tries ?? 0) + 1;
    if (tries >= ABSENT_TRIES) {
      this.pending.delete(due);
      return { run: false, due, outcome: null };
    }
    // refused before its row was made (its job's row taken, the failover step not taken yet, or due before the
    // retention): every 20 ms FAST_TRIES times, then backing off, doubling up to the poll, given up after
    // ABSENT_TRIES (about a minute and a half)
    const back = tries <= FAST_TRIES ? 0 : Math.min(tries - FAST_TRIES, 10);
    this.pending.set(due, { at: here + Math.min(RACE_RETRY * 2 ** back, Math.max(this.poll, RACE_RETRY)), tries });
    return null;
  }

  /** Runs `fn` for a claimed run: renews every ttl/3 until it settles, then records its outcome (tried even past the deadline). */
  async runOne(turn: Turn & { run: true }, fn: (run: Run) => Promise<void>, stop?: AbortSignal): Promise<void> {
    const t = this.t;
    const due = new Date(Math.floor(turn.due / 1000));
    const iso = isoOfMicros(turn.due);
    const run = new ClaimedRun(this.job, this.id, due, turn.term, turn.sent + t.ttl * 1000 - t.margin);
    let over = false;
    let timer: NodeJS.Timeout | undefined;
    let renewing: Promise<void> | undefined;
    const renewAt = (at: number) => {
      if (!over) timer = later(() => { renewing = renew(); }, at - now());
    };
    const renew = async (): Promise<void> => {
      if (over || !run.isOurs()) return;
      const start = now();
      try {
        const sent = now();
        const rows = await this.query(RENEW_RUN, [this.job, iso, this.id, t.ttl, String(turn.term)], run.deadline);
        if (rows[0]?.ok) {
          run.extend(sent + t.ttl * 1000 - t.margin);
          return renewAt(sent + t.renewEvery);
        }
        run.lose("refused", "the server refused the renewal (the claim lapsed and was taken, or the run is finished)");
      } catch (e) {
        if (e instanceof ConnectionError) return renewAt(start + t.retryEvery); // until the deadline
        run.lose("rejected", `a renewal was refused for good: ${(e as Error).message}`, e);
      }
    };
    const onStop = () => run.lose("released", "the schedule was stopped");
    stop?.addEventListener("abort", onStop);
    if (stop?.aborted) onStop();
    renewAt(turn.sent + t.renewEvery);
    let succeeded: boolean;
    let detail: string | null = null;
    try {
      await fn(run);
      // returning after the run was lost (stopped at its deadline, taken over, the schedule stopped) is no success
      succeeded = run.isOurs();
      if (!succeeded) {
        const lost = reasonOf.call(run.signal) as Error | undefined;
        detail = truncateUtf8(`returned after the run was lost: ${lost?.message ?? "deadline"}`.replace(/\0/g, "\uFFFD"), DETAIL_MAX_BYTES);
      }
    } catch (e) {
      succeeded = false;
      detail = detailOf(e);
    } finally {
      over = true;
      clearTimeout(timer);
      stop?.removeEventListener("abort", onStop);
    }
    await renewing;
    run.lose("released", "the run is over");
    for (let tries = 1; ; tries++) {
      try {
        await this.query(FINISH_RUN, [this.job, iso, this.id, String(turn.term), succeeded, detail]);
        return; // false: claimed again since (this claim lapsed and another took it)
      } catch (e) {
        if (!(e instanceof ConnectionError) || tries >= 3) {
          if (e instanceof ConnectionError) return; // unrecorded: the claim lapses, and the run may be claimed again
          throw e;
        }
        await pause(t.retryEvery);
      }
    }
  }
}

/**
 * Runs `fn` once per due instant of a schedule (`every` ms, or `cron` in
 * `tz`; neither: the job's schedule kept in the database, le_schedule, whose
 * changes and pauses are followed within `pollMs`), on one replica among
 * all those that schedule `job` alike, until `options.signal` aborts (then
 * resolves). Each run is claimed on the
 * server with a fencing term and handed to `fn` as a Run: act only while
 * `run.isOurs()` (or `run.check()`), and fence side effects with
 * `run.term`. It is renewed every ttl/3 while `fn` runs; `fn` resolving
 * records the run succeeded (failed, if the run was lost by then), rejecting
 * records it failed with the error's name and message (the schedule goes on). Waiting survives the connection
 * (reconnects with jittered backoff); rejects with a RejectedError
 * (NotInstalledError, PrivilegeError, BadArgumentError) at once.
 */
export async function schedule(config: ConnectionConfig, job: string, options: ScheduleOptions,
                               fn: (run: Run) => Promise<void>): Promise<void> {
  checkName("job", job);
  if (typeof fn !== "function") throw new BadArgumentError("fn must be a function");
  const id = options.id === undefined ? defaultId() : checkName("id", options.id);
  // neither every nor cron: the job's schedule kept in the database
  const registered = options.every == null && options.cron == null;
  if (registered && options.tz != null) throw new BadArgumentError("tz applies to cron only");
  if (registered && options.misfireGraceMs !== undefined) {
    throw new BadArgumentError("misfireGraceMs: a schedule kept in the database has its own misfire grace (le_schedule)");
  }
  const rule = registered ? null : ruleOf(options);
  const ttlMs = options.ttlMs;
  if (!(typeof ttlMs === "number" && ttlMs > 0 && Number.isFinite(ttlMs))) {
    throw new BadArgumentError(`ttlMs must be a positive number of milliseconds, not ${ttlMs}`);
  }
  let grace: number | null;
  if (registered) grace = null; // the claims send NULL: the server applies the schedule's
  else if (options.misfireGraceMs === undefined) grace = options.every != null ? options.every : CRON_GRACE;
  else grace = options.misfireGraceMs;
  if (grace !== null && !(typeof grace === "number" && grace >= 0 && Number.isFinite(grace))) {
    throw new BadArgumentError(`misfireGraceMs must be at least 0, or null, not ${grace}`);
  }
  const poll = options.pollMs ?? 1000;
  if (!(typeof poll === "number" && poll > 0 && Number.isFinite(poll))) {
    throw new BadArgumentError(`pollMs must be a positive number of milliseconds, not ${poll}`);
  }
  const stop = options.signal;
  const claimer = new Claimer(config, schemaOf(options.schema), job, id, rule, timing({ ttl: ttlMs / 1000 }), grace, poll);
  if (options.onScheduleFound !== undefined) {
    if (typeof options.onScheduleFound !== "function") throw new BadArgumentError("onScheduleFound must be a function");
    if (!registered) throw new BadArgumentError("onScheduleFound applies to a schedule kept in the database (neither every nor cron)");
    claimer.onFound = options.onScheduleFound;
  }
  let failures = 0;
  try {
    while (!stop?.aborted) {
      let turn: Turn | null;
      try {
        turn = await claimer.next(stop);
        failures = 0;
      } catch (e) {
        const err = classify(e, databaseOf(config));
        if (!(err instanceof ConnectionError)) throw err;
        await pause(backoff(failures++), stop); // the next call connects again
        continue;
      }
      if (turn === null) break;
      if (turn.run) await claimer.runOne(turn, fn, stop);
    }
  } finally {
    claimer.close();
  }
}
