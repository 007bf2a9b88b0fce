-- leaderlock migration, step 1 of 3 (see portable/README.md, "Moving
-- between editions"): keeps every lease, term and counter (the tenures of
-- keys of many slots included), every session (contract 21), every
-- scheduled run and job's term, every schedule (contract 24), every
-- key expected to be led (contract 25) and every group (contract 26), in temporary tables until the end
-- of the transaction. Run inside
-- BEGIN ... COMMIT, with search_path naming leaderlock's schema, as the
-- table's owner (or a superuser). Works on either edition.
-- No lease changes until COMMIT. Review round 2, N8: the tables in the
-- order the functions take them (leaderlock_failover before leaderlock; a
-- renewal waiting for leaderlock while holding leaderlock_failover
-- deadlocked the move's DROP), and never waiting more than 2 s for a lock
-- in the whole move: a reader's open transaction makes the move fail
-- (55P03, nothing changed; run it again) instead of stalling every call
-- queued behind it.
SET LOCAL lock_timeout = '2s';
LOCK TABLE leaderlock_failover, leaderlock IN ACCESS EXCLUSIVE MODE;
CREATE TEMP TABLE leaderlock_carry ON COMMIT DROP AS
SELECT l.key, l.holder, l.term, l.acquired_at, l.renewed_at,
       -- a lease held across a promotion lasts at least until the promotion
       -- + its ttl (the portable edition computes that when it reads; the
       -- row carried over says it outright; a no-op for the compiled edition)
       CASE WHEN l.holder IS NULL THEN l.expires_at
            ELSE GREATEST(l.expires_at, (SELECT f.changed_at FROM leaderlock_failover f) + l.ttl) END
         AS expires_at,
       l.ttl, l.recheck_at, l.value, l.session_pid, l.session_start, l.owner, l.tenures, l.releases,
       l.expiries, l.changed_at, 1 AS slots, NULL::uuid AS session, NULL::timestamptz AS delayed_until
  FROM leaderlock l;
CREATE TEMP TABLE leaderlock_carry_failover ON COMMIT DROP AS
SELECT timeline, changed_at FROM leaderlock_failover;
-- Contract 17 (0.5.0): each key's slots and the tenures of keys of many
-- slots, every row of leaderlock_slots (vacant and lapsed ones too: their
-- terms and counters). Before 0.5.0 neither exists: every key admits one
-- holder and there is nothing more to carry.
CREATE TEMP TABLE leaderlock_carry_slots (
    key text, slot integer, holder text, term bigint, acquired_at timestamptz, renewed_at timestamptz,
    expires_at timestamptz, ttl interval, recheck_at timestamptz, value jsonb, owner oid,
    releases bigint, expiries bigint, changed_at timestamptz, session uuid, delayed_until timestamptz
) ON COMMIT DROP;
-- Contract 21 (0.5.0): sessions, and each key's and tenure's session and
-- lock-delay. Before, neither exists (nor, before keys of many slots were
-- acquired under sessions, the tenures' columns).
CREATE TEMP TABLE leaderlock_carry_sessions (
    session uuid, id text, owner oid, ttl interval, opened_at timestamptz, renewed_at timestamptz,
    expires_at timestamptz, recheck_at timestamptz, lock_delay interval, keep_values boolean,
    session_pid integer, session_start timestamptz
) ON COMMIT DROP;
-- Contract 22 (0.5.0): scheduled runs and each job's last term, the row
-- of job '' (the highest term of the jobs forgotten) and the role that
-- made each job included. Before, neither exists (nor, before the bound
-- per role, a job's owner).
CREATE TEMP TABLE leaderlock_carry_jobs (job text, term bigint, pruned_before timestamptz, owner oid)
    ON COMMIT DROP;
CREATE TEMP TABLE leaderlock_carry_runs (
    job text, due timestamptz, holder text, term bigint, claimed_at timestamptz, expires_at timestamptz,
    ttl interval, finished_at timestamptz, outcome text, detail text, attempts integer, owner oid,
    backfilled_at timestamptz
) ON COMMIT DROP;
-- Contract 24 (0.5.0): schedules kept in the database, as they are (how
-- far each was settled and when it is looked at next included); contract
-- 25: the keys expected to be led, their open intervals and counts. Before,
-- neither exists.
CREATE TEMP TABLE leaderlock_carry_schedules (
    job text, every interval, cron text, tz text, misfire_grace interval, overlap text, paused boolean,
    active_since timestamptz, settled_to timestamptz, next_check timestamptz, owner oid, changed_at timestamptz,
    backfill integer NOT NULL DEFAULT 0
) ON COMMIT DROP;
CREATE TEMP TABLE leaderlock_carry_expected (
    key text, within interval, owner oid, marked_at timestamptz, leaderless_since timestamptz, intervals bigint,
    leaderless_total interval, next_check timestamptz
) ON COMMIT DROP;
-- Contract 26 (0.5.0): groups, their members and partitions, as they are
-- (terms, revocations and the next step's time included). Before, none.
CREATE TEMP TABLE leaderlock_carry_groups (
    grp text, partitions integer, drain interval, owner oid, changed_at timestamptz, check_at timestamptz,
    restep boolean
) ON COMMIT DROP;
CREATE TEMP TABLE leaderlock_carry_members (grp text, member text, session uuid, joined_at timestamptz)
    ON COMMIT DROP;
CREATE TEMP TABLE leaderlock_carry_partitions (
    grp text, partition integer, member text, session uuid, term bigint, revoke_until timestamptz,
    next_member text, acked boolean, changed_at timestamptz
) ON COMMIT DROP;
-- Contract 23 (0.5.0): the history, positions and all (a reader resuming
-- from a position read before the move must find it after), and how far
-- the retention deleted. Before, it does not exist.
CREATE TEMP TABLE leaderlock_carry_history (
    "position" bigint, at timestamptz, event text, key text, holder text, term bigint, role oid,
    payload jsonb, seq bigint  -- position NULL: not numbered yet, seq its order of recording
) ON COMMIT DROP;
CREATE TEMP TABLE leaderlock_carry_history_head (pruned_through bigint) ON COMMIT DROP;
DO $save$
BEGIN
    IF pg_catalog.to_regclass(pg_catalog.quote_ident(pg_catalog.current_schema()) || '.leaderlock_slots')
       IS NOT NULL THEN
        -- after leaderlock, as the functions take them
        LOCK TABLE leaderlock_slots IN ACCESS EXCLUSIVE MODE;
        UPDATE pg_temp.leaderlock_carry c SET slots = l.slots FROM leaderlock l WHERE l.key = c.key;
        INSERT INTO pg_temp.leaderlock_carry_slots
        SELECT s.key, s.slot, s.holder, s.term, s.acquired_at, s.renewed_at,
               CASE WHEN s.holder IS NULL THEN s.expires_at
                    ELSE GREATEST(s.expires_at, (SELECT f.changed_at FROM leaderlock_failover f) + s.ttl) END,
               s.ttl, s.recheck_at, s.value, s.owner, s.releases, s.expiries, s.changed_at
          FROM leaderlock_slots s;
    END IF;
    IF pg_catalog.to_regclass(pg_catalog.quote_ident(pg_catalog.current_schema()) || '.leaderlock_groups')
       IS NOT NULL THEN
        -- before sessions, as le_join takes them
        LOCK TABLE leaderlock_groups, leaderlock_members, leaderlock_partitions IN ACCESS EXCLUSIVE MODE;
        INSERT INTO pg_temp.leaderlock_carry_groups (grp, partitions, drain, owner, changed_at, check_at)
        SELECT g.grp, g.partitions, g.drain, g.owner, g.changed_at, g.check_at FROM leaderlock_groups g;
        INSERT INTO pg_temp.leaderlock_carry_members
        SELECT m.grp, m.member, m.session, m.joined_at FROM leaderlock_members m;
        INSERT INTO pg_temp.leaderlock_carry_partitions
               (grp, partition, member, session, term, revoke_until, acked, changed_at)
        SELECT p.grp, p.partition, p.member, p.session, p.term, p.revoke_until, p.acked, p.changed_at
          FROM leaderlock_partitions p;
        -- (where the installed version has them: without, the first step
        -- after the move looks at every partition, and an ack steps)
        IF EXISTS (SELECT FROM pg_catalog.pg_attribute a
                    WHERE a.attrelid = pg_catalog.to_regclass(pg_catalog.quote_ident(pg_catalog.current_schema())
                                                              || '.leaderlock_groups')
                      AND a.attname = 'restep' AND NOT a.attisdropped) THEN
            UPDATE pg_temp.leaderlock_carry_groups c SET restep = g.restep FROM leaderlock_groups g WHERE g.grp = c.grp;
        END IF;
        IF EXISTS (SELECT FROM pg_catalog.pg_attribute a
                    WHERE a.attrelid = pg_catalog.to_regclass(pg_catalog.quote_ident(pg_catalog.current_schema())
                                                              || '.leaderlock_partitions')
                      AND a.attname = 'next_member' AND NOT a.attisdropped) THEN
            UPDATE pg_temp.leaderlock_carry_partitions c SET next_member = p.next_member
              FROM leaderlock_partitions p WHERE p.grp = c.grp AND p.partition = c.partition;
        END IF;
    END IF;
    IF pg_catalog.to_regclass(pg_catalog.quote_ident(pg_catalog.current_schema()) || '.leaderlock_sessions')
       IS NOT NULL THEN
        -- after leaderlock and leaderlock_slots, as le_renew_all takes them
        LOCK TABLE leaderlock_sessions IN ACCESS EXCLUSIVE MODE;
        -- a key held under a session keeps expires_at infinity: its
        -- session has the end (a session held across a promotion, as a
        -- lease above)
        UPDATE pg_temp.leaderlock_carry c SET session = l.session, delayed_until = l.delayed_until
          FROM leaderlock l WHERE l.key = c.key;
        IF EXISTS (SELECT FROM pg_catalog.pg_attribute a
                    WHERE a.attrelid = pg_catalog.to_regclass(pg_catalog.quote_ident(pg_catalog.current_schema())
                                                              || '.leaderlock_slots')
                      AND a.attname = 'session' AND NOT a.attisdropped) THEN
            UPDATE pg_temp.leaderlock_carry_slots c SET session = s.session, delayed_until = s.delayed_until
              FROM leaderlock_slots s WHERE s.key = c.key AND s.slot = c.slot;
        END IF;
        INSERT INTO pg_temp.leaderlock_carry_sessions
        SELECT x.session, x.id, x.owner, x.ttl, x.opened_at, x.renewed_at,
               GREATEST(x.expires_at, (SELECT f.changed_at FROM leaderlock_failover f) + x.ttl),
               x.recheck_at, x.lock_delay, x.keep_values, x.session_pid, x.session_start
          FROM leaderlock_sessions x;
    END IF;
    IF pg_catalog.to_regclass(pg_catalog.quote_ident(pg_catalog.current_schema()) || '.leaderlock_schedules')
       IS NOT NULL THEN
        -- before jobs and runs, as le_schedule, le_claim_run and the
        -- settling take them
        LOCK TABLE leaderlock_schedules IN ACCESS EXCLUSIVE MODE;
        INSERT INTO pg_temp.leaderlock_carry_schedules
        SELECT x.job, x.every, x.cron, x.tz, x.misfire_grace, x.overlap, x.paused, x.active_since, x.settled_to,
               x.next_check, x.owner, x.changed_at, x.backfill
          FROM leaderlock_schedules x;
    END IF;
    IF pg_catalog.to_regclass(pg_catalog.quote_ident(pg_catalog.current_schema()) || '.leaderlock_runs')
       IS NOT NULL THEN
        -- after the others, jobs before runs, as le_claim_run takes them
        LOCK TABLE leaderlock_jobs, leaderlock_runs IN ACCESS EXCLUSIVE MODE;
        INSERT INTO pg_temp.leaderlock_carry_jobs SELECT j.job, j.term, j.pruned_before FROM leaderlock_jobs j;
        IF EXISTS (SELECT FROM pg_catalog.pg_attribute a
                    WHERE a.attrelid = pg_catalog.to_regclass(pg_catalog.quote_ident(pg_catalog.current_schema())
                                                              || '.leaderlock_jobs')
                      AND a.attname = 'owner' AND NOT a.attisdropped) THEN
            UPDATE pg_temp.leaderlock_carry_jobs c SET owner = j.owner FROM leaderlock_jobs j WHERE j.job = c.job;
        END IF;
        -- a claim held across a promotion, as a lease above
        INSERT INTO pg_temp.leaderlock_carry_runs
        SELECT r.job, r.due, r.holder, r.term, r.claimed_at,
               CASE WHEN r.holder IS NULL OR r.finished_at IS NOT NULL THEN r.expires_at
                    ELSE GREATEST(r.expires_at, (SELECT f.changed_at FROM leaderlock_failover f) + r.ttl) END,
               r.ttl, r.finished_at, r.outcome, r.detail, r.attempts, r.owner
          FROM leaderlock_runs r;
        -- (contract 24's backfill: the runs taken up again, from 0.5.0 on)
        IF EXISTS (SELECT FROM pg_catalog.pg_attribute a
                    WHERE a.attrelid = pg_catalog.to_regclass(pg_catalog.quote_ident(pg_catalog.current_schema())
                                                              || '.leaderlock_runs')
                      AND a.attname = 'backfilled_at' AND NOT a.attisdropped) THEN
            UPDATE pg_temp.leaderlock_carry_runs c SET backfilled_at = r.backfilled_at
              FROM leaderlock_runs r WHERE r.job = c.job AND r.due = c.due AND r.backfilled_at IS NOT NULL;
        END IF;
    END IF;
    IF pg_catalog.to_regclass(pg_catalog.quote_ident(pg_catalog.current_schema()) || '.leaderlock_expected')
       IS NOT NULL THEN
        -- after leaderlock (le_expect_leader reads the key's row first)
        LOCK TABLE leaderlock_expected IN ACCESS EXCLUSIVE MODE;
        INSERT INTO pg_temp.leaderlock_carry_expected
        SELECT e.key, e.within, e.owner, e.marked_at, e.leaderless_since, e.intervals, e.leaderless_total,
               e.next_check
          FROM leaderlock_expected e;
    END IF;
    IF pg_catalog.to_regclass(pg_catalog.quote_ident(pg_catalog.current_schema()) || '.leaderlock_history')
       IS NOT NULL THEN
        -- last: only the numbering takes them, under the head's lock
        LOCK TABLE leaderlock_history_head, leaderlock_history, leaderlock_history_pending
            IN ACCESS EXCLUSIVE MODE;
        INSERT INTO pg_temp.leaderlock_carry_history
        SELECT h.position, h.at, h.event, h.key, h.holder, h.term, h.role, h.payload, NULL
          FROM leaderlock_history h;
        INSERT INTO pg_temp.leaderlock_carry_history
        SELECT NULL, x.at, x.event, x.key, x.holder, x.term, x.role, x.payload::pg_catalog.jsonb, x.seq
          FROM leaderlock_history_pending x;
        INSERT INTO pg_temp.leaderlock_carry_history_head SELECT pruned_through FROM leaderlock_history_head;
    END IF;
END
$save$;
