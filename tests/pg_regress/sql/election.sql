-- An election as a user sees it from psql: two candidates, a leader, a
-- renewal, a handover, fencing terms. Timestamps vary, so this prints the
-- state, holder and term, and checks times with booleans.

-- Two replicas of a scheduler run for the same key.
SELECT le_try_acquire('scheduler', 'replica-a', '10 seconds') AS a_won;
SELECT le_try_acquire('scheduler', 'replica-b', '10 seconds') AS b_won;
SELECT le_leader('scheduler');
SELECT key, holder, term, state, ttl, remaining > '9 seconds' AS nearly_full
  FROM leaderlock_status;

-- The leader renews (same term); the follower cannot.
SELECT le_renew('scheduler', 'replica-a') AS a_renewed;
SELECT le_renew('scheduler', 'replica-b') AS b_renewed;
SELECT le_renew('scheduler', 'replica-a', '20 seconds') AS a_renewed_longer;
SELECT holder, term, ttl, expires_at = renewed_at + ttl AS expiry_consistent
  FROM leaderlock WHERE key = 'scheduler';

-- Fencing: the leader guards its writes with its term.
SELECT le_assert_leader('scheduler', 'replica-a') AS term;
SELECT le_assert_leader('scheduler', 'replica-a', 1) AS term;
SELECT le_assert_leader('scheduler', 'replica-b');
\echo :LAST_ERROR_SQLSTATE
SELECT le_assert_leader('scheduler', 'replica-a', 2);
\echo :LAST_ERROR_SQLSTATE

-- Calls that change nothing write nothing: no transaction id, no WAL.
BEGIN;
SELECT le_leader('scheduler'), le_try_acquire('scheduler', 'replica-b', '10 seconds'),
       le_renew('scheduler', 'replica-b'), le_release('scheduler', 'replica-b');
SELECT pg_current_xact_id_if_assigned() IS NULL AS nothing_written;
COMMIT;

-- Handover: the leader releases, the follower takes over in term 2.
SELECT le_release('scheduler', 'replica-b') AS b_released;
SELECT le_release('scheduler', 'replica-a') AS a_released;
SELECT key, holder, term, state FROM leaderlock_status;
SELECT le_leader('scheduler');
SELECT le_try_acquire('scheduler', 'replica-b', '10 seconds') AS b_won;
SELECT key, holder, term, state FROM leaderlock_status;

-- A leader that stops renewing lapses; without the worker (this database is
-- not leaderlock.database) the lapsed lease is simply acquirable.
SELECT le_try_acquire('cron', 'replica-a', '1 millisecond') AS a_won;
SELECT pg_sleep(0.02);
SELECT key, holder, term, state FROM leaderlock_status WHERE key = 'cron';
SELECT le_leader('cron');
SELECT le_renew('cron', 'replica-a') AS renew_after_lapse;
SELECT le_try_acquire('cron', 'replica-b', '10 seconds') AS b_won;
SELECT key, holder, term, state FROM leaderlock_status WHERE key = 'cron';

-- Fencing tokens survive release: the term never goes back.
SELECT le_release('cron', 'replica-b');
SELECT le_try_acquire('cron', 'replica-a', '10 seconds');
SELECT holder, term FROM leaderlock WHERE key = 'cron';

-- A renewal may name the tenure it renews (3.2): one left over from
-- replica-a's earlier tenure (term 1) renews nothing of its tenure now.
SELECT le_renew('cron', 'replica-a', term => 1) AS earlier_tenure_renews_nothing,
       le_renew('cron', 'replica-a', '10 seconds', 3) AS this_tenure_renews;
-- The same for a release (3.3).
SELECT le_release('cron', 'replica-a', term => 1) AS earlier_tenure_ends_nothing;
SELECT holder, term FROM leaderlock WHERE key = 'cron';

-- Guarded write: the work commits only while replica-a leads.
CREATE TABLE jobs (id int, done_by text, term bigint);
BEGIN;
INSERT INTO jobs SELECT 1, 'replica-a', le_assert_leader('cron', 'replica-a');
COMMIT;
BEGIN;
INSERT INTO jobs SELECT 2, 'replica-b', le_assert_leader('cron', 'replica-b');
ROLLBACK;
SELECT * FROM jobs ORDER BY id;

-- Keys with any characters are fine; they are values, never SQL.
SELECT le_try_acquire($$it's "quoted" \ é 雪$$, 'x''); DROP TABLE jobs; --', '1 hour');
SELECT le_leader($$it's "quoted" \ é 雪$$);
SELECT count(*) AS jobs_still_there FROM jobs;

-- The worker serves leaderlock.database, not this database.
SELECT le_worker_running();
