//! Groups (contract 26): `leaderlock_groups`, `leaderlock_members`,
//! `leaderlock_partitions`. Every change of a group runs under its row's
//! lock (`LOCK_GROUP`): a join, a leave, an ack and the worker's step, one
//! at a time, each reading the members and partitions after that lock.

statements! {
    /// Group `$1`'s row, locked: its partitions, drain budget, and whether
    /// the caller `$2` may change it (a member of its owner's role).
    LOCK_GROUP = concat!(
        "SELECT partitions, drain, ",
        owned_by!("$2"),
        " FROM @extschema@.leaderlock_groups WHERE grp = $1 FOR NO KEY UPDATE"
    );
    /// A new group `$1` of `$2` partitions and drain budget `$3`, made by
    /// `$4` at `$5`; nothing when a racing join made it first.
    NEW_GROUP = "INSERT INTO @extschema@.leaderlock_groups \
           (grp, partitions, drain, owner, changed_at, check_at) \
         VALUES ($1, $2, $3, $4::oid, $5, NULL) ON CONFLICT (grp) DO NOTHING";
    /// Group `$1` now has `$2` partitions and drain budget `$3` (at `$4`).
    CHANGE_GROUP = "UPDATE @extschema@.leaderlock_groups \
            SET partitions = $2, drain = $3, changed_at = $4 WHERE grp = $1";
    /// The rows of partitions 1 to `$2` of group `$1` that are missing,
    /// free in term 0 (at `$3`). A row is never deleted while its group
    /// lives: a partition's terms only grow, also when the count shrinks
    /// and grows again.
    ADD_PARTITIONS = "INSERT INTO @extschema@.leaderlock_partitions \
           (grp, partition, term, acked, changed_at) \
         SELECT $1, n, 0, false, $3 FROM pg_catalog.generate_series(1, $2) AS n \
         ON CONFLICT (grp, partition) DO NOTHING";
    /// The members of group `$1`: member, session, and the session's expiry
    /// (NULL once it ended).
    MEMBERS = "SELECT m.member, m.session, s.expires_at \
           FROM @extschema@.leaderlock_members m \
           LEFT JOIN @extschema@.leaderlock_sessions s ON s.session = m.session \
          WHERE m.grp = $1 ORDER BY m.member";
    /// Member `$2` of group `$1` lives as session `$3` from `$4` on.
    PUT_MEMBER = "INSERT INTO @extschema@.leaderlock_members (grp, member, session, joined_at) \
         VALUES ($1, $2, $3, $4) \
         ON CONFLICT (grp, member) DO UPDATE SET session = excluded.session, joined_at = excluded.joined_at";
    /// Member `$2` leaves group `$1`: its session, if it was one.
    DROP_MEMBER = "DELETE FROM @extschema@.leaderlock_members \
          WHERE grp = $1 AND member = $2 RETURNING session";
    /// Group `$1`'s row as it is: partitions, drain, and whether a step is
    /// due at `$2` (a renewal takes no lock of the group).
    GROUP_ROW = "SELECT partitions, drain, coalesce(check_at <= $2, false) \
           FROM @extschema@.leaderlock_groups WHERE grp = $1";
    /// Group `$1`'s row, locked if a step is due at `$2` and no other
    /// transaction holds it (a renewal steps it then, never waiting):
    /// partitions, drain, restep.
    LOCK_GROUP_IF_DUE = "SELECT partitions, drain, restep FROM @extschema@.leaderlock_groups \
          WHERE grp = $1 AND check_at <= $2 FOR NO KEY UPDATE SKIP LOCKED";
    /// Group `$1`'s partitions, in order: partition, member, session, term,
    /// revoke_until, acked, next_member (they change only under the
    /// group's lock, which the reader holds).
    PARTITIONS = "SELECT partition, member, session, term, revoke_until, acked, next_member \
           FROM @extschema@.leaderlock_partitions WHERE grp = $1 ORDER BY partition";
    /// Partition `$2` of group `$1` locked for a step, unless a guarded
    /// transaction holds it (the step waits for none: it goes again soon).
    LOCK_PARTITION = "SELECT partition FROM @extschema@.leaderlock_partitions \
          WHERE grp = $1 AND partition = $2 FOR NO KEY UPDATE SKIP LOCKED";
    /// The sessions `$1` of a group's members, share-locked for the step:
    /// a renewal committing after the step read an expiry would otherwise
    /// outlast the revocation's end computed from it. Session, expires_at.
    SHARE_MEMBER_SESSIONS = "SELECT session, expires_at FROM @extschema@.leaderlock_sessions \
          WHERE session = ANY($1) FOR SHARE";
    /// Partition `$2` of group `$1` granted to member `$3` (session `$4`) in
    /// term `$5`, at `$6`.
    GRANT_PARTITION = "UPDATE @extschema@.leaderlock_partitions \
            SET member = $3, session = $4, term = $5, revoke_until = NULL, next_member = NULL, \
                acked = false, changed_at = $6 \
          WHERE grp = $1 AND partition = $2";
    /// Partition `$2` of group `$1` revoked: given back by its ack, or
    /// granted to another from `$3` on (at `$4`), to member `$5` (NULL:
    /// nobody) as the assignment stands.
    REVOKE_PARTITION = "UPDATE @extschema@.leaderlock_partitions \
            SET revoke_until = $3, changed_at = $4, next_member = $5 WHERE grp = $1 AND partition = $2";
    /// Revoked partition `$2` of group `$1` goes to `$3` now (the
    /// assignment changed since it was revoked).
    RETARGET_PARTITION = "UPDATE @extschema@.leaderlock_partitions \
            SET next_member = $3 WHERE grp = $1 AND partition = $2";
    /// Partition `$2` of group `$1` stays its owner's (at `$3`).
    WITHDRAW_PARTITION = "UPDATE @extschema@.leaderlock_partitions \
            SET revoke_until = NULL, next_member = NULL, acked = false, changed_at = $3 \
          WHERE grp = $1 AND partition = $2";
    /// Partition `$2` of group `$1` owned by nobody (at `$3`).
    FREE_PARTITION = "UPDATE @extschema@.leaderlock_partitions \
            SET member = NULL, session = NULL, revoke_until = NULL, next_member = NULL, \
                acked = false, changed_at = $3 \
          WHERE grp = $1 AND partition = $2";
    /// Partition `$2` of group `$1`, revoked from member `$3` in term `$4`,
    /// locked for its ack, if the caller `$5` may act for that member (its
    /// session's owner); waits for a transaction that holds it (the
    /// member's own guard, while it drains). Taken before the group's row:
    /// a join, a leave or a step of the group never waits behind the guard.
    LOCK_REVOKED_PARTITION = concat!(
        "SELECT p.partition FROM @extschema@.leaderlock_partitions p \
           JOIN @extschema@.leaderlock_members m ON m.grp = p.grp AND m.member = p.member \
           JOIN @extschema@.leaderlock_sessions s ON s.session = m.session \
          WHERE p.grp = $1 AND p.partition = $2 AND p.member = $3 AND p.term = $4 \
            AND p.revoke_until IS NOT NULL AND ",
        owned_by!("$5"),
        " FOR NO KEY UPDATE OF p"
    );
    /// Member `$3` gives back partition `$2` of group `$1`, revoked from it
    /// in term `$4` (its row and the group's locked by the caller); a row
    /// when it was: the revocation's end, the member it named, whether the
    /// partition is within the group's count, and whether a step passed
    /// over a partition since (`groups::after_ack` decides on them).
    ACK_PARTITION = "UPDATE @extschema@.leaderlock_partitions p \
            SET acked = true \
           FROM @extschema@.leaderlock_groups g \
          WHERE p.grp = $1 AND p.partition = $2 AND p.member = $3 AND p.term = $4 \
            AND p.revoke_until IS NOT NULL AND g.grp = p.grp \
      RETURNING p.revoke_until, p.next_member, p.partition <= g.partitions, g.restep";
    /// When group `$1` next needs a step without any call (a revocation's
    /// end, a member's session expiry): `$2`; `$3` whether that step must
    /// look at every partition (one was skipped for a guard).
    SET_GROUP_CHECK = "UPDATE @extschema@.leaderlock_groups SET check_at = $2, restep = $3 WHERE grp = $1";
    /// The earliest end of group `$1`'s revocations.
    FIRST_REVOCATION_END = "SELECT pg_catalog.min(revoke_until) FROM @extschema@.leaderlock_partitions \
          WHERE grp = $1 AND revoke_until IS NOT NULL";
    /// Member `$2`'s partitions of group `$1` as the server holds them,
    /// while its session is the one they were granted to: partition, term,
    /// revoke_until (NULL: owned).
    ASSIGNMENT = "SELECT p.partition, p.term, p.revoke_until \
           FROM @extschema@.leaderlock_partitions p \
           JOIN @extschema@.leaderlock_members m \
             ON m.grp = p.grp AND m.member = p.member AND m.session = p.session \
          WHERE p.grp = $1 AND p.member = $2 ORDER BY p.partition";
    /// A guard (contract 3.4 for a partition): partition `$2` of group `$1`
    /// share-locked while member `$3` owns it: its term, revoke_until and
    /// its owner's session's expiry. A grant waits for the guarded
    /// transaction; the caller checks the rest under that lock.
    SHARE_LOCK_PARTITION = concat!(
        "SELECT p.term, p.revoke_until, s.expires_at, ",
        owned_by!("$4"),
        " FROM @extschema@.leaderlock_partitions p \
           JOIN @extschema@.leaderlock_sessions s ON s.session = p.session \
          WHERE p.grp = $1 AND p.partition = $2 AND p.member = $3 \
          FOR SHARE OF p"
    );
    /// The worker: up to `$2` groups due a step at `$1`, locked, skipping
    /// those a call is changing (it steps them itself), their owners in
    /// turn after `$3` (`due_in_turn!`): grp, partitions, drain, restep,
    /// owner.
    LOCK_GROUPS_DUE = concat!(
        "SELECT g.grp, g.partitions, g.drain, g.restep, g.owner \
           FROM @extschema@.leaderlock_groups g ",
        due_in_turn!("leaderlock_groups", "grp", "check_at"),
        "g.grp WHERE g.check_at <= $1 ",
        in_turn!(),
        " LIMIT $2 FOR NO KEY UPDATE OF g SKIP LOCKED"
    );
    /// When the worker next has a group to step.
    NEXT_GROUP_CHECK = "SELECT pg_catalog.min(check_at) FROM @extschema@.leaderlock_groups";
    /// How many groups role `$1` made.
    GROUPS_MADE_BY = "SELECT pg_catalog.count(*) FROM @extschema@.leaderlock_groups WHERE owner = $1::oid";
}
