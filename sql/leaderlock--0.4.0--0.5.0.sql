-- leaderlock 0.4.0 -> 0.5.0: security fixes (SECURITY.md; among them a guard
-- against functions and types named like the API), le_capabilities
-- and le_expire_lapsed (contract 19), le_renew_all and le_release_all
-- (contract 16), keys of many slots (contract 17), priorities and
-- le_candidates (contract 18), scheduled runs (contract 22). The table gains an
-- index and a column (every key admits one holder, as before); every
-- lease, term and counter stays as it is.
\echo Use "ALTER EXTENSION leaderlock UPDATE TO '0.5.0'" to load this file. \quit

-- leaderlock reads keys and ids as UTF-8; other database encodings were
-- never supported (a non-ASCII key failed with an internal error).
DO $$
BEGIN
    IF pg_catalog.getdatabaseencoding() OPERATOR(pg_catalog.<>) 'UTF8' THEN
        RAISE EXCEPTION USING
            ERRCODE = 'feature_not_supported',
            MESSAGE = pg_catalog.format('leaderlock supports UTF8 databases only; this one is %s',
                                        pg_catalog.getdatabaseencoding()),
            HINT = 'Drop the extension here, or move its leases to a UTF8 database.';
    END IF;
END
$$;

-- The functions become SECURITY INVOKER with search_path = pg_catalog,
-- pg_temp: the acting role is current_user at the call, the library acts
-- as the table's owner around its own statements only, and every name
-- resolves in pg_catalog or, by OID, in the extension's own schema.
ALTER FUNCTION le_try_acquire(text, text, interval, boolean, jsonb)
    SECURITY INVOKER SET search_path TO pg_catalog, pg_temp;
ALTER FUNCTION le_acquire(text, text, interval, interval, boolean, jsonb)
    SECURITY INVOKER SET search_path TO pg_catalog, pg_temp;
ALTER FUNCTION le_proclaim(text, text, jsonb)
    SECURITY INVOKER SET search_path TO pg_catalog, pg_temp;
ALTER FUNCTION le_force_release(text)
    SECURITY INVOKER SET search_path TO pg_catalog, pg_temp;
ALTER FUNCTION le_assert_leader(text, text, bigint)
    SECURITY INVOKER SET search_path TO pg_catalog, pg_temp;
ALTER FUNCTION le_leader(text) SET search_path TO pg_catalog, pg_temp;
ALTER FUNCTION le_lease(text) SET search_path TO pg_catalog, pg_temp;
ALTER FUNCTION le_worker_running() SET search_path TO pg_catalog, pg_temp;

-- Contract 19: the functions both editions have, so that client code can
-- ask what this server offers and, where no worker serves the database,
-- announce lapsed leases itself.
CREATE FUNCTION le_capabilities() RETURNS jsonb
STRICT VOLATILE PARALLEL SAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'le_capabilities_wrapper';

CREATE FUNCTION le_expire_lapsed() RETURNS integer
STRICT VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'le_expire_lapsed_wrapper';

-- Contract 16: every lease of one holder in one statement, found through
-- an index on holder (a renewal does not touch it, so it stays HOT).
CREATE INDEX leaderlock_holder_idx ON leaderlock (holder) WHERE holder IS NOT NULL;

CREATE FUNCTION le_renew_all(id text) RETURNS integer
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'le_renew_all_wrapper';
ALTER FUNCTION le_renew_all(text) SET enable_seqscan = off;

CREATE FUNCTION le_release_all(id text) RETURNS integer
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'le_release_all_wrapper';
ALTER FUNCTION le_release_all(text) SET enable_seqscan = off;

