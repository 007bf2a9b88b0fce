-- leaderlock schema: the lease table, its status view and privileges.
-- Contract sections 2, 3 (view) and 7.

-- leaderlock reads keys and ids as UTF-8: refuse other encodings at once.
DO $$
BEGIN
    IF pg_catalog.getdatabaseencoding() OPERATOR(pg_catalog.<>) 'UTF8' THEN
        RAISE EXCEPTION USING
            ERRCODE = 'feature_not_supported',
            MESSAGE = pg_catalog.format('leaderlock supports UTF8 databases only; this one is %s',
                                        pg_catalog.getdatabaseencoding()),
            HINT = 'Create the extension in a database created with ENCODING ''UTF8''.';
    END IF;
END
$$;

CREATE TABLE leaderlock (
    key         text PRIMARY KEY,
    holder      text,                 -- NULL when vacant (released, or expired by the worker)
    term        bigint NOT NULL,      -- fencing token: +1 on every new tenure, never reused
    acquired_at timestamptz,          -- start of the current term
    renewed_at  timestamptz,          -- last successful acquire or renew
    expires_at  timestamptz,          -- renewed_at + ttl (after a failover: at least promotion + ttl)
    ttl         interval,             -- ttl of the last acquire or renew
    recheck_at  timestamptz,          -- when the worker looks at the lease next: <= expires_at
    value       jsonb,                -- the leader's value (contract 11); NULL when vacant
    session_pid integer,              -- session-bound lease (contract 10): the acquiring
    session_start timestamptz,        -- backend's pid and start (pg_stat_activity.backend_start)
    owner       oid,                  -- role that acquired the tenure (contract 13); NULL when vacant.
                                      -- An OID, not regrole: a dump restores into any cluster.
    tenures     bigint NOT NULL DEFAULT 0,  -- contract 14: tenures started,
    releases    bigint NOT NULL DEFAULT 0,  -- released (le_release, le_force_release),
    expiries    bigint NOT NULL DEFAULT 0,  -- expired (lapsed, or session ended)
    changed_at  timestamptz,          -- last change of holder (a new tenure, release or expiry)
    slots       integer NOT NULL DEFAULT 1, -- contract 17: holders admitted at once; above 1, the
                                      -- tenures are in leaderlock_slots and this row holds no
                                      -- holder, only the key's last term and its counters
    session     uuid,                 -- contract 21: the session the tenure is held under, whose
                                      -- row has its expiry (expires_at is then infinity); kept
                                      -- when vacated, meaningless without a holder
    delayed_until timestamptz         -- contract 21: a session's lock-delay: vacant, but not
                                      -- acquirable by anyone before this instant
) WITH (fillfactor = 50);             -- room on each page for HOT renewals

-- The worker finds lapsed leases through this index only. It is on
-- recheck_at, not expires_at, so that a renewal (which moves expires_at)
-- changes no indexed column and is a HOT update; recheck_at moves only when
-- it would come within half a ttl of now, or past the new expiry.
CREATE INDEX leaderlock_recheck_at_idx ON leaderlock (recheck_at) WHERE holder IS NOT NULL;
-- The worker finds the leases of an ended session through this one; a
-- renewal does not touch session_pid, so it stays HOT.
CREATE INDEX leaderlock_session_idx ON leaderlock (session_pid) WHERE session_pid IS NOT NULL;
-- A session's end finds its keys through this one.
CREATE INDEX leaderlock_session_keys_idx ON leaderlock (session) WHERE session IS NOT NULL;
-- le_renew_all and le_release_all (contract 16) find a holder's leases
-- through this one; a renewal does not touch holder, so it stays HOT.
CREATE INDEX leaderlock_holder_idx ON leaderlock (holder) WHERE holder IS NOT NULL;

