-- Contract 15: every released version upgrades to the current one with
-- every lease and term intact, and ends up as a fresh install would be.
-- This database got the current version from pg_regress.

-- 1. From 0.1.0, through every step (0.2.0, 0.3.0, 0.4.0). The current library
-- serves the 0.1.0 schema until the update.
DROP EXTENSION leaderlock;
CREATE EXTENSION leaderlock VERSION '0.1.0';
SELECT extversion FROM pg_extension WHERE extname = 'leaderlock';

-- Fill it: live, released (vacant, term kept), lapsed.
SELECT le_try_acquire('up-live', 'a', '1 hour');
SELECT le_try_acquire('up-vacant', 'a', '1 hour');
SELECT le_release('up-vacant', 'a');
SELECT le_try_acquire('up-vacant', 'b', '1 hour');
SELECT le_release('up-vacant', 'b');
SELECT le_try_acquire('up-lapsed', 'c', '10 milliseconds');
SELECT pg_sleep(0.05);
CREATE TEMP TABLE before AS SELECT * FROM leaderlock;

ALTER EXTENSION leaderlock UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'leaderlock';

-- Every row survived exactly.
SELECT count(*) AS rows_before, (SELECT count(*) FROM leaderlock) AS rows_after FROM before;
SELECT b.key FROM before b LEFT JOIN leaderlock l USING (key)
 WHERE (l.holder, l.term, l.acquired_at, l.renewed_at, l.expires_at, l.ttl, l.recheck_at)
       IS DISTINCT FROM (b.holder, b.term, b.acquired_at, b.renewed_at, b.expires_at, b.ttl, b.recheck_at);
-- The new table knows this server's timeline: nothing is extended.
SELECT timeline, changed_at FROM leaderlock_failover;

-- The functions work on the upgraded data, terms going on from where they were.
SELECT le_try_acquire('up-live', 'z', '1 hour') AS rival_refused;
SELECT le_renew('up-live', 'a', '2 hours');
SELECT le_try_acquire('up-vacant', 'd', '1 hour');
SELECT le_try_acquire('up-lapsed', 'e', '1 hour');
SELECT key, holder, term, value, session_pid FROM leaderlock ORDER BY key;
SELECT le_assert_leader('up-lapsed', 'e');


-- 2. From 0.2.0, through 0.3.0 and 0.4.0.
DROP EXTENSION leaderlock;
CREATE EXTENSION leaderlock VERSION '0.2.0';
SELECT extversion FROM pg_extension WHERE extname = 'leaderlock';
SELECT le_try_acquire('up-live', 'a', '1 hour');
SELECT le_try_acquire('up-vacant', 'a', '1 hour');
SELECT le_release('up-vacant', 'a');
SELECT le_try_acquire('up-lapsed', 'c', '10 milliseconds');
SELECT pg_sleep(0.05);
-- as if leases had been made to outlast a failover once
UPDATE leaderlock_failover SET changed_at = '2026-01-01 00:00:00+00';
DROP TABLE before;
CREATE TEMP TABLE before AS SELECT * FROM leaderlock;
CREATE TEMP TABLE failover_before AS SELECT * FROM leaderlock_failover;

ALTER EXTENSION leaderlock UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'leaderlock';
SELECT count(*) AS rows_before, (SELECT count(*) FROM leaderlock) AS rows_after FROM before;
SELECT b.key FROM before b LEFT JOIN leaderlock l USING (key)
 WHERE (l.holder, l.term, l.acquired_at, l.renewed_at, l.expires_at, l.ttl, l.recheck_at)
       IS DISTINCT FROM (b.holder, b.term, b.acquired_at, b.renewed_at, b.expires_at, b.ttl, b.recheck_at)
    OR l.value IS NOT NULL OR l.session_pid IS NOT NULL OR l.session_start IS NOT NULL;
SELECT (SELECT row(f.*)::text FROM failover_before f) = (SELECT row(f.*)::text FROM leaderlock_failover f)
       AS failover_row_kept;

