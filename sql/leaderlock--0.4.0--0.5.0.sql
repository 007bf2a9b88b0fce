-- leaderlock 0.4.0 -> 0.5.0: security fixes (SECURITY.md), le_capabilities
-- and le_expire_lapsed (contract 19), le_renew_all and le_release_all
-- (contract 16). The table gains an index; every lease, term and counter
-- stays as it is.
\echo Use "ALTER EXTENSION leaderlock UPDATE TO '0.5.0'" to load this file. \quit

-- leaderlock reads keys and ids as UTF-8; other database encodings were
-- never supported (a non-ASCII key failed with an internal error).
DO $$
BEGIN
    IF pg_catalog.getdatabaseencoding() OPERATOR(pg_catalog.<>) 'UTF8' THEN
        RAISE EXCEPTION USING
            ERRCODE = 'feature_not_supported',
            MESSAGE = pg_catalog.format('leaderlock supports UTF8 databases only; this one is %s',
                                        pg_catalog.getdatabaseencoding()),
            HINT = 'Drop the extension here, or move its leases to a UTF8 database.';
    END IF;
END
$$;

-- The functions become SECURITY INVOKER with search_path = pg_catalog,
-- pg_temp: the acting role is current_user at the call, the library acts
-- as the table's owner around its own statements only, and every name
-- resolves in pg_catalog or, by OID, in the extension's own schema.
ALTER FUNCTION le_try_acquire(text, text, interval, boolean, jsonb)
    SECURITY INVOKER SET search_path TO pg_catalog, pg_temp;
ALTER FUNCTION le_acquire(text, text, interval, interval, boolean, jsonb)
    SECURITY INVOKER SET search_path TO pg_catalog, pg_temp;
ALTER FUNCTION le_renew(text, text, interval)
    SECURITY INVOKER SET search_path TO pg_catalog, pg_temp;
ALTER FUNCTION le_release(text, text)
    SECURITY INVOKER SET search_path TO pg_catalog, pg_temp;
ALTER FUNCTION le_proclaim(text, text, jsonb)
    SECURITY INVOKER SET search_path TO pg_catalog, pg_temp;
ALTER FUNCTION le_force_release(text)
    SECURITY INVOKER SET search_path TO pg_catalog, pg_temp;
ALTER FUNCTION le_assert_leader(text, text, bigint)
    SECURITY INVOKER SET search_path TO pg_catalog, pg_temp;
ALTER FUNCTION le_leader(text) SET search_path TO pg_catalog, pg_temp;
ALTER FUNCTION le_lease(text) SET search_path TO pg_catalog, pg_temp;
ALTER FUNCTION le_worker_running() SET search_path TO pg_catalog, pg_temp;

-- Contract 19: the functions both editions have, so that client code can
-- ask what this server offers and, where no worker serves the database,
-- announce lapsed leases itself.
CREATE FUNCTION le_capabilities() RETURNS jsonb
STRICT VOLATILE PARALLEL SAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'le_capabilities_wrapper';

CREATE FUNCTION le_expire_lapsed() RETURNS integer
STRICT VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'le_expire_lapsed_wrapper';

-- Contract 16: every lease of one holder in one statement, found through
-- an index on holder (a renewal does not touch it, so it stays HOT).
CREATE INDEX leaderlock_holder_idx ON leaderlock (holder) WHERE holder IS NOT NULL;

CREATE FUNCTION le_renew_all(id text) RETURNS integer
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'le_renew_all_wrapper';
ALTER FUNCTION le_renew_all(text) SET enable_seqscan = off;

CREATE FUNCTION le_release_all(id text) RETURNS integer
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'le_release_all_wrapper';
ALTER FUNCTION le_release_all(text) SET enable_seqscan = off;
