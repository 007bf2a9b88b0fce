-- Contracts 21 and 17: keys of many slots acquired under a session. A
-- tenure held under a session lives in its slot as long as the session
-- does (stored expires_at infinity, the session's row has the expiry);
-- renewing the session writes no slot; its end vacates its slots with its
-- other keys, each announced; its lock-delay keeps the slot from everyone.
-- No worker serves this database (both editions alike).
CREATE ROLE ll_sls_a;
CREATE ROLE ll_sls_c;

SET ROLE ll_sls_a;
SELECT le_open_session('w1', '1 hour') AS s1 \gset
SELECT le_open_session('w2', '1 hour') AS s2 \gset
SELECT le_try_acquire_in(:'s1', 'sls/pool', slots => 2) AS w1,
       le_acquire_in(:'s2', 'sls/pool', '0', '{"n": 2}', slots => 2) AS w2,
       le_try_acquire_in(:'s1', 'sls/one') AS w1_one;
-- Full: a third holder is refused, whoever and however it asks.
SELECT le_open_session('w3', '1 hour') AS s3 \gset
SELECT le_try_acquire_in(:'s3', 'sls/pool', slots => 2) AS w3_refused,
       le_acquire_in(:'s3', 'sls/pool', '10 milliseconds', slots => 2) AS w3_waits_refused,
       le_try_acquire('sls/pool', 'w3', '1 minute', slots => 2) AS w3_plain_refused;
-- Held: the sessions' expiries, stored infinity, one term each from the key.
SELECT key, slot, slots, holder, term, state, session = :'s1' AS under_s1, session = :'s2' AS under_s2,
       expires_at = (SELECT expires_at FROM leaderlock_sessions x WHERE x.session = st.session) AS sessions_expiry,
       value
  FROM leaderlock_status st WHERE key = 'sls/pool' ORDER BY slot;
SELECT slot, holder, expires_at, session IS NOT NULL AS under_session FROM leaderlock_slots
 WHERE key = 'sls/pool' ORDER BY slot;
SELECT holder, term, value, remaining > interval '59 minutes' AS live FROM le_holders('sls/pool') ORDER BY term;
SELECT key, tenures, releases, expiries, held FROM leaderlock_stats WHERE key = 'sls/pool';

-- Renewal: the session's row; no slot written. le_renew of the tenure
-- renews its session; le_renew_all counts it.
CREATE TEMP TABLE sls_before AS SELECT slot, xmin::text AS x FROM leaderlock_slots WHERE key = 'sls/pool';
SELECT le_renew_session(:'s1') AS renewed;
SELECT le_renew('sls/pool', 'w1') AS renew_tenure_renews_session,
       le_renew('sls/pool', 'w1', term => 1) AS of_its_term,
       le_renew('sls/pool', 'w1', term => 2) AS other_term,
       le_renew('sls/pool', 'w3') AS not_a_holder;
SELECT le_renew_all('w1') AS renew_all_counts_both_keys;
SELECT count(*) AS slots_unwritten FROM leaderlock_slots s JOIN sls_before b USING (slot)
 WHERE s.key = 'sls/pool' AND s.xmin::text = b.x;
DROP TABLE sls_before;

-- Fencing, values, the same id.
SELECT le_assert_leader('sls/pool', 'w1') AS w1_term, le_assert_leader('sls/pool', 'w2', 2) AS w2_term;
SELECT le_assert_leader('sls/pool', 'w3');
\echo :LAST_ERROR_SQLSTATE
SELECT le_proclaim('sls/pool', 'w1', '{"n": 1}') AS proclaimed;
SELECT le_try_acquire_in(:'s1', 'sls/pool', slots => 2) AS again,
       le_try_acquire_in(:'s1', 'sls/pool', '{"n": 11}', slots => 2) AS again_with_value;
SELECT holder, term, value FROM le_holders('sls/pool') ORDER BY term;
-- Moving: the same id takes its tenure out of sessions, and back in; same slot, same term.
SELECT le_try_acquire('sls/pool', 'w1', '1 minute', slots => 2) AS moved_out;
SELECT slot, term, session IS NULL AS plain, expires_at - renewed_at AS span FROM leaderlock_slots
 WHERE key = 'sls/pool' AND holder = 'w1';
SELECT le_try_acquire_in(:'s1', 'sls/pool', slots => 2) AS moved_in;
SELECT slot, term, session = :'s1' AS under_s1, expires_at FROM leaderlock_slots
 WHERE key = 'sls/pool' AND holder = 'w1';
-- Another number of slots while held: 22023.
SELECT le_try_acquire_in(:'s3', 'sls/pool', slots => 3);
\echo :LAST_ERROR_SQLSTATE
SELECT le_try_acquire_in(:'s3', 'sls/pool');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;

-- Ownership (contract 13): another role's session stays unknown to it.
SET ROLE ll_sls_c;
SELECT le_try_acquire_in(:'s1', 'sls/pool2', slots => 2) AS other_role_acquires;
SELECT le_release('sls/pool', 'w1') AS other_role_releases;
SELECT le_renew('sls/pool', 'w1') AS other_role_renews;
RESET ROLE;

-- Releasing one tenure leaves the session's other keys; the slot is free
-- at once, with the next term.
SET ROLE ll_sls_a;
SELECT le_release('sls/pool', 'w2') AS w2_releases;
SELECT le_try_acquire_in(:'s3', 'sls/pool', slots => 2) AS w3_takes_it;
SELECT slot, holder, term, state FROM leaderlock_status WHERE key = 'sls/pool' ORDER BY slot;
-- Closing: every key of the session released at once (its slot and its
-- key of one slot), no lock-delay; the slot is free at once.
SELECT le_close_session(:'s1') AS closed;
SELECT key, slot, holder, term, state FROM leaderlock_status WHERE key LIKE 'sls/%' ORDER BY key, slot;
SELECT key, tenures, releases, expiries, held FROM leaderlock_stats WHERE key LIKE 'sls/%' ORDER BY key;
SELECT le_try_acquire('sls/pool', 'w4', '1 minute', slots => 2) AS w4_takes_it;
SELECT holder, term FROM le_holders('sls/pool') ORDER BY term;
-- le_release_all releases a session's slot; le_force_release vacates one.
SELECT le_release_all('w3') AS w3_releases_all;
SELECT le_try_acquire_in(:'s3', 'sls/pool', slots => 2) AS w3_again;
RESET ROLE;
SELECT le_force_release('sls/pool') AS forced;
SELECT slot, holder, state FROM leaderlock_status WHERE key = 'sls/pool' ORDER BY slot;
SET ROLE ll_sls_a;
SELECT le_close_session(:'s2') AS closed_s2, le_close_session(:'s3') AS closed_s3;

-- A lapsed session: its tenure is lapsed (never live past it); the next
-- acquisition of the key ends the whole session; keep_values keeps the
-- slot's value; the lock-delay keeps the slot from everyone, the same id
-- too, and the key counts it as taken until the delay ends.
SELECT le_open_session('w5', '300 milliseconds', lock_delay => '1 minute', keep_values => true) AS s5 \gset
SELECT le_try_acquire_in(:'s5', 'sls/lapse', '{"v": 5}', slots => 2) AS w5,
       le_try_acquire('sls/lapse', 'w6', '1 hour', slots => 2) AS w6;
SELECT pg_sleep(0.35);
SELECT slot, holder, state FROM leaderlock_status WHERE key = 'sls/lapse' ORDER BY slot;
SELECT holder FROM le_holders('sls/lapse') ORDER BY holder;
SELECT le_assert_leader('sls/lapse', 'w5');
\echo :LAST_ERROR_SQLSTATE
SELECT le_renew('sls/lapse', 'w5') AS renew_of_lapsed;
SELECT le_try_acquire('sls/lapse', 'w7', '1 minute', slots => 2) AS w7_during_lock_delay;
SELECT slot, st.holder, st.state, st.value, s.delayed_until > le_now() + interval '59 seconds' AS delayed
  FROM leaderlock_status st JOIN leaderlock_slots s USING (key, slot)
 WHERE key = 'sls/lapse' ORDER BY slot;
SELECT count(*) AS sessions_left FROM leaderlock_sessions WHERE session = :'s5';
SELECT key, tenures, releases, expiries FROM leaderlock_stats WHERE key = 'sls/lapse';
SELECT le_try_acquire('sls/lapse', 'w5', '1 minute', slots => 2) AS same_id_delayed_too;
SELECT le_try_acquire('sls/lapse', 'w7', '1 minute', slots => 3);
\echo :LAST_ERROR_SQLSTATE
SELECT le_release('sls/lapse', 'w6') AS w6_releases;
SELECT le_try_acquire('sls/lapse', 'w7', '1 minute', slots => 2) AS w7_takes_the_free_slot;
SELECT slot, holder FROM leaderlock_status WHERE key = 'sls/lapse' ORDER BY slot;

-- Without a lock-delay: le_expire_lapsed ends the session and its slot.
SELECT le_open_session('w8', '300 milliseconds') AS s8 \gset
SELECT le_try_acquire_in(:'s8', 'sls/exp', '{"v": 8}', slots => 3) AS w8;
SELECT pg_sleep(0.35);
SELECT le_expire_lapsed() AS vacated;
SELECT slot, holder, state, value FROM leaderlock_status WHERE key = 'sls/exp' ORDER BY slot;
SELECT count(*) AS sessions_left FROM leaderlock_sessions WHERE session = :'s8';
SELECT le_try_acquire('sls/exp', 'w9', '1 minute', slots => 3) AS free_at_once;
RESET ROLE;
-- le_force_release vacates the key's tenures and lifts a slot's lock-delay.
SELECT le_force_release('sls/lapse') AS forced;
SELECT count(*) FILTER (WHERE delayed_until > le_now()) AS delayed,
       count(*) FILTER (WHERE holder IS NOT NULL) AS held
  FROM leaderlock_slots WHERE key = 'sls/lapse';

-- Bad slots under a session: the SQLSTATE, nothing written.
SELECT le_try_acquire_in(:'s3', 'sls/bad', slots => 0);
\echo :LAST_ERROR_SQLSTATE
SELECT le_try_acquire_in(:'s3', 'sls/bad', slots => 1001);
\echo :LAST_ERROR_SQLSTATE
SELECT le_acquire_in(:'s3', 'sls/bad', '0', slots => NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS no_row FROM leaderlock WHERE key = 'sls/bad';

SELECT le_force_release(key) FROM leaderlock WHERE key LIKE 'sls/%' ORDER BY key;
DROP ROLE ll_sls_a, ll_sls_c;