-- The old three-argument calls still work, and so does everything new.
SELECT le_try_acquire('up-live', 'z', '1 hour') AS rival_refused;
SELECT le_try_acquire('up-live', 'a', '1 hour') AS holder_extends;
SELECT le_acquire('up-live', 'z', '1 hour', '10 milliseconds') AS waited_refused;
SELECT le_acquire('up-vacant', 'd', '1 hour', '1 second', value => '{"at": "host-d:80"}');
SELECT le_proclaim('up-vacant', 'd', '{"at": "host-d:81"}');
SELECT le_try_acquire('up-lapsed', 'e', '1 hour', value => '[1, 2]');
SELECT key, holder, term, value FROM leaderlock ORDER BY key;
SELECT key, holder, term, value, remaining IS NOT NULL AS live FROM le_lease('up-vacant');
SELECT key, holder, value FROM leaderlock_status ORDER BY key;
-- Session-bound leases: refused in a database the worker does not serve.
SELECT le_try_acquire('up-bound', 'f', '1 hour', session_bound => true);

-- 3. From 0.3.0 through 0.4.0 and 0.5.0: owners and counters.
DROP EXTENSION leaderlock;
CREATE EXTENSION leaderlock VERSION '0.3.0';
SELECT extversion FROM pg_extension WHERE extname = 'leaderlock';
SELECT le_try_acquire('up-live', 'a', '1 hour', value => '{"n": 12345678901234567890}');
SELECT le_try_acquire('up-vacant', 'a', '1 hour');
SELECT le_release('up-vacant', 'a');
SELECT le_try_acquire('up-lapsed', 'c', '10 milliseconds');
SELECT pg_sleep(0.05);
DROP TABLE before;
CREATE TEMP TABLE before AS SELECT * FROM leaderlock;

ALTER EXTENSION leaderlock UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'leaderlock';
SELECT count(*) AS rows_before, (SELECT count(*) FROM leaderlock) AS rows_after FROM before;
SELECT b.key FROM before b LEFT JOIN leaderlock l USING (key)
 WHERE (l.holder, l.term, l.acquired_at, l.renewed_at, l.expires_at, l.ttl, l.recheck_at,
        l.value::text, l.session_pid, l.session_start)
       IS DISTINCT FROM (b.holder, b.term, b.acquired_at, b.renewed_at, b.expires_at, b.ttl,
                         b.recheck_at, b.value::text, b.session_pid, b.session_start);
-- No owner yet, counters from zero, changed_at from what the row knows.
SELECT l.key, l.owner::regrole, l.tenures, l.releases, l.expiries,
       l.changed_at = CASE WHEN b.holder IS NOT NULL THEN b.acquired_at ELSE b.expires_at END
         AS changed_at_derived
  FROM leaderlock l JOIN before b USING (key) ORDER BY key;
-- A lease without an owner: any role may act on it, as before; the first
-- renewal makes the renewing role its owner.
CREATE ROLE leaderlock_upgrade_other;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO leaderlock_upgrade_other;
SET ROLE leaderlock_upgrade_other;
SELECT le_renew('up-live', 'a') AS unowned_renewed_by_anyone;
RESET ROLE;
SELECT owner::regrole FROM leaderlock WHERE key = 'up-live';
CREATE ROLE leaderlock_upgrade_third;
SET ROLE leaderlock_upgrade_third;
SELECT le_renew('up-live', 'a') AS owned_now;
RESET ROLE;
DROP ROLE leaderlock_upgrade_third;
-- A new tenure is owned by its role, and counted.
SELECT le_try_acquire('up-vacant', 'd', '1 hour');
SELECT le_try_acquire('up-lapsed', 'e', '1 hour');
SELECT key, holder, term, owner::regrole, tenures, value FROM leaderlock ORDER BY key;
SET ROLE leaderlock_upgrade_other;
SELECT le_release('up-vacant', 'd') AS owned_released_by_other;
RESET ROLE;
SELECT le_force_release('up-vacant') AS forced;
SELECT key, tenures, releases, expiries, held, seconds_since_change >= 0 AS since_ok
  FROM leaderlock_stats ORDER BY key;
DROP OWNED BY leaderlock_upgrade_other;
DROP ROLE leaderlock_upgrade_other;

