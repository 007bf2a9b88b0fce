//! Statements of the failover step (contract 8.2): the timeline recorded
//! in `leaderlock_failover`, and every held lease, tenure, claim and
//! session made to outlast a promotion.

use leaderlock_protocol::expiry;

statements! {
    /// Every held tenure of a many-slot key lasts at least until `$1` + its
    /// ttl, as `OUTLAST_FAILOVER` does for the others.
    OUTLAST_FAILOVER_SLOTS = concat!("UPDATE @extschema@.leaderlock_slots s \
            SET expires_at = ", expiry!("$1", "s.ttl"), ", recheck_at = ", expiry!("$1", "s.ttl"), " \
           FROM @extschema@.leaderlock h \
          WHERE s.holder IS NOT NULL AND s.expires_at < ", expiry!("$1", "s.ttl"), " \
            AND h.key = s.key AND h.slots > 1 AND s.slot <= h.slots \
      RETURNING s.key");
    /// Failover (contract 8.2): the timeline on which held leases were last made
    /// to outlast a failover. A plain read: no lock, no transaction ID.
    /// `WHERE one_row` on the three statements of this one-row table: an index
    /// scan. A sequential scan under the functions' `enable_seqscan = off` costs
    /// 10^10, and a plan that dear gets JIT-compiled: 100 ms or more on every
    /// session's first call.
    SAFE_TIMELINE =
        "SELECT timeline, changed_at FROM @extschema@.leaderlock_failover WHERE one_row";
    /// The same, locked for the one transaction that extends held leases after
    /// a new timeline began; no row, without waiting, while another does.
    LOCK_SAFE_TIMELINE = "SELECT timeline, changed_at FROM @extschema@.leaderlock_failover \
         WHERE one_row FOR UPDATE SKIP LOCKED";
    /// Every held lease lasts at least until `$1` + its ttl (a renewal the old
    /// primary acknowledged may not have reached this server). recheck_at, the
    /// worker's cue, becomes the new expiry. `$1` now. Returns one row each.
    OUTLAST_FAILOVER = concat!("UPDATE @extschema@.leaderlock \
            SET expires_at = ", expiry!("$1", "ttl"), ", recheck_at = ", expiry!("$1", "ttl"), " \
          WHERE holder IS NOT NULL AND expires_at < ", expiry!("$1", "ttl"), " \
      RETURNING key");
    /// After a promotion (schema 0.5.0 on): every held lease lasts exactly its
    /// ttl from now on this server's lease clock, longer or shorter than its
    /// stored expiry, which the old primary's lease clock set (another host's:
    /// it may have run ahead of this one, by a wall-clock step it ignored or
    /// a stall it did not credit). Every holder heard its answer before the
    /// promotion, so its deadline (send time + ttl) is before now + ttl; a
    /// lease the other clock set far ahead would otherwise keep rivals out
    /// for as long as the clocks differ. Now is read per row, after the row
    /// lock (`le_now()`, re-read when the row was renewed concurrently): a
    /// renewal that commits meanwhile is never shortened.
    /// (One reading per row, for both columns: recheck_at is never after
    /// the expiry.)
    PROMOTED_LEASES = concat!("UPDATE @extschema@.leaderlock \
            SET (expires_at, recheck_at) = (SELECT e, e FROM (SELECT ", expiry!("@extschema@.le_now()", "ttl"), ") n(e)) \
          WHERE holder IS NOT NULL AND session IS NULL \
      RETURNING key");
    /// `PROMOTED_LEASES` for the tenures of keys of many slots.
    PROMOTED_SLOTS = concat!("UPDATE @extschema@.leaderlock_slots s \
            SET (expires_at, recheck_at) = (SELECT e, e FROM (SELECT ", expiry!("@extschema@.le_now()", "s.ttl"), ") n(e)) \
           FROM @extschema@.leaderlock h \
          WHERE s.holder IS NOT NULL AND s.session IS NULL \
            AND h.key = s.key AND h.slots > 1 AND s.slot <= h.slots \
      RETURNING s.key");
    /// Contract 8.2 for runs: every live claim of an unfinished run lasts at
    /// least its ttl from `$1` (a promotion, or a lease clock started
    /// afresh). Longer only: a claim set ahead by another host's clock only
    /// keeps the run from being claimed again for longer.
    /// Never waits: a run's row is locked only by its owner's renewal or
    /// finish (which write a new expiry, or end the claim) or by a claim of a
    /// run without a live claim, so one skipped concerns its locker's own
    /// claim only, and no role holds the step (and every election of the
    /// database with it) by keeping a run locked.
    OUTLAST_FAILOVER_RUNS = concat!(
        "UPDATE @extschema@.leaderlock_runs r \
            SET expires_at = ",
        expiry!("$1", "r.ttl"),
        " FROM (SELECT job, due FROM @extschema@.leaderlock_runs \
                 WHERE holder IS NOT NULL AND finished_at IS NULL AND expires_at < ",
        expiry!("$1", "ttl"),
        " FOR UPDATE SKIP LOCKED) l \
          WHERE r.job = l.job AND r.due = l.due \
      RETURNING r.job"
    );
    /// Records that held leases outlast the move to timeline `$1`, at `$2`.
    MARK_SAFE_TIMELINE =
        "UPDATE @extschema@.leaderlock_failover SET timeline = $1, changed_at = $2 WHERE one_row";
    /// Every session lasts at least until `$1` + its ttl, as
    /// `OUTLAST_FAILOVER` does for leases (the keys held under them follow).
    OUTLAST_FAILOVER_SESSIONS = concat!("UPDATE @extschema@.leaderlock_sessions \
            SET expires_at = ", expiry!("$1", "ttl"), ", recheck_at = ", expiry!("$1", "ttl"), " \
          WHERE expires_at < ", expiry!("$1", "ttl"), " \
      RETURNING session");
    /// After a promotion: every session lasts exactly its ttl from now, as
    /// `PROMOTED_LEASES` says for leases.
    PROMOTED_SESSIONS = concat!("UPDATE @extschema@.leaderlock_sessions \
            SET (expires_at, recheck_at) = (SELECT e, e FROM (SELECT ", expiry!("@extschema@.le_now()", "ttl"), ") n(e)) \
      RETURNING session");
    /// Every group due a step at `$1` that looks at every partition: the
    /// sessions made to outlast the move may include members whose groups a
    /// step had already given up on (their partitions freed, no step due),
    /// who would otherwise renew and own nothing until a join or a leave.
    /// It waits for a group a transaction is changing (which may judge its
    /// members on their sessions' old expiries), as the sessions' update
    /// would wait for its locks on them: groups first, as every change of
    /// a group takes its row before its members' sessions.
    GROUPS_DUE_AFTER_FAILOVER = "UPDATE @extschema@.leaderlock_groups SET check_at = $1, restep = true \
      RETURNING grp";
}
