//! Statements on `leaderlock_expected`: keys expected to be led (contract
//! 25), and what the worker reads of a marked key.

statements! {
    /// A key's mark, locked for a change (waits only for another change
    /// of it or the worker's short check). `$1` key, `$2` the caller:
    /// whether the caller may change it: a member of the role that made it,
    /// or of the role that holds the key now (a mark is no way to squat
    /// another role's key).
    LOCK_EXPECTED = "SELECT pg_catalog.pg_has_role($2::oid, e.owner, 'MEMBER') \
                OR EXISTS (SELECT FROM @extschema@.leaderlock l \
                            WHERE l.key = e.key AND l.owner IS NOT NULL \
                              AND pg_catalog.pg_has_role($2::oid, l.owner, 'MEMBER')) \
           FROM @extschema@.leaderlock_expected e WHERE e.key = $1 FOR NO KEY UPDATE OF e";
    /// How many keys role `$1` marked (bounded as its jobs are).
    EXPECTED_MADE_BY = "SELECT pg_catalog.count(*) FROM @extschema@.leaderlock_expected \
           WHERE owner = $1::oid";
    /// Marks key `$1` as expected to be led within `$2`, at `$3`, for `$4`
    /// (a new bound starts the key's count again); first checked at `$5`.
    /// A row when it changed.
    MARK_EXPECTED = "INSERT INTO @extschema@.leaderlock_expected \
             (key, within, owner, marked_at, next_check) VALUES ($1, $2, $4::oid, $3, $5) \
         ON CONFLICT (key) DO UPDATE SET within = EXCLUDED.within, marked_at = EXCLUDED.marked_at, \
             next_check = EXCLUDED.next_check \
          WHERE leaderlock_expected.within IS DISTINCT FROM EXCLUDED.within \
            AND (pg_catalog.pg_has_role($4::oid, leaderlock_expected.owner, 'MEMBER') \
                 OR EXISTS (SELECT FROM @extschema@.leaderlock l \
                             WHERE l.key = leaderlock_expected.key AND l.owner IS NOT NULL \
                               AND pg_catalog.pg_has_role($4::oid, l.owner, 'MEMBER'))) \
         RETURNING true";
    /// Key `$1`'s mark goes; the start of its open leaderless interval.
    UNMARK_EXPECTED = "DELETE FROM @extschema@.leaderlock_expected WHERE key = $1 \
         RETURNING leaderless_since";
    /// The marks due a check by `$1`, their owners in turn after `$3`
    /// (`due_in_turn!`), up to `$2`, locked without waiting; each one's
    /// owner last.
    LOCK_EXPECTED_TO_CHECK = concat!(
        "SELECT e.key, e.within, e.marked_at, e.leaderless_since, e.owner \
           FROM @extschema@.leaderlock_expected e ",
        due_in_turn!("leaderlock_expected", "key", "next_check"),
        "e.key WHERE e.next_check <= $1 ",
        in_turn!(),
        " LIMIT $2 FOR NO KEY UPDATE OF e SKIP LOCKED"
    );
    /// Key `$1`'s holders as the status view shows them at the lease clock's
    /// now: when its earliest live tenure began, when the live tenures end,
    /// and when its last tenure that is not live ended.
    EXPECTED_STATE = "SELECT pg_catalog.min(s.acquired_at) FILTER (WHERE s.state = 'held'), \
                pg_catalog.min(s.expires_at) FILTER (WHERE s.state = 'held'), \
                pg_catalog.max(s.expires_at) FILTER (WHERE s.state <> 'held') \
           FROM @extschema@.leaderlock_status s WHERE s.key = $1";
    /// A checked mark: `$2` the open interval's start (NULL: none), `$3`
    /// intervals opened now (0 or 1), `$4` the length of one closed now,
    /// `$5` the next check.
    CHECKED_EXPECTED = "UPDATE @extschema@.leaderlock_expected \
            SET leaderless_since = $2, intervals = intervals + $3, \
                leaderless_total = leaderless_total + $4, next_check = $5 \
          WHERE key = $1";
    /// When the worker next has a mark to check.
    NEXT_EXPECTED_CHECK = "SELECT next_check FROM @extschema@.leaderlock_expected \
          ORDER BY next_check LIMIT 1";
}