-- 3b. From 0.4.0 (the last release) to 0.5.0: the functions become
-- SECURITY INVOKER with search_path pg_catalog, pg_temp; no row changes.
DROP EXTENSION leaderlock;
CREATE EXTENSION leaderlock VERSION '0.4.0';
-- The current library serves the 0.4.0 schema, which has no le_now: its
-- statements take the lease clock's now as a parameter.
SELECT le_try_acquire('up-forced', 'y', '1 hour');
SELECT le_force_release('up-forced') AS forced_on_0_4;
SELECT le_try_acquire('up-forced', 'z', '1 hour') AS taken_on_0_4;
SELECT le_release('up-forced', 'z') AS released_on_0_4;
SELECT key, holder, term FROM leaderlock WHERE key LIKE 'up-%' ORDER BY key;
DELETE FROM leaderlock WHERE key = 'up-forced';
CREATE ROLE leaderlock_upgrade_owner;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO leaderlock_upgrade_owner;
SET ROLE leaderlock_upgrade_owner;
SELECT le_try_acquire('up-live', 'a', '1 hour', value => '{"v": 1}');
RESET ROLE;
SELECT le_try_acquire('up-vacant', 'a', '1 hour');
SELECT le_release('up-vacant', 'a');
SELECT le_try_acquire('up-lapsed', 'c', '10 milliseconds');
SELECT pg_sleep(0.05);
DROP TABLE before;
CREATE TEMP TABLE before AS SELECT * FROM leaderlock;
SELECT proname, prosecdef, proconfig FROM pg_proc
 WHERE pronamespace = 'public'::regnamespace AND proname = 'le_renew';
