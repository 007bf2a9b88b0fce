-- Contract 23: the history of transitions. Every transition is recorded by
-- the transaction that makes it (a rolled-back one leaves nothing; a
-- renewal is no transition), numbered once committed, in order, read after
-- a position, for a key or a key prefix; pruned by its retention, after
-- which reading from a pruned position is an error (LE002). No worker
-- serves this database: le_expire_lapsed numbers and prunes, as the worker
-- does where one serves (tests/client/test_history.py).
CREATE ROLE ll_hist_a;
CREATE ROLE ll_hist_b;
GRANT ll_hist_b TO ll_hist_a;
-- Leases of earlier files would lapse in between: gone first.
SELECT count(le_force_release(key)) >= 0 AS cleared FROM leaderlock WHERE holder IS NOT NULL;
SELECT count(le_force_release(key)) >= 0 AS cleared FROM leaderlock_slots WHERE holder IS NOT NULL;
SELECT le_expire_lapsed() >= 0 AS numbered_before;
SELECT le_history_position() AS p0 \gset

-- What a reader sees: positions from p0 on, without the instants.
CREATE VIEW pg_temp.seen AS
SELECT "position" - :p0 AS pos, event, key, holder, term, role,
       payload - 'at' - 'expires_at' AS payload
  FROM le_history(:p0);

SET ROLE ll_hist_a;
SELECT le_try_acquire('h-one', 'replica-1', '1 hour') AS acquired;
SELECT le_renew('h-one', 'replica-1') AS renewed;                 -- no transition
SELECT le_proclaim('h-one', 'replica-1', '{"url": "http://a"}') AS proclaimed;
BEGIN;
SELECT le_release('h-one', 'replica-1') AS released_then_rolled_back;
ROLLBACK;
SELECT le_release('h-one', 'replica-1') AS released;
SELECT le_try_acquire('h-one', 'replica-2', '1 hour') AS acquired_again;
SET ROLE ll_hist_b;
SELECT le_try_acquire('h-two/a', 'replica-1', '1 second') AS short;
SELECT le_try_acquire('h-two/b', 'replica-1', '1 hour', slots => 2) AS slot;
RESET ROLE;
SELECT le_force_release('h-one') AS forced;
SELECT pg_sleep(1.1);
-- Nothing is numbered before the numbering runs (here: le_expire_lapsed).
SELECT count(*) AS numbered_yet FROM le_history(:p0);
SELECT le_expire_lapsed() AS vacated;
SELECT * FROM pg_temp.seen;
SELECT count(*) = count(DISTINCT "position") AS unique_positions,
       bool_and(payload->>'event' = event AND payload->>'key' = key) AS columns_match_payload
  FROM le_history(:p0);

-- After a position; for one key; for a prefix; at most max_rows.
SELECT pos, event, key FROM pg_temp.seen WHERE pos > 3;
SELECT "position" - :p0 AS pos, event FROM le_history(:p0, for_key => 'h-one');
SELECT "position" - :p0 AS pos, key FROM le_history(:p0, key_prefix => 'h-two/');
SELECT "position" - :p0 AS pos FROM le_history(:p0, max_rows => 2);
SELECT le_history_position() - :p0 AS last;
SELECT count(*) AS after_last FROM le_history(le_history_position());

-- Scheduled runs are transitions too (contract 22), under the job's name.
SELECT date_trunc('second', le_now()) - interval '10 seconds' AS due \gset
SELECT le_claim_run('h-job', :'due', 'runner-1', '1 hour') AS run_term;
SELECT le_finish_run('h-job', :'due', 'runner-1', 1, true) AS finished;
SELECT le_expire_lapsed() >= 0 AS numbered;
SELECT event, key, holder, term, payload->>'outcome' AS outcome
  FROM le_history(:p0, for_key => 'h-job');

-- Bad input: a clear error, SQLSTATE 22023.
\set VERBOSITY sqlstate
SELECT * FROM le_history(-1);
SELECT * FROM le_history(NULL);
SELECT * FROM le_history(0, max_rows => 0);
SELECT * FROM le_history(0, max_rows => 100001);
SELECT * FROM le_history(0, for_key => 'a', key_prefix => 'a');
\set VERBOSITY default

