// The typed errors, and classify(), which sorts a failure into one: retry
// (ConnectionError) or give up (RejectedError). SessionLost, RunLost and
// HistoryPrunedError live with their parts (session.ts, schedule.ts,
// history.ts).

/** No such function: leaderlock not installed, or a schema before 0.5.0 (then the older call). */
export const UNDEFINED_FUNCTION = "42883";
/** le_assert_leader's refusal: the id is not the live holder in that term. */
export const NOT_LEADER = "LE001";

/**
 * The DETAIL both editions give (SQLSTATE 22023) when a key with live
 * holders is asked for with another number of slots than it admits
 * (contract 17): the key is not ours now, not a request to give up.
 */
const SLOTS_DIFFER_DETAIL = "While a key has live holders, every acquisition must give the same slots.";

/** Whether the server refused a try because the key is held with another number of slots. */
export function slotsDiffer(e: any): boolean {
  return e?.code === "22023" && typeof e.detail === "string" && e.detail.startsWith(SLOTS_DIFFER_DETAIL);
}

/** Base of this package's errors. */
export class LeaderlockError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** `timeout` passed without becoming leader (0: the one try failed); `holder` holds the key. */
export class NotAcquired extends LeaderlockError {
  constructor(readonly key: string, readonly holder: string | null) {
    super(`not the leader of ${JSON.stringify(key)}` + (holder ? ` (held by ${JSON.stringify(holder)})` : ""));
  }
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
export class LeaseLost extends LeaderlockError {
  constructor(readonly key: string, readonly term: number, readonly reason: LossReason, readonly detail: string,
              options?: { cause?: unknown }) {
    super(`lost the lease of ${JSON.stringify(key)} (term ${term}): ${detail}`, options);
  }
}

/**
 * A refusal that retrying cannot change: waiting ends with it, an Elector
 * reports it once ("error") and stops. `sqlstate` is the server's, or
 * undefined when this client refused the arguments itself.
 */
export class RejectedError extends LeaderlockError {
  readonly sqlstate: string | undefined;
  constructor(message: string, cause?: unknown) {
    super(message, cause === undefined ? undefined : { cause });
    this.sqlstate = typeof (cause as any)?.code === "string" ? (cause as any).code : undefined;
  }
}

/**
 * The database has no leaderlock functions (no CREATE EXTENSION, no schema
 * holding the portable edition's), or not in `schema`, the one named (the
 * `schema` option or LEADERLOCK_SCHEMA).
 */
export class NotInstalledError extends RejectedError {
  constructor(readonly database: string, cause?: unknown, readonly schema: string | null = null) {
    super(`extension leaderlock is not installed in database ${database}` +
          (schema !== null ? ` (schema ${JSON.stringify(schema)} does not hold leaderlock's functions)` : "") +
          ((cause as any)?.message ? ` (${(cause as any).message})` : ""), cause);
  }
}

/** The role may not do this: no EXECUTE on leaderlock's functions (42501), or the server refuses its login (28xxx). */
export class PrivilegeError extends RejectedError {}

/** An argument the server (class 22, e.g. a ttl above leaderlock.max_ttl) or this client refuses. */
export class BadArgumentError extends RejectedError {}

/**
 * The server could not be reached or could not answer now: refused or
 * dropped connections, a restart, a standby (read-only), a call past its
 * time. Waiting calls retry these until their timeout; `sqlstate` when the
 * server said why.
 */
export class ConnectionError extends LeaderlockError {
  readonly sqlstate: string | undefined;
  constructor(message: string, cause?: unknown) {
    super(message, cause === undefined ? undefined : { cause });
    this.sqlstate = isDbError(cause) ? cause.code : undefined;
  }
}

export { LeaseLost as LeaseLostError, NotAcquired as NotAcquiredError };

export function isDbError(e: any): e is { code: string; message: string; severity: string; detail?: string } {
  return typeof e?.code === "string" && typeof e?.severity === "string";
}

const NOT_INSTALLED = new Set([UNDEFINED_FUNCTION, "42P01", "3F000"]);

/** A failure sorted by what to do about it: retry (ConnectionError) or give up (RejectedError). */
export function classify(e: unknown, database: string | undefined): LeaderlockError {
  if (e instanceof LeaderlockError) return e;
  if (isDbError(e)) {
    const code = e.code;
    if (NOT_INSTALLED.has(code)) return new NotInstalledError(database ?? "(unknown)", e);
    if (code === "42501" || code.startsWith("28")) return new PrivilegeError(`${e.message} (SQLSTATE ${code})`, e);
    if (code.startsWith("22") && !slotsDiffer(e)) return new BadArgumentError(`${e.message} (SQLSTATE ${code})`, e);
    if (code === "3D000") return new RejectedError(`${e.message} (SQLSTATE ${code})`, e);
    const standby = code === "25006" ? "; the server is a standby or read-only (with several hosts, target_session_attrs=read-write picks the primary)" : "";
    return new ConnectionError(`${e.message} (SQLSTATE ${code})${standby}`, e);
  }
  return new ConnectionError(e instanceof Error ? e.message : String(e), e);
}