-- Contract 17: keys of many slots. Every existing key admits one holder,
-- as before; the tenures of keys of more live in leaderlock_slots.
ALTER TABLE leaderlock ADD COLUMN slots integer NOT NULL DEFAULT 1;
CREATE TABLE leaderlock_slots (
    key         text NOT NULL,
    slot        integer NOT NULL,
    holder      text,
    term        bigint NOT NULL,
    acquired_at timestamptz,
    renewed_at  timestamptz,
    expires_at  timestamptz,
    ttl         interval,
    recheck_at  timestamptz,
    value       jsonb,
    owner       oid,
    releases    bigint NOT NULL DEFAULT 0,
    expiries    bigint NOT NULL DEFAULT 0,
    changed_at  timestamptz,
    session     uuid,                 -- held under this session (contract 21): expires_at
                                      -- infinity, the session's row has the expiry
    delayed_until timestamptz,        -- vacant: not acquirable before (a session's lock-delay)
    PRIMARY KEY (key, slot)
) WITH (fillfactor = 50);
CREATE INDEX leaderlock_slots_recheck_at_idx ON leaderlock_slots (recheck_at) WHERE holder IS NOT NULL;
CREATE INDEX leaderlock_slots_holder_idx ON leaderlock_slots (holder) WHERE holder IS NOT NULL;
CREATE INDEX leaderlock_slots_session_idx ON leaderlock_slots (session) WHERE session IS NOT NULL;
SELECT pg_catalog.pg_extension_config_dump('leaderlock_slots', '');
REVOKE ALL ON leaderlock_slots FROM PUBLIC;
GRANT SELECT ON leaderlock_slots TO PUBLIC;

-- Contract 2.2: the lease clock (src/ddl/schema.sql); the views read it.
CREATE FUNCTION le_now() RETURNS timestamptz
VOLATILE PARALLEL SAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'le_now_wrapper';

-- Contract 21: sessions (one ttl for many keys) and their lock-delay.
ALTER TABLE leaderlock ADD COLUMN session uuid;
ALTER TABLE leaderlock ADD COLUMN delayed_until timestamptz;
CREATE INDEX leaderlock_session_keys_idx ON leaderlock (session) WHERE session IS NOT NULL;
-- Contract 21: sessions. One row per session, live or lapsed, deleted when
-- it ends (closed, expired, or its connection gone: its keys vacated in the
-- same transaction). A renewal writes this row alone, whatever the number
-- of keys held under it. Part of a dump, as the keys that name it.
CREATE TABLE leaderlock_sessions (
    session     uuid PRIMARY KEY,     -- the handle: random, never reused
    id          text NOT NULL,        -- the holder id of every key acquired under it
    owner       oid NOT NULL,         -- the role that opened it (contract 13)
    ttl         interval NOT NULL,    -- ttl of the last open or renewal
    opened_at   timestamptz NOT NULL,
    renewed_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL, -- on the lease clock, as a lease's
    recheck_at  timestamptz NOT NULL, -- the worker's cue, as a lease's: <= expires_at
    lock_delay  interval NOT NULL,    -- after it expires or its connection ends, its keys
                                      -- are not acquirable for this long
    keep_values boolean NOT NULL,     -- its keys keep their values when vacated
    session_pid integer,              -- bound to its connection (contract 10): the opening
    session_start timestamptz         -- backend's pid and start
) WITH (fillfactor = 50);
CREATE INDEX leaderlock_sessions_recheck_at_idx ON leaderlock_sessions (recheck_at);
-- le_renew_all (contract 16) finds an id's sessions through this one.
CREATE INDEX leaderlock_sessions_id_idx ON leaderlock_sessions (id);
CREATE INDEX leaderlock_sessions_pid_idx ON leaderlock_sessions (session_pid) WHERE session_pid IS NOT NULL;
SELECT pg_catalog.pg_extension_config_dump('leaderlock_sessions', '');

REVOKE ALL ON leaderlock_sessions FROM PUBLIC;
GRANT SELECT ON leaderlock_sessions TO PUBLIC;

-- One clock reading per row keeps state and remaining consistent. A key of
-- one slot is its row of leaderlock, as before 0.5.0 (slot NULL); a key of
-- more (contract 17) shows one row per slot, with that tenure's holder. A
-- key held under a session (contract 21) shows its session's expiry (an
-- ended session's key not vacated yet: lapsed).
CREATE OR REPLACE VIEW leaderlock_status AS
SELECT l.key, l.holder, l.term, l.acquired_at, l.renewed_at, e.expires_at, l.ttl,
       CASE WHEN l.holder IS NULL THEN 'vacant'
            WHEN e.expires_at > c.now THEN 'held'
            ELSE 'lapsed' END AS state,
       CASE WHEN l.holder IS NOT NULL AND e.expires_at > c.now
            THEN e.expires_at - c.now END AS remaining,
       l.value, l.session_pid, l.owner::regrole AS owner,
       NULL::integer AS slot, l.slots,
       CASE WHEN l.holder IS NOT NULL THEN l.session END AS session
  FROM leaderlock l
 CROSS JOIN (SELECT @extschema@.le_now() AS now) c
 CROSS JOIN LATERAL (
       SELECT CASE WHEN l.session IS NULL OR l.holder IS NULL THEN l.expires_at
                   ELSE COALESCE((SELECT x.expires_at FROM leaderlock_sessions x
                                   WHERE x.session OPERATOR(pg_catalog.=) l.session),
                                 '-infinity'::timestamptz) END AS expires_at) e
 WHERE l.slots OPERATOR(pg_catalog.=) 1
UNION ALL
SELECT s.key, s.holder, s.term, s.acquired_at, s.renewed_at, e.expires_at, s.ttl,
       CASE WHEN s.holder IS NULL THEN 'vacant'
            WHEN e.expires_at > c.now THEN 'held'
            ELSE 'lapsed' END,
       CASE WHEN s.holder IS NOT NULL AND e.expires_at > c.now
            THEN e.expires_at - c.now END,
       s.value, NULL::integer, s.owner::regrole, s.slot, h.slots,
       CASE WHEN s.holder IS NOT NULL THEN s.session END
  FROM leaderlock h
  JOIN leaderlock_slots s ON s.key OPERATOR(pg_catalog.=) h.key
                         AND s.slot OPERATOR(pg_catalog.<=) h.slots
 CROSS JOIN (SELECT @extschema@.le_now() AS now) c
 CROSS JOIN LATERAL (
       SELECT CASE WHEN s.session IS NULL OR s.holder IS NULL THEN s.expires_at
                   ELSE COALESCE((SELECT x.expires_at FROM leaderlock_sessions x
                                   WHERE x.session OPERATOR(pg_catalog.=) s.session),
                                 '-infinity'::timestamptz) END AS expires_at) e
 WHERE h.slots OPERATOR(pg_catalog.>) 1;

-- Contract 14: how often each key changed hands. Counted since 0.4.0 (an
-- upgraded row starts at zero), the slots' of a key of many (now or before) too.
CREATE OR REPLACE VIEW leaderlock_stats AS
SELECT l.key, l.tenures,
       l.releases + COALESCE(s.releases, 0) AS releases,
       l.expiries + COALESCE(s.expiries, 0) AS expiries,
       GREATEST(l.changed_at, s.changed_at) AS changed_at,
       pg_catalog.date_part('epoch', c.now - GREATEST(l.changed_at, s.changed_at)) AS seconds_since_change,
       (l.holder IS NOT NULL AND e.expires_at > c.now) OR COALESCE(s.held, false) AS held
  FROM leaderlock l
 CROSS JOIN (SELECT @extschema@.le_now() AS now) c
 CROSS JOIN LATERAL (
       SELECT CASE WHEN l.session IS NULL OR l.holder IS NULL THEN l.expires_at
                   ELSE COALESCE((SELECT x.expires_at FROM leaderlock_sessions x
                                   WHERE x.session OPERATOR(pg_catalog.=) l.session),
                                 '-infinity'::timestamptz) END AS expires_at) e
  LEFT JOIN LATERAL (
       SELECT pg_catalog.sum(t.releases)::bigint AS releases,
              pg_catalog.sum(t.expiries)::bigint AS expiries,
              pg_catalog.max(t.changed_at) AS changed_at,
              pg_catalog.bool_or(t.holder IS NOT NULL AND t.expires_at > c.now
                  AND (t.session IS NULL OR EXISTS (
                       SELECT 1 FROM leaderlock_sessions x
                        WHERE x.session OPERATOR(pg_catalog.=) t.session
                          AND x.expires_at > c.now))) AS held
         FROM leaderlock_slots t
        WHERE t.key OPERATOR(pg_catalog.=) l.key) s ON true;


-- le_try_acquire and le_acquire take slots, le_acquire priority, and
-- le_renew and le_release the term of the tenure they act on (the library serves the old
-- signatures, by their own C symbols, until this update). New signatures:
-- the functions are dropped and created, keeping who may execute them (an
-- administrator's REVOKE from PUBLIC stays).
DO $$
BEGIN
    PERFORM pg_catalog.set_config('leaderlock_upgrade.acl_try', coalesce((
        SELECT proacl::text FROM pg_catalog.pg_proc
         WHERE oid = '@extschema@.le_try_acquire(text, text, interval, boolean, jsonb)'::pg_catalog.regprocedure
    ), ''), true);
    PERFORM pg_catalog.set_config('leaderlock_upgrade.acl_acquire', coalesce((
        SELECT proacl::text FROM pg_catalog.pg_proc
         WHERE oid = '@extschema@.le_acquire(text, text, interval, interval, boolean, jsonb)'::pg_catalog.regprocedure
    ), ''), true);
    PERFORM pg_catalog.set_config('leaderlock_upgrade.acl_renew', coalesce((
        SELECT proacl::text FROM pg_catalog.pg_proc
         WHERE oid = '@extschema@.le_renew(text, text, interval)'::pg_catalog.regprocedure
    ), ''), true);
    PERFORM pg_catalog.set_config('leaderlock_upgrade.acl_release', coalesce((
        SELECT proacl::text FROM pg_catalog.pg_proc
         WHERE oid = '@extschema@.le_release(text, text)'::pg_catalog.regprocedure
    ), ''), true);
END
$$;
DROP FUNCTION le_try_acquire(text, text, interval, boolean, jsonb);
CREATE FUNCTION le_try_acquire(
    key text, id text, ttl interval,
    session_bound boolean DEFAULT false, value jsonb DEFAULT NULL, slots integer DEFAULT 1
) RETURNS boolean
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'le_try_acquire_slots_wrapper';
ALTER FUNCTION le_try_acquire(text, text, interval, boolean, jsonb, integer) SET enable_seqscan = off;

DROP FUNCTION le_acquire(text, text, interval, interval, boolean, jsonb);
CREATE FUNCTION le_acquire(
    key text, id text, ttl interval, wait interval,
    session_bound boolean DEFAULT false, value jsonb DEFAULT NULL, slots integer DEFAULT 1,
    priority integer DEFAULT 0
) RETURNS boolean
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'le_acquire_slots_wrapper';
ALTER FUNCTION le_acquire(text, text, interval, interval, boolean, jsonb, integer, integer)
    SET enable_seqscan = off;

DROP FUNCTION le_renew(text, text, interval);
CREATE FUNCTION le_renew(
    key text, id text, ttl interval DEFAULT NULL, term bigint DEFAULT NULL
) RETURNS boolean
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'le_renew_term_wrapper';
ALTER FUNCTION le_renew(text, text, interval, bigint) SET enable_seqscan = off;

DROP FUNCTION le_release(text, text);
CREATE FUNCTION le_release(key text, id text, term bigint DEFAULT NULL) RETURNS boolean
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'le_release_term_wrapper';
ALTER FUNCTION le_release(text, text, bigint) SET enable_seqscan = off;

DO $$
DECLARE
    f record;
    g record;
    acl text;
BEGIN
    FOR f IN SELECT * FROM (VALUES
        ('leaderlock_upgrade.acl_try',
         '@extschema@.le_try_acquire(text, text, interval, boolean, jsonb, integer)'),
        ('leaderlock_upgrade.acl_acquire',
         '@extschema@.le_acquire(text, text, interval, interval, boolean, jsonb, integer, integer)'),
        ('leaderlock_upgrade.acl_renew', '@extschema@.le_renew(text, text, interval, bigint)'),
        ('leaderlock_upgrade.acl_release', '@extschema@.le_release(text, text, bigint)')
    ) AS v(setting, signature) LOOP
        acl := pg_catalog.current_setting(f.setting);
        CONTINUE WHEN acl OPERATOR(pg_catalog.=) '';  -- default privileges, as the new one has
        EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f.signature);
        FOR g IN SELECT DISTINCT e.grantee
                   FROM pg_catalog.aclexplode(acl::pg_catalog.aclitem[]) AS e
                  WHERE e.privilege_type OPERATOR(pg_catalog.=) 'EXECUTE' LOOP
            IF g.grantee OPERATOR(pg_catalog.=) 0::pg_catalog.oid THEN
                EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO PUBLIC', f.signature);
            ELSE
                EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %I', f.signature,
                    (SELECT r.rolname FROM pg_catalog.pg_roles r
                      WHERE r.oid OPERATOR(pg_catalog.=) g.grantee));
            END IF;
        END LOOP;
    END LOOP;