-- An administrator's privileges on the functions the update drops and
-- creates stay as they were.
REVOKE EXECUTE ON FUNCTION le_acquire(text, text, interval, interval, boolean, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION le_acquire(text, text, interval, interval, boolean, jsonb)
   TO leaderlock_upgrade_owner;
-- How every key looks to a user before the update (status view, le_lease).
CREATE TEMP TABLE looks_before AS
SELECT s.key, s.holder, s.term, s.acquired_at, s.renewed_at, s.expires_at, s.ttl, s.state,
       s.value::text AS value, s.owner, (le_lease(s.key)).holder AS lease_holder,
       (le_lease(s.key)).term AS lease_term, (le_lease(s.key)).value::text AS lease_value
  FROM leaderlock_status s;
ALTER EXTENSION leaderlock UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'leaderlock';
SELECT count(*) AS rows_before, (SELECT count(*) FROM leaderlock) AS rows_after FROM before;
SELECT b.key FROM before b LEFT JOIN leaderlock l USING (key)
 WHERE (l.holder, l.term, l.acquired_at, l.renewed_at, l.expires_at, l.ttl, l.recheck_at,
        l.value::text, l.session_pid, l.session_start, l.owner, l.tenures, l.releases,
        l.expiries, l.changed_at)
       IS DISTINCT FROM (b.holder, b.term, b.acquired_at, b.renewed_at, b.expires_at, b.ttl,
                         b.recheck_at, b.value::text, b.session_pid, b.session_start, b.owner,
                         b.tenures, b.releases, b.expiries, b.changed_at);
-- Every key admits one holder, and looks exactly as before (contract 17).
SELECT count(*) AS keys, bool_and(slots = 1) AS one_slot_each FROM leaderlock;
SELECT b.key FROM looks_before b LEFT JOIN leaderlock_status s USING (key)
 WHERE (s.holder, s.term, s.acquired_at, s.renewed_at, s.expires_at, s.ttl, s.state, s.value::text,
        s.owner, (le_lease(s.key)).holder, (le_lease(s.key)).term, (le_lease(s.key)).value::text)
       IS DISTINCT FROM (b.holder, b.term, b.acquired_at, b.renewed_at, b.expires_at, b.ttl, b.state,
                         b.value, b.owner, b.lease_holder, b.lease_term, b.lease_value)
    OR s.slot IS NOT NULL OR s.slots <> 1;
SELECT count(*) AS tenures_of_many_slots FROM leaderlock_slots;
SELECT p.proname, (SELECT bool_or(e.grantee = 0) FROM aclexplode(p.proacl) e) AS public_may,
       has_function_privilege('leaderlock_upgrade_owner', p.oid, 'EXECUTE') AS owner_role_may
  FROM pg_proc p WHERE p.pronamespace = 'public'::regnamespace
   AND p.proname IN ('le_acquire', 'le_try_acquire') ORDER BY p.proname;
-- No function of the extension is SECURITY DEFINER any more, and every one
-- that runs statements pins the search path.
SELECT proname, prosecdef, proconfig FROM pg_proc
 WHERE pronamespace = 'public'::regnamespace AND proname LIKE 'le\_%'
   AND (prosecdef OR proconfig IS NULL) ORDER BY proname;
-- The owner is still the owner: another role is refused, the owner renews.
SELECT le_renew('up-live', 'a') AS superuser_member_renews;
CREATE ROLE leaderlock_upgrade_stranger;
SET ROLE leaderlock_upgrade_stranger;
SELECT le_renew('up-live', 'a') AS stranger_refused;
RESET ROLE;
SET ROLE leaderlock_upgrade_owner;
SELECT le_renew('up-live', 'a') AS owner_renews;
-- 0.5.0's le_renew_all on the upgraded rows: the owner's one live lease.
SELECT le_renew_all('a') AS owner_renews_all;
RESET ROLE;
-- 0.5.0's scheduled runs (contract 22) on the upgraded schema: claimed,
-- finished, never claimed again; the job's terms start at 1.
SELECT le_claim_run('up-job', le_now() - interval '1 second', 'a', '1 hour') AS run_term;
SELECT le_finish_run('up-job', due, 'a', 1, true) AS finished FROM leaderlock_runs WHERE job = 'up-job';
SELECT le_claim_run('up-job', due, 'b', '1 hour') AS again FROM leaderlock_runs WHERE job = 'up-job';
SELECT job, holder, term, attempts, outcome FROM leaderlock_runs;
SELECT job, term FROM leaderlock_jobs;
DELETE FROM leaderlock_runs;
DELETE FROM leaderlock_jobs;
-- 0.5.0's sessions (contract 21) on the upgraded schema: keys held under
-- one, released together by closing it.
SELECT le_open_session('s', '1 hour') AS up_session \gset
SELECT le_try_acquire_in(:'up_session', 'up-s1') AS s1, le_try_acquire_in(:'up_session', 'up-s2') AS s2;
SELECT key, holder, term, state, session = :'up_session' AS under_session
  FROM leaderlock_status WHERE key LIKE 'up-s%' ORDER BY key;
SELECT le_close_session(:'up_session') AS closed;
SELECT key, holder, state FROM leaderlock_status WHERE key LIKE 'up-s%' ORDER BY key;
DELETE FROM leaderlock WHERE key LIKE 'up-s%';
SELECT le_try_acquire('up-lapsed', 'e', '1 hour');
SELECT key, holder, term, owner::regrole, tenures, value FROM leaderlock ORDER BY key;
DROP ROLE leaderlock_upgrade_stranger;
DROP OWNED BY leaderlock_upgrade_owner;
DROP ROLE leaderlock_upgrade_owner;

-- 4. The upgraded extension has exactly the objects of a fresh install.
CREATE TEMP TABLE upgraded AS
SELECT pg_describe_object(classid, objid, objsubid) AS object FROM pg_depend
 WHERE refclassid = 'pg_extension'::regclass AND deptype = 'e'
   AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'leaderlock');
CREATE TEMP TABLE upgraded_columns AS
SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod) AS type
  FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
 WHERE c.relname LIKE 'leaderlock%' AND c.relnamespace = 'public'::regnamespace
   AND a.attnum > 0 AND NOT a.attisdropped;
CREATE TEMP TABLE upgraded_functions AS
SELECT p.oid::regprocedure::text AS function, pg_get_function_arguments(p.oid) AS arguments,
       pg_get_function_result(p.oid) AS result, p.provolatile, p.proparallel, p.prosecdef,
       p.proisstrict, p.proconfig, p.prosrc
  FROM pg_proc p WHERE p.pronamespace = 'public'::regnamespace AND p.proname LIKE 'le\_%';
CREATE TEMP TABLE upgraded_indexes AS
SELECT indexname, indexdef FROM pg_indexes
 WHERE schemaname = 'public' AND tablename LIKE 'leaderlock%';
