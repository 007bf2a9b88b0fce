-- Contract 18: le_acquire's priority and le_candidates (waits themselves
-- are in tests/client/test_priority.py: pg_regress runs one session).
SELECT * FROM le_candidates('prio-nobody-waits');
SELECT le_acquire('prio', 'a', '1 hour', '0', priority => 5) AS a_takes_it;
-- Not waiting (wait 0): a try, listed nowhere; a live holder is never
-- preempted, whatever the priority.
SELECT le_acquire('prio', 'b', '1 hour', '0', priority => 100) AS b_refused;
SELECT le_acquire('prio', 'b', '1 hour', '20 milliseconds', priority => 100) AS b_waits_refused;
SELECT count(*) AS candidates_after FROM le_candidates('prio');
SELECT le_leader('prio');
-- Bad input: the SQLSTATE, and nothing changes.
SELECT le_acquire('prio', 'b', '1 hour', '0', priority => NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM le_candidates(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM le_candidates('');
\echo :LAST_ERROR_SQLSTATE
SELECT holder, term FROM leaderlock WHERE key = 'prio';
-- Anyone may list the candidates of a key (ids are what le_leader shows too).
CREATE ROLE ll_prio_reader;
SET ROLE ll_prio_reader;
SELECT * FROM le_candidates('prio');
RESET ROLE;
DROP ROLE ll_prio_reader;
DELETE FROM leaderlock WHERE key = 'prio';
