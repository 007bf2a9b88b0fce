//! Statements on `leaderlock_sessions` (contract 21), and on the keys
//! and slots held under a session.

use leaderlock_protocol::of_term;

statements! {
    /// Contract 21: a new session of id `$1`, owned by the caller `$2`, with
    /// ttl `$3` from `$4` until `$5`, lock-delay `$6`, values kept `$7`,
    /// bound to the backend of pid `$8` started at `$9` (else NULL). Its
    /// handle is random: never the same twice, on any server.
    OPEN_SESSION = "INSERT INTO @extschema@.leaderlock_sessions \
           (session, id, owner, ttl, opened_at, renewed_at, expires_at, recheck_at, \
            lock_delay, keep_values, session_pid, session_start) \
         VALUES (pg_catalog.gen_random_uuid(), $1, $2::oid, $3, $4, $4, $5, $5, $6, $7, $8, $9) \
      RETURNING session";
    /// Extend session `$1`, live now, by `$3` or its own ttl from `$2` (read
    /// at the call: a renewal that waited is backdated, never extended),
    /// only if the caller `$4` may act as its owner (recheck_at as
    /// `renewal!` says: HOT). One row, however many keys are held under it.
    /// Waits for a transaction that holds the row: only its owner's own
    /// calls and the end of a lapsed session lock it (a rival's never do),
    /// and liveness is decided on the row as it is then (`le_now()`, read
    /// again after the wait): an ended session is never renewed. Returns
    /// the new expiry.
    RENEW_SESSION = concat!(
        "UPDATE @extschema@.leaderlock_sessions SET ",
        renewal!("$2", "coalesce($3, ttl)"),
        ", ttl = coalesce($3, ttl) \
          WHERE session = $1 AND expires_at > @extschema@.le_now() AND ",
        owned_by!("$4"),
        " RETURNING expires_at"
    );
    /// `RENEW_SESSION` for le_renew of a key held under the session, which
    /// never waits (contract 3.2): the sub-select locks the row only if the
    /// caller `$4` may act as its owner, and yields nothing, without
    /// waiting, while another transaction holds it (the owner's own other
    /// renewal, or an end). Returns the new expiry.
    RENEW_SESSION_NOWAIT = concat!(
        "UPDATE @extschema@.leaderlock_sessions SET ",
        renewal!("$2", "coalesce($3, ttl)"),
        ", ttl = coalesce($3, ttl) \
          WHERE session = $1 AND expires_at > $2 \
            AND session = (SELECT session FROM @extschema@.leaderlock_sessions \
                            WHERE session = $1 AND expires_at > $2 AND ",
        owned_by!("$4"),
        " FOR NO KEY UPDATE SKIP LOCKED) \
      RETURNING expires_at"
    );
    /// Snapshot read of session `$1`: its id, whether the caller `$2` may act
    /// as its owner, and its ttl.
    SESSION_ID = concat!(
        "SELECT id, ",
        owned_by!("$2"),
        ", ttl FROM @extschema@.leaderlock_sessions WHERE session = $1"
    );
    /// An acquisition under session `$1`: the session, live now and the
    /// caller `$2`'s to act on, key-share-locked until the transaction (or
    /// le_acquire's look) ends, so that it cannot end meanwhile (an end
    /// deletes the row). Renewals do not conflict with that lock; an end in
    /// progress does, and is not waited for (SKIP LOCKED: no row). Returns
    /// its expiry.
    SHARE_SESSION = concat!(
        "SELECT expires_at FROM @extschema@.leaderlock_sessions \
          WHERE session = $1 AND expires_at > @extschema@.le_now() AND ",
        owned_by!("$2"),
        " FOR KEY SHARE SKIP LOCKED"
    );
    /// le_close_session: lock session `$1`, live now and the caller `$2`'s,
    /// waiting for acquisitions under it in flight. Whether its keys keep
    /// their values.
    LOCK_OWN_SESSION = concat!(
        "SELECT keep_values FROM @extschema@.leaderlock_sessions \
          WHERE session = $1 AND expires_at > @extschema@.le_now() AND ",
        owned_by!("$2"),
        " FOR UPDATE"
    );
    /// Lock session `$1` if it lapsed by `$2`, never waiting: its
    /// lock-delay, whether values are kept, and its expiry.
    LOCK_LAPSED_SESSION = "SELECT session, lock_delay, keep_values, expires_at \
           FROM @extschema@.leaderlock_sessions \
          WHERE session = $1 AND expires_at <= $2 \
          FOR NO KEY UPDATE SKIP LOCKED";
    /// Worker: lock up to `$2` sessions lapsed at `$1`, skipping rows other
    /// transactions hold, as `LOCK_LAPSED_SESSION` returns them.
    LOCK_LAPSED_SESSIONS = "SELECT session, lock_delay, keep_values, expires_at \
           FROM @extschema@.leaderlock_sessions \
          WHERE recheck_at <= $1 AND expires_at <= $1 \
          ORDER BY recheck_at \
          LIMIT $2 \
          FOR NO KEY UPDATE SKIP LOCKED";
    /// Worker (contract 10): lock the sessions bound to the backend of pid
    /// `$1` started at `$2`, which ended, as `LOCK_LAPSED_SESSION` returns them.
    LOCK_BOUND_SESSIONS = "SELECT session, lock_delay, keep_values, expires_at \
           FROM @extschema@.leaderlock_sessions \
          WHERE session_pid = $1 AND session_start = $2 \
          FOR NO KEY UPDATE SKIP LOCKED";
    /// Worker: lock up to `$1` sessions bound to backends that no longer
    /// exist (after `FRESH_ACTIVITY` in the same transaction: a session
    /// visible to this statement was opened by a backend started before it).
    LOCK_ORPHANED_SESSIONS = "SELECT s.session, s.lock_delay, s.keep_values, s.expires_at \
           FROM @extschema@.leaderlock_sessions s \
          WHERE s.session_pid IS NOT NULL \
            AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_stat_get_activity(s.session_pid) a \
                             WHERE a.backend_start = s.session_start) \
          LIMIT $1 \
          FOR NO KEY UPDATE OF s SKIP LOCKED";
    /// The held keys of session `$1` (its row locked), locked, skipping rows
    /// other transactions hold: key, holder, term.
    LOCK_SESSION_KEYS = "SELECT key, holder, term FROM @extschema@.leaderlock \
          WHERE session = $1 AND holder IS NOT NULL \
          FOR NO KEY UPDATE SKIP LOCKED";
    /// `LOCK_SESSION_KEYS` waiting for transactions that hold them (a
    /// guarded write in progress ends first), for le_close_session.
    LOCK_SESSION_KEYS_WAIT = "SELECT key, holder, term FROM @extschema@.leaderlock \
          WHERE session = $1 AND holder IS NOT NULL \
          FOR NO KEY UPDATE";
    /// The held slots of session `$1` (its row locked), as
    /// `LOCK_SESSION_KEYS`: key, holder, term, slot, and the key's slots.
    LOCK_SESSION_SLOTS = "SELECT s.key, s.holder, s.term, s.slot, \
                (SELECT h.slots FROM @extschema@.leaderlock h WHERE h.key = s.key) \
           FROM @extschema@.leaderlock_slots s \
          WHERE s.session = $1 AND s.holder IS NOT NULL \
          FOR NO KEY UPDATE OF s SKIP LOCKED";
    /// `LOCK_SESSION_SLOTS` waiting, as `LOCK_SESSION_KEYS_WAIT`.
    LOCK_SESSION_SLOTS_WAIT = "SELECT s.key, s.holder, s.term, s.slot, \
                (SELECT h.slots FROM @extschema@.leaderlock h WHERE h.key = s.key) \
           FROM @extschema@.leaderlock_slots s \
          WHERE s.session = $1 AND s.holder IS NOT NULL \
          FOR NO KEY UPDATE OF s";
    /// How many held keys and slots session `$1` has.
    SESSION_KEYS_LEFT = "SELECT (SELECT count(*) FROM @extschema@.leaderlock \
                   WHERE session = $1 AND holder IS NOT NULL) \
          + (SELECT count(*) FROM @extschema@.leaderlock_slots \
              WHERE session = $1 AND holder IS NOT NULL)";
    /// Vacate keys `$1` of an ended session at `$2`: values kept when `$3`,
    /// not acquirable before `$4` (a lock-delay; NULL: none), expires_at `$5`
    /// (the release's instant, or the session's expiry), counted as
    /// releases when `$6`, else as expiries.
    /// No longer naming the session, the new row versions stay out of the
    /// index on `session`: one index entry fewer to write a key.
    VACATE_SESSION_KEYS = "UPDATE @extschema@.leaderlock \
            SET holder = NULL, value = CASE WHEN $3 THEN value END, session_pid = NULL, \
                session_start = NULL, owner = NULL, expires_at = $5, delayed_until = $4, \
                session = NULL, \
                releases = releases + CASE WHEN $6 THEN 1 ELSE 0 END, \
                expiries = expiries + CASE WHEN $6 THEN 0 ELSE 1 END, changed_at = $2 \
          WHERE key = ANY($1)";
    /// `VACATE_SESSION_KEYS` for the slots `$7` (with keys `$1`) of an
    /// ended session.
    VACATE_SESSION_SLOTS = "UPDATE @extschema@.leaderlock_slots s \
            SET holder = NULL, value = CASE WHEN $3 THEN s.value END, owner = NULL, \
                expires_at = $5, delayed_until = $4, session = NULL, \
                releases = s.releases + CASE WHEN $6 THEN 1 ELSE 0 END, \
                expiries = s.expiries + CASE WHEN $6 THEN 0 ELSE 1 END, changed_at = $2 \
           FROM ROWS FROM (pg_catalog.unnest($1::text[]), pg_catalog.unnest($7::int[])) AS v(key, slot) \
          WHERE s.key = v.key AND s.slot = v.slot";
    /// An ended session's row, once none of its keys is held.
    DELETE_SESSION = "DELETE FROM @extschema@.leaderlock_sessions WHERE session = $1";
    /// Lock session `$1` to delete it, skipping it while another transaction
    /// holds it (an acquisition under it in flight holds it key-share
    /// locked: after this lock, none is, and none can start).
    LOCK_SESSION_TO_DELETE = "SELECT true FROM @extschema@.leaderlock_sessions \
          WHERE session = $1 FOR UPDATE SKIP LOCKED";
    /// Lift the lock-delay of key `$1` at `$2` (le_force_release, contract
    /// 21): a vacant key of one slot, and the vacant slots of a key of many,
    /// kept from takers by a delay still running. How many.
    LIFT_DELAY = "WITH one AS ( \
            UPDATE @extschema@.leaderlock SET delayed_until = NULL \
             WHERE key = $1 AND holder IS NULL AND delayed_until > $2 RETURNING 1), \
          many AS ( \
            UPDATE @extschema@.leaderlock_slots SET delayed_until = NULL \
             WHERE key = $1 AND holder IS NULL AND delayed_until > $2 RETURNING 1) \
          SELECT (SELECT pg_catalog.count(*) FROM one) + (SELECT pg_catalog.count(*) FROM many)";
    /// Session `$1` ended at `$2` but keeps its row (a key still held under
    /// it, locked by another transaction, or not visible to this
    /// transaction's snapshot): lapsed from now, so that nothing renews it
    /// or acquires under it, and the worker ends it again; `$3`: closed (no
    /// lock-delay for what is left). Its cue is now: behind the sessions
    /// that lapsed before (those that cannot end, however many, never keep
    /// the worker's batch from the others).
    MARK_ENDED = "UPDATE @extschema@.leaderlock_sessions \
            SET expires_at = least(expires_at, $2), recheck_at = $2, \
                lock_delay = CASE WHEN $3 THEN '0'::interval ELSE lock_delay END \
          WHERE session = $1";
    /// The session under which `$2` holds key `$1` (in term `$3`, or any),
    /// a key of one slot or a slot of a key of many.
    SESSION_OF_KEY = concat!(
        "SELECT session FROM @extschema@.leaderlock \
          WHERE key = $1 AND holder = $2 AND session IS NOT NULL AND ",
        of_term!("$3"),
        " UNION ALL \
         SELECT session FROM @extschema@.leaderlock_slots \
          WHERE key = $1 AND holder = $2 AND session IS NOT NULL AND ",
        of_term!("$3")
    );
    /// le_renew_all (contract 16) for sessions: extend every session of id
    /// `$1` live at `$2` that the caller `$3` may act on, by its own ttl,
    /// skipping rows other transactions hold. Returns how many keys are held
    /// under them, and the earliest new expiry.
    RENEW_ALL_SESSIONS = concat!(
        "WITH renewed AS ( \
           UPDATE @extschema@.leaderlock_sessions SET ",
        renewal!("$2", "ttl"),
        " WHERE expires_at > $2 AND session IN ( \
                 SELECT session FROM @extschema@.leaderlock_sessions \
                  WHERE id = $1 AND expires_at > $2 AND ",
        owned_by!("$3"),
        " FOR NO KEY UPDATE SKIP LOCKED) \
           RETURNING session, expires_at) \
         SELECT (SELECT count(*) FROM @extschema@.leaderlock l \
                  WHERE l.session IN (SELECT session FROM renewed) AND l.holder IS NOT NULL) \
              + (SELECT count(*) FROM @extschema@.leaderlock_slots l \
                  WHERE l.session IN (SELECT session FROM renewed) AND l.holder IS NOT NULL), \
                (SELECT min(expires_at) FROM renewed)"
    );
    /// Worker: when to look at sessions next, as `NEXT_CHECK` for leases.
    NEXT_CHECK_SESSIONS = "SELECT least( \
           (SELECT min(expires_at) FROM @extschema@.leaderlock_sessions WHERE recheck_at <= $1), \
           (SELECT min(recheck_at) FROM @extschema@.leaderlock_sessions WHERE recheck_at > $1))";
}
