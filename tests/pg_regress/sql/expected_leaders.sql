-- Contract 25: keys expected to be led. A key marked by its owner with a
-- bound gets, each time it stays without a live holder for longer than
-- the bound, one leaderless interval in the history: its start (when the
-- key lost its holder, or was marked) and its end (when a tenure began),
-- announced and counted. Here le_expire_lapsed checks the marks (no
-- worker serves the regression database).
CREATE ROLE ll_exp_a;
CREATE ROLE ll_exp_b;

\set VERBOSITY sqlstate
SELECT le_expect_leader(NULL, '1 second');
SELECT le_expect_leader('k', NULL);
SELECT le_expect_leader('k', '-1 second');
SELECT le_expect_leader('k', '1 month');
SELECT le_expect_leader('k', '0.5 seconds');
SELECT le_expect_leader('', '1 second');
SELECT le_unexpect_leader(NULL);
\set VERBOSITY default
SELECT count(*) AS nothing_written FROM leaderlock_expected;

SET ROLE ll_exp_a;
SELECT le_expect_leader('exp-key', '2 seconds') AS marked,
       le_expect_leader('exp-key', '2 seconds') AS same_again;
RESET ROLE;
SET ROLE ll_exp_b;
SELECT le_expect_leader('exp-key', '1 hour');
SELECT le_unexpect_leader('exp-key');
RESET ROLE;
SELECT marked_at AS marked FROM leaderlock_expected WHERE key = 'exp-key' \gset

-- Within its bound: nothing recorded.
SELECT le_expire_lapsed() >= 0 AS checked;
SELECT leaderless_since, intervals FROM leaderlock_expected WHERE key = 'exp-key';
-- Past it: one interval opened, from the mark.
SELECT pg_sleep(2.2);
SELECT le_expire_lapsed() >= 0 AS checked;
SELECT le_expire_lapsed() >= 0 AS checked_again;
SELECT leaderless_since = :'marked' AS since_the_mark, intervals FROM leaderlock_expected WHERE key = 'exp-key';
-- Led again: the interval ends when the tenure began.
SELECT le_try_acquire('exp-key', 'a', '1 hour') AS led;
SELECT acquired_at AS began FROM leaderlock WHERE key = 'exp-key' \gset
-- (an open interval is looked at every second: its end comes from the row)
SELECT pg_sleep(1.3);
SELECT le_expire_lapsed() >= 0 AS checked;
SELECT leaderless_since, intervals, leaderless_total = :'began'::timestamptz - :'marked'::timestamptz AS exact_length
  FROM leaderlock_expected WHERE key = 'exp-key';
SELECT event, payload->>'since' = to_char(:'marked'::timestamptz AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS start_exact,
       payload->>'until' IS NULL OR payload->>'until' = to_char(:'began'::timestamptz AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS end_exact
  FROM (SELECT event, payload, position FROM leaderlock_history WHERE key = 'exp-key' AND event LIKE 'leaderless%'
        UNION ALL
        SELECT event, payload::jsonb, NULL FROM leaderlock_history_pending WHERE key = 'exp-key' AND event LIKE 'leaderless%') h
 ORDER BY event;
-- Released: a new interval counts from the release, once past the bound
-- (a led key is looked at every second, and when its tenure may end).
SELECT le_release('exp-key', 'a') AS released;
SELECT pg_sleep(2.4);
SELECT le_expire_lapsed() >= 0 AS checked;
SELECT leaderless_since = (SELECT expires_at FROM leaderlock WHERE key = 'exp-key') AS since_the_release, intervals
  FROM leaderlock_expected WHERE key = 'exp-key';

-- The role that holds a key may change its mark too (a mark squats no
-- key); removed, an open interval ends then, recorded.
SET ROLE ll_exp_b;
SELECT le_try_acquire('exp-key', 'b', '1 hour') AS led_by_b;
SELECT le_expect_leader('exp-key', '3 seconds') AS holder_changes_the_bound;
SELECT le_release('exp-key', 'b') AS released;
SELECT le_expect_leader('exp-key', '4 seconds');
RESET ROLE;
SET ROLE ll_exp_a;
SELECT le_unexpect_leader('exp-key') AS unmarked, le_unexpect_leader('exp-key') AS already;
RESET ROLE;
SELECT count(*) FILTER (WHERE event = 'leaderless') AS started, count(*) FILTER (WHERE event = 'leaderless_end') AS ended
  FROM (SELECT event FROM leaderlock_history WHERE key = 'exp-key' AND event LIKE 'leaderless%'
        UNION ALL
        SELECT event FROM leaderlock_history_pending WHERE key = 'exp-key' AND event LIKE 'leaderless%') h;
DROP ROLE ll_exp_a;
DROP ROLE ll_exp_b;
