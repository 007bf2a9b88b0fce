-- The portable edition's own behaviour (contract 19), beyond the
-- repository's pg_regress files: capabilities, le_expire_lapsed, lapsed
-- leases vacated by the next call (and left alone by le_renew_all and
-- le_release_all), ttls stored as hours, durability, and the role checks
-- of the SECURITY DEFINER writers; the same for keys of many slots
-- (contract 17) and sessions (contract 21) at the end.
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

-- M3: a refused call (renew, release, proclaim) neither vacates nor locks
-- a lapsed lease; the next acquirer takes it over (announcing "expired").
SELECT le_try_acquire('p-touch', 'a', '10 milliseconds');
SELECT pg_sleep(0.05);
BEGIN;
SELECT le_renew('p-touch', 'a') AS renewed, le_release('p-touch', 'x') AS released,
       le_proclaim('p-touch', 'a', '1') AS proclaimed;
SELECT count(*) AS rows_locked_by_refused_calls FROM leaderlock
 WHERE xmax::text = (pg_current_xact_id()::text::bigint % 4294967296)::text;
ROLLBACK;
SELECT holder, term, expiries FROM leaderlock WHERE key = 'p-touch';
SELECT le_try_acquire('p-touch', 'b', '1 hour') AS taken_over;
SELECT holder, term, expiries FROM leaderlock WHERE key = 'p-touch';
-- Contract 16: le_renew_all and le_release_all leave a lapsed lease alone
-- (neither renewed, released, vacated nor locked), like a refused le_renew
-- or le_release; the next acquirer takes it over.
SELECT le_try_acquire('p-all-lapsed', 'p-all', '10 milliseconds'),
       le_try_acquire('p-all-live', 'p-all', '1 hour');
SELECT pg_sleep(0.05);
BEGIN;
SELECT le_renew_all('p-all') AS renewed_all, le_release_all('p-all') AS released_all,
       le_release_all('p-all') AS released_again;
-- (written, locked: by this transaction or one of its subtransactions,
-- whose xids come after it; no other transaction writes meanwhile)
SELECT key, xmin::text::bigint >= pg_current_xact_id()::text::bigint % 4294967296 AS written,
       xmax::text::bigint >= pg_current_xact_id()::text::bigint % 4294967296 AS locked
  FROM leaderlock WHERE key LIKE 'p-all%' ORDER BY key;
COMMIT;
BEGIN;
SELECT le_renew_all('p-all') AS renewed_none, le_release_all('p-all') AS released_none;
SELECT count(*) AS rows_locked_by_calls_that_found_none FROM leaderlock
 WHERE xmin::text::bigint >= pg_current_xact_id()::text::bigint % 4294967296
    OR xmax::text::bigint >= pg_current_xact_id()::text::bigint % 4294967296;
COMMIT;
SELECT key, holder, term, state, releases, expiries
  FROM leaderlock_status JOIN leaderlock_stats USING (key) WHERE key LIKE 'p-all%' ORDER BY key;
SELECT le_try_acquire('p-all-lapsed', 'b', '1 hour') AS taken_over;
-- The compiled edition's indexes, the same (the holder's for contract 16).
SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' AND tablename = 'leaderlock'
 ORDER BY indexname;
-- Every function that plans with enable_seqscan = off also runs without
-- JIT (a disabled sequential scan costs more than jit_above_cost: 10 to
-- 40 ms of compiling per call, found by bench/editions.sh).
SELECT p.oid::regprocedure AS jit_on_with_seqscan_off FROM pg_proc p
 WHERE p.pronamespace = 'public'::regnamespace AND 'enable_seqscan=off' = ANY (p.proconfig)
   AND NOT 'jit=off' = ANY (p.proconfig);
