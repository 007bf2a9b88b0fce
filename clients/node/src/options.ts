// What every part shares: the options of lead() and of what connects, the
// id, the monotonic clock and its timers, the timing a ttl gives, and the
// checks of names.
import { hostname } from "node:os";
import { randomBytes } from "node:crypto";
import { performance } from "node:perf_hooks";
import type PG from "pg";
import { BadArgumentError } from "./errors.js";

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
  /** lead() only: aborting it stops the waiting (lead() rejects with its reason) or, while leading, releases the lease. */
  signal?: AbortSignal;
  /**
   * The schema that holds leaderlock, to name when several do (the portable
   * edition installed by its script next to another copy). Default: the
   * environment variable LEADERLOCK_SCHEMA, else the schema CREATE EXTENSION
   * put it in (or the one schema holding the portable edition's functions),
   * found on each new connection. Every statement names that schema, never
   * the session's search_path (SECURITY.md). The same in every option
   * object that connects.
   */
  schema?: string | null;
}

/**
 * What to connect to: a connection string (postgresql://user@host1:5432,host2:5432/db?target_session_attrs=read-write)
 * or a `pg` client configuration (host may list several, comma-separated).
 * Several hosts are tried in order, as libpq does; target_session_attrs
 * (any, read-write, read-only, primary, standby, prefer-standby) picks the
 * session, as libpq's.
 */
export type ConnectionConfig = string | (PG.ClientConfig & { target_session_attrs?: string });

export function defaultId(): string {
  return `${hostname()}:${process.pid}:${randomBytes(4).toString("hex")}`;
}

export const now = () => performance.now();

/** Node's timers hold at most 2^31 - 1 ms (a longer delay fires after 1 ms): longer ones fire early, and their callers check. */
export const MAX_DELAY = 2 ** 31 - 1;
export function later(fn: () => void, ms: number): NodeJS.Timeout {
  return setTimeout(fn, Math.min(Math.max(ms, 0), MAX_DELAY));
}
/** No single call waits longer than this (a longer ttl still renews every ttl/3). */
const MAX_CALL = 60_000;

export interface Timing {
  ttl: number; // seconds
  renewEvery: number; // ms from here on
  margin: number;
  callTimeout: number;
  retryEvery: number;
  poll?: number;
}

export function timing(options: LeadOptions): Timing {
  const ttl = options.ttl ?? 10;
  if (!(typeof ttl === "number" && ttl > 0 && Number.isFinite(ttl))) throw new BadArgumentError(`ttl must be a positive number of seconds, not ${ttl}`);
  if (options.poll !== undefined && !(options.poll > 0)) throw new BadArgumentError(`poll must be a positive number of seconds, not ${options.poll}`);
  if (options.timeout != null && !(options.timeout >= 0)) throw new BadArgumentError(`timeout must be at least 0, not ${options.timeout}`);
  const ms = ttl * 1000;
  return {
    ttl, renewEvery: ms / 3, margin: ms / 200, callTimeout: Math.min(Math.max(ms / 3, 100), MAX_CALL),
    retryEvery: Math.min(Math.max(ms / 10, 50), 1000), poll: options.poll === undefined ? undefined : options.poll * 1000,
  };
}

export function pollEvery(t: Timing, worker: boolean, notifications: boolean): number {
  if (t.poll !== undefined) return t.poll;
  if (!worker) return Math.min(Math.max(t.ttl * 250, 100), 1000); // ttl/4: nobody announces an expiry
  return notifications ? Math.max(t.ttl * 500, 1000) : 1000;
}

/** Reconnecting while waiting: the first pause, and the largest (each pause is jittered down to half). */
const BACKOFF_FIRST = 50;
const BACKOFF_MAX = 1000;

/** The n-th pause between reconnections: doubling from BACKOFF_FIRST to BACKOFF_MAX, jittered down to half. */
export function backoff(n: number): number {
  const ms = Math.min(BACKOFF_MAX, BACKOFF_FIRST * 2 ** Math.min(n, 16));
  return ms / 2 + Math.random() * (ms / 2);
}

export function checkName(what: string, v: unknown): string {
  if (typeof v !== "string" || v === "") throw new BadArgumentError(`${what} must be a non-empty string`);
  return v;
}

/** `ms`, or until `stop` aborts. */
export function pause(ms: number, stop?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      stop?.removeEventListener("abort", done);
      resolve();
    };
    const timer = later(done, Math.max(ms, 0));
    stop?.addEventListener("abort", done);
  });
}
