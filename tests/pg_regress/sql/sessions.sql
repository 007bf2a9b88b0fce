-- Contract 21: sessions. A session belongs to an id and a role and has a
-- ttl; keys acquired under it live as long as it does, renewing it is one
-- row written, and its end (closed, lapsed) vacates all its keys at once,
-- each announced. No worker serves this database, so a lapsed session is
-- ended by the next acquisition of one of its keys or by le_expire_lapsed,
-- the same in both editions.
CREATE ROLE ll_ses_a;
CREATE ROLE ll_ses_b;
GRANT ll_ses_a TO ll_ses_b;
CREATE ROLE ll_ses_c;

SET ROLE ll_ses_a;
SELECT le_open_session('worker-1', '1 hour') AS s \gset
SELECT le_try_acquire_in(:'s', 'ses/a') AS a,
       le_try_acquire_in(:'s', 'ses/b', '{"addr": "10.0.0.1"}') AS b,
       le_acquire_in(:'s', 'ses/c', '0') AS c;
-- Held under it: the session's id, one term each, the session's expiry.
SELECT key, holder, term, state, session = :'s' AS under_session,
       expires_at = (SELECT expires_at FROM leaderlock_sessions WHERE session = :'s') AS sessions_expiry,
       value, owner
  FROM leaderlock_status WHERE key LIKE 'ses/%' ORDER BY key;
-- Stored: infinity, the session's row has the expiry.
SELECT key, expires_at, session = :'s' AS under_session FROM leaderlock WHERE key LIKE 'ses/%' ORDER BY key;
SELECT id, owner::regrole, ttl, lock_delay, keep_values, session_pid,
       expires_at - renewed_at AS span, opened_at = renewed_at AS fresh
  FROM leaderlock_sessions WHERE session = :'s';

-- Rivals: refused, whoever and however they ask.
SELECT le_try_acquire('ses/a', 'worker-2', '1 minute') AS rival_refused;
SELECT le_acquire('ses/a', 'worker-2', '1 minute', '0') AS rival_waits_not;
SELECT le_open_session('worker-2', '1 hour') AS s2 \gset
SELECT le_try_acquire_in(:'s2', 'ses/a') AS rival_session_refused;

-- Renewal: the session's row alone, however many keys.
SELECT le_renew_session(:'s') AS renewed;
SELECT le_renew_session(:'s', '2 hours') AS renewed_longer;
SELECT ttl, expires_at - renewed_at AS span FROM leaderlock_sessions WHERE session = :'s';
SELECT key, ttl, expires_at FROM leaderlock WHERE key LIKE 'ses/%' ORDER BY key;
-- le_renew of a key held under a session renews its session; by term too.
SELECT le_renew('ses/a', 'worker-1') AS renew_key_renews_session;
SELECT le_renew('ses/a', 'worker-1', NULL, 1) AS of_its_term;
SELECT le_renew('ses/a', 'worker-1', NULL, 2) AS other_term;
SELECT le_renew('ses/a', 'worker-2') AS rival_renew;
-- le_renew_all counts the keys of the id's sessions.
SELECT le_renew_all('worker-1') AS renew_all;

-- Fencing and reads as for any lease.
SELECT le_assert_leader('ses/a', 'worker-1') AS term;
SELECT le_assert_leader('ses/a', 'worker-1', 1) AS term_checked;
SELECT le_assert_leader('ses/a', 'worker-2');
\echo :LAST_ERROR_SQLSTATE
SELECT le_leader('ses/b') AS leader, (le_lease('ses/b')).holder, (le_lease('ses/b')).value,
       (le_lease('ses/b')).remaining > interval '1 hour' AS remaining;
SELECT holder, term FROM le_holders('ses/b');
SELECT key, tenures, releases, expiries, held FROM leaderlock_stats WHERE key LIKE 'ses/%' ORDER BY key;

