import type PG from "pg";
import { type ConnectionConfig } from "./options.js";
import { type Schema } from "./statements.js";
declare const SESSION_ATTRS: readonly ["any", "read-write", "read-only", "primary", "standby", "prefer-standby"];
type SessionAttrs = (typeof SESSION_ATTRS)[number];
interface Targets {
    hosts: PG.ClientConfig[];
    attrs: SessionAttrs;
    database?: string;
}
export declare function targets(config: ConnectionConfig): Targets;
/** The database a configuration names (for messages). */
export declare function databaseOf(config: ConnectionConfig): string | undefined;
/**
 * A connection to the first host (in order) that answers and, per
 * target_session_attrs, is the kind of session asked for; prefer-standby
 * goes round the hosts once for a standby, then takes any. Its leaderlock
 * schema is found before it is returned (findSchema). Throws a
 * RejectedError when a host refused for good and none would do, else a
 * ConnectionError.
 */
export declare function connect(config: ConnectionConfig, schema: Schema, timeoutMs: number, applicationName?: string): Promise<PG.Client>;
/** RENEW or RELEASE naming the tenure's term (the last value); on a schema before 0.5.0, without it. */
export declare function callNamed(c: PG.Client, until: number, text: string, values: unknown[]): Promise<boolean>;
/** The rows of `text`, the call abandoned (TimeoutError) at `until`. */
export declare function bounded(c: PG.Client, until: number, text: string, values?: unknown[]): Promise<any[]>;
export declare function drop(c: PG.Client | null): void;
export declare function workerServes(c: PG.Client, until: number): Promise<boolean>;
export {};
