-- Contract 19: le_capabilities() and le_expire_lapsed(), which both
-- editions have. The portable edition runs this file too; its expected
-- output differs in the offers only (tests/portable/expected). No worker
-- serves this database (leaderlock.databases), so le_expire_lapsed does
-- the work itself in either edition.

-- The same keys in both editions; what this server offers.
SELECT array_agg(k ORDER BY k) AS keys FROM jsonb_object_keys(le_capabilities()) k;
SELECT le_capabilities() - 'max_ttl_s' - 'max_wait_s' - 'max_slots' AS offers;
SELECT le_capabilities()->'max_slots' AS max_slots;
SELECT le_capabilities()->'max_ttl_s' AS max_ttl_s, le_capabilities()->'max_wait_s' AS max_wait_s;
SELECT (le_capabilities()->>'worker')::boolean = le_worker_running() AS worker_key_is_le_worker_running;
-- Any role may ask.
CREATE ROLE leaderlock_caps_reader;
SET ROLE leaderlock_caps_reader;
SELECT le_capabilities()->>'expire_lapsed' AS expire_lapsed_offered;
RESET ROLE;

-- le_expire_lapsed vacates every lapsed lease, keeps its term, counts it
-- and says how many; live and vacant leases are left alone. (First what
-- earlier files left lapsed, which differs between the editions.)
SELECT le_expire_lapsed() >= 0 AS swept;
SELECT le_try_acquire('cap-lapsed-1', 'a', '10 milliseconds'),
       le_try_acquire('cap-lapsed-2', 'b', '10 milliseconds'),
       le_try_acquire('cap-live', 'c', '1 hour'),
       le_try_acquire('cap-vacant', 'd', '1 hour') AND le_release('cap-vacant', 'd');
SELECT pg_sleep(0.05);
SELECT le_expire_lapsed() AS vacated;
SELECT le_expire_lapsed() AS vacated_again;
SELECT key, holder, term, state FROM leaderlock_status WHERE key LIKE 'cap-%' ORDER BY key;
SELECT key, tenures, releases, expiries FROM leaderlock_stats WHERE key LIKE 'cap-%' ORDER BY key;
-- The next tenure goes on from the kept term.
SELECT le_try_acquire('cap-lapsed-1', 'e', '1 hour');
SELECT term FROM leaderlock WHERE key = 'cap-lapsed-1';

-- Any role may call it: it does what a worker would.
SELECT le_try_acquire('cap-lapsed-3', 'a', '10 milliseconds');
SELECT pg_sleep(0.05);
SET ROLE leaderlock_caps_reader;
SELECT le_expire_lapsed() AS vacated_by_any_role;
RESET ROLE;
SELECT holder, expiries FROM leaderlock WHERE key = 'cap-lapsed-3';

-- It works in any transaction and beside anything else in its statement
-- (tests/isolation/specs/expire_lapsed.spec shows what it keeps locked).
SELECT le_try_acquire('cap-any', 'a', '10 milliseconds');
SELECT pg_sleep(0.05);
BEGIN;
SELECT le_expire_lapsed() AS vacated_in_a_transaction_block, pg_sleep(0);
COMMIT;
SELECT holder, expiries FROM leaderlock WHERE key = 'cap-any';
SELECT * FROM public.le_expire_lapsed() AS none_left;

DROP ROLE leaderlock_caps_reader;
