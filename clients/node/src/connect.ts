// Connecting (several hosts, target_session_attrs, leaderlock's schema found
// on each new connection) and the bounded call every statement goes through.
import type PG from "pg";
import {
  BadArgumentError, ConnectionError, LeaderlockError, NotInstalledError, UNDEFINED_FUNCTION, classify, isDbError,
} from "./errors.js";
import { pg } from "./load.js";
import { type ConnectionConfig, MAX_DELAY, now } from "./options.js";
import { FIND_SCHEMA, LEGACY, SESSION_KIND, type Schema, WORKER_RUNNING, WORKER_SERVES, inSchema } from "./statements.js";

const SESSION_ATTRS = ["any", "read-write", "read-only", "primary", "standby", "prefer-standby"] as const;
type SessionAttrs = (typeof SESSION_ATTRS)[number];

interface Targets {
  hosts: PG.ClientConfig[];
  attrs: SessionAttrs;
  database?: string;
}

function sessionAttrs(v: unknown): SessionAttrs {
  if (v == null || v === "") return "any";
  if (!(SESSION_ATTRS as readonly unknown[]).includes(v)) {
    throw new BadArgumentError(`target_session_attrs must be one of ${SESSION_ATTRS.join(", ")}, not ${JSON.stringify(v)}`);
  }
  return v as SessionAttrs;
}