END
$$;

-- Contract 18: the candidates waiting in le_acquire, in serving order.
CREATE FUNCTION le_candidates(key text)
RETURNS TABLE (id text, priority integer, waiting_since timestamptz)
VOLATILE PARALLEL SAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'le_candidates_wrapper';

CREATE FUNCTION le_holders(key text) RETURNS SETOF leaderlock_lease
VOLATILE PARALLEL SAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'le_holders_wrapper';
ALTER FUNCTION le_holders(text) SET enable_seqscan = off;

-- Contract 22: scheduled runs (src/ddl/schema.sql says what each column holds).
CREATE TABLE leaderlock_jobs (
    job  text PRIMARY KEY,
    term bigint NOT NULL DEFAULT 0,
    pruned_before timestamptz,
    owner oid
);
SELECT pg_catalog.pg_extension_config_dump('leaderlock_jobs', '');
CREATE INDEX leaderlock_jobs_owner_idx ON leaderlock_jobs (owner) WHERE owner IS NOT NULL;
CREATE TABLE leaderlock_runs (
    job         text NOT NULL,
    due         timestamptz NOT NULL,
    holder      text,
    term        bigint,
    claimed_at  timestamptz,
    expires_at  timestamptz,
    ttl         interval,
    finished_at timestamptz,
    outcome     text CHECK (outcome IN ('succeeded', 'failed', 'missed', 'replaced')),
    detail      text,
    attempts    integer NOT NULL DEFAULT 0,
    owner       oid,
    backfilled_at timestamptz,
    PRIMARY KEY (job, due)
);
SELECT pg_catalog.pg_extension_config_dump('leaderlock_runs', '');
CREATE INDEX leaderlock_runs_unfinished_idx ON leaderlock_runs (job, due) WHERE finished_at IS NULL;
CREATE INDEX leaderlock_runs_due_idx ON leaderlock_runs (due);
CREATE INDEX leaderlock_runs_missed_idx ON leaderlock_runs (job, due)
    WHERE outcome = 'missed' OR backfilled_at IS NOT NULL;
