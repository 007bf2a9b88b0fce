-- leaderlock, portable edition 0.5.0-portable
--
-- The SQL API of leaderlock 0.5.0 (contract sections 2-4, 6-9, 11, 13, 14, 16, 17, 21-26)
-- in plain SQL and PL/pgSQL: no shared library, no shared_preload_libraries,
-- for managed PostgreSQL (RDS, Cloud SQL, Azure, Supabase, Neon, ...).
--
-- Install into a schema of its own, owned by the installing admin role (no
-- superuser), e.g.:
--
--     psql -c 'CREATE SCHEMA leaderlock'
--     PGOPTIONS='-c search_path=leaderlock' psql -v ON_ERROR_STOP=1 -1 -f portable/leaderlock.sql
--
-- Everything is created in the current schema (the first existing schema of
-- search_path). The install refuses a schema the installing role does not
-- own, or where another role has CREATE (public on PostgreSQL 15+), and a
-- name that needs quoting; each call checks the schema again.
-- The functions name the schema they were installed in, qualified, in their
-- bodies: do not rename that schema afterwards (reinstall instead).
-- The same file is the extension script leaderlock--0.5.0-portable.sql
-- (CREATE EXTENSION leaderlock, see portable/README.md) and the body given
-- to pgtle.install_extension on RDS.
--
-- Differences from the compiled edition (contract section 19; each is
-- described in portable/README.md):
--
-- * No background worker. A lapsed lease is turned vacant and announced
--   "expired" (the worker's JSON, "reason":"ttl") by the next call that
--   writes the key (le_try_acquire, le_acquire, le_renew, le_release,
--   le_proclaim), or by le_expire_lapsed(), which vacates and announces
--   every lapsed lease and returns how many: schedule it (pg_cron, every
--   second) or call it from clients, in autocommit (what it vacates stays
--   locked until its transaction ends). A refused le_renew, le_release or
--   le_proclaim changes and locks nothing. le_worker_running() is false.
--   A takeover of a lapsed lease announces "expired" for the old tenure and
--   then "acquired" with previous_holder set, in its own transaction. The
--   same holds for each tenure of a key of many slots (contract 17): a
--   candidate taking a lapsed slot, and le_expire_lapsed, announce its end.
--   le_expire_lapsed() also does the worker's rounds of contracts 24 and
--   25: it records each due instant of a schedule kept in the database
--   whose misfire grace ended unclaimed as a missed run (run_missed), and
--   checks the keys expected to be led (leaderless, leaderless_end); so
--   misses and leaderless intervals are recorded when anything calls it,
--   not within a second of them.
-- * le_acquire waits by polling inside the call: it looks again after
--   10 ms, then 1.5 times longer each time up to 100 ms, never sleeping past
--   the holder's expires_at (for a key of many slots: the earliest
--   tenure's) or the wait's end. pg_sleep is interruptible:
--   statement_timeout, pg_cancel_backend and pg_terminate_backend end the
--   wait as in the compiled edition. Each look runs in a subtransaction
--   rolled back unless it acquired, so a waiter holds no lock while asleep.
-- * session_bound => true raises SQLSTATE 0A000 (nothing would end the
--   lease with its session), whatever the slots; so does le_open_session's.
-- * Sessions (contract 21): no worker ends a lapsed session. The next
--   acquisition that touches one of its keys ends it first (every key and
--   every slot of a key of many slots it holds vacated and announced
--   "expired", "reason":"session_expired", its lock-delay counted from its
--   expiry), in the caller's transaction (a look of le_acquire that takes
--   nothing rolls it back), and so does le_expire_lapsed(), which counts
--   their keys and slots.
-- * Groups (contract 26): no worker steps a group when a revocation's time
--   runs out or a member's session lapses. le_expire_lapsed() does (up to
--   100 groups a call), and so does a member's renewal (le_join) of a
--   group due a step, if no other transaction holds the group's row.
-- * le_capabilities() says "priority": false: contract 18 (le_acquire's
--   priority, le_candidates) is the compiled edition's only.
-- * leaderlock_database_stats exists but is always empty (the per-database
--   counters live in the compiled edition's shared memory), as the compiled
--   edition's is without the preload.
-- * leaderlock.max_ttl and leaderlock.max_wait are read with
--   current_setting(): without the library they are placeholder settings
--   that any role may SET for its own session (compiled: superuser only).
--   Unset, they are 1 day and 5 minutes. The retention settings
--   (leaderlock.history_retention, leaderlock.history_max_rows,
--   leaderlock.run_retention) delete other roles' rows: they are read from
--   pg_db_role_setting (ALTER DATABASE ... SET, else ALTER ROLE ALL SET),
--   never from the session (_le_admin_setting).
-- * Contract 8.2 (held leases outlast a promotion): the promotion is
--   recorded in leaderlock_failover only, and liveness is computed as
--   greatest(expires_at, promotion + ttl), for the claims of scheduled runs
--   (contract 22) too; no held row is rewritten or locked (compiled: the
--   worker extends every held row).
-- * Writers are SECURITY INVOKER and pass current_user, the role that owns
--   the leases it takes (contract 13), to internal SECURITY DEFINER
--   functions (_le_*) that alone write the table, as its owner. Those accept
--   a role only if the session's role (SET ROLE, else session_user) is
--   able to SET ROLE to it (16+: SET option; 14/15: membership); so le_*
--   called inside a SECURITY DEFINER function of a role the session cannot
--   SET ROLE to raises 42501 (compiled: acts as that function's owner).
--   They act only for the role that was current_user in the le_* function
--   that called them (a caller key only that role can compute, see
--   _le_caller_key): another role's code cannot name the session's role.
--   The _le_* entry points check every argument themselves and refuse
--   inside any security-restricted operation (ANALYZE, autovacuum, CREATE
--   INDEX, ...), as compiled.
-- * Errors come from PL/pgSQL: same SQLSTATE, message and hint, plus a
--   CONTEXT field naming the PL/pgSQL function.

DO $leaderlock_install$
DECLARE
    schema_name text := pg_catalog.current_schema();
    target text := pg_catalog.quote_ident(pg_catalog.current_schema());
    old_path text := pg_catalog.current_setting('search_path');
    me oid;
    ns record;
    others text;
    ddl text;
BEGIN
    -- Everything below, and the DDL (whose SQL-standard bodies and CHECK
    -- expressions are bound now), resolves in pg_catalog only: no function
    -- or operator of any schema on the installer's search_path is used.
    PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
    IF schema_name IS NULL THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_schema_name',
            MESSAGE = 'leaderlock: no schema to install into (search_path names no existing schema)',
            HINT = 'CREATE SCHEMA leaderlock; then install with PGOPTIONS=''-c search_path=leaderlock''.';
    END IF;
    -- The name is written into the functions' bodies: only names that need
    -- no quoting (lower case letters, digits, _; not a keyword).
    IF pg_catalog.quote_ident(schema_name) OPERATOR(pg_catalog.<>) schema_name
       OR schema_name OPERATOR(pg_catalog.!~) '^[a-z_][a-z0-9_]*$' THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_name',
            MESSAGE = pg_catalog.format('leaderlock: cannot install into schema %s: the name needs quoting',
                                        target),
            HINT = 'Use a schema whose name is lower case letters, digits and underscores, e.g. leaderlock.';
    END IF;
    -- The SECURITY DEFINER functions run as the installing role and call
    -- the edition's functions in this schema: it must be that role's alone.
    SELECT r.oid INTO me FROM pg_catalog.pg_roles r WHERE r.rolname OPERATOR(pg_catalog.=) current_user;
    SELECT n.oid, n.nspowner, n.nspacl INTO ns FROM pg_catalog.pg_namespace n
     WHERE n.nspname OPERATOR(pg_catalog.=) schema_name;
    IF ns.nspowner OPERATOR(pg_catalog.<>) me THEN
        RAISE EXCEPTION USING
            ERRCODE = 'insufficient_privilege',
            MESSAGE = pg_catalog.format('leaderlock: cannot install into schema %s: it is owned by role %s, not by %s',
                                        target, ns.nspowner::pg_catalog.regrole, current_user::text),
            DETAIL = 'The owner of the schema could replace the functions that leaderlock''s SECURITY '
                     'DEFINER functions call (on PostgreSQL 15 and later, public is owned by pg_database_owner).',
            HINT = 'Install into a schema of its own, owned by the installing role: CREATE SCHEMA leaderlock; '
                   'then PGOPTIONS=''-c search_path=leaderlock'' psql -1 -f leaderlock.sql.';
    END IF;
    SELECT pg_catalog.string_agg(CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0::oid THEN 'PUBLIC'
                                      ELSE a.grantee::pg_catalog.regrole::text END, ', ')
      INTO others
      FROM pg_catalog.aclexplode(ns.nspacl) a
     WHERE a.privilege_type OPERATOR(pg_catalog.=) 'CREATE' AND a.grantee OPERATOR(pg_catalog.<>) ns.nspowner;
    IF others IS NOT NULL THEN
        RAISE EXCEPTION USING
            ERRCODE = 'insufficient_privilege',
            MESSAGE = pg_catalog.format('leaderlock: cannot install into schema %s: other roles may create objects in it (%s)',
                                        target, others),
            HINT = pg_catalog.format('Install into a schema of its own (CREATE SCHEMA leaderlock), or REVOKE CREATE ON SCHEMA %s FROM %s.',
                                     target, others);
    END IF;
    -- Review round 2, N4: nor may the schema hold objects of other roles,
    -- made before (while they could create in it): a function there, e.g.
    -- le_try_acquire(text, text, text), would be chosen over leaderlock's
    -- by every caller's unknown-typed literals, and run as each caller.
    SELECT pg_catalog.string_agg(o.what, ', ') INTO others FROM (
        SELECT pg_catalog.format('function %s (owner %s)', p.oid::pg_catalog.regprocedure,
                                 p.proowner::pg_catalog.regrole) AS what
          FROM pg_catalog.pg_proc p
         WHERE p.pronamespace OPERATOR(pg_catalog.=) ns.oid AND p.proowner OPERATOR(pg_catalog.<>) me
        UNION ALL
        SELECT pg_catalog.format('relation %s (owner %s)', c.oid::pg_catalog.regclass, c.relowner::pg_catalog.regrole)
          FROM pg_catalog.pg_class c
         WHERE c.relnamespace OPERATOR(pg_catalog.=) ns.oid AND c.relowner OPERATOR(pg_catalog.<>) me
        UNION ALL
        SELECT pg_catalog.format('type %s (owner %s)', t.oid::pg_catalog.regtype, t.typowner::pg_catalog.regrole)
          FROM pg_catalog.pg_type t
         WHERE t.typnamespace OPERATOR(pg_catalog.=) ns.oid AND t.typowner OPERATOR(pg_catalog.<>) me
        UNION ALL
        SELECT pg_catalog.format('operator %s (owner %s)', o.oid::pg_catalog.regoperator, o.oprowner::pg_catalog.regrole)
          FROM pg_catalog.pg_operator o
         WHERE o.oprnamespace OPERATOR(pg_catalog.=) ns.oid AND o.oprowner OPERATOR(pg_catalog.<>) me
        UNION ALL
        SELECT pg_catalog.format('collation %s', x.collname) FROM pg_catalog.pg_collation x
         WHERE x.collnamespace OPERATOR(pg_catalog.=) ns.oid AND x.collowner OPERATOR(pg_catalog.<>) me
        UNION ALL
        SELECT pg_catalog.format('conversion %s', x.conname) FROM pg_catalog.pg_conversion x
         WHERE x.connamespace OPERATOR(pg_catalog.=) ns.oid AND x.conowner OPERATOR(pg_catalog.<>) me
        UNION ALL
        SELECT pg_catalog.format('operator class %s', x.opcname) FROM pg_catalog.pg_opclass x
         WHERE x.opcnamespace OPERATOR(pg_catalog.=) ns.oid AND x.opcowner OPERATOR(pg_catalog.<>) me
        UNION ALL
        SELECT pg_catalog.format('operator family %s', x.opfname) FROM pg_catalog.pg_opfamily x
         WHERE x.opfnamespace OPERATOR(pg_catalog.=) ns.oid AND x.opfowner OPERATOR(pg_catalog.<>) me
        UNION ALL
        SELECT pg_catalog.format('text search configuration %s', x.cfgname) FROM pg_catalog.pg_ts_config x
         WHERE x.cfgnamespace OPERATOR(pg_catalog.=) ns.oid AND x.cfgowner OPERATOR(pg_catalog.<>) me
        UNION ALL
        SELECT pg_catalog.format('text search dictionary %s', x.dictname) FROM pg_catalog.pg_ts_dict x
         WHERE x.dictnamespace OPERATOR(pg_catalog.=) ns.oid AND x.dictowner OPERATOR(pg_catalog.<>) me
        UNION ALL
        SELECT pg_catalog.format('statistics object %s', x.stxname) FROM pg_catalog.pg_statistic_ext x
         WHERE x.stxnamespace OPERATOR(pg_catalog.=) ns.oid AND x.stxowner OPERATOR(pg_catalog.<>) me
    ) o;
    IF others IS NOT NULL THEN
        RAISE EXCEPTION USING
            ERRCODE = 'insufficient_privilege',
            MESSAGE = pg_catalog.format('leaderlock: cannot install into schema %s: it holds objects of other roles: %s',
                                        target, others),
            DETAIL = 'Functions and operators there would be chosen by calls that name leaderlock''s, and run '
                     'as each caller.',
            HINT = 'Install into a new schema of its own (CREATE SCHEMA leaderlock), or drop those objects first.';
    END IF;
    -- leaderlock reads keys and ids as UTF-8: refuse other encodings at once.
    IF pg_catalog.getdatabaseencoding() OPERATOR(pg_catalog.<>) 'UTF8' THEN
        RAISE EXCEPTION USING
            ERRCODE = 'feature_not_supported',
            MESSAGE = pg_catalog.format('leaderlock supports UTF8 databases only; this one is %s',
                                        pg_catalog.getdatabaseencoding()),
            HINT = 'Install it in a database created with ENCODING ''UTF8''.';
    END IF;

    ddl := $ddl$

-- ---------------------------------------------------------------------------
-- Schema: the same table, index, views and type as the compiled 0.5.0.
-- ---------------------------------------------------------------------------

-- The same columns, types and order as the compiled edition's table. The
-- CHECK constraints hold there too (its functions enforce the same limits):
-- a row no call of the API could write cannot be written at all.
CREATE TABLE @extschema@.leaderlock (
    key         text PRIMARY KEY,
    holder      text,                 -- NULL when vacant (released, or expired)
    term        bigint NOT NULL,      -- fencing token: +1 on every new tenure, never reused
    acquired_at timestamptz,          -- start of the current term
    renewed_at  timestamptz,          -- last successful acquire or renew
    expires_at  timestamptz,          -- renewed_at + ttl (after a failover the lease lasts at least until promotion + ttl, see leaderlock_failover)
    ttl         interval,             -- ttl of the last acquire or renew
    recheck_at  timestamptz,          -- the compiled worker's cue: <= expires_at (kept up to date here too)
    value       jsonb,                -- the leader's value (contract 11); NULL when vacant
    session_pid integer,              -- session-bound lease (contract 10): always NULL in
    session_start timestamptz,        -- the portable edition
    owner       oid,                  -- role that acquired the tenure (contract 13); NULL when vacant
    tenures     bigint NOT NULL DEFAULT 0,  -- contract 14: tenures started,
    releases    bigint NOT NULL DEFAULT 0,  -- released (le_release, le_force_release),
    expiries    bigint NOT NULL DEFAULT 0,  -- expired (lapsed)
    changed_at  timestamptz,          -- last change of holder (a new tenure, release or expiry)
    slots       integer NOT NULL DEFAULT 1,  -- contract 17: holders admitted at once; above 1,
                                      -- the tenures are in leaderlock_slots and this row holds
                                      -- no holder, only the key's last term and its counters
    session     uuid,                 -- contract 21: the session the tenure is held under, whose
                                      -- row has its expiry (expires_at and recheck_at are then
                                      -- infinity); kept when vacated, meaningless without a holder
    delayed_until timestamptz,        -- contract 21: a session's lock-delay: vacant, but not
                                      -- acquirable by anyone before this instant
    CONSTRAINT leaderlock_key_check CHECK (octet_length(key) BETWEEN 1 AND 255),
    CONSTRAINT leaderlock_holder_check CHECK (holder IS NULL OR octet_length(holder) BETWEEN 1 AND 255),
    CONSTRAINT leaderlock_lease_check CHECK (holder IS NULL OR (expires_at IS NOT NULL AND ttl IS NOT NULL
        AND ttl > interval '0' AND ttl <= interval '2147483647 seconds')),
    CONSTRAINT leaderlock_value_check CHECK (value IS NULL OR octet_length(value::text) <= 2000),
    CONSTRAINT leaderlock_term_check CHECK (term >= 0::bigint),
    CONSTRAINT leaderlock_slots_check CHECK (slots BETWEEN 1 AND 1000 AND (slots = 1 OR holder IS NULL))
) WITH (fillfactor = 50);

CREATE INDEX leaderlock_recheck_at_idx ON @extschema@.leaderlock (recheck_at) WHERE holder IS NOT NULL;
CREATE INDEX leaderlock_session_idx ON @extschema@.leaderlock (session_pid) WHERE session_pid IS NOT NULL;
-- A session's end finds its keys through this one (contract 21).
CREATE INDEX leaderlock_session_keys_idx ON @extschema@.leaderlock (session) WHERE session IS NOT NULL;
-- le_renew_all and le_release_all (contract 16) find a holder's leases
-- through this one; a renewal does not touch holder, so it stays HOT.
CREATE INDEX leaderlock_holder_idx ON @extschema@.leaderlock (holder) WHERE holder IS NOT NULL;

-- Contract 17: the tenures of a key that admits more than one holder, one
-- row per slot (1 to the key's slots), kept when vacated and taken again:
-- the compiled edition's table, column for column, with CHECK constraints
-- as above. Terms come from the key's row in leaderlock, one sequence for
-- all slots, issued under that row's lock; holders never lock that row. A
-- tenure held under a session (contract 21) is stored as a key of one slot
-- held under one is, and only the session's end vacates it.
CREATE TABLE @extschema@.leaderlock_slots (
    key         text NOT NULL,
    slot        integer NOT NULL,     -- 1 to the key's slots
    holder      text,                 -- NULL when vacant
    term        bigint NOT NULL,      -- this tenure's term, from the key's sequence
    acquired_at timestamptz,
    renewed_at  timestamptz,
    expires_at  timestamptz,          -- as in leaderlock (after a failover: see leaderlock_failover)
    ttl         interval,
    recheck_at  timestamptz,          -- the compiled worker's cue, as in leaderlock
    value       jsonb,
    owner       oid,                  -- role that acquired the tenure (contract 13)
    releases    bigint NOT NULL DEFAULT 0,
    expiries    bigint NOT NULL DEFAULT 0,
    changed_at  timestamptz,
    session     uuid,                 -- contract 21: held under this session (expires_at and
                                      -- recheck_at infinity, the session's row has the expiry);
                                      -- kept when vacated, meaningless without a holder
    delayed_until timestamptz,        -- contract 21: a session's lock-delay: vacant, but not
                                      -- acquirable by anyone before this instant
    PRIMARY KEY (key, slot),
    CONSTRAINT leaderlock_slots_key_check CHECK (octet_length(key) BETWEEN 1 AND 255),
    CONSTRAINT leaderlock_slots_slot_check CHECK (slot BETWEEN 1 AND 1000),
    CONSTRAINT leaderlock_slots_holder_check CHECK (holder IS NULL OR octet_length(holder) BETWEEN 1 AND 255),
    CONSTRAINT leaderlock_slots_lease_check CHECK (holder IS NULL OR (expires_at IS NOT NULL AND ttl IS NOT NULL
        AND ttl > interval '0' AND ttl <= interval '2147483647 seconds')),
    CONSTRAINT leaderlock_slots_value_check CHECK (value IS NULL OR octet_length(value::text) <= 2000),
    CONSTRAINT leaderlock_slots_term_check CHECK (term >= 0::bigint)
) WITH (fillfactor = 50);
CREATE INDEX leaderlock_slots_recheck_at_idx ON @extschema@.leaderlock_slots (recheck_at) WHERE holder IS NOT NULL;
CREATE INDEX leaderlock_slots_holder_idx ON @extschema@.leaderlock_slots (holder) WHERE holder IS NOT NULL;
-- A session's end finds its tenures through this one (contract 21).
CREATE INDEX leaderlock_slots_session_idx ON @extschema@.leaderlock_slots (session) WHERE session IS NOT NULL;

-- Contract 21: sessions, the compiled edition's table column for column,
-- with CHECK constraints as above. One row per session, live or lapsed,
-- deleted when it ends (closed, or ended lapsed: its keys vacated in the
-- same transaction) once no key is held under it, at READ COMMITTED, with
-- no acquisition under it in flight (else kept, lapsed, and ended again:
-- no key names a session whose row is gone). A renewal writes this row
-- alone, whatever the number of keys held under it; an acquisition under
-- it holds it FOR KEY SHARE (a close waits for it, a renewal and the end
-- of a lapsed session do not; the row is deleted after it).
CREATE TABLE @extschema@.leaderlock_sessions (
    session     uuid PRIMARY KEY,     -- the handle: random (gen_random_uuid), never reused
    id          text NOT NULL,        -- the holder id of every key acquired under it
    owner       oid NOT NULL,         -- the role that opened it (contract 13)
    ttl         interval NOT NULL,    -- ttl of the last open or renewal
    opened_at   timestamptz NOT NULL,
    renewed_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL, -- on the lease clock, as a lease's (after a failover: see leaderlock_failover)
    recheck_at  timestamptz NOT NULL, -- the compiled worker's cue, as a lease's: <= expires_at
    lock_delay  interval NOT NULL,    -- after it expires, its keys are not acquirable for this long
    keep_values boolean NOT NULL,     -- its keys keep their values when vacated
    session_pid integer,              -- bound to its connection (contract 10): always NULL in
    session_start timestamptz,        -- the portable edition
    CONSTRAINT leaderlock_sessions_id_check CHECK (octet_length(id) BETWEEN 1 AND 255),
    CONSTRAINT leaderlock_sessions_ttl_check CHECK (ttl > interval '0' AND ttl <= interval '2147483647 seconds'),
    CONSTRAINT leaderlock_sessions_lock_delay_check CHECK (lock_delay >= interval '0'
        AND lock_delay <= interval '2147483647 seconds')
) WITH (fillfactor = 50);
CREATE INDEX leaderlock_sessions_recheck_at_idx ON @extschema@.leaderlock_sessions (recheck_at);
-- le_renew_all (contract 16) finds an id's sessions through this one.
CREATE INDEX leaderlock_sessions_id_idx ON @extschema@.leaderlock_sessions (id);
CREATE INDEX leaderlock_sessions_pid_idx ON @extschema@.leaderlock_sessions (session_pid) WHERE session_pid IS NOT NULL;

-- Contract 22: scheduled runs, the compiled edition's tables column for
-- column, with CHECK constraints as above. A job's terms come from its row
-- in leaderlock_jobs, one sequence for all its runs (a later run's claim
-- fences off an earlier run's runner), issued under that row's lock, which
-- only claims take (never waiting). The row goes once its runs all passed
-- the retention (le_expire_lapsed, _le_prune_runs), and the row of job ''
-- (a name no claim can use; made by the first such deletion, so that a
-- dump's copy of it restores: absent, it counts as 0) keeps the highest
-- term such a row had: a job made again starts above it, so no term is
-- issued twice. A role that is not a superuser makes at most
-- leaderlock.max_jobs_per_role of the rows kept (owner).
CREATE TABLE @extschema@.leaderlock_jobs (
    job  text PRIMARY KEY,
    term bigint NOT NULL DEFAULT 0,   -- the job's last term issued
    pruned_before timestamptz,        -- its runs due before it were deleted (retention):
                                      -- they are never claimed again
    owner oid,                        -- the role whose claim made it (leaderlock.max_jobs_per_role)
    CONSTRAINT leaderlock_jobs_job_check CHECK (octet_length(job) BETWEEN 1 AND 255
        OR (job = '' AND pruned_before IS NULL AND owner IS NULL)),
    CONSTRAINT leaderlock_jobs_term_check CHECK (term >= 0::bigint)
);
-- The jobs a role made (counted when it makes another).
CREATE INDEX leaderlock_jobs_owner_idx ON @extschema@.leaderlock_jobs (owner) WHERE owner IS NOT NULL;

-- One row per run (job, due instant), made by its first claim, deleted
-- once its due instant is older than leaderlock.run_retention (by a claim
-- of a new run of its job, and by le_expire_lapsed for every job).
CREATE TABLE @extschema@.leaderlock_runs (
    job         text NOT NULL,
    due         timestamptz NOT NULL, -- the run's due instant, on the lease clock (le_now)
    holder      text,                 -- the last claim's id, kept once finished
    term        bigint,               -- the last claim's term, from the job's sequence
    claimed_at  timestamptz,          -- when the last claim was made
    expires_at  timestamptz,          -- the last claim's end unless renewed (after a failover: see leaderlock_failover)
    ttl         interval,             -- ttl of the last claim or renewal
    finished_at timestamptz,          -- set once: finished, or recorded missed
    outcome     text CHECK (outcome IN ('succeeded', 'failed', 'missed', 'replaced')),
    detail      text,                 -- the runner's short detail, or why missed
    attempts    integer NOT NULL DEFAULT 0,  -- claims made (more than one: a runner was lost)
    owner       oid,                  -- role of the last claim (contract 13)
    backfilled_at timestamptz,        -- recorded missed, then taken up again then (contract 24)
    PRIMARY KEY (job, due),
    CONSTRAINT leaderlock_runs_job_check CHECK (octet_length(job) BETWEEN 1 AND 255),
    CONSTRAINT leaderlock_runs_due_check CHECK (isfinite(due)),
    CONSTRAINT leaderlock_runs_holder_check CHECK (holder IS NULL OR octet_length(holder) BETWEEN 1 AND 255),
    CONSTRAINT leaderlock_runs_claim_check CHECK (holder IS NULL OR (term IS NOT NULL AND expires_at IS NOT NULL
        AND ttl IS NOT NULL AND ttl > interval '0' AND ttl <= interval '2147483647 seconds')),
    CONSTRAINT leaderlock_runs_term_check CHECK (term >= 0::bigint),
    CONSTRAINT leaderlock_runs_finished_check CHECK ((finished_at IS NULL) = (outcome IS NULL)),
    CONSTRAINT leaderlock_runs_detail_check CHECK (detail IS NULL OR octet_length(detail) <= 1000),
    CONSTRAINT leaderlock_runs_attempts_check CHECK (attempts >= 0)
);
-- Runs not finished yet. Renewals change no column of it: HOT.
CREATE INDEX leaderlock_runs_unfinished_idx ON @extschema@.leaderlock_runs (job, due) WHERE finished_at IS NULL;
-- The runs the retention deletes, whatever their job.
CREATE INDEX leaderlock_runs_due_idx ON @extschema@.leaderlock_runs (due);
-- The runs recorded missed or taken up again (contract 24's backfill), so
-- that a job's latest are found without reading its other runs.
CREATE INDEX leaderlock_runs_missed_idx ON @extschema@.leaderlock_runs (job, due)
    WHERE outcome = 'missed' OR backfilled_at IS NOT NULL;

-- Contract 24: a job's schedule kept in the database, the compiled
-- edition's table column for column, with CHECK constraints as above. One
-- row per scheduled job, made and changed by its owner (le_schedule); its
-- instants whose misfire grace ended are settled (claimed, or recorded
-- missed) up to settled_to, by le_expire_lapsed here (compiled: the
-- worker), which looks at it again at next_check.
CREATE TABLE @extschema@.leaderlock_schedules (
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
    CHECK ((every IS NULL) <> (cron IS NULL)),
    CONSTRAINT leaderlock_schedules_job_check CHECK (octet_length(job) BETWEEN 1 AND 255),
    CONSTRAINT leaderlock_schedules_every_check CHECK (every >= interval '1 second'),
    CONSTRAINT leaderlock_schedules_grace_check CHECK (misfire_grace >= interval '0')
);
-- What le_expire_lapsed looks at next, whatever the table's size.
CREATE INDEX leaderlock_schedules_check_idx ON @extschema@.leaderlock_schedules (next_check)
    WHERE next_check IS NOT NULL;

-- Contract 25: keys expected to be led, each marked by its owner (13), the
-- compiled edition's table column for column, with CHECK constraints as
-- above. le_expire_lapsed (compiled: the worker) records in the history
-- each interval in which a marked key had no live holder for longer than
-- its bound (start and end exact).
CREATE TABLE @extschema@.leaderlock_expected (
    key              text PRIMARY KEY,
    within           interval NOT NULL,  -- the longest it may stay without a live holder
    owner            oid NOT NULL,       -- the role that marked it
    marked_at        timestamptz NOT NULL, -- no interval starts before it
    leaderless_since timestamptz,        -- the open interval's start (recorded), else NULL
    intervals        bigint NOT NULL DEFAULT 0,  -- leaderless intervals recorded
    leaderless_total interval NOT NULL DEFAULT '0', -- the ended intervals' length
    next_check       timestamptz NOT NULL,
    CONSTRAINT leaderlock_expected_key_check CHECK (octet_length(key) BETWEEN 1 AND 255),
    CONSTRAINT leaderlock_expected_within_check CHECK (within >= interval '1 second'),
    CONSTRAINT leaderlock_expected_intervals_check CHECK (intervals >= 0::bigint
        AND leaderless_total >= interval '0')
);
CREATE INDEX leaderlock_expected_check_idx ON @extschema@.leaderlock_expected (next_check);
CREATE INDEX leaderlock_expected_owner_idx ON @extschema@.leaderlock_expected (owner);

-- Contract 26: groups, the compiled edition's tables column for column,
-- with CHECK constraints as above. A group's partitions are each owned by
-- at most one live member; a member lives as a session (contract 21).
-- Every change of a group runs under its row's lock (_le_group_settle).
CREATE TABLE @extschema@.leaderlock_groups (
    grp         text PRIMARY KEY,
    partitions  integer NOT NULL CHECK (partitions BETWEEN 1 AND 100000),
    drain       interval NOT NULL,    -- how long a live owner has to give a revoked partition back
    owner       oid NOT NULL,         -- the role whose join made it (contract 13)
    changed_at  timestamptz NOT NULL,
    check_at    timestamptz,          -- le_expire_lapsed's cue: a revocation's end, a member's expiry
    restep      boolean NOT NULL DEFAULT false, -- a step skipped a guarded partition: the next looks at all
    CONSTRAINT leaderlock_groups_grp_check CHECK (octet_length(grp) BETWEEN 1 AND 255),
    CONSTRAINT leaderlock_groups_drain_check CHECK (drain >= interval '0')
);
CREATE INDEX leaderlock_groups_check_idx ON @extschema@.leaderlock_groups (check_at);
CREATE INDEX leaderlock_groups_owner_idx ON @extschema@.leaderlock_groups (owner);
CREATE TABLE @extschema@.leaderlock_members (
    grp        text NOT NULL,
    member     text NOT NULL,
    session    uuid NOT NULL,         -- its session: a member lives and dies with it
    joined_at  timestamptz NOT NULL,
    PRIMARY KEY (grp, member),
    CONSTRAINT leaderlock_members_member_check CHECK (octet_length(member) BETWEEN 1 AND 255)
);
-- A partition's row stays while its group does: its terms only grow.
CREATE TABLE @extschema@.leaderlock_partitions (
    grp          text NOT NULL,
    partition    integer NOT NULL,
    member       text,                -- its owner, NULL: nobody
    session      uuid,                -- the owner's session it was granted under
    term         bigint NOT NULL,     -- its fencing term, issued at each grant
    revoke_until timestamptz,         -- revoked: given back (acked) or granted to another from then
    next_member  text,                -- revoked: whom it goes to (an ack grants it at once)
    acked        boolean NOT NULL,
    changed_at   timestamptz NOT NULL,
    PRIMARY KEY (grp, partition),
    CONSTRAINT leaderlock_partitions_check CHECK (partition >= 1 AND term >= 0::bigint)
);
-- A member's partitions (le_assignment, every round of every member).
CREATE INDEX leaderlock_partitions_member_idx ON @extschema@.leaderlock_partitions (grp, member)
    WHERE member IS NOT NULL;
-- A group's first revocation to end (a step due by time).
CREATE INDEX leaderlock_partitions_revoking_idx ON @extschema@.leaderlock_partitions (grp, revoke_until)
    WHERE revoke_until IS NOT NULL;

-- Contract 8.2: the WAL timeline of the last promotion leaderlock saw, and
-- when it saw it. One row. A lease held then lasts at least until
-- changed_at + its ttl (computed at each read: held rows are never locked
-- on behalf of another caller).
CREATE TABLE @extschema@.leaderlock_failover (
    one_row    boolean PRIMARY KEY DEFAULT true CHECK (one_row),
    timeline   bigint NOT NULL,
    changed_at timestamptz
);

-- Contract 23: every transition, recorded by the transaction that makes it
-- (with its notification) in leaderlock_history_pending, without a
-- position. le_expire_lapsed (the compiled edition's worker) moves the committed ones
-- here, numbered in commit order: a number drawn inside a transaction is
-- not commit order, so a reader resuming after position P could later
-- meet a row numbered below P. Numbered rows never change.
CREATE TABLE @extschema@.leaderlock_history (
    position bigint PRIMARY KEY,      -- unique, growing with commit order
    at       timestamptz NOT NULL,    -- the transition's instant (lease clock)
    event    text NOT NULL,           -- the notification's event
    key      text,                    -- the lease's key, or the run's job
    holder   text,
    term     bigint,
    role     oid,                     -- the role whose call made it; NULL: the worker
    payload  jsonb NOT NULL           -- the notification, as sent
);
-- The transitions waiting for a position, oldest recording first. Every
-- transition writes one, so this row is what every hand-over pays for: kept
-- light (one plain index, the payload as the text sent, parsed when
-- numbered), written once and deleted when numbered.
CREATE TABLE @extschema@.leaderlock_history_pending (
    seq      bigint GENERATED ALWAYS AS IDENTITY, -- order of recording (numbering follows it)
    at       timestamptz NOT NULL,
    event    text NOT NULL,
    key      text,
    holder   text,
    term     bigint,
    role     oid,
    payload  text NOT NULL
);
CREATE INDEX leaderlock_history_pending_seq_idx ON @extschema@.leaderlock_history_pending (seq);
-- It has no primary key (on purpose: see above); every other table has
-- one. A publication that publishes deletes (FOR ALL TABLES: CDC, a
-- logical-replication migration) refuses a DELETE from a table without a
-- replica identity, which would stop the numbering (audit of 0.5.0, B).
-- FULL logs a deleted row whole, and only at wal_level = logical.
ALTER TABLE @extschema@.leaderlock_history_pending REPLICA IDENTITY FULL;
-- One row: its lock serializes the numbering (only the extension may lock
-- it); pruned_through: positions up to it are deleted (retention); kept:
-- how many numbered rows are kept, what leaderlock.history_max_rows bounds
-- (positions jump at a failover, so their difference is no count).
CREATE TABLE @extschema@.leaderlock_history_head (
    one_row boolean PRIMARY KEY DEFAULT true CHECK (one_row),
    pruned_through bigint NOT NULL DEFAULT 0,
    kept bigint NOT NULL DEFAULT 0
);
INSERT INTO @extschema@.leaderlock_history_head DEFAULT VALUES;
-- Who is calling (review round 2, N1). The SECURITY DEFINER entry points
-- act for a role only when the le_* function that called them proves it
-- ran as that role: _le_caller (SECURITY INVOKER) reads the caller key of
-- its current_user from the view _le_caller_key, which computes it from a
-- secret only the owner may read and current_user (evaluated as the role
-- that queries the view, never as its owner), and hands it to the entry
-- point in the setting leaderlock_portable.caller, which the entry point
-- checks and clears (_le_act_as). Code running as another role (its
-- own SECURITY DEFINER function called by a victim's session) can compute
-- only its own role's key. Nothing is written: a call that changes nothing
-- still assigns no transaction id.
CREATE TABLE @extschema@._le_secret (
    one_row boolean PRIMARY KEY DEFAULT true CHECK (one_row),
    secret  text NOT NULL CHECK (octet_length(secret) >= 64)
);

-- A key is good for one role, in one session, during one statement
-- (review round 3, P3): one captured by another role's code (a view or
-- trigger the victim used) is worthless after that statement.
CREATE FUNCTION @extschema@._le_key(secret text, role oid) RETURNS text
LANGUAGE sql STABLE PARALLEL RESTRICTED
SET search_path = pg_catalog, pg_temp
RETURN encode(sha256(convert_to(secret || ' ' || role::text || ' ' || pg_backend_pid()::text || ' '
                                || extract(epoch FROM statement_timestamp())::text, 'UTF8')), 'hex');

CREATE VIEW @extschema@._le_caller_key WITH (security_barrier) AS
SELECT r.oid AS role, @extschema@._le_key(s.secret, r.oid) AS key
  FROM @extschema@._le_secret s, pg_catalog.pg_roles r
 WHERE r.rolname = CURRENT_USER;

-- Review round 2, N2: the first sight of a promotion, visible to every
-- session at once. The record in leaderlock_failover is part of the
-- transaction of the call that makes it: until it commits, every held
-- lease counted as live for everyone else (now + its ttl), so one open
-- transaction kept every dead leader's lease live. Sequences are not
-- transactional: the first call that sees the new timeline stores when
-- (setval of _le_promo_at, then of _le_promo_tl), and every session
-- counts from there (at or after the promotion, so contract 8.2 holds).
-- Set once per timeline; readable by all, set only by the owner.
CREATE SEQUENCE @extschema@._le_promo_tl AS bigint MINVALUE 0 START 0;
CREATE SEQUENCE @extschema@._le_promo_at AS bigint MINVALUE 0 START 0;

-- When leases held across the last promotion last from (contract 8.2):
-- leaderlock_failover.changed_at, or now while a promotion is not yet
-- recorded (every held lease then counts as live). NULL: no promotion.
CREATE FUNCTION @extschema@._le_promoted_at() RETURNS timestamptz
LANGUAGE plpgsql VOLATILE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    f record;
    tl bigint;
    seen_tl bigint;
    seen_at timestamptz;
BEGIN
    SELECT x.timeline, x.changed_at INTO f FROM @extschema@.leaderlock_failover x WHERE x.one_row;
    -- the first sight of the last promotion (N2): timeline, then its time
    SELECT q.last_value INTO seen_tl FROM @extschema@._le_promo_tl q;
    SELECT 'epoch'::timestamptz + q.last_value * interval '1 microsecond' INTO seen_at
      FROM @extschema@._le_promo_at q;
    IF NOT pg_is_in_recovery() THEN
        tl := ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint;
        IF f.timeline IS NULL OR f.timeline < tl THEN
            -- not recorded yet (or not committed): from its first sight
            IF seen_tl = tl THEN
                RETURN seen_at;
            END IF;
            RETURN clock_timestamp();
        END IF;
    END IF;
    IF seen_tl = f.timeline AND f.changed_at IS NOT NULL THEN
        RETURN GREATEST(f.changed_at, seen_at);   -- never earlier than what was counted from
    END IF;
    RETURN f.changed_at;
END
$fn$;

-- Contract 21: when session p_session lasts until (p_promoted_at: its
-- _le_promoted_at(), as for leases), or -infinity when it no longer
-- exists. A key held under a session (leaderlock.session, its expires_at
-- infinity; a tenure of a key of many slots the same way, in
-- leaderlock_slots) is live exactly while its session is: every decision
-- on a key's liveness reads its end as
--   CASE WHEN l.session IS NULL OR l.holder IS NULL
--        THEN GREATEST(l.expires_at, promoted_at + l.ttl)
--        ELSE _le_session_lasts(l.session, promoted_at) END
-- (inline, so that a plain lease costs no function call).
CREATE FUNCTION @extschema@._le_session_lasts(p_session uuid, p_promoted_at timestamptz) RETURNS timestamptz
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN coalesce((SELECT GREATEST(x.expires_at, p_promoted_at + x.ttl)
                   FROM @extschema@.leaderlock_sessions x WHERE x.session = p_session),
                '-infinity'::timestamptz);

-- One clock reading for the whole view keeps state and remaining
-- consistent. A key of one slot is its row of leaderlock (slot NULL); a key
-- of more (contract 17) shows one row per slot, with that tenure's holder.
-- A key or tenure held under a session (contract 21) shows its session's
-- expiry (an ended session's key not vacated yet: lapsed).
CREATE VIEW @extschema@.leaderlock_status AS
WITH c AS (SELECT pg_catalog.clock_timestamp() AS now, @extschema@._le_promoted_at() AS promoted_at)
SELECT l.key, l.holder, l.term, l.acquired_at, l.renewed_at, l.lasts AS expires_at, l.ttl,
       CASE WHEN l.holder IS NULL THEN 'vacant'
            WHEN l.lasts > c.now THEN 'held'
            ELSE 'lapsed' END AS state,
       CASE WHEN l.holder IS NOT NULL AND l.lasts > c.now
            THEN l.lasts - c.now END AS remaining,
       l.value, l.session_pid, l.owner::regrole AS owner,
       NULL::integer AS slot, l.slots,
       CASE WHEN l.holder IS NOT NULL THEN l.session END AS session
  FROM c
 CROSS JOIN LATERAL (SELECT x.*, CASE WHEN x.holder IS NULL THEN x.expires_at
                                      WHEN x.session IS NULL THEN GREATEST(x.expires_at, c.promoted_at + x.ttl)
                                      ELSE @extschema@._le_session_lasts(x.session, c.promoted_at) END AS lasts
                       FROM @extschema@.leaderlock x WHERE x.slots = 1) l
UNION ALL
SELECT s.key, s.holder, s.term, s.acquired_at, s.renewed_at, s.lasts, s.ttl,
       CASE WHEN s.holder IS NULL THEN 'vacant'
            WHEN s.lasts > c.now THEN 'held'
            ELSE 'lapsed' END,
       CASE WHEN s.holder IS NOT NULL AND s.lasts > c.now
            THEN s.lasts - c.now END,
       s.value, NULL::integer, s.owner::regrole, s.slot, s.slots,
       CASE WHEN s.holder IS NOT NULL THEN s.session END
  FROM c
 CROSS JOIN LATERAL (SELECT x.*, h.slots, CASE WHEN x.holder IS NULL THEN x.expires_at
                                               WHEN x.session IS NULL THEN GREATEST(x.expires_at, c.promoted_at + x.ttl)
                                               ELSE @extschema@._le_session_lasts(x.session, c.promoted_at) END AS lasts
                       FROM @extschema@.leaderlock h
                       JOIN @extschema@.leaderlock_slots x ON x.key = h.key AND x.slot <= h.slots
                      WHERE h.slots > 1) s;

-- Contract 14: how often each key changed hands; a key of many slots
-- counts every slot's releases and expiries (its tenures are counted in
-- its row of leaderlock).
CREATE VIEW @extschema@.leaderlock_stats AS
SELECT l.key, l.tenures,
       l.releases + COALESCE(s.releases, 0) AS releases,
       l.expiries + COALESCE(s.expiries, 0) AS expiries,
       GREATEST(l.changed_at, s.changed_at) AS changed_at,
       pg_catalog.date_part('epoch', c.now - GREATEST(l.changed_at, s.changed_at)) AS seconds_since_change,
       (l.holder IS NOT NULL
        AND CASE WHEN l.session IS NULL THEN GREATEST(l.expires_at, c.promoted_at + l.ttl)
                 ELSE @extschema@._le_session_lasts(l.session, c.promoted_at) END > c.now)
       OR COALESCE(s.held, false) AS held
  FROM (SELECT pg_catalog.clock_timestamp() AS now, @extschema@._le_promoted_at() AS promoted_at) c
 CROSS JOIN @extschema@.leaderlock l
  LEFT JOIN LATERAL (
       SELECT pg_catalog.sum(t.releases)::bigint AS releases,
              pg_catalog.sum(t.expiries)::bigint AS expiries,
              pg_catalog.max(t.changed_at) AS changed_at,
              pg_catalog.bool_or(t.holder IS NOT NULL
                  AND CASE WHEN t.session IS NULL THEN GREATEST(t.expires_at, c.promoted_at + t.ttl)
                           ELSE @extschema@._le_session_lasts(t.session, c.promoted_at) END > c.now) AS held
         FROM @extschema@.leaderlock_slots t
        WHERE t.key = l.key) s ON true;

CREATE TYPE @extschema@.leaderlock_lease AS (
    key        text,
    holder     text,
    term       bigint,
    expires_at timestamptz,
    remaining  interval,
    value      jsonb
);

-- ---------------------------------------------------------------------------
-- Small helpers (SECURITY INVOKER): input checks, settings, payloads.
-- ---------------------------------------------------------------------------

-- Contract 6: key or id: not NULL, not empty, at most 255 bytes.
CREATE FUNCTION @extschema@._le_name(arg text, v text) RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF v IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'null_value_not_allowed',
            MESSAGE = format('leaderlock: %s must not be NULL', arg);
    END IF;
    IF v = '' THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('leaderlock: %s must not be empty', arg);
    END IF;
    IF octet_length(v) > 255 THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('leaderlock: %s is %s bytes long; the limit is 255 bytes',
                             arg, octet_length(v));
    END IF;
END
$fn$;

-- Microseconds as a short duration, e.g. 86400s or 0.25s (input.rs seconds()).
CREATE FUNCTION @extschema@._le_seconds(us numeric) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN CASE WHEN us % 1000000::numeric = 0::numeric THEN (us / 1000000::numeric)::bigint::text || 's'
            ELSE rtrim(to_char(us / 1000000.0, 'FM999999999990.000000'), '0') || 's' END;

-- Audit of 0.5.0, A: the retention settings (leaderlock.history_retention,
-- leaderlock.history_max_rows, leaderlock.run_retention) decide what is
-- deleted of every role's transitions and runs: they are the
-- administrator's, never a caller's. Without the library they are
-- placeholders that any role may SET for its session (or PGOPTIONS), so
-- they are read from pg_db_role_setting, not current_setting(): ALTER
-- DATABASE <this database> SET, else ALTER ROLE ALL SET, else NULL (the
-- default). For a setting no library defines, the first needs a superuser
-- (on PostgreSQL 15+, or the database's owner granted SET ON PARAMETER),
-- the second a superuser. A role's ALTER ROLE ... SET (setrole <> 0),
-- postgresql.conf and ALTER SYSTEM never count. Read at each call.
CREATE FUNCTION @extschema@._le_admin_setting(setting text) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN (SELECT substr(c.item, strpos(c.item, '=') + 1)
          FROM pg_catalog.pg_db_role_setting s
               CROSS JOIN LATERAL unnest(s.setconfig) WITH ORDINALITY AS c(item, n)
         WHERE s.setrole = 0::oid
           AND (s.setdatabase = 0::oid
                OR s.setdatabase = (SELECT d.oid FROM pg_catalog.pg_database d
                                     WHERE d.datname = current_database()))
           AND lower(split_part(c.item, '=', 1)) = lower(setting)
         ORDER BY s.setdatabase = 0::oid, c.n DESC
         LIMIT 1);

-- A setting in microseconds (an integer of seconds, or a number with a
-- unit us, ms, s, min, h, d), or the default when unset: leaderlock.max_ttl
-- and leaderlock.max_wait as the session sees them; the retention settings
-- (leaderlock.history_retention, leaderlock.run_retention) as the
-- administrator set them (_le_admin_setting).
CREATE FUNCTION @extschema@._le_setting_us(name text, default_s bigint, min_s bigint, max_s bigint)
RETURNS numeric
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    raw text := btrim(coalesce(CASE WHEN lower(name) IN ('leaderlock.history_retention', 'leaderlock.run_retention',
                                                         'leaderlock.history_max_rows')
                                    THEN @extschema@._le_admin_setting(name)
                                    ELSE current_setting(name, true) END, ''));
    m text[];
    us numeric;
BEGIN
    IF raw = '' THEN
        RETURN default_s * 1000000::numeric;
    END IF;
    m := regexp_match(raw, '^([0-9]+)\s*(us|ms|s|min|h|d)?$');
    IF m IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('leaderlock: invalid value for parameter "%s": "%s"', name, raw),
            HINT = 'Give a whole number of seconds, or a number with a unit: ms, s, min, h or d.';
    END IF;
    us := m[1]::numeric * CASE coalesce(m[2], 's')
        WHEN 'us' THEN 1::numeric WHEN 'ms' THEN 1000::numeric WHEN 's' THEN 1000000::numeric
        WHEN 'min' THEN 60000000::numeric WHEN 'h' THEN 3600000000::numeric ELSE 86400000000::numeric END;
    -- The compiled edition's bounds of the setting (an integer GUC in seconds).
    IF us < min_s * 1000000::numeric OR us > max_s * 1000000::numeric THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('leaderlock: invalid value for parameter "%s": "%s"', name, raw),
            DETAIL = format('It must be between %ss and %ss, as in the compiled edition.', min_s, max_s);
    END IF;
    RETURN us;
END
$fn$;

-- An interval without months as microseconds (a day is 24 hours).
CREATE FUNCTION @extschema@._le_us(i interval) RETURNS numeric
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN extract(day FROM i) * 86400000000::numeric
     + extract(epoch FROM i - make_interval(days => extract(day FROM i)::integer)) * 1000000::numeric;

-- The same span with its day part as hours: what the compiled edition
-- stores (ttl) and returns (le_lease's remaining), exact in any time zone.
CREATE FUNCTION @extschema@._le_hours(i interval) RETURNS interval
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN i - make_interval(days => extract(day FROM i)::int)
         + make_interval(hours => 24 * extract(day FROM i)::int);

-- Contract 6: a ttl, or (le_acquire) a wait. Returns it normalized.
CREATE FUNCTION @extschema@._le_ttl(v interval, required boolean DEFAULT true) RETURNS interval
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    total numeric;
    max_us numeric;
BEGIN
    IF v IS NULL THEN
        IF required THEN
            RAISE EXCEPTION USING ERRCODE = 'null_value_not_allowed',
                MESSAGE = 'leaderlock: ttl must not be NULL';
        END IF;
        RETURN NULL;
    END IF;
    -- Review round 2, N7: an infinite interval (PostgreSQL 17+) is refused
    -- as such (not as one with a month or year part).
    IF NOT isfinite(v) THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('leaderlock: ttl must be finite (got %s)', v);
    END IF;
    IF extract(year FROM v) <> 0 OR extract(month FROM v) <> 0 THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('leaderlock: ttl must not have a month or year part (got %s)', v),
            HINT = 'A month has no fixed length; give the ttl in days, hours, minutes or seconds.';
    END IF;
    total := @extschema@._le_us(v);
    IF total <= 0::numeric THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('leaderlock: ttl must be positive (got %s)', v);
    END IF;
    max_us := @extschema@._le_setting_us('leaderlock.max_ttl'::text, 86400::bigint, 1::bigint, 2147483647::bigint);
    IF total > max_us THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('leaderlock: ttl %s is above leaderlock.max_ttl (%s)',
                             v, @extschema@._le_seconds(max_us)),
            HINT = 'Give a shorter ttl, or raise leaderlock.max_ttl (superuser).';
    END IF;
    -- (N7) a day part _le_hours cannot turn into hours, the total in range
    IF abs(extract(day FROM v)) > 24855 THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('leaderlock: ttl has a day part of %s days; the limit is 24855 days', extract(day FROM v)),
            HINT = 'Give it in hours, minutes or seconds.';
    END IF;
    RETURN @extschema@._le_hours(v);
END
$fn$;

CREATE FUNCTION @extschema@._le_wait(v interval) RETURNS interval
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    total numeric;
    max_us numeric;
BEGIN
    IF v IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'null_value_not_allowed',
            MESSAGE = 'leaderlock: wait must not be NULL',
            HINT = 'Give ''0'' to try once without waiting.';
    END IF;
    -- Review round 2, N7: an infinite interval (PostgreSQL 17+) is refused
    -- as such (not as one with a month or year part).
    IF NOT isfinite(v) THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('leaderlock: wait must be finite (got %s)', v);
    END IF;
    IF extract(year FROM v) <> 0 OR extract(month FROM v) <> 0 THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('leaderlock: wait must not have a month or year part (got %s)', v);
    END IF;
    total := @extschema@._le_us(v);
    IF total < 0::numeric THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('leaderlock: wait must not be negative (got %s)', v);
    END IF;
    max_us := @extschema@._le_setting_us('leaderlock.max_wait'::text, 300::bigint, 0::bigint, 86400::bigint);
    IF total > max_us THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('leaderlock: wait %s is above leaderlock.max_wait (%s)',
                             v, @extschema@._le_seconds(max_us)),
            HINT = 'A waiting statement holds its snapshot, which holds back vacuum: '
                   'wait in shorter rounds, or raise leaderlock.max_wait (superuser).';
    END IF;
    IF total > 0::numeric AND current_setting('transaction_isolation') IN ('repeatable read', 'serializable') THEN
        RAISE EXCEPTION USING ERRCODE = 'feature_not_supported',
            MESSAGE = 'leaderlock: le_acquire can wait only in a READ COMMITTED transaction',
            HINT = 'Under REPEATABLE READ or SERIALIZABLE the transaction''s snapshot never '
                   'sees the release; call it outside that transaction, or with wait ''0''.';
    END IF;
    -- (N7) a day part _le_hours cannot turn into hours, the total in range
    IF abs(extract(day FROM v)) > 24855 THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('leaderlock: wait has a day part of %s days; the limit is 24855 days', extract(day FROM v)),
            HINT = 'Give it in hours, minutes or seconds.';
    END IF;
    RETURN @extschema@._le_hours(v);
END
$fn$;

-- session_bound of a lease, and of le_open_session's session (contract 21).
CREATE FUNCTION @extschema@._le_session_bound(v boolean) RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF v IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'null_value_not_allowed',
            MESSAGE = 'leaderlock: session_bound must not be NULL';
    END IF;
    IF v THEN
        RAISE EXCEPTION USING ERRCODE = 'feature_not_supported',
            MESSAGE = 'leaderlock: session-bound leases need the compiled edition; this is the portable edition',
            HINT = 'Nothing here would end the lease with its session: use a plain lease with a short ttl, renewed often.';
    END IF;
END
$fn$;

-- Contract 21: a session's handle, not NULL.
CREATE FUNCTION @extschema@._le_session_arg(v uuid) RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF v IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'null_value_not_allowed',
            MESSAGE = 'leaderlock: session must not be NULL',
            HINT = 'Give the uuid le_open_session returned.';
    END IF;
END
$fn$;

-- Contract 21: keep_values of le_open_session, not NULL.
CREATE FUNCTION @extschema@._le_keep_values(v boolean) RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF v IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'null_value_not_allowed',
            MESSAGE = 'leaderlock: keep_values must not be NULL';
    END IF;
END
$fn$;

-- Contract 21: lock_delay of le_open_session: not NULL, 0 to 60 seconds
-- (as Consul's: one role that walked away keeps a session's keys from
-- everyone no longer) or leaderlock.max_ttl when lower, without a month or
-- year part (an infinite interval, PostgreSQL 17+, has one, as compiled).
-- Returns it normalized (its day part as hours, as a ttl).
CREATE FUNCTION @extschema@._le_lock_delay(v interval) RETURNS interval
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    max_us numeric;
    bad boolean;
BEGIN
    IF v IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'null_value_not_allowed',
            MESSAGE = 'leaderlock: lock_delay must not be NULL',
            HINT = 'Give ''0'' for no lock-delay.';
    END IF;
    max_us := LEAST(@extschema@._le_setting_us('leaderlock.max_ttl'::text, 86400::bigint, 1::bigint, 2147483647::bigint),
                    60000000::numeric);
    bad := NOT isfinite(v);
    IF NOT bad THEN
        bad := extract(year FROM v) <> 0 OR extract(month FROM v) <> 0;
    END IF;
    IF NOT bad THEN
        -- (above the bound also covers a day part _le_hours could not
        -- turn into hours)
        bad := @extschema@._le_us(v) < 0::numeric OR @extschema@._le_us(v) > max_us;
    END IF;
    IF bad THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('leaderlock: lock_delay must be between 0 and %s (and at most leaderlock.max_ttl) without a month or year part (got %s)',
                             @extschema@._le_seconds(max_us), v);
    END IF;
    RETURN @extschema@._le_hours(v);
END
$fn$;

CREATE FUNCTION @extschema@._le_value(v jsonb) RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF v IS NOT NULL AND octet_length(v::text) > 2000 THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('leaderlock: value is %s bytes as text; the limit is 2000 bytes',
                             octet_length(v::text)),
            HINT = 'Keep the value small (an address, a version); store more elsewhere.';
    END IF;
END
$fn$;

-- Contract 17: slots, 1 to 1000 (input.rs MAX_SLOTS; le_capabilities'
-- max_slots), of a lease or of an acquisition under a session (contract
-- 21). (session_bound => true is refused before, by _le_session_bound,
-- whatever the slots.) Returns it.
CREATE FUNCTION @extschema@._le_slots(v integer) RETURNS integer
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF v IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'null_value_not_allowed',
            MESSAGE = 'leaderlock: slots must not be NULL',
            HINT = 'Give 1 for a lease of one holder.';
    END IF;
    IF v < 1 OR v > 1000 THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('leaderlock: slots must be between 1 and 1000 (got %s)', v);
    END IF;
    RETURN v;
END
$fn$;

-- priority of le_acquire_in (contract 18): not NULL; other than 0 only in
-- the compiled edition ("priority": false in le_capabilities()).
CREATE FUNCTION @extschema@._le_priority(v integer) RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF v IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'null_value_not_allowed',
            MESSAGE = 'leaderlock: priority must not be NULL',
            HINT = 'Give 0 for the default priority.';
    END IF;
    IF v <> 0 THEN
        RAISE EXCEPTION USING ERRCODE = 'feature_not_supported',
            MESSAGE = 'leaderlock: priorities need the compiled edition; this is the portable edition',
            HINT = 'Give priority 0.';
    END IF;
END
$fn$;

-- A string as Rust's str::escape_debug writes it (the compiled edition's
-- messages quote keys so): backslash, quotes, \t \r \n, and other
-- control characters as \u{hex}.
CREATE FUNCTION @extschema@._le_escape_debug(v text) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    out text := '';
    c text;
    cp integer;
BEGIN
    FOR i IN 1 .. length(v) LOOP
        c := substr(v, i, 1);
        cp := ascii(c);
        out := out || CASE
            WHEN cp = 92 OR cp = 34 OR cp = 39 THEN chr(92) || c
            WHEN cp = 9 THEN chr(92) || 't'
            WHEN cp = 10 THEN chr(92) || 'n'
            WHEN cp = 13 THEN chr(92) || 'r'
            WHEN cp < 32 OR (cp >= 127 AND cp < 160) THEN chr(92) || 'u{' || to_hex(cp) || '}'
            ELSE c END;
    END LOOP;
    RETURN out;
END
$fn$;

-- Contract 17: acquiring a key that has live holders with another number
-- of slots than it admits raises 22023 and changes nothing.
CREATE FUNCTION @extschema@._le_slots_differ(p_key text, p_has integer, p_asked integer) RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
        MESSAGE = format('leaderlock: key "%s" admits %s holder(s) at once, not %s',
                         @extschema@._le_escape_debug(p_key), p_has, p_asked),
        DETAIL = 'While a key has live holders, every acquisition must give the same slots.',
        HINT = 'Give the key''s slots, or wait until it has no live holder to change them.';
END
$fn$;

-- Contract 22: due of the run functions: not NULL, finite.
CREATE FUNCTION @extschema@._le_due(v timestamptz) RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF v IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'null_value_not_allowed',
            MESSAGE = 'leaderlock: due must not be NULL';
    END IF;
    IF NOT isfinite(v) THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = 'leaderlock: due must be a finite instant';
    END IF;
END
$fn$;

-- Contract 22: a claim before its run is due (22023). Due instants are on
-- the server's lease clock, le_now() (here the wall clock, difference 12).
CREATE FUNCTION @extschema@._le_not_before_due(due timestamptz, at timestamptz) RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF $1 > $2 THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = 'leaderlock: the run is not due yet; it cannot be claimed before its due instant',
            DETAIL = format('It is due in %s.',
                            @extschema@._le_seconds((extract(epoch FROM $1) - extract(epoch FROM $2))
                                                    * 1000000::numeric)),
            HINT = 'Due instants are on the server''s lease clock: compare them with le_now().';
    END IF;
END
$fn$;

-- Contract 22: misfire_grace of le_claim_run: NULL (no limit), else not
-- negative and without a month or year part. Returns it in microseconds.
CREATE FUNCTION @extschema@._le_misfire_grace(v interval) RETURNS numeric
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    bad boolean;
BEGIN
    IF v IS NULL THEN
        RETURN NULL;
    END IF;
    -- (an infinite interval, PostgreSQL 17+, has a month part, as compiled)
    bad := NOT isfinite(v);
    IF NOT bad THEN
        bad := extract(year FROM v) <> 0 OR extract(month FROM v) <> 0;
    END IF;
    IF NOT bad THEN
        bad := @extschema@._le_us(v) < 0::numeric;
    END IF;
    IF bad THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('leaderlock: misfire_grace must not be negative nor have a month or year part (got %s)', v);
    END IF;
    RETURN @extschema@._le_us(v);
END
$fn$;

-- A term: NULL (required: le_finish_run's, 22004) or not negative.
CREATE FUNCTION @extschema@._le_term(v bigint, required boolean) RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF v IS NULL THEN
        IF required THEN
            RAISE EXCEPTION USING ERRCODE = 'null_value_not_allowed',
                MESSAGE = 'leaderlock: term must not be NULL',
                HINT = 'Give the term le_claim_run returned.';
        END IF;
        RETURN;
    END IF;
    IF v < 0 THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('leaderlock: term must not be negative (got %s)', v);
    END IF;
END
$fn$;

-- Contract 22: succeeded of le_finish_run, not NULL; the outcome it records.
CREATE FUNCTION @extschema@._le_outcome(succeeded boolean) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF $1 IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'null_value_not_allowed',
            MESSAGE = 'leaderlock: succeeded must not be NULL';
    END IF;
    RETURN CASE WHEN $1 THEN 'succeeded' ELSE 'failed' END;
END
$fn$;

-- Contract 22: detail of le_finish_run: NULL, or at most 1000 bytes (a
-- short note, not a log; input.rs MAX_DETAIL_BYTES).
CREATE FUNCTION @extschema@._le_detail(v text) RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF v IS NOT NULL AND octet_length(v) > 1000 THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('leaderlock: detail is %s bytes long; the limit is 1000 bytes', octet_length(v));
    END IF;
END
$fn$;

-- ---------------------------------------------------------------------------
-- Contract 24: the calendar of a schedule kept in the database, computed as
-- the compiled edition computes it (crates/protocol/src/calendar.rs, every
-- Rust replica's too): every P at its multiples since the Unix epoch, or a
-- cron expression in a time zone, read as the cron crate (0.17) reads it
-- after calendar.rs's own refusals (cron_fields), with the crate's rule
-- across daylight saving changes (a local time that does not exist is
-- skipped, one that occurs twice is due once, at its first instant, and the
-- next instant is always strictly after the one asked from). The same
-- refusals and messages. tests/portable/sql/calendar.sql compares these
-- functions with instants and messages the Rust calendar gave.
-- ---------------------------------------------------------------------------

-- A string as Rust's {:?} writes it (the compiled edition's messages quote
-- jobs, keys, expressions and time zones so): in double quotes, with
-- backslash, double quote, \t \r \n, and control characters as \u{hex}.
CREATE FUNCTION @extschema@._le_debug_str(v text) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    out text := '"';
    c text;
    cp integer;
BEGIN
    FOR i IN 1 .. length(v) LOOP
        c := substr(v, i, 1);
        cp := ascii(c);
        out := out || CASE
            WHEN cp = 92 OR cp = 34 THEN chr(92) || c
            WHEN cp = 9 THEN chr(92) || 't'
            WHEN cp = 10 THEN chr(92) || 'n'
            WHEN cp = 13 THEN chr(92) || 'r'
            WHEN cp < 32 OR (cp >= 127 AND cp < 160) OR cp = 173 OR cp BETWEEN 8203 AND 8207
                 OR cp BETWEEN 8232 AND 8238 OR cp BETWEEN 8288 AND 8292 OR cp = 65279
                THEN chr(92) || 'u{' || to_hex(cp) || '}'
            ELSE c END;
    END LOOP;
    RETURN out || '"';
END
$fn$;

-- Microseconds since the Unix epoch, and back (exact).
CREATE FUNCTION @extschema@._le_unix_us(t timestamptz) RETURNS numeric
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN extract(epoch FROM t) * 1000000::numeric;

CREATE FUNCTION @extschema@._le_from_unix_us(us numeric) RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN to_timestamp(0::float8) + div(us, 1000000::numeric)::float8 * interval '1 second'
                               + mod(us, 1000000::numeric)::float8 * interval '1 microsecond';

-- Microseconds as an interval of microseconds only (no day or month part:
-- what the compiled edition stores, base::ttl::micros_interval).
CREATE FUNCTION @extschema@._le_us_interval(us numeric) RETURNS interval
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN div(us, 1000000::numeric)::float8 * interval '1 second'
     + mod(us, 1000000::numeric)::float8 * interval '1 microsecond';

-- Every p_us microseconds: the first multiple of it since the Unix epoch
-- strictly after t (div_euclid, as calendar.rs).
CREATE FUNCTION @extschema@._le_every_next(p_us numeric, t timestamptz) RETURNS timestamptz
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    us numeric := @extschema@._le_unix_us(t);
    q numeric := div(us, p_us);
BEGIN
    IF mod(us, p_us) < 0::numeric THEN
        q := q - 1::numeric;
    END IF;
    RETURN @extschema@._le_from_unix_us((q + 1::numeric) * p_us);
END
$fn$;

-- The time zone names chrono-tz 0.10.4 reads (IANA 2025b; Tz::from_str,
-- case-sensitive): the compiled edition refuses every other name, and so
-- does this one (and a name this server's time zone database lacks).
CREATE FUNCTION @extschema@._le_tz_known(tz text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN tz = ANY (
    '{Africa/Abidjan,Africa/Accra,Africa/Addis_Ababa,Africa/Algiers,Africa/Asmara,Africa/Asmera,'
    'Africa/Bamako,Africa/Bangui,Africa/Banjul,Africa/Bissau,Africa/Blantyre,Africa/Brazzaville,'
    'Africa/Bujumbura,Africa/Cairo,Africa/Casablanca,Africa/Ceuta,Africa/Conakry,Africa/Dakar,'
    'Africa/Dar_es_Salaam,Africa/Djibouti,Africa/Douala,Africa/El_Aaiun,Africa/Freetown,Africa/Gaborone,'
    'Africa/Harare,Africa/Johannesburg,Africa/Juba,Africa/Kampala,Africa/Khartoum,Africa/Kigali,'
    'Africa/Kinshasa,Africa/Lagos,Africa/Libreville,Africa/Lome,Africa/Luanda,Africa/Lubumbashi,'
    'Africa/Lusaka,Africa/Malabo,Africa/Maputo,Africa/Maseru,Africa/Mbabane,Africa/Mogadishu,'
    'Africa/Monrovia,Africa/Nairobi,Africa/Ndjamena,Africa/Niamey,Africa/Nouakchott,Africa/Ouagadougou,'
    'Africa/Porto-Novo,Africa/Sao_Tome,Africa/Timbuktu,Africa/Tripoli,Africa/Tunis,Africa/Windhoek,'
    'America/Adak,America/Anchorage,America/Anguilla,America/Antigua,America/Araguaina,'
    'America/Argentina/Buenos_Aires,America/Argentina/Catamarca,America/Argentina/ComodRivadavia,'
    'America/Argentina/Cordoba,America/Argentina/Jujuy,America/Argentina/La_Rioja,'
    'America/Argentina/Mendoza,America/Argentina/Rio_Gallegos,America/Argentina/Salta,'
    'America/Argentina/San_Juan,America/Argentina/San_Luis,America/Argentina/Tucuman,'
    'America/Argentina/Ushuaia,America/Aruba,America/Asuncion,America/Atikokan,America/Atka,'
    'America/Bahia,America/Bahia_Banderas,America/Barbados,America/Belem,America/Belize,'
    'America/Blanc-Sablon,America/Boa_Vista,America/Bogota,America/Boise,America/Buenos_Aires,'
    'America/Cambridge_Bay,America/Campo_Grande,America/Cancun,America/Caracas,America/Catamarca,'
    'America/Cayenne,America/Cayman,America/Chicago,America/Chihuahua,America/Ciudad_Juarez,'
    'America/Coral_Harbour,America/Cordoba,America/Costa_Rica,America/Coyhaique,America/Creston,'
    'America/Cuiaba,America/Curacao,America/Danmarkshavn,America/Dawson,America/Dawson_Creek,'
    'America/Denver,America/Detroit,America/Dominica,America/Edmonton,America/Eirunepe,'
    'America/El_Salvador,America/Ensenada,America/Fort_Nelson,America/Fort_Wayne,America/Fortaleza,'
    'America/Glace_Bay,America/Godthab,America/Goose_Bay,America/Grand_Turk,America/Grenada,'
    'America/Guadeloupe,America/Guatemala,America/Guayaquil,America/Guyana,America/Halifax,'
    'America/Havana,America/Hermosillo,America/Indiana/Indianapolis,America/Indiana/Knox,'
    'America/Indiana/Marengo,America/Indiana/Petersburg,America/Indiana/Tell_City,America/Indiana/Vevay,'
    'America/Indiana/Vincennes,America/Indiana/Winamac,America/Indianapolis,America/Inuvik,'
    'America/Iqaluit,America/Jamaica,America/Jujuy,America/Juneau,America/Kentucky/Louisville,'
    'America/Kentucky/Monticello,America/Knox_IN,America/Kralendijk,America/La_Paz,America/Lima,'
    'America/Los_Angeles,America/Louisville,America/Lower_Princes,America/Maceio,America/Managua,'
    'America/Manaus,America/Marigot,America/Martinique,America/Matamoros,America/Mazatlan,'
    'America/Mendoza,America/Menominee,America/Merida,America/Metlakatla,America/Mexico_City,'
    'America/Miquelon,America/Moncton,America/Monterrey,America/Montevideo,America/Montreal,'
    'America/Montserrat,America/Nassau,America/New_York,America/Nipigon,America/Nome,America/Noronha,'
    'America/North_Dakota/Beulah,America/North_Dakota/Center,America/North_Dakota/New_Salem,America/Nuuk,'
    'America/Ojinaga,America/Panama,America/Pangnirtung,America/Paramaribo,America/Phoenix,'
    'America/Port-au-Prince,America/Port_of_Spain,America/Porto_Acre,America/Porto_Velho,'
    'America/Puerto_Rico,America/Punta_Arenas,America/Rainy_River,America/Rankin_Inlet,America/Recife,'
    'America/Regina,America/Resolute,America/Rio_Branco,America/Rosario,America/Santa_Isabel,'
    'America/Santarem,America/Santiago,America/Santo_Domingo,America/Sao_Paulo,America/Scoresbysund,'
    'America/Shiprock,America/Sitka,America/St_Barthelemy,America/St_Johns,America/St_Kitts,'
    'America/St_Lucia,America/St_Thomas,America/St_Vincent,America/Swift_Current,America/Tegucigalpa,'
    'America/Thule,America/Thunder_Bay,America/Tijuana,America/Toronto,America/Tortola,America/Vancouver,'
    'America/Virgin,America/Whitehorse,America/Winnipeg,America/Yakutat,America/Yellowknife,'
    'Antarctica/Casey,Antarctica/Davis,Antarctica/DumontDUrville,Antarctica/Macquarie,Antarctica/Mawson,'
    'Antarctica/McMurdo,Antarctica/Palmer,Antarctica/Rothera,Antarctica/South_Pole,Antarctica/Syowa,'
    'Antarctica/Troll,Antarctica/Vostok,Arctic/Longyearbyen,Asia/Aden,Asia/Almaty,Asia/Amman,Asia/Anadyr,'
    'Asia/Aqtau,Asia/Aqtobe,Asia/Ashgabat,Asia/Ashkhabad,Asia/Atyrau,Asia/Baghdad,Asia/Bahrain,Asia/Baku,'
    'Asia/Bangkok,Asia/Barnaul,Asia/Beirut,Asia/Bishkek,Asia/Brunei,Asia/Calcutta,Asia/Chita,'
    'Asia/Choibalsan,Asia/Chongqing,Asia/Chungking,Asia/Colombo,Asia/Dacca,Asia/Damascus,Asia/Dhaka,'
    'Asia/Dili,Asia/Dubai,Asia/Dushanbe,Asia/Famagusta,Asia/Gaza,Asia/Harbin,Asia/Hebron,'
    'Asia/Ho_Chi_Minh,Asia/Hong_Kong,Asia/Hovd,Asia/Irkutsk,Asia/Istanbul,Asia/Jakarta,Asia/Jayapura,'
    'Asia/Jerusalem,Asia/Kabul,Asia/Kamchatka,Asia/Karachi,Asia/Kashgar,Asia/Kathmandu,Asia/Katmandu,'
    'Asia/Khandyga,Asia/Kolkata,Asia/Krasnoyarsk,Asia/Kuala_Lumpur,Asia/Kuching,Asia/Kuwait,Asia/Macao,'
    'Asia/Macau,Asia/Magadan,Asia/Makassar,Asia/Manila,Asia/Muscat,Asia/Nicosia,Asia/Novokuznetsk,'
    'Asia/Novosibirsk,Asia/Omsk,Asia/Oral,Asia/Phnom_Penh,Asia/Pontianak,Asia/Pyongyang,Asia/Qatar,'
    'Asia/Qostanay,Asia/Qyzylorda,Asia/Rangoon,Asia/Riyadh,Asia/Saigon,Asia/Sakhalin,Asia/Samarkand,'
    'Asia/Seoul,Asia/Shanghai,Asia/Singapore,Asia/Srednekolymsk,Asia/Taipei,Asia/Tashkent,Asia/Tbilisi,'
    'Asia/Tehran,Asia/Tel_Aviv,Asia/Thimbu,Asia/Thimphu,Asia/Tokyo,Asia/Tomsk,Asia/Ujung_Pandang,'
    'Asia/Ulaanbaatar,Asia/Ulan_Bator,Asia/Urumqi,Asia/Ust-Nera,Asia/Vientiane,Asia/Vladivostok,'
    'Asia/Yakutsk,Asia/Yangon,Asia/Yekaterinburg,Asia/Yerevan,Atlantic/Azores,Atlantic/Bermuda,'
    'Atlantic/Canary,Atlantic/Cape_Verde,Atlantic/Faeroe,Atlantic/Faroe,Atlantic/Jan_Mayen,'
    'Atlantic/Madeira,Atlantic/Reykjavik,Atlantic/South_Georgia,Atlantic/St_Helena,Atlantic/Stanley,'
    'Australia/ACT,Australia/Adelaide,Australia/Brisbane,Australia/Broken_Hill,Australia/Canberra,'
    'Australia/Currie,Australia/Darwin,Australia/Eucla,Australia/Hobart,Australia/LHI,Australia/Lindeman,'
    'Australia/Lord_Howe,Australia/Melbourne,Australia/NSW,Australia/North,Australia/Perth,'
    'Australia/Queensland,Australia/South,Australia/Sydney,Australia/Tasmania,Australia/Victoria,'
    'Australia/West,Australia/Yancowinna,Brazil/Acre,Brazil/DeNoronha,Brazil/East,Brazil/West,CET,'
    'CST6CDT,Canada/Atlantic,Canada/Central,Canada/Eastern,Canada/Mountain,Canada/Newfoundland,'
    'Canada/Pacific,Canada/Saskatchewan,Canada/Yukon,Chile/Continental,Chile/EasterIsland,Cuba,EET,EST,'
    'EST5EDT,Egypt,Eire,Etc/GMT,Etc/GMT+0,Etc/GMT+1,Etc/GMT+10,Etc/GMT+11,Etc/GMT+12,Etc/GMT+2,Etc/GMT+3,'
    'Etc/GMT+4,Etc/GMT+5,Etc/GMT+6,Etc/GMT+7,Etc/GMT+8,Etc/GMT+9,Etc/GMT-0,Etc/GMT-1,Etc/GMT-10,'
    'Etc/GMT-11,Etc/GMT-12,Etc/GMT-13,Etc/GMT-14,Etc/GMT-2,Etc/GMT-3,Etc/GMT-4,Etc/GMT-5,Etc/GMT-6,'
    'Etc/GMT-7,Etc/GMT-8,Etc/GMT-9,Etc/GMT0,Etc/Greenwich,Etc/UCT,Etc/UTC,Etc/Universal,Etc/Zulu,'
    'Europe/Amsterdam,Europe/Andorra,Europe/Astrakhan,Europe/Athens,Europe/Belfast,Europe/Belgrade,'
    'Europe/Berlin,Europe/Bratislava,Europe/Brussels,Europe/Bucharest,Europe/Budapest,Europe/Busingen,'
    'Europe/Chisinau,Europe/Copenhagen,Europe/Dublin,Europe/Gibraltar,Europe/Guernsey,Europe/Helsinki,'
    'Europe/Isle_of_Man,Europe/Istanbul,Europe/Jersey,Europe/Kaliningrad,Europe/Kiev,Europe/Kirov,'
    'Europe/Kyiv,Europe/Lisbon,Europe/Ljubljana,Europe/London,Europe/Luxembourg,Europe/Madrid,'
    'Europe/Malta,Europe/Mariehamn,Europe/Minsk,Europe/Monaco,Europe/Moscow,Europe/Nicosia,Europe/Oslo,'
    'Europe/Paris,Europe/Podgorica,Europe/Prague,Europe/Riga,Europe/Rome,Europe/Samara,Europe/San_Marino,'
    'Europe/Sarajevo,Europe/Saratov,Europe/Simferopol,Europe/Skopje,Europe/Sofia,Europe/Stockholm,'
    'Europe/Tallinn,Europe/Tirane,Europe/Tiraspol,Europe/Ulyanovsk,Europe/Uzhgorod,Europe/Vaduz,'
    'Europe/Vatican,Europe/Vienna,Europe/Vilnius,Europe/Volgograd,Europe/Warsaw,Europe/Zagreb,'
    'Europe/Zaporozhye,Europe/Zurich,GB,GB-Eire,GMT,GMT+0,GMT-0,GMT0,Greenwich,HST,Hongkong,Iceland,'
    'Indian/Antananarivo,Indian/Chagos,Indian/Christmas,Indian/Cocos,Indian/Comoro,Indian/Kerguelen,'
    'Indian/Mahe,Indian/Maldives,Indian/Mauritius,Indian/Mayotte,Indian/Reunion,Iran,Israel,Jamaica,'
    'Japan,Kwajalein,Libya,MET,MST,MST7MDT,Mexico/BajaNorte,Mexico/BajaSur,Mexico/General,NZ,NZ-CHAT,'
    'Navajo,PRC,PST8PDT,Pacific/Apia,Pacific/Auckland,Pacific/Bougainville,Pacific/Chatham,Pacific/Chuuk,'
    'Pacific/Easter,Pacific/Efate,Pacific/Enderbury,Pacific/Fakaofo,Pacific/Fiji,Pacific/Funafuti,'
    'Pacific/Galapagos,Pacific/Gambier,Pacific/Guadalcanal,Pacific/Guam,Pacific/Honolulu,'
    'Pacific/Johnston,Pacific/Kanton,Pacific/Kiritimati,Pacific/Kosrae,Pacific/Kwajalein,Pacific/Majuro,'
    'Pacific/Marquesas,Pacific/Midway,Pacific/Nauru,Pacific/Niue,Pacific/Norfolk,Pacific/Noumea,'
    'Pacific/Pago_Pago,Pacific/Palau,Pacific/Pitcairn,Pacific/Pohnpei,Pacific/Ponape,'
    'Pacific/Port_Moresby,Pacific/Rarotonga,Pacific/Saipan,Pacific/Samoa,Pacific/Tahiti,Pacific/Tarawa,'
    'Pacific/Tongatapu,Pacific/Truk,Pacific/Wake,Pacific/Wallis,Pacific/Yap,Poland,Portugal,ROC,ROK,'
    'Singapore,Turkey,UCT,US/Alaska,US/Aleutian,US/Arizona,US/Central,US/East-Indiana,US/Eastern,'
    'US/Hawaii,US/Indiana-Starke,US/Michigan,US/Mountain,US/Pacific,US/Samoa,UTC,Universal,W-SU,WET,Zulu}'::text[]);

-- Why time zone tz is refused (calendar.rs: `time zone {tz:?}: {e}`), or NULL.
CREATE FUNCTION @extschema@._le_tz_why(tz text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN CASE WHEN tz IS NULL OR NOT @extschema@._le_tz_known(tz)
            THEN format('time zone %s: failed to parse timezone', @extschema@._le_debug_str(tz)) END;

-- The cron crate's parser (parsing.rs, winnow 0.7), step by step, over
-- the six fields calendar.rs hands it: what it accepts, what each field
-- means, and where and why it refuses (its message: the expression, a
-- caret under the byte where the parse stopped, and the cause a field's
-- check gave, if it was one). Positions are 0-based character offsets in
-- s. Whitespace as winnow's multispace0.
CREATE FUNCTION @extschema@._le_cron_ws(s text, p integer) RETURNS integer
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    WHILE substr(s, p + 1, 1) IN (' ', E'\t', E'\r', E'\n') LOOP
        p := p + 1;
    END LOOP;
    RETURN p;
END
$fn$;

-- ordinal: delimited(multispace0, digit1, multispace0), read as a u32.
CREATE FUNCTION @extschema@._le_cron_ordinal(s text, p0 integer, OUT ok boolean, OUT pos integer,
                                             OUT val numeric, OUT cause text)
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    p integer := @extschema@._le_cron_ws(s, p0);
    d text := substring(substr(s, p + 1) FROM '^[0-9]+');
BEGIN
    ok := false;
    pos := p;
    IF d IS NULL THEN
        RETURN;
    END IF;
    IF d::numeric > 4294967295::numeric THEN
        pos := p0;   -- (try_map resets to where it started)
        cause := 'number too large to fit in target type';
        RETURN;
    END IF;
    ok := true;
    pos := @extschema@._le_cron_ws(s, p + length(d));
    val := d::numeric;
END
$fn$;

-- name: delimited(multispace0, alpha1, multispace0).
CREATE FUNCTION @extschema@._le_cron_name(s text, p0 integer, OUT ok boolean, OUT pos integer, OUT val text)
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    p integer := @extschema@._le_cron_ws(s, p0);
BEGIN
    val := substring(substr(s, p + 1) FROM '^[A-Za-z]+');
    ok := val IS NOT NULL;
    pos := CASE WHEN ok THEN @extschema@._le_cron_ws(s, p + length(val)) ELSE p END;
END
$fn$;

-- specifier: alt((all, range, point, named_range)), with any ('?') first
-- where the field takes it. kind: all, point, range, nrange.
CREATE FUNCTION @extschema@._le_cron_spec(s text, p0 integer, with_any boolean,
                                          OUT ok boolean, OUT pos integer, OUT kind text,
                                          OUT a numeric, OUT b numeric, OUT na text, OUT nb text)
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    o1 record;
    o2 record;
    n1 record;
    n2 record;
BEGIN
    ok := true;
    IF substr(s, p0 + 1, 1) = '*' OR (with_any AND substr(s, p0 + 1, 1) = '?') THEN
        pos := p0 + 1;
        kind := 'all';
        RETURN;
    END IF;
    o1 := @extschema@._le_cron_ordinal(s, p0);
    IF o1.ok THEN
        IF substr(s, o1.pos + 1, 1) = '-' THEN
            o2 := @extschema@._le_cron_ordinal(s, o1.pos + 1);
            IF o2.ok THEN
                pos := o2.pos;
                kind := 'range';
                a := o1.val;
                b := o2.val;
                RETURN;
            END IF;
        END IF;
        pos := o1.pos;
        kind := 'point';
        a := o1.val;
        RETURN;
    END IF;
    ok := false;
    n1 := @extschema@._le_cron_name(s, p0);
    pos := n1.pos;
    IF NOT n1.ok OR substr(s, n1.pos + 1, 1) IS DISTINCT FROM '-' THEN
        RETURN;
    END IF;
    n2 := @extschema@._le_cron_name(s, n1.pos + 1);
    pos := n2.pos;
    IF n2.ok THEN
        ok := true;
        kind := 'nrange';
        na := n1.val;
        nb := n2.val;
    END IF;
END
$fn$;

-- root_specifier: alt((period, specifier, named_point)). kind: as above,
-- or period (of the specifier inner, by step), or npoint (a name).
CREATE FUNCTION @extschema@._le_cron_root(s text, p0 integer, with_any boolean,
                                          OUT ok boolean, OUT pos integer, OUT kind text, OUT inner_kind text,
                                          OUT a numeric, OUT b numeric, OUT na text, OUT nb text,
                                          OUT step numeric)
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    sp record;
    st record;
    n record;
BEGIN
    sp := @extschema@._le_cron_spec(s, p0, with_any);
    IF sp.ok THEN
        ok := true;
        a := sp.a;
        b := sp.b;
        na := sp.na;
        nb := sp.nb;
        IF substr(s, sp.pos + 1, 1) = '/' THEN
            st := @extschema@._le_cron_ordinal(s, sp.pos + 1);
            IF st.ok THEN
                pos := st.pos;
                kind := 'period';
                inner_kind := sp.kind;
                step := st.val;
                RETURN;
            END IF;
        END IF;
        pos := sp.pos;
        kind := sp.kind;
        RETURN;
    END IF;
    n := @extschema@._le_cron_name(s, p0);
    ok := n.ok;
    pos := n.pos;
    kind := 'npoint';
    na := n.val;
END
$fn$;

-- A name's ordinal in field unit (4 months, 5 days of the week; the other
-- fields take none), or why not.
CREATE FUNCTION @extschema@._le_cron_named(unit integer, n text, OUT val integer, OUT why text)
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF unit = 4 THEN
        val := CASE lower(n)
            WHEN 'jan' THEN 1 WHEN 'january' THEN 1 WHEN 'feb' THEN 2 WHEN 'february' THEN 2
            WHEN 'mar' THEN 3 WHEN 'march' THEN 3 WHEN 'apr' THEN 4 WHEN 'april' THEN 4
            WHEN 'may' THEN 5 WHEN 'jun' THEN 6 WHEN 'june' THEN 6 WHEN 'jul' THEN 7 WHEN 'july' THEN 7
            WHEN 'aug' THEN 8 WHEN 'august' THEN 8 WHEN 'sep' THEN 9 WHEN 'september' THEN 9
            WHEN 'oct' THEN 10 WHEN 'october' THEN 10 WHEN 'nov' THEN 11 WHEN 'november' THEN 11
            WHEN 'dec' THEN 12 WHEN 'december' THEN 12 END;
        IF val IS NULL THEN
            why := format('''%s'' is not a valid month name.', n);
        END IF;
    ELSIF unit = 5 THEN
        val := CASE lower(n)
            WHEN 'sun' THEN 1 WHEN 'sunday' THEN 1 WHEN 'mon' THEN 2 WHEN 'monday' THEN 2
            WHEN 'tue' THEN 3 WHEN 'tues' THEN 3 WHEN 'tuesday' THEN 3 WHEN 'wed' THEN 4
            WHEN 'wednesday' THEN 4 WHEN 'thu' THEN 5 WHEN 'thurs' THEN 5 WHEN 'thursday' THEN 5
            WHEN 'fri' THEN 6 WHEN 'friday' THEN 6 WHEN 'sat' THEN 7 WHEN 'saturday' THEN 7 END;
        IF val IS NULL THEN
            why := format('''%s'' is not a valid day of the week.', n);
        END IF;
    ELSE
        why := format('The ''%s'' field does not support using names. ''%s'' specified.',
                      (ARRAY['Seconds', 'Minutes', 'Hours', 'Days of Month', 'Months', 'Days of Week',
                             'Years'])[unit + 1], n);
    END IF;
END
$fn$;

-- The ordinals of a field's specifiers (time_unit/mod.rs: from_field), in
-- field unit (0 seconds, 1 minutes, 2 hours, 3 days of the month, 4
-- months, 5 days of the week, 6 years), sorted; or why not.
CREATE FUNCTION @extschema@._le_cron_set(unit integer, kinds text[], inners text[], a numeric[], b numeric[],
                                         na text[], nb text[], steps numeric[],
                                         OUT vals integer[], OUT why text)
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    uname text := (ARRAY['Seconds', 'Minutes', 'Hours', 'Days of Month', 'Months', 'Days of Week',
                         'Years'])[unit + 1];
    lo integer := (ARRAY[0, 0, 0, 1, 1, 1, 1970])[unit + 1];
    hi integer := (ARRAY[59, 59, 23, 31, 12, 7, 2100])[unit + 1];
    acc integer[] := '{}';
    ords numeric[];
    k text;
    x record;
    y record;
    v numeric;
BEGIN
    IF cardinality(kinds) = 1 AND kinds[1] = 'all' THEN
        vals := ARRAY(SELECT g FROM generate_series(lo, hi) g);
        RETURN;
    END IF;
    FOR i IN 1 .. cardinality(kinds) LOOP
        k := CASE WHEN kinds[i] = 'period' THEN inners[i] ELSE kinds[i] END;
        IF kinds[i] = 'period' AND steps[i] = 0::numeric THEN
            why := 'range step cannot be zero';
            RETURN;
        END IF;
        IF kinds[i] = 'period' AND steps[i] > hi::numeric THEN
            why := format('%s must be between 1 and %s. (''%s'' specified.)', uname, hi, steps[i]);
            RETURN;
        END IF;
        -- ordinals_from_specifier (a point before a period: from it to the max)
        IF k = 'all' THEN
            ords := ARRAY(SELECT g::numeric FROM generate_series(lo, hi) g);
        ELSIF k = 'point' AND kinds[i] = 'period' THEN
            IF a[i] < lo::numeric THEN
                why := format('%s must be greater than or equal to %s. (''%s'' specified.)', uname, lo, a[i]);
                RETURN;
            ELSIF a[i] > hi::numeric THEN
                why := format('%s must be less than %s. (''%s'' specified.)', uname, hi, a[i]);
                RETURN;
            END IF;
            ords := ARRAY(SELECT g::numeric FROM generate_series(a[i]::integer, hi) g);
        ELSIF k = 'point' THEN
            ords := ARRAY[a[i]];
        ELSIF k = 'range' THEN
            IF a[i] < lo::numeric OR a[i] > hi::numeric OR b[i] < lo::numeric OR b[i] > hi::numeric
               OR a[i] > b[i] THEN
                why := format('Invalid range for %s: %s-%s', uname, a[i], b[i]);
                RETURN;
            END IF;
            ords := ARRAY(SELECT g::numeric FROM generate_series(a[i]::integer, b[i]::integer) g);
        ELSIF k = 'nrange' THEN
            x := @extschema@._le_cron_named(unit, na[i]);
            IF x.why IS NOT NULL THEN
                why := x.why;
                RETURN;
            END IF;
            y := @extschema@._le_cron_named(unit, nb[i]);
            IF y.why IS NOT NULL THEN
                why := y.why;
                RETURN;
            END IF;
            IF x.val < lo OR x.val > hi OR y.val < lo OR y.val > hi OR x.val > y.val THEN
                why := format('Invalid named range for %s: %s-%s', uname, na[i], nb[i]);
                RETURN;
            END IF;
            ords := ARRAY(SELECT g::numeric FROM generate_series(x.val, y.val) g);
        ELSE  -- npoint
            x := @extschema@._le_cron_named(unit, na[i]);
            IF x.why IS NOT NULL THEN
                why := x.why;
                RETURN;
            END IF;
            ords := ARRAY[x.val::numeric];
        END IF;
        IF kinds[i] = 'period' THEN   -- step_by over the sorted set
            ords := ARRAY(SELECT o.ord FROM unnest(ords) WITH ORDINALITY AS o(ord, idx)
                           WHERE (o.idx - 1) % steps[i]::bigint = 0 ORDER BY o.idx);
        END IF;
        FOREACH v IN ARRAY ords LOOP
            IF v < lo::numeric THEN
                why := format('%s must be greater than or equal to %s. (''%s'' specified.)', uname, lo, v);
                RETURN;
            ELSIF v > hi::numeric THEN
                why := format('%s must be less than %s. (''%s'' specified.)', uname, hi, v);
                RETURN;
            END IF;
            acc := acc || v::integer;
        END LOOP;
    END LOOP;
    vals := ARRAY(SELECT DISTINCT g FROM unnest(acc) g ORDER BY g);
END
$fn$;

-- field: delimited(multispace0, separated(1.., root_specifier, ",") or one
-- root_specifier, multispace0), then its check (try_map: from_field; a
-- refusal puts the parse back where the field started, with the cause).
-- Its ordinals.
CREATE FUNCTION @extschema@._le_cron_field(s text, p0 integer, unit integer,
                                           OUT ok boolean, OUT pos integer, OUT cause text,
                                           OUT vals integer[])
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    with_any boolean := unit IN (3, 5);
    r record;
    q integer;
    kinds text[] := '{}';
    inners text[] := '{}';
    aa numeric[] := '{}';
    bb numeric[] := '{}';
    nas text[] := '{}';
    nbs text[] := '{}';
    steps numeric[] := '{}';
    got record;
BEGIN
    ok := false;
    r := @extschema@._le_cron_root(s, @extschema@._le_cron_ws(s, p0), with_any);
    IF NOT r.ok THEN
        pos := r.pos;
        RETURN;
    END IF;
    LOOP
        kinds := kinds || r.kind;
        inners := inners || r.inner_kind;
        aa := aa || r.a;
        bb := bb || r.b;
        nas := nas || r.na;
        nbs := nbs || r.nb;
        steps := steps || r.step;
        q := r.pos;
        EXIT WHEN substr(s, q + 1, 1) IS DISTINCT FROM ',';
        r := @extschema@._le_cron_root(s, q + 1, with_any);
        EXIT WHEN NOT r.ok;
    END LOOP;
    got := @extschema@._le_cron_set(unit, kinds, inners, aa, bb, nas, nbs, steps);
    IF got.why IS NOT NULL THEN
        pos := p0;
        cause := got.why;
        RETURN;
    END IF;
    ok := true;
    pos := @extschema@._le_cron_ws(s, q);
    vals := got.vals;
END
$fn$;

-- A cron expression as calendar.rs reads it: cron_fields's refusals (the
-- dialects' differences), then the crate's parse of the six fields. Its
-- fields as bit masks (seconds, minutes, hours, days of the month, months,
-- days of the week: bit n for ordinal n) and its years (NULL: all, as
-- always here), or why it is refused (the compiled edition's message after
-- "leaderlock: ").
CREATE FUNCTION @extschema@._le_cron_parse(expr text, OUT masks bigint[], OUT years integer[], OUT why text)
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    -- Rust's char::is_whitespace (str::trim, split_whitespace)
    ws text := E'[\\t\\n\\x0b\\x0c\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]';
    body text;
    f text[];
    s text;
    p integer := 0;
    r record;
    ok boolean;
    cause text;
    m bigint;
    bad text;
BEGIN
    why := NULL;
    body := regexp_replace(expr, '^' || ws || '+|' || ws || '+$', '', 'g');
    s := CASE body WHEN '@yearly' THEN '0 0 0 1 1 *' WHEN '@monthly' THEN '0 0 0 1 * *'
                   WHEN '@weekly' THEN '0 0 0 * * SUN' WHEN '@daily' THEN '0 0 0 * * *'
                   WHEN '@hourly' THEN '0 0 * * * *' END;
    IF s IS NULL THEN
        f := CASE WHEN body = '' THEN '{}'::text[] ELSE regexp_split_to_array(body, ws || '+') END;
        IF cardinality(f) = 5 THEN
            f := '0'::text || f;
        ELSIF cardinality(f) = 7 THEN
            bad := 'a year field (seven fields) is not supported';
        ELSIF cardinality(f) <> 6 THEN
            bad := 'five fields (minute hour day-of-month month day-of-week), or six with seconds first';
        END IF;
        IF bad IS NULL THEN
            f[4] := replace(f[4], '?', '*');
            f[6] := replace(f[6], '?', '*');
            IF EXISTS (SELECT FROM unnest(string_to_array(f[6], ',')) t
                        WHERE split_part(t, '/', 1) ~ '[0-9]')
               OR strpos(f[6], 'L') > 0 OR strpos(f[6], '#') > 0 THEN
                bad := 'name the days of the week (SUN, MON-FRI): their numbers differ between cron '
                       'dialects (crontab counts Sunday as 0 or 7, this client''s cron crate as 1); numbers '
                       'are refused, and so are L and #';
            ELSIF f[4] ~ '[A-Za-z]' THEN
                bad := 'L and W are not supported in the day of the month';
            ELSIF f[4] <> '*' AND f[6] <> '*' THEN
                bad := 'restrict the day of the month or the day of the week, not both: crontab runs on '
                       'either, this client''s cron crate on both';
            END IF;
        END IF;
        IF bad IS NOT NULL THEN
            why := format('cron expression %s: %s', @extschema@._le_debug_str(expr), bad);
            RETURN;
        END IF;
        s := array_to_string(f, ' ');
    END IF;
    -- The crate's parse: alt((shorthand, longhand)), then the end.
    IF s ~ '^(@yearly|@monthly|@weekly|@daily|@hourly)' THEN
        -- (a shorthand followed by more: the crate stops after it)
        -- (never alone here: six fields follow)
        p := @extschema@._le_cron_ws(s, length(substring(s FROM '^(@yearly|@monthly|@weekly|@daily|@hourly)')));
        ok := false;
    ELSE
        masks := '{}';
        FOR unit IN 0 .. 5 LOOP
            r := @extschema@._le_cron_field(s, p, unit);
            ok := r.ok;
            IF NOT ok THEN
                p := r.pos;
                cause := r.cause;
                EXIT;
            END IF;
            p := r.pos;
            m := 0;
            FOR i IN 1 .. cardinality(r.vals) LOOP
                m := m | (1::bigint << r.vals[i]);
            END LOOP;
            masks := masks || m;
        END LOOP;
        IF ok THEN
            -- opt(years): kept when it parses, else nothing taken
            r := @extschema@._le_cron_field(s, p, 6);
            IF r.ok THEN
                p := r.pos;
                years := CASE WHEN cardinality(r.vals) < 131 THEN r.vals END;
            END IF;
            ok := p >= length(s);   -- eof
        END IF;
    END IF;
    IF NOT ok THEN
        masks := NULL;
        years := NULL;
        why := format('cron expression %s: %s', @extschema@._le_debug_str(expr),
                      s || E'\n' || repeat(' ', octet_length(substr(s, 1, p))) || E'^\n'
                        || coalesce(cause, ''));
    END IF;
END
$fn$;

-- The instants at which local time l occurs in time zone tz, in order:
-- none (skipped forward: it does not exist), one, or two (clocks set
-- back: chrono's LocalResult::Ambiguous, earlier first). The offsets in
-- force from 16 hours before to 16 hours after give the candidates.
CREATE FUNCTION @extschema@._le_local_instants(l timestamp, tz text) RETURNS timestamptz[]
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    u timestamptz := l AT TIME ZONE 'UTC';
    got timestamptz[] := '{}';
    c timestamptz;
BEGIN
    IF tz = 'UTC' THEN
        RETURN ARRAY[u];
    END IF;
    FOR k IN -1 .. 1 LOOP
        c := u + k * interval '16 hours';
        c := u - ((c AT TIME ZONE tz) - (c AT TIME ZONE 'UTC'));
        IF (c AT TIME ZONE tz) = l AND NOT c = ANY (got) THEN
            got := got || c;
        END IF;
    END LOOP;
    RETURN ARRAY(SELECT x FROM unnest(got) x ORDER BY x);
END
$fn$;

-- The cron crate's next_after (schedule.rs): the first local time from l0
-- on (to the second) whose fields the masks and years allow, and which
-- exists in time zone tz (LocalResult::None: the next one); NULL after 2100.
CREATE FUNCTION @extschema@._le_cron_local_next(masks bigint[], years integer[], tz text, l0 timestamp)
RETURNS timestamp
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    d date := l0::date;
    h0 integer := extract(hour FROM l0)::integer;
    m0 integer := extract(minute FROM l0)::integer;
    s0 integer := floor(extract(second FROM l0))::integer;
    first boolean := true;
    y integer;
    c timestamp;
BEGIN
    IF d < '1970-01-01'::date THEN
        d := '1970-01-01'::date;
        first := false;
    END IF;
    LOOP
        y := extract(year FROM d)::integer;
        IF y > 2100 THEN
            RETURN NULL;
        END IF;
        IF years IS NOT NULL AND NOT y = ANY (years) THEN
            y := (SELECT min(x) FROM unnest(years) x WHERE x > y);
            IF y IS NULL THEN
                RETURN NULL;
            END IF;
            d := make_date(y, 1, 1);
            first := false;
            CONTINUE;
        END IF;
        IF (masks[5] >> extract(month FROM d)::integer) & 1::bigint = 0::bigint THEN
            d := (date_trunc('month', d) + interval '1 month')::date;
            first := false;
            CONTINUE;
        END IF;
        IF (masks[4] >> extract(day FROM d)::integer) & 1::bigint = 0::bigint
           OR (masks[6] <> 254::bigint
               AND (masks[6] >> (extract(dow FROM d)::integer + 1)) & 1::bigint = 0::bigint) THEN
            d := d + 1;
            first := false;
            CONTINUE;
        END IF;
        FOR h IN CASE WHEN first THEN h0 ELSE 0 END .. 23 LOOP
            CONTINUE WHEN (masks[3] >> h) & 1::bigint = 0::bigint;
            FOR m IN CASE WHEN first AND h = h0 THEN m0 ELSE 0 END .. 59 LOOP
                CONTINUE WHEN (masks[2] >> m) & 1::bigint = 0::bigint;
                FOR s IN CASE WHEN first AND h = h0 AND m = m0 THEN s0 ELSE 0 END .. 59 LOOP
                    CONTINUE WHEN (masks[1] >> s) & 1::bigint = 0::bigint;
                    c := d + make_time(h, m, s::float8);
                    IF tz = 'UTC' OR cardinality(@extschema@._le_local_instants(c, tz)) > 0 THEN
                        RETURN c;
                    END IF;
                END LOOP;
            END LOOP;
        END LOOP;
        d := d + 1;
        first := false;
    END LOOP;
END
$fn$;

-- calendar.rs next_after for a cron expression: the first due instant
-- strictly after t, stepping as the crate's iterator does from t (each
-- local time's instants in order; at most 10,000 of them).
CREATE FUNCTION @extschema@._le_cron_next(masks bigint[], years integer[], tz text, t timestamptz)
RETURNS timestamptz
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    prev timestamptz := t;
    l timestamp;
    i timestamptz;
    n integer := 0;
BEGIN
    LOOP
        l := @extschema@._le_cron_local_next(masks, years, tz,
                                              date_trunc('second', (prev + interval '1 second') AT TIME ZONE tz));
        IF l IS NULL THEN
            RETURN NULL;
        END IF;
        FOREACH i IN ARRAY @extschema@._le_local_instants(l, tz) LOOP
            n := n + 1;
            IF n > 10000 THEN
                RETURN NULL;
            END IF;
            IF i > t THEN
                RETURN i;
            END IF;
            prev := i;
        END LOOP;
    END LOOP;
END
$fn$;

-- A schedule's calendar from its settings (every, or cron in tz), or why
-- it has none (calendar.rs Schedule::every, Schedule::cron).
CREATE FUNCTION @extschema@._le_calendar(every interval, cron text, tz text,
                                         OUT every_us numeric, OUT masks bigint[], OUT years integer[],
                                         OUT why text)
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    c record;
BEGIN
    IF every IS NOT NULL THEN
        every_us := trunc(@extschema@._le_us(every));
        IF every_us < 1000::numeric OR every_us % 1000::numeric <> 0::numeric THEN
            why := format('a period must be whole milliseconds, at least 1ms (got %s microseconds)',
                          every_us::bigint);
            every_us := NULL;
        END IF;
        RETURN;
    END IF;
    IF cron IS NULL THEN
        why := 'a schedule needs every or cron';
        RETURN;
    END IF;
    c := @extschema@._le_cron_parse(cron);
    why := coalesce(c.why, @extschema@._le_tz_why(tz));
    IF why IS NULL THEN
        masks := c.masks;
        years := c.years;
    END IF;
END
$fn$;

-- The first due instant of a calendar strictly after t.
CREATE FUNCTION @extschema@._le_next_after(every_us numeric, masks bigint[], years integer[], tz text,
                                           t timestamptz)
RETURNS timestamptz
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN CASE WHEN every_us IS NOT NULL THEN @extschema@._le_every_next(every_us, t)
            WHEN masks IS NOT NULL THEN @extschema@._le_cron_next(masks, years, tz, t) END;

-- Contract 24: every, cron and tz of le_schedule (input.rs
-- schedule_calendar): tz not NULL; exactly one of every and cron; every at
-- least a second, in whole milliseconds, without a month or year part (an
-- infinite interval, PostgreSQL 17+, has one, as compiled), with tz UTC;
-- a cron expression the clients' libraries all read alike, in a time zone
-- chrono-tz knows. Its calendar.
CREATE FUNCTION @extschema@._le_schedule_calendar(every interval, cron text, tz text,
                                                  OUT every_us numeric, OUT masks bigint[], OUT years integer[])
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    bad boolean;
    c record;
BEGIN
    IF tz IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'null_value_not_allowed',
            MESSAGE = 'leaderlock: tz must not be NULL',
            HINT = 'Give an IANA time zone name, e.g. ''Europe/Paris'', or ''UTC''.';
    END IF;
    IF (every IS NULL) = (cron IS NULL) THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = 'leaderlock: give exactly one of every and cron',
            HINT = 'every => ''5 minutes'', or cron => ''0 3 * * *'' (with tz).';
    END IF;
    IF every IS NOT NULL THEN
        bad := NOT isfinite(every);
        IF NOT bad THEN
            bad := extract(year FROM every) <> 0 OR extract(month FROM every) <> 0;
        END IF;
        IF NOT bad THEN
            every_us := @extschema@._le_us(every);
            bad := every_us < 1000000::numeric OR every_us % 1000::numeric <> 0::numeric
                   OR every_us > 9223372036854775807::numeric;
        END IF;
        IF bad THEN
            RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
                MESSAGE = format('leaderlock: every must be at least 1 second, in whole milliseconds, '
                                 'without a month or year part (got %s)', every),
                HINT = 'The worker records every instant nobody claimed: a schedule kept in the database '
                       'runs at most once a second.';
        END IF;
        IF tz <> 'UTC' THEN
            RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
                MESSAGE = format('leaderlock: tz applies to cron only (got tz %s with every)',
                                 @extschema@._le_debug_str(tz)),
                HINT = 'A period runs at its multiples since the Unix epoch, in any time zone.';
        END IF;
        every_us := trunc(every_us);
        RETURN;
    END IF;
    c := @extschema@._le_calendar(NULL::interval, cron, tz);
    IF c.why IS NULL THEN
        BEGIN
            -- (a name chrono-tz knows and this server's time zone database
            -- lacks, older than chrono-tz's: refused as chrono-tz refuses others)
            PERFORM '2000-01-01 00:00:00+00'::timestamptz AT TIME ZONE tz;
        EXCEPTION WHEN invalid_parameter_value THEN
            c.why := format('time zone %s: failed to parse timezone', @extschema@._le_debug_str(tz));
        END;
    END IF;
    IF c.why IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', MESSAGE = 'leaderlock: ' || c.why;
    END IF;
    masks := c.masks;
    years := c.years;
END
$fn$;

-- Contract 24: misfire_grace of le_schedule: as le_claim_run's, and NULL
-- for the default: the period with every, 5 minutes with a cron
-- expression. In microseconds.
CREATE FUNCTION @extschema@._le_schedule_grace(v interval, every_us numeric) RETURNS numeric
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN trunc(coalesce(@extschema@._le_misfire_grace(v), every_us, 300000000::numeric));

-- Contract 24: overlap of le_schedule: allow, forbid or replace.
-- Contract 24: le_schedule's backfill: not NULL, 0 to 100.
CREATE FUNCTION @extschema@._le_backfill(v integer) RETURNS integer
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF v IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'null_value_not_allowed',
            MESSAGE = 'leaderlock: backfill must not be NULL';
    END IF;
    IF v < 0 OR v > 100 THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('leaderlock: backfill must be between 0 and 100 (got %s)', v);
    END IF;
    RETURN v;
END
$fn$;

CREATE FUNCTION @extschema@._le_overlap(v text) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF v IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'null_value_not_allowed',
            MESSAGE = 'leaderlock: overlap must not be NULL';
    END IF;
    IF v NOT IN ('allow', 'forbid', 'replace') THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('leaderlock: overlap must be allow, forbid or replace (got %s)',
                             @extschema@._le_debug_str(v));
    END IF;
    RETURN v;
END
$fn$;

-- Contract 25: within of le_expect_leader: not NULL, at least a second
-- (marks are checked every second), without a month or year part. In
-- microseconds.
CREATE FUNCTION @extschema@._le_within(v interval) RETURNS numeric
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    bad boolean;
    us numeric;
BEGIN
    IF v IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'null_value_not_allowed',
            MESSAGE = 'leaderlock: within must not be NULL',
            HINT = 'To stop expecting a leader, call le_unexpect_leader(key).';
    END IF;
    bad := NOT isfinite(v);
    IF NOT bad THEN
        bad := extract(year FROM v) <> 0 OR extract(month FROM v) <> 0;
    END IF;
    IF NOT bad THEN
        us := @extschema@._le_us(v);
        bad := us < 1000000::numeric OR us > 9223372036854775807::numeric;
    END IF;
    IF bad THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('leaderlock: within must be at least 1 second, without a month or year part (got %s)', v),
            HINT = 'Marks are checked every second: a shorter absence may go unseen.';
    END IF;
    RETURN trunc(us);
END
$fn$;

-- The session's role: the one of SET ROLE, else the session user.
CREATE FUNCTION @extschema@._le_session_role() RETURNS name
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN CASE WHEN current_setting('role') = 'none' THEN session_user
            ELSE current_setting('role')::name END;

-- The acting role (contract 13): current_user at the call. Where it is not
-- the session's role (a SECURITY DEFINER function, or maintenance run as a
-- table's owner), a security-restricted operation is refused as in the
-- compiled edition. Sets the caller key the entry point called next checks
-- (_le_caller_key). SECURITY INVOKER, called by the le_* writers.
CREATE FUNCTION @extschema@._le_caller() RETURNS oid
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    msg text;
    k record;
BEGIN
    IF current_user <> @extschema@._le_session_role() THEN
        BEGIN
            -- Setting role is refused in both cases, with different messages.
            PERFORM set_config('role', current_setting('role'), true);
        EXCEPTION WHEN insufficient_privilege THEN
            GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT;
            IF msg LIKE '%security-restricted operation%' THEN
                RAISE EXCEPTION USING ERRCODE = 'insufficient_privilege',
                    MESSAGE = 'leaderlock: leases cannot be changed from a security-restricted operation',
                    DETAIL = 'PostgreSQL runs index expressions, materialized view queries and the like for '
                             'maintenance commands (ANALYZE, VACUUM, REINDEX, REFRESH MATERIALIZED VIEW) as '
                             'the table''s owner; no lease changes from there.';
            END IF;
        END;
    END IF;
    -- N1: the proof that the entry point called next acts for current_user,
    -- consumed by it (_le_act_as). Nothing runs in between; an error in
    -- between rolls the setting back with the (sub)transaction.
    SELECT c.role, c.key INTO k FROM @extschema@._le_caller_key c;
    PERFORM set_config('leaderlock_portable.caller', k.key, true);
    RETURN k.role;
END
$fn$;

-- RFC 3339 UTC with microseconds, e.g. 2026-11-22T11:25:03.123456Z.
CREATE FUNCTION @extschema@._le_rfc3339(t timestamptz) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN CASE WHEN isfinite(t) THEN to_char(t AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
            WHEN t > 'epoch'::timestamptz THEN 'infinity' ELSE '-infinity' END;

-- Contract 23: records a transition, as notified, in the caller's
-- transaction (in the history if and only if it commits), without a
-- position: _le_number_history gives it one once committed. The role is
-- the one the entry point acts for (_le_act_as), NULL in le_expire_lapsed
-- (the compiled edition's worker).
CREATE FUNCTION @extschema@._le_record(at timestamptz, event text, key text, holder text,
                                       term bigint, payload text)
RETURNS void
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    INSERT INTO @extschema@.leaderlock_history_pending (at, event, key, holder, term, role, payload)
    VALUES ($1, $2, $3, $4, $5, nullif(current_setting('leaderlock_portable.role', true), '')::oid, $6);
END;

-- Contract 23: moves the committed rows of leaderlock_history_pending into
-- the history, numbered in recording order, after the highest position
-- given or pruned and at least the term floor (positions never go back
-- after a failover), announces the last on channel leaderlock_history, and
-- prunes the oldest by the retention (leaderlock.history_retention,
-- leaderlock.history_max_rows: the administrator's, _le_admin_setting),
-- as a prefix of positions. Under the head
-- row's lock, never waiting (another transaction numbering: it numbers
-- them). Called by le_expire_lapsed, in autocommit.
CREATE FUNCTION @extschema@._le_number_history() RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_pruned bigint;
    -- the administrator's, never the caller's (audit of 0.5.0, A)
    v_keep bigint := coalesce(nullif(btrim(@extschema@._le_admin_setting('leaderlock.history_max_rows'::text)),
                                     '')::bigint,
                              1000000::bigint);
    v_horizon timestamptz;
    n bigint;
    v_last bigint;
BEGIN
    SELECT h.pruned_through INTO v_pruned FROM @extschema@.leaderlock_history_head h
       FOR NO KEY UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF v_keep < 1 THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('leaderlock: invalid value for parameter "leaderlock.history_max_rows": "%s"',
                             v_keep);
    END IF;
    v_horizon := clock_timestamp() - make_interval(secs => @extschema@._le_setting_us(
        'leaderlock.history_retention'::text, 604800::bigint, 1::bigint, 2147483647::bigint)
        / 1000000::numeric);
    LOOP
        WITH p AS (
            SELECT x.ctid AS row_id FROM @extschema@.leaderlock_history_pending x
             ORDER BY x.seq LIMIT 10000),
        d AS (
            DELETE FROM @extschema@.leaderlock_history_pending x
             WHERE x.ctid = ANY (ARRAY(SELECT p.row_id FROM p))
            RETURNING x.seq, x.at, x.event, x.key, x.holder, x.term, x.role, x.payload),
        base AS (
            SELECT greatest(coalesce((SELECT max(y.position) FROM @extschema@.leaderlock_history y),
                                     0::bigint),
                            v_pruned, @extschema@._le_term_floor() - 1::bigint) AS b),
        u AS (
            INSERT INTO @extschema@.leaderlock_history (position, at, event, key, holder, term, role, payload)
            SELECT base.b + row_number() OVER (ORDER BY d.seq), d.at, d.event, d.key, d.holder, d.term,
                   d.role, d.payload::jsonb
              FROM d, base
            RETURNING position)
        SELECT count(*), max(u.position) INTO n, v_last FROM u;
        IF n > 0 THEN
            UPDATE @extschema@.leaderlock_history_head SET kept = kept + n;
            PERFORM pg_notify('leaderlock_history', v_last::text);
        END IF;
        EXIT WHEN n < 10000;
    END LOOP;
    LOOP
        -- Reads only the rows that go and two more (it runs at every
        -- le_expire_lapsed): c is the first row within the count, k the
        -- first from there young enough to stay.
        WITH c AS (
            SELECT h.position FROM @extschema@.leaderlock_history h
             ORDER BY h.position
            OFFSET least(greatest((SELECT d.kept FROM @extschema@.leaderlock_history_head d) - v_keep,
                                  0::bigint), 10000::bigint)
             LIMIT 1),
        k AS (
            SELECT h.position FROM @extschema@.leaderlock_history h
             WHERE h.position >= (SELECT c.position FROM c) AND h.at >= v_horizon
             ORDER BY h.position LIMIT 1),
        cut AS (
            SELECT max(f.position) AS through FROM (
                SELECT h.position FROM @extschema@.leaderlock_history h
                 WHERE h.position < coalesce((SELECT k.position FROM k), 9223372036854775807::bigint)
                 ORDER BY h.position LIMIT 10000) f),
        gone AS (
            DELETE FROM @extschema@.leaderlock_history h USING cut
             WHERE h.position <= cut.through RETURNING 1)
        SELECT count(*), (SELECT cut.through FROM cut) INTO n, v_last FROM gone;
        EXIT WHEN v_last IS NULL;
        -- (rows at or below it exist only after the documented step that
        -- follows a restore: deleted by the retention, the head never back)
        UPDATE @extschema@.leaderlock_history_head
           SET pruned_through = greatest(pruned_through, v_last), kept = greatest(kept - n, 0);
        EXIT WHEN n < 10000;
    END LOOP;
END
$fn$;

-- Contract 22: the runs' retention, for every job (compiled: the worker,
-- at most once a second, or le_expire_lapsed where no worker serves).
-- Runs due before now - leaderlock.run_retention (the administrator's,
-- _le_admin_setting) that are finished or have no live claim (a run still
-- going on keeps its row) go, up to 1000 at a time and 10 times a call,
-- with their jobs' pruned_before moved up to that horizon; then those jobs
-- that have no run left go, and the row of job '' keeps the highest term
-- they had (a job made again starts above it: no term is issued twice).
-- Never waits on a claim: the runs and then their jobs are locked SKIP
-- LOCKED (a claim in progress keeps its job and, until a later call, the
-- job's runs); only two calls forgetting jobs at once take turns on the
-- row of job ''. Called by le_expire_lapsed (as the owner), in a
-- subtransaction of its own. Returns how many runs went.
CREATE FUNCTION @extschema@._le_prune_runs() RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $fn$
DECLARE
    t timestamptz := clock_timestamp();
    v_pro timestamptz := @extschema@._le_promoted_at();
    v_horizon timestamptz;
    v_jobs text[];
    v_dues timestamptz[];
    v_locked text[];
    v_skipped text[] := '{}'::text[];
    v_floor bigint;
    n integer;
    gone bigint;
    deleted bigint := 0;
BEGIN
    v_horizon := t - make_interval(secs => (@extschema@._le_setting_us('leaderlock.run_retention'::text,
        604800::bigint, 1::bigint, 2147483647::bigint) / 1000000::numeric)::float8);
    FOR i IN 1 .. 10 LOOP
        -- the runs (locked, never waiting; not those of a job a claim held
        -- in an earlier round of this call)
        SELECT array_agg(x.job), array_agg(x.due) INTO v_jobs, v_dues
          FROM (SELECT r.job, r.due FROM @extschema@.leaderlock_runs r
                 WHERE r.due < v_horizon AND r.job <> ALL (v_skipped)
                   AND (r.finished_at IS NOT NULL OR r.holder IS NULL
                        OR NOT coalesce(GREATEST(r.expires_at, v_pro + r.ttl) > t, false))
                 ORDER BY r.due
                 LIMIT 1000
                   FOR UPDATE SKIP LOCKED) x;
        n := coalesce(array_length(v_jobs, 1), 0);
        EXIT WHEN n = 0;
        -- their jobs, locked as a claim locks them, never waiting: those a
        -- claim holds keep their runs until a later call
        SELECT array_agg(y.job) INTO v_locked
          FROM (SELECT j.job FROM @extschema@.leaderlock_jobs j
                 WHERE j.job = ANY (v_jobs)
                 ORDER BY j.job
                   FOR UPDATE SKIP LOCKED) y;
        v_locked := coalesce(v_locked, '{}'::text[]);
        -- (a run whose job's row is gone has no claim to wait for)
        DELETE FROM @extschema@.leaderlock_runs r
         USING unnest(v_jobs, v_dues) AS u(job, due)
         WHERE r.job = u.job AND r.due = u.due
           AND (r.job = ANY (v_locked)
                OR NOT EXISTS (SELECT FROM @extschema@.leaderlock_jobs j WHERE j.job = r.job));
        GET DIAGNOSTICS gone = ROW_COUNT;
        deleted := deleted + gone;
        v_skipped := v_skipped || ARRAY(SELECT DISTINCT u.job FROM unnest(v_jobs) AS u(job)
                                         WHERE u.job <> ALL (v_locked)
                                           AND EXISTS (SELECT FROM @extschema@.leaderlock_jobs j
                                                        WHERE j.job = u.job));
        -- no run due before the horizon is ever claimed again
        UPDATE @extschema@.leaderlock_jobs j
           SET pruned_before = GREATEST(j.pruned_before, v_horizon)
         WHERE j.job = ANY (v_locked);
        -- the jobs without a run left (this statement's snapshot sees every
        -- run committed so far, and no claim adds one while the job is
        -- locked), and their highest term kept by the row of job ''
        WITH g AS (
            DELETE FROM @extschema@.leaderlock_jobs j
             WHERE j.job = ANY (v_locked) AND j.job <> ''
               AND NOT EXISTS (SELECT FROM @extschema@.leaderlock_runs r WHERE r.job = j.job)
            RETURNING j.term)
        SELECT max(g.term) INTO v_floor FROM g;
        IF v_floor IS NOT NULL THEN
            INSERT INTO @extschema@.leaderlock_jobs AS f (job, term) VALUES ('', v_floor)
            ON CONFLICT (job) DO UPDATE SET term = GREATEST(f.term, excluded.term);
        END IF;
        EXIT WHEN n < 1000;
    END LOOP;
    IF deleted > 0 THEN
        PERFORM @extschema@._le_durable();
    END IF;
    RETURN deleted;
END
$fn$;

-- Contract 4: one notification on channel leaderlock, byte for byte the
-- compiled edition's JSON (serde_json: no spaces, keys in this order;
-- to_json escapes strings as serde_json does). Only fields of the event,
-- and "slots" last for a key of more than one slot (contract 17). reason:
-- of an expiry, "ttl", or "session_expired" for a key whose session lapsed
-- (contract 21).
CREATE FUNCTION @extschema@._le_announce(
    event text, key text, holder text, term bigint, at timestamptz,
    previous_holder text, expires_at timestamptz, value jsonb, forced boolean, slots integer,
    reason text DEFAULT 'ttl')
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    payload text;
BEGIN
    payload := '{"event":' || to_json($1)::text
            || ',"key":' || to_json($2)::text
            || ',"holder":' || to_json($3)::text
            || ',"term":' || $4::text
            || ',"at":"' || @extschema@._le_rfc3339($5) || '"';
    IF $1 = 'acquired' THEN
        payload := payload || ',"previous_holder":' || coalesce(to_json($6)::text, 'null')
                || ',"expires_at":"' || @extschema@._le_rfc3339($7) || '"'
                || ',"value":' || coalesce($8::text, 'null');
    ELSIF $1 = 'released' THEN
        payload := payload || ',"forced":' || CASE WHEN $9 THEN 'true' ELSE 'false' END;
    ELSIF $1 = 'expired' THEN
        payload := payload || ',"expires_at":"' || @extschema@._le_rfc3339($7) || '"'
                || ',"reason":' || to_json(coalesce($11, 'ttl'))::text;
    ELSIF $1 = 'proclaimed' THEN
        payload := payload || ',"value":' || coalesce($8::text, 'null');
    END IF;
    IF $10 > 1 THEN
        payload := payload || ',"slots":' || $10::text;
    END IF;
    PERFORM pg_notify('leaderlock', payload || '}');
    PERFORM @extschema@._le_record($5, $1, $2, $3, $4, payload || '}');
END
$fn$;

-- Contract 22: a change of a scheduled run, on the same channel, byte for
-- byte the compiled edition's JSON (notify.rs RunPayload): "event", "job",
-- "due", "holder" and "term" (claimed, finished), "at", "expires_at" and
-- "attempt" (claimed), "outcome" (finished), in this order, each only when
-- given; no "key".
CREATE FUNCTION @extschema@._le_announce_run(
    event text, job text, due timestamptz, holder text, term bigint, at timestamptz,
    expires_at timestamptz, attempt integer, outcome text)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    payload text;
BEGIN
    payload := '{"event":' || to_json($1)::text
            || ',"job":' || to_json($2)::text
            || ',"due":"' || @extschema@._le_rfc3339($3) || '"';
    IF $4 IS NOT NULL THEN
        payload := payload || ',"holder":' || to_json($4)::text;
    END IF;
    IF $5 IS NOT NULL THEN
        payload := payload || ',"term":' || $5::text;
    END IF;
    payload := payload || ',"at":"' || @extschema@._le_rfc3339($6) || '"';
    IF $7 IS NOT NULL THEN
        payload := payload || ',"expires_at":"' || @extschema@._le_rfc3339($7) || '"';
    END IF;
    IF $8 IS NOT NULL THEN
        payload := payload || ',"attempt":' || $8::text;
    END IF;
    IF $9 IS NOT NULL THEN
        payload := payload || ',"outcome":' || to_json($9)::text;
    END IF;
    PERFORM pg_notify('leaderlock', payload || '}');
    PERFORM @extschema@._le_record($6, $1, $2, $4, $5, payload || '}');
END
$fn$;

-- Contract 24: a schedule paused or resumed, announced and recorded in the
-- history under the job's name (notify.rs ScheduleEvent, byte for byte):
-- {"event","job","at"}.
CREATE FUNCTION @extschema@._le_announce_schedule(event text, job text, at timestamptz)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    payload text;
BEGIN
    payload := '{"event":' || to_json($1)::text || ',"job":' || to_json($2)::text
            || ',"at":"' || @extschema@._le_rfc3339($3) || '"}';
    PERFORM pg_notify('leaderlock', payload);
    PERFORM @extschema@._le_record($3, $1, $2, NULL::text, NULL::bigint, payload);
END
$fn$;

-- A number of seconds (microseconds / 10^6, a Rust f64) as serde_json
-- writes it (ryu: the shortest digits that read back the same, laid out as
-- 2.0, 128.62, 0.0001 or 1e16). PostgreSQL's float8 output (ryu too, with
-- extra_float_digits above 0) gives the digits.
CREATE FUNCTION @extschema@._le_json_seconds(us numeric) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
SET extra_float_digits = 1
AS $fn$
DECLARE
    t text := lower(((us / 1000000::numeric)::float8)::text);
    sign text := '';
    m text[];
    digits text;
    k integer;
    kk integer;
    n integer;
BEGIN
    IF left(t, 1) = '-' THEN
        sign := '-';
        t := substr(t, 2);
    END IF;
    m := regexp_match(t, '^([0-9]*)(?:\.([0-9]*))?(?:e([-+]?[0-9]+))?$');
    digits := ltrim(m[1] || coalesce(m[2], ''), '0');
    IF digits = '' THEN
        RETURN sign || '0.0';
    END IF;
    k := coalesce(m[3]::integer, 0) - length(coalesce(m[2], ''))
         + length(digits) - length(rtrim(digits, '0'));
    digits := rtrim(digits, '0');
    n := length(digits);
    kk := n + k;
    RETURN sign || CASE
        WHEN k >= 0 AND kk <= 16 THEN digits || repeat('0', k) || '.0'
        WHEN kk > 0 AND kk <= 16 THEN left(digits, kk) || '.' || substr(digits, kk + 1)
        WHEN kk > -5 AND kk <= 0 THEN '0.' || repeat('0', -kk) || digits
        WHEN n = 1 THEN digits || 'e' || (kk - 1)::text
        ELSE left(digits, 1) || '.' || substr(digits, 2) || 'e' || (kk - 1)::text END;
END
$fn$;

-- Contract 25: a key expected to be led went without a live holder for
-- longer than its bound (until NULL: "leaderless", since its exact start),
-- or got one again ("leaderless_end", until the tenure found began), on
-- channel leaderlock and in the history, byte for byte the compiled
-- edition's JSON (notify.rs LeaderlessPayload): "event", "key", "since",
-- then "until" or "within_seconds", "seconds", "at".
CREATE FUNCTION @extschema@._le_announce_leaderless(key text, since timestamptz, until timestamptz,
                                                    within_us numeric, at timestamptz)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    payload text;
BEGIN
    payload := '{"event":' || CASE WHEN $3 IS NULL THEN '"leaderless"' ELSE '"leaderless_end"' END
            || ',"key":' || to_json($1)::text
            || ',"since":"' || @extschema@._le_rfc3339($2) || '"';
    IF $3 IS NULL THEN
        payload := payload || ',"within_seconds":' || @extschema@._le_json_seconds($4);
    ELSE
        payload := payload || ',"until":"' || @extschema@._le_rfc3339($3) || '"'
                || ',"seconds":' || @extschema@._le_json_seconds(@extschema@._le_unix_us($3)
                                                                  - @extschema@._le_unix_us($2));
    END IF;
    payload := payload || ',"at":"' || @extschema@._le_rfc3339($5) || '"}';
    PERFORM pg_notify('leaderlock', payload);
    PERFORM @extschema@._le_record($5, CASE WHEN $3 IS NULL THEN 'leaderless' ELSE 'leaderless_end' END,
                                   $1, NULL::text, NULL::bigint, payload);
END
$fn$;

-- ---------------------------------------------------------------------------
-- Internal writers: SECURITY DEFINER, owned by the installing role, which
-- owns the table. Not executable by PUBLIC; reached only through the
-- checked entry points below.
-- ---------------------------------------------------------------------------

-- Contract 8.3: a true answer is durable when the caller sees it.
CREATE FUNCTION @extschema@._le_durable() RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF current_setting('synchronous_commit') IN ('off', 'local') THEN
        PERFORM set_config('synchronous_commit', 'on', true);
    END IF;
END
$fn$;

-- The WAL timeline this server writes on, current at once after a
-- promotion (pg_walfile_name uses the insert timeline; pg_control_checkpoint
-- would give the last checkpoint's). 1 during recovery: nothing is written.
CREATE FUNCTION @extschema@._le_timeline() RETURNS bigint
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
RETURN CASE WHEN pg_is_in_recovery() THEN 1::bigint
            ELSE ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint END;

-- Contract 8.1: the lowest term a new tenure may get on this timeline.
CREATE FUNCTION @extschema@._le_term_floor() RETURNS bigint
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
RETURN (@extschema@._le_timeline() - 1::bigint) * 4294967296::bigint + 1::bigint;

-- Contract 8.2: records a promotion (a timeline newer than the one in
-- leaderlock_failover) and when it was seen, in one statement on the
-- one-row table that never waits (another transaction recording it
-- meanwhile: nothing to do). Held leases are not touched: each lasts at
-- least until leaderlock_failover.changed_at + its ttl, computed where
-- liveness is decided (_le_promoted_at). Until the record commits, every
-- held lease counts as live.
CREATE FUNCTION @extschema@._le_failover_record() RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    tl bigint;
    stored bigint;
BEGIN
    IF pg_is_in_recovery() THEN
        RETURN;
    END IF;
    tl := @extschema@._le_timeline();
    SELECT f.timeline INTO stored FROM @extschema@.leaderlock_failover f WHERE f.one_row;
    IF stored IS NULL THEN
        RAISE EXCEPTION 'leaderlock: the table leaderlock_failover has no row; reinstall leaderlock';
    END IF;
    IF stored >= tl THEN
        RETURN;
    END IF;
    -- N2: the first sight of this timeline, at once visible to all
    -- (time first: a reader that sees the timeline sees its time).
    IF (SELECT q.last_value FROM @extschema@._le_promo_tl q) < tl THEN
        PERFORM setval('@extschema@._le_promo_at'::regclass,
                       (extract(epoch FROM clock_timestamp()) * 1000000)::bigint);
        PERFORM setval('@extschema@._le_promo_tl'::regclass, tl);
    END IF;
    UPDATE @extschema@.leaderlock_failover f SET timeline = tl, changed_at = clock_timestamp()
     WHERE f.one_row AND f.timeline < tl
       AND f.one_row = (SELECT g.one_row FROM @extschema@.leaderlock_failover g
                         WHERE g.one_row FOR UPDATE SKIP LOCKED);
    IF FOUND THEN
        -- Every session lives its ttl from the promotion, those of members
        -- a step had given up on too: every group is stepped afresh (one
        -- whose members had all lapsed has no step due, and its revived
        -- members would renew and own nothing), never waiting.
        UPDATE @extschema@.leaderlock_groups g SET check_at = clock_timestamp(), restep = true
         WHERE g.grp IN (SELECT x.grp FROM @extschema@.leaderlock_groups x
                          FOR NO KEY UPDATE SKIP LOCKED);   -- (one being changed: by its change)
        PERFORM @extschema@._le_durable();
        RAISE LOG 'leaderlock: WAL timeline % (was %: a promotion or a recovery); held leases last at least until now + their ttl',
            tl, stored;
    END IF;
END
$fn$;

-- Refuses inside a security-restricted operation (index expressions,
-- materialized views and the like run by ANALYZE, autovacuum, VACUUM,
-- CREATE INDEX, REINDEX, REFRESH MATERIALIZED VIEW as a table's owner):
-- PostgreSQL refuses CLOSE there (42501) before it looks for the cursor;
-- elsewhere, closing a cursor that does not exist raises 34000 and does
-- nothing else. Without side effects (review round 2, N6: the UNLISTEN
-- probe used before kept a session that LISTENs from PREPARE TRANSACTION).
-- Allowed on a hot standby and in read-only transactions.
CREATE FUNCTION @extschema@._le_unrestricted() RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    EXECUTE 'CLOSE "leaderlock: security-restricted operation probe"';
EXCEPTION
    WHEN invalid_cursor_name THEN
        RETURN;
    WHEN insufficient_privilege THEN
        RAISE EXCEPTION USING ERRCODE = 'insufficient_privilege',
            MESSAGE = 'leaderlock: leases cannot be changed from a security-restricted operation',
            DETAIL = 'PostgreSQL runs index expressions, materialized view queries and the like for '
                     'maintenance commands (ANALYZE, autovacuum, VACUUM, REINDEX, REFRESH MATERIALIZED VIEW) as '
                     'the table''s owner; no lease changes from there.';
END
$fn$;

-- In the SECURITY DEFINER functions, before anything: not in a
-- security-restricted operation; the schema is still the installing
-- role's alone; and the role a caller says it acts for is one the
-- session's role could SET ROLE to (PostgreSQL 16 and later: the SET
-- option of the membership; 14 and 15: membership).
CREATE FUNCTION @extschema@._le_act_as(caller oid) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    me name := @extschema@._le_session_role();
    ok boolean;
BEGIN
    PERFORM @extschema@._le_unrestricted();
    IF NOT EXISTS (SELECT 1 FROM pg_namespace n
                    WHERE n.nspname = '@extschema@'::name
                      AND n.nspowner = (SELECT r.oid FROM pg_roles r WHERE r.rolname = current_user)
                      AND NOT EXISTS (SELECT 1 FROM aclexplode(n.nspacl) a
                                       WHERE a.privilege_type = 'CREATE'::text
                                         AND a.grantee <> n.nspowner)) THEN
        RAISE EXCEPTION USING ERRCODE = 'insufficient_privilege',
            MESSAGE = 'leaderlock: schema @extschema@ is no longer its installer''s alone; leaderlock refuses to run',
            HINT = 'The schema must be owned by the role that owns leaderlock''s functions, and no other '
                   'role may have CREATE on it: REVOKE CREATE ON SCHEMA @extschema@ FROM ...';
    END IF;
    IF caller IS NULL OR NOT EXISTS (SELECT 1 FROM pg_roles r WHERE r.oid = caller) THEN
        ok := false;
    ELSIF current_setting('server_version_num')::integer >= 160000 THEN
        ok := pg_has_role(me, caller, 'SET'::text);
    ELSE
        ok := pg_has_role(me, caller, 'MEMBER'::text);
    END IF;
    IF NOT ok THEN
        RAISE EXCEPTION USING ERRCODE = 'insufficient_privilege',
            MESSAGE = format('leaderlock: role %s cannot act for role %s',
                             quote_ident(me), coalesce(caller::regrole::text, 'NULL')),
            DETAIL = 'The portable edition acts for current_user only where the session''s role '
                     'could SET ROLE to it; le_* called from a SECURITY DEFINER function of another '
                     'role is refused.';
    END IF;
    -- N1: and only for the role whose le_* function called this entry point.
    IF coalesce(current_setting('leaderlock_portable.caller', true), '') IS DISTINCT FROM
       (SELECT @extschema@._le_key(s.secret, caller) FROM @extschema@._le_secret s) THEN
        RAISE EXCEPTION USING ERRCODE = 'insufficient_privilege',
            MESSAGE = format('leaderlock: role %s did not make this call', caller::regrole::text),
            DETAIL = 'The internal _le_* functions act only for the role that called an le_* function '
                     '(its current_user), never for a role named by other code.',
            HINT = 'Call the le_* functions.';
    END IF;
    PERFORM set_config('leaderlock_portable.caller', '', true);   -- one use
    -- Contract 23: the role the history records for what this call changes.
    PERFORM set_config('leaderlock_portable.role', caller::text, true);
END
$fn$;

-- The functions that touch the table run with enable_seqscan = off (index
-- plans whatever the statistics, as compiled) and jit = off: a scan that
-- can only be sequential (a sequence, a one-row table) then costs more
-- than jit_above_cost, and compiling it took 10 to 40 ms of every call on
-- servers with JIT (on by default, managed services included).

-- Extends the lease p_id holds live at p_now (owned by a role p_caller is
-- a member of) by p_ttl or the stored ttl, same term, in one statement
-- that never waits. The term, or NULL when not extended. Contract 21: a
-- key held under a session is extended only when p_move (an acquisition
-- by its holder: le_renew renews its session instead), and is held from
-- then on under p_session (its expires_at and recheck_at infinity, p_ttl
-- the session's), or, p_session NULL, out of sessions with its own ttl.
CREATE FUNCTION @extschema@._le_extend(p_key text, p_id text, p_now timestamptz,
                                       p_ttl interval, p_caller oid, p_term bigint,
                                       p_move boolean, p_session uuid) RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $fn$
DECLARE
    v_term bigint;
    v_pro timestamptz := @extschema@._le_promoted_at();
BEGIN
    UPDATE @extschema@.leaderlock l
       SET renewed_at = p_now,
           expires_at = CASE WHEN p_session IS NULL THEN p_now + coalesce(p_ttl, l.ttl)
                             ELSE 'infinity'::timestamptz END,
           ttl = coalesce(p_ttl, l.ttl),
           recheck_at = CASE
               WHEN p_session IS NOT NULL THEN 'infinity'::timestamptz
               WHEN l.recheck_at <= p_now + coalesce(p_ttl, l.ttl)
                AND l.recheck_at >= p_now + coalesce(p_ttl, l.ttl) / 2.0::float8 THEN l.recheck_at
               ELSE p_now + coalesce(p_ttl, l.ttl) END,
           owner = coalesce(l.owner, p_caller),
           session = p_session
     WHERE l.key = p_key AND l.holder = p_id
       AND CASE WHEN l.session IS NULL THEN GREATEST(l.expires_at, v_pro + l.ttl)
                ELSE @extschema@._le_session_lasts(l.session, v_pro) END > p_now
       AND l.key = (SELECT s.key FROM @extschema@.leaderlock s
                     WHERE s.key = p_key AND s.holder = p_id
                       AND (p_move OR s.session IS NULL)
                       AND CASE WHEN s.session IS NULL THEN GREATEST(s.expires_at, v_pro + s.ttl)
                                ELSE @extschema@._le_session_lasts(s.session, v_pro) END > p_now
                       AND (p_term IS NULL OR s.term = p_term)
                       AND (s.owner IS NULL OR pg_has_role(p_caller, s.owner, 'MEMBER'::text))
                       FOR NO KEY UPDATE SKIP LOCKED)
    RETURNING l.term INTO v_term;
    IF v_term IS NOT NULL THEN
        PERFORM @extschema@._le_durable();
    END IF;
    RETURN v_term;
END
$fn$;

-- Contract 17: _le_extend for a tenure of a key of many slots: the one
-- p_id holds live on p_key at p_now (owned by a role p_caller is a member
-- of), touching that slot's row only, never the key's row. The term, or
-- NULL when not extended. Contract 21, as _le_extend: a tenure held under
-- a session is extended only when p_move (le_renew renews its session
-- instead), and is held from then on under p_session, or out of sessions.
CREATE FUNCTION @extschema@._le_extend_slot(p_key text, p_id text, p_now timestamptz,
                                            p_ttl interval, p_caller oid, p_term bigint,
                                            p_move boolean, p_session uuid) RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $fn$
DECLARE
    v_term bigint;
    v_pro timestamptz := @extschema@._le_promoted_at();
BEGIN
    UPDATE @extschema@.leaderlock_slots l
       SET renewed_at = p_now,
           expires_at = CASE WHEN p_session IS NULL THEN p_now + coalesce(p_ttl, l.ttl)
                             ELSE 'infinity'::timestamptz END,
           ttl = coalesce(p_ttl, l.ttl),
           recheck_at = CASE
               WHEN p_session IS NOT NULL THEN 'infinity'::timestamptz
               WHEN l.recheck_at <= p_now + coalesce(p_ttl, l.ttl)
                AND l.recheck_at >= p_now + coalesce(p_ttl, l.ttl) / 2.0::float8 THEN l.recheck_at
               ELSE p_now + coalesce(p_ttl, l.ttl) END,
           session = p_session
     WHERE l.key = p_key AND l.holder = p_id
       AND CASE WHEN l.session IS NULL THEN GREATEST(l.expires_at, v_pro + l.ttl)
                ELSE @extschema@._le_session_lasts(l.session, v_pro) END > p_now
       AND l.slot = (SELECT s.slot FROM @extschema@.leaderlock_slots s
                      WHERE s.key = p_key AND s.holder = p_id
                        AND (p_move OR s.session IS NULL)
                        AND CASE WHEN s.session IS NULL THEN GREATEST(s.expires_at, v_pro + s.ttl)
                                 ELSE @extschema@._le_session_lasts(s.session, v_pro) END > p_now
                        AND (p_term IS NULL OR s.term = p_term)
                        AND (s.owner IS NULL OR pg_has_role(p_caller, s.owner, 'MEMBER'::text))
                      LIMIT 1
                        FOR NO KEY UPDATE SKIP LOCKED)
    RETURNING l.term INTO v_term;
    IF v_term IS NOT NULL THEN
        PERFORM @extschema@._le_durable();
    END IF;
    RETURN v_term;
END
$fn$;

-- Contract 17: _le_lock_own for a key of many slots: locks the tenure p_id
-- holds live on p_key (owned by a role p_caller is a member of; under a
-- session, while the session is live), never waiting; its slot and term,
-- else raises LE0NL. Called, as _le_lock_own, inside the caller's block
-- that also writes the row.
CREATE FUNCTION @extschema@._le_lock_own_slot(p_key text, p_id text, p_caller oid,
                                              OUT o_slot integer, OUT o_term bigint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $fn$
DECLARE
    r record;
    v_pro timestamptz := @extschema@._le_promoted_at();
BEGIN
    SELECT s.slot, s.term, CASE WHEN s.session IS NULL THEN GREATEST(s.expires_at, v_pro + s.ttl)
                                ELSE @extschema@._le_session_lasts(s.session, v_pro) END AS lasts INTO r
      FROM @extschema@.leaderlock_slots s
     WHERE s.key = p_key AND s.holder = p_id
       AND CASE WHEN s.session IS NULL THEN GREATEST(s.expires_at, v_pro + s.ttl)
                ELSE @extschema@._le_session_lasts(s.session, v_pro) END > clock_timestamp()
       AND (s.owner IS NULL OR pg_has_role(p_caller, s.owner, 'MEMBER'::text))
     LIMIT 1
       FOR NO KEY UPDATE SKIP LOCKED;
    IF NOT FOUND OR r.lasts <= clock_timestamp() THEN
        RAISE SQLSTATE 'LE0NL';
    END IF;
    o_slot := r.slot;
    o_term := r.term;
END
$fn$;

-- Contract 17: key p_key (its row locked by this transaction, no live
-- tenure) admits p_slots from now on: its lapsed tenures in slots above
-- p_slots (all of them when it becomes a key of one) end now, as expiries
-- (announced with p_slots), as expiry.rs end_stale_tenures. False, and
-- nothing changed, when one of them is locked by another transaction (a
-- fenced transaction of its holder, le_expire_lapsed) or held under a
-- session (contract 21: its end has not vacated it yet): the change must
-- wait. Called by _le_attempt_slots only.
CREATE FUNCTION @extschema@._le_end_stale_tenures(p_key text, p_slots integer) RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $fn$
DECLARE
    r record;
    t timestamptz;
    v_above integer := CASE WHEN p_slots > 1 THEN p_slots ELSE 0 END;
    v_pro timestamptz := @extschema@._le_promoted_at();
    v_keys text[];
    v_nums integer[];
    v_holders text[];
    v_terms bigint[];
    v_lasts timestamptz[];
    v_all bigint;
BEGIN
    -- Contract 21: a tenure held under a session (lapsed: the look ended
    -- its session, or could not) is vacated by its session's end only.
    IF EXISTS (SELECT FROM @extschema@.leaderlock_slots s
                WHERE s.key = p_key AND s.slot > v_above AND s.holder IS NOT NULL
                  AND s.session IS NOT NULL) THEN
        RETURN false;
    END IF;
    SELECT array_agg(x.slot), array_agg(x.holder), array_agg(x.term), array_agg(x.lasts)
      INTO v_nums, v_holders, v_terms, v_lasts
      FROM (SELECT s.slot, s.holder, s.term, GREATEST(s.expires_at, v_pro + s.ttl) AS lasts
              FROM @extschema@.leaderlock_slots s
             WHERE s.key = p_key AND s.slot > v_above AND s.holder IS NOT NULL
             ORDER BY s.slot
               FOR NO KEY UPDATE SKIP LOCKED) x;
    SELECT count(*) INTO v_all FROM @extschema@.leaderlock_slots s
     WHERE s.key = p_key AND s.slot > v_above AND s.holder IS NOT NULL;
    IF coalesce(cardinality(v_nums), 0) < v_all THEN
        RETURN false;
    END IF;
    IF v_all = 0 THEN
        RETURN true;
    END IF;
    t := clock_timestamp();
    UPDATE @extschema@.leaderlock_slots s
       SET holder = NULL, value = NULL, owner = NULL, expiries = s.expiries + 1, changed_at = t
     WHERE s.key = p_key AND s.slot = ANY (v_nums);
    PERFORM @extschema@._le_durable();
    FOR i IN 1 .. cardinality(v_nums) LOOP
        PERFORM @extschema@._le_announce('expired'::text, p_key, v_holders[i], v_terms[i], t, NULL::text,
                                         v_lasts[i], NULL::jsonb, NULL::boolean, p_slots);
    END LOOP;
    RETURN true;
END
$fn$;

-- Contract 21: extends at p_now session p_session, or (p_session NULL)
-- every session of p_id, live (p_pro: _le_promoted_at()) and owned by a
-- role p_caller is a member of, by p_ttl or its stored ttl (recheck_at as
-- in _le_extend), one row per session whatever its keys, in one statement
-- that never waits: a session another transaction holds locked for an
-- update (its renewal or its end) is skipped; an acquisition's key share
-- lock does not stop it. Returns the sessions extended.
CREATE FUNCTION @extschema@._le_extend_sessions(p_session uuid, p_id text, p_now timestamptz,
                                                p_ttl interval, p_caller oid, p_pro timestamptz) RETURNS uuid[]
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $fn$
DECLARE
    v_own uuid[];
    v_done uuid[];
BEGIN
    -- the sessions to extend, locked (the one asked for, through its
    -- primary key; or the id's), then written in one statement
    IF p_session IS NOT NULL THEN
        SELECT array_agg(o.session) INTO v_own
          FROM (SELECT s.session FROM @extschema@.leaderlock_sessions s
                 WHERE s.session = p_session AND GREATEST(s.expires_at, p_pro + s.ttl) > p_now
                   AND pg_has_role(p_caller, s.owner, 'MEMBER'::text)
                   FOR NO KEY UPDATE SKIP LOCKED) o;
    ELSE
        SELECT array_agg(o.session) INTO v_own
          FROM (SELECT s.session FROM @extschema@.leaderlock_sessions s
                 WHERE s.id = p_id AND GREATEST(s.expires_at, p_pro + s.ttl) > p_now
                   AND pg_has_role(p_caller, s.owner, 'MEMBER'::text)
                   FOR NO KEY UPDATE SKIP LOCKED) o;
    END IF;
    IF v_own IS NULL THEN
        RETURN '{}'::uuid[];
    END IF;
    WITH renewed AS (
        UPDATE @extschema@.leaderlock_sessions x
           SET renewed_at = p_now,
               expires_at = p_now + coalesce(p_ttl, x.ttl),
               ttl = coalesce(p_ttl, x.ttl),
               recheck_at = CASE
                   WHEN x.recheck_at <= p_now + coalesce(p_ttl, x.ttl)
                    AND x.recheck_at >= p_now + coalesce(p_ttl, x.ttl) / 2.0::float8 THEN x.recheck_at
                   ELSE p_now + coalesce(p_ttl, x.ttl) END
         WHERE x.session = ANY (v_own) AND GREATEST(x.expires_at, p_pro + x.ttl) > p_now
        RETURNING x.session)
    SELECT array_agg(r.session) INTO v_done FROM renewed r;
    IF v_done IS NOT NULL THEN
        PERFORM @extschema@._le_durable();
    END IF;
    RETURN coalesce(v_done, '{}'::uuid[]);
END
$fn$;

-- Contract 21: ends session p_session, whose row this transaction holds
-- locked: FOR NO KEY UPDATE (against its renewals and other ends; an
-- acquisition under it in flight, which holds it FOR KEY SHARE, goes on,
-- and a key it adds is ended at the next end), or FOR UPDATE for a close
-- (p_closed). Every key held under it is vacated (term kept; value kept if
-- the session keeps values), ordered by key, then every tenure of a key of
-- many slots held under it (contract 17), ordered by key and slot, with one
-- clock reading, and each announced (a tenure with its key's slots):
-- closed, as le_release does ("released", counted as a release, no
-- lock-delay), waiting for rows another transaction holds locked; else as
-- the worker would ("expired", "reason":"session_expired", counted as an
-- expiry, its expiry the session's, and not acquirable until that expiry +
-- its lock_delay, whoever ends it and whenever), skipping rows another
-- transaction holds locked. The row is deleted only at READ COMMITTED (an
-- older snapshot would miss a key acquired since), locked FOR UPDATE (a
-- close holds it; else without waiting: no acquisition under it in flight,
-- none to come), and once no key and no tenure is held under it (counted
-- by a fresh statement). Otherwise it stays, lapsed from now (expires_at
-- and recheck_at at most now; a close: no lock-delay for what is left),
-- and the next acquisition of one of its keys or le_expire_lapsed ends it
-- again: nothing is left naming a session whose row is gone. A session
-- that no longer exists (a key of an earlier version): its keys and
-- tenures (p_key's alone, when given) are vacated the same way. Returns
-- how many keys and tenures.
CREATE FUNCTION @extschema@._le_end_session(p_session uuid, p_closed boolean, p_pro timestamptz,
                                            p_key text) RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $fn$
DECLARE
    s record;
    v_gone boolean;
    v_keys text[];
    v_holders text[];
    v_terms bigint[];
    v_tkeys text[];
    v_tnums integer[];
    v_tholders text[];
    v_tterms bigint[];
    v_tslots integer[];
    v_lasts timestamptz;
    v_delete boolean;
    t timestamptz;
BEGIN
    SELECT x.keep_values, x.lock_delay, GREATEST(x.expires_at, p_pro + x.ttl) AS lasts INTO s
      FROM @extschema@.leaderlock_sessions x WHERE x.session = p_session;
    v_gone := NOT FOUND;
    -- its keys first, then its tenures (the order the functions lock them)
    IF p_closed THEN
        SELECT array_agg(k.key ORDER BY k.key), array_agg(k.holder ORDER BY k.key), array_agg(k.term ORDER BY k.key)
          INTO v_keys, v_holders, v_terms
          FROM (SELECT l.key, l.holder, l.term FROM @extschema@.leaderlock l
                 WHERE l.session = p_session AND l.holder IS NOT NULL
                 ORDER BY l.key
                   FOR NO KEY UPDATE) k;
        SELECT array_agg(k.key ORDER BY k.key, k.slot), array_agg(k.slot ORDER BY k.key, k.slot),
               array_agg(k.holder ORDER BY k.key, k.slot), array_agg(k.term ORDER BY k.key, k.slot)
          INTO v_tkeys, v_tnums, v_tholders, v_tterms
          FROM (SELECT y.key, y.slot, y.holder, y.term FROM @extschema@.leaderlock_slots y
                 WHERE y.session = p_session AND y.holder IS NOT NULL
                 ORDER BY y.key, y.slot
                   FOR NO KEY UPDATE) k;
    ELSE
        SELECT array_agg(k.key ORDER BY k.key), array_agg(k.holder ORDER BY k.key), array_agg(k.term ORDER BY k.key)
          INTO v_keys, v_holders, v_terms
          FROM (SELECT l.key, l.holder, l.term FROM @extschema@.leaderlock l
                 WHERE l.session = p_session AND l.holder IS NOT NULL
                   AND (NOT v_gone OR p_key IS NULL OR l.key = p_key)
                 ORDER BY l.key
                   FOR NO KEY UPDATE SKIP LOCKED) k;
        SELECT array_agg(k.key ORDER BY k.key, k.slot), array_agg(k.slot ORDER BY k.key, k.slot),
               array_agg(k.holder ORDER BY k.key, k.slot), array_agg(k.term ORDER BY k.key, k.slot)
          INTO v_tkeys, v_tnums, v_tholders, v_tterms
          FROM (SELECT y.key, y.slot, y.holder, y.term FROM @extschema@.leaderlock_slots y
                 WHERE y.session = p_session AND y.holder IS NOT NULL
                   AND (NOT v_gone OR p_key IS NULL OR y.key = p_key)
                 ORDER BY y.key, y.slot
                   FOR NO KEY UPDATE SKIP LOCKED) k;
    END IF;
    -- read after the locks, as a release does
    t := clock_timestamp();
    -- stored and announced: a released key's expiry is its release; an
    -- expired one's, when its session lapsed (now at the latest); the
    -- lock-delay counts from there
    v_lasts := CASE WHEN p_closed THEN t ELSE LEAST(coalesce(s.lasts, '-infinity'::timestamptz), t) END;
    IF v_keys IS NOT NULL THEN
        UPDATE @extschema@.leaderlock l
           SET holder = NULL, value = CASE WHEN s.keep_values THEN l.value END, owner = NULL,
               session_pid = NULL, session_start = NULL, expires_at = v_lasts, session = NULL,
               releases = l.releases + CASE WHEN p_closed THEN 1 ELSE 0 END,
               expiries = l.expiries + CASE WHEN p_closed THEN 0 ELSE 1 END,
               delayed_until = CASE WHEN NOT p_closed AND s.lock_delay > interval '0'
                                    THEN v_lasts + s.lock_delay END,
               changed_at = t
         WHERE l.key = ANY (v_keys);
        FOR i IN 1 .. cardinality(v_keys) LOOP
            IF p_closed THEN
                PERFORM @extschema@._le_announce('released'::text, v_keys[i], v_holders[i], v_terms[i], t,
                                                 NULL::text, NULL::timestamptz, NULL::jsonb, false, NULL::integer);
            ELSE
                PERFORM @extschema@._le_announce('expired'::text, v_keys[i], v_holders[i], v_terms[i], t,
                                                 NULL::text, v_lasts, NULL::jsonb, NULL::boolean, NULL::integer,
                                                 'session_expired'::text);
            END IF;
        END LOOP;
    END IF;
    IF v_tkeys IS NOT NULL THEN
        -- the same for each tenure, in its slot (the key's row untouched)
        UPDATE @extschema@.leaderlock_slots y
           SET holder = NULL, value = CASE WHEN s.keep_values THEN y.value END, owner = NULL,
               expires_at = v_lasts, session = NULL,
               releases = y.releases + CASE WHEN p_closed THEN 1 ELSE 0 END,
               expiries = y.expiries + CASE WHEN p_closed THEN 0 ELSE 1 END,
               delayed_until = CASE WHEN NOT p_closed AND s.lock_delay > interval '0'
                                    THEN v_lasts + s.lock_delay END,
               changed_at = t
          FROM ROWS FROM (unnest(v_tkeys), unnest(v_tnums)) AS v(key, slot)
         WHERE y.key = v.key AND y.slot = v.slot;
        SELECT array_agg(h.slots ORDER BY v.n) INTO v_tslots
          FROM unnest(v_tkeys) WITH ORDINALITY AS v(key, n)
          LEFT JOIN @extschema@.leaderlock h ON h.key = v.key;
        FOR i IN 1 .. cardinality(v_tkeys) LOOP
            IF p_closed THEN
                PERFORM @extschema@._le_announce('released'::text, v_tkeys[i], v_tholders[i], v_tterms[i], t,
                                                 NULL::text, NULL::timestamptz, NULL::jsonb, false, v_tslots[i]);
            ELSE
                PERFORM @extschema@._le_announce('expired'::text, v_tkeys[i], v_tholders[i], v_tterms[i], t,
                                                 NULL::text, v_lasts, NULL::jsonb, NULL::boolean, v_tslots[i],
                                                 'session_expired'::text);
            END IF;
        END LOOP;
    END IF;
    IF NOT v_gone THEN
        -- the row goes only at READ COMMITTED, locked FOR UPDATE, with no
        -- key nor tenure held under it any more
        v_delete := current_setting('transaction_isolation') IN ('read committed', 'read uncommitted');
        IF v_delete AND NOT p_closed THEN
            PERFORM FROM @extschema@.leaderlock_sessions x WHERE x.session = p_session FOR UPDATE SKIP LOCKED;
            v_delete := FOUND;
        END IF;
        IF v_delete THEN
            v_delete := NOT EXISTS (SELECT FROM @extschema@.leaderlock l
                                     WHERE l.session = p_session AND l.holder IS NOT NULL)
                    AND NOT EXISTS (SELECT FROM @extschema@.leaderlock_slots y
                                     WHERE y.session = p_session AND y.holder IS NOT NULL);
        END IF;
        IF v_delete THEN
            DELETE FROM @extschema@.leaderlock_sessions x WHERE x.session = p_session;
        ELSE
            UPDATE @extschema@.leaderlock_sessions x
               SET expires_at = LEAST(x.expires_at, t), recheck_at = LEAST(x.recheck_at, t),
                   lock_delay = CASE WHEN p_closed THEN interval '0' ELSE x.lock_delay END
             WHERE x.session = p_session;
        END IF;
    END IF;
    IF v_keys IS NOT NULL OR v_tkeys IS NOT NULL OR NOT v_gone THEN
        PERFORM @extschema@._le_durable();
    END IF;
    RETURN coalesce(cardinality(v_keys), 0) + coalesce(cardinality(v_tkeys), 0);
END
$fn$;

-- Contract 21, where no worker runs: the sessions key p_key is held under
-- (a key of one slot: its holder's; of many: each tenure's), those that
-- lapsed (p_pro: _le_promoted_at()), are ended (_le_end_session) before
-- an acquisition looks at the key further, in the caller's transaction,
-- never waiting: each row locked FOR NO KEY UPDATE SKIP LOCKED (an
-- acquisition under it in flight does not stop that; its renewal or
-- another end does), keys and tenures another transaction holds locked
-- skipped. A key or tenure naming a session that no longer exists (an
-- earlier version's) is vacated alone. False, nothing changed and nothing
-- locked, when there is no such session to end now (the key is no longer
-- held under one, its sessions are live, or their rows are locked by
-- another transaction).
CREATE FUNCTION @extschema@._le_end_lapsed_key(p_key text, p_pro timestamptz) RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $fn$
DECLARE
    v_session uuid;
    v_ended boolean := false;
BEGIN
    FOR v_session IN
        SELECT l.session FROM @extschema@.leaderlock l
         WHERE l.key = p_key AND l.holder IS NOT NULL AND l.session IS NOT NULL
        UNION
        SELECT y.session FROM @extschema@.leaderlock_slots y
         WHERE y.key = p_key AND y.holder IS NOT NULL AND y.session IS NOT NULL
           AND NOT coalesce(@extschema@._le_session_lasts(y.session, p_pro) > clock_timestamp(), false)
    LOOP
        PERFORM FROM @extschema@.leaderlock_sessions x
          WHERE x.session = v_session
            AND NOT coalesce(GREATEST(x.expires_at, p_pro + x.ttl) > clock_timestamp(), false)
            FOR NO KEY UPDATE SKIP LOCKED;
        IF NOT FOUND AND EXISTS (SELECT FROM @extschema@.leaderlock_sessions x WHERE x.session = v_session) THEN
            CONTINUE;   -- live, or its renewal or end in progress
        END IF;
        PERFORM @extschema@._le_end_session(v_session, false, p_pro, p_key);
        v_ended := true;
    END LOOP;
    RETURN v_ended;
END
$fn$;

-- Contract 17: one look at a key acquired with p_slots > 1, or at a key
-- that admits more than one holder (p_has: its slots, NULL for a key not
-- seen yet; p_head_live: its row has a live holder, i.e. it is a key of
-- one slot, held). As slots.rs attempt(): takes a free slot, extends the
-- caller's own tenure, or says why not ('acquired', 'held' until o_until,
-- 'busy'); 'one' when the key, with no live holder, now admits one holder
-- (its row locked by this transaction): the caller goes on as for any key.
-- Raises 22023 when the key has live holders (or a slot under a
-- lock-delay) and admits another number of slots. The key's row (its last
-- term) is locked only by candidates, only while it has no live holder,
-- never waiting, and only for an instant unless a tenure starts (then
-- until the transaction ends); holders never lock it. Contract 21:
-- p_session: the tenure is taken, or the caller's own moved, under that
-- session (p_ttl is its ttl, p_session_end its end as announced; stored:
-- infinity), else out of sessions; the same session: nothing written. A
-- lapsed session that still holds a slot is ended first (all its keys);
-- until it is (its row locked by another transaction), its slot is taken,
-- by nobody's end; a vacant slot under a lock-delay is taken until the
-- delay ends. Called by _le_attempt only (p_pro: its _le_promoted_at()).
CREATE FUNCTION @extschema@._le_attempt_slots(p_key text, p_id text, p_ttl interval, p_value jsonb,
                                              p_caller oid, p_insert_wait_ms bigint, p_slots integer,
                                              p_has integer, p_head_live boolean, p_pro timestamptz,
                                              p_session uuid, p_session_end timestamptz,
                                              OUT o_outcome text, OUT o_until timestamptz)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $fn$
DECLARE
    own record;
    head record;
    free record;
    t timestamptz;
    v_term bigint;
    v_slot integer;
    v_live bigint := 0;      -- slots taken until v_earliest at the latest: live, or under a lock-delay
    v_stuck bigint := 0;     -- slots held by a lapsed session not ended yet: taken, no end known
    v_mine bigint;
    v_earliest timestamptz;
    v_expires timestamptz;
    old_lock_timeout text;
BEGIN
    IF p_head_live THEN
        -- A key of one slot with a live holder, asked for more.
        PERFORM @extschema@._le_slots_differ(p_key, p_has, p_slots);
    END IF;

    IF p_has IS NULL THEN
        -- A brand-new key of p_slots slots: its row holds no holder and the
        -- first term (the timeline's floor), which its first tenure takes,
        -- in slot 1. Waits only for a concurrent first insert of the key.
        t := clock_timestamp();
        v_expires := CASE WHEN p_session IS NULL THEN t + p_ttl ELSE 'infinity'::timestamptz END;
        IF p_insert_wait_ms IS NULL THEN
            INSERT INTO @extschema@.leaderlock AS l (key, holder, term, tenures, changed_at, slots)
            VALUES (p_key, NULL, @extschema@._le_term_floor(), 1, t, p_slots)
            ON CONFLICT (key) DO NOTHING
            RETURNING l.term INTO v_term;
        ELSE
            old_lock_timeout := current_setting('lock_timeout');
            BEGIN
                PERFORM set_config('lock_timeout', p_insert_wait_ms::text || 'ms', true);
                INSERT INTO @extschema@.leaderlock AS l (key, holder, term, tenures, changed_at, slots)
                VALUES (p_key, NULL, @extschema@._le_term_floor(), 1, t, p_slots)
                ON CONFLICT (key) DO NOTHING
                RETURNING l.term INTO v_term;
                PERFORM set_config('lock_timeout', old_lock_timeout, true);
            EXCEPTION WHEN lock_not_available THEN
                v_term := NULL;   -- a rival's first insert is still open
            END;
        END IF;
        IF v_term IS NOT NULL THEN
            INSERT INTO @extschema@.leaderlock_slots AS s
                   (key, slot, holder, term, acquired_at, renewed_at, expires_at, ttl, recheck_at,
                    value, owner, changed_at, session, delayed_until)
            VALUES (p_key, 1, p_id, v_term, t, t, v_expires, p_ttl, v_expires, p_value, p_caller, t,
                    p_session, NULL)
            ON CONFLICT (key, slot) DO UPDATE
               SET holder = excluded.holder, term = excluded.term, acquired_at = excluded.acquired_at,
                   renewed_at = excluded.renewed_at, expires_at = excluded.expires_at, ttl = excluded.ttl,
                   recheck_at = excluded.recheck_at, value = excluded.value, owner = excluded.owner,
                   changed_at = excluded.changed_at, session = excluded.session, delayed_until = NULL,
                   expiries = s.expiries + CASE WHEN s.holder IS NULL THEN 0 ELSE 1 END;
            PERFORM @extschema@._le_durable();
            PERFORM @extschema@._le_announce('acquired'::text, p_key, p_id, v_term, t, NULL::text,
                                             coalesce(p_session_end, v_expires), p_value, NULL::boolean, p_slots);
            o_outcome := 'acquired';
            RETURN;
        END IF;
        -- A concurrent first acquisition won: a slot may be left in it.
        SELECT l.slots INTO p_has FROM @extschema@.leaderlock l WHERE l.key = p_key;
        IF NOT coalesce(p_has > 1, false) THEN
            o_outcome := 'busy';
            RETURN;
        END IF;
    END IF;

    t := clock_timestamp();
    IF p_has > 1 THEN
        -- Contract 21, no worker: a lapsed session that holds a slot is
        -- ended first (all its keys, as _le_attempt does for a key of one
        -- slot; a look of le_acquire that takes nothing rolls it back).
        IF EXISTS (SELECT FROM @extschema@.leaderlock_slots s
                    WHERE s.key = p_key AND s.holder IS NOT NULL AND s.session IS NOT NULL
                      AND NOT coalesce(@extschema@._le_session_lasts(s.session, p_pro) > t, false)) THEN
            PERFORM @extschema@._le_end_lapsed_key(p_key, p_pro);
            t := clock_timestamp();
        END IF;
        -- The id's live tenure (an owned one first, its latest).
        SELECT s.slot, s.term,
               CASE WHEN s.session IS NULL THEN GREATEST(s.expires_at, p_pro + s.ttl)
                    ELSE @extschema@._le_session_lasts(s.session, p_pro) END AS lasts,
               (s.owner IS NULL OR pg_has_role(p_caller, s.owner, 'MEMBER'::text)) AS owned, s.session
          INTO own
          FROM @extschema@.leaderlock_slots s
         WHERE s.key = p_key AND s.holder = p_id
           AND CASE WHEN s.session IS NULL THEN GREATEST(s.expires_at, p_pro + s.ttl)
                    ELSE @extschema@._le_session_lasts(s.session, p_pro) END > t
         ORDER BY 4 DESC, 3 DESC LIMIT 1;
        IF FOUND AND NOT own.owned THEN
            -- owned by a role the caller is not a member of: as for a key
            -- of one slot, not the caller's to extend, nor to hold twice
            -- (contract 13)
            o_outcome := 'held';
            o_until := own.lasts;
            RETURN;
        END IF;
        -- The caller's own live tenure: extend it, same term (contract 21:
        -- moved into p_session or out of sessions, same slot; held under
        -- p_session already: nothing to extend).
        IF FOUND AND own.owned AND own.lasts > t THEN
            IF p_has <> p_slots THEN
                PERFORM @extschema@._le_slots_differ(p_key, p_has, p_slots);
            END IF;
            IF p_session IS NOT NULL AND own.session = p_session THEN
                v_term := own.term;
                IF p_value IS NOT NULL THEN
                    -- set under the row's lock, never waiting
                    UPDATE @extschema@.leaderlock_slots s SET value = p_value
                     WHERE s.key = p_key AND s.slot = own.slot
                       AND s.slot = (SELECT y.slot FROM @extschema@.leaderlock_slots y
                                      WHERE y.key = p_key AND y.slot = own.slot AND y.holder = p_id
                                        AND y.term = own.term AND y.session = p_session
                                        AND @extschema@._le_session_lasts(p_session, p_pro) > clock_timestamp()
                                        FOR NO KEY UPDATE SKIP LOCKED);
                    IF NOT FOUND THEN
                        v_term := NULL;
                    END IF;
                END IF;
            ELSE
                v_term := @extschema@._le_extend_slot(p_key, p_id, t, p_ttl, p_caller, NULL::bigint, true,
                                                      p_session);
                IF v_term IS NOT NULL AND p_value IS NOT NULL THEN
                    UPDATE @extschema@.leaderlock_slots s SET value = p_value
                     WHERE s.key = p_key AND s.slot = own.slot;
                END IF;
            END IF;
            IF v_term IS NULL THEN
                o_outcome := 'busy';
                RETURN;
            END IF;
            IF p_value IS NOT NULL THEN
                PERFORM @extschema@._le_durable();
                PERFORM @extschema@._le_announce('proclaimed'::text, p_key, p_id, v_term, t, NULL::text,
                                                 NULL::timestamptz, p_value, NULL::boolean, p_has);
            END IF;
            o_outcome := 'acquired';
            RETURN;
        END IF;
        -- The taken slots: live tenures, and vacant ones under a lock-delay
        -- (contract 21): how many, and the earliest end; and those a lapsed
        -- session not ended yet still holds.
        SELECT count(*) FILTER (WHERE x.until > t), min(x.until) FILTER (WHERE x.until > t),
               count(*) FILTER (WHERE x.in_session AND NOT coalesce(x.until > t, false))
          INTO v_live, v_earliest, v_stuck
          FROM (SELECT CASE WHEN s.holder IS NULL THEN s.delayed_until
                            WHEN s.session IS NULL THEN GREATEST(s.expires_at, p_pro + s.ttl)
                            ELSE @extschema@._le_session_lasts(s.session, p_pro) END AS until,
                       s.holder IS NOT NULL AND s.session IS NOT NULL AS in_session
                  FROM @extschema@.leaderlock_slots s
                 WHERE s.key = p_key) x;
    END IF;
    IF p_has <> p_slots AND v_live > 0 THEN
        PERFORM @extschema@._le_slots_differ(p_key, p_has, p_slots);
    END IF;

    IF p_slots = 1 THEN
        -- No live holder: the key becomes one of one slot, its row locked
        -- (kept only if locked).
        BEGIN
            SELECT l.slots INTO head FROM @extschema@.leaderlock l
             WHERE l.key = p_key
               AND (l.holder IS NULL
                    OR NOT coalesce(GREATEST(l.expires_at, p_pro + l.ttl) > clock_timestamp(), false))
               AND NOT coalesce(l.delayed_until > clock_timestamp(), false)
               FOR NO KEY UPDATE SKIP LOCKED;
            IF NOT FOUND THEN
                RAISE SQLSTATE 'LE0NL';
            END IF;
            -- No tenure starts while the row is locked: one live now (or a
            -- lock-delay running) started before the lock.
            IF head.slots > 1 AND EXISTS (
                    SELECT 1 FROM @extschema@.leaderlock_slots s
                     WHERE s.key = p_key
                       AND CASE WHEN s.holder IS NULL THEN s.delayed_until
                                WHEN s.session IS NULL THEN GREATEST(s.expires_at, p_pro + s.ttl)
                                ELSE @extschema@._le_session_lasts(s.session, p_pro) END > clock_timestamp()) THEN
                PERFORM @extschema@._le_slots_differ(p_key, head.slots, p_slots);
            END IF;
            -- Its lapsed tenures end first (waiting for a fenced one).
            IF NOT @extschema@._le_end_stale_tenures(p_key, 1) THEN
                RAISE SQLSTATE 'LE0NL';
            END IF;
            UPDATE @extschema@.leaderlock l SET slots = 1 WHERE l.key = p_key;
        EXCEPTION WHEN SQLSTATE 'LE0NL' THEN
            o_outcome := 'busy';
            RETURN;
        END;
        o_outcome := 'one';
        RETURN;
    END IF;

    IF p_has = p_slots AND v_live + v_stuck >= p_slots THEN
        o_outcome := CASE WHEN v_earliest IS NULL THEN 'busy' ELSE 'held' END;
        o_until := v_earliest;
        RETURN;
    END IF;

    -- Lock the key's row, find the first free slot, issue a term: in a
    -- subtransaction kept only if it acquired, so a candidate that finds
    -- every slot taken keeps no lock.
    o_outcome := 'busy';
    BEGIN
        SELECT l.holder, l.term, l.slots, GREATEST(l.expires_at, p_pro + l.ttl) AS lasts INTO head
          FROM @extschema@.leaderlock l
         WHERE l.key = p_key
           AND (l.holder IS NULL
                OR NOT coalesce(GREATEST(l.expires_at, p_pro + l.ttl) > clock_timestamp(), false))
           AND NOT coalesce(l.delayed_until > clock_timestamp(), false)
           FOR NO KEY UPDATE SKIP LOCKED;
        IF NOT FOUND THEN
            -- locked by another candidate, or (a key of one slot) taken
            -- live meanwhile, or vacated under a lock-delay since the
            -- look (contract 21): look again
            RAISE SQLSTATE 'LE0NL';
        END IF;
        -- No tenure starts while the row is locked: the key's number of
        -- slots changes only if no tenure is live now (nor a lock-delay
        -- running).
        IF head.slots <> p_slots AND EXISTS (
                SELECT 1 FROM @extschema@.leaderlock_slots s
                 WHERE s.key = p_key
                   AND CASE WHEN s.holder IS NULL THEN s.delayed_until
                            WHEN s.session IS NULL THEN GREATEST(s.expires_at, p_pro + s.ttl)
                            ELSE @extschema@._le_session_lasts(s.session, p_pro) END > clock_timestamp()) THEN
            PERFORM @extschema@._le_slots_differ(p_key, head.slots, p_slots);
        END IF;
        -- Changing the key's slots: its lapsed tenures beyond the new
        -- number end first (a fenced one, or one a lapsed session still
        -- holds: look again).
        IF head.slots <> p_slots AND head.slots > 1
           AND NOT @extschema@._le_end_stale_tenures(p_key, p_slots) THEN
            RAISE SQLSTATE 'LE0NL';
        END IF;
        -- One live tenure per id, whoever started another since the look
        -- (contract 21: nor a second one while a lapsed session of the id
        -- not ended yet holds one).
        SELECT min(x.lasts) FILTER (WHERE x.lasts > clock_timestamp()), count(*) INTO o_until, v_mine
          FROM (SELECT CASE WHEN s.session IS NULL THEN GREATEST(s.expires_at, p_pro + s.ttl)
                            ELSE @extschema@._le_session_lasts(s.session, p_pro) END AS lasts,
                       s.session
                  FROM @extschema@.leaderlock_slots s
                 WHERE s.key = p_key AND s.holder = p_id) x
         WHERE x.lasts > clock_timestamp() OR x.session IS NOT NULL;
        IF v_mine > 0 THEN
            IF o_until IS NOT NULL THEN
                o_outcome := 'held';
            END IF;
            RAISE SQLSTATE 'LE0NL';
        END IF;
        -- The first free slot: vacant and not under a lock-delay, or
        -- lapsed (its holder out; a tenure held under a session only once
        -- its session's end vacated it).
        SELECT s.slot, s.holder, s.term, GREATEST(s.expires_at, p_pro + s.ttl) AS lasts INTO free
          FROM @extschema@.leaderlock_slots s
         WHERE s.key = p_key AND s.slot <= p_slots
           AND ((s.holder IS NULL AND NOT coalesce(s.delayed_until > clock_timestamp(), false))
                OR (s.holder IS NOT NULL AND s.session IS NULL
                    AND NOT coalesce(GREATEST(s.expires_at, p_pro + s.ttl) > clock_timestamp(), false)))
         ORDER BY s.slot LIMIT 1
           FOR NO KEY UPDATE SKIP LOCKED;
        IF FOUND THEN
            v_slot := free.slot;
        ELSE
            -- else the lowest slot number the key has no row for yet
            SELECT min(n.n) INTO v_slot FROM generate_series(1, p_slots) AS n(n)
             WHERE NOT EXISTS (SELECT 1 FROM @extschema@.leaderlock_slots s
                                WHERE s.key = p_key AND s.slot = n.n);
            IF v_slot IS NULL THEN
                -- every slot taken (or locked by le_expire_lapsed vacating it)
                SELECT min(x.until) INTO o_until
                  FROM (SELECT CASE WHEN s.holder IS NULL THEN s.delayed_until
                                    WHEN s.session IS NULL THEN GREATEST(s.expires_at, p_pro + s.ttl)
                                    ELSE @extschema@._le_session_lasts(s.session, p_pro) END AS until
                          FROM @extschema@.leaderlock_slots s
                         WHERE s.key = p_key) x
                 WHERE x.until > clock_timestamp();
                IF o_until IS NOT NULL THEN
                    o_outcome := 'held';
                END IF;
                RAISE SQLSTATE 'LE0NL';
            END IF;
        END IF;
        -- The next term (contract 8.1: at least the timeline's floor),
        -- counted as a tenure; the row keeps no holder (a lapsed one of a
        -- key of one slot is vacated and counted as an expiry) and admits
        -- p_slots from now on.
        t := clock_timestamp();
        v_expires := CASE WHEN p_session IS NULL THEN t + p_ttl ELSE 'infinity'::timestamptz END;
        UPDATE @extschema@.leaderlock l
           SET holder = NULL, term = GREATEST(l.term + 1, @extschema@._le_term_floor()),
               tenures = l.tenures + 1, changed_at = t, slots = p_slots, value = NULL,
               session_pid = NULL, session_start = NULL, owner = NULL,
               expiries = l.expiries + CASE WHEN l.holder IS NULL THEN 0 ELSE 1 END
         WHERE l.key = p_key
        RETURNING l.term INTO v_term;
        -- The tenure, in its slot (a lapsed one taken over counts as an
        -- expiry; contract 21: under p_session, or out of sessions).
        INSERT INTO @extschema@.leaderlock_slots AS s
               (key, slot, holder, term, acquired_at, renewed_at, expires_at, ttl, recheck_at,
                value, owner, changed_at, session, delayed_until)
        VALUES (p_key, v_slot, p_id, v_term, t, t, v_expires, p_ttl, v_expires, p_value, p_caller, t,
                p_session, NULL)
        ON CONFLICT (key, slot) DO UPDATE
           SET holder = excluded.holder, term = excluded.term, acquired_at = excluded.acquired_at,
               renewed_at = excluded.renewed_at, expires_at = excluded.expires_at, ttl = excluded.ttl,
               recheck_at = excluded.recheck_at, value = excluded.value, owner = excluded.owner,
               changed_at = excluded.changed_at, session = excluded.session, delayed_until = NULL,
               expiries = s.expiries + CASE WHEN s.holder IS NULL THEN 0 ELSE 1 END;
        PERFORM @extschema@._le_durable();
        -- Lapsed tenures taken over: their end is announced first, as the
        -- compiled worker would have.
        IF head.holder IS NOT NULL THEN
            PERFORM @extschema@._le_announce('expired'::text, p_key, head.holder, head.term, t, NULL::text,
                                             head.lasts, NULL::jsonb, NULL::boolean, head.slots);
        END IF;
        IF free.holder IS NOT NULL THEN
            PERFORM @extschema@._le_announce('expired'::text, p_key, free.holder, free.term, t, NULL::text,
                                             free.lasts, NULL::jsonb, NULL::boolean, head.slots);
        END IF;
        PERFORM @extschema@._le_announce('acquired'::text, p_key, p_id, v_term, t,
                                         coalesce(free.holder, head.holder), coalesce(p_session_end, v_expires),
                                         p_value, NULL::boolean, p_slots);
        o_outcome := 'acquired';
    EXCEPTION WHEN SQLSTATE 'LE0NL' THEN
        RETURN;
    END;
END
$fn$;

-- ---------------------------------------------------------------------------
-- Entry points of the writers: SECURITY DEFINER, executable by all. Each
-- checks every argument (contract 6) and the role it is to act for
-- (_le_act_as) before anything: a direct call gets no further than a call
-- through the le_* functions.
-- ---------------------------------------------------------------------------

-- One look at the lease (contract 3.1): take it, extend it, or say why
-- not. o_outcome: 'acquired', 'held' (live, another's, or vacant under a
-- lock-delay, until o_until), 'busy' (locked by another transaction) or
-- 'ended' (p_session is not live, or not the caller's: contract 21).
-- p_insert_wait_ms bounds the wait behind a concurrent first insert of a
-- brand-new key (le_acquire); NULL: wait for its outcome (le_try_acquire).
-- p_slots: how many holders the key is to admit (contract 17; keys of
-- more, or asked for more, are _le_attempt_slots'). p_session (contract
-- 21): acquire under that session, for its id (p_id and p_ttl are then
-- the session's, whatever is given), the tenure living as long as the
-- session.
CREATE FUNCTION @extschema@._le_attempt(p_key text, p_id text, p_ttl interval, p_value jsonb,
                                        p_caller oid, p_insert_wait_ms bigint, p_slots integer DEFAULT 1,
                                        p_session uuid DEFAULT NULL,
                                        OUT o_outcome text, OUT o_until timestamptz)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $fn$
DECLARE
    seen record;
    locked record;
    many record;
    sess record;
    found_row boolean;
    t timestamptz;
    v_term bigint;
    v_expires timestamptz;
    v_session_end timestamptz;   -- under a session: its end (stored: infinity), as announced
    v_pro timestamptz;
    old_lock_timeout text;
BEGIN
    PERFORM @extschema@._le_name('key'::text, p_key);
    IF p_session IS NULL THEN
        PERFORM @extschema@._le_name('id'::text, p_id);
        p_ttl := @extschema@._le_ttl(p_ttl, true);
    END IF;
    PERFORM @extschema@._le_value(p_value);
    p_slots := @extschema@._le_slots(p_slots);
    IF p_insert_wait_ms < 0 OR p_insert_wait_ms > 86400000 THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('leaderlock: insert wait %s ms is out of range (0 to 86400000)', p_insert_wait_ms);
    END IF;
    PERFORM @extschema@._le_act_as(p_caller);
    -- Contract 8.2: a promotion is recorded (one row, never waiting); held
    -- leases last at least until then + their ttl.
    PERFORM @extschema@._le_failover_record();
    v_pro := @extschema@._le_promoted_at();

    -- Contract 21: under a session only while it is live and owned by a
    -- role the caller is a member of (else 'ended': le_acquire_in stops
    -- waiting); its row key-share-locked until the transaction (or
    -- le_acquire's look) ends, so that its row is not deleted meanwhile
    -- (its close waits; its renewals, and the end of the session once
    -- lapsed, do not: a key taken here is then ended at the next end); a
    -- session being closed counts as ended (never waiting). Its id and ttl
    -- are the acquisition's; a waiter looks again by its end at the latest.
    IF p_session IS NOT NULL THEN
        SELECT x.id, x.ttl, GREATEST(x.expires_at, v_pro + x.ttl) AS lasts INTO sess
          FROM @extschema@.leaderlock_sessions x
         WHERE x.session = p_session AND GREATEST(x.expires_at, v_pro + x.ttl) > clock_timestamp()
           AND pg_has_role(p_caller, x.owner, 'MEMBER'::text)
           FOR KEY SHARE SKIP LOCKED;
        IF NOT FOUND THEN
            o_outcome := 'ended';
            RETURN;
        END IF;
        p_id := sess.id;
        p_ttl := sess.ttl;
        v_session_end := sess.lasts;
    END IF;

    -- Read without locking first: a rival that cannot win never locks the
    -- holder's row (the holder's renewals would fail meanwhile).
    SELECT l.holder, l.term,
           CASE WHEN l.session IS NULL OR l.holder IS NULL THEN GREATEST(l.expires_at, v_pro + l.ttl)
                ELSE @extschema@._le_session_lasts(l.session, v_pro) END AS lasts,
           (l.owner IS NULL OR pg_has_role(p_caller, l.owner, 'MEMBER'::text)) AS owned, l.slots,
           l.session, l.delayed_until
      INTO seen
      FROM @extschema@.leaderlock l WHERE l.key = p_key;
    found_row := FOUND;
    t := clock_timestamp();

    -- Contract 21, no worker: a key held under a session that lapsed (or is
    -- gone) is vacated with that whole session first (announced "expired",
    -- its lock-delay counted from the session's expiry, whoever ends it and
    -- whenever: a look of le_acquire that ends it and takes nothing rolls
    -- back). Until its session is ended (its row or this key locked by
    -- another transaction), the key is the session's: nobody takes it, the
    -- same id neither.
    IF found_row AND seen.holder IS NOT NULL AND seen.session IS NOT NULL AND NOT coalesce(seen.lasts > t, false) THEN
        PERFORM @extschema@._le_end_lapsed_key(p_key, v_pro);
        SELECT l.holder, l.term,
               CASE WHEN l.session IS NULL OR l.holder IS NULL THEN GREATEST(l.expires_at, v_pro + l.ttl)
                    ELSE @extschema@._le_session_lasts(l.session, v_pro) END AS lasts,
               (l.owner IS NULL OR pg_has_role(p_caller, l.owner, 'MEMBER'::text)) AS owned, l.slots,
               l.session, l.delayed_until
          INTO seen
          FROM @extschema@.leaderlock l WHERE l.key = p_key;
        t := clock_timestamp();
        IF seen.holder IS NOT NULL AND seen.session IS NOT NULL AND NOT coalesce(seen.lasts > t, false) THEN
            o_outcome := 'busy';
            RETURN;
        END IF;
    END IF;
    -- Contract 21: a vacant key under a lock-delay is not acquirable by
    -- anyone (its last holder included) until the delay ends, whatever the
    -- slots asked.
    IF found_row AND seen.holder IS NULL AND seen.delayed_until > t THEN
        o_outcome := 'held';
        o_until := LEAST(seen.delayed_until, v_session_end);
        RETURN;
    END IF;

    -- A key of many slots, or asked for (contract 17): its tenures are
    -- _le_attempt_slots'; a key that now admits one holder comes back with
    -- its row locked by us and goes on below.
    IF p_slots > 1 OR seen.slots > 1 THEN
        SELECT a.o_outcome, a.o_until INTO many
          FROM @extschema@._le_attempt_slots(p_key, p_id, p_ttl, p_value, p_caller, p_insert_wait_ms, p_slots,
                   seen.slots, coalesce(seen.holder IS NOT NULL AND seen.lasts > t, false), v_pro,
                   p_session, v_session_end) a;
        IF many.o_outcome <> 'one' THEN
            o_outcome := many.o_outcome;
            o_until := LEAST(many.o_until, v_session_end);
            RETURN;
        END IF;
    END IF;

    IF found_row AND seen.holder IS NOT NULL AND seen.lasts > t AND NOT (seen.holder = p_id AND seen.owned) THEN
        o_outcome := 'held';
        o_until := LEAST(seen.lasts, v_session_end);
        RETURN;
    END IF;

    IF NOT found_row THEN
        -- A brand-new key: the first term is the timeline's floor.
        t := clock_timestamp();
        v_expires := CASE WHEN p_session IS NULL THEN t + p_ttl ELSE 'infinity'::timestamptz END;
        IF p_insert_wait_ms IS NULL THEN
            INSERT INTO @extschema@.leaderlock AS l
                   (key, holder, term, acquired_at, renewed_at, expires_at, ttl, recheck_at,
                    value, session_pid, session_start, owner, tenures, changed_at, session)
            VALUES (p_key, p_id, @extschema@._le_term_floor(), t, t, v_expires, p_ttl, v_expires,
                    p_value, NULL, NULL, p_caller, 1, t, p_session)
            ON CONFLICT (key) DO NOTHING
            RETURNING l.term INTO v_term;
        ELSE
            old_lock_timeout := current_setting('lock_timeout');
            BEGIN
                PERFORM set_config('lock_timeout', p_insert_wait_ms::text || 'ms', true);
                INSERT INTO @extschema@.leaderlock AS l
                       (key, holder, term, acquired_at, renewed_at, expires_at, ttl, recheck_at,
                        value, session_pid, session_start, owner, tenures, changed_at, session)
                VALUES (p_key, p_id, @extschema@._le_term_floor(), t, t, v_expires, p_ttl, v_expires,
                        p_value, NULL, NULL, p_caller, 1, t, p_session)
                ON CONFLICT (key) DO NOTHING
                RETURNING l.term INTO v_term;
                PERFORM set_config('lock_timeout', old_lock_timeout, true);
            EXCEPTION WHEN lock_not_available THEN
                v_term := NULL;   -- a rival's first insert is still open
            END;
        END IF;
        IF v_term IS NULL THEN
            o_outcome := 'busy';
            RETURN;
        END IF;
        PERFORM @extschema@._le_durable();
        PERFORM @extschema@._le_announce('acquired'::text, p_key, p_id, v_term, t, NULL::text,
                                         coalesce(v_session_end, v_expires), p_value, NULL::boolean, NULL::integer);
        o_outcome := 'acquired';
        RETURN;
    END IF;

    IF seen.holder IS NOT NULL AND seen.lasts > t AND p_session IS NOT NULL AND seen.session = p_session
       AND p_value IS NULL THEN
        -- Ours, held under this very session, which is what lives: nothing
        -- to extend (contract 21). (A value is set under the lock below,
        -- which never waits.)
        o_outcome := 'acquired';
        RETURN;
    END IF;
    IF seen.holder IS NOT NULL AND seen.lasts > t
       AND NOT (p_session IS NOT NULL AND seen.session = p_session) THEN
        -- Ours: extend it as le_renew does (contract 21: into p_session, or
        -- out of sessions), in one statement that never waits; if that
        -- fails, the locking path below decides.
        v_term := @extschema@._le_extend(p_key, p_id, t, p_ttl, p_caller, NULL::bigint, true, p_session);
        IF v_term IS NOT NULL THEN
            IF p_value IS NOT NULL THEN
                UPDATE @extschema@.leaderlock l SET value = p_value WHERE l.key = p_key;
                PERFORM @extschema@._le_announce('proclaimed'::text, p_key, p_id, v_term, t, NULL::text,
                                                 NULL::timestamptz, p_value, NULL::boolean, NULL::integer);
            END IF;
            o_outcome := 'acquired';
            RETURN;
        END IF;
    END IF;

    -- Lock it only if we may take or extend it, never waiting, and write
    -- it in the same block: one subtransaction, so the row carries one
    -- transaction id (no MultiXact), rolled back when no row comes back or
    -- nothing is written (a row re-checked after an update stays locked
    -- otherwise: see src/plans.rs under_lock).
    BEGIN
        SELECT l.holder, l.term, l.session, l.delayed_until,
               CASE WHEN l.session IS NULL OR l.holder IS NULL THEN GREATEST(l.expires_at, v_pro + l.ttl)
                    ELSE @extschema@._le_session_lasts(l.session, v_pro) END AS lasts INTO locked
          FROM @extschema@.leaderlock l
         WHERE l.key = p_key AND l.slots = 1
           AND (l.holder IS NULL
                OR (l.holder = p_id AND (l.owner IS NULL OR pg_has_role(p_caller, l.owner, 'MEMBER'::text)))
                OR NOT coalesce(CASE WHEN l.session IS NULL THEN GREATEST(l.expires_at, v_pro + l.ttl)
                                     ELSE @extschema@._le_session_lasts(l.session, v_pro) END
                                > clock_timestamp(), false))
           FOR NO KEY UPDATE SKIP LOCKED;
        IF NOT FOUND THEN
            RAISE SQLSTATE 'LE0NL';
        END IF;

        t := clock_timestamp();
        IF locked.holder IS NOT NULL AND locked.lasts > t THEN
            -- Live and, by the lock's condition, ours: extend, same term
            -- (contract 21: moved into p_session or out of sessions; held
            -- under p_session already: nothing to extend).
            IF p_session IS NOT NULL AND locked.session = p_session THEN
                v_term := locked.term;
            ELSE
                v_term := @extschema@._le_extend(p_key, p_id, t, p_ttl, p_caller, NULL::bigint, true, p_session);
            END IF;
            IF v_term IS NULL THEN
                RAISE SQLSTATE 'LE0NL';
            END IF;
            IF p_value IS NOT NULL THEN
                UPDATE @extschema@.leaderlock l SET value = p_value WHERE l.key = p_key;
                PERFORM @extschema@._le_announce('proclaimed'::text, p_key, p_id, v_term, t, NULL::text,
                                                 NULL::timestamptz, p_value, NULL::boolean, NULL::integer);
            END IF;
            o_outcome := 'acquired';
            RETURN;
        END IF;
        IF (locked.holder IS NOT NULL AND locked.session IS NOT NULL)
           OR (locked.holder IS NULL AND locked.delayed_until > t) THEN
            -- its session lapsed since the look (the next look ends it), or
            -- vacated under a lock-delay since
            RAISE SQLSTATE 'LE0NL';
        END IF;

        -- Vacant or lapsed: a new tenure (contract 21: under p_session, or
        -- out of sessions).
        t := clock_timestamp();
        v_expires := CASE WHEN p_session IS NULL THEN t + p_ttl ELSE 'infinity'::timestamptz END;
        UPDATE @extschema@.leaderlock l
           SET holder = p_id, term = GREATEST(l.term + 1, @extschema@._le_term_floor()),
               acquired_at = t, renewed_at = t, expires_at = v_expires, ttl = p_ttl,
               recheck_at = v_expires, value = p_value, session_pid = NULL, session_start = NULL,
               owner = p_caller, tenures = l.tenures + 1, changed_at = t, session = p_session,
               delayed_until = NULL,
               expiries = l.expiries + CASE WHEN l.holder IS NULL THEN 0 ELSE 1 END
         WHERE l.key = p_key
        RETURNING l.term INTO v_term;
        PERFORM @extschema@._le_durable();
        IF locked.holder IS NOT NULL THEN
            -- A lapsed lease taken over: its end is announced first, as the
            -- worker would have.
            PERFORM @extschema@._le_announce('expired'::text, p_key, locked.holder, locked.term, t, NULL::text,
                                             locked.lasts, NULL::jsonb, NULL::boolean, NULL::integer);
        END IF;
        PERFORM @extschema@._le_announce('acquired'::text, p_key, p_id, v_term, t, locked.holder,
                                         coalesce(v_session_end, v_expires), p_value, NULL::boolean, NULL::integer);
        o_outcome := 'acquired';
    EXCEPTION WHEN SQLSTATE 'LE0NL' THEN
        o_outcome := 'busy';
    END;
END
$fn$;

-- Contract 3.2. A refused renewal changes nothing and locks nothing.
CREATE FUNCTION @extschema@._le_renew(p_key text, p_id text, p_ttl interval, p_caller oid,
                                      p_term bigint)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $fn$
DECLARE
    t timestamptz;
    v_pro timestamptz;
    v_session uuid;
BEGIN
    PERFORM @extschema@._le_name('key'::text, p_key);
    PERFORM @extschema@._le_name('id'::text, p_id);
    p_ttl := @extschema@._le_ttl(p_ttl, false);
    PERFORM @extschema@._le_act_as(p_caller);
    t := clock_timestamp();
    -- a lease, else the caller's own tenure of a key of many slots (17)
    IF @extschema@._le_extend(p_key, p_id, t, p_ttl, p_caller, p_term, false, NULL::uuid) IS NOT NULL THEN
        RETURN true;
    END IF;
    -- Contract 21: a key p_id holds under a session (of p_term) has no ttl
    -- of its own: its session is renewed (live and owned by a role p_caller
    -- is a member of), one row, the key's untouched.
    SELECT l.session INTO v_session FROM @extschema@.leaderlock l
     WHERE l.key = p_key AND l.holder = p_id AND l.session IS NOT NULL
       AND (p_term IS NULL OR l.term = p_term);
    IF v_session IS NOT NULL THEN
        v_pro := @extschema@._le_promoted_at();
        RETURN cardinality(@extschema@._le_extend_sessions(v_session, NULL::text, t, p_ttl, p_caller, v_pro)) > 0;
    END IF;
    -- the caller's own tenure of a key of many slots (17), out of sessions
    IF @extschema@._le_extend_slot(p_key, p_id, t, p_ttl, p_caller, p_term, false, NULL::uuid) IS NOT NULL THEN
        RETURN true;
    END IF;
    -- or held under a session (21): its session, as above (one the caller
    -- may act for first, when the id holds tenures of several roles)
    SELECT y.session INTO v_session FROM @extschema@.leaderlock_slots y
     WHERE y.key = p_key AND y.holder = p_id AND y.session IS NOT NULL
       AND (p_term IS NULL OR y.term = p_term)
     ORDER BY (y.owner IS NULL OR pg_has_role(p_caller, y.owner, 'MEMBER'::text)) DESC
     LIMIT 1;
    IF v_session IS NOT NULL THEN
        v_pro := @extschema@._le_promoted_at();
        RETURN cardinality(@extschema@._le_extend_sessions(v_session, NULL::text, t, p_ttl, p_caller, v_pro)) > 0;
    END IF;
    RETURN false;
END
$fn$;

-- Locks the lease p_id holds live (owned by a role p_caller is a member
-- of), never waiting; its term, else raises LE0NL. Called inside the
-- caller's block that handles LE0NL and also writes the row: the lock and
-- the write then share one subtransaction, so the row carries one
-- transaction id (a lock by a subtransaction and a write by its parent
-- would be recorded as a MultiXact), and a row locked but rejected on
-- re-check is not left locked (see src/plans.rs under_lock).
CREATE FUNCTION @extschema@._le_lock_own(p_key text, p_id text, p_caller oid) RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $fn$
DECLARE
    r record;
    v_pro timestamptz := @extschema@._le_promoted_at();
BEGIN
    SELECT l.term, CASE WHEN l.session IS NULL THEN GREATEST(l.expires_at, v_pro + l.ttl)
                        ELSE @extschema@._le_session_lasts(l.session, v_pro) END AS lasts INTO r
      FROM @extschema@.leaderlock l
     WHERE l.key = p_key AND l.holder = p_id
       AND CASE WHEN l.session IS NULL THEN GREATEST(l.expires_at, v_pro + l.ttl)
                ELSE @extschema@._le_session_lasts(l.session, v_pro) END > clock_timestamp()
       AND (l.owner IS NULL OR pg_has_role(p_caller, l.owner, 'MEMBER'::text))
       FOR NO KEY UPDATE SKIP LOCKED;
    IF NOT FOUND OR r.lasts <= clock_timestamp() THEN
        RAISE SQLSTATE 'LE0NL';
    END IF;
    RETURN r.term;
END
$fn$;

-- Contract 3.3: whether a holder's refused call (le_renew, le_release,
-- le_proclaim, le_try_acquire on its own live lease) is made again, its
-- try p_try (1 to 4) after a pause of 0, 1, 2 or 4 ms: while p_id holds
-- p_key live (in p_term when given), owned by a role p_caller is a member
-- of, read without a lock. A rival that lost a race for the row locks its
-- newest version until its block rolls back (PostgreSQL locks before it
-- checks again); the holder's call must not be refused for that moment.
-- Never waits for another transaction: only sleeps.
CREATE FUNCTION @extschema@._le_again(p_key text, p_id text, p_caller oid, p_term bigint,
                                      p_try integer) RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $fn$
DECLARE
    v_pro timestamptz := @extschema@._le_promoted_at();
BEGIN
    PERFORM @extschema@._le_act_as(p_caller);
    IF p_try NOT BETWEEN 1 AND 4 OR NOT (
        EXISTS (SELECT 1 FROM @extschema@.leaderlock l
                 WHERE l.key = p_key AND l.holder = p_id
                   AND CASE WHEN l.session IS NULL THEN GREATEST(l.expires_at, v_pro + l.ttl)
                            ELSE @extschema@._le_session_lasts(l.session, v_pro) END > clock_timestamp()
                   AND (p_term IS NULL OR l.term = p_term)
                   AND (l.owner IS NULL OR pg_has_role(p_caller, l.owner, 'MEMBER'::text)))
        OR EXISTS (SELECT 1 FROM @extschema@.leaderlock_slots s
                    WHERE s.key = p_key AND s.holder = p_id
                      AND CASE WHEN s.session IS NULL THEN GREATEST(s.expires_at, v_pro + s.ttl)
                               ELSE @extschema@._le_session_lasts(s.session, v_pro) END > clock_timestamp()
                      AND (p_term IS NULL OR s.term = p_term)
                      AND (s.owner IS NULL OR pg_has_role(p_caller, s.owner, 'MEMBER'::text)))) THEN
        RETURN false;
    END IF;
    IF p_try > 1 THEN
        PERFORM pg_sleep((1 << (p_try - 2)) / 1000.0);
    END IF;
    RETURN true;
END
$fn$;

-- Contract 3.3. A refused release changes nothing and locks nothing.
CREATE FUNCTION @extschema@._le_release(p_key text, p_id text, p_caller oid, p_term bigint)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $fn$
DECLARE
    v_term bigint;
    t timestamptz;
    own record;
BEGIN
    PERFORM @extschema@._le_name('key'::text, p_key);
    PERFORM @extschema@._le_name('id'::text, p_id);
    PERFORM @extschema@._le_act_as(p_caller);
    -- Each lock with its write, in one block (see _le_lock_own).
    BEGIN
        v_term := @extschema@._le_lock_own(p_key, p_id, p_caller);
        IF v_term IS DISTINCT FROM coalesce(p_term, v_term) THEN
            RAISE SQLSTATE 'LE0NL';  -- another tenure of p_id: the lock goes with the block
        END IF;
        t := clock_timestamp();
        UPDATE @extschema@.leaderlock l
           SET holder = NULL, expires_at = t, value = NULL, session_pid = NULL,
               session_start = NULL, owner = NULL, releases = l.releases + 1, changed_at = t
         WHERE l.key = p_key;
        PERFORM @extschema@._le_durable();
        PERFORM @extschema@._le_announce('released'::text, p_key, p_id, v_term, t, NULL::text,
                                         NULL::timestamptz, NULL::jsonb, false, NULL::integer);
        RETURN true;
    EXCEPTION WHEN SQLSTATE 'LE0NL' THEN
        NULL;
    END;
    -- the caller's own tenure of a key of many slots (contract 17)
    BEGIN
        SELECT o.o_slot, o.o_term INTO own FROM @extschema@._le_lock_own_slot(p_key, p_id, p_caller) o;
        IF own.o_term IS DISTINCT FROM coalesce(p_term, own.o_term) THEN
            RAISE SQLSTATE 'LE0NL';
        END IF;
        t := clock_timestamp();
        UPDATE @extschema@.leaderlock_slots s
           SET holder = NULL, expires_at = t, value = NULL, owner = NULL, releases = s.releases + 1,
               changed_at = t
         WHERE s.key = p_key AND s.slot = own.o_slot;
        PERFORM @extschema@._le_durable();
        PERFORM @extschema@._le_announce('released'::text, p_key, p_id, own.o_term, t, NULL::text,
                                         NULL::timestamptz, NULL::jsonb, false,
                                         (SELECT l.slots FROM @extschema@.leaderlock l WHERE l.key = p_key));
        RETURN true;
    EXCEPTION WHEN SQLSTATE 'LE0NL' THEN
        RETURN false;
    END;
END
$fn$;

-- Contract 16, le_renew_all: extends every lease p_id holds live (owned
-- by a role p_caller is a member of) by its own ttl, same terms, in one
-- statement that never waits: a row another transaction holds locked is
-- skipped (found through the index on holder; recheck_at as in
-- _le_extend). One clock reading for all. Then (contract 21) its live
-- sessions, each by its own ttl (_le_extend_sessions), counting the keys
-- and tenures held under them (whose rows it does not touch). Returns how
-- many.
CREATE FUNCTION @extschema@._le_renew_all(p_id text, p_caller oid) RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $fn$
DECLARE
    n integer;
    m integer;
    t timestamptz;
    v_pro timestamptz;
    v_sessions uuid[];
BEGIN
    PERFORM @extschema@._le_name('id'::text, p_id);
    PERFORM @extschema@._le_act_as(p_caller);
    v_pro := @extschema@._le_promoted_at();
    t := clock_timestamp();
    WITH renewed AS (
        UPDATE @extschema@.leaderlock l
           SET renewed_at = t,
               expires_at = t + l.ttl,
               recheck_at = CASE
                   WHEN l.recheck_at <= t + l.ttl
                    AND l.recheck_at >= t + l.ttl / 2.0::float8 THEN l.recheck_at
                   ELSE t + l.ttl END,
               owner = coalesce(l.owner, p_caller)
          FROM (SELECT s.key FROM @extschema@.leaderlock s
                 WHERE s.holder = p_id AND s.session IS NULL AND GREATEST(s.expires_at, v_pro + s.ttl) > t
                   AND (s.owner IS NULL OR pg_has_role(p_caller, s.owner, 'MEMBER'::text))
                   FOR NO KEY UPDATE SKIP LOCKED) own
         WHERE l.key = own.key AND l.holder = p_id AND l.session IS NULL
           AND GREATEST(l.expires_at, v_pro + l.ttl) > t
        RETURNING l.key)
    SELECT count(*)::integer INTO n FROM renewed;
    -- and its tenures of keys of many slots (contract 17), the same way
    -- (those held under a session: with their session, below)
    WITH renewed AS (
        UPDATE @extschema@.leaderlock_slots l
           SET renewed_at = t,
               expires_at = t + l.ttl,
               recheck_at = CASE
                   WHEN l.recheck_at <= t + l.ttl
                    AND l.recheck_at >= t + l.ttl / 2.0::float8 THEN l.recheck_at
                   ELSE t + l.ttl END
          FROM (SELECT s.key, s.slot FROM @extschema@.leaderlock_slots s
                 WHERE s.holder = p_id AND s.session IS NULL AND GREATEST(s.expires_at, v_pro + s.ttl) > t
                   AND (s.owner IS NULL OR pg_has_role(p_caller, s.owner, 'MEMBER'::text))
                   FOR NO KEY UPDATE SKIP LOCKED) own
         WHERE l.key = own.key AND l.slot = own.slot AND l.holder = p_id AND l.session IS NULL
           AND GREATEST(l.expires_at, v_pro + l.ttl) > t
        RETURNING l.key)
    SELECT count(*)::integer INTO m FROM renewed;
    n := n + m;
    IF n > 0 THEN
        PERFORM @extschema@._le_durable();
    END IF;
    -- and its sessions (contract 21), counting the keys and tenures held
    -- under them
    v_sessions := @extschema@._le_extend_sessions(NULL::uuid, p_id, t, NULL::interval, p_caller, v_pro);
    IF cardinality(v_sessions) > 0 THEN
        SELECT count(*)::integer INTO m FROM @extschema@.leaderlock l
         WHERE l.session = ANY (v_sessions) AND l.holder IS NOT NULL;
        n := n + m;
        SELECT count(*)::integer INTO m FROM @extschema@.leaderlock_slots s
         WHERE s.session = ANY (v_sessions) AND s.holder IS NOT NULL;
        n := n + m;
    END IF;
    RETURN n;
END
$fn$;

-- Contract 16, le_release_all: locks every lease p_id holds live (owned by
-- a role p_caller is a member of), skipping rows another transaction holds
-- locked, then releases each as _le_release does (term kept, counted) and
-- announces each. Returns how many. Its tenures of keys of many slots,
-- then its leases, each kind locked and written in one block (see
-- _le_lock_own); a block that finds none is rolled back: nothing stays
-- locked.
CREATE FUNCTION @extschema@._le_release_all(p_id text, p_caller oid) RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $fn$
DECLARE
    v_keys text[];
    v_slot_keys text[];
    v_slots integer[];
    r record;
    t timestamptz;
    v_pro timestamptz;
    n integer := 0;
BEGIN
    PERFORM @extschema@._le_name('id'::text, p_id);
    PERFORM @extschema@._le_act_as(p_caller);
    v_pro := @extschema@._le_promoted_at();
    BEGIN
        -- (contract 21: its tenures held under sessions too, each with its
        -- session's liveness; the session goes on)
        SELECT array_agg(o.key), array_agg(o.slot) INTO v_slot_keys, v_slots
          FROM (SELECT s.key, s.slot FROM @extschema@.leaderlock_slots s
                 WHERE s.holder = p_id
                   AND CASE WHEN s.session IS NULL THEN GREATEST(s.expires_at, v_pro + s.ttl)
                            ELSE @extschema@._le_session_lasts(s.session, v_pro) END > clock_timestamp()
                   AND (s.owner IS NULL OR pg_has_role(p_caller, s.owner, 'MEMBER'::text))
                   FOR NO KEY UPDATE SKIP LOCKED) o;
        -- read after the locks, as _le_release does
        t := clock_timestamp();
        FOR r IN
            UPDATE @extschema@.leaderlock_slots s
               SET holder = NULL, expires_at = t, value = NULL, owner = NULL, releases = s.releases + 1,
                   changed_at = t
              FROM ROWS FROM (unnest(v_slot_keys), unnest(v_slots)) AS v(key, slot)
             WHERE s.key = v.key AND s.slot = v.slot AND s.holder = p_id
               AND CASE WHEN s.session IS NULL THEN GREATEST(s.expires_at, v_pro + s.ttl)
                        ELSE @extschema@._le_session_lasts(s.session, v_pro) END > t
            RETURNING s.key, s.term, (SELECT h.slots FROM @extschema@.leaderlock h WHERE h.key = s.key) AS slots
        LOOP
            PERFORM @extschema@._le_announce('released'::text, r.key, p_id, r.term, t, NULL::text,
                                             NULL::timestamptz, NULL::jsonb, false, r.slots);
            n := n + 1;
        END LOOP;
        IF NOT FOUND THEN
            -- none found, or all lapsed since the lock: keep none locked
            RAISE SQLSTATE 'LE0NL';
        END IF;
    EXCEPTION WHEN SQLSTATE 'LE0NL' THEN
        NULL;
    END;
    BEGIN
        -- (contract 21: its keys held under sessions too, each with its
        -- session's liveness; the session goes on)
        SELECT array_agg(o.key) INTO v_keys
          FROM (SELECT l.key FROM @extschema@.leaderlock l
                 WHERE l.holder = p_id
                   AND CASE WHEN l.session IS NULL THEN GREATEST(l.expires_at, v_pro + l.ttl)
                            ELSE @extschema@._le_session_lasts(l.session, v_pro) END > clock_timestamp()
                   AND (l.owner IS NULL OR pg_has_role(p_caller, l.owner, 'MEMBER'::text))
                   FOR NO KEY UPDATE SKIP LOCKED) o;
        t := clock_timestamp();
        FOR r IN
            UPDATE @extschema@.leaderlock l
               SET holder = NULL, expires_at = t, value = NULL, session_pid = NULL,
                   session_start = NULL, owner = NULL, releases = l.releases + 1, changed_at = t
             WHERE l.key = ANY (v_keys) AND l.holder = p_id
               AND CASE WHEN l.session IS NULL THEN GREATEST(l.expires_at, v_pro + l.ttl)
                        ELSE @extschema@._le_session_lasts(l.session, v_pro) END > t
            RETURNING l.key, l.term
        LOOP
            PERFORM @extschema@._le_announce('released'::text, r.key, p_id, r.term, t, NULL::text,
                                             NULL::timestamptz, NULL::jsonb, false, NULL::integer);
            n := n + 1;
        END LOOP;
        IF NOT FOUND THEN
            RAISE SQLSTATE 'LE0NL';
        END IF;
    EXCEPTION WHEN SQLSTATE 'LE0NL' THEN
        NULL;
    END;
    IF n > 0 THEN
        PERFORM @extschema@._le_durable();
    END IF;
    RETURN n;
END
$fn$;

-- Contract 11. A refused proclaim changes nothing and locks nothing.
CREATE FUNCTION @extschema@._le_proclaim(p_key text, p_id text, p_value jsonb, p_caller oid)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $fn$
DECLARE
    v_term bigint;
    own record;
BEGIN
    PERFORM @extschema@._le_name('key'::text, p_key);
    PERFORM @extschema@._le_name('id'::text, p_id);
    PERFORM @extschema@._le_value(p_value);
    PERFORM @extschema@._le_act_as(p_caller);
    -- Each lock with its write, in one block (see _le_lock_own).
    BEGIN
        v_term := @extschema@._le_lock_own(p_key, p_id, p_caller);
        UPDATE @extschema@.leaderlock l SET value = p_value WHERE l.key = p_key;
        PERFORM @extschema@._le_durable();
        PERFORM @extschema@._le_announce('proclaimed'::text, p_key, p_id, v_term, clock_timestamp(), NULL::text,
                                         NULL::timestamptz, p_value, NULL::boolean, NULL::integer);
        RETURN true;
    EXCEPTION WHEN SQLSTATE 'LE0NL' THEN
        NULL;
    END;
    -- the caller's own tenure of a key of many slots (contract 17)
    BEGIN
        SELECT o.o_slot, o.o_term INTO own FROM @extschema@._le_lock_own_slot(p_key, p_id, p_caller) o;
        UPDATE @extschema@.leaderlock_slots s SET value = p_value WHERE s.key = p_key AND s.slot = own.o_slot;
        PERFORM @extschema@._le_durable();
        PERFORM @extschema@._le_announce('proclaimed'::text, p_key, p_id, own.o_term, clock_timestamp(),
                                         NULL::text, NULL::timestamptz, p_value, NULL::boolean,
                                         (SELECT l.slots FROM @extschema@.leaderlock l WHERE l.key = p_key));
        RETURN true;
    EXCEPTION WHEN SQLSTATE 'LE0NL' THEN
        RETURN false;
    END;
END
$fn$;

-- Contract 13: vacates the live lease of p_key whoever holds it; for
-- superusers and members of role leaderlock_admin. Waits for a transaction
-- that holds the row locked (a guarded write in progress ends first).
-- Contract 21: a key no live tenure holds has its lock-delay in force
-- lifted (a vacant key of one slot, the vacant slots of a key of many):
-- announced by nothing (no tenure ended; waiters poll). True when it
-- vacated or lifted anything.
CREATE FUNCTION @extschema@._le_force_release(p_key text, p_caller oid) RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $fn$
DECLARE
    r record;
    t timestamptz;
    v_pro timestamptz;
    v_slots integer;
    v_slot_list integer[];
    v_holders text[];
    v_terms bigint[];
    n integer := 0;
    v_lifted integer := 0;
    v_lifted_slots integer := 0;
BEGIN
    PERFORM @extschema@._le_name('key'::text, p_key);
    PERFORM @extschema@._le_act_as(p_caller);
    IF NOT (coalesce((SELECT a.rolsuper FROM pg_roles a WHERE a.oid = p_caller), false)
            OR (EXISTS (SELECT 1 FROM pg_roles a WHERE a.rolname = 'leaderlock_admin'::name)
                AND pg_has_role(p_caller, (SELECT a.oid FROM pg_roles a WHERE a.rolname = 'leaderlock_admin'::name),
                                'MEMBER'::text))) THEN
        RAISE EXCEPTION USING ERRCODE = 'insufficient_privilege',
            MESSAGE = 'leaderlock: permission denied to force the release of a lease',
            HINT = 'Superusers and members of role leaderlock_admin may '
                   '(CREATE ROLE leaderlock_admin NOLOGIN; GRANT leaderlock_admin TO ...).';
    END IF;
    v_pro := @extschema@._le_promoted_at();
    SELECT l.holder, l.term, CASE WHEN l.session IS NULL THEN GREATEST(l.expires_at, v_pro + l.ttl)
                                  ELSE @extschema@._le_session_lasts(l.session, v_pro) END AS lasts INTO r
      FROM @extschema@.leaderlock l
     WHERE l.key = p_key AND l.holder IS NOT NULL
       AND CASE WHEN l.session IS NULL THEN GREATEST(l.expires_at, v_pro + l.ttl)
                ELSE @extschema@._le_session_lasts(l.session, v_pro) END > clock_timestamp()
       FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        -- A key of many slots (contract 17): every live tenure, each
        -- locked (waiting as above), vacated and announced, by slot (one
        -- held under a session alone, the session going on).
        SELECT pg_catalog.array_agg(x.slot ORDER BY x.slot), pg_catalog.array_agg(x.holder ORDER BY x.slot),
               pg_catalog.array_agg(x.term ORDER BY x.slot)
          INTO v_slot_list, v_holders, v_terms
          FROM (SELECT s.slot, s.holder, s.term FROM @extschema@.leaderlock_slots s
                 WHERE s.key = p_key AND s.holder IS NOT NULL
                   AND CASE WHEN s.session IS NULL THEN GREATEST(s.expires_at, v_pro + s.ttl)
                            ELSE @extschema@._le_session_lasts(s.session, v_pro) END > clock_timestamp()
                 ORDER BY s.slot
                   FOR NO KEY UPDATE) x;
        t := clock_timestamp();
        SELECT l.slots INTO v_slots FROM @extschema@.leaderlock l WHERE l.key = p_key;
        FOR i IN 1 .. coalesce(pg_catalog.array_length(v_slot_list, 1), 0) LOOP
            UPDATE @extschema@.leaderlock_slots s
               SET holder = NULL, expires_at = t, value = NULL, owner = NULL, releases = s.releases + 1,
                   changed_at = t
             WHERE s.key = p_key AND s.slot = v_slot_list[i] AND s.holder IS NOT NULL
               AND CASE WHEN s.session IS NULL THEN GREATEST(s.expires_at, v_pro + s.ttl)
                        ELSE @extschema@._le_session_lasts(s.session, v_pro) END > t;   -- (not lapsed while we waited)
            IF FOUND THEN
                PERFORM @extschema@._le_announce('released'::text, p_key, v_holders[i], v_terms[i],
                                                 t, NULL::text, NULL::timestamptz, NULL::jsonb, true, v_slots);
                n := n + 1;
            END IF;
        END LOOP;
        -- Contract 21: a lock-delay in force lifted (waiting le_acquire
        -- calls poll: nothing to wake), announced by nothing.
        t := clock_timestamp();
        UPDATE @extschema@.leaderlock l SET delayed_until = NULL
         WHERE l.key = p_key AND l.holder IS NULL AND l.delayed_until > t;
        GET DIAGNOSTICS v_lifted = ROW_COUNT;
        UPDATE @extschema@.leaderlock_slots s SET delayed_until = NULL
         WHERE s.key = p_key AND s.holder IS NULL AND s.delayed_until > t;
        GET DIAGNOSTICS v_lifted_slots = ROW_COUNT;
        IF n > 0 OR v_lifted > 0 OR v_lifted_slots > 0 THEN
            PERFORM @extschema@._le_durable();
        END IF;
        RETURN n > 0 OR v_lifted > 0 OR v_lifted_slots > 0;
    END IF;
    t := clock_timestamp();
    IF NOT coalesce(r.lasts > t, false) THEN
        RETURN false;      -- lapsed while we waited for the lock
    END IF;
    -- (contract 21: a key held under a session alone, the session going on)
    UPDATE @extschema@.leaderlock l
       SET holder = NULL, expires_at = t, value = NULL, session_pid = NULL,
           session_start = NULL, owner = NULL, releases = l.releases + 1, changed_at = t
     WHERE l.key = p_key;
    PERFORM @extschema@._le_durable();
    PERFORM @extschema@._le_announce('released'::text, p_key, r.holder, r.term, t, NULL::text,
                                     NULL::timestamptz, NULL::jsonb, true, NULL::integer);
    RETURN true;
END
$fn$;

-- Contract 3.4: the term when p_id is the live holder; otherwise LE001.
-- The share lock lasts until the caller's transaction ends.
CREATE FUNCTION @extschema@._le_assert_leader(p_key text, p_id text, p_term bigint, p_caller oid)
RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $fn$
DECLARE
    r record;
    own record;
    found_row boolean;
    t timestamptz;
    live boolean;
    state text;
    msg text;
    v_pro timestamptz;
    v_slots integer;
BEGIN
    PERFORM @extschema@._le_name('key'::text, p_key);
    PERFORM @extschema@._le_name('id'::text, p_id);
    IF p_term < 0 THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('leaderlock: term must not be negative (got %s)', p_term);
    END IF;
    PERFORM @extschema@._le_act_as(p_caller);
    v_pro := @extschema@._le_promoted_at();
    -- Without a lock first: only the holder itself ever locks its row.
    SELECT l.holder, l.term,
           CASE WHEN l.session IS NULL OR l.holder IS NULL THEN GREATEST(l.expires_at, v_pro + l.ttl)
                ELSE @extschema@._le_session_lasts(l.session, v_pro) END AS lasts,
           (l.owner IS NULL OR pg_has_role(p_caller, l.owner, 'MEMBER'::text)) AS owned, l.slots
      INTO r FROM @extschema@.leaderlock l WHERE l.key = p_key;
    found_row := FOUND;
    t := clock_timestamp();
    v_slots := CASE WHEN found_row THEN r.slots ELSE 1 END;
    IF found_row AND r.slots > 1 THEN
        -- A key of many slots (contract 17): the caller's own tenure (its
        -- latest), share-locked when it is live, owned and of p_term; the
        -- key's row is never locked (contract 21: under a session, live
        -- while its session is; the lock makes the session's close wait for
        -- the fenced write). Without one: the key's last term.
        SELECT s.slot, s.term,
               CASE WHEN s.session IS NULL THEN GREATEST(s.expires_at, v_pro + s.ttl)
                    ELSE @extschema@._le_session_lasts(s.session, v_pro) END AS lasts,
               (s.owner IS NULL OR pg_has_role(p_caller, s.owner, 'MEMBER'::text)) AS owned
          INTO own
          FROM @extschema@.leaderlock_slots s
         WHERE s.key = p_key AND s.holder = p_id
         ORDER BY 4 DESC, 3 DESC LIMIT 1;
        IF NOT FOUND THEN
            SELECT NULL::text AS holder, r.term AS term, NULL::timestamptz AS lasts, true AS owned INTO r;
        ELSIF own.lasts > clock_timestamp() AND own.owned AND (p_term IS NULL OR p_term = own.term) THEN
            SELECT s.holder, s.term,
                   CASE WHEN s.session IS NULL THEN GREATEST(s.expires_at, v_pro + s.ttl)
                        ELSE @extschema@._le_session_lasts(s.session, v_pro) END AS lasts,
                   (s.owner IS NULL OR pg_has_role(p_caller, s.owner, 'MEMBER'::text)) AS owned
              INTO own
              FROM @extschema@.leaderlock_slots s WHERE s.key = p_key AND s.slot = own.slot FOR SHARE;
            -- (another's tenure in that slot now is not the caller's)
            SELECT p_id AS holder, own.term AS term,
                   CASE WHEN own.holder = p_id THEN own.lasts END AS lasts, own.owned AS owned INTO r;
        ELSE
            SELECT p_id AS holder, own.term AS term, own.lasts AS lasts, own.owned AS owned INTO r;
        END IF;
    ELSIF found_row AND r.holder IS NOT NULL AND r.lasts > t AND r.holder = p_id AND r.owned
       AND (p_term IS NULL OR p_term = r.term) THEN
        SELECT l.holder, l.term,
               CASE WHEN l.session IS NULL OR l.holder IS NULL THEN GREATEST(l.expires_at, v_pro + l.ttl)
                    ELSE @extschema@._le_session_lasts(l.session, v_pro) END AS lasts,
               (l.owner IS NULL OR pg_has_role(p_caller, l.owner, 'MEMBER'::text)) AS owned
          INTO r FROM @extschema@.leaderlock l WHERE l.key = p_key FOR SHARE;
        found_row := FOUND;
    END IF;
    t := clock_timestamp();
    live := found_row AND r.holder IS NOT NULL AND coalesce(r.lasts > t, false);
    IF live AND r.holder = p_id AND r.owned AND (p_term IS NULL OR p_term = r.term) THEN
        RETURN r.term;
    END IF;
    IF NOT found_row THEN
        state := 'the key has never been acquired';
    ELSIF r.holder IS NULL AND v_slots > 1 THEN
        state := format('it holds none of the key''s %s slots (last term %s)', v_slots, r.term);
    ELSIF r.holder IS NULL THEN
        state := format('the lease is vacant (term %s)', r.term);
    ELSIF live AND NOT r.owned AND r.holder = p_id THEN
        state := format('the lease of "%s" (term %s) is owned by a role the current role is not a member of',
                        r.holder, r.term);
    ELSIF live THEN
        state := format('the holder is "%s" (term %s)', r.holder, r.term);
    ELSE
        state := format('the lease of "%s" (term %s) has lapsed', r.holder, r.term);
    END IF;
    IF p_term IS NOT NULL AND live AND r.owned AND r.holder = p_id THEN
        msg := format('leaderlock: "%s" leads "%s" in term %s, not in term %s', p_id, p_key, r.term, p_term);
    ELSE
        msg := format('leaderlock: "%s" is not the leader of "%s": %s', p_id, p_key, state);
    END IF;
    RAISE EXCEPTION USING ERRCODE = 'LE001', MESSAGE = msg,
        HINT = 'Stop acting as leader; call le_try_acquire to run for a new term.';
END
$fn$;

-- le_expire_lapsed's writer: anyone may ask for what the worker would do.
-- One statement that locks only lapsed rows no other transaction holds
-- (SKIP LOCKED), so it never waits. The rows it vacates stay locked until
-- the caller's transaction ends, as a tenure taken by le_try_acquire does:
-- a caller that keeps its transaction open delays the takeover of those
-- keys, whose holders had already lost them, no more than taking them
-- would (review round 3, P1/P2: no check on the transaction or the query
-- text can tell an honest call from that; portable/README.md).
CREATE FUNCTION @extschema@._le_expire_lapsed() RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $fn$
DECLARE
    r record;
    t timestamptz;
    v_pro timestamptz;
    n integer := 0;
BEGIN
    PERFORM @extschema@._le_unrestricted();
    IF pg_is_in_recovery() THEN
        RETURN 0;
    END IF;
    -- Contract 23: the history records the calling role for what this vacates.
    PERFORM set_config('leaderlock_portable.role',
                       (SELECT a.oid FROM pg_roles a WHERE a.rolname = @extschema@._le_session_role())::text,
                       true);
    PERFORM @extschema@._le_failover_record();
    v_pro := @extschema@._le_promoted_at();
    t := clock_timestamp();
    FOR r IN
        WITH lapsed AS (
            SELECT l.key, l.holder, l.term, GREATEST(l.expires_at, v_pro + l.ttl) AS lasts
              FROM @extschema@.leaderlock l
             WHERE l.holder IS NOT NULL AND l.recheck_at <= t AND l.session IS NULL
               AND NOT coalesce(GREATEST(l.expires_at, v_pro + l.ttl) > t, false)
             ORDER BY l.recheck_at
               FOR NO KEY UPDATE SKIP LOCKED)
        UPDATE @extschema@.leaderlock l
           SET holder = NULL, value = NULL, session_pid = NULL, session_start = NULL,
               owner = NULL, expiries = l.expiries + 1, changed_at = t
          FROM lapsed x
         WHERE l.key = x.key
        RETURNING x.key, x.holder, x.term, x.lasts
    LOOP
        PERFORM @extschema@._le_announce('expired'::text, r.key, r.holder, r.term, t, NULL::text,
                                         r.lasts, NULL::jsonb, NULL::boolean, NULL::integer);
        n := n + 1;
    END LOOP;
    -- The tenures of keys of many slots (contract 17), each on its own,
    -- announced with their key's slots. A promotion extends only tenures
    -- within their key's slots of keys of many slots (as the compiled
    -- OUTLAST_FAILOVER_SLOTS): any other lasts until its own expires_at.
    -- (One held under a session ends with its session, below.)
    FOR r IN
        WITH lapsed AS (
            SELECT l.key, l.slot, l.holder, l.term,
                   CASE WHEN coalesce((SELECT h.slots FROM @extschema@.leaderlock h WHERE h.key = l.key)
                                      >= GREATEST(l.slot, 2), false)
                        THEN GREATEST(l.expires_at, v_pro + l.ttl) ELSE l.expires_at END AS lasts
              FROM @extschema@.leaderlock_slots l
             WHERE l.holder IS NOT NULL AND l.recheck_at <= t AND l.session IS NULL
               AND NOT coalesce(l.expires_at > t, false)
               AND NOT coalesce(CASE WHEN coalesce((SELECT h.slots FROM @extschema@.leaderlock h
                                                     WHERE h.key = l.key) >= GREATEST(l.slot, 2), false)
                                     THEN v_pro + l.ttl > t ELSE false END, false)
             ORDER BY l.recheck_at
               FOR NO KEY UPDATE SKIP LOCKED)
        UPDATE @extschema@.leaderlock_slots l
           SET holder = NULL, value = NULL, owner = NULL, expiries = l.expiries + 1, changed_at = t
          FROM lapsed x
         WHERE l.key = x.key AND l.slot = x.slot
        RETURNING x.key, x.holder, x.term, x.lasts,
                  (SELECT h.slots FROM @extschema@.leaderlock h WHERE h.key = x.key) AS slots
    LOOP
        PERFORM @extschema@._le_announce('expired'::text, r.key, r.holder, r.term, t, NULL::text,
                                         r.lasts, NULL::jsonb, NULL::boolean, r.slots);
        n := n + 1;
    END LOOP;
    -- Contract 21: every lapsed session that no other transaction holds
    -- locked against renewals ends, its keys vacated and counted
    -- (_le_end_session: those another transaction holds locked are
    -- skipped, and the session's row stays, lapsed, until none is held
    -- under it and no acquisition under it is in flight).
    FOR r IN
        SELECT x.session FROM @extschema@.leaderlock_sessions x
         WHERE x.recheck_at <= t AND NOT coalesce(GREATEST(x.expires_at, v_pro + x.ttl) > t, false)
         ORDER BY x.recheck_at
           FOR NO KEY UPDATE SKIP LOCKED
    LOOP
        n := n + @extschema@._le_end_session(r.session, false, v_pro, NULL::text);
    END LOOP;
    -- and the keys and tenures held under a session that no longer exists
    FOR r IN
        SELECT l.session FROM @extschema@.leaderlock l
         WHERE l.session IS NOT NULL AND l.holder IS NOT NULL
           AND NOT EXISTS (SELECT FROM @extschema@.leaderlock_sessions x WHERE x.session = l.session)
        UNION
        SELECT y.session FROM @extschema@.leaderlock_slots y
         WHERE y.session IS NOT NULL AND y.holder IS NOT NULL
           AND NOT EXISTS (SELECT FROM @extschema@.leaderlock_sessions x WHERE x.session = y.session)
    LOOP
        n := n + @extschema@._le_end_session(r.session, false, v_pro, NULL::text);
    END LOOP;
    -- Contract 24: no worker settles the schedules here: each due instant
    -- whose misfire grace ended unclaimed is recorded missed by this call
    -- (up to 100 schedules and 1,000 instants, passing over those other
    -- transactions hold); contract 25: nor checks the keys expected to be
    -- led. As the retention and the numbering below, a failure never takes
    -- this call's expiries with it: its subtransaction alone is rolled
    -- back. (Before the retention: the tables in the order save.sql takes
    -- them, schedules before jobs and runs.)
    BEGIN
        PERFORM @extschema@._le_settle(clock_timestamp());
    EXCEPTION WHEN OTHERS THEN
        RAISE WARNING USING
            MESSAGE = format('leaderlock: the schedules were not settled: %s', SQLERRM),
            DETAIL = format('The expiries of this call are kept; it is tried again at the next call '
                            '(SQLSTATE %s).', SQLSTATE);
    END;
    -- Contract 22: no worker applies the runs' retention here either; as
    -- the numbering below, a failure never takes this call's expiries
    -- with it: its subtransaction alone is rolled back.
    BEGIN
        PERFORM @extschema@._le_prune_runs();
    EXCEPTION WHEN OTHERS THEN
        RAISE WARNING USING
            MESSAGE = format('leaderlock: the runs'' retention did not run: %s', SQLERRM),
            DETAIL = format('The expiries of this call are kept; it is tried again at the next call '
                            '(SQLSTATE %s).', SQLSTATE);
    END;
    BEGIN
        PERFORM @extschema@._le_check_expected(clock_timestamp());
    EXCEPTION WHEN OTHERS THEN
        RAISE WARNING USING
            MESSAGE = format('leaderlock: the keys expected to be led were not checked: %s', SQLERRM),
            DETAIL = format('The expiries of this call are kept; it is tried again at the next call '
                            '(SQLSTATE %s).', SQLSTATE);
    END;
    -- Contract 26: nor steps the groups due (a revocation's end, a lapsed
    -- member), up to 100, passing over those other transactions hold.
    BEGIN
        PERFORM @extschema@._le_groups_due(clock_timestamp());
    EXCEPTION WHEN OTHERS THEN
        RAISE WARNING USING
            MESSAGE = format('leaderlock: the groups were not stepped: %s', SQLERRM),
            DETAIL = format('The expiries of this call are kept; it is tried again at the next call '
                            '(SQLSTATE %s).', SQLSTATE);
    END;
    -- Contract 23: no worker numbers the history here. A numbering that
    -- fails (e.g. a publication that publishes deletes and a
    -- leaderlock_history_pending without a replica identity) never takes
    -- this call's expiries with it (audit of 0.5.0, B): its subtransaction
    -- alone is rolled back, the rows wait for the next call.
    BEGIN
        PERFORM @extschema@._le_number_history();
    EXCEPTION WHEN OTHERS THEN
        RAISE WARNING USING
            MESSAGE = format('leaderlock: the history was not numbered: %s', SQLERRM),
            DETAIL = format('The expiries of this call are kept; the numbering is tried again at the next call '
                            '(SQLSTATE %s).', SQLSTATE);
    END;
    RETURN n;
END
$fn$;

-- Contract 21: opens a session of p_id for p_ttl, owned by p_caller, and
-- returns its handle, a random uuid (gen_random_uuid: never reused).
CREATE FUNCTION @extschema@._le_open_session(p_id text, p_ttl interval, p_lock_delay interval,
                                             p_keep_values boolean, p_caller oid) RETURNS uuid
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $fn$
DECLARE
    t timestamptz;
    v_session uuid;
BEGIN
    PERFORM @extschema@._le_name('id'::text, p_id);
    p_ttl := @extschema@._le_ttl(p_ttl, true);
    p_lock_delay := @extschema@._le_lock_delay(p_lock_delay);
    PERFORM @extschema@._le_keep_values(p_keep_values);
    PERFORM @extschema@._le_act_as(p_caller);
    t := clock_timestamp();
    INSERT INTO @extschema@.leaderlock_sessions AS x
           (session, id, owner, ttl, opened_at, renewed_at, expires_at, recheck_at, lock_delay, keep_values,
            session_pid, session_start)
    VALUES (gen_random_uuid(), p_id, p_caller, p_ttl, t, t, t + p_ttl, t + p_ttl, p_lock_delay, p_keep_values,
            NULL, NULL)
    RETURNING x.session INTO v_session;
    PERFORM @extschema@._le_durable();
    RETURN v_session;
END
$fn$;

-- Contract 21: extends the caller's live session by p_ttl (NULL: its own)
-- from the instant of the call, one row written whatever its keys. Waits
-- for a transaction that holds the row (only its owner's own calls and the
-- end of a lapsed session lock it, a rival's never do), and decides
-- liveness on the row as it is then (the clock read again after the
-- wait): a live session is never refused, an ended one never renewed, and
-- a renewal that waited is backdated, never extended. (le_renew of one of
-- its keys and le_renew_all never wait: _le_extend_sessions.) A refused
-- renewal (unknown, lapsed, or another role's) changes nothing and locks
-- nothing.
CREATE FUNCTION @extschema@._le_renew_session(p_session uuid, p_ttl interval, p_caller oid) RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $fn$
DECLARE
    t timestamptz;
    v_pro timestamptz;
BEGIN
    PERFORM @extschema@._le_session_arg(p_session);
    p_ttl := @extschema@._le_ttl(p_ttl, false);
    PERFORM @extschema@._le_act_as(p_caller);
    v_pro := @extschema@._le_promoted_at();
    t := clock_timestamp();
    UPDATE @extschema@.leaderlock_sessions x
       SET renewed_at = t,
           expires_at = t + coalesce(p_ttl, x.ttl),
           ttl = coalesce(p_ttl, x.ttl),
           recheck_at = CASE
               WHEN x.recheck_at <= t + coalesce(p_ttl, x.ttl)
                AND x.recheck_at >= t + coalesce(p_ttl, x.ttl) / 2.0::float8 THEN x.recheck_at
               ELSE t + coalesce(p_ttl, x.ttl) END
     WHERE x.session = p_session
       AND GREATEST(x.expires_at, v_pro + x.ttl) > clock_timestamp()
       AND pg_has_role(p_caller, x.owner, 'MEMBER'::text);
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    PERFORM @extschema@._le_durable();
    RETURN true;
END
$fn$;

-- Contract 21: closes the caller's live session: every key held under it
-- vacated and announced "released" as le_release does, no lock-delay, and
-- its row deleted, in this transaction (_le_end_session; at REPEATABLE
-- READ or SERIALIZABLE the row stays, lapsed, and is ended again). Waits
-- for a transaction that acquires under it, renews it or holds one of its
-- keys locked (a guarded write in progress ends first). False, nothing
-- changed, for a session that is not live, unknown or another role's.
CREATE FUNCTION @extschema@._le_close_session(p_session uuid, p_caller oid) RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $fn$
DECLARE
    v_pro timestamptz;
BEGIN
    PERFORM @extschema@._le_session_arg(p_session);
    PERFORM @extschema@._le_act_as(p_caller);
    v_pro := @extschema@._le_promoted_at();
    -- Looked at without a lock first: a refused close locks nothing.
    IF NOT EXISTS (SELECT FROM @extschema@.leaderlock_sessions x
                    WHERE x.session = p_session AND GREATEST(x.expires_at, v_pro + x.ttl) > clock_timestamp()
                      AND pg_has_role(p_caller, x.owner, 'MEMBER'::text)) THEN
        RETURN false;
    END IF;
    -- Each lock with its writes, in one block (see _le_lock_own).
    BEGIN
        PERFORM FROM @extschema@.leaderlock_sessions x
          WHERE x.session = p_session AND GREATEST(x.expires_at, v_pro + x.ttl) > clock_timestamp()
            AND pg_has_role(p_caller, x.owner, 'MEMBER'::text)
            FOR UPDATE;
        IF NOT FOUND THEN
            RAISE SQLSTATE 'LE0NL';   -- lapsed or ended while we waited for the lock
        END IF;
        PERFORM @extschema@._le_end_session(p_session, true, v_pro, NULL::text);
        RETURN true;
    EXCEPTION WHEN SQLSTATE 'LE0NL' THEN
        RETURN false;
    END;
END
$fn$;

-- Contract 22: leaderlock.max_jobs_per_role as the administrator set it
-- (the database's setting, else ALTER ROLE ALL's: _le_admin_setting;
-- default 1000, 1 to 1,000,000 as in the compiled edition).
CREATE FUNCTION @extschema@._le_max_jobs() RETURNS integer
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_raw text := btrim(coalesce(@extschema@._le_admin_setting('leaderlock.max_jobs_per_role'::text), ''));
    v_max integer;
BEGIN
    v_max := CASE WHEN v_raw = '' THEN 1000
                  WHEN v_raw ~ '^[0-9]{1,7}$' THEN v_raw::integer END;
    IF v_max IS NULL OR v_max NOT BETWEEN 1 AND 1000000 THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('leaderlock: invalid value for parameter "%s": "%s"',
                             'leaderlock.max_jobs_per_role', v_raw),
            DETAIL = 'It must be between 1 and 1000000, as in the compiled edition.';
    END IF;
    RETURN v_max;
END
$fn$;

-- Contract 22: a role that is not a superuser makes at most
-- leaderlock.max_jobs_per_role jobs still kept (53400, before anything is
-- written; claims of its existing jobs are never refused by it).
CREATE FUNCTION @extschema@._le_may_make_job(p_caller oid) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $fn$
DECLARE
    v_max_jobs integer;
BEGIN
    IF NOT coalesce((SELECT a.rolsuper FROM pg_roles a WHERE a.oid = p_caller), false) THEN
        v_max_jobs := @extschema@._le_max_jobs();
        IF (SELECT count(*) FROM @extschema@.leaderlock_jobs j WHERE j.owner = p_caller) >= v_max_jobs THEN
            RAISE EXCEPTION USING ERRCODE = 'configuration_limit_exceeded',
                MESSAGE = format('leaderlock: this role has made leaderlock.max_jobs_per_role (%s) jobs; '
                                 'no new job is made', v_max_jobs),
                HINT = 'A job is forgotten once its runs all passed leaderlock.run_retention; '
                       'a superuser may raise the limit.';
        END IF;
    END IF;
END
$fn$;

-- Contract 22: a job's row, made by its first claim (or its schedule,
-- contract 24), owned by p_caller: inserted only when absent (an insert
-- that meets a row another transaction updated waits for it). Waits only
-- for a concurrent first claim of the job, and at most 10 ms (compiled:
-- tenure::insert_first): one still open finds the row locked. It starts
-- at the term of job '' (the highest a deleted job had).
CREATE FUNCTION @extschema@._le_make_job(p_job text, p_caller oid) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $fn$
DECLARE
    old_lock_timeout text := current_setting('lock_timeout');
BEGIN
    PERFORM set_config('lock_timeout', '10ms', true);
    INSERT INTO @extschema@.leaderlock_jobs AS j (job, term, owner)
    SELECT p_job, coalesce((SELECT f.term FROM @extschema@.leaderlock_jobs f WHERE f.job = ''), 0::bigint),
           p_caller
    ON CONFLICT (job) DO NOTHING;
    PERFORM set_config('lock_timeout', old_lock_timeout, true);
EXCEPTION WHEN lock_not_available THEN
    NULL;   -- a rival's first claim of the job is still open
END
$fn$;

-- Contract 22 (runs.rs lock_claimable): under the job's lock, the run of
-- p_job due at p_due locked if it may be claimed at p_t (unfinished, its
-- last claim not live: a rival never locks the runner's row), never
-- waiting; its row made first when it has none (under the job's lock, so
-- no other claim inserts it meanwhile; looked for first: its runner may be
-- renewing it). A new run of the job deletes its runs due before
-- p_horizon (the retention) that are finished or without a live claim,
-- skipping rows others hold, and marks the job so that none of them is
-- ever claimed again. locked: whether it was locked; its last claim's
-- holder and term.
CREATE FUNCTION @extschema@._le_lock_claimable(p_job text, p_due timestamptz, p_t timestamptz,
                                               p_horizon timestamptz, p_pro timestamptz,
                                               OUT locked boolean, OUT holder text, OUT term bigint)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $fn$
BEGIN
    IF NOT EXISTS (SELECT FROM @extschema@.leaderlock_runs r WHERE r.job = p_job AND r.due = p_due) THEN
        INSERT INTO @extschema@.leaderlock_runs AS r (job, due) VALUES (p_job, p_due)
        ON CONFLICT (job, due) DO NOTHING;
        IF FOUND THEN
            DELETE FROM @extschema@.leaderlock_runs r
             WHERE r.job = p_job
               AND r.due IN (SELECT o.due FROM @extschema@.leaderlock_runs o
                              WHERE o.job = p_job AND o.due < p_horizon
                                AND (o.finished_at IS NOT NULL OR o.holder IS NULL
                                     OR NOT coalesce(GREATEST(o.expires_at, p_pro + o.ttl) > p_t, false))
                                FOR UPDATE SKIP LOCKED);
            UPDATE @extschema@.leaderlock_jobs j
               SET pruned_before = GREATEST(j.pruned_before, p_horizon)
             WHERE j.job = p_job;
        END IF;
    END IF;
    SELECT r.holder, r.term INTO holder, term
      FROM @extschema@.leaderlock_runs r
     WHERE r.job = p_job AND r.due = p_due AND r.finished_at IS NULL
       AND (r.holder IS NULL OR NOT coalesce(GREATEST(r.expires_at, p_pro + r.ttl) > p_t, false))
       FOR NO KEY UPDATE SKIP LOCKED;
    locked := FOUND;
END
$fn$;

-- Contract 24's overlap: whether a run of p_job other than the one due at
-- p_due is claimed live at p_t (a claim held across a promotion: until
-- the promotion + its ttl, difference 6).
CREATE FUNCTION @extschema@._le_other_run_live(p_job text, p_due timestamptz, p_t timestamptz,
                                               p_pro timestamptz) RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
RETURN EXISTS (SELECT FROM @extschema@.leaderlock_runs r
                WHERE r.job = p_job AND r.due <> p_due AND r.finished_at IS NULL AND r.holder IS NOT NULL
                  AND GREATEST(r.expires_at, p_pro + r.ttl) > p_t);

-- Contract 22 (runs.rs record_missed): the locked run of p_job due at p_due
-- recorded missed at p_t, once, saying why: its claim (of p_term, by
-- p_holder) lapsed unfinished, an earlier run of the job still running
-- (p_other, overlap forbid), or never claimed; announced run_missed.
CREATE FUNCTION @extschema@._le_record_missed(p_job text, p_due timestamptz, p_t timestamptz,
                                              p_holder text, p_term bigint, p_other boolean) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $fn$
BEGIN
    UPDATE @extschema@.leaderlock_runs r
       SET finished_at = p_t, outcome = 'missed',
           detail = CASE WHEN p_holder IS NOT NULL AND p_term IS NOT NULL
                         THEN format('its claim of term %s lapsed unfinished and its misfire grace has passed',
                                     p_term)
                         WHEN p_other
                         THEN 'not claimed within its misfire grace: an earlier run of the job was still '
                              'running (overlap forbid)'
                         ELSE 'not claimed within its misfire grace' END
     WHERE r.job = p_job AND r.due = p_due;
    PERFORM @extschema@._le_durable();
    PERFORM @extschema@._le_announce_run('run_missed'::text, p_job, p_due, NULL::text, NULL::bigint, p_t,
                                         NULL::timestamptz, NULL::integer, NULL::text);
END
$fn$;

-- Contract 24 (settle.rs settle_job): the instants of a schedule after
-- p_settled_to whose misfire grace has passed by p_t, at most p_budget,
-- each settled with the decision a late claim makes, under the job's row
-- lock (the caller's): one nobody claimed, or whose claim lapsed
-- unfinished, is recorded missed, once; one claimed live past its grace is
-- running, not missed. Instants older than the runs' retention (p_horizon)
-- or the job's prune are passed over (their rows would go at once), and
-- none due before the schedule was made, changed or resumed
-- (p_active_since) is recorded. Up to where it settled, and how many
-- instants it looked at.
CREATE FUNCTION @extschema@._le_settle_job(p_job text, p_every_us numeric, p_masks bigint[],
                                           p_years integer[], p_tz text, p_grace_us numeric,
                                           p_settled_to timestamptz, p_pruned_before timestamptz,
                                           p_overlap text, p_active_since timestamptz, p_t timestamptz,
                                           p_horizon timestamptz, p_pro timestamptz, p_budget integer,
                                           OUT settled timestamptz, OUT looked integer)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $fn$
DECLARE
    v_grace interval := @extschema@._le_us_interval(p_grace_us);
    v_due timestamptz;
    c record;
    v_other boolean;
BEGIN
    settled := GREATEST(p_settled_to, GREATEST(p_horizon, p_pruned_before) - interval '1 microsecond');
    looked := 0;
    LOOP
        v_due := @extschema@._le_next_after(p_every_us, p_masks, p_years, p_tz, settled);
        EXIT WHEN v_due IS NULL OR looked >= p_budget OR NOT p_t > v_due + v_grace;
        looked := looked + 1;
        c := @extschema@._le_lock_claimable(p_job, v_due, p_t, p_horizon, p_pro);
        v_other := c.locked AND p_overlap <> 'allow'
                   AND @extschema@._le_other_run_live(p_job, v_due, p_t, p_pro);
        -- (run_claim: locked, not before the schedule took effect, past its grace)
        IF c.locked AND v_due >= p_active_since THEN
            PERFORM @extschema@._le_record_missed(p_job, v_due, p_t, c.holder, c.term, v_other);
        END IF;
        settled := v_due;
    END LOOP;
END
$fn$;

-- Contract 24 (settle.rs settle): the worker's round, done by every
-- le_expire_lapsed here: the schedules whose next instant's grace has
-- ended by p_t, the longest waiting first, up to 100, each locked with its
-- job's row without waiting (a schedule being changed, or whose job a
-- claim holds, is passed over and the next one taken: a role that holds
-- its jobs' rows in open transactions never keeps the round from the
-- others'), settled up to 1,000 instants in all; each one's settled_to and
-- next check move in the same transaction. How many instants it looked at.
CREATE FUNCTION @extschema@._le_settle(p_t timestamptz) RETURNS integer
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $fn$
DECLARE
    v_pro timestamptz;
    v_horizon timestamptz;
    v_budget integer := 1000;
    r record;
    cal record;
    v_grace_us numeric;
    done record;
BEGIN
    FOR r IN
        SELECT s.job, s.every, s.cron, s.tz, s.misfire_grace, s.settled_to, s.overlap, s.active_since,
               j.pruned_before
          FROM @extschema@.leaderlock_schedules s
          JOIN @extschema@.leaderlock_jobs j ON j.job = s.job
         WHERE s.next_check <= p_t
         ORDER BY s.next_check
         LIMIT 100
           FOR NO KEY UPDATE OF s, j SKIP LOCKED
    LOOP
        cal := @extschema@._le_calendar(r.every, r.cron, r.tz);
        CONTINUE WHEN cal.why IS NOT NULL;
        IF v_horizon IS NULL THEN   -- (read once there is a schedule to settle)
            v_pro := @extschema@._le_promoted_at();
            v_horizon := p_t - @extschema@._le_us_interval(@extschema@._le_setting_us(
                'leaderlock.run_retention'::text, 604800::bigint, 1::bigint, 2147483647::bigint));
        END IF;
        v_grace_us := @extschema@._le_us(r.misfire_grace);
        done := @extschema@._le_settle_job(r.job, cal.every_us, cal.masks, cal.years, r.tz, v_grace_us,
                                           r.settled_to, r.pruned_before, r.overlap, r.active_since, p_t,
                                           v_horizon, v_pro, v_budget);
        v_budget := v_budget - done.looked;
        UPDATE @extschema@.leaderlock_schedules s
           SET settled_to = done.settled,
               next_check = @extschema@._le_next_after(cal.every_us, cal.masks, cal.years, r.tz, done.settled)
                            + @extschema@._le_us_interval(v_grace_us)
         WHERE s.job = r.job;
        EXIT WHEN v_budget = 0;
    END LOOP;
    RETURN 1000 - v_budget;
END
$fn$;

-- Contract 24 (settle.rs before_change): before a change of its calendar
-- or a pause, the instants of p_job's schedule (its row locked, as read:
-- its settings) whose grace has passed by p_t are settled under the old
-- settings (up to 1,000), so that none of them is lost to the change.
-- Passed over while paused, and when a claim holds the job's row right now.
CREATE FUNCTION @extschema@._le_before_change(p_job text, p_paused boolean, p_every interval, p_cron text,
                                              p_tz text, p_grace interval, p_settled_to timestamptz,
                                              p_overlap text, p_active_since timestamptz, p_t timestamptz)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $fn$
DECLARE
    cal record;
    v_pruned timestamptz;
BEGIN
    IF p_paused THEN
        RETURN;   -- (nothing was due)
    END IF;
    SELECT j.pruned_before INTO v_pruned FROM @extschema@.leaderlock_jobs j
     WHERE j.job = p_job
       FOR NO KEY UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    cal := @extschema@._le_calendar(p_every, p_cron, p_tz);
    PERFORM @extschema@._le_settle_job(p_job, cal.every_us, cal.masks, cal.years, p_tz, @extschema@._le_us(p_grace),
                                       p_settled_to, v_pruned, p_overlap, p_active_since, p_t,
                                       p_t - @extschema@._le_us_interval(@extschema@._le_setting_us(
                                           'leaderlock.run_retention'::text, 604800::bigint, 1::bigint,
                                           2147483647::bigint)),
                                       @extschema@._le_promoted_at(), 1000);
END
$fn$;

-- Contract 25 (expected.rs check_due, protocol expected::check): every
-- mark due a check by p_t, up to 1,000, locked without waiting: over what
-- leaderlock_status shows of its key (when its earliest live tenure
-- began, when the live tenures end, when its last tenure that is not live
-- ended), an interval without a live holder longer than the bound is
-- opened (its start exact: when the key lost its last live holder, or was
-- marked, if later; announced "leaderless"), and closed when a tenure is
-- found (its end exact: when that tenure began; "leaderless_end"). Looked
-- at again when the bound can end, every second while the key is led or
-- an interval is open, and when the key's tenures may end. How many marks.
CREATE FUNCTION @extschema@._le_check_expected(p_t timestamptz) RETURNS integer
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $fn$
DECLARE
    r record;
    led record;
    v_poll timestamptz := p_t + interval '1 second';
    v_within interval;
    v_since timestamptz;
    v_until timestamptz;
    v_open timestamptz;
    v_opened bigint;
    v_closed numeric;
    v_next timestamptz;
    n integer := 0;
BEGIN
    FOR r IN
        SELECT e.key, e.within, e.marked_at, e.leaderless_since FROM @extschema@.leaderlock_expected e
         WHERE e.next_check <= p_t
         ORDER BY e.next_check
         LIMIT 1000
           FOR NO KEY UPDATE SKIP LOCKED
    LOOP
        n := n + 1;
        SELECT min(s.acquired_at) FILTER (WHERE s.state = 'held') AS since,
               min(s.expires_at) FILTER (WHERE s.state = 'held') AS until,
               max(s.expires_at) FILTER (WHERE s.state <> 'held') AS last_end
          INTO led
          FROM @extschema@.leaderlock_status s WHERE s.key = r.key;
        v_within := @extschema@._le_us_interval(@extschema@._le_us(r.within));
        v_open := r.leaderless_since;
        v_opened := 0;
        v_closed := 0;
        v_since := NULL;
        v_until := NULL;
        IF led.since IS NOT NULL AND r.leaderless_since IS NOT NULL THEN
            v_since := r.leaderless_since;
            v_until := GREATEST(led.since, v_since);
            v_open := NULL;
            v_closed := @extschema@._le_unix_us(v_until) - @extschema@._le_unix_us(v_since);
            v_next := LEAST(coalesce(led.until, v_poll), v_poll);
        ELSIF led.since IS NOT NULL THEN
            v_next := LEAST(coalesce(led.until, v_poll), v_poll);
        ELSIF r.leaderless_since IS NOT NULL THEN
            v_next := v_poll;
        ELSE
            v_since := GREATEST(coalesce(led.last_end, r.marked_at), r.marked_at);
            IF p_t > v_since + v_within THEN
                v_open := v_since;
                v_opened := 1;
                v_next := v_poll;
            ELSE
                v_since := NULL;   -- (just after the bound: "longer than" it)
                v_next := GREATEST(coalesce(led.last_end, r.marked_at), r.marked_at) + v_within
                          + interval '1 microsecond';
            END IF;
        END IF;
        UPDATE @extschema@.leaderlock_expected e
           SET leaderless_since = v_open, intervals = e.intervals + v_opened,
               leaderless_total = e.leaderless_total + @extschema@._le_us_interval(v_closed),
               next_check = v_next
         WHERE e.key = r.key;
        IF v_opened = 1 THEN
            PERFORM @extschema@._le_announce_leaderless(r.key, v_since, NULL::timestamptz,
                                                        @extschema@._le_us(r.within), p_t);
        ELSIF v_until IS NOT NULL THEN
            PERFORM @extschema@._le_announce_leaderless(r.key, v_since, v_until, NULL::numeric, p_t);
        END IF;
    END LOOP;
    RETURN n;
END
$fn$;

-- Contract 22 (src/runs.rs claim): claims the run of p_job due at p_due
-- (on the lease clock) for p_id by p_ttl. Its term, from the job's one
-- sequence, or NULL: finished (or missed) already, claimed live by another
-- (a claim held across a promotion counts as live until the promotion + its
-- ttl, difference 6), locked by its runner's open transaction, its job's
-- row locked by a concurrent claim, or past p_grace (NULL: no limit), which
-- this call then records as missed (once) and announces run_missed. Claims
-- of one job take turns on the job's row, locked without waiting; the
-- job's lock and the run's writes share one block, rolled back when it
-- claims nothing (see _le_lock_own): a claim that finds the run taken keeps
-- no lock. Renewals and finishes never touch the job's row. Contract 24: a
-- scheduled job's runs are claimed by members of its owner (42501), at its
-- instants only (22023 for another instant due since its calendar took
-- effect), by its grace whatever p_grace; none while it is paused nor due
-- before it was made, changed or resumed (NULL, nothing written); with
-- overlap forbid, none while another run of the job is claimed live; with
-- replace, the other runs' live claims are ended first (recorded
-- replaced, announced run_finished: their renewals and finishes are
-- refused) and the new term fences them off.
CREATE FUNCTION @extschema@._le_claim_run(p_job text, p_due timestamptz, p_id text, p_ttl interval,
                                          p_grace interval, p_caller oid) RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $fn$
DECLARE
    t timestamptz;
    v_grace_us numeric;
    v_retention_us numeric;
    v_horizon timestamptz;
    v_late boolean;
    v_pro timestamptz;
    v_term bigint;
    v_other boolean := false;
    sched record;
    cal record;
    jl record;
    prev record;
    ended record;
    claimed record;
    v_late_run boolean := false;
BEGIN
    PERFORM @extschema@._le_name('job'::text, p_job);
    PERFORM @extschema@._le_due(p_due);
    PERFORM @extschema@._le_name('id'::text, p_id);
    p_ttl := @extschema@._le_ttl(p_ttl, true);
    v_grace_us := @extschema@._le_misfire_grace(p_grace);
    -- the lease clock (le_now), one reading for the whole claim
    t := clock_timestamp();
    PERFORM @extschema@._le_not_before_due(p_due, t);
    v_retention_us := @extschema@._le_setting_us('leaderlock.run_retention'::text, 604800::bigint, 1::bigint,
                                                 2147483647::bigint);
    PERFORM @extschema@._le_act_as(p_caller);
    -- Contract 24: a scheduled job's runs are its owner's to claim, at its
    -- calendar's instants only from when it took effect (a rival's
    -- off-calendar claim could end the owner's runs under replace, or hold
    -- them off under forbid; a replica run with other flags is told). An
    -- instant due before then is refused below as any claim that can do
    -- nothing: a follower that waited for one across a change is not stopped.
    SELECT pg_has_role(p_caller, s.owner, 'MEMBER'::text) AS member, s.every, s.cron, s.tz, s.active_since
      INTO sched
      FROM @extschema@.leaderlock_schedules s WHERE s.job = p_job;
    IF FOUND THEN
        cal := @extschema@._le_calendar(sched.every, sched.cron, sched.tz);
        IF cal.why IS NULL AND NOT sched.member THEN
            RAISE EXCEPTION USING ERRCODE = 'insufficient_privilege',
                MESSAGE = format('leaderlock: permission denied to claim a run of job %s: its schedule is '
                                 'another role''s', @extschema@._le_debug_str(p_job)),
                HINT = 'A scheduled job''s runs are claimed by members of the role that scheduled it.';
        END IF;
        IF cal.why IS NULL AND p_due >= sched.active_since
           AND @extschema@._le_next_after(cal.every_us, cal.masks, cal.years, sched.tz,
                                          p_due - interval '1 microsecond') IS DISTINCT FROM p_due THEN
            RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
                MESSAGE = format('leaderlock: the instant is not a due instant of job %s''s schedule',
                                 @extschema@._le_debug_str(p_job)),
                HINT = 'le_next_due(job, after) gives the schedule''s instants; a replica run with its own '
                       '--every or --cron differs from the schedule kept in the database.';
        END IF;
    END IF;
    -- Contract 8.2: a promotion is recorded (one row, never waiting); held
    -- claims last at least until then + their ttl.
    PERFORM @extschema@._le_failover_record();
    v_pro := @extschema@._le_promoted_at();
    -- A run due longer ago than the retention is never claimed (its row may
    -- be gone): refused before anything is written.
    v_horizon := t - make_interval(secs => (v_retention_us / 1000000::numeric)::float8);
    IF p_due < v_horizon THEN
        RETURN NULL;
    END IF;

    -- The job's row, made by its first claim (_le_make_job), owned by the
    -- calling role, which makes at most leaderlock.max_jobs_per_role of
    -- them unless it is a superuser (_le_may_make_job).
    IF NOT EXISTS (SELECT FROM @extschema@.leaderlock_jobs j WHERE j.job = p_job) THEN
        PERFORM @extschema@._le_may_make_job(p_caller);
        PERFORM @extschema@._le_make_job(p_job, p_caller);
    END IF;

    -- The job's lock and the run's writes, in one block (see _le_lock_own).
    BEGIN
        SELECT j.pruned_before, s.overlap, s.misfire_grace, s.paused, s.active_since, s.backfill INTO jl
          FROM @extschema@.leaderlock_jobs j
          LEFT JOIN @extschema@.leaderlock_schedules s ON s.job = j.job
         WHERE j.job = p_job
           FOR NO KEY UPDATE OF j SKIP LOCKED;
        IF NOT FOUND THEN
            RAISE SQLSTATE 'LE0NL';   -- another claim of the job holds it: try again later
        END IF;
        IF p_due < jl.pruned_before THEN
            RAISE SQLSTATE 'LE0NL';   -- pruned by a shorter retention: never again
        END IF;
        -- Contract 24: its schedule's grace is the one that counts; a claim
        -- that can do nothing writes nothing: not while paused, nor of a
        -- run due before the schedule was made, changed or resumed.
        IF jl.misfire_grace IS NOT NULL THEN
            v_grace_us := @extschema@._le_us(jl.misfire_grace);
        END IF;
        IF coalesce(jl.paused, false) OR p_due < jl.active_since THEN
            RAISE SQLSTATE 'LE0NL';
        END IF;
        prev := @extschema@._le_lock_claimable(p_job, p_due, t, v_horizon, v_pro);
        IF NOT prev.locked AND coalesce(jl.backfill, 0) > 0 THEN
            -- Contract 24's backfill (runs.rs lock_backfill): a run recorded
            -- missed, never taken up since, one of the job's `backfill`
            -- latest instants recorded missed (taken up since or not), is
            -- claimed as any run, whatever its grace (past it by definition)
            PERFORM FROM @extschema@.leaderlock_runs r
             WHERE r.job = p_job AND r.due = p_due AND r.outcome = 'missed' AND r.backfilled_at IS NULL
               AND (SELECT count(*) FROM (SELECT FROM @extschema@.leaderlock_runs l
                                           WHERE l.job = p_job AND l.due > p_due
                                             AND (l.outcome = 'missed' OR l.backfilled_at IS NOT NULL)
                                           LIMIT jl.backfill) later) < jl.backfill
               FOR NO KEY UPDATE OF r SKIP LOCKED;
            IF NOT FOUND THEN
                RAISE SQLSTATE 'LE0NL';
            END IF;
            v_late_run := true;
        ELSIF NOT prev.locked THEN
            RAISE SQLSTATE 'LE0NL';
        END IF;
        IF coalesce(jl.overlap, 'allow') <> 'allow' THEN
            v_other := @extschema@._le_other_run_live(p_job, p_due, t, v_pro);
        END IF;
        v_late := NOT v_late_run AND v_grace_us IS NOT NULL
                  AND (extract(epoch FROM t) - extract(epoch FROM p_due)) * 1000000::numeric > v_grace_us;
        IF v_late THEN
            -- past its misfire grace: recorded missed, once
            PERFORM @extschema@._le_record_missed(p_job, p_due, t, prev.holder, prev.term, v_other);
            RETURN NULL;
        END IF;
        IF v_other AND jl.overlap = 'forbid' THEN
            RAISE SQLSTATE 'LE0NL';   -- another run of the job is claimed live: wait within the grace
        END IF;
        IF v_other AND jl.overlap = 'replace' THEN
            -- the other runs' live claims end now (their runners' renewals
            -- and finishes are refused from now on), announced as finished
            FOR ended IN
                UPDATE @extschema@.leaderlock_runs r
                   SET finished_at = t, outcome = 'replaced',
                       detail = format('replaced by the run due at %s (overlap replace)',
                                       @extschema@._le_rfc3339(p_due)),
                       expires_at = LEAST(r.expires_at, t)
                 WHERE r.job = p_job AND r.due <> p_due AND r.finished_at IS NULL AND r.holder IS NOT NULL
                   AND GREATEST(r.expires_at, v_pro + r.ttl) > t
                RETURNING r.due, r.holder, r.term
            LOOP
                PERFORM @extschema@._le_announce_run('run_finished'::text, p_job, ended.due, ended.holder,
                                                     ended.term, t, NULL::timestamptz, NULL::integer,
                                                     'replaced'::text);
            END LOOP;
        END IF;
        -- The job's next term (contract 8.1: at least the timeline's floor).
        UPDATE @extschema@.leaderlock_jobs j
           SET term = GREATEST(j.term + 1, @extschema@._le_term_floor())
         WHERE j.job = p_job
        RETURNING j.term INTO v_term;
        UPDATE @extschema@.leaderlock_runs r
           SET holder = p_id, term = v_term, claimed_at = t, expires_at = t + p_ttl, ttl = p_ttl,
               owner = p_caller, attempts = r.attempts + 1,
               backfilled_at = CASE WHEN r.finished_at IS NULL THEN r.backfilled_at ELSE t END,
               finished_at = NULL, outcome = NULL, detail = NULL
         WHERE r.job = p_job AND r.due = p_due
        RETURNING r.expires_at, r.attempts INTO claimed;
        PERFORM @extschema@._le_durable();
        PERFORM @extschema@._le_announce_run('run_claimed'::text, p_job, p_due, p_id, v_term, t,
                                             claimed.expires_at, claimed.attempts, NULL::text);
        RETURN v_term;
    EXCEPTION WHEN SQLSTATE 'LE0NL' THEN
        RETURN NULL;
    END;
END
$fn$;

-- Contract 22 (runs.rs renew): extends the claim p_id holds live at now on
-- an unfinished run (of p_term when given; owned by a role p_caller is a
-- member of) by p_ttl or the stored ttl, in one statement that never waits
-- and locks only the caller's own claim (as _le_extend). A refused renewal
-- changes nothing and locks nothing.
CREATE FUNCTION @extschema@._le_renew_run(p_job text, p_due timestamptz, p_id text, p_ttl interval,
                                          p_caller oid, p_term bigint) RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $fn$
DECLARE
    t timestamptz;
    v_pro timestamptz;
    v_term bigint;
BEGIN
    PERFORM @extschema@._le_name('job'::text, p_job);
    PERFORM @extschema@._le_due(p_due);
    PERFORM @extschema@._le_name('id'::text, p_id);
    p_ttl := @extschema@._le_ttl(p_ttl, false);
    PERFORM @extschema@._le_term(p_term, false);
    PERFORM @extschema@._le_act_as(p_caller);
    v_pro := @extschema@._le_promoted_at();
    t := clock_timestamp();
    UPDATE @extschema@.leaderlock_runs r
       SET expires_at = t + coalesce(p_ttl, r.ttl), ttl = coalesce(p_ttl, r.ttl)
     WHERE r.job = p_job AND r.due = p_due AND r.finished_at IS NULL
       AND r.holder = p_id AND GREATEST(r.expires_at, v_pro + r.ttl) > t
       AND r.due = (SELECT s.due FROM @extschema@.leaderlock_runs s
                     WHERE s.job = p_job AND s.due = p_due AND s.finished_at IS NULL
                       AND s.holder = p_id AND GREATEST(s.expires_at, v_pro + s.ttl) > t
                       AND (p_term IS NULL OR s.term = p_term)
                       AND (s.owner IS NULL OR pg_has_role(p_caller, s.owner, 'MEMBER'::text))
                       FOR NO KEY UPDATE SKIP LOCKED)
    RETURNING r.term INTO v_term;
    IF v_term IS NULL THEN
        RETURN false;
    END IF;
    PERFORM @extschema@._le_durable();
    RETURN true;
END
$fn$;

-- Contract 22 (runs.rs finish): records the outcome of the run whose last
-- claim is p_id's of p_term (live, or lapsed and not claimed again since;
-- owned by a role p_caller is a member of), once, never waiting; the claim
-- ends then. A refused finish changes nothing and locks nothing.
CREATE FUNCTION @extschema@._le_finish_run(p_job text, p_due timestamptz, p_id text, p_term bigint,
                                           p_succeeded boolean, p_detail text, p_caller oid) RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $fn$
DECLARE
    t timestamptz;
    v_outcome text;
    v_term bigint;
BEGIN
    PERFORM @extschema@._le_name('job'::text, p_job);
    PERFORM @extschema@._le_due(p_due);
    PERFORM @extschema@._le_name('id'::text, p_id);
    PERFORM @extschema@._le_term(p_term, true);
    v_outcome := @extschema@._le_outcome(p_succeeded);
    PERFORM @extschema@._le_detail(p_detail);
    PERFORM @extschema@._le_act_as(p_caller);
    t := clock_timestamp();
    UPDATE @extschema@.leaderlock_runs r
       SET finished_at = t, outcome = v_outcome, detail = p_detail, expires_at = LEAST(r.expires_at, t)
     WHERE r.job = p_job AND r.due = p_due
       AND r.due = (SELECT s.due FROM @extschema@.leaderlock_runs s
                     WHERE s.job = p_job AND s.due = p_due AND s.finished_at IS NULL
                       AND s.holder = p_id AND s.term = p_term
                       AND (s.owner IS NULL OR pg_has_role(p_caller, s.owner, 'MEMBER'::text))
                       FOR NO KEY UPDATE SKIP LOCKED)
    RETURNING r.term INTO v_term;
    IF v_term IS NULL THEN
        RETURN false;
    END IF;
    PERFORM @extschema@._le_durable();
    PERFORM @extschema@._le_announce_run('run_finished'::text, p_job, p_due, p_id, p_term, t,
                                         NULL::timestamptz, NULL::integer, v_outcome);
    RETURN true;
END
$fn$;


-- Contract 24 (schedules.rs schedule): makes or changes job p_job's
-- schedule for p_caller (a member of its owner: 42501 otherwise; a new
-- schedule: of a job it made, or that has no row yet, made now and counted
-- against leaderlock.max_jobs_per_role). The same settings again change
-- nothing (a replica that registers its schedule at every start never
-- hides a miss); another grace or overlap alone judges the same instants
-- as before, by the new rules; another calendar first settles the old
-- one's instants whose grace has passed (_le_before_change), then judges
-- the instants from now on. Its next due instant.
CREATE FUNCTION @extschema@._le_schedule(p_job text, p_every interval, p_cron text, p_tz text,
                                         p_grace interval, p_overlap text, p_caller oid,
                                         p_backfill integer DEFAULT 0) RETURNS timestamptz
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $fn$
DECLARE
    cal record;
    v_grace_us numeric;
    v_grace interval;
    v_every interval;
    v_cron text;
    t timestamptz;
    v_first_check timestamptz;
    r record;
    v_owned boolean;
BEGIN
    PERFORM @extschema@._le_name('job'::text, p_job);
    cal := @extschema@._le_schedule_calendar(p_every, p_cron, p_tz);
    v_grace_us := @extschema@._le_schedule_grace(p_grace, cal.every_us);
    PERFORM @extschema@._le_overlap(p_overlap);
    PERFORM @extschema@._le_backfill(p_backfill);
    PERFORM @extschema@._le_act_as(p_caller);
    t := clock_timestamp();
    v_grace := @extschema@._le_us_interval(v_grace_us);
    v_every := @extschema@._le_us_interval(cal.every_us);
    v_cron := CASE WHEN cal.every_us IS NULL THEN p_cron END;
    v_first_check := @extschema@._le_next_after(cal.every_us, cal.masks, cal.years, p_tz, t) + v_grace;
    SELECT pg_has_role(p_caller, s.owner, 'MEMBER'::text) AS member, s.every, s.cron, s.tz, s.misfire_grace,
           s.overlap, s.paused, s.active_since, s.settled_to, s.backfill
      INTO r
      FROM @extschema@.leaderlock_schedules s WHERE s.job = p_job
       FOR NO KEY UPDATE;
    IF FOUND AND (@extschema@._le_calendar(r.every, r.cron, r.tz)).why IS NULL THEN
        IF NOT r.member THEN
            PERFORM @extschema@._le_not_schedule_owner(p_job);
        END IF;
        IF @extschema@._le_us(r.every) IS NOT DISTINCT FROM cal.every_us AND r.cron IS NOT DISTINCT FROM v_cron
           AND r.tz = p_tz THEN
            IF @extschema@._le_us(r.misfire_grace) <> v_grace_us OR r.overlap <> p_overlap
               OR r.backfill <> p_backfill THEN
                -- the same instants: judged as before, by the new grace,
                -- overlap and backfill
                UPDATE @extschema@.leaderlock_schedules s
                   SET misfire_grace = v_grace, overlap = p_overlap, backfill = p_backfill,
                       next_check = CASE WHEN s.paused THEN NULL
                                         ELSE @extschema@._le_next_after(cal.every_us, cal.masks, cal.years, p_tz,
                                                                         r.settled_to) + v_grace END,
                       changed_at = t
                 WHERE s.job = p_job;
            END IF;
        ELSE
            PERFORM @extschema@._le_before_change(p_job, r.paused, r.every, r.cron, r.tz, r.misfire_grace,
                                                  r.settled_to, r.overlap, r.active_since, t);
            UPDATE @extschema@.leaderlock_schedules s
               SET every = v_every, cron = v_cron, tz = p_tz, misfire_grace = v_grace, overlap = p_overlap,
                   backfill = p_backfill, active_since = t, settled_to = t,
                   next_check = CASE WHEN s.paused THEN NULL ELSE v_first_check END, changed_at = t
             WHERE s.job = p_job;
        END IF;
    ELSE
        -- a job p_caller made (made now for a new job, and checked again
        -- after: a rival's claim may have made it meanwhile)
        SELECT j.owner IS NULL OR pg_has_role(p_caller, j.owner, 'MEMBER'::text) INTO v_owned
          FROM @extschema@.leaderlock_jobs j WHERE j.job = p_job;
        IF NOT FOUND THEN
            PERFORM @extschema@._le_may_make_job(p_caller);
            PERFORM @extschema@._le_make_job(p_job, p_caller);
            SELECT j.owner IS NULL OR pg_has_role(p_caller, j.owner, 'MEMBER'::text) INTO v_owned
              FROM @extschema@.leaderlock_jobs j WHERE j.job = p_job;
        END IF;
        IF NOT coalesce(v_owned, false) THEN
            PERFORM @extschema@._le_not_schedule_owner(p_job);
        END IF;
        INSERT INTO @extschema@.leaderlock_schedules
               (job, every, cron, tz, misfire_grace, overlap, paused, active_since, settled_to, next_check,
                owner, changed_at, backfill)
        VALUES (p_job, v_every, v_cron, p_tz, v_grace, p_overlap, false, t, t, v_first_check, p_caller, t,
                p_backfill);
    END IF;
    PERFORM @extschema@._le_durable();
    RETURN @extschema@._le_next_after(cal.every_us, cal.masks, cal.years, p_tz, t);
END
$fn$;

-- Contract 24: a change of another role's schedule (42501).
CREATE FUNCTION @extschema@._le_not_schedule_owner(p_job text) RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RAISE EXCEPTION USING ERRCODE = 'insufficient_privilege',
        MESSAGE = format('leaderlock: permission denied to change the schedule of job %s: another role made it',
                         @extschema@._le_debug_str(p_job)),
        HINT = 'A job''s schedule is its owner''s (the role that made the job or the schedule), as a lease is.';
END
$fn$;

-- Contract 24: job p_job's schedule goes (its runs and terms stay, kept as
-- any job's); whether it had one. Its owner's only (42501).
CREATE FUNCTION @extschema@._le_unschedule(p_job text, p_caller oid) RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $fn$
DECLARE
    r record;
BEGIN
    PERFORM @extschema@._le_name('job'::text, p_job);
    PERFORM @extschema@._le_act_as(p_caller);
    SELECT pg_has_role(p_caller, s.owner, 'MEMBER'::text) AS member, s.every, s.cron, s.tz INTO r
      FROM @extschema@.leaderlock_schedules s WHERE s.job = p_job
       FOR NO KEY UPDATE;
    IF NOT FOUND OR (@extschema@._le_calendar(r.every, r.cron, r.tz)).why IS NOT NULL THEN
        RETURN false;
    END IF;
    IF NOT r.member THEN
        PERFORM @extschema@._le_not_schedule_owner(p_job);
    END IF;
    DELETE FROM @extschema@.leaderlock_schedules s WHERE s.job = p_job;
    PERFORM @extschema@._le_durable();
    RETURN true;
END
$fn$;

-- Contract 24 (schedules.rs set_paused): pauses (p_paused) or resumes job
-- p_job's schedule; whether it changed (false: no schedule, or already
-- so). Its owner's only (42501). A pause first settles the instants whose
-- grace has passed (_le_before_change); paused, no claim of its runs is
-- granted and no instant is recorded missed; resumed, it is judged from
-- now on only.
CREATE FUNCTION @extschema@._le_set_paused(p_job text, p_paused boolean, p_caller oid) RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $fn$
DECLARE
    r record;
    cal record;
    t timestamptz;
    v_check timestamptz;
BEGIN
    PERFORM @extschema@._le_name('job'::text, p_job);
    IF p_paused IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'null_value_not_allowed', MESSAGE = 'leaderlock: paused must not be NULL';
    END IF;
    PERFORM @extschema@._le_act_as(p_caller);
    t := clock_timestamp();
    SELECT pg_has_role(p_caller, s.owner, 'MEMBER'::text) AS member, s.every, s.cron, s.tz, s.misfire_grace,
           s.overlap, s.paused, s.active_since, s.settled_to
      INTO r
      FROM @extschema@.leaderlock_schedules s WHERE s.job = p_job
       FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    cal := @extschema@._le_calendar(r.every, r.cron, r.tz);
    IF cal.why IS NOT NULL THEN
        RETURN false;
    END IF;
    IF NOT r.member THEN
        PERFORM @extschema@._le_not_schedule_owner(p_job);
    END IF;
    IF r.paused = p_paused THEN
        RETURN false;
    END IF;
    IF p_paused THEN
        PERFORM @extschema@._le_before_change(p_job, r.paused, r.every, r.cron, r.tz, r.misfire_grace,
                                              r.settled_to, r.overlap, r.active_since, t);
    ELSE
        v_check := @extschema@._le_next_after(cal.every_us, cal.masks, cal.years, r.tz, t)
                   + @extschema@._le_us_interval(@extschema@._le_us(r.misfire_grace));
    END IF;
    UPDATE @extschema@.leaderlock_schedules s
       SET paused = p_paused, next_check = v_check, changed_at = t,
           active_since = CASE WHEN p_paused THEN s.active_since ELSE t END,
           settled_to = CASE WHEN p_paused THEN s.settled_to ELSE GREATEST(s.settled_to, t) END
     WHERE s.job = p_job;
    PERFORM @extschema@._le_announce_schedule(CASE WHEN p_paused THEN 'schedule_paused'
                                                   ELSE 'schedule_resumed' END, p_job, t);
    PERFORM @extschema@._le_durable();
    RETURN true;
END
$fn$;

-- Contract 25: whether p_caller may change key p_key's mark, its row locked
-- (waits only for another change of it or le_expire_lapsed's short check):
-- a member of the role that made it, or of the role that holds the key now
-- (a mark is no way to squat another role's key); NULL: no mark. The key's
-- row is read first, as save.sql takes the tables (leaderlock before
-- leaderlock_expected).
CREATE FUNCTION @extschema@._le_mark_member(p_key text, p_caller oid) RETURNS boolean
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $fn$
DECLARE
    v_member boolean;
BEGIN
    PERFORM FROM @extschema@.leaderlock l WHERE l.key = p_key;
    SELECT pg_has_role(p_caller, e.owner, 'MEMBER'::text)
           OR EXISTS (SELECT FROM @extschema@.leaderlock l
                       WHERE l.key = e.key AND l.owner IS NOT NULL
                         AND pg_has_role(p_caller, l.owner, 'MEMBER'::text))
      INTO v_member
      FROM @extschema@.leaderlock_expected e WHERE e.key = p_key
       FOR NO KEY UPDATE OF e;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF NOT v_member THEN
        RAISE EXCEPTION USING ERRCODE = 'insufficient_privilege',
            MESSAGE = format('leaderlock: permission denied to change the mark of key %s: another role made it',
                             @extschema@._le_debug_str(p_key)),
            HINT = 'A mark is the role''s that made it, or that holds the key now.';
    END IF;
    RETURN true;
END
$fn$;

-- Contract 25 (expected.rs mark): marks p_key as expected to be led within
-- p_within, for p_caller; a role that is not a superuser marks at most
-- leaderlock.max_jobs_per_role keys (53400, nothing written). The same
-- bound again changes nothing; another starts the key's count again from
-- now (an open interval stays open). Whether it changed. First checked by
-- the next le_expire_lapsed.
CREATE FUNCTION @extschema@._le_expect_leader(p_key text, p_within interval, p_caller oid) RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $fn$
DECLARE
    v_within interval;
    v_max integer;
    t timestamptz;
    v_changed boolean;
BEGIN
    PERFORM @extschema@._le_name('key'::text, p_key);
    v_within := @extschema@._le_us_interval(@extschema@._le_within(p_within));
    PERFORM @extschema@._le_act_as(p_caller);
    t := clock_timestamp();
    IF @extschema@._le_mark_member(p_key, p_caller) IS NULL
       AND NOT coalesce((SELECT a.rolsuper FROM pg_roles a WHERE a.oid = p_caller), false) THEN
        v_max := @extschema@._le_max_jobs();
        IF (SELECT count(*) FROM @extschema@.leaderlock_expected e WHERE e.owner = p_caller) >= v_max THEN
            RAISE EXCEPTION USING ERRCODE = 'configuration_limit_exceeded',
                MESSAGE = format('leaderlock: this role has marked leaderlock.max_jobs_per_role (%s) keys as '
                                 'expected to be led; no new mark is made', v_max),
                HINT = 'Unmark a key (le_unexpect_leader); a superuser may raise the limit.';
        END IF;
    END IF;
    INSERT INTO @extschema@.leaderlock_expected AS e (key, within, owner, marked_at, next_check)
    VALUES (p_key, v_within, p_caller, t, t)
    ON CONFLICT (key) DO UPDATE SET within = excluded.within, marked_at = excluded.marked_at,
                                    next_check = excluded.next_check
     WHERE e.within IS DISTINCT FROM excluded.within
       AND (pg_has_role(p_caller, e.owner, 'MEMBER'::text)
            OR EXISTS (SELECT FROM @extschema@.leaderlock l
                        WHERE l.key = e.key AND l.owner IS NOT NULL
                          AND pg_has_role(p_caller, l.owner, 'MEMBER'::text)))
    RETURNING true INTO v_changed;
    IF v_changed THEN
        PERFORM @extschema@._le_durable();
    END IF;
    RETURN coalesce(v_changed, false);
END
$fn$;

-- Contract 25 (expected.rs unmark): p_key is no longer expected to be led;
-- whether it was. An open leaderless interval ends now, recorded and
-- announced (leaderless_end).
CREATE FUNCTION @extschema@._le_unexpect_leader(p_key text, p_caller oid) RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $fn$
DECLARE
    t timestamptz;
    v_since timestamptz;
BEGIN
    PERFORM @extschema@._le_name('key'::text, p_key);
    PERFORM @extschema@._le_act_as(p_caller);
    t := clock_timestamp();
    IF @extschema@._le_mark_member(p_key, p_caller) IS NULL THEN
        RETURN false;
    END IF;
    DELETE FROM @extschema@.leaderlock_expected e WHERE e.key = p_key RETURNING e.leaderless_since INTO v_since;
    PERFORM @extschema@._le_durable();
    IF v_since IS NOT NULL THEN
        PERFORM @extschema@._le_announce_leaderless(p_key, v_since, t, NULL::numeric, t);
    END IF;
    RETURN true;
END
$fn$;

-- ---------------------------------------------------------------------------
-- Contract 26: groups (compiled: lease/groups.rs, protocol groups.rs). A
-- group's P partitions shared among its live members, each a session
-- (contract 21). Every change of a group (a join, a leave, an ack, and the
-- step due at check_at: a revocation's end, a member's expiry, taken by
-- le_expire_lapsed or by a member's renewal here, where no worker runs)
-- takes the group's row lock and then _le_group_settle.
-- ---------------------------------------------------------------------------

-- partitions of le_join: NULL (an existing group's count), or 1 to 100,000
-- (input.rs MAX_PARTITIONS).
CREATE FUNCTION @extschema@._le_partitions(v integer) RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF v NOT BETWEEN 1 AND 100000 THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('leaderlock: partitions must be between 1 and 100000 (got %s)', v);
    END IF;
END
$fn$;

-- drain of le_join: NULL (the group's, or 10 seconds for a new one), or 0
-- to leaderlock.max_ttl without a month or year part. Returns it as the
-- compiled edition stores it (microseconds only).
CREATE FUNCTION @extschema@._le_drain(v interval) RETURNS interval
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    max_us numeric;
    bad boolean;
BEGIN
    IF v IS NULL THEN
        RETURN NULL;
    END IF;
    max_us := @extschema@._le_setting_us('leaderlock.max_ttl'::text, 86400::bigint, 1::bigint, 2147483647::bigint);
    bad := NOT isfinite(v);
    IF NOT bad THEN
        bad := extract(year FROM v) <> 0 OR extract(month FROM v) <> 0;
    END IF;
    IF NOT bad THEN
        bad := @extschema@._le_us(v) < 0::numeric OR @extschema@._le_us(v) > max_us;
    END IF;
    IF bad THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('leaderlock: drain must be between 0 and leaderlock.max_ttl (%s) without a month '
                             'or year part (got %s)', @extschema@._le_seconds(max_us), v);
    END IF;
    RETURN @extschema@._le_us_interval(@extschema@._le_us(v));
END
$fn$;

-- A partition of le_ack and le_assert_partition: not NULL, from 1 on.
CREATE FUNCTION @extschema@._le_partition(v integer) RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF v IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'null_value_not_allowed',
            MESSAGE = 'leaderlock: partition must not be NULL';
    END IF;
    IF v < 1 THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('leaderlock: partition must be 1 or more (got %s)', v);
    END IF;
END
$fn$;

-- Why a join did not act (api/groups.rs refused): 'partitions' (a new
-- group needs them), 'owner' (another role made the group), 'member' (the
-- member is live under another role's session).
CREATE FUNCTION @extschema@._le_group_refused(p_group text, p_member text, why text) RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF why = 'partitions' THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('leaderlock: group %s does not exist; a new group needs its partitions',
                             @extschema@._le_debug_str(p_group)),
            HINT = 'Give partitions => N to the first join.';
    ELSIF why = 'owner' THEN
        RAISE EXCEPTION USING ERRCODE = 'insufficient_privilege',
            MESSAGE = format('leaderlock: permission denied to change group %s: another role made it',
                             @extschema@._le_debug_str(p_group)),
            HINT = 'Join without partitions or drain to take the group as it is.';
    ELSE
        RAISE EXCEPTION USING ERRCODE = 'insufficient_privilege',
            MESSAGE = format('leaderlock: member %s of group %s is live under another role''s session',
                             @extschema@._le_debug_str(p_member), @extschema@._le_debug_str(p_group)),
            HINT = 'Each member''s name is its own: give this one another name.';
    END IF;
END
$fn$;

-- A partition's change on channel leaderlock, byte for byte the compiled
-- edition's JSON (announce/groups.rs: event, group, partition, member,
-- term, until for a revocation, at), recorded in the history under the
-- group's name.
CREATE FUNCTION @extschema@._le_announce_partition(event text, grp text, part integer, member text, term bigint,
                                                   until timestamptz, at timestamptz)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    payload text;
BEGIN
    payload := '{"event":' || to_json($1)::text || ',"group":' || to_json($2)::text
            || ',"partition":' || $3::text || ',"member":' || to_json($4)::text || ',"term":' || $5::text
            || CASE WHEN $6 IS NOT NULL THEN ',"until":"' || @extschema@._le_rfc3339($6) || '"' ELSE '' END
            || ',"at":"' || @extschema@._le_rfc3339($7) || '"}';
    PERFORM pg_notify('leaderlock', payload);
    PERFORM @extschema@._le_record($7, $1, $2, $4, $5, payload);
END
$fn$;

-- Contract 26 (lease/groups.rs grant): partition p_partition of p_group,
-- held until now in p_term, granted to p_member (session p_session) at
-- p_t in the next term from the failover floor p_floor, and announced.
CREATE FUNCTION @extschema@._le_group_grant(p_group text, p_partition integer, p_member text, p_session uuid,
                                            p_term bigint, p_floor bigint, p_t timestamptz) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_term bigint := GREATEST(p_term + 1, p_floor);
BEGIN
    UPDATE @extschema@.leaderlock_partitions p
       SET member = p_member, session = p_session, term = v_term, revoke_until = NULL, next_member = NULL,
           acked = false, changed_at = p_t
     WHERE p.grp = p_group AND p.partition = p_partition;
    PERFORM @extschema@._le_announce_partition('partition_granted'::text, p_group, p_partition, p_member,
                                               v_term, NULL::timestamptz, p_t);
END
$fn$;

-- Contract 26 (lease/groups.rs settle): moves every partition of p_group,
-- whose row the caller holds locked, toward its target at p_t: reads the
-- members (their sessions share-locked: a renewal committing after this
-- read would outlast a revocation's end computed from it) and the
-- partitions once; the target is protocol groups.rs assign (balanced;
-- the extra partitions of an uneven share to the members that own the
-- most not counting what they give back, then by name; sticky: each keeps
-- its lowest up to its share; the rest to those below their share in name
-- order; names compared bytewise, COLLATE "C", as Rust does), each step
-- its step (grant at once what is free or a dead owner's, in the next term
-- from the failover floor; revoke a live owner's until max(now + drain,
-- its session's end); grant a revoked one once acked or at its end;
-- withdraw a revocation whose target is its owner again; free what nobody
-- is to have). A partition a guarded transaction holds (le_assert_partition)
-- is skipped and stepped again 100 ms later. Sets check_at. Hash joins
-- only (enable_nestloop off): a group's rows estimated at a few, its
-- 100,000 partitions joined by nested loops took minutes.
CREATE FUNCTION @extschema@._le_group_settle(p_group text, p_partitions integer, p_drain interval,
                                             p_t timestamptz) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET enable_nestloop = off
SET jit = off
AS $fn$
DECLARE
    v_pro timestamptz := @extschema@._le_promoted_at();
    v_floor bigint := @extschema@._le_term_floor();
    v_names text[];
    v_sessions uuid[];
    v_lasts timestamptz[];
    v_live text[];
    v_next timestamptz;
    v_parts integer[];
    v_kinds text[];
    v_members text[];
    v_terms bigint[];
    v_targets text[];
    v_tsessions uuid[];
    v_owner_lasts timestamptz[];
    v_locked integer[];
    v_until timestamptz;
    v_skipped boolean := false;
    j integer := 1;
BEGIN
    SELECT array_agg(m.member ORDER BY m.member COLLATE "C"), array_agg(m.session ORDER BY m.member COLLATE "C")
      INTO v_names, v_sessions
      FROM @extschema@.leaderlock_members m WHERE m.grp = p_group;
    v_names := coalesce(v_names, '{}'::text[]);
    v_sessions := coalesce(v_sessions, '{}'::uuid[]);
    SELECT array_agg(x.lasts ORDER BY u.n) INTO v_lasts
      FROM unnest(v_sessions) WITH ORDINALITY AS u(session, n)
      LEFT JOIN (SELECT s.session, GREATEST(s.expires_at, v_pro + s.ttl) AS lasts
                   FROM @extschema@.leaderlock_sessions s WHERE s.session = ANY (v_sessions)
                    FOR SHARE) x ON x.session = u.session;
    v_lasts := coalesce(v_lasts, '{}'::timestamptz[]);
    SELECT coalesce(array_agg(u.name ORDER BY u.n), '{}'::text[]), min(u.lasts)
      INTO v_live, v_next
      FROM unnest(v_names, v_lasts) WITH ORDINALITY AS u(name, lasts, n)
     WHERE u.lasts > p_t;
    WITH mem AS (
        SELECT u.name, u.session, u.lasts FROM unnest(v_names, v_sessions, v_lasts) AS u(name, session, lasts)
    ), parts AS (
        -- an owner is live while its member's session is the one it was
        -- granted under and that session is live
        SELECT p.partition, p.member, p.term, p.revoke_until, p.acked, p.next_member,
               CASE WHEN m.session = p.session AND m.lasts > p_t THEN m.lasts END AS owner_lasts
          FROM @extschema@.leaderlock_partitions p
          LEFT JOIN mem m ON m.name = p.member
         WHERE p.grp = p_group
    ), counted AS (
        SELECT c.partition, c.revoke_until IS NOT NULL AS revoking,
               CASE WHEN c.owner_lasts IS NOT NULL THEN c.member END AS cur
          FROM parts c WHERE c.partition <= p_partitions
    ), live AS (
        SELECT l.name, l.ord FROM unnest(v_live) WITH ORDINALITY AS l(name, ord)
    ), shares AS (
        SELECT l.name, l.ord,
               (n.total / nullif(cardinality(v_live), 0))::integer
               + CASE WHEN row_number() OVER (ORDER BY coalesce(o.n, 0) DESC, l.ord)
                           <= n.total % nullif(cardinality(v_live), 0) THEN 1 ELSE 0 END AS share
          FROM live l
          CROSS JOIN (SELECT count(*) AS total FROM counted) n
          LEFT JOIN (SELECT c.cur, count(*) AS n FROM counted c WHERE c.cur IS NOT NULL AND NOT c.revoking
                      GROUP BY c.cur) o ON o.cur = l.name
    ), kept AS (
        SELECT k.partition, k.cur AS target
          FROM (SELECT c.partition, c.cur, row_number() OVER (PARTITION BY c.cur ORDER BY c.partition) AS rn
                  FROM counted c WHERE c.cur IS NOT NULL) k
          JOIN shares s ON s.name = k.cur
         WHERE k.rn <= s.share
    ), wanting AS (
        SELECT w.name, row_number() OVER (ORDER BY w.ord, g.i) AS k
          FROM (SELECT s.name, s.ord, s.share - coalesce(kc.n, 0) AS need
                  FROM shares s
                  LEFT JOIN (SELECT kept.target, count(*) AS n FROM kept GROUP BY kept.target) kc
                    ON kc.target = s.name) w
          CROSS JOIN LATERAL generate_series(1::bigint, w.need) AS g(i)
    ), unkept AS (
        SELECT c.partition, row_number() OVER (ORDER BY c.partition) AS k
          FROM counted c WHERE NOT EXISTS (SELECT FROM kept WHERE kept.partition = c.partition)
    ), target AS (
        SELECT kept.partition, kept.target FROM kept
        UNION ALL
        SELECT u.partition, w.name FROM unkept u JOIN wanting w ON w.k = u.k
    ), decided AS (
        SELECT p.partition, p.member, p.term, p.revoke_until, p.owner_lasts, t.target,
               CASE WHEN p.member IS NULL THEN
                        CASE WHEN t.target IS NULL THEN 'keep' ELSE 'grant' END
                    WHEN p.revoke_until IS NULL THEN
                        CASE WHEN p.owner_lasts IS NULL THEN
                                 CASE WHEN t.target IS NULL THEN 'free' ELSE 'grant' END
                             WHEN coalesce(t.target = p.member, false) THEN 'keep'
                             ELSE 'revoke' END
                    WHEN p.owner_lasts IS NOT NULL AND NOT p.acked AND coalesce(t.target = p.member, false)
                        THEN 'withdraw'
                    WHEN p.acked OR p.owner_lasts IS NULL OR p_t >= p.revoke_until THEN
                        CASE WHEN t.target IS NULL THEN 'free' ELSE 'grant' END
                    -- still draining; whom its ack grants it to follows the assignment
                    WHEN p.next_member IS DISTINCT FROM t.target THEN 'retarget'
                    ELSE 'keep' END AS kind
          FROM parts p LEFT JOIN target t ON t.partition = p.partition
    )
    SELECT array_agg(d.partition ORDER BY d.partition) FILTER (WHERE d.kind <> 'keep'),
           array_agg(d.kind ORDER BY d.partition) FILTER (WHERE d.kind <> 'keep'),
           array_agg(d.member ORDER BY d.partition) FILTER (WHERE d.kind <> 'keep'),
           array_agg(d.term ORDER BY d.partition) FILTER (WHERE d.kind <> 'keep'),
           array_agg(d.target ORDER BY d.partition) FILTER (WHERE d.kind <> 'keep'),
           array_agg(m.session ORDER BY d.partition) FILTER (WHERE d.kind <> 'keep'),
           array_agg(d.owner_lasts ORDER BY d.partition) FILTER (WHERE d.kind <> 'keep'),
           LEAST(v_next, min(d.revoke_until) FILTER (WHERE d.kind IN ('keep', 'retarget')))
      INTO v_parts, v_kinds, v_members, v_terms, v_targets, v_tsessions, v_owner_lasts, v_next
      FROM decided d LEFT JOIN mem m ON m.name = d.target;
    IF v_parts IS NOT NULL THEN
        -- skipping those a guarded transaction holds (le_assert_partition)
        SELECT array_agg(x.partition ORDER BY x.partition) INTO v_locked
          FROM (SELECT p.partition FROM @extschema@.leaderlock_partitions p
                 WHERE p.grp = p_group AND p.partition = ANY (v_parts)
                   FOR NO KEY UPDATE SKIP LOCKED) x;
        v_locked := coalesce(v_locked, '{}'::integer[]);
        FOR i IN 1 .. cardinality(v_parts) LOOP
            WHILE j <= cardinality(v_locked) AND v_locked[j] < v_parts[i] LOOP
                j := j + 1;
            END LOOP;
            IF j > cardinality(v_locked) OR v_locked[j] <> v_parts[i] THEN
                v_next := LEAST(v_next, p_t + interval '100 milliseconds');
                v_skipped := true;
                CONTINUE;
            END IF;
            IF v_kinds[i] = 'revoke' THEN
                v_until := GREATEST(p_t + p_drain, coalesce(v_owner_lasts[i], p_t));
                UPDATE @extschema@.leaderlock_partitions p
                   SET revoke_until = v_until, next_member = v_targets[i], changed_at = p_t
                 WHERE p.grp = p_group AND p.partition = v_parts[i];
                v_next := LEAST(v_next, v_until);
                PERFORM @extschema@._le_announce_partition('partition_revoked'::text, p_group, v_parts[i],
                                                           v_members[i], v_terms[i], v_until, p_t);
            ELSIF v_kinds[i] = 'retarget' THEN
                UPDATE @extschema@.leaderlock_partitions p SET next_member = v_targets[i]
                 WHERE p.grp = p_group AND p.partition = v_parts[i];
            ELSIF v_kinds[i] = 'withdraw' THEN
                UPDATE @extschema@.leaderlock_partitions p
                   SET revoke_until = NULL, next_member = NULL, acked = false, changed_at = p_t
                 WHERE p.grp = p_group AND p.partition = v_parts[i];
                PERFORM @extschema@._le_announce_partition('partition_granted'::text, p_group, v_parts[i],
                                                           v_members[i], v_terms[i], NULL::timestamptz, p_t);
            ELSIF v_kinds[i] = 'grant' THEN
                PERFORM @extschema@._le_group_grant(p_group, v_parts[i], v_targets[i], v_tsessions[i], v_terms[i],
                                                    v_floor, p_t);
            ELSE
                UPDATE @extschema@.leaderlock_partitions p
                   SET member = NULL, session = NULL, revoke_until = NULL, next_member = NULL, acked = false,
                       changed_at = p_t
                 WHERE p.grp = p_group AND p.partition = v_parts[i];
                PERFORM @extschema@._le_announce_partition('partition_freed'::text, p_group, v_parts[i],
                                                           coalesce(v_members[i], ''), v_terms[i],
                                                           NULL::timestamptz, p_t);
            END IF;
        END LOOP;
    END IF;
    UPDATE @extschema@.leaderlock_groups x SET check_at = v_next, restep = v_skipped WHERE x.grp = p_group;
    PERFORM @extschema@._le_durable();
END
$fn$;

-- Contract 26: a step due by time (a revocation's end, a member's expiry,
-- a retry), the group's row locked by the caller: one that finds every
-- member live, no revocation ended and nothing skipped before
-- (p_restep) only moves the group's cue, without reading its partitions
-- (members renewing move their expiries past the cue every ttl or so).
CREATE FUNCTION @extschema@._le_group_step_due(p_group text, p_partitions integer, p_drain interval,
                                               p_restep boolean, p_t timestamptz) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $fn$
DECLARE
    v_pro timestamptz := @extschema@._le_promoted_at();
    v_lapsed boolean;
    v_next timestamptz;
    v_first_end timestamptz;
BEGIN
    SELECT coalesce(bool_or(x.lasts IS NULL OR x.lasts <= p_t), false), min(x.lasts) INTO v_lapsed, v_next
      FROM (SELECT GREATEST(s.expires_at, v_pro + s.ttl) AS lasts
              FROM @extschema@.leaderlock_members m
              LEFT JOIN @extschema@.leaderlock_sessions s ON s.session = m.session
             WHERE m.grp = p_group) x;
    SELECT min(p.revoke_until) INTO v_first_end
      FROM @extschema@.leaderlock_partitions p WHERE p.grp = p_group AND p.revoke_until IS NOT NULL;
    IF p_restep OR v_lapsed OR v_first_end <= p_t THEN
        PERFORM @extschema@._le_group_settle(p_group, p_partitions, p_drain, p_t);
        RETURN;
    END IF;
    UPDATE @extschema@.leaderlock_groups x SET check_at = LEAST(v_next, v_first_end), restep = false
     WHERE x.grp = p_group;
END
$fn$;

-- Contract 26: steps, as the compiled worker does, up to 100 groups due
-- at p_t (check_at), passing over those other transactions hold (a call
-- changing one steps it itself). How many. Called by le_expire_lapsed.
CREATE FUNCTION @extschema@._le_groups_due(p_t timestamptz) RETURNS integer
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $fn$
DECLARE
    r record;
    n integer := 0;
BEGIN
    FOR r IN
        SELECT x.grp, x.partitions, x.drain, x.restep FROM @extschema@.leaderlock_groups x
         WHERE x.check_at <= p_t ORDER BY x.check_at LIMIT 100
           FOR NO KEY UPDATE SKIP LOCKED
    LOOP
        PERFORM @extschema@._le_group_step_due(r.grp, r.partitions, r.drain, r.restep, p_t);
        n := n + 1;
    END LOOP;
    RETURN n;
END
$fn$;

-- Contract 26: a role that is not a superuser makes at most
-- leaderlock.max_jobs_per_role groups (53400, before anything is written),
-- as in the compiled edition.
CREATE FUNCTION @extschema@._le_may_make_group(p_caller oid) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $fn$
DECLARE
    v_max integer;
BEGIN
    IF NOT coalesce((SELECT a.rolsuper FROM pg_roles a WHERE a.oid = p_caller), false) THEN
        v_max := @extschema@._le_max_jobs();
        IF (SELECT count(*) FROM @extschema@.leaderlock_groups g WHERE g.owner = p_caller) >= v_max THEN
            RAISE EXCEPTION USING ERRCODE = 'configuration_limit_exceeded',
                MESSAGE = format('leaderlock: this role has made leaderlock.max_jobs_per_role (%s) groups; '
                                 'no new group is made', v_max),
                HINT = 'A superuser may raise the limit.';
        END IF;
    END IF;
END
$fn$;

-- Contract 26: renews member session p_session of p_caller for p_ttl, as
-- _le_renew_session does (waits for the row; a renewal that waited is
-- backdated). 'renewed'; 'lapsed' when the caller's session lapsed or
-- ended, maybe while the renewal waited for its row (an UPDATE that waited
-- for a row only locked does not look at its WHERE again: liveness is
-- decided here, after the lock, with the clock read then); 'other' when
-- the session is another role's.
CREATE FUNCTION @extschema@._le_group_renew(p_session uuid, p_ttl interval, p_caller oid, p_pro timestamptz)
RETURNS text
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $fn$
DECLARE
    t timestamptz := clock_timestamp();
    r record;
BEGIN
    SELECT pg_has_role(p_caller, x.owner, 'MEMBER'::text) AS owned INTO r
      FROM @extschema@.leaderlock_sessions x WHERE x.session = p_session;
    IF FOUND AND NOT r.owned THEN
        RETURN 'other';
    END IF;
    SELECT GREATEST(x.expires_at, p_pro + x.ttl) AS lasts INTO r
      FROM @extschema@.leaderlock_sessions x WHERE x.session = p_session
       FOR NO KEY UPDATE;
    IF NOT FOUND OR r.lasts <= clock_timestamp() THEN
        RETURN 'lapsed';
    END IF;
    UPDATE @extschema@.leaderlock_sessions x
       SET renewed_at = t, expires_at = t + p_ttl, ttl = p_ttl,
           recheck_at = CASE WHEN x.recheck_at <= t + p_ttl AND x.recheck_at >= t + p_ttl / 2.0::float8
                             THEN x.recheck_at ELSE t + p_ttl END
     WHERE x.session = p_session;
    PERFORM @extschema@._le_durable();
    RETURN 'renewed';
END
$fn$;

-- Contract 26, le_join: p_member joins p_group (made with p_partitions
-- and p_drain if new; its owner's role may change either), or renews its
-- membership: its session, and every partition it owns with it. The
-- session.
CREATE FUNCTION @extschema@._le_join(p_group text, p_member text, p_ttl interval, p_partitions integer,
                                     p_drain interval, p_caller oid) RETURNS uuid
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $fn$
DECLARE
    g record;
    v_pro timestamptz;
    t timestamptz;
    v_session uuid;
    v_lasts timestamptz;
    v_changed boolean;
    v_renewed text;
BEGIN
    PERFORM @extschema@._le_name('group'::text, p_group);
    PERFORM @extschema@._le_name('member'::text, p_member);
    p_ttl := @extschema@._le_ttl(p_ttl, true);
    PERFORM @extschema@._le_partitions(p_partitions);
    p_drain := @extschema@._le_drain(p_drain);
    PERFORM @extschema@._le_act_as(p_caller);
    PERFORM @extschema@._le_failover_record();
    v_pro := @extschema@._le_promoted_at();
    t := clock_timestamp();
    -- A live member's renewal that changes nothing of the group takes no
    -- lock of it: a step in progress never delays a renewal.
    SELECT x.partitions, x.drain, coalesce(x.check_at <= t, false) AS due INTO g
      FROM @extschema@.leaderlock_groups x WHERE x.grp = p_group;
    IF FOUND AND (p_partitions IS NULL OR p_partitions = g.partitions)
       AND (p_drain IS NULL OR p_drain = g.drain) THEN
        SELECT m.session, GREATEST(s.expires_at, v_pro + s.ttl) INTO v_session, v_lasts
          FROM @extschema@.leaderlock_members m
          LEFT JOIN @extschema@.leaderlock_sessions s ON s.session = m.session
         WHERE m.grp = p_group AND m.member = p_member;
        IF v_lasts > t THEN
            v_renewed := @extschema@._le_group_renew(v_session, p_ttl, p_caller, v_pro);
            IF v_renewed = 'other' THEN
                PERFORM @extschema@._le_group_refused(p_group, p_member, 'member'::text);
            END IF;
        END IF;
        IF v_renewed = 'renewed' THEN
            IF g.due THEN
                -- no worker here: the renewal steps its group when due, if
                -- nobody holds its row (never waiting: SKIP LOCKED)
                SELECT x.partitions, x.drain, x.restep INTO g
                  FROM @extschema@.leaderlock_groups x
                 WHERE x.grp = p_group AND x.check_at <= clock_timestamp()
                   FOR NO KEY UPDATE SKIP LOCKED;
                IF FOUND THEN
                    PERFORM @extschema@._le_group_step_due(p_group, g.partitions, g.drain, g.restep,
                                                           clock_timestamp());
                END IF;
            END IF;
            RETURN v_session;
        END IF;
        -- (lapsed while the renewal waited for its row: joins again below)
    END IF;
    SELECT x.partitions, x.drain, pg_has_role(p_caller, x.owner, 'MEMBER'::text) AS may_change INTO g
      FROM @extschema@.leaderlock_groups x WHERE x.grp = p_group FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        IF p_partitions IS NULL THEN
            PERFORM @extschema@._le_group_refused(p_group, p_member, 'partitions'::text);
        END IF;
        PERFORM @extschema@._le_may_make_group(p_caller);
        t := clock_timestamp();
        INSERT INTO @extschema@.leaderlock_groups AS x (grp, partitions, drain, owner, changed_at, check_at)
        VALUES (p_group, p_partitions, coalesce(p_drain, @extschema@._le_us_interval(10000000::numeric)),
                p_caller, t, NULL)
            ON CONFLICT (grp) DO NOTHING;
        INSERT INTO @extschema@.leaderlock_partitions AS x (grp, partition, term, acked, changed_at)
        SELECT p_group, n, 0, false, t FROM generate_series(1, p_partitions) AS n
            ON CONFLICT (grp, partition) DO NOTHING;
        SELECT x.partitions, x.drain, pg_has_role(p_caller, x.owner, 'MEMBER'::text) AS may_change INTO g
          FROM @extschema@.leaderlock_groups x WHERE x.grp = p_group FOR NO KEY UPDATE;
    END IF;
    v_changed := (p_partitions IS NOT NULL AND p_partitions <> g.partitions)
              OR (p_drain IS NOT NULL AND p_drain <> g.drain);
    IF v_changed THEN
        IF NOT g.may_change THEN
            PERFORM @extschema@._le_group_refused(p_group, p_member, 'owner'::text);
        END IF;
        t := clock_timestamp();
        UPDATE @extschema@.leaderlock_groups x
           SET partitions = coalesce(p_partitions, x.partitions), drain = coalesce(p_drain, x.drain), changed_at = t
         WHERE x.grp = p_group
        RETURNING x.partitions, x.drain, true AS may_change INTO g;
        INSERT INTO @extschema@.leaderlock_partitions AS x (grp, partition, term, acked, changed_at)
        SELECT p_group, n, 0, false, t FROM generate_series(1, g.partitions) AS n
            ON CONFLICT (grp, partition) DO NOTHING;
    END IF;
    SELECT m.session, GREATEST(s.expires_at, v_pro + s.ttl) INTO v_session, v_lasts
      FROM @extschema@.leaderlock_members m
      LEFT JOIN @extschema@.leaderlock_sessions s ON s.session = m.session
     WHERE m.grp = p_group AND m.member = p_member;
    t := clock_timestamp();
    v_renewed := NULL;
    IF v_lasts > t THEN
        -- renewed: the membership and every partition with it
        v_renewed := @extschema@._le_group_renew(v_session, p_ttl, p_caller, v_pro);
        IF v_renewed = 'other' THEN
            PERFORM @extschema@._le_group_refused(p_group, p_member, 'member'::text);
        END IF;
    END IF;
    IF v_renewed = 'renewed' THEN
        IF NOT v_changed THEN
            RETURN v_session;
        END IF;
    ELSE
        t := clock_timestamp();
        -- a session of its own (contract 21: id the member, no lock-delay)
        INSERT INTO @extschema@.leaderlock_sessions AS x
               (session, id, owner, ttl, opened_at, renewed_at, expires_at, recheck_at, lock_delay, keep_values,
                session_pid, session_start)
        VALUES (gen_random_uuid(), p_member, p_caller, p_ttl, t, t, t + p_ttl, t + p_ttl, interval '0', false,
                NULL, NULL)
        RETURNING x.session INTO v_session;
        INSERT INTO @extschema@.leaderlock_members AS x (grp, member, session, joined_at)
        VALUES (p_group, p_member, v_session, t)
            ON CONFLICT (grp, member) DO UPDATE SET session = excluded.session, joined_at = excluded.joined_at;
    END IF;
    PERFORM @extschema@._le_group_settle(p_group, g.partitions, g.drain, clock_timestamp());
    RETURN v_session;
END
$fn$;

-- Contract 26, le_leave: p_member leaves p_group; its partitions go to the
-- others at once (it stopped acting on them), its session closed. Whether
-- it was a member (a live one only of the caller's role).
CREATE FUNCTION @extschema@._le_leave(p_group text, p_member text, p_caller oid) RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $fn$
DECLARE
    g record;
    v_pro timestamptz;
    t timestamptz;
    v_session uuid;
    v_lasts timestamptz;
    v_closed boolean := false;
BEGIN
    PERFORM @extschema@._le_name('group'::text, p_group);
    PERFORM @extschema@._le_name('member'::text, p_member);
    PERFORM @extschema@._le_act_as(p_caller);
    PERFORM @extschema@._le_failover_record();
    v_pro := @extschema@._le_promoted_at();
    SELECT x.partitions, x.drain INTO g FROM @extschema@.leaderlock_groups x WHERE x.grp = p_group
       FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    SELECT m.session, GREATEST(s.expires_at, v_pro + s.ttl) INTO v_session, v_lasts
      FROM @extschema@.leaderlock_members m
      LEFT JOIN @extschema@.leaderlock_sessions s ON s.session = m.session
     WHERE m.grp = p_group AND m.member = p_member;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    t := clock_timestamp();
    -- its session closed if it is the caller's and live (as le_close_session)
    PERFORM FROM @extschema@.leaderlock_sessions x
      WHERE x.session = v_session AND GREATEST(x.expires_at, v_pro + x.ttl) > clock_timestamp()
        AND pg_has_role(p_caller, x.owner, 'MEMBER'::text)
        FOR UPDATE;
    IF FOUND THEN
        PERFORM @extschema@._le_end_session(v_session, true, v_pro, NULL::text);
        v_closed := true;
    END IF;
    IF NOT v_closed AND v_lasts > t THEN
        RETURN false;   -- live, and another role's
    END IF;
    DELETE FROM @extschema@.leaderlock_members m WHERE m.grp = p_group AND m.member = p_member;
    PERFORM @extschema@._le_group_settle(p_group, g.partitions, g.drain, clock_timestamp());
    RETURN true;
END
$fn$;

-- Contract 26, le_ack: p_member gives back partition p_partition of
-- p_group, revoked from it in p_term; granted to its next owner at once.
-- Whether it was so revoked.
CREATE FUNCTION @extschema@._le_ack(p_group text, p_member text, p_partition integer, p_term bigint,
                                    p_caller oid) RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $fn$
DECLARE
    g record;
    v_t timestamptz;
    v_next_member text;
    v_session uuid;
BEGIN
    PERFORM @extschema@._le_name('group'::text, p_group);
    PERFORM @extschema@._le_name('member'::text, p_member);
    PERFORM @extschema@._le_partition(p_partition);
    PERFORM @extschema@._le_term(p_term, true);
    PERFORM @extschema@._le_act_as(p_caller);
    PERFORM @extschema@._le_failover_record();
    -- Only the member's own role gives its partitions back (another would
    -- hand one over while its owner still drains it). The partition's row
    -- first, waiting for a transaction that holds it (the member's own
    -- guard, while it drains) with nothing else locked: a join, a leave or
    -- a step of the group never waits behind the guard.
    PERFORM FROM @extschema@.leaderlock_partitions p
      JOIN @extschema@.leaderlock_members m ON m.grp = p.grp AND m.member = p.member
      JOIN @extschema@.leaderlock_sessions s ON s.session = m.session
     WHERE p.grp = p_group AND p.partition = p_partition AND p.member = p_member AND p.term = p_term
       AND p.revoke_until IS NOT NULL
       AND (s.owner IS NULL OR pg_has_role(p_caller, s.owner, 'MEMBER'::text))
       FOR NO KEY UPDATE OF p;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    SELECT x.partitions, x.drain INTO g FROM @extschema@.leaderlock_groups x WHERE x.grp = p_group
       FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    -- whom it goes to at once; NULL when a step decides (nobody named, the
    -- partition above the group's count, or a step passed over a partition
    -- since: what the row names may be stale)
    UPDATE @extschema@.leaderlock_partitions p SET acked = true
      FROM @extschema@.leaderlock_groups x
     WHERE p.grp = p_group AND p.partition = p_partition AND p.member = p_member AND p.term = p_term
       AND p.revoke_until IS NOT NULL AND x.grp = p.grp
    RETURNING CASE WHEN p.partition <= x.partitions AND NOT x.restep THEN p.next_member END
      INTO v_next_member;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    v_t := clock_timestamp();
    -- The partition goes to whom its revocation named, if still live: that
    -- one grant, not a step of the whole group (a join's revocations come
    -- back one ack each).
    SELECT m.session INTO v_session
      FROM @extschema@.leaderlock_members m
      JOIN @extschema@.leaderlock_sessions s ON s.session = m.session
     WHERE m.grp = p_group AND m.member = v_next_member
       AND GREATEST(s.expires_at, @extschema@._le_promoted_at() + s.ttl) > v_t;
    IF NOT FOUND THEN
        PERFORM @extschema@._le_group_settle(p_group, g.partitions, g.drain, v_t);
        RETURN true;
    END IF;
    PERFORM @extschema@._le_group_grant(p_group, p_partition, v_next_member, v_session, p_term,
                                        @extschema@._le_term_floor(), v_t);
    PERFORM @extschema@._le_durable();
    RETURN true;
END
$fn$;

-- Contract 26 (3.4 for a partition), le_assert_partition: under a share
-- lock on the partition's row (a grant to another waits for the guarded
-- transaction; a step passes over it), whether p_member owns it now (its
-- session live and, when revoked, before the revocation's end), in p_term
-- when given. Its term; LE001 otherwise, as le_assert_leader's.
CREATE FUNCTION @extschema@._le_assert_partition(p_group text, p_partition integer, p_member text, p_term bigint,
                                                 p_caller oid) RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $fn$
DECLARE
    r record;
    v_pro timestamptz;
BEGIN
    PERFORM @extschema@._le_name('group'::text, p_group);
    PERFORM @extschema@._le_partition(p_partition);
    PERFORM @extschema@._le_name('member'::text, p_member);
    PERFORM @extschema@._le_term(p_term, false);
    PERFORM @extschema@._le_act_as(p_caller);
    v_pro := @extschema@._le_promoted_at();
    SELECT p.term, LEAST(GREATEST(s.expires_at, v_pro + s.ttl), coalesce(p.revoke_until, 'infinity')) AS lasts,
           (s.owner IS NULL OR pg_has_role(p_caller, s.owner, 'MEMBER'::text)) AS owned
      INTO r
      FROM @extschema@.leaderlock_partitions p
      JOIN @extschema@.leaderlock_sessions s ON s.session = p.session
     WHERE p.grp = p_group AND p.partition = p_partition AND p.member = p_member
       FOR SHARE OF p;
    -- (another role's member is refused: the error ends the lock with the
    -- transaction or its savepoint, so a rival cannot hold steps back)
    IF FOUND AND r.owned AND r.lasts > clock_timestamp() AND (p_term IS NULL OR p_term = r.term) THEN
        RETURN r.term;
    END IF;
    RAISE EXCEPTION USING ERRCODE = 'LE001',
        MESSAGE = format('leaderlock: %s does not own partition %s of group %s%s',
                         @extschema@._le_debug_str(p_member), p_partition, @extschema@._le_debug_str(p_group),
                         CASE WHEN p_term IS NOT NULL THEN ' in term ' || p_term::text ELSE '' END),
        HINT = 'Stop acting on the partition; read le_assignment again.';
END
$fn$;

-- ---------------------------------------------------------------------------
-- The API (docs/sql-reference.md): same names, arguments, defaults and
-- result types as the compiled 0.5.0. SECURITY INVOKER.
-- ---------------------------------------------------------------------------

CREATE FUNCTION @extschema@.le_try_acquire(key text, id text, ttl interval,
                                           session_bound boolean DEFAULT false,
                                           value jsonb DEFAULT NULL, slots integer DEFAULT 1)
RETURNS boolean
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_ttl interval;
    v_caller oid;
    v_outcome text;
BEGIN
    PERFORM @extschema@._le_name('key'::text, $1);
    PERFORM @extschema@._le_name('id'::text, $2);
    v_ttl := @extschema@._le_ttl($3, true);
    PERFORM @extschema@._le_session_bound($4);
    PERFORM @extschema@._le_value($5);
    PERFORM @extschema@._le_slots($6);
    FOR n IN 0..4 LOOP   -- a holder's renewal, past a rival's lost race (_le_again)
        IF n > 0 THEN   -- (IF: an AND's order is not guaranteed)
            EXIT WHEN NOT @extschema@._le_again($1, $2, @extschema@._le_caller(), NULL::bigint, n);
        END IF;
        v_caller := @extschema@._le_caller();
        v_outcome := (SELECT a.o_outcome
                        FROM @extschema@._le_attempt($1, $2, v_ttl, $5, v_caller, NULL::bigint, $6) a);
        EXIT WHEN v_outcome <> 'busy';
    END LOOP;
    RETURN v_outcome = 'acquired';
END
$fn$;

-- le_acquire's wait (portable README, difference 2), for le_acquire and
-- le_acquire_in (p_session, contract 21: returns false at once when the
-- session is not live, or not the caller's), its arguments checked by them
-- (and again by _le_attempt). SECURITY INVOKER: the caller key of each
-- look is current_user's.
CREATE FUNCTION @extschema@._le_acquire_wait(p_key text, p_id text, p_ttl interval, p_wait interval,
                                             p_value jsonb, p_slots integer, p_session uuid)
RETURNS boolean
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_caller oid;
    deadline timestamptz;
    res record;
    t timestamptz;
    wake timestamptz;
    poll_ms float8 := 10;     -- first look again after 10 ms, then x1.5 up to 100 ms
BEGIN
    p_wait := @extschema@._le_wait(p_wait);
    IF pg_is_in_recovery() THEN
        p_wait := interval '0';   -- a hot standby cannot write: try once
    END IF;
    deadline := clock_timestamp() + p_wait;
    LOOP
        -- Each look in a subtransaction, rolled back unless it acquired: a
        -- waiter keeps no lock while it sleeps, not even on the keys of a
        -- lapsed session the look ended (contract 21: its lock-delay counts
        -- from the session's expiry, whoever ends it).
        BEGIN
            -- the caller key for this look, set inside the subtransaction
            -- (a rollback reverts it), consumed by _le_attempt
            v_caller := @extschema@._le_caller();
            SELECT a.o_outcome, a.o_until INTO res
              FROM @extschema@._le_attempt(p_key, p_id, p_ttl, p_value, v_caller,
                       GREATEST(10, ceil(extract(epoch FROM deadline - clock_timestamp()) * 1000))::bigint,
                       p_slots, p_session) a;
            IF res.o_outcome <> 'acquired' THEN
                RAISE SQLSTATE 'LE0RB';
            END IF;
        EXCEPTION WHEN SQLSTATE 'LE0RB' THEN
            NULL;
        END;
        IF res.o_outcome = 'acquired' THEN
            RETURN true;
        END IF;
        IF res.o_outcome = 'ended' THEN
            RETURN false;     -- the session is not live (contract 21)
        END IF;
        t := clock_timestamp();
        IF t >= deadline THEN
            RETURN false;
        END IF;
        wake := t + make_interval(secs => poll_ms / 1000.0);
        IF res.o_outcome = 'held' AND res.o_until < wake THEN
            -- wake just after the holder's expiry (before it, it is live;
            -- of a key of many slots: the earliest tenure's; of a vacant
            -- key under a lock-delay: the delay's end)
            wake := res.o_until + interval '1 millisecond';
        END IF;
        wake := LEAST(wake, deadline);
        PERFORM pg_sleep(GREATEST(extract(epoch FROM wake - t), 0.001)::float8);
        poll_ms := LEAST(poll_ms * 1.5, 100);
    END LOOP;
END
$fn$;

CREATE FUNCTION @extschema@.le_acquire(key text, id text, ttl interval, wait interval,
                                       session_bound boolean DEFAULT false,
                                       value jsonb DEFAULT NULL, slots integer DEFAULT 1)
RETURNS boolean
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_ttl interval;
BEGIN
    PERFORM @extschema@._le_name('key'::text, $1);
    PERFORM @extschema@._le_name('id'::text, $2);
    v_ttl := @extschema@._le_ttl($3, true);
    PERFORM @extschema@._le_wait($4);
    PERFORM @extschema@._le_session_bound($5);
    PERFORM @extschema@._le_value($6);
    PERFORM @extschema@._le_slots($7);
    RETURN @extschema@._le_acquire_wait($1, $2, v_ttl, $4, $6, $7, NULL::uuid);
END
$fn$;

-- Contract 21: sessions. A session is a ttl many keys share, renewed in
-- one row; keys acquired under it live as long as it does.
CREATE FUNCTION @extschema@.le_open_session(id text, ttl interval, session_bound boolean DEFAULT false,
                                            lock_delay interval DEFAULT '0', keep_values boolean DEFAULT false)
RETURNS uuid
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_ttl interval;
    v_lock_delay interval;
BEGIN
    PERFORM @extschema@._le_name('id'::text, $1);
    v_ttl := @extschema@._le_ttl($2, true);
    PERFORM @extschema@._le_session_bound($3);
    v_lock_delay := @extschema@._le_lock_delay($4);
    PERFORM @extschema@._le_keep_values($5);
    RETURN @extschema@._le_open_session($1, v_ttl, v_lock_delay, $5, @extschema@._le_caller());
END
$fn$;

CREATE FUNCTION @extschema@.le_renew_session(session uuid, ttl interval DEFAULT NULL)
RETURNS boolean
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_ttl interval;
BEGIN
    PERFORM @extschema@._le_session_arg($1);
    v_ttl := @extschema@._le_ttl($2, false);
    RETURN @extschema@._le_renew_session($1, v_ttl, @extschema@._le_caller());
END
$fn$;

CREATE FUNCTION @extschema@.le_close_session(session uuid)
RETURNS boolean
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    PERFORM @extschema@._le_session_arg($1);
    RETURN @extschema@._le_close_session($1, @extschema@._le_caller());
END
$fn$;

CREATE FUNCTION @extschema@.le_try_acquire_in(session uuid, key text, value jsonb DEFAULT NULL,
                                              slots integer DEFAULT 1)
RETURNS boolean
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_caller oid;
BEGIN
    PERFORM @extschema@._le_session_arg($1);
    PERFORM @extschema@._le_name('key'::text, $2);
    PERFORM @extschema@._le_value($3);
    PERFORM @extschema@._le_slots($4);
    v_caller := @extschema@._le_caller();
    RETURN (SELECT a.o_outcome = 'acquired'
              FROM @extschema@._le_attempt($2, NULL::text, NULL::interval, $3, v_caller, NULL::bigint, $4, $1) a);
END
$fn$;

CREATE FUNCTION @extschema@.le_acquire_in(session uuid, key text, wait interval, value jsonb DEFAULT NULL,
                                          slots integer DEFAULT 1, priority integer DEFAULT 0)
RETURNS boolean
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    PERFORM @extschema@._le_session_arg($1);
    PERFORM @extschema@._le_name('key'::text, $2);
    PERFORM @extschema@._le_wait($3);
    PERFORM @extschema@._le_value($4);
    PERFORM @extschema@._le_slots($5);
    PERFORM @extschema@._le_priority($6);
    RETURN @extschema@._le_acquire_wait($2, NULL::text, NULL::interval, $3, $4, $5, $1);
END
$fn$;

CREATE FUNCTION @extschema@.le_renew(key text, id text, ttl interval DEFAULT NULL,
                                     term bigint DEFAULT NULL)
RETURNS boolean
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_ttl interval;
BEGIN
    PERFORM @extschema@._le_name('key'::text, $1);
    PERFORM @extschema@._le_name('id'::text, $2);
    v_ttl := @extschema@._le_ttl($3, false);
    FOR n IN 0..4 LOOP   -- past a rival's lost race (_le_again)
        IF n > 0 THEN   -- (IF: an AND's order is not guaranteed)
            EXIT WHEN NOT @extschema@._le_again($1, $2, @extschema@._le_caller(), $4, n);
        END IF;
        IF @extschema@._le_renew($1, $2, v_ttl, @extschema@._le_caller(), $4) THEN
            RETURN true;
        END IF;
    END LOOP;
    RETURN false;
END
$fn$;

CREATE FUNCTION @extschema@.le_release(key text, id text, term bigint DEFAULT NULL)
RETURNS boolean
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    PERFORM @extschema@._le_name('key'::text, $1);
    PERFORM @extschema@._le_name('id'::text, $2);
    FOR n IN 0..4 LOOP   -- past a rival's lost race (_le_again)
        IF n > 0 THEN   -- (IF: an AND's order is not guaranteed)
            EXIT WHEN NOT @extschema@._le_again($1, $2, @extschema@._le_caller(), $3, n);
        END IF;
        IF @extschema@._le_release($1, $2, @extschema@._le_caller(), $3) THEN
            RETURN true;
        END IF;
    END LOOP;
    RETURN false;
END
$fn$;

CREATE FUNCTION @extschema@.le_renew_all(id text)
RETURNS integer
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    PERFORM @extschema@._le_name('id'::text, $1);
    RETURN @extschema@._le_renew_all($1, @extschema@._le_caller());
END
$fn$;

CREATE FUNCTION @extschema@.le_release_all(id text)
RETURNS integer
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    PERFORM @extschema@._le_name('id'::text, $1);
    RETURN @extschema@._le_release_all($1, @extschema@._le_caller());
END
$fn$;

CREATE FUNCTION @extschema@.le_proclaim(key text, id text, value jsonb)
RETURNS boolean
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    PERFORM @extschema@._le_name('key'::text, $1);
    PERFORM @extschema@._le_name('id'::text, $2);
    PERFORM @extschema@._le_value($3);
    FOR n IN 0..4 LOOP   -- past a rival's lost race (_le_again)
        IF n > 0 THEN   -- (IF: an AND's order is not guaranteed)
            EXIT WHEN NOT @extschema@._le_again($1, $2, @extschema@._le_caller(), NULL::bigint, n);
        END IF;
        IF @extschema@._le_proclaim($1, $2, $3, @extschema@._le_caller()) THEN
            RETURN true;
        END IF;
    END LOOP;
    RETURN false;
END
$fn$;

CREATE FUNCTION @extschema@.le_force_release(key text)
RETURNS boolean
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    PERFORM @extschema@._le_name('key'::text, $1);
    RETURN @extschema@._le_force_release($1, @extschema@._le_caller());
END
$fn$;

CREATE FUNCTION @extschema@.le_assert_leader(key text, id text, term bigint DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    PERFORM @extschema@._le_name('key'::text, $1);
    PERFORM @extschema@._le_name('id'::text, $2);
    IF $3 < 0 THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('leaderlock: term must not be negative (got %s)', $3);
    END IF;
    RETURN @extschema@._le_assert_leader($1, $2, $3, @extschema@._le_caller());
END
$fn$;

CREATE FUNCTION @extschema@.le_leader(key text)
RETURNS text
LANGUAGE plpgsql VOLATILE PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $fn$
DECLARE
    v_pro timestamptz;
BEGIN
    PERFORM @extschema@._le_name('key'::text, $1);
    v_pro := @extschema@._le_promoted_at();
    RETURN (SELECT l.holder FROM @extschema@.leaderlock l
             WHERE l.key = $1 AND l.holder IS NOT NULL
               AND CASE WHEN l.session IS NULL THEN GREATEST(l.expires_at, v_pro + l.ttl)
                        ELSE @extschema@._le_session_lasts(l.session, v_pro) END > clock_timestamp());
END
$fn$;

-- Contract 23: reading the history (as the compiled edition's ddl/history.sql).
-- The transitions numbered after position `after` (0: from the first,
-- an error once any was pruned), in position order, at most `max_rows`, for one key (for_key) or the keys
-- starting with `key_prefix` when given. A position already pruned is an
-- error (LE002), not an empty answer: the reader missed transitions.
CREATE FUNCTION @extschema@.le_history(after bigint DEFAULT 0, for_key text DEFAULT NULL,
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
CREATE FUNCTION @extschema@.le_history_position() RETURNS bigint
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN greatest((SELECT max(h.position) FROM @extschema@.leaderlock_history h),
                (SELECT h.pruned_through FROM @extschema@.leaderlock_history_head h), 0::bigint);

CREATE FUNCTION @extschema@.le_lease(key text)
RETURNS @extschema@.leaderlock_lease
LANGUAGE plpgsql VOLATILE PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $fn$
DECLARE
    r record;
    t timestamptz;
    live boolean;
    v_pro timestamptz;
BEGIN
    PERFORM @extschema@._le_name('key'::text, $1);
    v_pro := @extschema@._le_promoted_at();
    -- (contract 21: a key held under a session ends with its session)
    SELECT l.holder, l.term,
           CASE WHEN l.holder IS NULL THEN l.expires_at
                WHEN l.session IS NULL THEN GREATEST(l.expires_at, v_pro + l.ttl)
                ELSE @extschema@._le_session_lasts(l.session, v_pro) END AS expires_at,
           l.value INTO r
      FROM @extschema@.leaderlock l WHERE l.key = $1;
    IF NOT FOUND THEN
        RETURN ROW($1, NULL, NULL, NULL, NULL, NULL)::@extschema@.leaderlock_lease;
    END IF;
    t := clock_timestamp();
    live := r.holder IS NOT NULL AND coalesce(r.expires_at > t, false);
    RETURN ROW($1,
               CASE WHEN live THEN r.holder END,
               r.term,
               r.expires_at,
               CASE WHEN live THEN @extschema@._le_hours(r.expires_at - t) END,
               CASE WHEN live THEN r.value END)::@extschema@.leaderlock_lease;
END
$fn$;

-- Contract 17: the live holders of the key, one leaderlock_lease each, by
-- slot (of a key of one slot: its holder while live, as le_lease shows it;
-- a tenure held under a session with its session's expiry, contract 21).
CREATE FUNCTION @extschema@.le_holders(key text)
RETURNS SETOF @extschema@.leaderlock_lease
LANGUAGE plpgsql VOLATILE PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $fn$
DECLARE
    v_slots integer;
    v_pro timestamptz;
    t timestamptz;
BEGIN
    PERFORM @extschema@._le_name('key'::text, $1);
    SELECT l.slots INTO v_slots FROM @extschema@.leaderlock l WHERE l.key = $1;
    IF NOT coalesce(v_slots > 1, false) THEN
        RETURN QUERY SELECT x.* FROM @extschema@.le_lease($1) x WHERE x.holder IS NOT NULL;
        RETURN;
    END IF;
    v_pro := @extschema@._le_promoted_at();
    t := clock_timestamp();
    RETURN QUERY
        SELECT $1, s.holder, s.term, s.lasts, @extschema@._le_hours(s.lasts - t), s.value
          FROM (SELECT x.slot, x.holder, x.term, x.value,
                       CASE WHEN x.session IS NULL THEN GREATEST(x.expires_at, v_pro + x.ttl)
                            ELSE @extschema@._le_session_lasts(x.session, v_pro) END AS lasts
                  FROM @extschema@.leaderlock_slots x
                 WHERE x.key = $1 AND x.holder IS NOT NULL) s
         WHERE s.lasts > t
         ORDER BY s.slot;
END
$fn$;

CREATE FUNCTION @extschema@.le_worker_running()
RETURNS boolean
LANGUAGE sql VOLATILE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN false;

-- Contract 2.2: the lease clock. Here it is the wall clock: PL/pgSQL reads
-- no monotonic clock, so a step of the server's wall clock moves every
-- lease's end (README, difference 12; le_capabilities says "clock": "wall").
CREATE FUNCTION @extschema@.le_now()
RETURNS timestamptz
LANGUAGE sql VOLATILE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN pg_catalog.clock_timestamp();

-- Contract 14: per-database counters live in the compiled edition's shared
-- memory; here, as there without the preload, there are none.
CREATE FUNCTION @extschema@.le_database_stats()
RETURNS TABLE (datid oid, datname text, acquired bigint, renewed bigint, refused bigint,
               released bigint, expired bigint, since timestamptz)
LANGUAGE sql VOLATILE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$ SELECT NULL::oid, NULL::text, NULL::bigint, NULL::bigint, NULL::bigint,
               NULL::bigint, NULL::bigint, NULL::timestamptz WHERE false $fn$;

CREATE VIEW @extschema@.leaderlock_database_stats AS
SELECT datid, datname, acquired, renewed, refused, released, expired, since
  FROM @extschema@.le_database_stats();

-- Contract 19: what this server offers (see portable/README.md).
CREATE FUNCTION @extschema@.le_capabilities()
RETURNS jsonb
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN jsonb_build_object(
    'edition', 'portable',
    'version', '0.5.0',
    'worker', false,
    'blocking_acquire', 'polling',
    'poll_interval_ms', jsonb_build_array(10, 100),
    'session_bound', false,
    'expire_lapsed', true,
    'database_stats', false,
    'max_ttl_s', (@extschema@._le_setting_us('leaderlock.max_ttl'::text, 86400::bigint, 1::bigint,
                                              2147483647::bigint) / 1000000::numeric)::float8,
    'max_wait_s', (@extschema@._le_setting_us('leaderlock.max_wait'::text, 300::bigint, 0::bigint,
                                               86400::bigint) / 1000000::numeric)::float8,
    'max_slots', 1000,
    'priority', false,    -- contract 18 (candidates and priority) is the compiled edition's only
    'clock', 'wall',      -- contract 2.2: the wall clock, not the compiled edition's monotonic one
    'runs', true,         -- contract 22: le_claim_run, le_renew_run, le_finish_run
    'sessions', true,     -- contract 21: le_open_session, le_try_acquire_in, ...
    'schedules', true,    -- contract 24: le_schedule, le_next_due, ... (settled by le_expire_lapsed)
    'expected_leaders', true,  -- contract 25: le_expect_leader, le_unexpect_leader (checked by le_expire_lapsed)
    'groups', true);      -- contract 26: le_join, le_assignment, le_ack, ... (stepped by le_expire_lapsed and renewals)

-- Contract 19: vacates every lapsed lease and announces each as "expired"
-- ("reason":"ttl"), as the compiled worker does, and ends every lapsed
-- session (contract 21: its keys announced "expired",
-- "reason":"session_expired"); returns how many keys. As the worker, it
-- also applies the runs' retention (contract 22), records the due instants
-- of schedules whose grace ended unclaimed as missed runs (24), checks the
-- keys expected to be led (25) and numbers the history (23). Meant to be
-- scheduled (pg_cron, every second) or called by clients.
CREATE FUNCTION @extschema@.le_expire_lapsed()
RETURNS integer
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RETURN @extschema@._le_expire_lapsed();
END
$fn$;

-- Contract 22: scheduled runs. A run is (job, due instant on the lease
-- clock, le_now()); a claim returns a fencing term from the job's one
-- sequence, or NULL.
CREATE FUNCTION @extschema@.le_claim_run(job text, due timestamptz, id text, ttl interval,
                                         misfire_grace interval DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_ttl interval;
BEGIN
    PERFORM @extschema@._le_name('job'::text, $1);
    PERFORM @extschema@._le_due($2);
    PERFORM @extschema@._le_name('id'::text, $3);
    v_ttl := @extschema@._le_ttl($4, true);
    PERFORM @extschema@._le_misfire_grace($5);
    PERFORM @extschema@._le_not_before_due($2, clock_timestamp());
    RETURN @extschema@._le_claim_run($1, $2, $3, v_ttl, $5, @extschema@._le_caller());
END
$fn$;

CREATE FUNCTION @extschema@.le_renew_run(job text, due timestamptz, id text, ttl interval DEFAULT NULL,
                                         term bigint DEFAULT NULL)
RETURNS boolean
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_ttl interval;
BEGIN
    PERFORM @extschema@._le_name('job'::text, $1);
    PERFORM @extschema@._le_due($2);
    PERFORM @extschema@._le_name('id'::text, $3);
    v_ttl := @extschema@._le_ttl($4, false);
    PERFORM @extschema@._le_term($5, false);
    RETURN @extschema@._le_renew_run($1, $2, $3, v_ttl, @extschema@._le_caller(), $5);
END
$fn$;

CREATE FUNCTION @extschema@.le_finish_run(job text, due timestamptz, id text, term bigint, succeeded boolean,
                                          detail text DEFAULT NULL)
RETURNS boolean
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    PERFORM @extschema@._le_name('job'::text, $1);
    PERFORM @extschema@._le_due($2);
    PERFORM @extschema@._le_name('id'::text, $3);
    PERFORM @extschema@._le_term($4, true);
    PERFORM @extschema@._le_outcome($5);
    PERFORM @extschema@._le_detail($6);
    RETURN @extschema@._le_finish_run($1, $2, $3, $4, $5, $6, @extschema@._le_caller());
END
$fn$;

-- Contract 24: schedules kept in the database (docs/scheduled-runs.md).
-- A job's schedule: every P (its multiples since the Unix epoch) or a cron
-- expression in a time zone, a misfire grace (NULL: the period, or 5
-- minutes with cron), an overlap policy. Its next due instant.
CREATE FUNCTION @extschema@.le_schedule(job text, every interval DEFAULT NULL, cron text DEFAULT NULL,
                                        tz text DEFAULT 'UTC', misfire_grace interval DEFAULT NULL,
                                        overlap text DEFAULT 'allow', backfill integer DEFAULT 0)
RETURNS timestamptz
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    cal record;
BEGIN
    PERFORM @extschema@._le_name('job'::text, $1);
    cal := @extschema@._le_schedule_calendar($2, $3, $4);
    PERFORM @extschema@._le_schedule_grace($5, cal.every_us);
    PERFORM @extschema@._le_overlap($6);
    PERFORM @extschema@._le_backfill($7);
    RETURN @extschema@._le_schedule($1, $2, $3, $4, $5, $6, @extschema@._le_caller(), $7);
END
$fn$;

CREATE FUNCTION @extschema@.le_unschedule(job text)
RETURNS boolean
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    PERFORM @extschema@._le_name('job'::text, $1);
    RETURN @extschema@._le_unschedule($1, @extschema@._le_caller());
END
$fn$;

CREATE FUNCTION @extschema@.le_pause_schedule(job text)
RETURNS boolean
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    PERFORM @extschema@._le_name('job'::text, $1);
    RETURN @extschema@._le_set_paused($1, true, @extschema@._le_caller());
END
$fn$;

CREATE FUNCTION @extschema@.le_resume_schedule(job text)
RETURNS boolean
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    PERFORM @extschema@._le_name('job'::text, $1);
    RETURN @extschema@._le_set_paused($1, false, @extschema@._le_caller());
END
$fn$;

-- Contract 24: the first due instant of job's schedule strictly after
-- `after` (NULL: now, on the lease clock); NULL when it has no schedule or
-- it is paused. What replicas that run a job by its name alone wait for.
CREATE FUNCTION @extschema@.le_next_due(job text, after timestamptz DEFAULT NULL)
RETURNS timestamptz
LANGUAGE plpgsql VOLATILE PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $fn$
DECLARE
    r record;
    cal record;
BEGIN
    PERFORM @extschema@._le_name('job'::text, $1);
    IF $2 IS NOT NULL THEN
        PERFORM @extschema@._le_due($2);
    END IF;
    SELECT s.every, s.cron, s.tz INTO r FROM @extschema@.leaderlock_schedules s
     WHERE s.job = $1 AND NOT s.paused;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    cal := @extschema@._le_calendar(r.every, r.cron, r.tz);
    RETURN @extschema@._le_next_after(cal.every_us, cal.masks, cal.years, r.tz, coalesce($2, clock_timestamp()));
END
$fn$;

-- Contract 24's backfill: the instants of job's schedule that a replica
-- may still run late (recorded missed, among its `backfill` latest missed,
-- never taken up since), oldest first; none without a schedule, while it
-- is paused, with backfill 0, or while a run of a `forbid` job is claimed
-- live (a claim would be refused: replicas would try it every poll).
CREATE FUNCTION @extschema@.le_backfill_due(job text)
RETURNS SETOF timestamptz
LANGUAGE plpgsql VOLATILE PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $fn$
DECLARE
    r record;
BEGIN
    PERFORM @extschema@._le_name('job'::text, $1);
    SELECT s.backfill, s.overlap, s.active_since INTO r FROM @extschema@.leaderlock_schedules s
     WHERE s.job = $1 AND NOT s.paused AND s.backfill > 0;
    IF NOT FOUND OR (r.overlap = 'forbid'
                     AND @extschema@._le_other_run_live($1, '-infinity'::timestamptz, clock_timestamp(),
                                                        @extschema@._le_promoted_at())) THEN
        RETURN;
    END IF;
    RETURN QUERY
        SELECT l.due FROM (SELECT x.due, x.outcome, x.backfilled_at FROM @extschema@.leaderlock_runs x
                            WHERE x.job = $1 AND x.due >= r.active_since
                              AND (x.outcome = 'missed' OR x.backfilled_at IS NOT NULL)
                            ORDER BY x.due DESC LIMIT r.backfill) l
         WHERE l.outcome = 'missed' AND l.backfilled_at IS NULL ORDER BY l.due;
END
$fn$;

-- Contract 24, for the view leaderlock_schedule_status: job's next due
-- instant, and since when it waits for a run: its first due instant after
-- the latest one a claim took, the moment it was made, changed or resumed,
-- and what the runs' retention keeps (a pruned claim is no lateness), once
-- that instant has come (NULL: for none, or paused). No row without a
-- schedule.
CREATE FUNCTION @extschema@.le_schedule_times(job text)
RETURNS TABLE (next_due timestamptz, waiting_since timestamptz)
LANGUAGE plpgsql VOLATILE PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $fn$
DECLARE
    t timestamptz;
    r record;
    cal record;
    v_from timestamptz;
    v_wait timestamptz;
BEGIN
    PERFORM @extschema@._le_name('job'::text, $1);
    t := clock_timestamp();
    SELECT s.every, s.cron, s.tz, s.paused, s.active_since INTO r FROM @extschema@.leaderlock_schedules s
     WHERE s.job = $1;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    cal := @extschema@._le_calendar(r.every, r.cron, r.tz);
    IF cal.why IS NOT NULL THEN
        RETURN;
    END IF;
    IF NOT r.paused THEN
        v_from := GREATEST((SELECT max(x.due) FROM @extschema@.leaderlock_runs x
                             WHERE x.job = $1 AND x.claimed_at IS NOT NULL),
                           r.active_since,
                           t - @extschema@._le_us_interval(@extschema@._le_setting_us(
                               'leaderlock.run_retention'::text, 604800::bigint, 1::bigint, 2147483647::bigint)));
        v_wait := @extschema@._le_next_after(cal.every_us, cal.masks, cal.years, r.tz, v_from);
        next_due := @extschema@._le_next_after(cal.every_us, cal.masks, cal.years, r.tz, t);
        waiting_since := CASE WHEN v_wait <= t THEN v_wait END;
    END IF;
    RETURN NEXT;
END
$fn$;

-- Contract 24: each schedule with its next due instant, since when it
-- waits for a run (its first due instant no claim took yet) and how long
-- that is, its last outcome, and the missed runs kept. Readable by all.
CREATE VIEW @extschema@.leaderlock_schedule_status AS
SELECT s.job, s.every, s.cron, s.tz, s.misfire_grace, s.overlap, s.paused,
       s.owner::regrole AS owner, t.next_due, t.waiting_since,
       CASE WHEN t.waiting_since IS NOT NULL
            THEN c.now - t.waiting_since
            ELSE '0'::interval END AS overdue,
       f.due AS last_finished_due, f.outcome AS last_outcome,
       (SELECT count(*) FROM @extschema@.leaderlock_runs r
         WHERE r.job = s.job AND r.outcome = 'missed') AS missed,
       s.settled_to, s.changed_at
  FROM @extschema@.leaderlock_schedules s
 CROSS JOIN (SELECT @extschema@.le_now() AS now) c
 CROSS JOIN LATERAL @extschema@.le_schedule_times(s.job) t
  LEFT JOIN LATERAL (
       SELECT r.due, r.outcome FROM @extschema@.leaderlock_runs r
        WHERE r.job = s.job AND r.finished_at IS NOT NULL
        ORDER BY r.due DESC LIMIT 1) f ON true;

-- Contract 25: keys expected to be led (docs/scheduled-runs.md). Marks key
-- as expected to have a live holder: each time it stays without one for
-- longer than `within`, le_expire_lapsed (compiled: the worker) records a
-- leaderless interval in the history (start and end) and announces both.
-- Whether the mark changed.
CREATE FUNCTION @extschema@.le_expect_leader(key text, within interval)
RETURNS boolean
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    PERFORM @extschema@._le_name('key'::text, $1);
    PERFORM @extschema@._le_within($2);
    RETURN @extschema@._le_expect_leader($1, $2, @extschema@._le_caller());
END
$fn$;

CREATE FUNCTION @extschema@.le_unexpect_leader(key text)
RETURNS boolean
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    PERFORM @extschema@._le_name('key'::text, $1);
    RETURN @extschema@._le_unexpect_leader($1, @extschema@._le_caller());
END
$fn$;

-- Contract 26: groups. A member joins a group of partitions (le_join: its
-- session), reads its assignment, gives back what is revoked (le_ack),
-- guards its writes (le_assert_partition) and leaves (le_leave).
CREATE FUNCTION @extschema@.le_join("group" text, member text, ttl interval, partitions integer DEFAULT NULL,
                                    drain interval DEFAULT NULL)
RETURNS uuid
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_ttl interval;
    v_drain interval;
BEGIN
    PERFORM @extschema@._le_name('group'::text, $1);
    PERFORM @extschema@._le_name('member'::text, $2);
    v_ttl := @extschema@._le_ttl($3, true);
    PERFORM @extschema@._le_partitions($4);
    v_drain := @extschema@._le_drain($5);
    RETURN @extschema@._le_join($1, $2, v_ttl, $4, v_drain, @extschema@._le_caller());
END
$fn$;

CREATE FUNCTION @extschema@.le_leave("group" text, member text)
RETURNS boolean
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    PERFORM @extschema@._le_name('group'::text, $1);
    PERFORM @extschema@._le_name('member'::text, $2);
    RETURN @extschema@._le_leave($1, $2, @extschema@._le_caller());
END
$fn$;

CREATE FUNCTION @extschema@.le_ack("group" text, member text, partition integer, term bigint)
RETURNS boolean
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    PERFORM @extschema@._le_name('group'::text, $1);
    PERFORM @extschema@._le_name('member'::text, $2);
    PERFORM @extschema@._le_partition($3);
    PERFORM @extschema@._le_term($4, true);
    RETURN @extschema@._le_ack($1, $2, $3, $4, @extschema@._le_caller());
END
$fn$;

-- The member's partitions as the server holds them, while its session is
-- the one they were granted to: owned, or revoked (drain, le_ack, by until).
CREATE FUNCTION @extschema@.le_assignment("group" text, member text)
RETURNS TABLE (partition integer, term bigint, state text, until timestamptz)
LANGUAGE plpgsql STABLE PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $fn$
BEGIN
    PERFORM @extschema@._le_name('group'::text, $1);
    PERFORM @extschema@._le_name('member'::text, $2);
    RETURN QUERY
    SELECT p.partition, p.term, CASE WHEN p.revoke_until IS NULL THEN 'owned' ELSE 'revoked' END::text,
           p.revoke_until
      FROM @extschema@.leaderlock_partitions p
      JOIN @extschema@.leaderlock_members m ON m.grp = p.grp AND m.member = p.member AND m.session = p.session
     WHERE p.grp = $1 AND p.member = $2
     ORDER BY p.partition;
END
$fn$;

CREATE FUNCTION @extschema@.le_assert_partition("group" text, partition integer, member text,
                                                term bigint DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    PERFORM @extschema@._le_name('group'::text, $1);
    PERFORM @extschema@._le_partition($2);
    PERFORM @extschema@._le_name('member'::text, $3);
    PERFORM @extschema@._le_term($4, false);
    RETURN @extschema@._le_assert_partition($1, $2, $3, $4, @extschema@._le_caller());
END
$fn$;

-- ---------------------------------------------------------------------------
-- Privileges (contract 7): readable by all, written only through the
-- functions above.
-- ---------------------------------------------------------------------------
GRANT USAGE ON SCHEMA @extschema@ TO PUBLIC;   -- every role may call the API (CREATE stays the admin's)
REVOKE ALL ON @extschema@.leaderlock FROM PUBLIC;
GRANT SELECT ON @extschema@.leaderlock TO PUBLIC;
REVOKE ALL ON @extschema@.leaderlock_slots FROM PUBLIC;
GRANT SELECT ON @extschema@.leaderlock_slots TO PUBLIC;
REVOKE ALL ON @extschema@.leaderlock_jobs FROM PUBLIC;
GRANT SELECT ON @extschema@.leaderlock_jobs TO PUBLIC;
REVOKE ALL ON @extschema@.leaderlock_runs FROM PUBLIC;
GRANT SELECT ON @extschema@.leaderlock_runs TO PUBLIC;
REVOKE ALL ON @extschema@.leaderlock_sessions FROM PUBLIC;
GRANT SELECT ON @extschema@.leaderlock_sessions TO PUBLIC;
REVOKE ALL ON @extschema@.leaderlock_schedules FROM PUBLIC;
GRANT SELECT ON @extschema@.leaderlock_schedules TO PUBLIC;
REVOKE ALL ON @extschema@.leaderlock_schedule_status FROM PUBLIC;
GRANT SELECT ON @extschema@.leaderlock_schedule_status TO PUBLIC;
REVOKE ALL ON @extschema@.leaderlock_expected FROM PUBLIC;
GRANT SELECT ON @extschema@.leaderlock_expected TO PUBLIC;
REVOKE ALL ON @extschema@.leaderlock_status FROM PUBLIC;
GRANT SELECT ON @extschema@.leaderlock_status TO PUBLIC;
REVOKE ALL ON @extschema@.leaderlock_stats FROM PUBLIC;
GRANT SELECT ON @extschema@.leaderlock_stats TO PUBLIC;
REVOKE ALL ON @extschema@.leaderlock_database_stats FROM PUBLIC;
GRANT SELECT ON @extschema@.leaderlock_database_stats TO PUBLIC;
REVOKE ALL ON @extschema@.leaderlock_failover FROM PUBLIC;
GRANT SELECT ON @extschema@.leaderlock_failover TO PUBLIC;
REVOKE ALL ON @extschema@.leaderlock_history FROM PUBLIC;
GRANT SELECT ON @extschema@.leaderlock_history TO PUBLIC;
REVOKE ALL ON @extschema@.leaderlock_history_pending FROM PUBLIC;
GRANT SELECT ON @extschema@.leaderlock_history_pending TO PUBLIC;
REVOKE ALL ON @extschema@.leaderlock_history_head FROM PUBLIC;
GRANT SELECT ON @extschema@.leaderlock_history_head TO PUBLIC;
REVOKE ALL ON @extschema@.leaderlock_groups FROM PUBLIC;
GRANT SELECT ON @extschema@.leaderlock_groups TO PUBLIC;
REVOKE ALL ON @extschema@.leaderlock_members FROM PUBLIC;
GRANT SELECT ON @extschema@.leaderlock_members TO PUBLIC;
REVOKE ALL ON @extschema@.leaderlock_partitions FROM PUBLIC;
GRANT SELECT ON @extschema@.leaderlock_partitions TO PUBLIC;

-- Contract 26: every partition of every group with its owner, term and
-- state (owned; revoked, with until; free) and whether the session it was
-- granted under is live; partitions above a group's count only while
-- someone still owns them. Readable by all.
CREATE VIEW @extschema@.leaderlock_group_status AS
SELECT p.grp AS "group", p.partition, p.member, p.term,
       CASE WHEN p.member IS NULL THEN 'free'
            WHEN p.revoke_until IS NULL THEN 'owned'
            ELSE 'revoked' END AS state,
       p.revoke_until AS until,
       COALESCE(s.expires_at OPERATOR(pg_catalog.>) c.now, false) AS live,
       p.changed_at
  FROM @extschema@.leaderlock_partitions p
  JOIN @extschema@.leaderlock_groups g ON g.grp OPERATOR(pg_catalog.=) p.grp
 CROSS JOIN (SELECT @extschema@.le_now() AS now) c
  LEFT JOIN @extschema@.leaderlock_sessions s ON s.session OPERATOR(pg_catalog.=) p.session
 WHERE p.partition OPERATOR(pg_catalog.<=) g.partitions OR p.member IS NOT NULL;
REVOKE ALL ON @extschema@.leaderlock_group_status FROM PUBLIC;
GRANT SELECT ON @extschema@.leaderlock_group_status TO PUBLIC;
REVOKE EXECUTE ON FUNCTION @extschema@._le_announce_partition(text, text, integer, text, bigint, timestamptz,
                                                              timestamptz) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION @extschema@._le_group_grant(text, integer, text, uuid, bigint, bigint, timestamptz)
    FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION @extschema@._le_group_settle(text, integer, interval, timestamptz) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION @extschema@._le_groups_due(timestamptz) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION @extschema@._le_group_step_due(text, integer, interval, boolean, timestamptz) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION @extschema@._le_may_make_group(oid) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION @extschema@._le_group_renew(uuid, interval, oid, timestamptz) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION @extschema@._le_record(timestamptz, text, text, text, bigint, text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION @extschema@._le_number_history() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION @extschema@._le_prune_runs() FROM PUBLIC;
REVOKE ALL ON @extschema@._le_secret FROM PUBLIC;
REVOKE ALL ON @extschema@._le_caller_key FROM PUBLIC;
GRANT SELECT ON @extschema@._le_caller_key TO PUBLIC;   -- each role sees its own key only
REVOKE ALL ON SEQUENCE @extschema@._le_promo_tl, @extschema@._le_promo_at FROM PUBLIC;
GRANT SELECT ON SEQUENCE @extschema@._le_promo_tl, @extschema@._le_promo_at TO PUBLIC;
REVOKE EXECUTE ON FUNCTION @extschema@._le_durable() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION @extschema@._le_failover_record() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION @extschema@._le_extend(text, text, timestamptz, interval, oid, bigint, boolean, uuid)
    FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION @extschema@._le_lock_own(text, text, oid) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION @extschema@._le_extend_slot(text, text, timestamptz, interval, oid, bigint, boolean, uuid)
    FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION @extschema@._le_lock_own_slot(text, text, oid) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION @extschema@._le_end_stale_tenures(text, integer) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION @extschema@._le_attempt_slots(text, text, interval, jsonb, oid, bigint, integer,
                                                         integer, boolean, timestamptz, uuid, timestamptz)
    FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION @extschema@._le_extend_sessions(uuid, text, timestamptz, interval, oid, timestamptz)
    FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION @extschema@._le_end_session(uuid, boolean, timestamptz, text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION @extschema@._le_end_lapsed_key(text, timestamptz) FROM PUBLIC;
-- (contracts 22, 24 and 25: called by the SECURITY DEFINER functions only)
REVOKE EXECUTE ON FUNCTION @extschema@._le_may_make_job(oid) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION @extschema@._le_make_job(text, oid) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION @extschema@._le_lock_claimable(text, timestamptz, timestamptz, timestamptz, timestamptz)
    FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION @extschema@._le_record_missed(text, timestamptz, timestamptz, text, bigint, boolean)
    FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION @extschema@._le_settle_job(text, numeric, bigint[], integer[], text, numeric, timestamptz,
                                                      timestamptz, text, timestamptz, timestamptz, timestamptz,
                                                      timestamptz, integer) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION @extschema@._le_settle(timestamptz) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION @extschema@._le_before_change(text, boolean, interval, text, text, interval, timestamptz,
                                                         text, timestamptz, timestamptz) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION @extschema@._le_check_expected(timestamptz) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION @extschema@._le_mark_member(text, oid) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION @extschema@._le_announce_leaderless(text, timestamptz, timestamptz, numeric, timestamptz)
    FROM PUBLIC;

    $ddl$;

    EXECUTE pg_catalog.replace(ddl, '@' || 'extschema@', target);

    -- The secret of the caller keys (N1): 244 random bits (pg_strong_random).
    EXECUTE pg_catalog.format(
        'INSERT INTO %s._le_secret (secret) VALUES (pg_catalog.replace(pg_catalog.gen_random_uuid()::text '
        'OPERATOR(pg_catalog.||) pg_catalog.gen_random_uuid()::text, ''-'', ''''))', target);

    -- The timeline of now (not of the last checkpoint).
    EXECUTE pg_catalog.format(
        'INSERT INTO %s.leaderlock_failover (timeline) VALUES (%s._le_timeline())', target, target);

    -- Under CREATE EXTENSION the table is a member of the extension: its
    -- rows must be part of a dump (terms survive pg_dump/restore). A table
    -- made by psql -f is an ordinary table and dumped anyway.
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_depend d
                WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass
                  AND d.objid = pg_catalog.to_regclass(target || '.leaderlock')
                  AND d.deptype = 'e') THEN
        PERFORM pg_catalog.pg_extension_config_dump(
            pg_catalog.to_regclass(target || '.leaderlock'), '');
        PERFORM pg_catalog.pg_extension_config_dump(
            pg_catalog.to_regclass(target || '.leaderlock_slots'), '');
        PERFORM pg_catalog.pg_extension_config_dump(
            pg_catalog.to_regclass(target || '.leaderlock_jobs'), '');
        PERFORM pg_catalog.pg_extension_config_dump(
            pg_catalog.to_regclass(target || '.leaderlock_runs'), '');
        PERFORM pg_catalog.pg_extension_config_dump(
            pg_catalog.to_regclass(target || '.leaderlock_sessions'), '');
        PERFORM pg_catalog.pg_extension_config_dump(
            pg_catalog.to_regclass(target || '.leaderlock_schedules'), '');
        PERFORM pg_catalog.pg_extension_config_dump(
            pg_catalog.to_regclass(target || '.leaderlock_expected'), '');
        PERFORM pg_catalog.pg_extension_config_dump(
            pg_catalog.to_regclass(target || '.leaderlock_groups'), '');
        PERFORM pg_catalog.pg_extension_config_dump(
            pg_catalog.to_regclass(target || '.leaderlock_members'), '');
        PERFORM pg_catalog.pg_extension_config_dump(
            pg_catalog.to_regclass(target || '.leaderlock_partitions'), '');
        PERFORM pg_catalog.pg_extension_config_dump(
            pg_catalog.to_regclass(target || '.leaderlock_history'), '');
        PERFORM pg_catalog.pg_extension_config_dump(
            pg_catalog.to_regclass(target || '.leaderlock_history_pending'), '');
        PERFORM pg_catalog.pg_extension_config_dump(
            pg_catalog.to_regclass(target || '.leaderlock_history_pending_seq_seq'), '');
    END IF;
    PERFORM pg_catalog.set_config('search_path', old_path, true);
END
$leaderlock_install$;