SELECT count(*) > 5 AS functions_with_index_plans FROM pg_proc p
 WHERE p.pronamespace = 'public'::regnamespace AND 'enable_seqscan=off' = ANY (p.proconfig);

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
SELECT _le_extend('p-owned', 'me', clock_timestamp(), '1 hour', 'll_p_app'::regrole, NULL, true, NULL);
SELECT _le_failover_record();
RESET ROLE;
-- An entry point called directly cannot claim a role the session is not a
-- member of.
SET ROLE ll_p_other;
SELECT _le_release('p-owned', 'me', 'll_p_app'::regrole, NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT _le_renew_all('me', 'll_p_app'::regrole);
\echo :LAST_ERROR_SQLSTATE
SELECT _le_release_all('me', 'll_p_app'::regrole);
\echo :LAST_ERROR_SQLSTATE
SELECT le_release('p-owned', 'me') AS other_releases;
-- (another role acts on the lease as a non-holder would: not counted)
SELECT le_renew_all('me') AS other_renews_all, le_release_all('me') AS other_releases_all;
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

-- H1: the SECURITY DEFINER entry points check every argument themselves
-- (contract 6): a direct call gets no further than the API.
CREATE ROLE ll_p_direct;
SET ROLE ll_p_direct;
SELECT * FROM _le_attempt('p-direct', 'x', NULL, NULL, 'll_p_direct'::regrole, NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM _le_attempt('p-direct', 'x', '1000 years', NULL, 'll_p_direct'::regrole, NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM _le_attempt('p-direct', 'x', '1 mon', NULL, 'll_p_direct'::regrole, NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM _le_attempt('p-direct', 'x', '-1 min', NULL, 'll_p_direct'::regrole, NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM _le_attempt('', 'x', '1 min', NULL, 'll_p_direct'::regrole, NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM _le_attempt(repeat('k', 3000), 'x', '1 min', NULL, 'll_p_direct'::regrole, NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM _le_attempt('p-direct', NULL, '1 min', NULL, 'll_p_direct'::regrole, NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM _le_attempt('p-direct', 'x', '1 min', to_jsonb(repeat('v', 5000)), 'll_p_direct'::regrole, NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM _le_attempt('p-direct', 'x', '1 min', NULL, 'll_p_direct'::regrole, -5);
\echo :LAST_ERROR_SQLSTATE
SELECT _le_renew('p-direct', 'x', '1 mon', 'll_p_direct'::regrole, NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT _le_release('p-direct', NULL, 'll_p_direct'::regrole, NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT _le_proclaim('p-direct', 'x', to_jsonb(repeat('v', 5000)), 'll_p_direct'::regrole);
\echo :LAST_ERROR_SQLSTATE
SELECT _le_force_release('', 'll_p_direct'::regrole);
\echo :LAST_ERROR_SQLSTATE
SELECT _le_assert_leader('p-direct', 'x', -1, 'll_p_direct'::regrole);
\echo :LAST_ERROR_SQLSTATE
SELECT _le_renew_all(NULL, 'll_p_direct'::regrole);
\echo :LAST_ERROR_SQLSTATE
SELECT _le_release_all('', 'll_p_direct'::regrole);
\echo :LAST_ERROR_SQLSTATE
SELECT _le_release_all(repeat('x', 256), 'll_p_direct'::regrole);
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SELECT count(*) AS direct_rows FROM leaderlock WHERE key = 'p-direct' OR key = '' OR key LIKE 'kkk%';
-- The table refuses such rows whoever writes them (its owner included).
INSERT INTO leaderlock (key, holder, term, expires_at, ttl) VALUES ('p-bad', 'x', 1, NULL, NULL);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO leaderlock (key, holder, term, expires_at, ttl) VALUES ('', NULL, 1, NULL, NULL);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO leaderlock (key, holder, term, expires_at, ttl, value)
VALUES ('p-bad', 'x', 1, '2000-01-01 00:00:00+00', '1 hour', to_jsonb(repeat('v', 5000)));
\echo :LAST_ERROR_SQLSTATE
SELECT conname FROM pg_constraint WHERE conrelid = 'leaderlock'::regclass AND contype = 'c' ORDER BY 1;

-- H2: code run by maintenance (CREATE INDEX, ANALYZE, autovacuum: a
-- security-restricted operation as the table's owner, here with a
-- superuser session) cannot act through the entry points either, not even
-- for a role the session is a member of (10: the bootstrap superuser).
SELECT le_try_acquire('p-sro', 'holder', '1 hour');
CREATE TABLE p_sro (a int);
ALTER TABLE p_sro OWNER TO ll_p_direct;
INSERT INTO p_sro VALUES (1);
CREATE FUNCTION p_sro_fn(int) RETURNS int LANGUAGE plpgsql IMMUTABLE
    AS $$ BEGIN PERFORM public._le_force_release('p-sro', 10::oid); RETURN $1; END $$;
CREATE INDEX ON p_sro (p_sro_fn(a));
\echo :LAST_ERROR_SQLSTATE
CREATE OR REPLACE FUNCTION p_sro_fn(int) RETURNS int LANGUAGE plpgsql IMMUTABLE
    AS $$ BEGIN PERFORM public._le_attempt('p-sro', 'thief', '1 hour', NULL, 10::oid, NULL); RETURN $1; END $$;
CREATE INDEX ON p_sro (p_sro_fn(a));
\echo :LAST_ERROR_SQLSTATE
CREATE OR REPLACE FUNCTION p_sro_fn(int) RETURNS int LANGUAGE plpgsql IMMUTABLE
    AS $$ BEGIN PERFORM public._le_expire_lapsed(); RETURN $1; END $$;
CREATE INDEX ON p_sro (p_sro_fn(a));
\echo :LAST_ERROR_SQLSTATE
CREATE OR REPLACE FUNCTION p_sro_fn(int) RETURNS int LANGUAGE plpgsql IMMUTABLE
    AS $$ BEGIN PERFORM public._le_release_all('holder', 10::oid); RETURN $1; END $$;
CREATE INDEX ON p_sro (p_sro_fn(a));
\echo :LAST_ERROR_SQLSTATE
SELECT holder, term FROM leaderlock WHERE key = 'p-sro';
DROP TABLE p_sro;
DROP FUNCTION p_sro_fn(int);

-- H3: calls between the edition's functions have exact argument types: an
-- overload created in its schema (here by a superuser) is never chosen.
CREATE TABLE p_trojan_log (who text, what text);
GRANT INSERT ON p_trojan_log TO PUBLIC;
CREATE FUNCTION public._le_setting_us(name text, default_s integer) RETURNS numeric
LANGUAGE plpgsql AS $$ BEGIN INSERT INTO public.p_trojan_log VALUES (current_user, 'setting');
                            RETURN default_s::numeric * 1000000; END $$;
CREATE FUNCTION public._le_setting_us(name text, default_s integer, min_s integer, max_s integer)
RETURNS numeric
LANGUAGE plpgsql AS $$ BEGIN INSERT INTO public.p_trojan_log VALUES (current_user, 'setting4');
                            RETURN default_s::numeric * 1000000; END $$;
CREATE FUNCTION public._le_attempt(p_key text, p_id text, p_ttl interval, p_value jsonb, p_caller oid,
    p_insert_wait_ms text, OUT o_outcome text, OUT o_until timestamptz, OUT o_step boolean)
LANGUAGE plpgsql AS $$ BEGIN INSERT INTO public.p_trojan_log VALUES (current_user, 'attempt');
                            o_outcome := 'acquired'; END $$;
\c -
SET ROLE ll_p_direct;
SELECT le_try_acquire('p-trojan', 'x', '10 s'), le_renew('p-trojan', 'x'), le_release('p-trojan', 'x'),
       le_capabilities()->>'max_ttl_s' AS max_ttl_s;
RESET ROLE;
SELECT count(*) AS trojan_calls FROM p_trojan_log;
DROP FUNCTION public._le_setting_us(text, integer);
DROP FUNCTION public._le_setting_us(text, integer, integer, integer);
DROP FUNCTION public._le_attempt(text, text, interval, jsonb, oid, text);
DROP TABLE p_trojan_log;

-- H4: the schema must stay the installer's alone; checked at each call.
GRANT CREATE ON SCHEMA public TO ll_p_direct;
SET ROLE ll_p_direct;
SELECT le_try_acquire('p-schema', 'x', '10 s');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
REVOKE CREATE ON SCHEMA public FROM ll_p_direct;
SET ROLE ll_p_direct;
SELECT le_try_acquire('p-schema', 'x', '10 s') AS after_revoke;
RESET ROLE;

-- M2: after a promotion (simulated: the recorded timeline set back), a
-- rival's open transaction holds no holder's row: the promotion is
-- recorded in leaderlock_failover only, and held leases are extended when
-- read (le_lease, leaderlock_status, renewals, takeovers).
SELECT le_try_acquire('p-prom', 'h', '3 seconds');
SELECT pg_sleep(0.3);
UPDATE leaderlock_failover SET timeline = 0, changed_at = NULL;
SET ROLE ll_p_direct;
BEGIN;
SELECT le_try_acquire('p-prom-rival', 'r', '1 minute');
SELECT count(*) AS holders_rows_written_or_locked FROM leaderlock
 WHERE key <> 'p-prom-rival'
   AND (xmin::text = (pg_current_xact_id()::text::bigint % 4294967296)::text
        OR xmax::text = (pg_current_xact_id()::text::bigint % 4294967296)::text);
SELECT timeline, changed_at IS NOT NULL AS recorded FROM leaderlock_failover;
SELECT l.expires_at >= f.changed_at + interval '3 seconds' AS outlasts_promotion,
       l.expires_at > r.expires_at AS extended_beyond_raw
  FROM le_lease('p-prom') l, leaderlock_failover f, leaderlock r WHERE r.key = 'p-prom';
SELECT state FROM leaderlock_status WHERE key = 'p-prom';
COMMIT;
RESET ROLE;
SELECT le_renew('p-prom', 'h') AS holder_renews, le_release('p-prom', 'h') AS holder_releases;

-- L4: the limits are those of the compiled edition's settings (22023).
SET leaderlock.max_ttl = '9999999999999999999999d';
SELECT le_try_acquire('p-big', 'a', '2000000000 hours');
\echo :LAST_ERROR_SQLSTATE
SET leaderlock.max_ttl = '2147483647';
SELECT le_try_acquire('p-big', 'a', '300000000 days');
\echo :LAST_ERROR_SQLSTATE
RESET leaderlock.max_ttl;
SET leaderlock.max_wait = '86401';
SELECT le_acquire('p-big', 'a', '1 hour', '1 second');
\echo :LAST_ERROR_SQLSTATE
RESET leaderlock.max_wait;
SELECT count(*) AS big_rows FROM leaderlock WHERE key = 'p-big';
-- Audit of 0.5.0, A: the retention settings are the administrator's, the
-- database's (ALTER DATABASE ... SET), read at each call; a session's SET
-- is ignored (tests/portable/security.sh: another role's rows kept). A bad
-- value of the database's is refused as the session's was: le_claim_run
-- raises 22023; le_expire_lapsed's numbering warns and the call goes on.
SET leaderlock.run_retention = 'soon';
SET leaderlock.history_max_rows = 'none';
SELECT le_claim_run('p-ret', le_now() - interval '1 second', 'a', '1 minute') > 0 AS session_value_ignored;
SELECT le_expire_lapsed() >= 0 AS session_value_ignored;
RESET leaderlock.run_retention;
RESET leaderlock.history_max_rows;
DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET leaderlock.run_retention = ''soon''', current_database()); END $$;
SELECT le_claim_run('p-ret', le_now() - interval '1 second', 'b', '1 minute');
\echo :LAST_ERROR_SQLSTATE
-- Contract 22: le_expire_lapsed's runs' retention (every job's) fails with
-- it, a WARNING: the expiries of the call are kept.
SELECT le_try_acquire('p-ret-lapsed', 'a', '10 milliseconds') AS lapses;
SELECT pg_sleep(0.05);
SELECT le_expire_lapsed() >= 1 AS expiries_kept;
SELECT holder FROM leaderlock WHERE key = 'p-ret-lapsed';
DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET leaderlock.run_retention = 0', current_database()); END $$;
SELECT le_claim_run('p-ret', le_now() - interval '1 second', 'b', '1 minute');
\echo :LAST_ERROR_SQLSTATE
DO $$ BEGIN EXECUTE format('ALTER DATABASE %I RESET leaderlock.run_retention', current_database()); END $$;
DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET leaderlock.history_max_rows = 0', current_database()); END $$;
SELECT le_expire_lapsed() >= 0 AS goes_on;
DO $$ BEGIN EXECUTE format('ALTER DATABASE %I RESET leaderlock.history_max_rows', current_database()); END $$;
DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET leaderlock.history_retention = ''1 week''', current_database()); END $$;
SELECT le_expire_lapsed() >= 0 AS goes_on;
DO $$ BEGIN EXECUTE format('ALTER DATABASE %I RESET leaderlock.history_retention', current_database()); END $$;
SELECT count(*) AS waiting FROM leaderlock_history_pending WHERE key = 'p-ret';
DELETE FROM leaderlock_runs WHERE job = 'p-ret';
DELETE FROM leaderlock_jobs WHERE job = 'p-ret';
-- The compiled edition's indexes of the runs and jobs (contract 22: the
-- retention finds every job's runs by due instant, the bound per role a
-- role's jobs by owner).
SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public'
   AND tablename IN ('leaderlock_jobs', 'leaderlock_runs') ORDER BY indexname;
-- N7: a day part too large to turn into hours (net 1 hour here), and an
-- infinite interval (PostgreSQL 17+), get 22023 with a message that says so.
SELECT le_try_acquire('p-big', 'a', '100000000 days -2399999999 hours');
\echo :LAST_ERROR_SQLSTATE
SELECT le_renew('p-big', 'a', '100000000 days -2399999999 hours');
\echo :LAST_ERROR_SQLSTATE
SELECT le_acquire('p-big', 'a', '1 hour', '100000000 days -2399999999 hours');
\echo :LAST_ERROR_SQLSTATE
DO $$
DECLARE
    msgs text := '';
BEGIN
    IF current_setting('server_version_num')::integer >= 170000 THEN
        BEGIN
            EXECUTE $q$SELECT le_try_acquire('p-big', 'a', 'infinity')$q$;
        EXCEPTION WHEN invalid_parameter_value THEN
            msgs := msgs || SQLERRM || '; ';
        END;
        BEGIN
            EXECUTE $q$SELECT le_acquire('p-big', 'a', '1 hour', '-infinity')$q$;
        EXCEPTION WHEN invalid_parameter_value THEN
            msgs := msgs || SQLERRM;
        END;
        RAISE NOTICE 'infinite intervals refused as infinite: %',
            msgs LIKE '%ttl must be finite (got infinity);%wait must be finite (got -infinity)';
    ELSE
        RAISE NOTICE 'infinite intervals refused as infinite: t';   -- (none before 17)
    END IF;
END $$;
SELECT count(*) AS big_rows FROM leaderlock WHERE key = 'p-big';
DROP ROLE ll_p_direct;

-- N1: a SECURITY DEFINER function of another role cannot make the entry
-- points act for the role that called it (the session's role): they act
-- only for the current_user of the le_* function that called them, which
-- proves it with a key only that role can compute (_le_caller_key).
CREATE ROLE ll_p_mallory;
CREATE ROLE ll_p_alice;
SET ROLE ll_p_alice;
SELECT le_try_acquire('p-n1', 'alice-1', '1 hour');
RESET ROLE;
CREATE FUNCTION p_n1_force() RETURNS boolean LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog
    AS $$ BEGIN RETURN public._le_force_release('p-n1', session_user::regrole::oid); END $$;
CREATE FUNCTION p_n1_take() RETURNS text LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog
    AS $$ BEGIN RETURN (public._le_attempt('p-n1-new', 'mallory-was-here', '1 hour'::interval, NULL::jsonb,
                                           session_user::regrole::oid, NULL::bigint)).o_outcome; END $$;
CREATE FUNCTION p_n1_release(victim oid) RETURNS boolean LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog
    AS $$ BEGIN RETURN public._le_release('p-n1', 'alice-1', victim, NULL); END $$;
CREATE FUNCTION p_n1_release_all(victim oid) RETURNS integer LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog
    AS $$ BEGIN RETURN public._le_release_all('alice-1', victim); END $$;
CREATE FUNCTION p_n1_renew_all(victim oid) RETURNS integer LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog
    AS $$ BEGIN RETURN public._le_renew_all('alice-1', victim); END $$;
-- the same with the only caller key it can read: its own role's
CREATE FUNCTION p_n1_forged(victim oid) RETURNS boolean LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog
    AS $$ BEGIN PERFORM set_config('leaderlock_portable.caller', (SELECT key FROM public._le_caller_key), true);
                RETURN public._le_release('p-n1', 'alice-1', victim, NULL); END $$;
ALTER FUNCTION p_n1_force() OWNER TO ll_p_mallory;
ALTER FUNCTION p_n1_take() OWNER TO ll_p_mallory;
ALTER FUNCTION p_n1_release(oid) OWNER TO ll_p_mallory;
ALTER FUNCTION p_n1_forged(oid) OWNER TO ll_p_mallory;
ALTER FUNCTION p_n1_release_all(oid) OWNER TO ll_p_mallory;
ALTER FUNCTION p_n1_renew_all(oid) OWNER TO ll_p_mallory;
GRANT EXECUTE ON FUNCTION p_n1_release(oid), p_n1_forged(oid), p_n1_release_all(oid), p_n1_renew_all(oid)
    TO ll_p_alice;
SET ROLE ll_p_alice;
SELECT p_n1_release('ll_p_alice'::regrole);
\echo :LAST_ERROR_SQLSTATE
SELECT p_n1_release_all('ll_p_alice'::regrole);
\echo :LAST_ERROR_SQLSTATE
SELECT p_n1_renew_all('ll_p_alice'::regrole);
\echo :LAST_ERROR_SQLSTATE
SELECT p_n1_forged('ll_p_alice'::regrole);
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SELECT p_n1_force();
\echo :LAST_ERROR_SQLSTATE
SELECT p_n1_take();
\echo :LAST_ERROR_SQLSTATE
SELECT key, holder, term, owner FROM leaderlock_status WHERE key LIKE 'p-n1%' ORDER BY key;
-- a role sees its own key only, never the secret
SET ROLE ll_p_mallory;
SELECT count(*) AS keys_seen, bool_and(role = 'll_p_mallory'::regrole) AS own_only FROM _le_caller_key;
SELECT secret FROM _le_secret;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
-- Round 3, P3: a key is good for the statement that read it, in its
-- session: replayed later, even by its own role, it is refused (42501).
SET ROLE ll_p_alice;
SELECT le_try_acquire('p-p3', 'alice-1', '1 hour') AS alice_holds;
CREATE TEMP TABLE p3_key AS SELECT key FROM _le_caller_key;
SELECT set_config('leaderlock_portable.caller', (SELECT key FROM p3_key), false) IS NOT NULL AS key_replayed;
SELECT _le_release('p-p3', 'alice-1', 'll_p_alice'::regrole, NULL);
\echo :LAST_ERROR_SQLSTATE
DROP TABLE p3_key;
RESET ROLE;
SELECT holder FROM leaderlock WHERE key = 'p-p3';
RESET leaderlock_portable.caller;
-- alice's own calls still act for her; a superuser's still act for it.
SET ROLE ll_p_alice;
BEGIN;
SELECT le_renew('p-n1', 'alice-1') AS alice_renews;
SELECT coalesce(current_setting('leaderlock_portable.caller', true), '') = '' AS no_key_left_after_renew;
RESET ROLE;
SELECT le_acquire('p-n1', 'su', '1 hour', '0.05 s') AS su_waits_in_vain, le_try_acquire('p-n1', 'su', '1 hour');
SELECT coalesce(current_setting('leaderlock_portable.caller', true), '') = '' AS no_key_left_after_refusals;
COMMIT;
SET ROLE ll_p_alice;
SELECT le_release('p-n1', 'alice-1') AS alice_releases;
RESET ROLE;
SELECT le_try_acquire('p-n1', 'su', '1 hour') AS su_takes, le_force_release('p-n1') AS su_forces;
DROP FUNCTION p_n1_force(), p_n1_take(), p_n1_release(oid), p_n1_forged(oid), p_n1_release_all(oid),
    p_n1_renew_all(oid);
DROP ROLE ll_p_mallory;
DROP ROLE ll_p_alice;

-- N6: the security-restricted-operation probe has no side effect: a
-- session that LISTENs can still PREPARE a transaction that only guarded
-- with le_assert_leader and renewed (run.sh starts the server with
-- max_prepared_transactions = 2), as with the compiled edition.
SELECT le_try_acquire('p-n6', 'a', '1 hour');
LISTEN leaderlock;
BEGIN;
SELECT le_assert_leader('p-n6', 'a') > 0 AS leads, le_renew('p-n6', 'a') AS renewed;
PREPARE TRANSACTION 'p_n6';
COMMIT PREPARED 'p_n6';
UNLISTEN leaderlock;
SELECT le_release('p-n6', 'a');

-- Contract 17: keys of many slots. The compiled edition's table and
-- indexes, with CHECK constraints as on leaderlock (whoever writes).
SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' AND tablename = 'leaderlock_slots'
 ORDER BY indexname;
SELECT conname FROM pg_constraint WHERE conrelid = 'leaderlock_slots'::regclass AND contype = 'c' ORDER BY 1;
INSERT INTO leaderlock_slots (key, slot, holder, term) VALUES ('p-bad', 0, NULL, 1);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO leaderlock_slots (key, slot, holder, term) VALUES ('p-bad', 1, 'x', 1);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO leaderlock (key, holder, term, slots) VALUES ('p-bad', NULL, 1, 1001);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO leaderlock (key, holder, term, expires_at, ttl, slots)
VALUES ('p-bad', 'x', 1, '2000-01-01 00:00:00+00', '1 hour', 2);
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS bad_rows FROM leaderlock WHERE key = 'p-bad';

-- Holders never lock the key's row, and a refused candidate (every slot
-- live) locks nothing: the key's row is written or locked only by a
-- candidate that takes a slot.
SELECT le_try_acquire('p-sem', 'a', '1 hour', slots => 2) AS a, le_try_acquire('p-sem', 'b', '1 hour', slots => 2) AS b;
BEGIN;
SELECT le_try_acquire('p-sem', 'c', '1 hour', slots => 2) AS c_refused,
       le_acquire('p-sem', 'c', '1 hour', '30 milliseconds', slots => 2) AS c_waits_in_vain;
SELECT (SELECT count(*) FROM leaderlock
         WHERE key = 'p-sem' AND (xmin::text::bigint >= pg_current_xact_id()::text::bigint % 4294967296
                                  OR xmax::text::bigint >= pg_current_xact_id()::text::bigint % 4294967296))
     + (SELECT count(*) FROM leaderlock_slots
         WHERE key = 'p-sem' AND (xmin::text::bigint >= pg_current_xact_id()::text::bigint % 4294967296
                                  OR xmax::text::bigint >= pg_current_xact_id()::text::bigint % 4294967296))
       AS rows_written_or_locked_by_refusals;
SELECT le_renew('p-sem', 'a') AS a_renews, le_proclaim('p-sem', 'a', '1') AS a_proclaims,
       le_assert_leader('p-sem', 'b') AS b_term, le_try_acquire('p-sem', 'b', '1 hour', slots => 2) AS b_extends;
SELECT le_release('p-sem', 'a') AS a_releases;
SELECT 'leaderlock' AS "table", count(*) AS written_or_locked FROM leaderlock
 WHERE key = 'p-sem' AND (xmin::text::bigint >= pg_current_xact_id()::text::bigint % 4294967296
                          OR xmax::text::bigint >= pg_current_xact_id()::text::bigint % 4294967296)
UNION ALL
SELECT 'leaderlock_slots', count(*) FROM leaderlock_slots
 WHERE key = 'p-sem' AND (xmin::text::bigint >= pg_current_xact_id()::text::bigint % 4294967296
                          OR xmax::text::bigint >= pg_current_xact_id()::text::bigint % 4294967296);
COMMIT;
SELECT key, holder, term, value, slot, slots FROM leaderlock_status WHERE key = 'p-sem' ORDER BY slot;
-- A key with an escaped name in the 22023 message, as Rust's escape_debug
-- writes it.
SELECT le_try_acquire(E'p-sem "q"\\\n''', 'a', '1 hour', slots => 2) AS quoted_key;
SELECT le_try_acquire(E'p-sem "q"\\\n''', 'b', '1 hour', slots => 3);
\echo :LAST_ERROR_SQLSTATE

-- M3 for tenures: a refused call neither vacates nor locks a lapsed
-- tenure (le_renew, le_release, le_proclaim, le_renew_all, le_release_all);
-- le_expire_lapsed vacates it (term kept, counted as an expiry), and the
-- next candidate takes the slot.
SELECT le_try_acquire('p-sem-lapse', 'p-sem-a', '10 milliseconds', slots => 2) AS a,
       le_try_acquire('p-sem-lapse', 'b', '1 hour', slots => 2) AS b;
SELECT pg_sleep(0.05);
BEGIN;
SELECT le_renew('p-sem-lapse', 'p-sem-a') AS renewed, le_release('p-sem-lapse', 'p-sem-a') AS released,
       le_proclaim('p-sem-lapse', 'p-sem-a', '1') AS proclaimed, le_renew_all('p-sem-a') AS renewed_all,
       le_release_all('p-sem-a') AS released_all;
SELECT count(*) AS rows_written_or_locked FROM leaderlock_slots
 WHERE key = 'p-sem-lapse' AND (xmin::text::bigint >= pg_current_xact_id()::text::bigint % 4294967296
                                OR xmax::text::bigint >= pg_current_xact_id()::text::bigint % 4294967296);
COMMIT;
SELECT holder, term, state, slot FROM leaderlock_status WHERE key = 'p-sem-lapse' ORDER BY slot;
SELECT le_assert_leader('p-sem-lapse', 'p-sem-a');
\echo :LAST_ERROR_SQLSTATE
SELECT le_expire_lapsed() >= 1 AS expired_some;
SELECT holder, term, state, slot FROM leaderlock_status WHERE key = 'p-sem-lapse' ORDER BY slot;
SELECT le_try_acquire('p-sem-lapse', 'c', '1 hour', slots => 2) AS c_takes_the_slot;
SELECT holder, term, state, slot FROM leaderlock_status WHERE key = 'p-sem-lapse' ORDER BY slot;
SELECT key, tenures, releases, expiries, held FROM leaderlock_stats WHERE key = 'p-sem-lapse';

-- Contract 13 for tenures: another role acts on them as a non-holder
-- would; the owner's calls go on.
CREATE ROLE ll_p_sem_a;
CREATE ROLE ll_p_sem_b;
SET ROLE ll_p_sem_a;
SELECT le_try_acquire('p-sem-own', 'w', '1 hour', slots => 2) AS a_takes;
SET ROLE ll_p_sem_b;
SELECT le_renew('p-sem-own', 'w') AS renewed, le_release('p-sem-own', 'w') AS released,
       le_proclaim('p-sem-own', 'w', '1') AS proclaimed, le_renew_all('w') AS renewed_all,
       le_release_all('w') AS released_all;
SELECT le_assert_leader('p-sem-own', 'w');
\echo :LAST_ERROR_SQLSTATE
SET ROLE ll_p_sem_a;
SELECT le_renew('p-sem-own', 'w') AS owner_renews, le_assert_leader('p-sem-own', 'w') AS owner_term;
-- (as compiled, contract 17: an id holds one tenure of a key; the same id
-- of another role gets no second one, and releases nothing)
SET ROLE ll_p_sem_b;
SELECT le_try_acquire('p-sem-own', 'w', '1 hour', slots => 2) AS b_same_id_refused,
       le_release('p-sem-own', 'w') AS b_releases_nothing;
RESET ROLE;
SELECT holder, term, owner, state, slot FROM leaderlock_status WHERE key = 'p-sem-own' ORDER BY slot;
-- H1: the entry point checks slots itself; the slot internals are closed
-- to direct calls.
SET ROLE ll_p_sem_b;
SELECT * FROM _le_attempt('p-sem-direct', 'x', '1 min', NULL, 'll_p_sem_b'::regrole, NULL, NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM _le_attempt('p-sem-direct', 'x', '1 min', NULL, 'll_p_sem_b'::regrole, NULL, 0);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM _le_attempt('p-sem-direct', 'x', '1 min', NULL, 'll_p_sem_b'::regrole, NULL, 1001);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM _le_attempt_slots('p-sem-direct', 'x', '1 min', NULL, 'll_p_sem_b'::regrole, NULL, 2, NULL, false,
                                NULL, NULL, NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT _le_extend_slot('p-sem-own', 'w', clock_timestamp(), '1 hour', 'll_p_sem_b'::regrole, NULL, true, NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM _le_lock_own_slot('p-sem-own', 'w', 'll_p_sem_b'::regrole);
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SELECT count(*) AS direct_rows FROM leaderlock WHERE key = 'p-sem-direct';
SELECT le_force_release('p-sem-own') AS forced;
DROP ROLE ll_p_sem_a;
DROP ROLE ll_p_sem_b;

-- M2 for tenures: after a promotion (simulated), a tenure held across it
-- lasts at least until the promotion + its ttl (le_holders,
-- leaderlock_status), without its row being rewritten or locked by a
-- rival that takes another slot in an open transaction; once its raw
-- expires_at has passed (not the promotion + its ttl), no candidate takes
-- its slot and le_expire_lapsed leaves it alone.
SELECT le_try_acquire('p-sem-prom', 'h', '1 second', slots => 2);
SELECT pg_sleep(0.9);
UPDATE leaderlock_failover SET timeline = 0, changed_at = NULL;
BEGIN;
SELECT le_try_acquire('p-sem-prom', 'r', '1 minute', slots => 2) AS rival_takes_the_other_slot;
SELECT count(*) AS holders_row_written_or_locked FROM leaderlock_slots
 WHERE key = 'p-sem-prom' AND holder = 'h'
   AND (xmin::text = (pg_current_xact_id()::text::bigint % 4294967296)::text
        OR xmax::text = (pg_current_xact_id()::text::bigint % 4294967296)::text);
SELECT h.expires_at >= f.changed_at + interval '1 second' AS outlasts_promotion,
       h.expires_at > r.expires_at AS extended_beyond_raw
  FROM le_holders('p-sem-prom') h, leaderlock_failover f, leaderlock_slots r
 WHERE h.holder = 'h' AND r.key = 'p-sem-prom' AND r.holder = 'h';
SELECT holder, state FROM leaderlock_status WHERE key = 'p-sem-prom' ORDER BY slot;
COMMIT;
SELECT pg_sleep(0.2);
SELECT (SELECT expires_at < clock_timestamp() FROM leaderlock_slots WHERE key = 'p-sem-prom' AND holder = 'h')
         AS raw_expiry_passed,
       le_try_acquire('p-sem-prom', 'x', '1 minute', slots => 2) AS x_refused;
SELECT le_expire_lapsed() >= 0 AS swept;
SELECT holder, state FROM leaderlock_status WHERE key = 'p-sem-prom' ORDER BY slot;
SELECT le_renew('p-sem-prom', 'h') AS holder_renews, le_release('p-sem-prom', 'h') AS holder_releases,
       le_release('p-sem-prom', 'r') AS rival_releases;

-- Contract 21, sessions. session_bound => true needs the compiled edition,
-- as for leases (compiled without a worker: 55000); priorities are the
-- compiled edition's only (contract 18).
SELECT le_open_session('p-ses', '1 hour', session_bound => true);
\echo :LAST_ERROR_SQLSTATE
SELECT le_acquire_in(gen_random_uuid(), 'p-ses-k', '0', priority => 1);
\echo :LAST_ERROR_SQLSTATE
-- The compiled edition's table and indexes, with CHECK constraints as
-- leaderlock's (refusing bad rows from the owner too).
SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' AND tablename = 'leaderlock_sessions'
 ORDER BY indexname;
SELECT conname FROM pg_constraint WHERE conrelid = 'leaderlock_sessions'::regclass AND contype = 'c' ORDER BY 1;
INSERT INTO leaderlock_sessions (session, id, owner, ttl, opened_at, renewed_at, expires_at, recheck_at,
                                 lock_delay, keep_values)
VALUES ('00000000-0000-0000-0000-000000000001', '', 10, '1 min', '2000-01-01 00:00:00+00', '2000-01-01 00:00:00+00',
        '2000-01-01 00:01:00+00', '2000-01-01 00:01:00+00', '0', false);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO leaderlock_sessions (session, id, owner, ttl, opened_at, renewed_at, expires_at, recheck_at,
                                 lock_delay, keep_values)
VALUES ('00000000-0000-0000-0000-000000000001', 'x', 10, '0', '2000-01-01 00:00:00+00', '2000-01-01 00:00:00+00',
        '2000-01-01 00:01:00+00', '2000-01-01 00:01:00+00', '0', false);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO leaderlock_sessions (session, id, owner, ttl, opened_at, renewed_at, expires_at, recheck_at,
                                 lock_delay, keep_values)
VALUES ('00000000-0000-0000-0000-000000000001', 'x', 10, '1 min', '2000-01-01 00:00:00+00', '2000-01-01 00:00:00+00',
        '2000-01-01 00:01:00+00', '2000-01-01 00:01:00+00', '-1 s', false);
\echo :LAST_ERROR_SQLSTATE
-- The session internals are closed to direct calls; the entry points
-- check every argument and the role they act for themselves (H1, N1).
CREATE ROLE ll_p_ses_a;
CREATE ROLE ll_p_ses_b;
SET ROLE ll_p_ses_a;
SELECT le_open_session('p-ses', '1 hour') AS ps \gset
SELECT le_try_acquire_in(:'ps', 'p-ses-1') AS acquired;
SELECT _le_extend_sessions(:'ps', NULL, clock_timestamp(), '1 hour', 'll_p_ses_a'::regrole, NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT _le_end_session(:'ps', true, NULL, NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT _le_end_lapsed_key('p-ses-1', NULL);
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SET ROLE ll_p_ses_b;
SELECT _le_open_session('p-ses', '1 hour', '0', false, 'll_p_ses_a'::regrole);
\echo :LAST_ERROR_SQLSTATE
SELECT _le_renew_session(:'ps', NULL, 'll_p_ses_a'::regrole);
\echo :LAST_ERROR_SQLSTATE
SELECT _le_close_session(:'ps', 'll_p_ses_a'::regrole);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM _le_attempt('p-ses-2', NULL, NULL, NULL, 'll_p_ses_a'::regrole, NULL, 1, :'ps');
\echo :LAST_ERROR_SQLSTATE
SELECT _le_open_session('p-ses', '1 hour', NULL, false, 'll_p_ses_b'::regrole);
\echo :LAST_ERROR_SQLSTATE
SELECT _le_open_session('p-ses', '1 hour', '-1 second', false, 'll_p_ses_b'::regrole);
\echo :LAST_ERROR_SQLSTATE
SELECT _le_open_session('p-ses', '1 hour', '0', NULL, 'll_p_ses_b'::regrole);
\echo :LAST_ERROR_SQLSTATE
SELECT _le_open_session('', '1 hour', '0', false, 'll_p_ses_b'::regrole);
\echo :LAST_ERROR_SQLSTATE
SELECT _le_renew_session(NULL, NULL, 'll_p_ses_b'::regrole);
\echo :LAST_ERROR_SQLSTATE
SELECT _le_renew_session(:'ps', '0', 'll_p_ses_b'::regrole);
\echo :LAST_ERROR_SQLSTATE
SELECT _le_close_session(NULL, 'll_p_ses_b'::regrole);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM _le_attempt('p-ses-2', NULL, NULL, NULL, 'll_p_ses_b'::regrole, NULL, 1001, :'ps');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SELECT count(*) AS sessions_of_b FROM leaderlock_sessions WHERE owner = 'll_p_ses_b'::regrole;
SELECT key, holder, state FROM leaderlock_status WHERE key LIKE 'p-ses-%' ORDER BY key;
-- M3 for sessions: refused calls on a lapsed session (renew it, close it,
-- acquire under it, renew or release one of its keys) write and lock
-- nothing; the next acquisition of one of its keys ends the whole session
-- first (each key announced, lock-delay from the session's expiry), and a
-- waiting le_acquire takes the key once the delay is over.
SET ROLE ll_p_ses_a;
SELECT le_open_session('p-ses-l', '200 milliseconds', lock_delay => '300 milliseconds') AS pl \gset
SELECT le_try_acquire_in(:'pl', 'p-ses-l1') AS l1, le_try_acquire_in(:'pl', 'p-ses-l2') AS l2;
SELECT pg_sleep(0.3);
BEGIN;
SELECT le_renew_session(:'pl') AS renewed, le_close_session(:'pl') AS closed,
       le_try_acquire_in(:'pl', 'p-ses-l3') AS acquired, le_renew('p-ses-l1', 'p-ses-l') AS key_renewed,
       le_release('p-ses-l1', 'p-ses-l') AS key_released, le_renew_all('p-ses-l') AS renewed_all;
SELECT (SELECT count(*) FROM leaderlock_sessions
         WHERE session = :'pl'
           AND (xmin::text::bigint >= pg_current_xact_id()::text::bigint % 4294967296
                OR xmax::text::bigint >= pg_current_xact_id()::text::bigint % 4294967296))
     + (SELECT count(*) FROM leaderlock
         WHERE key LIKE 'p-ses-l%'
           AND (xmin::text::bigint >= pg_current_xact_id()::text::bigint % 4294967296
                OR xmax::text::bigint >= pg_current_xact_id()::text::bigint % 4294967296))
       AS rows_written_or_locked;
COMMIT;
SELECT key, holder, state FROM leaderlock_status WHERE key LIKE 'p-ses-l%' ORDER BY key;
SELECT expires_at + lock_delay AS pl_delay_end FROM leaderlock_sessions WHERE session = :'pl' \gset
SELECT le_acquire('p-ses-l2', 'p-taker', '1 minute', '5 seconds') AS taken_after_the_lock_delay;
SELECT acquired_at >= :'pl_delay_end'::timestamptz AS waited_for_the_delay
  FROM leaderlock WHERE key = 'p-ses-l2';
SELECT delayed_until = :'pl_delay_end'::timestamptz AS delay_from_the_expiry
  FROM leaderlock WHERE key = 'p-ses-l1';
SELECT key, holder, term, state, expiries FROM leaderlock_status JOIN leaderlock_stats USING (key)
 WHERE key LIKE 'p-ses-l%' ORDER BY key;
SELECT count(*) AS sessions_left FROM leaderlock_sessions WHERE session = :'pl';
-- A waiting le_acquire whose looks end a lapsed session and take nothing
-- (its lock-delay runs) rolls each end back, keeping nothing locked while
-- it sleeps: the session and its keys are as they were, and whoever ends
-- it later starts the same delay, from the session's expiry.
SELECT le_open_session('p-ses-w', '100 milliseconds', lock_delay => '1 minute') AS pw \gset
SELECT le_try_acquire_in(:'pw', 'p-ses-w1') AS w1, le_try_acquire_in(:'pw', 'p-ses-w2') AS w2;
SELECT pg_sleep(0.15);
SELECT le_acquire('p-ses-w1', 'p-taker', '1 minute', '100 milliseconds') AS refused_during_the_delay;
SELECT key, holder, state FROM leaderlock_status WHERE key LIKE 'p-ses-w%' ORDER BY key;
SELECT expires_at + lock_delay AS pw_delay_end FROM leaderlock_sessions WHERE session = :'pw' \gset
SELECT le_expire_lapsed() >= 2 AS ended;
SELECT key, holder, delayed_until = :'pw_delay_end'::timestamptz AS delay_from_the_expiry
  FROM leaderlock WHERE key LIKE 'p-ses-w%' ORDER BY key;
SELECT count(*) AS sessions_left FROM leaderlock_sessions WHERE session = :'pw';
RESET ROLE;
-- M2 for sessions: after a promotion (simulated), a session held across it
-- lasts at least until the promotion + its ttl (its keys too, in
-- leaderlock_status), without its row being rewritten or locked by a
-- rival's open transaction; once its raw expires_at has passed, no
-- candidate takes its key and le_expire_lapsed leaves it alone; its holder
-- renews it.
SELECT le_open_session('p-ses-p', '1 second') AS pp \gset
SELECT le_try_acquire_in(:'pp', 'p-ses-prom') AS acquired;
SELECT pg_sleep(0.9);
UPDATE leaderlock_failover SET timeline = 0, changed_at = NULL;
BEGIN;
SELECT le_try_acquire('p-ses-prom', 'r', '1 minute') AS rival_refused;
SELECT count(*) AS session_row_written_or_locked FROM leaderlock_sessions
 WHERE session = :'pp'
   AND (xmin::text = (pg_current_xact_id()::text::bigint % 4294967296)::text
        OR xmax::text = (pg_current_xact_id()::text::bigint % 4294967296)::text);
SELECT s.expires_at >= f.changed_at + interval '1 second' AS outlasts_promotion, s.state
  FROM leaderlock_status s, leaderlock_failover f WHERE s.key = 'p-ses-prom';
COMMIT;
SELECT pg_sleep(0.2);
SELECT (SELECT expires_at < clock_timestamp() FROM leaderlock_sessions WHERE session = :'pp') AS raw_expiry_passed,
       le_try_acquire('p-ses-prom', 'x', '1 minute') AS x_refused;
SELECT le_expire_lapsed() >= 0 AS swept;
SELECT holder, state FROM leaderlock_status WHERE key = 'p-ses-prom';
SELECT le_renew_session(:'pp') AS holder_renews, le_close_session(:'pp') AS holder_closes;
SELECT le_close_session(:'ps') AS closed;
DROP ROLE ll_p_ses_a;
DROP ROLE ll_p_ses_b;

-- Contracts 17 and 21: tenures of keys of many slots held under a session,
-- where no worker runs. M3: refused calls on a lapsed session's tenure
-- (renew, release, proclaim it; renew and release all of its id) write and
-- lock nothing, and le_assert_leader raises as for a lapsed lease; a
-- waiting le_acquire whose looks end the session and take
-- nothing rolls each end back; le_expire_lapsed then ends it, its key of
-- one slot too, and starts the delay from the session's expiry; the key
-- counts the delayed slot as taken (another number of slots: 22023, as
-- while a holder is live).
SELECT le_open_session('p-sss', '200 milliseconds', lock_delay => '1 minute') AS pss \gset
SELECT le_try_acquire_in(:'pss', 'p-sss-pool', slots => 2) AS pool, le_try_acquire_in(:'pss', 'p-sss-one') AS one,
       le_try_acquire('p-sss-pool', 'p-other', '1 hour', slots => 2) AS other;
SELECT pg_sleep(0.3);
BEGIN;
SELECT le_renew('p-sss-pool', 'p-sss') AS renewed, le_release('p-sss-pool', 'p-sss') AS released,
       le_proclaim('p-sss-pool', 'p-sss', '1') AS proclaimed, le_renew_all('p-sss') AS renewed_all,
       le_release_all('p-sss') AS released_all;
SELECT le_assert_leader('p-sss-pool', 'p-sss');
ROLLBACK;
BEGIN;
SELECT le_renew('p-sss-pool', 'p-sss') AS renewed, le_release('p-sss-pool', 'p-sss') AS released,
       le_proclaim('p-sss-pool', 'p-sss', '1') AS proclaimed, le_renew_all('p-sss') AS renewed_all,
       le_release_all('p-sss') AS released_all;
SELECT (SELECT count(*) FROM leaderlock_sessions
         WHERE session = :'pss'
           AND (xmin::text::bigint >= pg_current_xact_id()::text::bigint % 4294967296
                OR xmax::text::bigint >= pg_current_xact_id()::text::bigint % 4294967296))
     + (SELECT count(*) FROM leaderlock_slots
         WHERE key = 'p-sss-pool'
           AND (xmin::text::bigint >= pg_current_xact_id()::text::bigint % 4294967296
                OR xmax::text::bigint >= pg_current_xact_id()::text::bigint % 4294967296))
       AS rows_written_or_locked;
COMMIT;
SELECT key, slot, holder, state FROM leaderlock_status WHERE key LIKE 'p-sss-%' ORDER BY key, slot;
SELECT le_acquire('p-sss-pool', 'p-taker', '1 minute', '100 milliseconds', slots => 2) AS refused_during_the_delay;
SELECT key, slot, holder, state FROM leaderlock_status WHERE key LIKE 'p-sss-%' ORDER BY key, slot;
SELECT expires_at + lock_delay AS pss_delay_end FROM leaderlock_sessions WHERE session = :'pss' \gset
SELECT le_expire_lapsed() >= 2 AS ended;
SELECT key, slot, holder, delayed_until = :'pss_delay_end'::timestamptz AS delay_from_the_expiry
  FROM leaderlock_slots WHERE key = 'p-sss-pool' AND slot = 1
UNION ALL
SELECT key, NULL, holder, delayed_until = :'pss_delay_end'::timestamptz FROM leaderlock WHERE key = 'p-sss-one';
SELECT count(*) AS sessions_left FROM leaderlock_sessions WHERE session = :'pss';
SELECT le_release('p-sss-pool', 'p-other') AS other_releases;
SELECT le_try_acquire('p-sss-pool', 'p-taker', '1 minute', slots => 3);
\echo :LAST_ERROR_SQLSTATE
SELECT le_try_acquire('p-sss-pool', 'p-taker', '1 minute');
\echo :LAST_ERROR_SQLSTATE
SELECT le_try_acquire('p-sss-pool', 'p-taker', '1 minute', slots => 2) AS takes_the_free_slot;
SELECT slot, holder, state FROM leaderlock_status WHERE key = 'p-sss-pool' ORDER BY slot;
-- A tenure naming a session whose row is gone (an earlier version could
-- leave one) is lapsed: the next acquisition of its key vacates it alone
-- (no lock-delay) and takes its slot; le_expire_lapsed vacates the others.
SELECT le_open_session('p-sss-g', '1 hour') AS psg \gset
SELECT le_try_acquire_in(:'psg', 'p-sss-gone1', slots => 2) AS g1,
       le_try_acquire_in(:'psg', 'p-sss-gone2', slots => 2) AS g2;
DELETE FROM leaderlock_sessions WHERE session = :'psg';
SELECT key, slot, holder, state FROM leaderlock_status WHERE key LIKE 'p-sss-gone%' ORDER BY key, slot;
SELECT le_try_acquire('p-sss-gone1', 'p-taker', '1 minute', slots => 2) AS takes_the_slot;
SELECT key, slot, holder, state FROM leaderlock_status WHERE key LIKE 'p-sss-gone%' ORDER BY key, slot;
SELECT le_expire_lapsed() >= 1 AS swept;
SELECT key, slot, holder, state FROM leaderlock_status WHERE key LIKE 'p-sss-gone%' ORDER BY key, slot;
SELECT key, slot, expiries, delayed_until FROM leaderlock_slots WHERE key LIKE 'p-sss-gone%' ORDER BY key, slot;
-- M2: after a promotion (simulated), a tenure held under a session lasts
-- as its session does (at least the promotion + the session's ttl, in
-- le_holders and leaderlock_status), its slot's row and its session's row
-- untouched by a rival that takes the other slot in an open transaction;
-- once the session's raw expires_at has passed, no candidate takes its
-- slot and le_expire_lapsed leaves it alone; le_renew of the tenure renews
-- the session.
SELECT le_open_session('p-sss-p', '1 second') AS psp \gset
SELECT le_try_acquire_in(:'psp', 'p-sss-prom', slots => 2) AS acquired;
SELECT pg_sleep(0.9);
UPDATE leaderlock_failover SET timeline = 0, changed_at = NULL;
BEGIN;
SELECT le_try_acquire('p-sss-prom', 'r', '1 minute', slots => 2) AS rival_takes_the_other_slot;
SELECT (SELECT count(*) FROM leaderlock_sessions
         WHERE session = :'psp'
           AND (xmin::text = (pg_current_xact_id()::text::bigint % 4294967296)::text
                OR xmax::text = (pg_current_xact_id()::text::bigint % 4294967296)::text))
     + (SELECT count(*) FROM leaderlock_slots
         WHERE key = 'p-sss-prom' AND holder = 'p-sss-p'
           AND (xmin::text = (pg_current_xact_id()::text::bigint % 4294967296)::text
                OR xmax::text = (pg_current_xact_id()::text::bigint % 4294967296)::text))
       AS holders_rows_written_or_locked;
SELECT h.expires_at >= f.changed_at + interval '1 second' AS outlasts_promotion,
       h.expires_at > x.expires_at AS extended_beyond_raw
  FROM le_holders('p-sss-prom') h, leaderlock_failover f, leaderlock_sessions x
 WHERE h.holder = 'p-sss-p' AND x.session = :'psp';
SELECT holder, state FROM leaderlock_status WHERE key = 'p-sss-prom' ORDER BY slot;
COMMIT;
SELECT pg_sleep(0.2);
SELECT (SELECT expires_at < clock_timestamp() FROM leaderlock_sessions WHERE session = :'psp') AS raw_expiry_passed,
       le_try_acquire('p-sss-prom', 'x', '1 minute', slots => 2) AS x_refused;
SELECT le_expire_lapsed() >= 0 AS swept;
SELECT holder, state FROM leaderlock_status WHERE key = 'p-sss-prom' ORDER BY slot;
SELECT le_renew('p-sss-prom', 'p-sss-p') AS holder_renews_its_session,
       (SELECT expires_at FROM leaderlock_slots WHERE key = 'p-sss-prom' AND holder = 'p-sss-p') AS stored,
       le_close_session(:'psp') AS holder_closes, le_release('p-sss-prom', 'r') AS rival_releases;

-- Contracts 24 and 25: the internals of schedules and marks are closed to
-- direct calls (42501); their entry points check every argument (H1) and
-- the role they act for (N1) themselves, before anything is written; the
-- tables' CHECK constraints refuse rows no call could write, from the
-- owner too.
CREATE ROLE ll_p_sch_a;
CREATE ROLE ll_p_sch_b;
SET ROLE ll_p_sch_a;
SELECT le_schedule('p-sch', every => '1 hour') IS NOT NULL AS made,
       le_expect_leader('p-sch-key', '1 minute') AS marked;
SELECT _le_settle(clock_timestamp());
\echo :LAST_ERROR_SQLSTATE
SELECT _le_check_expected(clock_timestamp());
\echo :LAST_ERROR_SQLSTATE
SELECT _le_before_change('p-sch', false, '1 hour', NULL, 'UTC', '1 hour', clock_timestamp(), 'allow',
                         clock_timestamp() - interval '1 day', clock_timestamp());
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM _le_lock_claimable('p-sch', clock_timestamp(), clock_timestamp(), clock_timestamp(), NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT _le_record_missed('p-sch', clock_timestamp(), clock_timestamp(), NULL, NULL, false);
\echo :LAST_ERROR_SQLSTATE
SELECT _le_make_job('p-sch-new', 'll_p_sch_a'::regrole);
\echo :LAST_ERROR_SQLSTATE
SELECT _le_mark_member('p-sch-key', 'll_p_sch_a'::regrole);
\echo :LAST_ERROR_SQLSTATE
SELECT _le_announce_leaderless('p-sch-key', clock_timestamp(), NULL, 1000000, clock_timestamp());
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SET ROLE ll_p_sch_b;
SELECT _le_schedule('p-sch', '2 hours', NULL, 'UTC', NULL, 'allow', 'll_p_sch_a'::regrole);
\echo :LAST_ERROR_SQLSTATE
SELECT _le_unschedule('p-sch', 'll_p_sch_a'::regrole);
\echo :LAST_ERROR_SQLSTATE
SELECT _le_set_paused('p-sch', true, 'll_p_sch_a'::regrole);
\echo :LAST_ERROR_SQLSTATE
SELECT _le_expect_leader('p-sch-key', '1 hour', 'll_p_sch_a'::regrole);
\echo :LAST_ERROR_SQLSTATE
SELECT _le_unexpect_leader('p-sch-key', 'll_p_sch_a'::regrole);
\echo :LAST_ERROR_SQLSTATE
SELECT _le_schedule('p-sch-b', '1 hour', NULL, 'UTC', NULL, 'allow', 'll_p_sch_b'::regrole);
\echo :LAST_ERROR_SQLSTATE
SELECT _le_schedule(NULL, '1 hour', NULL, 'UTC', NULL, 'allow', 'll_p_sch_b'::regrole);
\echo :LAST_ERROR_SQLSTATE
SELECT _le_schedule('p-sch-b', '1 hour', '* * * * *', 'UTC', NULL, 'allow', 'll_p_sch_b'::regrole);
\echo :LAST_ERROR_SQLSTATE
SELECT _le_schedule('p-sch-b', NULL, '0 3 * * 1', 'UTC', NULL, 'allow', 'll_p_sch_b'::regrole);
\echo :LAST_ERROR_SQLSTATE
SELECT _le_schedule('p-sch-b', NULL, '0 3 * * *', NULL, NULL, 'allow', 'll_p_sch_b'::regrole);
\echo :LAST_ERROR_SQLSTATE
SELECT _le_schedule('p-sch-b', '1 hour', NULL, 'UTC', '-1 second', 'allow', 'll_p_sch_b'::regrole);
\echo :LAST_ERROR_SQLSTATE
SELECT _le_schedule('p-sch-b', '1 hour', NULL, 'UTC', NULL, NULL, 'll_p_sch_b'::regrole);
\echo :LAST_ERROR_SQLSTATE
SELECT _le_set_paused('p-sch', NULL, 'll_p_sch_b'::regrole);
\echo :LAST_ERROR_SQLSTATE
SELECT _le_unschedule('', 'll_p_sch_b'::regrole);
\echo :LAST_ERROR_SQLSTATE
SELECT _le_expect_leader('p-sch-key', '0.5 seconds', 'll_p_sch_b'::regrole);
\echo :LAST_ERROR_SQLSTATE
SELECT _le_expect_leader('p-sch-key', NULL, 'll_p_sch_b'::regrole);
\echo :LAST_ERROR_SQLSTATE
SELECT _le_unexpect_leader(NULL, 'll_p_sch_b'::regrole);
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SELECT job, every, owner::regrole, paused FROM leaderlock_schedules WHERE job LIKE 'p-sch%';
SELECT key, within, owner::regrole FROM leaderlock_expected WHERE key LIKE 'p-sch%';
SELECT job, owner::regrole FROM leaderlock_jobs WHERE job LIKE 'p-sch%';
INSERT INTO leaderlock_schedules (job, every, cron, misfire_grace, active_since, settled_to, owner, changed_at)
VALUES ('p-sch-x', '1 hour', '* * * * *', '0', '2000-01-01 00:00:00+00', '2000-01-01 00:00:00+00', 10, '2000-01-01 00:00:00+00');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO leaderlock_schedules (job, every, misfire_grace, active_since, settled_to, owner, changed_at)
VALUES ('p-sch-x', '0.5 seconds', '0', '2000-01-01 00:00:00+00', '2000-01-01 00:00:00+00', 10, '2000-01-01 00:00:00+00');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO leaderlock_schedules (job, every, misfire_grace, active_since, settled_to, owner, changed_at)
VALUES ('p-sch-x', '1 hour', '-1 second', '2000-01-01 00:00:00+00', '2000-01-01 00:00:00+00', 10, '2000-01-01 00:00:00+00');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO leaderlock_schedules (job, every, misfire_grace, overlap, active_since, settled_to, owner, changed_at)
VALUES ('p-sch-x', '1 hour', '0', 'sometimes', '2000-01-01 00:00:00+00', '2000-01-01 00:00:00+00', 10, '2000-01-01 00:00:00+00');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO leaderlock_schedules (job, every, misfire_grace, active_since, settled_to, owner, changed_at)
VALUES ('', '1 hour', '0', '2000-01-01 00:00:00+00', '2000-01-01 00:00:00+00', 10, '2000-01-01 00:00:00+00');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO leaderlock_expected (key, within, owner, marked_at, next_check)
VALUES ('p-sch-x', '0.5 seconds', 10, '2000-01-01 00:00:00+00', '2000-01-01 00:00:00+00');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO leaderlock_expected (key, within, owner, marked_at, next_check)
VALUES ('', '1 second', 10, '2000-01-01 00:00:00+00', '2000-01-01 00:00:00+00');
\echo :LAST_ERROR_SQLSTATE
-- The compiled edition's indexes.
SELECT indexname, indexdef FROM pg_indexes
 WHERE schemaname = 'public' AND tablename IN ('leaderlock_schedules', 'leaderlock_expected')
 ORDER BY indexname;
SET ROLE ll_p_sch_a;
SELECT le_unschedule('p-sch') AS unscheduled, le_unexpect_leader('p-sch-key') AS unmarked;
RESET ROLE;
DELETE FROM leaderlock_jobs WHERE job LIKE 'p-sch%';
DROP ROLE ll_p_sch_a;
DROP ROLE ll_p_sch_b;