-- le_acquire_in / le_try_acquire_in of a key the session holds: nothing to do.
SELECT le_try_acquire_in(:'s', 'ses/a') AS again, le_acquire_in(:'s', 'ses/a', '1 second') AS again_waiting;
-- Moving: the same id takes it out of sessions (its own ttl), and back in; same term.
SELECT le_try_acquire('ses/c', 'worker-1', '1 minute') AS moved_out;
SELECT key, term, session IS NULL AS plain, ttl FROM leaderlock WHERE key = 'ses/c';
SELECT le_try_acquire_in(:'s', 'ses/c') AS moved_in;
SELECT key, term, session = :'s' AS under_session, expires_at FROM leaderlock WHERE key = 'ses/c';
-- Releasing one key leaves the session and its other keys.
SELECT le_release('ses/c', 'worker-1') AS released_one;
SELECT key, holder, state FROM leaderlock_status WHERE key LIKE 'ses/%' ORDER BY key;
RESET ROLE;

-- Ownership (contract 13): another role's session is as unknown; a member
-- of the owner acts on it.
SET ROLE ll_ses_c;
SELECT le_renew_session(:'s') AS other_role_renews;
SELECT le_try_acquire_in(:'s', 'ses/d') AS other_role_acquires;
SELECT le_close_session(:'s') AS other_role_closes;
SELECT le_renew('ses/a', 'worker-1') AS other_role_renews_key;
SELECT le_release('ses/a', 'worker-1') AS other_role_releases;
RESET ROLE;
SET ROLE ll_ses_b;
SELECT le_renew_session(:'s') AS member_renews;
RESET ROLE;

-- Closing: every key released in one transaction, no lock-delay, the row gone.
SET ROLE ll_ses_a;
SELECT le_try_acquire_in(:'s', 'ses/d') AS d;
SELECT le_close_session(:'s') AS closed;
SELECT le_close_session(:'s') AS closed_twice;
SELECT le_renew_session(:'s') AS renew_closed;
SELECT le_try_acquire_in(:'s', 'ses/e') AS acquire_under_closed;
SELECT key, holder, term, state, value FROM leaderlock_status WHERE key LIKE 'ses/%' ORDER BY key;
SELECT count(*) AS sessions_left FROM leaderlock_sessions WHERE session = :'s';
SELECT key, tenures, releases, expiries FROM leaderlock_stats WHERE key LIKE 'ses/%' ORDER BY key;
-- The keys are free at once, with their next term.
SELECT le_try_acquire('ses/a', 'worker-2', '1 minute') AS taken_after_close;
SELECT key, holder, term FROM leaderlock WHERE key = 'ses/a';
SELECT le_release('ses/a', 'worker-2');

-- A lapsed session: its keys are lapsed (never live past it), and the
-- first acquisition of one ends the whole session; keep_values keeps the
-- values of the vacated keys; the lock-delay keeps them from everyone.
SELECT le_open_session('worker-3', '300 milliseconds', lock_delay => '1 minute', keep_values => true) AS s3 \gset
SELECT le_try_acquire_in(:'s3', 'ses/x', '{"v": 1}') AS x, le_try_acquire_in(:'s3', 'ses/y') AS y;
SELECT pg_sleep(0.35);
SELECT key, holder, state FROM leaderlock_status WHERE key IN ('ses/x', 'ses/y') ORDER BY key;
SELECT le_leader('ses/x') AS leader, (le_lease('ses/x')).holder AS lease_holder;
SELECT le_assert_leader('ses/x', 'worker-3');
\echo :LAST_ERROR_SQLSTATE
SELECT le_renew_session(:'s3') AS renew_lapsed;
SELECT le_renew('ses/x', 'worker-3') AS renew_key_of_lapsed;
SELECT le_try_acquire_in(:'s3', 'ses/z') AS acquire_under_lapsed;
SELECT le_try_acquire('ses/x', 'worker-4', '1 minute') AS during_lock_delay;
SELECT s.key, s.holder, s.term, s.state, l.value,
       l.delayed_until > le_now() + interval '59 seconds' AS delayed
  FROM leaderlock_status s JOIN leaderlock l ON l.key = s.key
 WHERE s.key IN ('ses/x', 'ses/y') ORDER BY s.key;
SELECT count(*) AS sessions_left FROM leaderlock_sessions WHERE session = :'s3';
SELECT le_try_acquire('ses/y', 'worker-3', '1 minute') AS same_id_delayed_too;
RESET ROLE;
-- The remedy for a key kept by a lock-delay: le_force_release lifts it
-- (true; nothing is announced: no tenure ended); a key without one: false.
SELECT le_force_release('ses/x') AS lifted, le_force_release('ses/x') AS lifted_again;
SELECT le_try_acquire('ses/x', 'worker-4', '1 minute') AS after_lifting;
SELECT le_release('ses/x', 'worker-4');

