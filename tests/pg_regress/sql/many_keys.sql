-- Contract 16: le_renew_all and le_release_all act on every live lease of
-- one id (owned by a role the caller is a member of) in one statement.
CREATE ROLE ll_many_a;
CREATE ROLE ll_many_b;
GRANT ll_many_a TO ll_many_b;   -- b may act on a's leases, not a on b's

SET ROLE ll_many_a;
SELECT le_try_acquire('many-' || i, 'shard-owner', i * interval '1 minute')
  FROM generate_series(1, 5) i;
SELECT le_try_acquire('many-other', 'someone-else', '1 hour');
SELECT le_try_acquire('many-lapsed', 'shard-owner', '1 hour');
SELECT le_try_acquire('many-vacant', 'shard-owner', '1 hour');
SELECT le_release('many-vacant', 'shard-owner');
RESET ROLE;
SET ROLE ll_many_b;
SELECT le_try_acquire('many-b', 'shard-owner', '1 hour');
RESET ROLE;
-- (the test's superuser backdates one lease: lapsed, not yet expired)
UPDATE leaderlock SET expires_at = le_now() - interval '1 second'
 WHERE key = 'many-lapsed';
CREATE TEMP TABLE many_before AS SELECT * FROM leaderlock WHERE key LIKE 'many-%';

-- a renews its five live leases: not b's, not the lapsed or vacant ones.
SET ROLE ll_many_a;
SELECT le_renew_all('shard-owner') AS a_renews;
RESET ROLE;
SELECT l.key, l.term = b.term AS same_term,
       l.renewed_at > b.renewed_at AS renewed,
       l.expires_at - l.renewed_at = l.ttl AS by_own_ttl, l.ttl
  FROM leaderlock l JOIN many_before b USING (key)
 ORDER BY l.key;
-- One statement: one clock reading for all.
SELECT count(DISTINCT renewed_at) AS one_reading FROM leaderlock
 WHERE key ~ '^many-[0-9]$';

-- b, a member of a, renews a's and its own; an unknown id renews none.
SET ROLE ll_many_b;
SELECT le_renew_all('shard-owner') AS b_renews;
SELECT le_renew_all('nobody') AS nobody_renews;
RESET ROLE;

-- Releases: a releases its five; b's stays, the lapsed one stays lapsed.
SET ROLE ll_many_a;
SELECT le_release_all('shard-owner') AS a_releases;
SELECT le_release_all('shard-owner') AS none_left;
RESET ROLE;
SELECT l.key, l.holder, l.term = b.term AS same_term, s.state
  FROM leaderlock l JOIN many_before b USING (key) JOIN leaderlock_status s USING (key)
 ORDER BY l.key;
SELECT key, releases - (SELECT releases FROM many_before b WHERE b.key = l.key) AS released
  FROM leaderlock l WHERE key LIKE 'many-%' ORDER BY key;
-- Renew never acquires: nothing held, nothing renewed.
SET ROLE ll_many_a;
SELECT le_renew_all('shard-owner') AS after_release;
RESET ROLE;
SELECT le_release_all('shard-owner') AS superuser_releases_b;

-- Bad input: the SQLSTATE, and nothing changes.
CREATE TEMP TABLE many_unchanged AS SELECT * FROM leaderlock;
SELECT le_renew_all(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT le_release_all('');
\echo :LAST_ERROR_SQLSTATE
SELECT le_renew_all(repeat('x', 1000));
\echo :LAST_ERROR_SQLSTATE
SELECT (SELECT array_agg(l::text ORDER BY key) FROM leaderlock l)
     = (SELECT array_agg(u::text ORDER BY key) FROM many_unchanged u) AS unchanged;

DELETE FROM leaderlock WHERE key LIKE 'many-%';
DROP ROLE ll_many_b;
DROP ROLE ll_many_a;
