import { LeaseLost, type LossReason } from "./errors.js";
import { type ConnectionConfig } from "./options.js";
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
export declare function schedule(config: ConnectionConfig, job: string, options: ScheduleOptions, fn: (run: Run) => Promise<void>): Promise<void>;