-- Readable by every role, written by none.
SET ROLE ll_hist_b;
SELECT count(*) > 0 AS readable FROM leaderlock_history;
SELECT count(*) >= 0 AS readable FROM leaderlock_history_pending;
\set VERBOSITY sqlstate
DELETE FROM leaderlock_history;
UPDATE leaderlock_history_head SET pruned_through = 0;
INSERT INTO leaderlock_history (at, event, payload) VALUES (now(), 'acquired', '{}');
INSERT INTO leaderlock_history_pending (at, event, payload) VALUES (now(), 'acquired', '{}');
DELETE FROM leaderlock_history_pending;
\set VERBOSITY default
RESET ROLE;

-- Retention by count: the oldest go, as a prefix of positions; reading
-- from before the kept ones is LE002, from the last pruned one is fine.
-- The retention is the administrator's: set for the database (the
-- compiled edition reads it at connect, the portable edition at each call
-- and never a session's SET: portable/README.md, difference 5), then a new
-- connection.
DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET leaderlock.history_max_rows = 3', pg_catalog.current_database()); END $$;
\c
SELECT le_expire_lapsed() >= 0 AS pruned;
SELECT count(*) AS kept FROM leaderlock_history;
SELECT pruned_through - :p0 AS pruned_through FROM leaderlock_history_head;
SELECT le_history_position() - :p0 AS last_kept;
SELECT "position" - :p0 AS pos, event, key FROM le_history((SELECT pruned_through FROM leaderlock_history_head));
\set VERBOSITY sqlstate
SELECT * FROM le_history(:p0);
\set VERBOSITY default
DO $$
DECLARE m text; d text; h text;
BEGIN
    PERFORM * FROM le_history(0);
EXCEPTION WHEN SQLSTATE 'LE002' THEN
    GET STACKED DIAGNOSTICS m = MESSAGE_TEXT, d = PG_EXCEPTION_DETAIL, h = PG_EXCEPTION_HINT;
    RAISE NOTICE E'%\n%\n%', regexp_replace(m, '[0-9]+', 'N', 'g'), d, h;
END
$$;
-- Positions go on after the pruned ones.
SELECT le_release('h-one', 'nobody') AS refused_is_no_transition;
SELECT le_try_acquire('h-three', 'replica-1', '1 hour') AS acquired;
SELECT le_expire_lapsed() >= 0 AS numbered;
SELECT "position" - :p0 AS pos, event, key FROM le_history(le_history_position() - 1);
-- Retention by age: everything older than a second goes.
SELECT pg_sleep(1.1);
DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET leaderlock.history_retention = 1', pg_catalog.current_database()); END $$;
DO $$ BEGIN EXECUTE format('ALTER DATABASE %I RESET leaderlock.history_max_rows', pg_catalog.current_database()); END $$;
\c
SELECT le_expire_lapsed() >= 0 AS pruned;
-- (a lease of an earlier file may lapse meanwhile: only the old are checked)
SELECT count(*) FILTER (WHERE at < le_now() - interval '1 second') AS older_kept
  FROM leaderlock_history;
SELECT pruned_through - :p0 >= 11 AS pruned_past_all_above FROM leaderlock_history_head;
SELECT count(*) AS readable_of_above
  FROM le_history((SELECT pruned_through FROM leaderlock_history_head)) WHERE key LIKE 'h-%';
DO $$ BEGIN EXECUTE format('ALTER DATABASE %I RESET leaderlock.history_retention', pg_catalog.current_database()); END $$;
\c

-- The pruning runs at every numbering: it reads only the rows that go, not
-- the oldest ten thousand each time (20,000 kept rows, none due: a few
-- rows fetched; the numbering itself reads the last position only).
INSERT INTO leaderlock_history ("position", at, event, payload)
SELECT le_history_position() + g, le_now(), 'acquired', '{}' FROM generate_series(1, 20000) g;
UPDATE leaderlock_history_head SET kept = kept + 20000;
BEGIN;
SELECT le_expire_lapsed() >= 0 AS numbered_and_pruned;
SELECT idx_tup_fetch < 100 AS read_few FROM pg_stat_xact_user_tables WHERE relname = 'leaderlock_history';
COMMIT;
SELECT count(*) AS kept FROM leaderlock_history WHERE event = 'acquired' AND key IS NULL;
DELETE FROM leaderlock_history WHERE event = 'acquired' AND key IS NULL;
UPDATE leaderlock_history_head SET kept = greatest(kept - 20000, 0);

SELECT le_release_all('replica-1') >= 0 AS cleaned;
SELECT le_release_all('replica-2') >= 0 AS cleaned;
DROP ROLE ll_hist_a;
DROP ROLE ll_hist_b;
