-- leaderlock migration, step 3 of 3: puts back what save.sql kept, into
-- the edition just installed (still inside the same transaction), as the
-- new table's owner. The timeline on which held leases last outlasted a
-- failover comes along too, so a promotion not yet handled is handled by
-- the new edition.
INSERT INTO leaderlock
       (key, holder, term, acquired_at, renewed_at, expires_at, ttl, recheck_at, value,
        session_pid, session_start, owner, tenures, releases, expiries, changed_at, slots,
        session, delayed_until)
SELECT key, holder, term, acquired_at, renewed_at, expires_at, ttl, recheck_at, value,
       session_pid, session_start, owner, tenures, releases, expiries, changed_at, slots,
       session, delayed_until
  FROM pg_temp.leaderlock_carry;
INSERT INTO leaderlock_slots
       (key, slot, holder, term, acquired_at, renewed_at, expires_at, ttl, recheck_at, value,
        owner, releases, expiries, changed_at, session, delayed_until)
SELECT key, slot, holder, term, acquired_at, renewed_at, expires_at, ttl, recheck_at, value,
       owner, releases, expiries, changed_at, session, delayed_until
  FROM pg_temp.leaderlock_carry_slots;
INSERT INTO leaderlock_sessions
       (session, id, owner, ttl, opened_at, renewed_at, expires_at, recheck_at, lock_delay, keep_values,
        session_pid, session_start)
SELECT session, id, owner, ttl, opened_at, renewed_at, expires_at, recheck_at, lock_delay, keep_values,
       session_pid, session_start
  FROM pg_temp.leaderlock_carry_sessions;
-- (the row of job '' too: it keeps the highest term of the jobs forgotten,
-- above any an edition made at its install)
INSERT INTO leaderlock_jobs AS j (job, term, pruned_before, owner)
SELECT job, term, pruned_before, owner FROM pg_temp.leaderlock_carry_jobs
    ON CONFLICT (job) DO UPDATE SET term = GREATEST(j.term, excluded.term);
INSERT INTO leaderlock_runs
       (job, due, holder, term, claimed_at, expires_at, ttl, finished_at, outcome, detail, attempts, owner,
        backfilled_at)
SELECT job, due, holder, term, claimed_at, expires_at, ttl, finished_at, outcome, detail, attempts, owner,
       backfilled_at
  FROM pg_temp.leaderlock_carry_runs;
INSERT INTO leaderlock_schedules
       (job, every, cron, tz, misfire_grace, overlap, paused, active_since, settled_to, next_check, owner,
        changed_at, backfill)
SELECT job, every, cron, tz, misfire_grace, overlap, paused, active_since, settled_to, next_check, owner,
       changed_at, backfill
  FROM pg_temp.leaderlock_carry_schedules;
INSERT INTO leaderlock_expected
       (key, within, owner, marked_at, leaderless_since, intervals, leaderless_total, next_check)
SELECT key, within, owner, marked_at, leaderless_since, intervals, leaderless_total, next_check
  FROM pg_temp.leaderlock_carry_expected;
INSERT INTO leaderlock_groups (grp, partitions, drain, owner, changed_at, check_at, restep)
SELECT grp, partitions, drain, owner, changed_at, check_at, coalesce(restep, true)
  FROM pg_temp.leaderlock_carry_groups;
INSERT INTO leaderlock_members (grp, member, session, joined_at)
SELECT grp, member, session, joined_at FROM pg_temp.leaderlock_carry_members;
INSERT INTO leaderlock_partitions
       (grp, partition, member, session, term, revoke_until, next_member, acked, changed_at)
SELECT grp, partition, member, session, term, revoke_until, next_member, acked, changed_at
  FROM pg_temp.leaderlock_carry_partitions;
INSERT INTO leaderlock_history ("position", at, event, key, holder, term, role, payload)
SELECT "position", at, event, key, holder, term, role, payload
  FROM pg_temp.leaderlock_carry_history WHERE "position" IS NOT NULL;
-- Rows not numbered yet are numbered by the new edition, in their order.
INSERT INTO leaderlock_history_pending (at, event, key, holder, term, role, payload)
SELECT at, event, key, holder, term, role, payload::text
  FROM pg_temp.leaderlock_carry_history WHERE "position" IS NULL ORDER BY seq;
UPDATE leaderlock_history_head h
   SET pruned_through = c.pruned_through,
       kept = (SELECT count(*) FROM leaderlock_history)
  FROM pg_temp.leaderlock_carry_history_head c;
UPDATE leaderlock_failover f
   SET timeline = c.timeline, changed_at = c.changed_at
  FROM pg_temp.leaderlock_carry_failover c
 WHERE f.one_row;
SELECT count(*) AS leases_carried_over, max(term) AS highest_term,
       (SELECT count(*) FROM leaderlock_slots) AS slots_carried_over,
       (SELECT count(*) FROM leaderlock_sessions) AS sessions_carried_over,
       (SELECT count(*) FROM leaderlock_runs) AS runs_carried_over,
       (SELECT count(*) FROM leaderlock_schedules) AS schedules_carried_over,
       (SELECT count(*) FROM leaderlock_expected) AS marks_carried_over,
       (SELECT count(*) FROM leaderlock_groups) AS groups_carried_over FROM leaderlock;
