-- Portable -> portable: reinstall (or install a newer portable version)
-- keeping every lease, term and counter, in one transaction. As the role
-- that installed it, from this directory:
--     psql -v ON_ERROR_STOP=1 -f portable/reinstall.sql
\set ON_ERROR_STOP on
BEGIN;
\ir save.sql
\ir uninstall.sql
\ir leaderlock.sql
\ir restore.sql
COMMIT;
