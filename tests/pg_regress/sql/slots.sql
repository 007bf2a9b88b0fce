-- Contract 17: keys of many slots (semaphores).
-- Three holders at once; a fourth is refused; terms from one sequence.
SELECT le_try_acquire('crawl', 'a', '1 hour', slots => 3) AS a,
       le_try_acquire('crawl', 'cb', '1 hour', slots => 3) AS b,
       le_try_acquire('crawl', 'c', '1 hour', slots => 3) AS c;
SELECT le_try_acquire('crawl', 'd', '1 hour', slots => 3) AS d_refused;
SELECT le_acquire('crawl', 'd', '1 hour', '10 milliseconds', slots => 3) AS d_waits_refused;
SELECT holder, term, remaining > interval '59 minutes' AS live FROM le_holders('crawl') ORDER BY term;
SELECT key, holder, term, state, slot, slots FROM leaderlock_status WHERE key = 'crawl' ORDER BY slot;
-- The key's row holds no holder, only the last term and the slots.
SELECT key, holder, term, slots FROM leaderlock WHERE key = 'crawl';
SELECT (le_lease('crawl')).holder IS NULL AS no_single_holder, (le_lease('crawl')).term AS last_term,
       le_leader('crawl') AS leader;

-- A holder acts on its own tenure only.
SELECT le_try_acquire('crawl', 'cb', '2 hours', slots => 3) AS b_extends_same_term;
SELECT le_renew('crawl', 'c') AS c_renews, le_renew('crawl', 'd') AS d_cannot;
SELECT le_renew('crawl', 'c', term => 2) AS c_not_in_term_2, le_renew('crawl', 'c', term => 3) AS c_in_term_3;
SELECT le_assert_leader('crawl', 'cb') AS b_term, le_assert_leader('crawl', 'c', 3) AS c_term;
SELECT le_assert_leader('crawl', 'd');
\echo :LAST_ERROR_SQLSTATE
SELECT le_assert_leader('crawl', 'a', 2);
\echo :LAST_ERROR_SQLSTATE
SELECT le_proclaim('crawl', 'a', '{"shard": 1}') AS a_proclaims;
SELECT holder, term, value FROM le_holders('crawl') ORDER BY term;
SELECT le_release('crawl', 'a', term => 2) AS a_not_in_term_2;
SELECT le_release('crawl', 'a', term => 1) AS a_releases, le_release('crawl', 'a') AS again;
-- The freed slot goes to the next candidate, with the next term.
SELECT le_try_acquire('crawl', 'd', '1 hour', slots => 3) AS d_takes_it;
SELECT holder, term FROM le_holders('crawl') ORDER BY term;
SELECT key, holder, term, state, slot FROM leaderlock_status WHERE key = 'crawl' ORDER BY slot;

-- Another number of slots while the key has live holders: 22023, and
-- nothing changes.
CREATE TEMP TABLE slots_before AS SELECT * FROM leaderlock_slots WHERE key = 'crawl';
SELECT le_try_acquire('crawl', 'e', '1 hour', slots => 4);
\echo :LAST_ERROR_SQLSTATE
SELECT le_try_acquire('crawl', 'e', '1 hour');
\echo :LAST_ERROR_SQLSTATE
SELECT le_try_acquire('crawl', 'cb', '1 hour', slots => 2);
\echo :LAST_ERROR_SQLSTATE
SELECT le_try_acquire('one', 'x', '1 hour') AS one_slot_key;
SELECT le_try_acquire('one', 'y', '1 hour', slots => 2);
\echo :LAST_ERROR_SQLSTATE
SELECT (SELECT array_agg(s::text ORDER BY slot) FROM leaderlock_slots s WHERE key = 'crawl')
     = (SELECT array_agg(b::text ORDER BY slot) FROM slots_before b) AS unchanged;
SELECT slots FROM leaderlock WHERE key IN ('crawl', 'one') ORDER BY key;

