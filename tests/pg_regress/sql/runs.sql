-- Contract 22: scheduled runs. A run is (job, due instant on the lease
-- clock); a claim returns a fencing term from the job's one sequence, at
-- most one live claim per run, a finished run is never claimed again, a
-- lapsed unfinished claim may be claimed again with a higher term, a run
-- past its misfire grace is refused and recorded missed once.
CREATE ROLE ll_runs_a;
CREATE ROLE ll_runs_b;
SELECT date_trunc('second', le_now()) - interval '30 seconds' AS due \gset

SET ROLE ll_runs_a;
SELECT le_claim_run('nightly', :'due', 'replica-1', '1 hour') AS first_claim;
SELECT le_claim_run('nightly', :'due', 'replica-2', '1 hour') AS rival_refused;
SELECT le_claim_run('nightly', :'due', 'replica-1', '1 hour') AS same_id_refused;
RESET ROLE;
SELECT job, due = :'due' AS due_kept, holder, term, attempts, finished_at, outcome,
       owner::regrole, expires_at - claimed_at AS span
  FROM leaderlock_runs WHERE job = 'nightly';

-- Renewals: the holder's own claim only, of its term when named.
SET ROLE ll_runs_a;
SELECT le_renew_run('nightly', :'due', 'replica-1') AS holder_renews;
SELECT le_renew_run('nightly', :'due', 'replica-1', '2 hours', 1) AS with_term;
SELECT le_renew_run('nightly', :'due', 'replica-1', NULL, 2) AS other_term;
SELECT le_renew_run('nightly', :'due', 'replica-2') AS rival_renews;
RESET ROLE;
SELECT ttl FROM leaderlock_runs WHERE job = 'nightly';
-- A role that is not a member of the claim's owner acts as a non-holder.
SET ROLE ll_runs_b;
SELECT le_renew_run('nightly', :'due', 'replica-1') AS other_role_renews;
SELECT le_finish_run('nightly', :'due', 'replica-1', 1, true) AS other_role_finishes;
RESET ROLE;

-- Finishing: by the claim's id and term only, once.
SET ROLE ll_runs_a;
SELECT le_finish_run('nightly', :'due', 'replica-2', 1, true) AS rival_finishes;
SELECT le_finish_run('nightly', :'due', 'replica-1', 2, true) AS wrong_term;
SELECT le_finish_run('nightly', :'due', 'replica-1', 1, true, 'sent 42 mails') AS finishes;
SELECT le_finish_run('nightly', :'due', 'replica-1', 1, false) AS twice;
SELECT le_claim_run('nightly', :'due', 'replica-2', '1 hour') AS finished_never_again;
SELECT le_renew_run('nightly', :'due', 'replica-1') AS renew_after_finish;
RESET ROLE;
SELECT holder, term, attempts, outcome, detail, finished_at IS NOT NULL AS finished,
       expires_at <= finished_at AS claim_ended
  FROM leaderlock_runs WHERE job = 'nightly';

-- The next run of the job: a higher term from the job's sequence.
SET ROLE ll_runs_a;
SELECT le_claim_run('nightly', (:'due'::timestamptz + interval '10 seconds'), 'replica-2', '1 hour') AS next_run;
RESET ROLE;

-- A runner lost mid-run: its claim lapses (backdated by the test's
-- superuser); another claims the run again with a higher term, and the lost
-- runner can neither renew nor finish it.
UPDATE leaderlock_runs SET expires_at = le_now() - interval '1 second'
 WHERE job = 'nightly' AND due = :'due'::timestamptz + interval '10 seconds';
SET ROLE ll_runs_a;
SELECT le_claim_run('nightly', (:'due'::timestamptz + interval '10 seconds'), 'replica-3', '1 hour') AS again;
SELECT le_renew_run('nightly', (:'due'::timestamptz + interval '10 seconds'), 'replica-2') AS lost_renews;
SELECT le_finish_run('nightly', (:'due'::timestamptz + interval '10 seconds'), 'replica-2', 2, true) AS lost_finishes;
SELECT le_finish_run('nightly', (:'due'::timestamptz + interval '10 seconds'), 'replica-3', 3, false, 'exit 1') AS finishes;
RESET ROLE;
SELECT due - :'due'::timestamptz AS after, holder, term, attempts, outcome, detail
  FROM leaderlock_runs WHERE job = 'nightly' ORDER BY due;
SELECT job, term FROM leaderlock_jobs WHERE job = 'nightly';

-- A lapsed claim not yet taken again may still be finished by its runner.
SET ROLE ll_runs_a;
SELECT le_claim_run('late-finish', :'due', 'r1', '1 hour') AS claim;
RESET ROLE;
UPDATE leaderlock_runs SET expires_at = le_now() - interval '1 second' WHERE job = 'late-finish';
SET ROLE ll_runs_a;
SELECT le_finish_run('late-finish', :'due', 'r1', 1, true) AS lapsed_finishes;
RESET ROLE;

