-- Contract 9-11 as a user sees them: le_acquire, the leader value,
-- le_lease, le_proclaim. (Waiting for another session is in
-- tests/isolation/acquire.spec; session ends in tests/client.)

-- 9. le_acquire: wait '0' tries once.
SELECT le_acquire('job', 'a', '1 hour', '0');
SELECT le_acquire('job', 'b', '1 hour', '0');
-- A wait that passes: false, nothing changed.
SELECT le_acquire('job', 'b', '1 hour', '50 milliseconds');
SELECT key, holder, term FROM leaderlock WHERE key = 'job';
-- The wait is a statement like any other: statement_timeout ends it.
SET statement_timeout = '100ms';
SELECT le_acquire('job', 'b', '1 hour', '1 minute');
RESET statement_timeout;
-- Only READ COMMITTED can wait: a later snapshot must see the release.
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT le_acquire('job', 'b', '1 hour', '1 second');
ROLLBACK;
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT le_acquire('job', 'b', '1 hour', '0');
ROLLBACK;
-- Bad waits.
SELECT le_acquire('job', 'b', '1 hour', NULL);
SELECT le_acquire('job', 'b', '1 hour', '-1 second');
SELECT le_acquire('job', 'b', '1 hour', '1 mon');
SELECT le_acquire('job', 'b', '1 hour', '6 minutes');
SHOW leaderlock.max_wait;

-- 11. The leader value: set at acquisition, shown in table, view, le_lease.
SELECT le_try_acquire('svc', 'a', '1 hour', value => '{"addr": "10.0.0.1:5432", "version": 7}');
SELECT value FROM leaderlock WHERE key = 'svc';
SELECT key, holder, term, value, remaining > '0' AS live FROM le_lease('svc');
SELECT key, holder, state, value FROM leaderlock_status WHERE key = 'svc';
-- le_proclaim: the live holder only.
SELECT le_proclaim('svc', 'a', '{"addr": "10.0.0.1:5433", "version": 8}');
SELECT le_proclaim('svc', 'b', '{"addr": "evil"}');
SELECT value FROM le_lease('svc');
-- Too large, NULL names: rejected, nothing changed.
SELECT le_proclaim('svc', 'a', to_jsonb(repeat('x', 2000)));
SELECT le_try_acquire('svc', 'a', '1 hour', value => to_jsonb(repeat('x', 2000)));
SELECT le_proclaim(NULL, 'a', '1');
SELECT value FROM le_lease('svc');
-- Released: no holder, no value; the term stays.
SELECT le_release('svc', 'a');
SELECT key, holder, term, value, remaining FROM le_lease('svc');
-- An unknown key: one record of NULLs.
SELECT * FROM le_lease('never');
SELECT le_lease('');

-- 10. session_bound NULL is bad input; true needs the worker's database.
SELECT le_try_acquire('bound', 'a', '1 hour', session_bound => NULL);
SELECT le_acquire('bound', 'a', '1 hour', '0', session_bound => true);
