-- Removes the portable edition from the current schema: DROP EXTENSION
-- where it was installed with CREATE EXTENSION (or pg_tle), else every
-- object portable/leaderlock.sql made. Refuses to touch the compiled
-- edition. The table goes too: run save.sql first to keep the leases.
SET LOCAL client_min_messages = warning;
DO $uninstall$
DECLARE
    s text := pg_catalog.current_schema();
    ext text := (SELECT e.extversion FROM pg_catalog.pg_extension e WHERE e.extname = 'leaderlock');
    f oid;
BEGIN
    IF ext IS NOT NULL THEN
        IF ext NOT LIKE '%portable' THEN
            RAISE EXCEPTION 'leaderlock: the installed extension is the compiled edition (version %); use DROP EXTENSION leaderlock', ext;
        END IF;
        DROP EXTENSION leaderlock;
        RETURN;
    END IF;
    IF pg_catalog.to_regclass(pg_catalog.quote_ident(s) || '.leaderlock') IS NULL THEN
        RAISE EXCEPTION 'leaderlock: no leaderlock table in schema %', s;
    END IF;
    FOR f IN
        SELECT p.oid FROM pg_catalog.pg_proc p
         WHERE p.pronamespace = pg_catalog.to_regnamespace(pg_catalog.quote_ident(s))
           AND (p.proname LIKE 'le\_%' OR p.proname LIKE '\_le\_%')
    LOOP
        -- (SQL-bodied functions depend on those they call: some went already)
        IF EXISTS (SELECT 1 FROM pg_catalog.pg_proc p WHERE p.oid = f) THEN
            EXECUTE pg_catalog.format('DROP FUNCTION %s CASCADE', f::pg_catalog.regprocedure);
        END IF;
    END LOOP;
    EXECUTE pg_catalog.format('DROP VIEW IF EXISTS %1$I.leaderlock_status, %1$I.leaderlock_stats, %1$I.leaderlock_database_stats', s);
    EXECUTE pg_catalog.format('DROP TABLE %1$I.leaderlock, %1$I.leaderlock_failover', s);
    EXECUTE pg_catalog.format('DROP TYPE IF EXISTS %1$I.leaderlock_lease', s);
END
$uninstall$;