/** One connection string per host of `url` (postgres[ql]://[userinfo@]h1[:p1],h2[:p2][/db][?...]), and its target_session_attrs. */
function splitUrl(url: string): { urls: string[]; attrs: unknown; database?: string } {
  const m = /^(postgres(?:ql)?:\/\/)([^/?#]*)(.*)$/s.exec(url);
  if (!m) return { urls: [url], attrs: undefined };
  const [, scheme, authority, rest] = m;
  const at = authority.lastIndexOf("@");
  const userinfo = at >= 0 ? authority.slice(0, at + 1) : "";
  const hostlist = authority.slice(at + 1);
  const q = rest.indexOf("?");
  const path = q >= 0 ? rest.slice(0, q) : rest;
  const params = new URLSearchParams(q >= 0 ? rest.slice(q + 1).split("#")[0] : "");
  const attrs = params.get("target_session_attrs") ?? undefined;
  const hosts = hostlist.split(",");
  let database: string | undefined;
  try {
    database = decodeURIComponent(path.replace(/^\//, "").split("#")[0]) || undefined;
  } catch {
    database = undefined;
  }
  if (hosts.length === 1 && attrs === undefined) return { urls: [url], attrs, database };
  params.delete("target_session_attrs");
  const query = params.toString();
  return { urls: hosts.map((h) => `${scheme}${userinfo}${h}${path}${query ? `?${query}` : ""}`), attrs, database };
}

export function targets(config: ConnectionConfig): Targets {
  if (typeof config === "string") {
    const { urls, attrs, database } = splitUrl(config);
    return { hosts: urls.map((u) => ({ connectionString: u })), attrs: sessionAttrs(attrs), database };
  }
  const { target_session_attrs, ...rest } = config;
  if (typeof rest.connectionString === "string") {
    const { urls, attrs, database } = splitUrl(rest.connectionString);
    return { hosts: urls.map((u) => ({ ...rest, connectionString: u })), attrs: sessionAttrs(target_session_attrs ?? attrs),
             database: database ?? rest.database };
  }
  const hosts = typeof rest.host === "string" && rest.host.includes(",") ? rest.host.split(",") : [rest.host];
  const ports = typeof rest.port === "string" && (rest.port as string).includes(",")
    ? (rest.port as string).split(",").map(Number) : hosts.map(() => rest.port);
  if (ports.length !== hosts.length) throw new BadArgumentError(`${hosts.length} hosts but ${ports.length} ports`);
  return { hosts: hosts.map((host, i) => ({ ...rest, host, port: ports[i] })), attrs: sessionAttrs(target_session_attrs),
           database: rest.database };
}

/** The database a configuration names (for messages). */
export function databaseOf(config: ConnectionConfig): string | undefined {
  try {
    return targets(config).database;
  } catch {
    return undefined;
  }
}

function where(h: PG.ClientConfig): string {
  if (h.connectionString) {
    const m = /^postgres(?:ql)?:\/\/(?:[^@/?#]*@)?([^/?#]*)/.exec(h.connectionString);
    return m?.[1] || "the default host";
  }
  return `${h.host ?? "the default host"}${h.port ? `:${h.port}` : ""}`;
}

/** Each connection's leaderlock schema, as the server quoted it: what bounded() puts for @extschema@. */
const extSchemas = new WeakMap<PG.Client, string>();

/**
 * Finds leaderlock's schema on a new connection (FIND_SCHEMA): the one
 * schema, else NotInstalledError (none) or BadArgumentError (several: the
 * `schema` option or LEADERLOCK_SCHEMA must name one).
 */
async function findSchema(c: PG.Client, until: number, schema: Schema, database: string | undefined): Promise<void> {
  const found: string[] = (await bounded(c, until, FIND_SCHEMA, [schema.named])).map((r) => Object.values(r)[0] as string);
  if (found.length === 0) throw new NotInstalledError(database ?? "(unknown)", undefined, schema.named);
  if (found.length > 1) {
    throw new BadArgumentError(`leaderlock's functions are in several schemas of database ${database ?? "(unknown)"}: ` +
                               `${found.map((f) => JSON.stringify(f)).join(", ")}; name the one to use with the schema ` +
                               "option or LEADERLOCK_SCHEMA");
  }
  extSchemas.set(c, found[0]);
  schema.found = found[0];
}

/** One host, given up after `timeoutMs` (a frozen server accepts and never answers). */
async function connectOne(h: PG.ClientConfig, timeoutMs: number, applicationName = "leaderlock node"): Promise<PG.Client> {
  const c = new pg.Client({ application_name: applicationName, ...h,
                            connectionTimeoutMillis: Math.min(Math.max(Math.ceil(timeoutMs), 1), MAX_DELAY) });
  c.on("error", () => {}); // a dropped connection surfaces as the next call's error
  try {
    await c.connect();
  } catch (e) {
    drop(c);
    throw e;
  }
  return c;
}

/**
 * A connection to the first host (in order) that answers and, per
 * target_session_attrs, is the kind of session asked for; prefer-standby
 * goes round the hosts once for a standby, then takes any. Its leaderlock
 * schema is found before it is returned (findSchema). Throws a
 * RejectedError when a host refused for good and none would do, else a
 * ConnectionError.
 */
export async function connect(config: ConnectionConfig, schema: Schema, timeoutMs: number, applicationName?: string): Promise<PG.Client> {
  const { hosts, attrs, database } = targets(config);
  const rounds: SessionAttrs[] = attrs === "prefer-standby" ? ["standby", "any"] : [attrs];
  let rejected: LeaderlockError | undefined;
  let last: LeaderlockError | undefined;
  for (const want of rounds) {
    for (const h of hosts) {
      let c: PG.Client | null = null;
      try {
        c = await connectOne(h, timeoutMs, applicationName);
        const by = now() + timeoutMs;
        if (want !== "any") {
          const kind = (await bounded(c, by, SESSION_KIND))[0];
          const fits = want === "read-write" ? !kind.read_only : want === "read-only" ? kind.read_only
            : want === "primary" ? !kind.standby : kind.standby;
          if (!fits) {
            drop(c);
            last = new ConnectionError(`${where(h)} is ${kind.standby ? "a standby" : kind.read_only ? "read-only" : "read-write"}, ` +
                                       `not ${want} (target_session_attrs)`);
            continue;
          }
        }
        await findSchema(c, by, schema, c.database ?? database);
        return c;
      } catch (e) {
        const err = classify(e, c?.database ?? database);
        drop(c);
        if (err instanceof ConnectionError) last = err;
        else rejected ??= err;
      }
    }
  }
  throw rejected ?? last ?? new ConnectionError("no host to connect to");
}

/** RENEW or RELEASE naming the tenure's term (the last value); on a schema before 0.5.0, without it. */
export async function callNamed(c: PG.Client, until: number, text: string, values: unknown[]): Promise<boolean> {
  try {
    return (await bounded(c, until, text, values))[0].ok;
  } catch (e: any) {
    if (!isDbError(e) || e.code !== UNDEFINED_FUNCTION) throw e;
    return (await bounded(c, until, LEGACY.get(text)!, values.slice(0, -1)))[0].ok;
  }
}

/** The rows of `text`, the call abandoned (TimeoutError) at `until`. */
export async function bounded(c: PG.Client, until: number, text: string, values: unknown[] = []): Promise<any[]> {
  const left = Math.floor(until - now());
  if (left <= 0) throw new TimeoutError("the call's time ran out");
  const query = { text: inSchema(text, extSchemas.get(c)), values, query_timeout: Math.min(left, MAX_DELAY) };
  return (await c.query(query as PG.QueryConfig)).rows;
}

class TimeoutError extends Error {}

export function drop(c: PG.Client | null): void {
  if (!c) return;
  // end() waits for the server; a frozen one may never answer
  (c as any).connection?.stream?.destroy();
  c.end().catch(() => {});
}

export async function workerServes(c: PG.Client, until: number): Promise<boolean> {
  try {
    return (await bounded(c, until, WORKER_SERVES))[0].ok;
  } catch (e: any) {
    if (e?.code !== UNDEFINED_FUNCTION) throw e;
    return (await bounded(c, until, WORKER_RUNNING))[0].ok; // before 0.5.0
  }
}
