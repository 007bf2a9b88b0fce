-- Bad input (contract section 6): a clear error with the contract's
-- SQLSTATE, naming the argument and the limit, and nothing changes.
SELECT le_try_acquire('k', 'a', '10 seconds');
CREATE TABLE before AS SELECT * FROM leaderlock;

-- 22004 null_value_not_allowed
SELECT le_try_acquire(NULL, 'a', '10 seconds');
\echo :LAST_ERROR_SQLSTATE
SELECT le_try_acquire('k', NULL, '10 seconds');
\echo :LAST_ERROR_SQLSTATE
SELECT le_try_acquire('k', 'a', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT le_renew(NULL, 'a');
\echo :LAST_ERROR_SQLSTATE
SELECT le_release('k', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT le_leader(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT le_assert_leader('k', NULL);
\echo :LAST_ERROR_SQLSTATE

-- 22023 invalid_parameter_value: names
SELECT le_try_acquire('', 'a', '10 seconds');
\echo :LAST_ERROR_SQLSTATE
SELECT le_try_acquire('k', '', '10 seconds');
\echo :LAST_ERROR_SQLSTATE
SELECT le_try_acquire(repeat('k', 256), 'a', '10 seconds');
\echo :LAST_ERROR_SQLSTATE
SELECT le_renew('k', repeat('é', 128));
\echo :LAST_ERROR_SQLSTATE

-- 22023: ttls
SELECT le_try_acquire('k', 'a', '0 seconds');
\echo :LAST_ERROR_SQLSTATE
SELECT le_try_acquire('k', 'a', '-1 second');
\echo :LAST_ERROR_SQLSTATE
SELECT le_try_acquire('k', 'a', '1 month');
\echo :LAST_ERROR_SQLSTATE
SELECT le_try_acquire('k', 'a', '1 year 1 second');
\echo :LAST_ERROR_SQLSTATE
SELECT le_try_acquire('k', 'a', '25 hours');
\echo :LAST_ERROR_SQLSTATE
SELECT le_renew('k', 'a', '0 seconds');
\echo :LAST_ERROR_SQLSTATE
SET leaderlock.max_ttl = '30s';
SELECT le_try_acquire('k', 'a', '31 seconds');
\echo :LAST_ERROR_SQLSTATE
RESET leaderlock.max_ttl;

-- 22023: term
SELECT le_assert_leader('k', 'a', -1);
\echo :LAST_ERROR_SQLSTATE

-- nothing changed
SELECT count(*) AS changed_rows
  FROM (SELECT * FROM leaderlock EXCEPT SELECT * FROM before) d;
SELECT count(*) AS rows FROM leaderlock;