REVOKE ALL ON leaderlock_jobs FROM PUBLIC;
GRANT SELECT ON leaderlock_jobs TO PUBLIC;
REVOKE ALL ON leaderlock_runs FROM PUBLIC;
GRANT SELECT ON leaderlock_runs TO PUBLIC;

-- Contract 23: every transition, recorded by the transaction that makes it
-- (with its notification) in leaderlock_history_pending, without a
-- position. The worker (le_expire_lapsed where none serves) moves the committed ones
-- here, numbered in commit order: a number drawn inside a transaction is
-- not commit order, so a reader resuming after position P could later
-- meet a row numbered below P. Numbered rows never change.
CREATE TABLE leaderlock_history (
    position bigint PRIMARY KEY,      -- unique, growing with commit order
    at       timestamptz NOT NULL,    -- the transition's instant (lease clock)
    event    text NOT NULL,           -- the notification's event
    key      text,                    -- the lease's key, or the run's job
    holder   text,
    term     bigint,
    role     oid,                     -- the role whose call made it; NULL: the worker
    payload  jsonb NOT NULL           -- the notification, as sent
);
SELECT pg_catalog.pg_extension_config_dump('leaderlock_history', '');
-- The transitions waiting for a position, oldest recording first. Every
-- transition writes one, so this row is what every hand-over pays for: kept
-- light (one plain index, the payload as the text sent, parsed when
-- numbered), written once and deleted when numbered.
CREATE TABLE leaderlock_history_pending (
    seq      bigint GENERATED ALWAYS AS IDENTITY, -- order of recording (numbering follows it)
    at       timestamptz NOT NULL,
    event    text NOT NULL,
    key      text,
    holder   text,
    term     bigint,
    role     oid,
    payload  text NOT NULL
);
SELECT pg_catalog.pg_extension_config_dump('leaderlock_history_pending', '');
-- (its sequence too: a restored row keeps its place before new ones)
SELECT pg_catalog.pg_extension_config_dump('leaderlock_history_pending_seq_seq', '');
CREATE INDEX leaderlock_history_pending_seq_idx ON leaderlock_history_pending (seq);
-- No primary key (the numbering deletes rows by ctid): the whole row
-- identifies one, so that a publication of deletes from every table (FOR
-- ALL TABLES: CDC, a migration by logical replication) lets the numbering
-- delete them.
ALTER TABLE leaderlock_history_pending REPLICA IDENTITY FULL;
-- One row: its lock serializes the numbering (only the extension may lock
-- it); pruned_through: positions up to it are deleted (retention); kept:
-- how many numbered rows are kept, what leaderlock.history_max_rows bounds
-- (positions jump at a failover, so their difference is no count).
CREATE TABLE leaderlock_history_head (
    one_row boolean PRIMARY KEY DEFAULT true CHECK (one_row),
    pruned_through bigint NOT NULL DEFAULT 0,
    kept bigint NOT NULL DEFAULT 0
);
INSERT INTO leaderlock_history_head DEFAULT VALUES;
REVOKE ALL ON leaderlock_history FROM PUBLIC;
GRANT SELECT ON leaderlock_history TO PUBLIC;
REVOKE ALL ON leaderlock_history_pending FROM PUBLIC;
GRANT SELECT ON leaderlock_history_pending TO PUBLIC;
REVOKE ALL ON leaderlock_history_head FROM PUBLIC;
GRANT SELECT ON leaderlock_history_head TO PUBLIC;