-- Bad slots: the SQLSTATE, and nothing changes.
SELECT le_try_acquire('bad', 'a', '1 hour', slots => NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT le_try_acquire('bad', 'a', '1 hour', slots => 0);
\echo :LAST_ERROR_SQLSTATE
SELECT le_acquire('bad', 'a', '1 hour', '0', slots => 1001);
\echo :LAST_ERROR_SQLSTATE
SELECT le_try_acquire('bad', 'a', '1 hour', session_bound => true, slots => 2);
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS no_bad_key FROM leaderlock WHERE key = 'bad';

-- A lapsed tenure (backdated by the test's superuser) is a free slot: its
-- holder is out, the others stay.
UPDATE leaderlock_slots SET expires_at = le_now() - interval '1 second'
 WHERE key = 'crawl' AND holder = 'c';
SELECT le_renew('crawl', 'c') AS lapsed_cannot_renew;
SELECT holder, term FROM le_holders('crawl') ORDER BY term;
SELECT le_try_acquire('crawl', 'e', '1 hour', slots => 3) AS e_takes_the_lapsed_slot;
SELECT holder, term FROM le_holders('crawl') ORDER BY term;
SELECT key, tenures, releases, expiries, held FROM leaderlock_stats WHERE key = 'crawl';

-- Many keys, one holder (contract 16) counts tenures of many-slot keys.
SELECT le_try_acquire('crawl-2', 'cb', '1 hour', slots => 2) AS b_second_key;
SELECT le_renew_all('cb') AS b_renews_all, le_release_all('cb') AS b_releases_all;
SELECT holder FROM le_holders('crawl') ORDER BY term;

-- le_force_release vacates every tenure of the key.
SELECT le_force_release('crawl') AS forced;
SELECT count(*) AS holders_left FROM le_holders('crawl');
-- With no live holder the key takes another number of slots: one, and
-- it is a key like any other again.
SELECT le_try_acquire('crawl', 'z', '1 hour') AS z_alone;
SELECT le_try_acquire('crawl', 'y', '1 hour') AS y_refused;
SELECT key, holder, term, state, slot, slots FROM leaderlock_status WHERE key = 'crawl';
SELECT le_leader('crawl') AS leader, holder, term FROM le_holders('crawl');
SELECT le_release('crawl', 'z') AS z_releases;
-- And back to two.
SELECT le_try_acquire('crawl', 'p', '1 hour', slots => 2) AS p, le_try_acquire('crawl', 'q', '1 hour', slots => 2) AS q;
SELECT holder, term FROM le_holders('crawl') ORDER BY term;

-- An id holds one tenure of a key: another role with the same id gets no
-- second one, and the holder's tenure is untouched (contract 13).
CREATE ROLE ll_slots_a;
CREATE ROLE ll_slots_b;
SET ROLE ll_slots_a;
SELECT le_try_acquire('shared-id', 'w', '1 hour', slots => 3) AS a_takes;
RESET ROLE;
SET ROLE ll_slots_b;
SELECT le_try_acquire('shared-id', 'w', '1 hour', slots => 3) AS b_same_id_refused;
SELECT le_renew('shared-id', 'w') AS b_cannot_renew;
RESET ROLE;
SET ROLE ll_slots_a;
SELECT le_assert_leader('shared-id', 'w') AS a_term, le_renew('shared-id', 'w') AS a_renews,
       le_try_acquire('shared-id', 'w', '1 hour', slots => 3) AS a_extends;
RESET ROLE;
SELECT holder, term, owner::regrole FROM leaderlock_status WHERE key = 'shared-id' ORDER BY slot;

-- Changing the number of slots ends the key's lapsed tenures beyond it
-- first (as expiries): none is left to come back.
SELECT le_try_acquire('shrink', 'p', '1 hour', slots => 3) AS p, le_try_acquire('shrink', 'q', '1 hour', slots => 3) AS q,
       le_try_acquire('shrink', 'r', '1 hour', slots => 3) AS r;
UPDATE leaderlock_slots SET expires_at = le_now() - interval '1 second' WHERE key = 'shrink';
SELECT le_try_acquire('shrink', 's', '1 hour', slots => 2) AS s_two_slots;
SELECT slot, holder, term, state FROM leaderlock_status WHERE key = 'shrink' ORDER BY slot;
SELECT le_try_acquire('shrink', 't', '1 hour') AS t_but_s_holds;
UPDATE leaderlock_slots SET expires_at = le_now() - interval '1 second' WHERE key = 'shrink';
SELECT le_try_acquire('shrink', 't', '1 hour') AS t_one_slot;
SELECT count(*) AS tenures_with_a_holder FROM leaderlock_slots WHERE key = 'shrink' AND holder IS NOT NULL;
SELECT key, tenures, releases, expiries, held FROM leaderlock_stats WHERE key = 'shrink';

DELETE FROM leaderlock_slots;
DELETE FROM leaderlock WHERE key IN ('crawl', 'crawl-2', 'one', 'shared-id', 'shrink');
DROP ROLE ll_slots_a;
DROP ROLE ll_slots_b;
