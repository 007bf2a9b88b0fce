/**
 * The extension's schema, quoted by the server: where CREATE EXTENSION put
 * it, else (the portable edition, installed by its script) every schema
 * holding a le_capabilities(); $1 the schema named (the `schema` option or
 * LEADERLOCK_SCHEMA), or NULL. The same statement in every client.
 */
export declare const FIND_SCHEMA = "SELECT pg_catalog.quote_ident(n.nspname::pg_catalog.text)\nFROM pg_catalog.pg_namespace n\nWHERE ($1::pg_catalog.text IS NULL OR n.nspname OPERATOR(pg_catalog.=) $1::pg_catalog.name)\n  AND CASE WHEN EXISTS (SELECT FROM pg_catalog.pg_extension e\n                        WHERE e.extname OPERATOR(pg_catalog.=) 'leaderlock'::pg_catalog.name)\n      THEN n.oid OPERATOR(pg_catalog.=) ANY (ARRAY(\n             SELECT e.extnamespace FROM pg_catalog.pg_extension e\n             WHERE e.extname OPERATOR(pg_catalog.=) 'leaderlock'::pg_catalog.name))\n      ELSE EXISTS (SELECT FROM pg_catalog.pg_proc p\n                   WHERE p.pronamespace OPERATOR(pg_catalog.=) n.oid\n                     AND p.proname OPERATOR(pg_catalog.=) 'le_capabilities'::pg_catalog.name\n                     AND p.pronargs OPERATOR(pg_catalog.=) 0::pg_catalog.int2)\n  END\nORDER BY 1";
export declare const TRY_ACQUIRE = "SELECT @extschema@.le_try_acquire(key => $1, id => $2, ttl => pg_catalog.make_interval(secs => $3)) AS ok";
export declare const RENEW = "SELECT @extschema@.le_renew(key => $1, id => $2, ttl => pg_catalog.make_interval(secs => $3), term => $4) AS ok";
export declare const RELEASE = "SELECT @extschema@.le_release(key => $1, id => $2, term => $3) AS ok";
export declare const LEGACY: Map<string, string>;
export declare const HOLDS: string;
export declare const TERM_OF = "SELECT term::pg_catalog.text AS term FROM @extschema@.le_lease(key => $1) WHERE holder OPERATOR(pg_catalog.=) $2";
export declare const STILL_OURS: string;
export declare const LEADER = "SELECT @extschema@.le_leader(key => $1) AS holder";
export declare const ASSERT_LEADER = "SELECT @extschema@.le_assert_leader(key => $1, id => $2, term => $3::bigint)::pg_catalog.text AS term";
export declare const PROCLAIM = "SELECT @extschema@.le_proclaim(key => $1, id => $2, value => $3::pg_catalog.jsonb) AS ok";
export declare const WORKER_SERVES = "SELECT coalesce((@extschema@.le_capabilities() OPERATOR(pg_catalog.->>) 'worker')::boolean, true) AS ok";
export declare const WORKER_RUNNING = "SELECT @extschema@.le_worker_running() AS ok";
export declare const EXPIRE_LAPSED = "SELECT @extschema@.le_expire_lapsed() AS n";
export declare const SESSION_KIND: string;
export declare const NOTIFY_PROBE = "SELECT pg_catalog.pg_notify('leaderlock_probe', $1)";
/**
 * Where leaderlock is: `named`, the schema the `schema` option or
 * LEADERLOCK_SCHEMA names (null: any one); `found`, the schema the last
 * connection found (FIND_SCHEMA), as the server quoted it: what a guarded
 * write on the application's own connection names.
 */
export interface Schema {
    readonly named: string | null;
    found?: string;
}
/** The `schema` option, else LEADERLOCK_SCHEMA (read now), else null. */
export declare function schemaOf(option: unknown): Schema;
/** `text` naming `schema` (quoted by the server) where it says @extschema@. */
export declare function inSchema(text: string, schema: string | undefined): string;