-- Misfire grace: a run first claimed after it is refused and recorded
-- missed, once; so is a lapsed claim past it.
SET ROLE ll_runs_a;
SELECT le_claim_run('hourly', :'due', 'r1', '1 hour', '5 seconds') AS too_late;
SELECT le_claim_run('hourly', :'due', 'r2', '1 hour', '5 seconds') AS still_missed;
SELECT le_claim_run('hourly', :'due', 'r2', '1 hour') AS no_grace_finished_anyway;
SELECT le_claim_run('hourly', (:'due'::timestamptz + interval '1 second'), 'r1', '1 hour', '1 hour') AS within_grace;
RESET ROLE;
UPDATE leaderlock_runs SET expires_at = le_now() - interval '1 second'
 WHERE job = 'hourly' AND due = :'due'::timestamptz + interval '1 second';
SET ROLE ll_runs_a;
SELECT le_claim_run('hourly', (:'due'::timestamptz + interval '1 second'), 'r2', '1 hour', '5 seconds') AS lapsed_too_late;
RESET ROLE;
SELECT due - :'due'::timestamptz AS after, holder, term, attempts, outcome, detail
  FROM leaderlock_runs WHERE job = 'hourly' ORDER BY due;
SELECT job, term FROM leaderlock_jobs WHERE job = 'hourly';

-- Retention: a job's new run deletes its runs due longer ago than
-- leaderlock.run_retention that are finished or without a live claim; a
-- run still going on keeps its row, and its runner renews and finishes it.
-- A run pruned is never claimed again, whatever the retention later; one
-- due before the retention is refused, nothing written. The terms stay.
-- The retention is the administrator's: set for the database, then a new
-- connection (see history.sql).
SET ROLE ll_runs_a;
SELECT le_claim_run('kept', :'due', 'r1', '1 hour') AS old_live;
SELECT le_claim_run('kept', (:'due'::timestamptz + interval '1 second'), 'r1', '1 hour') AS old_finished;
SELECT le_finish_run('kept', (:'due'::timestamptz + interval '1 second'), 'r1', 2, true) AS finished;
RESET ROLE;
DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET leaderlock.run_retention = ''10s''', pg_catalog.current_database()); END $$;
\c
SET ROLE ll_runs_a;
SELECT le_claim_run('kept', date_trunc('second', le_now()), 'r1', '1 hour') AS new_run;
SELECT le_claim_run('kept-too-old', :'due', 'r1', '1 hour') AS too_old;
RESET ROLE;
DO $$ BEGIN EXECUTE format('ALTER DATABASE %I RESET leaderlock.run_retention', pg_catalog.current_database()); END $$;
\c
SELECT due - :'due'::timestamptz > interval '20 seconds' AS new, term, outcome
  FROM leaderlock_runs WHERE job = 'kept' ORDER BY due;
SELECT job, term, pruned_before IS NOT NULL AS pruned FROM leaderlock_jobs WHERE job LIKE 'kept%' ORDER BY job;
SET ROLE ll_runs_a;
SELECT le_renew_run('kept', :'due', 'r1', NULL, 1) AS live_one_renews;
SELECT le_claim_run('kept', (:'due'::timestamptz + interval '1 second'), 'r2', '1 hour') AS pruned_never_again;
SELECT le_finish_run('kept', :'due', 'r1', 1, true) AS live_one_finishes;
RESET ROLE;

-- Bad input: the SQLSTATE, and nothing changes.
CREATE TEMP TABLE runs_before AS SELECT * FROM leaderlock_runs;
\set VERBOSITY sqlstate
SELECT le_claim_run(NULL, :'due', 'r', '1 hour');
SELECT le_claim_run('', :'due', 'r', '1 hour');
SELECT le_claim_run('j', NULL, 'r', '1 hour');
SELECT le_claim_run('j', 'infinity', 'r', '1 hour');
SELECT le_claim_run('j', :'due', NULL, '1 hour');
SELECT le_claim_run('j', :'due', 'r', NULL);
SELECT le_claim_run('j', :'due', 'r', '0');
SELECT le_claim_run('j', :'due', 'r', '1 hour', '-1 second');
SELECT le_claim_run('j', :'due', 'r', '1 hour', '1 month');
SELECT le_claim_run('j', le_now() + interval '1 hour', 'r', '1 hour');
SELECT le_renew_run('nightly', :'due', 'replica-1', '-1 second');
SELECT le_renew_run('nightly', :'due', 'replica-1', NULL, -1);
SELECT le_finish_run('nightly', :'due', 'replica-1', NULL, true);
SELECT le_finish_run('nightly', :'due', 'replica-1', 1, NULL);
SELECT le_finish_run('nightly', :'due', 'replica-1', 1, true, repeat('x', 1001));
\set VERBOSITY terse
SELECT le_claim_run('j', le_now() + interval '1 hour', 'r', '1 hour');
\set VERBOSITY default
SELECT le_finish_run('nightly', :'due', 'replica-1', 1, true, repeat('x', 1001));
SELECT (SELECT count(*) FROM leaderlock_runs) = (SELECT count(*) FROM runs_before) AS runs_unchanged,
       NOT EXISTS (SELECT 1 FROM leaderlock_jobs WHERE job = 'j') AS no_job;

-- Readable by all, written by no one but the functions.
SET ROLE ll_runs_b;
SELECT count(*) > 0 AS readable FROM leaderlock_runs;
UPDATE leaderlock_runs SET outcome = 'succeeded';
DELETE FROM leaderlock_jobs;
RESET ROLE;

DROP TABLE runs_before;
DELETE FROM leaderlock_runs;
DELETE FROM leaderlock_jobs;
DROP ROLE ll_runs_a;
DROP ROLE ll_runs_b;