CREATE FUNCTION le_claim_run(
    job text, due timestamptz, id text, ttl interval, misfire_grace interval DEFAULT NULL
) RETURNS bigint
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'le_claim_run_wrapper';
ALTER FUNCTION le_claim_run(text, timestamptz, text, interval, interval) SET enable_seqscan = off;

CREATE FUNCTION le_renew_run(
    job text, due timestamptz, id text, ttl interval DEFAULT NULL, term bigint DEFAULT NULL
) RETURNS boolean
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'le_renew_run_wrapper';
ALTER FUNCTION le_renew_run(text, timestamptz, text, interval, bigint) SET enable_seqscan = off;

CREATE FUNCTION le_finish_run(
    job text, due timestamptz, id text, term bigint, succeeded boolean, detail text DEFAULT NULL
) RETURNS boolean
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'le_finish_run_wrapper';
ALTER FUNCTION le_finish_run(text, timestamptz, text, bigint, boolean, text) SET enable_seqscan = off;

-- Contract 24: schedules kept in the database.
CREATE TABLE leaderlock_schedules (
    job           text PRIMARY KEY,
    every         interval,
    cron          text,
    tz            text NOT NULL DEFAULT 'UTC',
    misfire_grace interval NOT NULL,
    overlap       text NOT NULL DEFAULT 'allow' CHECK (overlap IN ('allow', 'forbid', 'replace')),
    paused        boolean NOT NULL DEFAULT false,
    active_since  timestamptz NOT NULL,
    settled_to    timestamptz NOT NULL,
    next_check    timestamptz,
    owner         oid NOT NULL,
    changed_at    timestamptz NOT NULL,
    backfill      integer NOT NULL DEFAULT 0 CHECK (backfill BETWEEN 0 AND 100),
    CHECK ((every IS NULL) <> (cron IS NULL))
);
SELECT pg_catalog.pg_extension_config_dump('leaderlock_schedules', '');
CREATE INDEX leaderlock_schedules_check_idx ON leaderlock_schedules (next_check)
    WHERE next_check IS NOT NULL;
REVOKE ALL ON leaderlock_schedules FROM PUBLIC;
GRANT SELECT ON leaderlock_schedules TO PUBLIC;

CREATE FUNCTION le_schedule(
    job text, every interval DEFAULT NULL, cron text DEFAULT NULL, tz text DEFAULT 'UTC',
    misfire_grace interval DEFAULT NULL, overlap text DEFAULT 'allow', backfill integer DEFAULT 0
) RETURNS timestamptz
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'le_schedule_wrapper';
ALTER FUNCTION le_schedule(text, interval, text, text, interval, text, integer) SET enable_seqscan = off;

CREATE FUNCTION le_unschedule(job text) RETURNS boolean
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'le_unschedule_wrapper';
ALTER FUNCTION le_unschedule(text) SET enable_seqscan = off;

CREATE FUNCTION le_pause_schedule(job text) RETURNS boolean
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'le_pause_schedule_wrapper';
ALTER FUNCTION le_pause_schedule(text) SET enable_seqscan = off;

CREATE FUNCTION le_resume_schedule(job text) RETURNS boolean
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'le_resume_schedule_wrapper';
ALTER FUNCTION le_resume_schedule(text) SET enable_seqscan = off;

CREATE FUNCTION le_next_due(job text, after timestamptz DEFAULT NULL) RETURNS timestamptz
VOLATILE PARALLEL SAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'le_next_due_wrapper';
ALTER FUNCTION le_next_due(text, timestamptz) SET enable_seqscan = off;

CREATE FUNCTION le_backfill_due(job text) RETURNS SETOF timestamptz
VOLATILE PARALLEL SAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'le_backfill_due_wrapper';
ALTER FUNCTION le_backfill_due(text) SET enable_seqscan = off;

CREATE FUNCTION le_schedule_times(job text)
RETURNS TABLE (next_due timestamptz, waiting_since timestamptz)
VOLATILE PARALLEL SAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'le_schedule_times_wrapper';

-- Contract 24: each schedule with its next due instant, since when it
-- waits for a run (its first due instant no claim took yet) and how long
-- that is, its last outcome, and the missed runs kept. Readable by all.
CREATE VIEW leaderlock_schedule_status AS
SELECT s.job, s.every, s.cron, s.tz, s.misfire_grace, s.overlap, s.paused,
       s.owner::regrole AS owner, t.next_due, t.waiting_since,
       CASE WHEN t.waiting_since IS NOT NULL
            THEN c.now OPERATOR(pg_catalog.-) t.waiting_since
            ELSE '0'::interval END AS overdue,
       f.due AS last_finished_due, f.outcome AS last_outcome,
       (SELECT pg_catalog.count(*) FROM leaderlock_runs r
         WHERE r.job OPERATOR(pg_catalog.=) s.job
           AND r.outcome OPERATOR(pg_catalog.=) 'missed') AS missed,
       s.settled_to, s.changed_at
  FROM leaderlock_schedules s
 CROSS JOIN (SELECT @extschema@.le_now() AS now) c
 CROSS JOIN LATERAL @extschema@.le_schedule_times(s.job) t
  LEFT JOIN LATERAL (
       SELECT r.due, r.outcome FROM leaderlock_runs r
        WHERE r.job OPERATOR(pg_catalog.=) s.job AND r.finished_at IS NOT NULL
        ORDER BY r.due DESC LIMIT 1) f ON true;
