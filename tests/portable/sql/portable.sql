-- The portable edition's own behaviour (contract 19), beyond the
-- repository's pg_regress files: capabilities, le_expire_lapsed, lapsed
-- leases vacated by the next call, ttls stored as hours, durability, and
-- the role checks of the SECURITY DEFINER writers.
SELECT le_capabilities();
SELECT le_worker_running(), count(*) AS database_stats_rows FROM leaderlock_database_stats;

-- A ttl is stored without a day part (exact in any time zone), as compiled.
SELECT le_try_acquire('p-day', 'a', '1 day');
SELECT ttl, remaining > '23:59:00' AS nearly_a_day FROM leaderlock_status WHERE key = 'p-day';
SELECT remaining > '23:59:00' AND remaining <= '24:00:00' AS le_lease_in_hours FROM le_lease('p-day');
SELECT le_release('p-day', 'a');

-- le_expire_lapsed vacates every lapsed lease (term kept, counted) and
-- says how many; a live or vacant one is left alone.
SELECT le_try_acquire('p-lapse-1', 'a', '10 milliseconds'),
       le_try_acquire('p-lapse-2', 'b', '10 milliseconds'),
       le_try_acquire('p-live', 'c', '1 hour');
SELECT pg_sleep(0.05);
SELECT key, holder, state FROM leaderlock_status WHERE key LIKE 'p-%' ORDER BY key;
SELECT le_expire_lapsed() AS expired;
SELECT le_expire_lapsed() AS expired_again;
SELECT key, holder, term, state, value, owner FROM leaderlock_status WHERE key LIKE 'p-%' ORDER BY key;
SELECT key, tenures, releases, expiries FROM leaderlock_stats WHERE key LIKE 'p-lapse%' ORDER BY key;

-- The next call that writes a lapsed key vacates it too (here a refused renew).
SELECT le_try_acquire('p-touch', 'a', '10 milliseconds');
SELECT pg_sleep(0.05);
SELECT le_renew('p-touch', 'a') AS renewed;
SELECT holder, term, expiries FROM leaderlock WHERE key = 'p-touch';

-- Session-bound leases need the compiled edition.
SELECT le_try_acquire('p-bound', 'a', '1 hour', session_bound => true);
\echo :LAST_ERROR_SQLSTATE

-- Contract 8.3: a write makes its transaction commit as synchronous_commit = on.
SET synchronous_commit = off;
BEGIN;
SELECT le_try_acquire('p-durable', 'a', '1 hour');
SHOW synchronous_commit;
COMMIT;
SHOW synchronous_commit;
RESET synchronous_commit;

-- leaderlock.max_ttl / max_wait: placeholder settings, read at each call.
SET leaderlock.max_wait = '2s';
SELECT le_acquire('p-live', 'x', '1 hour', '3 seconds');
SET leaderlock.max_wait = 'soon';
SELECT le_acquire('p-live', 'x', '1 hour', '1 second');
RESET leaderlock.max_wait;

-- The writers' internals: only through the le_* functions.
CREATE ROLE ll_p_app;
CREATE ROLE ll_p_other;
SET ROLE ll_p_app;
SELECT le_try_acquire('p-owned', 'me', '1 hour');
SELECT _le_extend('p-owned', 'me', clock_timestamp(), '1 hour', 'll_p_app'::regrole);
SELECT _le_failover_step();
RESET ROLE;
-- An entry point called directly cannot claim a role the session is not a
-- member of.
SET ROLE ll_p_other;
SELECT _le_release('p-owned', 'me', 'll_p_app'::regrole);
\echo :LAST_ERROR_SQLSTATE
SELECT le_release('p-owned', 'me') AS other_releases;
RESET ROLE;
-- Inside a SECURITY DEFINER function of a role the session is not a member
-- of: refused (the compiled edition acts as that function's owner).
CREATE FUNCTION p_definer() RETURNS boolean LANGUAGE sql SECURITY DEFINER
    AS $$ SELECT le_renew('p-owned', 'me') $$;
ALTER FUNCTION p_definer() OWNER TO ll_p_app;
SET ROLE ll_p_other;
SELECT p_definer();
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
-- A member of the function's owner (here a superuser) acts as that owner.
SELECT p_definer() AS superuser_through_definer;
-- Maintenance run as a table's owner never changes a lease (42501).
CREATE TABLE p_maint (a int);
ALTER TABLE p_maint OWNER TO ll_p_other;
INSERT INTO p_maint VALUES (1);
CREATE FUNCTION p_index_fn(int) RETURNS int LANGUAGE plpgsql IMMUTABLE
    AS $$ BEGIN PERFORM public.le_try_acquire('p-maint', 'x', '1 hour'); RETURN $1; END $$;
CREATE INDEX ON p_maint (p_index_fn(a));
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS maint_leases FROM leaderlock WHERE key = 'p-maint';
DROP TABLE p_maint;
DROP FUNCTION p_index_fn(int);
DROP FUNCTION p_definer();
SELECT le_force_release('p-owned');
DROP ROLE ll_p_app;
DROP ROLE ll_p_other;