-- Without a lock-delay and values: le_expire_lapsed ends lapsed sessions.
SET ROLE ll_ses_a;
SELECT le_open_session('worker-5', '300 milliseconds') AS s5 \gset
SELECT le_try_acquire_in(:'s5', 'ses/p', '{"v": 2}') AS p, le_try_acquire_in(:'s5', 'ses/q') AS q;
SELECT pg_sleep(0.35);
SELECT le_expire_lapsed() AS vacated;
SELECT key, holder, term, state, value FROM leaderlock_status WHERE key IN ('ses/p', 'ses/q') ORDER BY key;
SELECT count(*) AS sessions_left FROM leaderlock_sessions WHERE session = :'s5';
SELECT le_try_acquire('ses/p', 'worker-6', '1 minute') AS free_at_once;
SELECT le_release('ses/p', 'worker-6');
RESET ROLE;

-- Bad input: a clear error, nothing written.
CREATE TABLE ses_before AS SELECT count(*) AS n FROM leaderlock_sessions;
SELECT le_open_session(NULL, '1 minute');
\echo :LAST_ERROR_SQLSTATE
SELECT le_open_session('', '1 minute');
\echo :LAST_ERROR_SQLSTATE
SELECT le_open_session('w', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT le_open_session('w', '-1 second');
\echo :LAST_ERROR_SQLSTATE
SELECT le_open_session('w', '1 month');
\echo :LAST_ERROR_SQLSTATE
SELECT le_open_session('w', '1 minute', lock_delay => NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT le_open_session('w', '1 minute', lock_delay => '-1 second');
\echo :LAST_ERROR_SQLSTATE
SELECT le_open_session('w', '1 minute', lock_delay => '1000 days');
\echo :LAST_ERROR_SQLSTATE
SELECT le_open_session('w', '1 minute', lock_delay => '61 seconds');
\echo :LAST_ERROR_SQLSTATE
SELECT le_open_session('w', '1 minute', keep_values => NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT le_open_session('w', '1 minute', session_bound => NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT le_renew_session(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT le_renew_session(gen_random_uuid(), '0 seconds');
\echo :LAST_ERROR_SQLSTATE
SELECT le_close_session(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT le_try_acquire_in(NULL, 'k');
\echo :LAST_ERROR_SQLSTATE
SELECT le_try_acquire_in(gen_random_uuid(), NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT le_try_acquire_in(gen_random_uuid(), '');
\echo :LAST_ERROR_SQLSTATE
SELECT le_try_acquire_in(gen_random_uuid(), 'k', slots => 1001);
\echo :LAST_ERROR_SQLSTATE
SELECT le_try_acquire_in(gen_random_uuid(), 'k', slots => 0);
\echo :LAST_ERROR_SQLSTATE
SELECT le_acquire_in(gen_random_uuid(), 'k', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT le_acquire_in(gen_random_uuid(), 'k', '-1 second');
\echo :LAST_ERROR_SQLSTATE
SELECT le_try_acquire_in(gen_random_uuid(), 'k', to_jsonb(repeat('x', 3000)));
\echo :LAST_ERROR_SQLSTATE
SELECT (SELECT n FROM ses_before) = (SELECT count(*) FROM leaderlock_sessions) AS nothing_written;
-- An unknown session: refused, nothing written.
SELECT le_renew_session(gen_random_uuid()) AS unknown_renew,
       le_close_session(gen_random_uuid()) AS unknown_close,
       le_try_acquire_in(gen_random_uuid(), 'ses/unknown') AS unknown_acquire;
SELECT count(*) AS no_row FROM leaderlock WHERE key = 'ses/unknown';
DROP TABLE ses_before;

-- The session's handle is random; the table is readable by all.
SET ROLE ll_ses_c;
SELECT count(*) >= 0 AS readable FROM leaderlock_sessions;
RESET ROLE;
SELECT le_close_session(:'s2') AS closed_s2;
SELECT count(*) AS sessions_left FROM leaderlock_sessions;
DROP ROLE ll_ses_a, ll_ses_b, ll_ses_c;
