-- Contract 15: every released version upgrades to the current one with
-- every lease and term intact, and ends up as a fresh install would be.
-- This database got the current version from pg_regress; start at 0.1.0.
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
SELECT key, holder, term FROM leaderlock ORDER BY key;
SELECT le_assert_leader('up-lapsed', 'e');

-- The upgraded extension has exactly the objects of a fresh install.
CREATE TEMP TABLE upgraded AS
SELECT pg_describe_object(classid, objid, objsubid) AS object FROM pg_depend
 WHERE refclassid = 'pg_extension'::regclass AND deptype = 'e'
   AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'leaderlock');
CREATE TEMP TABLE upgraded_columns AS
SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod) AS type
  FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
 WHERE c.relname LIKE 'leaderlock%' AND c.relnamespace = 'public'::regnamespace
   AND a.attnum > 0 AND NOT a.attisdropped;
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
