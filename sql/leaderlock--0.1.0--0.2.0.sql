-- leaderlock 0.1.0 -> 0.2.0: fencing that survives failover (contract 8).
-- Functions keep their names and signatures; what changed in them (the term
-- rule, leases outlasting a failover, durable answers) is in the library.
\echo Use "ALTER EXTENSION leaderlock UPDATE TO '0.2.0'" to load this file. \quit

-- Contract 8.2: the WAL timeline on which held leases were last made to
-- outlast a failover. One row; not part of a dump.
CREATE TABLE leaderlock_failover (
    one_row    boolean PRIMARY KEY DEFAULT true CHECK (one_row),
    timeline   bigint NOT NULL,       -- a WAL timeline ID
    changed_at timestamptz            -- when held leases were last extended for a new timeline
);
-- The timeline of the last checkpoint: the current one (or, right after a
-- promotion, an older one, which only makes the first write extend held
-- leases once, the safe direction). Held leases keep their expiry.
INSERT INTO leaderlock_failover (timeline)
SELECT timeline_id FROM pg_catalog.pg_control_checkpoint();

REVOKE ALL ON leaderlock_failover FROM PUBLIC;
GRANT SELECT ON leaderlock_failover TO PUBLIC;
