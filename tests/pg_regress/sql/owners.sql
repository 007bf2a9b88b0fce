-- Contract 13: the role that acquires a lease owns it; le_force_release.
-- Contract 14: per-key and per-database counters.
CREATE ROLE ll_app_a;
CREATE ROLE ll_app_b;
CREATE ROLE ll_app_a_member IN ROLE ll_app_a;
CREATE ROLE ll_ops;

SET ROLE ll_app_a;
SELECT le_try_acquire('own', 'x', '1 hour', value => '"a"');
RESET ROLE;
SELECT holder, owner::regrole FROM leaderlock WHERE key = 'own';

-- The same id from a role that is not a member of the owner: as for a
-- non-holder, and nothing changes.
SET ROLE ll_app_b;
CREATE TEMP TABLE own_before AS SELECT * FROM leaderlock WHERE key = 'own';
SELECT le_try_acquire('own', 'x', '1 hour') AS b_acquires;
SELECT le_acquire('own', 'x', '1 hour', '10 milliseconds') AS b_waits;
SELECT le_renew('own', 'x') AS b_renews;
SELECT le_proclaim('own', 'x', '"b"') AS b_proclaims;
SELECT le_release('own', 'x') AS b_releases;
SELECT le_assert_leader('own', 'x');
SELECT le_force_release('own');
SELECT (SELECT row(l.*)::text FROM leaderlock l WHERE key = 'own')
     = (SELECT row(b.*)::text FROM own_before b) AS unchanged;
SELECT count(*) > 0 AS stats_readable FROM leaderlock_stats;
SELECT count(*) > 0 AS database_stats_readable FROM leaderlock_database_stats;
RESET ROLE;

-- A member of the owner may act as the holder; the owner stays.
SET ROLE ll_app_a_member;
SELECT le_renew('own', 'x') AS member_renews;
SELECT le_assert_leader('own', 'x') AS member_asserts;
SELECT le_try_acquire('own', 'x', '1 hour') AS member_extends;
SELECT le_proclaim('own', 'x', '"m"') AS member_proclaims;
RESET ROLE;
SELECT holder, term, owner::regrole, value FROM leaderlock WHERE key = 'own';
-- So may a superuser (a member of every role).
SELECT le_renew('own', 'x') AS superuser_renews;

-- le_force_release: superusers and members of leaderlock_admin.
CREATE ROLE leaderlock_admin;
GRANT leaderlock_admin TO ll_ops;
SET ROLE ll_ops;
SELECT le_force_release('own') AS ops_forces;
SELECT le_force_release('own') AS vacant_already;
SELECT le_force_release('never-used') AS unknown_key;
SELECT le_force_release(NULL);
SELECT le_force_release('');
RESET ROLE;
SELECT holder, term, owner::regrole, value FROM leaderlock WHERE key = 'own';
-- Vacant: the next tenure is anyone's, owned by its role.
SET ROLE ll_app_b;
SELECT le_try_acquire('own', 'x', '1 hour') AS b_takes_it;
RESET ROLE;
SELECT holder, term, owner::regrole FROM leaderlock WHERE key = 'own';
SELECT owner FROM leaderlock_status WHERE key = 'own';
SELECT le_force_release('own') AS superuser_forces;

-- Per key: tenures, releases (forced ones too), expiries (a lapsed lease
-- taken over counts, as a worker's expiry would).
SELECT le_try_acquire('lapsing', 'a', '10 milliseconds');
SELECT pg_sleep(0.05);
SELECT le_try_acquire('lapsing', 'b', '1 hour');
SELECT key, tenures, releases, expiries, held, changed_at IS NOT NULL AS changed,
       seconds_since_change BETWEEN 0 AND 60 AS recent
  FROM leaderlock_stats WHERE key IN ('own', 'lapsing') ORDER BY key;

-- Per database, since server start: count the calls of this session.
CREATE TEMP TABLE counted_before AS
SELECT * FROM leaderlock_database_stats WHERE datname = current_database();
SELECT le_try_acquire('count', 'a', '1 hour');
SELECT le_try_acquire('count', 'b', '1 hour');
SELECT le_renew('count', 'a');
SELECT le_renew('count', 'b');
SELECT le_release('count', 'a');
SELECT le_try_acquire('lapsing', 'c', '1 hour');
SELECT le_try_acquire('lapsing-too', 'a', '10 milliseconds');
SELECT pg_sleep(0.05);
SELECT le_try_acquire('lapsing-too', 'b', '1 hour');
SELECT s.acquired - b.acquired AS acquired, s.renewed - b.renewed AS renewed,
       s.refused - b.refused AS refused, s.released - b.released AS released,
       s.expired - b.expired AS expired, s.since = b.since AS same_since
  FROM leaderlock_database_stats s JOIN counted_before b USING (datid);

DROP TABLE own_before;
DROP ROLE leaderlock_admin;
DROP ROLE ll_ops;
DROP ROLE ll_app_a_member;
DROP ROLE ll_app_a;
DROP ROLE ll_app_b;
