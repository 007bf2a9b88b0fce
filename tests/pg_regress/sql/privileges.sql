-- Security (contract section 7): any role may call the functions and read
-- the table and view; no ordinary role may write the table directly.
CREATE ROLE leaderlock_app LOGIN;
SET ROLE leaderlock_app;

SELECT le_try_acquire('app', 'me', '10 seconds');
SELECT le_renew('app', 'me');
SELECT le_assert_leader('app', 'me');
SELECT holder, term FROM leaderlock WHERE key = 'app';
SELECT key, state FROM leaderlock_status WHERE key = 'app';

-- Direct writes are refused (42501), whatever they try.
UPDATE leaderlock SET holder = 'me', term = 1 WHERE key = 'app';
\echo :LAST_ERROR_SQLSTATE
INSERT INTO leaderlock (key, holder, term) VALUES ('forged', 'me', 99);
\echo :LAST_ERROR_SQLSTATE
DELETE FROM leaderlock;
\echo :LAST_ERROR_SQLSTATE
TRUNCATE leaderlock;
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM leaderlock WHERE key = 'app' FOR UPDATE;
\echo :LAST_ERROR_SQLSTATE

-- A role's own search_path cannot redirect the functions' table.
RESET ROLE;
CREATE SCHEMA evil AUTHORIZATION leaderlock_app;
SET ROLE leaderlock_app;
CREATE TABLE evil.leaderlock (LIKE public.leaderlock);
SET search_path = evil, public;
SELECT le_release('app', 'me');
SELECT count(*) AS rows_in_evil_table FROM evil.leaderlock;
SELECT holder, term FROM public.leaderlock WHERE key = 'app';
RESET search_path;

SELECT le_release('app', 'me');
RESET ROLE;
DROP SCHEMA evil CASCADE;
DROP OWNED BY leaderlock_app;
DROP ROLE leaderlock_app;
