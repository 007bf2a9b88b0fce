-- Contract 24: schedules kept in the database. A job's schedule (every P,
-- or cron in a time zone; misfire grace; overlap; paused) is owned by the
-- role that made it; every due instant no claim took within its grace is
-- recorded missed once (here by le_expire_lapsed: no worker serves the
-- regression database); a paused schedule's runs start nowhere and are
-- never missed; forbid and replace keep a job's runs from overlapping.
CREATE ROLE ll_sched_a;
CREATE ROLE ll_sched_b;
SET TIME ZONE 'UTC';

-- Bad input: a clear error with its SQLSTATE, nothing changed.
\set VERBOSITY sqlstate
SELECT le_schedule(NULL, every => '1 minute');
SELECT le_schedule('j');
SELECT le_schedule('j', every => '1 minute', cron => '* * * * *');
SELECT le_schedule('j', every => '500 milliseconds');
SELECT le_schedule('j', every => '1.0005 seconds');
SELECT le_schedule('j', every => '1 month');
SELECT le_schedule('j', every => '1 minute', tz => 'Europe/Paris');
SELECT le_schedule('j', cron => '0 3 * * 1');
SELECT le_schedule('j', cron => '0 3 * * *', tz => 'Mars/Olympus');
SELECT le_schedule('j', cron => '0 3 * * *', tz => NULL);
SELECT le_schedule('j', every => '1 minute', misfire_grace => '-1 second');
SELECT le_schedule('j', every => '1 minute', overlap => 'sometimes');
SELECT le_schedule('j', every => '1 minute', overlap => NULL);
SELECT le_unschedule('');
SELECT le_next_due(NULL);
\set VERBOSITY default
SELECT count(*) AS nothing_written FROM leaderlock_schedules;
SELECT count(*) AS no_job_made FROM leaderlock_jobs WHERE job = 'j';

-- Made by its owner; the same settings again change nothing; another role
-- may neither change, pause nor drop it.
SET ROLE ll_sched_a;
SELECT le_schedule('nightly', cron => '30 2 * * *', tz => 'Europe/Paris') IS NOT NULL AS made;
SELECT settled_to AS settled FROM leaderlock_schedules WHERE job = 'nightly' \gset
SELECT le_schedule('nightly', cron => '30 2 * * *', tz => 'Europe/Paris') IS NOT NULL AS again;
RESET ROLE;
SELECT job, every, cron, tz, misfire_grace, overlap, paused, owner::regrole,
       settled_to = :'settled' AS unchanged_by_the_same_settings
  FROM leaderlock_schedules;
SELECT job, owner::regrole FROM leaderlock_jobs WHERE job = 'nightly';
SET ROLE ll_sched_b;
SELECT le_schedule('nightly', every => '1 hour');
SELECT le_pause_schedule('nightly');
SELECT le_unschedule('nightly');
RESET ROLE;
-- The next due instants, computed by the server (as every Rust replica
-- would): 02:30 in Paris (01:30 UTC in winter, 00:30 in summer), skipped
-- the night it does not exist (2026-03-29).
SELECT le_next_due('nightly', '2026-03-28 12:00:00+00') AS spring_skips_a_night,
       le_next_due('nightly', '2026-03-27 12:00:00+00') AS the_night_before_0130_utc,
       le_next_due('no-such-job') AS no_schedule;

-- A period: at its multiples since the epoch, its grace the period unless given.
SET ROLE ll_sched_a;
SELECT le_schedule('tick', every => '1 second', misfire_grace => '0 seconds') IS NOT NULL AS made;
-- (for the overlap below, made now so that its instants come meanwhile)
SELECT le_schedule('solo', every => '1 second', misfire_grace => '1 hour', overlap => 'forbid') IS NOT NULL AS made;
RESET ROLE;
SELECT active_since AS tick_made FROM leaderlock_schedules WHERE job = 'tick' \gset
SELECT le_next_due('tick', '2026-11-27 10:00:00.2+00') AS next_second,
       extract(epoch FROM misfire_grace) AS grace
  FROM leaderlock_schedules WHERE job = 'tick';

-- Nobody claims: each instant whose grace ended is recorded missed once,
-- and announced (its notification recorded in the history); settling
-- again adds nothing.
SELECT pg_sleep(2.2);
SELECT le_expire_lapsed() >= 0 AS settled;
SELECT count(*) BETWEEN 2 AND 4 AS some_missed,
       bool_and(outcome = 'missed' AND holder IS NULL AND detail = 'not claimed within its misfire grace') AS all_missed,
       bool_and(due > :'tick_made' AND due = date_trunc('second', due)) AS only_its_instants_after_it_was_made
  FROM leaderlock_runs WHERE job = 'tick';
SELECT count(*) AS before FROM leaderlock_runs WHERE job = 'tick' \gset
SELECT (SELECT count(*) FROM leaderlock_history h WHERE h.event = 'run_missed' AND h.key = 'tick')
     + (SELECT count(*) FROM leaderlock_history_pending p WHERE p.event = 'run_missed' AND p.key = 'tick')
     = :before AS each_in_the_history;
