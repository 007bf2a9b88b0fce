-- Portable -> compiled, keeping every lease, term and counter, in one
-- transaction. Needs the compiled edition's files installed (its
-- leaderlock.control replaces the portable one) and a superuser:
--     psql -v ON_ERROR_STOP=1 -f portable/to-compiled.sql
-- (search_path must name the schema leaderlock is in; the compiled
-- extension is created in the same schema).
\set ON_ERROR_STOP on
BEGIN;
\ir save.sql
\ir uninstall.sql
SELECT pg_catalog.current_schema() AS leaderlock_schema \gset
CREATE EXTENSION leaderlock VERSION '0.5.0' SCHEMA :"leaderlock_schema";
\ir restore.sql
COMMIT;
