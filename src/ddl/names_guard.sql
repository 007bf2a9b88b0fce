-- No look-alikes of the API (SECURITY.md, docs/design-choices.md): while
-- the extension is installed, no function, procedure, aggregate or type
-- outside it may have the name of one of its functions, in any schema.
--
-- Why: PostgreSQL resolves an unqualified call through search_path and
-- prefers text for an unknown-typed literal whatever the schemas' order,
-- so `le_try_acquire(text, text, text)` planted in any schema on a
-- caller's path would run instead of ours, as that caller, for the calls
-- the README shows; an overload with one more defaulted argument makes
-- named-argument calls ambiguous (42725); and a one-argument call with a
-- literal, `le_leader('k')`, is taken as a cast to a type of that name
-- (a domain whose CHECK runs its owner's function) before any function.
-- Checking names, not schemas, covers every schema at once: PostgreSQL
-- 14's public, a database owner's public on 15+, any schema a role owns.
--
-- The check runs at the end of every DDL command in the database (one
-- index lookup per name: commands that make types, such as CREATE TYPE
-- ... AS RANGE, also make functions), and once at install, on the COMMENT
-- below. It reads pg_catalog only, finds the extension by name and its
-- functions through pg_depend, and names no schema.

CREATE FUNCTION leaderlock_names_guard() RETURNS event_trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $guard$
DECLARE
    extension oid;
    lookalike record;
BEGIN
    SELECT e.oid INTO extension FROM pg_catalog.pg_extension e WHERE e.extname = 'leaderlock';
    IF extension IS NULL THEN
        RETURN; -- being dropped
    END IF;
    WITH ours AS (
        SELECT d.classid, d.objid FROM pg_catalog.pg_depend d
         WHERE d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass
           AND d.refobjid = extension AND d.deptype = 'e'
    ), api AS (
        SELECT p.proname AS name FROM pg_catalog.pg_proc p JOIN ours o
            ON o.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND o.objid = p.oid
    )
    SELECT x.oid, x.name, x.kind INTO lookalike FROM (
        SELECT p.oid, p.proname AS name, 'function'::text AS kind,
               'pg_catalog.pg_proc'::pg_catalog.regclass AS classid
          FROM pg_catalog.pg_proc p WHERE p.proname IN (SELECT name FROM api)
        UNION ALL
        SELECT t.oid, t.typname, 'type', 'pg_catalog.pg_type'::pg_catalog.regclass
          FROM pg_catalog.pg_type t WHERE t.typname IN (SELECT name FROM api)
    ) x
     WHERE NOT EXISTS (SELECT 1 FROM ours o WHERE o.classid = x.classid AND o.objid = x.oid)
     LIMIT 1;
    IF lookalike.oid IS NOT NULL THEN
        -- The name is one of ours (equal to it), so it is safe to print.
        RAISE EXCEPTION USING
            ERRCODE = 'insufficient_privilege',
            MESSAGE = pg_catalog.format(
                'leaderlock: "%s" is the name of a leaderlock function; no other %s may '
                'have it in this database', lookalike.name, lookalike.kind),
            DETAIL = pg_catalog.format(
                'The %s with OID %s would be chosen by some calls of leaderlock''s "%s" and '
                'run as the caller.', lookalike.kind, lookalike.oid, lookalike.name),
            HINT = 'Give it another name (or drop it, or install leaderlock in another database).';
    END IF;
END
$guard$;

REVOKE ALL ON FUNCTION @extschema@.leaderlock_names_guard() FROM PUBLIC;

CREATE EVENT TRIGGER leaderlock_names_guard ON ddl_command_end
    EXECUTE FUNCTION @extschema@.leaderlock_names_guard();
-- Also under session_replication_role = replica (a superuser's setting).
ALTER EVENT TRIGGER leaderlock_names_guard ENABLE ALWAYS;

-- The extension's indexes stay (SECURITY.md): the owner of the schema it
-- is installed in (on PostgreSQL 15 and later the database's owner owns
-- public) may drop any object in it, and plain indexes, unlike tables,
-- cannot be extension members. Without them every renewal of many keys
-- and the worker's checks scan the table, and a later update naming an
-- index fails. A DROP that takes one of them (an index of leaderlock's
-- name pattern in its schema) while no table goes with it is refused; a
-- DROP EXTENSION, or of the schema with it, finds the extension gone and
-- passes. (An administrator who must drop one: ALTER EVENT TRIGGER
-- leaderlock_index_guard DISABLE first.)
CREATE FUNCTION leaderlock_index_guard() RETURNS event_trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $guard$
DECLARE
    home name;
    gone text;
BEGIN
    SELECT n.nspname INTO home FROM pg_catalog.pg_extension e
      JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace
     WHERE e.extname OPERATOR(pg_catalog.=) 'leaderlock'::pg_catalog.name;
    IF home IS NULL THEN
        RETURN; -- being dropped
    END IF;
    SELECT o.object_name INTO gone FROM pg_catalog.pg_event_trigger_dropped_objects() o
     WHERE o.object_type OPERATOR(pg_catalog.=) 'index'
       AND o.schema_name OPERATOR(pg_catalog.=) home::pg_catalog.text
       AND o.object_name OPERATOR(pg_catalog.~) '^leaderlock_.*_idx$'
       AND NOT EXISTS (SELECT FROM pg_catalog.pg_event_trigger_dropped_objects() t
                        WHERE t.object_type OPERATOR(pg_catalog.=) 'table')
     LIMIT 1;
    IF gone IS NOT NULL THEN
        -- The name is one of ours (it matched the pattern): safe to print.
        RAISE EXCEPTION USING
            ERRCODE = 'insufficient_privilege',
            MESSAGE = pg_catalog.format('leaderlock: index "%s" is leaderlock''s and stays', gone),
            DETAIL = 'Without it, calls and the background worker scan the table, and updates of '
                     'the extension fail.',
            HINT = 'A superuser who must drop it disables the event trigger leaderlock_index_guard '
                   'first.';
    END IF;
END
$guard$;

REVOKE ALL ON FUNCTION @extschema@.leaderlock_index_guard() FROM PUBLIC;

CREATE EVENT TRIGGER leaderlock_index_guard ON sql_drop
    EXECUTE FUNCTION @extschema@.leaderlock_index_guard();
ALTER EVENT TRIGGER leaderlock_index_guard ENABLE ALWAYS;

-- A DDL command: the guard's first run, which refuses the install (or the
-- update) where a look-alike exists already.
COMMENT ON FUNCTION @extschema@.leaderlock_names_guard() IS
    'leaderlock: refuses functions and types named like leaderlock''s functions';
