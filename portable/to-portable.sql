-- Compiled -> portable, keeping every lease, term and counter, in one
-- transaction, as the compiled extension's owner (a superuser):
--     psql -v ON_ERROR_STOP=1 -v owner=app_admin -f portable/to-portable.sql
-- owner: the role that is to own the portable edition's table and
-- functions (default: the role running this). Afterwards remove leaderlock
-- from shared_preload_libraries at the next restart.
\set ON_ERROR_STOP on
BEGIN;
\ir save.sql
DROP EXTENSION leaderlock;
\if :{?owner}
GRANT SELECT ON pg_temp.leaderlock_carry, pg_temp.leaderlock_carry_failover, pg_temp.leaderlock_carry_slots,
    pg_temp.leaderlock_carry_sessions, pg_temp.leaderlock_carry_jobs, pg_temp.leaderlock_carry_runs,
    pg_temp.leaderlock_carry_history, pg_temp.leaderlock_carry_history_head,
    pg_temp.leaderlock_carry_schedules, pg_temp.leaderlock_carry_expected, pg_temp.leaderlock_carry_groups,
    pg_temp.leaderlock_carry_members, pg_temp.leaderlock_carry_partitions
    TO :"owner";
SET LOCAL ROLE :"owner";
\endif
\ir leaderlock.sql
\ir restore.sql
COMMIT;
