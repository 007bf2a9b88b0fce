-- leaderlock migration, step 1 of 3 (see portable/README.md, "Moving
-- between editions"): keeps every lease, term and counter in temporary
-- tables until the end of the transaction. Run inside BEGIN ... COMMIT,
-- with search_path naming leaderlock's schema, as the table's owner (or a
-- superuser). Works on either edition.
LOCK TABLE leaderlock IN ACCESS EXCLUSIVE MODE;   -- no lease changes until COMMIT
CREATE TEMP TABLE leaderlock_carry ON COMMIT DROP AS
SELECT key, holder, term, acquired_at, renewed_at, expires_at, ttl, recheck_at, value,
       session_pid, session_start, owner, tenures, releases, expiries, changed_at
  FROM leaderlock;
CREATE TEMP TABLE leaderlock_carry_failover ON COMMIT DROP AS
SELECT timeline, changed_at FROM leaderlock_failover;
