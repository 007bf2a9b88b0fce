-- Contract 24's backfill: a schedule may let replicas run up to `backfill`
-- of its latest missed instants late (le_backfill_due lists them, oldest
-- first), each claimed and fenced as any run, and each once: a missed run
-- taken up that is missed again is not offered again. Older misses, a
-- paused schedule and backfill 0 offer nothing. Misses recorded here by
-- le_expire_lapsed (no worker serves the regression database).
CREATE ROLE ll_backfill;
SET TIME ZONE 'UTC';

-- Bad input: a clear error with its SQLSTATE, nothing changed.
\set VERBOSITY sqlstate
SELECT le_schedule('bf', every => '1 second', backfill => -1);
SELECT le_schedule('bf', every => '1 second', backfill => 101);
SELECT le_schedule('bf', every => '1 second', backfill => NULL);
SELECT le_backfill_due(NULL);
\set VERBOSITY default
SELECT count(*) AS nothing_written FROM leaderlock_schedules WHERE job = 'bf';

SET ROLE ll_backfill;
SELECT le_schedule('bf', every => '1 second', misfire_grace => '0 seconds', backfill => 2) IS NOT NULL AS made;
SELECT count(*) AS nothing_missed_yet FROM le_backfill_due('bf');
SELECT pg_sleep(3.3);
SELECT le_expire_lapsed() >= 0 AS settled;
RESET ROLE;
SELECT count(*) >= 3 AS three_missed FROM leaderlock_runs WHERE job = 'bf' AND outcome = 'missed';
-- the two latest, oldest first
SELECT array_agg(due ORDER BY due) = (SELECT array_agg(due ORDER BY due) FROM
         (SELECT due FROM leaderlock_runs WHERE job = 'bf' ORDER BY due DESC LIMIT 2) l)
       AS the_two_latest_oldest_first
  FROM le_backfill_due('bf') AS b(due);
SELECT min(due) AS oldest, max(due) AS latest FROM le_backfill_due('bf') AS b(due) \gset
SELECT max(due) AS older FROM leaderlock_runs WHERE job = 'bf' AND due < :'oldest' \gset

SET ROLE ll_backfill;
SELECT le_claim_run('bf', :'older', 'r1', '1 minute') AS an_older_miss_is_not_run;
SELECT le_claim_run('bf', :'oldest', 'r1', '1 minute') IS NOT NULL AS run_late;
SELECT le_claim_run('bf', :'oldest', 'r2', '1 minute') AS not_while_claimed;
SELECT count(*) AS one_left FROM le_backfill_due('bf');
SELECT le_finish_run('bf', :'oldest', 'r1', (SELECT term FROM leaderlock_runs WHERE job = 'bf' AND due = :'oldest'), true) AS finished;
SELECT le_claim_run('bf', :'oldest', 'r2', '1 minute') AS finished_never_again;
RESET ROLE;
SELECT outcome, holder, backfilled_at IS NOT NULL AS taken_up, attempts
  FROM leaderlock_runs WHERE job = 'bf' AND due = :'oldest';
SELECT r.term = j.term AS fenced_in_the_jobs_latest_term
  FROM leaderlock_runs r JOIN leaderlock_jobs j USING (job) WHERE r.job = 'bf' AND r.due = :'oldest';

-- Backfill 0 (a change of a rule alone: the same instants): nothing
-- offered; 2 again: the one left is.
SET ROLE ll_backfill;
SELECT le_schedule('bf', every => '1 second', misfire_grace => '0 seconds', backfill => 0) IS NOT NULL AS changed;
SELECT count(*) AS none_with_backfill_0 FROM le_backfill_due('bf');
SELECT le_claim_run('bf', :'latest', 'r3', '1 minute') AS not_with_backfill_0;
SELECT le_schedule('bf', every => '1 second', misfire_grace => '0 seconds', backfill => 2) IS NOT NULL AS changed;
SELECT array_agg(due) = ARRAY[:'latest'::timestamptz] AS the_latest_again FROM le_backfill_due('bf') AS b(due);
RESET ROLE;

-- Paused: nothing offered, nothing run late; resumed, the misses before
-- it are not offered (a schedule is judged from when it resumes).
SET ROLE ll_backfill;
SELECT le_pause_schedule('bf') AS paused;
SELECT count(*) AS none_while_paused FROM le_backfill_due('bf');
SELECT le_claim_run('bf', :'latest', 'r3', '1 minute') AS not_while_paused;
SELECT le_resume_schedule('bf') AS resumed;
SELECT count(*) AS none_before_the_resume FROM le_backfill_due('bf');
SELECT le_claim_run('bf', :'latest', 'r3', '1 minute') AS not_before_the_resume;
SELECT le_unschedule('bf');
RESET ROLE;

RESET TIME ZONE;
DELETE FROM leaderlock_runs WHERE job = 'bf';
DELETE FROM leaderlock_jobs WHERE job = 'bf';
DROP ROLE ll_backfill;
