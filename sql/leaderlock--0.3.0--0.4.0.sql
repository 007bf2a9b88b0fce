-- leaderlock 0.3.0 -> 0.4.0: role-owned leases, le_force_release, and
-- stats (contract 13-14). The workers of every database (contract 12) need
-- no schema change.
\echo Use "ALTER EXTENSION leaderlock UPDATE TO '0.4.0'" to load this file. \quit

-- Contract 13: a live lease from before the update has no owner, and
-- anyone may act on it as before, until its tenure ends.
-- Contract 14: counters start at zero. A held lease last changed when its
-- tenure began; a vacant one when it was released (a release sets
-- expires_at to that time) or expired (at expires_at).
-- Constant defaults rewrite nothing; the UPDATE writes each row once.
ALTER TABLE leaderlock
    ADD COLUMN owner oid,
    ADD COLUMN tenures bigint NOT NULL DEFAULT 0,
    ADD COLUMN releases bigint NOT NULL DEFAULT 0,
    ADD COLUMN expiries bigint NOT NULL DEFAULT 0,
    ADD COLUMN changed_at timestamptz;
UPDATE leaderlock
   SET changed_at = CASE WHEN holder IS NOT NULL THEN acquired_at ELSE expires_at END;

-- The view gains the owner at its end (CREATE OR REPLACE VIEW can only append).
CREATE OR REPLACE VIEW leaderlock_status AS
SELECT l.key, l.holder, l.term, l.acquired_at, l.renewed_at, l.expires_at, l.ttl,
       CASE WHEN l.holder IS NULL THEN 'vacant'
            WHEN l.expires_at > c.now THEN 'held'
            ELSE 'lapsed' END AS state,
       CASE WHEN l.holder IS NOT NULL AND l.expires_at > c.now
            THEN l.expires_at - c.now END AS remaining,
       l.value, l.session_pid, l.owner::regrole AS owner
  FROM leaderlock l
 CROSS JOIN (SELECT pg_catalog.clock_timestamp() AS now) c;

CREATE VIEW leaderlock_stats AS
SELECT l.key, l.tenures, l.releases, l.expiries, l.changed_at,
       pg_catalog.date_part('epoch', c.now - l.changed_at) AS seconds_since_change,
       l.holder IS NOT NULL AND l.expires_at > c.now AS held
  FROM leaderlock l
 CROSS JOIN (SELECT pg_catalog.clock_timestamp() AS now) c;
REVOKE ALL ON leaderlock_stats FROM PUBLIC;
GRANT SELECT ON leaderlock_stats TO PUBLIC;

CREATE FUNCTION le_database_stats() RETURNS TABLE (
    datid oid, datname text, acquired bigint, renewed bigint, refused bigint,
    released bigint, expired bigint, since timestamptz
)
STRICT VOLATILE PARALLEL SAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'le_database_stats_wrapper';

CREATE VIEW leaderlock_database_stats AS
SELECT datid, datname, acquired, renewed, refused, released, expired, since
  FROM le_database_stats();
REVOKE ALL ON leaderlock_database_stats FROM PUBLIC;
GRANT SELECT ON leaderlock_database_stats TO PUBLIC;

CREATE FUNCTION le_force_release(key text) RETURNS boolean
VOLATILE SECURITY DEFINER PARALLEL UNSAFE
SET search_path TO @extschema@, pg_temp
SET enable_seqscan = off
LANGUAGE c AS 'MODULE_PATHNAME', 'le_force_release_wrapper';
