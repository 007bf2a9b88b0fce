-- leaderlock migration, step 1 of 3 (see portable/README.md, "Moving
-- between editions"): keeps every lease, term and counter in temporary
-- tables until the end of the transaction. Run inside BEGIN ... COMMIT,
-- with search_path naming leaderlock's schema, as the table's owner (or a
-- superuser). Works on either edition.
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
       l.expiries, l.changed_at
  FROM leaderlock l;
CREATE TEMP TABLE leaderlock_carry_failover ON COMMIT DROP AS
SELECT timeline, changed_at FROM leaderlock_failover;
