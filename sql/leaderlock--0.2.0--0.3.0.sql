-- leaderlock 0.2.0 -> 0.3.0: blocking acquire, session-bound leases, the
-- leader value and le_lease (contract 9-11).
\echo Use "ALTER EXTENSION leaderlock UPDATE TO '0.3.0'" to load this file. \quit

-- Contract 10 and 11. New columns are NULL for every existing lease: no
-- value, not session-bound. Adding nullable columns rewrites nothing.
ALTER TABLE leaderlock
    ADD COLUMN value jsonb,
    ADD COLUMN session_pid integer,
    ADD COLUMN session_start timestamptz;
CREATE INDEX leaderlock_session_idx ON leaderlock (session_pid) WHERE session_pid IS NOT NULL;

-- The view gains the two columns at its end (CREATE OR REPLACE VIEW can only append).
CREATE OR REPLACE VIEW leaderlock_status AS
SELECT l.key, l.holder, l.term, l.acquired_at, l.renewed_at, l.expires_at, l.ttl,
       CASE WHEN l.holder IS NULL THEN 'vacant'
            WHEN l.expires_at > c.now THEN 'held'
            ELSE 'lapsed' END AS state,
       CASE WHEN l.holder IS NOT NULL AND l.expires_at > c.now
            THEN l.expires_at - c.now END AS remaining,
       l.value, l.session_pid
  FROM leaderlock l
 CROSS JOIN (SELECT pg_catalog.clock_timestamp() AS now) c;

CREATE TYPE leaderlock_lease AS (
    key        text,
    holder     text,
    term       bigint,
    expires_at timestamptz,
    remaining  interval,
    value      jsonb
);

-- le_try_acquire gains two optional arguments. A second function beside
-- the old one would make every three-argument call ambiguous, so the old
-- one goes (a view or function of yours that calls it must be dropped
-- first, and re-created after).
DROP FUNCTION le_try_acquire(text, text, interval);

CREATE FUNCTION le_try_acquire(
    key text, id text, ttl interval,
    session_bound boolean DEFAULT false, value jsonb DEFAULT NULL
) RETURNS boolean
VOLATILE SECURITY DEFINER PARALLEL UNSAFE
SET search_path TO @extschema@, pg_temp
SET enable_seqscan = off
LANGUAGE c AS 'MODULE_PATHNAME', 'le_try_acquire_with_wrapper';

CREATE FUNCTION le_acquire(
    key text, id text, ttl interval, wait interval,
    session_bound boolean DEFAULT false, value jsonb DEFAULT NULL
) RETURNS boolean
VOLATILE SECURITY DEFINER PARALLEL UNSAFE
SET search_path TO @extschema@, pg_temp
SET enable_seqscan = off
LANGUAGE c AS 'MODULE_PATHNAME', 'le_acquire_wrapper';

CREATE FUNCTION le_proclaim(key text, id text, value jsonb) RETURNS boolean
VOLATILE SECURITY DEFINER PARALLEL UNSAFE
SET search_path TO @extschema@, pg_temp
SET enable_seqscan = off
LANGUAGE c AS 'MODULE_PATHNAME', 'le_proclaim_wrapper';

CREATE FUNCTION le_lease(key text) RETURNS leaderlock_lease
VOLATILE PARALLEL SAFE
SET search_path TO @extschema@, pg_temp
SET enable_seqscan = off
LANGUAGE c AS 'MODULE_PATHNAME', 'le_lease_wrapper';