REVOKE ALL ON leaderlock_schedule_status FROM PUBLIC;
GRANT SELECT ON leaderlock_schedule_status TO PUBLIC;

-- Contract 25: keys expected to be led.
CREATE TABLE leaderlock_expected (
    key              text PRIMARY KEY,
    within           interval NOT NULL,
    owner            oid NOT NULL,
    marked_at        timestamptz NOT NULL,
    leaderless_since timestamptz,
    intervals        bigint NOT NULL DEFAULT 0,
    leaderless_total interval NOT NULL DEFAULT '0',
    next_check       timestamptz NOT NULL
);
SELECT pg_catalog.pg_extension_config_dump('leaderlock_expected', '');
CREATE INDEX leaderlock_expected_check_idx ON leaderlock_expected (next_check);
CREATE INDEX leaderlock_expected_owner_idx ON leaderlock_expected (owner);
REVOKE ALL ON leaderlock_expected FROM PUBLIC;
GRANT SELECT ON leaderlock_expected TO PUBLIC;

-- Contract 26: groups. A group's partitions are each owned by at most one
-- live member; a member lives as a session (contract 21). Every change of
-- a group runs under its row's lock (lease/groups.rs).
CREATE TABLE leaderlock_groups (
    grp         text PRIMARY KEY,
    partitions  integer NOT NULL CHECK (partitions BETWEEN 1 AND 100000),
    drain       interval NOT NULL,    -- how long a live owner has to give a revoked partition back
    owner       oid NOT NULL,         -- the role whose join made it (contract 13)
    changed_at  timestamptz NOT NULL,
    check_at    timestamptz,          -- the worker's cue: a revocation's end, a member's expiry
    restep      boolean NOT NULL DEFAULT false -- a step skipped a guarded partition: the next looks at all
);
SELECT pg_catalog.pg_extension_config_dump('leaderlock_groups', '');
CREATE INDEX leaderlock_groups_check_idx ON leaderlock_groups (check_at);
CREATE INDEX leaderlock_groups_owner_idx ON leaderlock_groups (owner);
CREATE TABLE leaderlock_members (
    grp        text NOT NULL,
    member     text NOT NULL,
    session    uuid NOT NULL,         -- its session: a member lives and dies with it
    joined_at  timestamptz NOT NULL,
    PRIMARY KEY (grp, member)
);
SELECT pg_catalog.pg_extension_config_dump('leaderlock_members', '');
-- A partition's row stays while its group does: its terms only grow.
CREATE TABLE leaderlock_partitions (
    grp          text NOT NULL,
    partition    integer NOT NULL,
    member       text,                -- its owner, NULL: nobody
    session      uuid,                -- the owner's session it was granted under
    term         bigint NOT NULL,     -- its fencing term, issued at each grant
    revoke_until timestamptz,         -- revoked: given back (acked) or granted to another from then
    next_member  text,                -- revoked: whom it goes to (an ack grants it at once)
    acked        boolean NOT NULL,
    changed_at   timestamptz NOT NULL,
    PRIMARY KEY (grp, partition)
);
SELECT pg_catalog.pg_extension_config_dump('leaderlock_partitions', '');
-- A member's partitions (le_assignment, every round of every member).
CREATE INDEX leaderlock_partitions_member_idx ON leaderlock_partitions (grp, member)
    WHERE member IS NOT NULL;
-- A group's revocations, by their end (a due step looks for one ended).
CREATE INDEX leaderlock_partitions_revoking_idx ON leaderlock_partitions (grp, revoke_until)
    WHERE revoke_until IS NOT NULL;
REVOKE ALL ON leaderlock_groups FROM PUBLIC;
GRANT SELECT ON leaderlock_groups TO PUBLIC;
REVOKE ALL ON leaderlock_members FROM PUBLIC;
GRANT SELECT ON leaderlock_members TO PUBLIC;
REVOKE ALL ON leaderlock_partitions FROM PUBLIC;
GRANT SELECT ON leaderlock_partitions TO PUBLIC;

-- Contract 26: every partition of every group with its owner, term and
-- state (owned; revoked, with until; free) and whether the session it was
-- granted under is live; partitions above a group's count only while
-- someone still owns them. Readable by all.
CREATE VIEW leaderlock_group_status AS
SELECT p.grp AS "group", p.partition, p.member, p.term,
       CASE WHEN p.member IS NULL THEN 'free'
            WHEN p.revoke_until IS NULL THEN 'owned'
            ELSE 'revoked' END AS state,
       p.revoke_until AS until,
       COALESCE(s.expires_at OPERATOR(pg_catalog.>) c.now, false) AS live,
       p.changed_at
  FROM leaderlock_partitions p
  JOIN leaderlock_groups g ON g.grp OPERATOR(pg_catalog.=) p.grp
 CROSS JOIN (SELECT @extschema@.le_now() AS now) c
  LEFT JOIN leaderlock_sessions s ON s.session OPERATOR(pg_catalog.=) p.session
 WHERE p.partition OPERATOR(pg_catalog.<=) g.partitions OR p.member IS NOT NULL;
REVOKE ALL ON leaderlock_group_status FROM PUBLIC;
GRANT SELECT ON leaderlock_group_status TO PUBLIC;

CREATE FUNCTION le_expect_leader(key text, within interval) RETURNS boolean
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'le_expect_leader_wrapper';
ALTER FUNCTION le_expect_leader(text, interval) SET enable_seqscan = off;