-- Contract 17: the tenures of a key that admits more than one holder, one
-- row per slot (1 to the key's slots), kept when vacated and taken again.
-- Terms come from the key's row in leaderlock, one sequence for all slots.
-- Not session-bound (contract 10 applies to keys of one slot).
CREATE TABLE leaderlock_slots (
    key         text NOT NULL,
    slot        integer NOT NULL,     -- 1 to the key's slots
    holder      text,                 -- NULL when vacant
    term        bigint NOT NULL,      -- this tenure's term, from the key's sequence
    acquired_at timestamptz,
    renewed_at  timestamptz,
    expires_at  timestamptz,
    ttl         interval,
    recheck_at  timestamptz,          -- the worker's cue, as in leaderlock
    value       jsonb,
    owner       oid,                  -- role that acquired the tenure (contract 13)
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
    recheck_at  timestamptz NOT NULL, -- the worker's cue, as a lease's: <= expires_at (an ended
                                      -- row that could not go yet: when it was marked)
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

-- Contract 8.2: the WAL timeline on which held leases were last made to
-- outlast a failover (see failover.rs). One row. Not part of a dump: a
-- restore runs CREATE EXTENSION, which starts it afresh for its cluster.
CREATE TABLE leaderlock_failover (
    one_row    boolean PRIMARY KEY DEFAULT true CHECK (one_row),
    timeline   bigint NOT NULL,       -- a WAL timeline ID
    changed_at timestamptz            -- when held leases were last extended for a new timeline
);
-- The timeline of the last checkpoint: the current one, or, right after a
-- promotion, an older one, which only makes the first write extend held
-- leases once more (the safe direction).
INSERT INTO leaderlock_failover (timeline)
SELECT timeline_id FROM pg_catalog.pg_control_checkpoint();

-- Terms must survive pg_dump/restore too, so the rows are part of the dump.
SELECT pg_catalog.pg_extension_config_dump('leaderlock', '');

-- Contract 2.2: the lease clock, which every decision reads (the library's
-- le_now; the views below read it too). It runs no statement, so it pins
-- no search path: a SET clause would cost every row the statements compare.
CREATE FUNCTION le_now() RETURNS timestamptz
VOLATILE PARALLEL SAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'le_now_wrapper';

-- One clock reading per row keeps state and remaining consistent. A key of
-- one slot is its row of leaderlock, as before 0.5.0 (slot NULL); a key of
-- more (contract 17) shows one row per slot, with that tenure's holder. A
-- key held under a session (contract 21) shows its session's expiry (an
-- ended session's key not vacated yet: lapsed).
CREATE VIEW leaderlock_status AS
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
CREATE VIEW leaderlock_stats AS
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

-- Contract 22: scheduled runs. A job's terms come from one sequence for
-- all its runs, so a later run's claim fences off an earlier run's
-- runner. Its row goes once its runs all passed the retention, and the
-- row of job '' (a name no claim can use; made by the first such
-- deletion, so that a dump's copy of it restores) keeps the highest term
-- such a row had: a job made again starts above it, so no term is issued
-- twice (and, as the table's, the rows outlive a dump and restore).
CREATE TABLE leaderlock_jobs (
    job  text PRIMARY KEY,
    term bigint NOT NULL DEFAULT 0,   -- the job's last term issued
    pruned_before timestamptz,        -- its runs due before it were deleted (retention):
                                      -- they are never claimed again
    owner oid                         -- the role whose claim made it (leaderlock.max_jobs_per_role)
);
SELECT pg_catalog.pg_extension_config_dump('leaderlock_jobs', '');
-- The jobs a role made (counted when it makes another).
CREATE INDEX leaderlock_jobs_owner_idx ON leaderlock_jobs (owner) WHERE owner IS NOT NULL;

-- One row per run (job, due instant), made by its first claim, deleted
-- once its due instant is older than leaderlock.run_retention.
CREATE TABLE leaderlock_runs (
    job         text NOT NULL,
    due         timestamptz NOT NULL, -- the run's due instant, on the lease clock (le_now)
    holder      text,                 -- the last claim's id, kept once finished
    term        bigint,               -- the last claim's term, from the job's sequence
    claimed_at  timestamptz,          -- when the last claim was made
    expires_at  timestamptz,          -- the last claim's end unless renewed
    ttl         interval,             -- ttl of the last claim or renewal
    finished_at timestamptz,          -- set once: finished, or recorded missed
    outcome     text CHECK (outcome IN ('succeeded', 'failed', 'missed', 'replaced')),
    detail      text,                 -- the runner's short detail, or why missed
    attempts    integer NOT NULL DEFAULT 0,  -- claims made (more than one: a runner was lost)
    owner       oid,                  -- role of the last claim (contract 13)
    backfilled_at timestamptz,        -- recorded missed, then taken up again then (contract 24)
    PRIMARY KEY (job, due)
);
SELECT pg_catalog.pg_extension_config_dump('leaderlock_runs', '');
-- Runs not finished yet: what a promotion extends (failover.rs) and what
-- "running" lists. Renewals change no column of it: HOT.
CREATE INDEX leaderlock_runs_unfinished_idx ON leaderlock_runs (job, due) WHERE finished_at IS NULL;
-- The runs the retention deletes, whatever their job.
CREATE INDEX leaderlock_runs_due_idx ON leaderlock_runs (due);
-- The runs recorded missed or taken up again (contract 24's backfill), so
-- that a job's latest are found without reading its other runs.
CREATE INDEX leaderlock_runs_missed_idx ON leaderlock_runs (job, due)
    WHERE outcome = 'missed' OR backfilled_at IS NOT NULL;

-- Contract 24: a job's schedule, kept in the database and owned by the
-- role that made it (contract 13). The worker records as missed every due
-- instant after settled_to whose grace has passed and that no claim took,
-- then moves settled_to past it, in one transaction: each instant once,
-- across restarts and failovers (the run's row is the record).
CREATE TABLE leaderlock_schedules (
    job           text PRIMARY KEY,
    every         interval,            -- runs at every multiple of it since the Unix epoch
    cron          text,                -- or by a cron expression, as given
    tz            text NOT NULL DEFAULT 'UTC',  -- the cron expression's time zone
    misfire_grace interval NOT NULL,   -- a due instant not claimed within it is missed
    overlap       text NOT NULL DEFAULT 'allow' CHECK (overlap IN ('allow', 'forbid', 'replace')),
    paused        boolean NOT NULL DEFAULT false,
    active_since  timestamptz NOT NULL, -- made, changed or resumed then: no instant before is judged
    settled_to    timestamptz NOT NULL, -- every due instant up to it was claimed or recorded missed
    next_check    timestamptz,         -- when the next instant's grace ends (NULL: paused)
    owner         oid NOT NULL,        -- the role that made it
    changed_at    timestamptz NOT NULL,
    backfill      integer NOT NULL DEFAULT 0 CHECK (backfill BETWEEN 0 AND 100),  -- latest missed instants a replica may run late
    CHECK ((every IS NULL) <> (cron IS NULL))
);
SELECT pg_catalog.pg_extension_config_dump('leaderlock_schedules', '');
-- What the worker looks at next (contract 24), whatever the table's size.
CREATE INDEX leaderlock_schedules_check_idx ON leaderlock_schedules (next_check)
    WHERE next_check IS NOT NULL;

-- Contract 25: keys expected to be led, each marked by its owner (13).
-- The worker records in the history each interval in which a marked key
-- had no live holder for longer than its bound (start and end exact).
CREATE TABLE leaderlock_expected (
    key              text PRIMARY KEY,
    within           interval NOT NULL,  -- the longest it may stay without a live holder
    owner            oid NOT NULL,       -- the role that marked it
    marked_at        timestamptz NOT NULL, -- no interval starts before it
    leaderless_since timestamptz,        -- the open interval's start (recorded), else NULL
    intervals        bigint NOT NULL DEFAULT 0,  -- leaderless intervals recorded
    leaderless_total interval NOT NULL DEFAULT '0', -- the ended intervals' length
    next_check       timestamptz NOT NULL
);
SELECT pg_catalog.pg_extension_config_dump('leaderlock_expected', '');
CREATE INDEX leaderlock_expected_check_idx ON leaderlock_expected (next_check);
CREATE INDEX leaderlock_expected_owner_idx ON leaderlock_expected (owner);

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

-- What le_lease returns (contract 11).
CREATE TYPE leaderlock_lease AS (
    key        text,
    holder     text,                  -- the live holder, else NULL
    term       bigint,
    expires_at timestamptz,
    remaining  interval,              -- NULL unless live
    value      jsonb                  -- the live holder's value, else NULL
);

-- Readable by all; written only by the extension's functions, which act as
-- the table's owner for their own statements (src/call.rs).
REVOKE ALL ON leaderlock FROM PUBLIC;
GRANT SELECT ON leaderlock TO PUBLIC;
REVOKE ALL ON leaderlock_status FROM PUBLIC;
GRANT SELECT ON leaderlock_status TO PUBLIC;
REVOKE ALL ON leaderlock_stats FROM PUBLIC;
GRANT SELECT ON leaderlock_stats TO PUBLIC;
REVOKE ALL ON leaderlock_failover FROM PUBLIC;
GRANT SELECT ON leaderlock_failover TO PUBLIC;
REVOKE ALL ON leaderlock_slots FROM PUBLIC;
GRANT SELECT ON leaderlock_slots TO PUBLIC;
REVOKE ALL ON leaderlock_jobs FROM PUBLIC;
GRANT SELECT ON leaderlock_jobs TO PUBLIC;
REVOKE ALL ON leaderlock_runs FROM PUBLIC;
GRANT SELECT ON leaderlock_runs TO PUBLIC;
REVOKE ALL ON leaderlock_sessions FROM PUBLIC;
GRANT SELECT ON leaderlock_sessions TO PUBLIC;
REVOKE ALL ON leaderlock_schedules FROM PUBLIC;
GRANT SELECT ON leaderlock_schedules TO PUBLIC;
REVOKE ALL ON leaderlock_expected FROM PUBLIC;
GRANT SELECT ON leaderlock_expected TO PUBLIC;
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
