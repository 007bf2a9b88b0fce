"use strict";
Object.defineProperty(exports, "__esModule", { value: true });
exports.NOTIFY_PROBE = exports.SESSION_KIND = exports.EXPIRE_LAPSED = exports.WORKER_RUNNING = exports.WORKER_SERVES = exports.PROCLAIM = exports.ASSERT_LEADER = exports.LEADER = exports.STILL_OURS = exports.TERM_OF = exports.HOLDS = exports.LEGACY = exports.RELEASE = exports.RENEW = exports.TRY_ACQUIRE = exports.FIND_SCHEMA = void 0;
exports.schemaOf = schemaOf;
exports.inSchema = inSchema;
// One round trip each, bind parameters, arguments by name. No statement
// depends on the session's search_path (SECURITY.md; a database owner may
// put her own functions, operators, types and views first on it): every
// function and type of PostgreSQL's is written pg_catalog.name, every
// operator OPERATOR(pg_catalog.op), and every object of leaderlock
// @extschema@.name, where @extschema@ is the extension's schema as the
// server quoted it (FIND_SCHEMA, on each new connection), put in when the
// statement is sent (bounded()). test/statements.test.mjs checks them all,
// in every module. Here: finding the schema, and the statements of leases
// that several parts send; sessions, scheduled runs and the history keep
// theirs in their own modules.
const errors_js_1 = require("./errors.js");
const EXTSCHEMA = "@extschema@";
/**
 * The extension's schema, quoted by the server: where CREATE EXTENSION put
 * it, else (the portable edition, installed by its script) every schema
 * holding a le_capabilities(); $1 the schema named (the `schema` option or
 * LEADERLOCK_SCHEMA), or NULL. The same statement in every client.
 */
exports.FIND_SCHEMA = `SELECT pg_catalog.quote_ident(n.nspname::pg_catalog.text)
FROM pg_catalog.pg_namespace n
WHERE ($1::pg_catalog.text IS NULL OR n.nspname OPERATOR(pg_catalog.=) $1::pg_catalog.name)
  AND CASE WHEN EXISTS (SELECT FROM pg_catalog.pg_extension e
                        WHERE e.extname OPERATOR(pg_catalog.=) 'leaderlock'::pg_catalog.name)
      THEN n.oid OPERATOR(pg_catalog.=) ANY (ARRAY(
             SELECT e.extnamespace FROM pg_catalog.pg_extension e
             WHERE e.extname OPERATOR(pg_catalog.=) 'leaderlock'::pg_catalog.name))
      ELSE EXISTS (SELECT FROM pg_catalog.pg_proc p
                   WHERE p.pronamespace OPERATOR(pg_catalog.=) n.oid
                     AND p.proname OPERATOR(pg_catalog.=) 'le_capabilities'::pg_catalog.name
                     AND p.pronargs OPERATOR(pg_catalog.=) 0::pg_catalog.int2)
  END
ORDER BY 1`;
exports.TRY_ACQUIRE = "SELECT @extschema@.le_try_acquire(key => $1, id => $2, ttl => pg_catalog.make_interval(secs => $3)) AS ok";
// the term: a renewal extends that tenure only, never a later one of the same id
exports.RENEW = "SELECT @extschema@.le_renew(key => $1, id => $2, ttl => pg_catalog.make_interval(secs => $3), term => $4) AS ok";
// the term: a release sent in one tenure never ends a later one of the same id
exports.RELEASE = "SELECT @extschema@.le_release(key => $1, id => $2, term => $3) AS ok";
// The same on a schema before 0.5.0 (no `term`): a client updated before the extension keeps working,
// without that protection (UPDATING.md).
const RENEW_LEGACY = "SELECT @extschema@.le_renew(key => $1, id => $2, ttl => pg_catalog.make_interval(secs => $3)) AS ok";
const RELEASE_LEGACY = "SELECT @extschema@.le_release(key => $1, id => $2) AS ok";
exports.LEGACY = new Map([[exports.RENEW, RENEW_LEGACY], [exports.RELEASE, RELEASE_LEGACY]]);
// After a release sent again was answered false: whether `id` still holds that tenure live
// (the release met its row locked by another transaction).
exports.HOLDS = "SELECT EXISTS (SELECT FROM @extschema@.le_holders(key => $1) " +
    "WHERE holder OPERATOR(pg_catalog.=) $2 AND term OPERATOR(pg_catalog.=) $3::bigint) AS ok";
exports.TERM_OF = "SELECT term::pg_catalog.text AS term FROM @extschema@.le_lease(key => $1) WHERE holder OPERATOR(pg_catalog.=) $2";
// live by the server's own lease clock: `remaining` is NULL unless live (expires_at is on
// that clock, le_now() where the server has one, which need not agree with clock_timestamp())
exports.STILL_OURS = "SELECT coalesce(holder OPERATOR(pg_catalog.=) $1 AND term OPERATOR(pg_catalog.=) $2::bigint " +
    "AND remaining IS NOT NULL, false) AS ok FROM @extschema@.le_lease(key => $3)";
exports.LEADER = "SELECT @extschema@.le_leader(key => $1) AS holder";
exports.ASSERT_LEADER = "SELECT @extschema@.le_assert_leader(key => $1, id => $2, term => $3::bigint)::pg_catalog.text AS term";
exports.PROCLAIM = "SELECT @extschema@.le_proclaim(key => $1, id => $2, value => $3::pg_catalog.jsonb) AS ok";
exports.WORKER_SERVES = "SELECT coalesce((@extschema@.le_capabilities() OPERATOR(pg_catalog.->>) 'worker')::boolean, true) AS ok";
exports.WORKER_RUNNING = "SELECT @extschema@.le_worker_running() AS ok";
exports.EXPIRE_LAPSED = "SELECT @extschema@.le_expire_lapsed() AS n";
exports.SESSION_KIND = "SELECT pg_catalog.current_setting('transaction_read_only') OPERATOR(pg_catalog.=) 'on' AS read_only, " +
    "pg_catalog.pg_is_in_recovery() AS standby";
exports.NOTIFY_PROBE = "SELECT pg_catalog.pg_notify('leaderlock_probe', $1)";
/** The `schema` option, else LEADERLOCK_SCHEMA (read now), else null. */
function schemaOf(option) {
    const named = option ?? (process.env.LEADERLOCK_SCHEMA || null);
    if (named !== null && (typeof named !== "string" || named === "")) {
        throw new errors_js_1.BadArgumentError(`schema must be a non-empty string, not ${JSON.stringify(named)}`);
    }
    return { named };
}
/** `text` naming `schema` (quoted by the server) where it says @extschema@. */
function inSchema(text, schema) {
    if (!text.includes(EXTSCHEMA))
        return text;
    if (schema === undefined)
        throw new errors_js_1.LeaderlockError("leaderlock: a statement before its schema was found");
    return text.replaceAll(EXTSCHEMA, schema);
}