CREATE FUNCTION le_unexpect_leader(key text) RETURNS boolean
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'le_unexpect_leader_wrapper';
ALTER FUNCTION le_unexpect_leader(text) SET enable_seqscan = off;

-- Contract 26: groups.
CREATE FUNCTION le_join(
    "group" text, member text, ttl interval, partitions integer DEFAULT NULL,
    drain interval DEFAULT NULL
) RETURNS uuid
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'le_join_wrapper';
CREATE FUNCTION le_leave("group" text, member text) RETURNS boolean
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'le_leave_wrapper';
CREATE FUNCTION le_ack("group" text, member text, partition integer, term bigint) RETURNS boolean
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'le_ack_wrapper';
CREATE FUNCTION le_assignment("group" text, member text)
RETURNS TABLE (partition integer, term bigint, state text, until timestamptz)
STABLE PARALLEL SAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'le_assignment_wrapper';
CREATE FUNCTION le_assert_partition("group" text, partition integer, member text,
                                    term bigint DEFAULT NULL)
RETURNS bigint
VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
LANGUAGE c AS 'MODULE_PATHNAME', 'le_assert_partition_c';
ALTER FUNCTION le_join(text, text, interval, integer, interval) SET enable_seqscan = off;
ALTER FUNCTION le_leave(text, text) SET enable_seqscan = off;
ALTER FUNCTION le_ack(text, text, integer, bigint) SET enable_seqscan = off;
ALTER FUNCTION le_assignment(text, text) SET enable_seqscan = off;

-- Contract 21: sessions.
CREATE FUNCTION le_open_session(
    id text, ttl interval, session_bound boolean DEFAULT false, lock_delay interval DEFAULT '0',
    keep_values boolean DEFAULT false
) RETURNS uuid
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'le_open_session_wrapper';
ALTER FUNCTION le_open_session(text, interval, boolean, interval, boolean) SET enable_seqscan = off;

CREATE FUNCTION le_renew_session(session uuid, ttl interval DEFAULT NULL) RETURNS boolean
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'le_renew_session_wrapper';
ALTER FUNCTION le_renew_session(uuid, interval) SET enable_seqscan = off;

CREATE FUNCTION le_close_session(session uuid) RETURNS boolean
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'le_close_session_wrapper';
ALTER FUNCTION le_close_session(uuid) SET enable_seqscan = off;

CREATE FUNCTION le_try_acquire_in(
    session uuid, key text, value jsonb DEFAULT NULL, slots integer DEFAULT 1
) RETURNS boolean
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'le_try_acquire_in_wrapper';
ALTER FUNCTION le_try_acquire_in(uuid, text, jsonb, integer) SET enable_seqscan = off;

CREATE FUNCTION le_acquire_in(
    session uuid, key text, wait interval, value jsonb DEFAULT NULL, slots integer DEFAULT 1,
    priority integer DEFAULT 0
) RETURNS boolean
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'le_acquire_in_wrapper';
ALTER FUNCTION le_acquire_in(uuid, text, interval, jsonb, integer, integer) SET enable_seqscan = off;

-- Last: no function or type outside the extension may have the name of one
-- of its functions (src/ddl/names_guard.sql, whose header says why). The
-- COMMENT at its end refuses the update where one exists already.
CREATE FUNCTION leaderlock_names_guard() RETURNS event_trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $guard$
DECLARE
    extension oid;
    lookalike record;
BEGIN
    SELECT e.oid INTO extension FROM pg_catalog.pg_extension e WHERE e.extname = 'leaderlock';
    IF extension IS NULL THEN
        RETURN; -- being dropped
    END IF;
    WITH ours AS (
        SELECT d.classid, d.objid FROM pg_catalog.pg_depend d
         WHERE d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass
           AND d.refobjid = extension AND d.deptype = 'e'
    ), api AS (
        SELECT p.proname AS name FROM pg_catalog.pg_proc p JOIN ours o
            ON o.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND o.objid = p.oid
    )
    SELECT x.oid, x.name, x.kind INTO lookalike FROM (
        SELECT p.oid, p.proname AS name, 'function'::text AS kind,
               'pg_catalog.pg_proc'::pg_catalog.regclass AS classid
          FROM pg_catalog.pg_proc p WHERE p.proname IN (SELECT name FROM api)
        UNION ALL
        SELECT t.oid, t.typname, 'type', 'pg_catalog.pg_type'::pg_catalog.regclass
          FROM pg_catalog.pg_type t WHERE t.typname IN (SELECT name FROM api)
    ) x
     WHERE NOT EXISTS (SELECT 1 FROM ours o WHERE o.classid = x.classid AND o.objid = x.oid)
     LIMIT 1;
    IF lookalike.oid IS NOT NULL THEN
        -- The name is one of ours (equal to it), so it is safe to print.
        RAISE EXCEPTION USING
            ERRCODE = 'insufficient_privilege',
            MESSAGE = pg_catalog.format(
                'leaderlock: "%s" is the name of a leaderlock function; no other %s may '
                'have it in this database', lookalike.name, lookalike.kind),
            DETAIL = pg_catalog.format(
                'The %s with OID %s would be chosen by some calls of leaderlock''s "%s" and '
                'run as the caller.', lookalike.kind, lookalike.oid, lookalike.name),
            HINT = 'Give it another name (or drop it, or install leaderlock in another database).';
    END IF;
END
$guard$;

REVOKE ALL ON FUNCTION @extschema@.leaderlock_names_guard() FROM PUBLIC;

CREATE EVENT TRIGGER leaderlock_names_guard ON ddl_command_end
    EXECUTE FUNCTION @extschema@.leaderlock_names_guard();