CREATE TEMP TABLE upgraded_tables AS
SELECT c.relname, c.relacl::text AS acl, c.reloptions::text AS options,
       (SELECT string_agg(pg_get_constraintdef(k.oid), '; ' ORDER BY pg_get_constraintdef(k.oid))
          FROM pg_constraint k WHERE k.conrelid = c.oid) AS constraints,
       c.oid IN (SELECT unnest(extconfig) FROM pg_extension WHERE extname = 'leaderlock') AS dumped
  FROM pg_class c WHERE c.relkind = 'r' AND c.relnamespace = 'public'::regnamespace
   AND c.relname LIKE 'leaderlock%';
CREATE TEMP TABLE upgraded_view AS
SELECT c.relname, pg_get_viewdef(c.oid) AS definition, c.relacl::text AS acl
  FROM pg_class c WHERE c.relkind = 'v' AND c.relnamespace = 'public'::regnamespace
   AND c.relname LIKE 'leaderlock%';
DROP EXTENSION leaderlock;
CREATE EXTENSION leaderlock;
SELECT object AS only_in_upgraded FROM upgraded
EXCEPT SELECT pg_describe_object(classid, objid, objsubid) FROM pg_depend
 WHERE refclassid = 'pg_extension'::regclass AND deptype = 'e'
   AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'leaderlock');
SELECT pg_describe_object(classid, objid, objsubid) AS only_in_fresh FROM pg_depend
 WHERE refclassid = 'pg_extension'::regclass AND deptype = 'e'
   AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'leaderlock')
EXCEPT SELECT object FROM upgraded;
SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod) AS type
  FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
 WHERE c.relname LIKE 'leaderlock%' AND c.relnamespace = 'public'::regnamespace
   AND a.attnum > 0 AND NOT a.attisdropped
EXCEPT SELECT * FROM upgraded_columns;
SELECT extversion FROM pg_extension WHERE extname = 'leaderlock';
-- functions: same arguments, defaults, result, settings and C symbol
SELECT p.oid::regprocedure::text AS function, pg_get_function_arguments(p.oid) AS arguments,
       pg_get_function_result(p.oid) AS result, p.provolatile, p.proparallel, p.prosecdef,
       p.proisstrict, p.proconfig, p.prosrc
  FROM pg_proc p WHERE p.pronamespace = 'public'::regnamespace AND p.proname LIKE 'le\_%'
EXCEPT SELECT * FROM upgraded_functions;
SELECT * FROM upgraded_functions
EXCEPT SELECT p.oid::regprocedure::text, pg_get_function_arguments(p.oid),
       pg_get_function_result(p.oid), p.provolatile, p.proparallel, p.prosecdef,
       p.proisstrict, p.proconfig, p.prosrc
  FROM pg_proc p WHERE p.pronamespace = 'public'::regnamespace AND p.proname LIKE 'le\_%';
-- indexes (not members of the extension: checked on their own)
SELECT indexname, indexdef FROM pg_indexes
 WHERE schemaname = 'public' AND tablename LIKE 'leaderlock%'
EXCEPT SELECT * FROM upgraded_indexes;
SELECT * FROM upgraded_indexes
EXCEPT SELECT indexname, indexdef FROM pg_indexes
 WHERE schemaname = 'public' AND tablename LIKE 'leaderlock%';
SELECT count(*) AS indexes FROM upgraded_indexes;
-- tables: same privileges, options, constraints, and part of a dump or not
SELECT c.relname, c.relacl::text AS acl, c.reloptions::text AS options,
       (SELECT string_agg(pg_get_constraintdef(k.oid), '; ' ORDER BY pg_get_constraintdef(k.oid))
          FROM pg_constraint k WHERE k.conrelid = c.oid) AS constraints,
       c.oid IN (SELECT unnest(extconfig) FROM pg_extension WHERE extname = 'leaderlock') AS dumped
  FROM pg_class c WHERE c.relkind = 'r' AND c.relnamespace = 'public'::regnamespace
   AND c.relname LIKE 'leaderlock%'
EXCEPT SELECT * FROM upgraded_tables;
SELECT count(*) AS tables FROM upgraded_tables;
-- views: same definitions and privileges
SELECT c.relname, pg_get_viewdef(c.oid) AS definition, c.relacl::text AS acl
  FROM pg_class c WHERE c.relkind = 'v' AND c.relnamespace = 'public'::regnamespace
   AND c.relname LIKE 'leaderlock%'
EXCEPT SELECT * FROM upgraded_view;
SELECT count(*) AS views FROM upgraded_view;