SELECT job, paused, waiting_since IS NOT NULL AS waits, overdue > '0' AS overdue,
       last_outcome, missed > 0 AS has_missed
  FROM leaderlock_schedule_status WHERE job = 'tick';

-- Paused: no claim is granted, nothing is recorded missed; resumed, it is
-- judged from then on only.
SET ROLE ll_sched_a;
SELECT le_pause_schedule('tick') AS paused, le_pause_schedule('tick') AS already;
RESET ROLE;
SELECT count(*) AS before FROM leaderlock_runs WHERE job = 'tick' \gset
SELECT date_trunc('second', le_now()) AS due \gset
SELECT le_claim_run('tick', :'due', 'r1', '1 minute') AS refused_while_paused;
SELECT pg_sleep(1.2);
SELECT le_expire_lapsed() >= 0 AS settled;
SELECT count(*) - :before AS nothing_new_while_paused FROM leaderlock_runs WHERE job = 'tick';
SELECT next_check IS NULL AS not_checked FROM leaderlock_schedules WHERE job = 'tick';
SET ROLE ll_sched_a;
SELECT le_resume_schedule('tick') AS resumed;
RESET ROLE;
SELECT settled_to >= :'due' AS judged_from_now, next_check IS NOT NULL AS checked
  FROM leaderlock_schedules WHERE job = 'tick';
-- the pause and the resume are in the history, with the role that did them
SELECT event, role::regrole, payload->>'job' AS job FROM (
  SELECT event, role, payload FROM leaderlock_history WHERE key = 'tick' AND event LIKE 'schedule%'
  UNION ALL
  SELECT event, role, payload::jsonb FROM leaderlock_history_pending WHERE key = 'tick' AND event LIKE 'schedule%') h
 ORDER BY event;

-- A scheduled job's runs: its owner's to claim, at its instants only, none
-- due before it was made (22023, 42501, NULL). Overlap forbid: no run
-- starts while another of the job is claimed live; replace (a change of
-- the overlap alone: the same instants) ends the other claim (recorded
-- replaced, its runner's renewal and finish refused), and the new term
-- fences it off.
SELECT date_trunc('second', active_since) + interval '1 second' AS d1,
       date_trunc('second', active_since) + interval '2 seconds' AS d2,
       date_trunc('second', active_since) + interval '3 seconds' AS d3
  FROM leaderlock_schedules WHERE job = 'solo' \gset
SELECT le_now() >= :'d3' AS all_three_due;
\set VERBOSITY sqlstate
SET ROLE ll_sched_b;
SELECT le_claim_run('solo', :'d1', 'x', '1 minute');
SET ROLE ll_sched_a;
SELECT le_claim_run('solo', :'d1'::timestamptz + interval '0.5 seconds', 'x', '1 minute');
\set VERBOSITY default
SELECT le_claim_run('solo', :'d1'::timestamptz - interval '1 second', 'x', '1 minute') AS before_it_was_made;
SELECT le_claim_run('solo', :'d1', 'r1', '1 minute') AS first;
SELECT le_claim_run('solo', :'d2', 'r2', '1 minute') AS forbidden_beside_it;
SELECT le_finish_run('solo', :'d1', 'r1', 1, true) AS first_done;
SELECT le_claim_run('solo', :'d2', 'r2', '1 minute') AS then_claimed;
SELECT le_schedule('solo', every => '1 second', misfire_grace => '1 hour', overlap => 'replace') IS NOT NULL AS changed;
SELECT le_claim_run('solo', :'d1', 'r3', '1 minute') AS finished_never_again;
SELECT le_claim_run('solo', :'d3', 'r3', '1 minute') AS replaces;
SELECT le_renew_run('solo', :'d2', 'r2') AS replaced_runner_renews,
       le_finish_run('solo', :'d2', 'r2', 2, true) AS replaced_runner_finishes;
RESET ROLE;
SELECT due = :'d2' AS d2, holder, term, outcome, detail LIKE 'replaced by the run due at %' AS why
  FROM leaderlock_runs WHERE job = 'solo' AND outcome = 'replaced';
SELECT count(*) AS nothing_written_for_refused_claims FROM leaderlock_runs
 WHERE job = 'solo' AND due NOT IN (:'d1', :'d2', :'d3');

-- A scheduled job's row outlives the retention of its runs; unscheduled,
-- its runs and terms stay.
SET ROLE ll_sched_a;
SELECT le_unschedule('solo') AS dropped, le_unschedule('solo') AS already;
RESET ROLE;
SELECT count(*) AS runs_kept FROM leaderlock_runs WHERE job = 'solo';
SELECT term AS terms_kept FROM leaderlock_jobs WHERE job = 'solo';

SET ROLE ll_sched_a;
SELECT le_unschedule('tick'), le_unschedule('nightly');
RESET ROLE;
RESET TIME ZONE;
DELETE FROM leaderlock_runs WHERE job IN ('tick', 'solo', 'nightly');
DELETE FROM leaderlock_jobs WHERE job IN ('tick', 'solo', 'nightly');
DROP ROLE ll_sched_a;
DROP ROLE ll_sched_b;