-- Also under session_replication_role = replica (a superuser's setting).
ALTER EVENT TRIGGER leaderlock_names_guard ENABLE ALWAYS;

-- The extension's indexes stay (SECURITY.md): the owner of the schema it
-- is installed in (on PostgreSQL 15 and later the database's owner owns
-- public) may drop any object in it, and plain indexes, unlike tables,
-- cannot be extension members. Without them every renewal of many keys
-- and the worker's checks scan the table, and a later update naming an
-- index fails. A DROP that takes one of them (an index of leaderlock's
-- name pattern in its schema) while no table goes with it is refused; a
-- DROP EXTENSION, or of the schema with it, finds the extension gone and
-- passes. (An administrator who must drop one: ALTER EVENT TRIGGER
-- leaderlock_index_guard DISABLE first.)
CREATE FUNCTION leaderlock_index_guard() RETURNS event_trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $guard$
DECLARE
    home name;
    gone text;
BEGIN
    SELECT n.nspname INTO home FROM pg_catalog.pg_extension e
      JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace
     WHERE e.extname OPERATOR(pg_catalog.=) 'leaderlock'::pg_catalog.name;
    IF home IS NULL THEN
        RETURN; -- being dropped
    END IF;
    SELECT o.object_name INTO gone FROM pg_catalog.pg_event_trigger_dropped_objects() o
     WHERE o.object_type OPERATOR(pg_catalog.=) 'index'
       AND o.schema_name OPERATOR(pg_catalog.=) home::pg_catalog.text
       AND o.object_name OPERATOR(pg_catalog.~) '^leaderlock_.*_idx$'
       AND NOT EXISTS (SELECT FROM pg_catalog.pg_event_trigger_dropped_objects() t
                        WHERE t.object_type OPERATOR(pg_catalog.=) 'table')
     LIMIT 1;
    IF gone IS NOT NULL THEN
        -- The name is one of ours (it matched the pattern): safe to print.
        RAISE EXCEPTION USING
            ERRCODE = 'insufficient_privilege',
            MESSAGE = pg_catalog.format('leaderlock: index "%s" is leaderlock''s and stays', gone),
            DETAIL = 'Without it, calls and the background worker scan the table, and updates of '
                     'the extension fail.',
            HINT = 'A superuser who must drop it disables the event trigger leaderlock_index_guard '
                   'first.';
    END IF;
END
$guard$;

REVOKE ALL ON FUNCTION @extschema@.leaderlock_index_guard() FROM PUBLIC;

CREATE EVENT TRIGGER leaderlock_index_guard ON sql_drop
    EXECUTE FUNCTION @extschema@.leaderlock_index_guard();
ALTER EVENT TRIGGER leaderlock_index_guard ENABLE ALWAYS;


-- A DDL command: the guard's first run, which refuses the install (or the
-- update) where a look-alike exists already.
COMMENT ON FUNCTION @extschema@.leaderlock_names_guard() IS
    'leaderlock: refuses functions and types named like leaderlock''s functions';

-- Contract 23: reading the history (the same as ddl/history.sql).
-- The transitions numbered after position `after` (0: from the first,
-- an error once any was pruned), in position order, at most `max_rows`, for one key (for_key) or the keys
-- starting with `key_prefix` when given. A position already pruned is an
-- error (LE002), not an empty answer: the reader missed transitions.
CREATE FUNCTION le_history(after bigint DEFAULT 0, for_key text DEFAULT NULL,
                           key_prefix text DEFAULT NULL, max_rows integer DEFAULT 1000)
RETURNS TABLE ("position" bigint, at timestamptz, event text, key text, holder text,
               term bigint, role regrole, payload jsonb)
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    pruned bigint;
BEGIN
    IF $1 IS NULL OR $1 < 0 THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('leaderlock: after must be 0 or a history position, not %s',
                             coalesce($1::text, 'NULL'));
    END IF;
    IF $4 IS NULL OR $4 < 1 OR $4 > 100000 THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('leaderlock: max_rows must be between 1 and 100000, not %s',
                             coalesce($4::text, 'NULL'));
    END IF;
    IF $2 IS NOT NULL AND $3 IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = 'leaderlock: give for_key or key_prefix, not both';
    END IF;
    SELECT h.pruned_through INTO pruned FROM @extschema@.leaderlock_history_head h;
    IF $1 < pruned THEN
        RAISE EXCEPTION USING ERRCODE = 'LE002',
            MESSAGE = format('leaderlock: history position %s is no longer kept: positions up to %s '
                             'were pruned', $1, pruned),
            DETAIL = 'Transitions after it were deleted by the retention (leaderlock.history_retention, '
                     'leaderlock.history_max_rows) before they were read.',
            HINT = 'Read the current state (leaderlock_status), then resume from le_history_position().';
    END IF;
    RETURN QUERY
        SELECT h.position, h.at, h.event, h.key, h.holder, h.term, h.role::regrole, h.payload
          FROM @extschema@.leaderlock_history h
         WHERE h.position > $1
           AND ($2 IS NULL OR h.key = $2)
           AND ($3 IS NULL OR starts_with(h.key, $3))
         ORDER BY h.position
         LIMIT $4;
END
$fn$;

-- The last position numbered (0 before the first): where a reader that
-- wants only what happens from now on starts.
CREATE FUNCTION le_history_position() RETURNS bigint
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN greatest((SELECT max(h.position) FROM @extschema@.leaderlock_history h),
                (SELECT h.pruned_through FROM @extschema@.leaderlock_history_head h), 0::bigint);
