//! Statements on `leaderlock`: a key's row (a key of one slot, or the
//! head row of a key of many).

use leaderlock_protocol::{held_by, lapsed, live, next_term, not_live, of_term};

/// A new tenure on the row of key `$1` (`START_TERM`'s parameters): the
/// UPDATE up to its WHERE, which a statement may narrow.
macro_rules! start_term {
    () => {
        concat!(
            "UPDATE @extschema@.leaderlock \
               SET holder = $2, term = ",
            next_term!("$6"),
            ", acquired_at = $3, \
                renewed_at = $3, expires_at = $4, ttl = $5, recheck_at = $4, \
                value = $7::jsonb, session_pid = $8, session_start = $9, \
                owner = $10::oid, tenures = tenures + 1, changed_at = $3, \
                session = $11::uuid, delayed_until = NULL, \
                expiries = expiries + CASE WHEN holder IS NULL THEN 0 ELSE 1 END \
             WHERE key = $1"
        )
    };
}

statements! {
    /// Contract 11: the leader value of a locked lease. `$1` key, `$2` value as
    /// jsonb text or NULL.
    SET_VALUE = "UPDATE @extschema@.leaderlock SET value = $2::jsonb WHERE key = $1";
    /// The live holder of `$1` at `$2`.
    LIVE_HOLDER = concat!(
        "SELECT holder FROM @extschema@.leaderlock WHERE key = $1 AND ",
        live!("$2"),
        " AND ",
        session_live!("leaderlock.", "$2")
    );
    /// Snapshot read of a lease, without locking it, whether the caller
    /// `$2` may act as its owner, and how many slots the key admits. `$1` key.
    READ_LEASE = concat!(
        "SELECT holder, term, ",
        expiry_of!("leaderlock."),
        ", ",
        owned_by!("$2"),
        ", slots, session, delayed_until FROM @extschema@.leaderlock WHERE key = $1"
    );
    /// Lock a lease that `$2` may take or extend: vacant, lapsed, or already
    /// its own (held by `$2` and owned by a role the caller `$3` is a member
    /// of). Returns no row when the lease is absent, held live by someone
    /// else, or locked by another transaction.
    LOCK_ACQUIRABLE = concat!(
        "SELECT holder, term, ",
        expiry_of!("leaderlock."),
        ", true, slots, session, delayed_until FROM @extschema@.leaderlock \
         WHERE key = $1 AND slots = 1 \
           AND (",
        not_live!("@extschema@.le_now()"),
        " OR (holder = $2 AND ",
        owned_by!("$3"),
        ")) FOR NO KEY UPDATE SKIP LOCKED"
    );
    /// Lock a lease live-held by `$2` and owned by a role the caller `$3` is a
    /// member of. No row when it is not, or when another transaction holds the
    /// row locked. `$1` key.
    LOCK_OWN = concat!(
        "SELECT term, ",
        expiry_of!("leaderlock."),
        " FROM @extschema@.leaderlock \
         WHERE key = $1 AND ", held_by!("$2", "@extschema@.le_now()"), " AND ",
        session_live!("leaderlock.", "@extschema@.le_now()"),
        " AND ",
        owned_by!("$3"),
        " FOR NO KEY UPDATE SKIP LOCKED"
    );
    /// Whether `$2` holds key `$1` live (in term `$4`, or any), owned by a
    /// role the caller `$3` is a member of, on its row or, for a key of many
    /// slots, on a slot's (read without a lock): what lets a holder's call
    /// refused for a lock on its row try again (`keep::past_rivals`).
    HOLDS_LIVE = concat!(
        "SELECT EXISTS (SELECT 1 FROM @extschema@.leaderlock \
                        WHERE key = $1 AND ", held_by!("$2", "@extschema@.le_now()"), " AND ",
        session_live!("leaderlock.", "@extschema@.le_now()"),
        " AND ", of_term!("$4"), " AND ", owned_by!("$3"),
        ") OR EXISTS (SELECT 1 FROM @extschema@.leaderlock_slots \
                       WHERE key = $1 AND ", held_by!("$2", "@extschema@.le_now()"), " AND ",
        session_live!("leaderlock_slots.", "@extschema@.le_now()"),
        " AND ", of_term!("$4"), " AND ", owned_by!("$3"),
        ")"
    );
    /// Extend the lease `$2` holds live at `$3` to `$3` + ttl, same term, in one
    /// statement: the sub-select locks the row only if it is `$2`'s live lease,
    /// owned by a role the caller `$5` is a member of (a rival never locks the
    /// holder's row), and yields NULL, without waiting, if another transaction
    /// holds it locked. ttl is `$4`, or the stored one when NULL; recheck_at
    /// as `renewal!` says. A tenure from before
    /// 0.4.0 (no owner) becomes owned by the role that renews it: its holder.
    /// `$1` key, `$2` id, `$3` now, `$4` ttl or NULL, `$5` caller, `$6` the
    /// tenure's term or NULL for any. Returns the new expiry and the term.
    RENEW = concat!(
        "UPDATE @extschema@.leaderlock SET ",
        renewal!("$3", "coalesce($4, ttl)"),
        ", ttl = coalesce($4, ttl), owner = coalesce(owner, $5::oid) \
          WHERE key = $1 AND ", held_by!("$2", "$3"), " AND session IS NULL \
            AND key = (SELECT key FROM @extschema@.leaderlock \
                        WHERE key = $1 AND ", held_by!("$2", "$3"), " AND session IS NULL AND ",
        of_term!("$6"),
        " AND ",
        owned_by!("$5"),
        " FOR NO KEY UPDATE SKIP LOCKED) \
      RETURNING expires_at, term"
    );
    /// First acquisition of a brand-new key: its term is the timeline's floor
    /// (1 on timeline 1; see `failover.rs`). May wait only for a concurrent
    /// inserter of the same key, as contract 3.1 allows.
    /// `$1` key, `$2` id, `$3` now, `$4` expires_at (and recheck_at), `$5` ttl,
    /// `$6` term floor, `$7` value as jsonb text or NULL, `$8` and `$9` the
    /// session's pid and start for a session-bound lease, else NULL, `$10` the
    /// caller, who owns the lease.
    INSERT_FIRST_TERM = "INSERT INTO @extschema@.leaderlock \
           (key, holder, term, acquired_at, renewed_at, expires_at, ttl, recheck_at, \
            value, session_pid, session_start, owner, tenures, changed_at, session) \
         VALUES ($1, $2, $6, $3, $3, $4, $5, $4, $7::jsonb, $8, $9, $10::oid, 1, $3, $11::uuid) \
         ON CONFLICT (key) DO NOTHING \
         RETURNING term";
    /// A new tenure on a locked row: vacant or lapsed before. The term grows by
    /// one, or jumps to the timeline's floor after a failover (contract 8.1).
    /// The value, the session binding and the owner are the new tenure's own.
    /// A lapsed lease taken over before the worker vacated it counts as an
    /// expiry too. Parameters as for `INSERT_FIRST_TERM`.
    START_TERM = concat!(start_term!(), " RETURNING term");
    /// A takeover decided on a read without locking (`READ_LEASE`), in one
    /// statement: `START_TERM`, on the row only if, locked now without
    /// waiting, it is still as read (`$12` term, `$13` holder, `$14`
    /// session, `$15` lock-delay: the tenure the decision saw, which no
    /// write since has ended, moved or delayed) and not live at `$3`, the
    /// new tenure's start (a renewal since would have made it so). No row when
    /// it changed or is locked: the caller locks it and decides again.
    /// The other parameters are `START_TERM`'s.
    TAKE_AS_READ = concat!(start_term!(), " AND key = (SELECT l.key FROM @extschema@.leaderlock l \
                 WHERE l.key = $1 AND l.slots = 1 AND l.term = $12 \
                   AND l.holder IS NOT DISTINCT FROM $13 \
                   AND l.session IS NOT DISTINCT FROM $14::uuid \
                   AND l.delayed_until IS NOT DISTINCT FROM $15 AND ",
        not_live!("l.", "$3"),
        " FOR NO KEY UPDATE SKIP LOCKED) \
      RETURNING term");
    /// Release a locked, live lease: vacant, term kept; no value, no binding,
    /// no owner. `$1` key, `$2` now.
    VACATE = "UPDATE @extschema@.leaderlock \
            SET holder = NULL, expires_at = $2, value = NULL, session_pid = NULL, \
                session_start = NULL, owner = NULL, releases = releases + 1, changed_at = $2 \
          WHERE key = $1";
    /// Fencing: share-lock the row until the caller's transaction ends, so no
    /// takeover (an UPDATE) can commit meanwhile. Waits for in-flight writers,
    /// which are short, to get a true answer. Also whether the caller `$2` may
    /// act as its owner. `$1` key.
    SHARE_LOCK_LEASE = concat!(
        "SELECT holder, term, ",
        expiry_of!("leaderlock."),
        ", ",
        owned_by!("$2"),
        " FROM @extschema@.leaderlock WHERE key = $1 FOR SHARE"
    );
    /// Contract 16, le_renew_all: extend every lease `$1` holds live at `$2`,
    /// owned by a role the caller `$3` is a member of, by its own ttl, same
    /// terms, in one statement; rows another transaction holds locked are
    /// skipped (found through the index on holder; recheck_at as in `RENEW`,
    /// so most renewals stay HOT). Returns how many and the earliest new expiry.
    RENEW_ALL = concat!(
        "WITH renewed AS ( \
           UPDATE @extschema@.leaderlock l SET ",
        renewal!("$2", "l.ttl"),
        ", owner = coalesce(l.owner, $3::oid) \
             FROM (SELECT key FROM @extschema@.leaderlock \
                    WHERE ", held_by!("$1", "$2"), " AND session IS NULL AND ",
        owned_by!("$3"),
        " FOR NO KEY UPDATE SKIP LOCKED) own \
            WHERE l.key = own.key AND ", held_by!("l.", "$1", "$2"), " AND l.session IS NULL \
        RETURNING l.expires_at) \
         SELECT count(*), min(expires_at) FROM renewed"
    );
    /// Contract 16, le_release_all: lock every lease `$1` holds live, owned
    /// by a role the caller `$2` is a member of, skipping rows another
    /// transaction holds locked. Returns key and term of each.
    LOCK_ALL_OWN = concat!(
        "SELECT key, term FROM @extschema@.leaderlock \
          WHERE ", held_by!("$1", "@extschema@.le_now()"), " AND ",
        session_live!("leaderlock.", "@extschema@.le_now()"),
        " AND ",
        owned_by!("$2"),
        " FOR NO KEY UPDATE SKIP LOCKED"
    );
    /// Release the leases `$1` (keys) just locked that are still live at
    /// `$2`, as `VACATE` does one. Returns key and term of each.
    VACATE_LIVE_KEYS = concat!("UPDATE @extschema@.leaderlock \
            SET holder = NULL, expires_at = $2, value = NULL, session_pid = NULL, \
                session_start = NULL, owner = NULL, releases = releases + 1, changed_at = $2 \
          WHERE key = ANY($1) AND ", live!("$2"), " \
      RETURNING key, term");
    /// Contract 17: the slots of key `$1` and whether it has a row at all
    /// (no row: a brand-new key).
    KEY_SLOTS = "SELECT slots FROM @extschema@.leaderlock WHERE key = $1";
    /// Contract 17: lock the row of key `$1` to issue a term or change its
    /// slots, only while no live holder has it (a key of many slots never
    /// has one there), skipping it when another transaction holds it locked.
    /// Holders of its slots never lock this row: a candidate that locks it
    /// delays no holder. Returns the lapsed holder, if any, the slots and
    /// the key's last term.
    LOCK_KEY_HEAD = concat!("SELECT holder, slots, term FROM @extschema@.leaderlock \
         WHERE key = $1 AND ", not_live!("@extschema@.le_now()"), " \
           AND (delayed_until IS NULL OR delayed_until <= @extschema@.le_now()) \
         FOR NO KEY UPDATE SKIP LOCKED");
    /// A brand-new key of `$4` slots: its row holds no holder and the first
    /// term (the timeline's floor `$2`), which its first tenure takes. `$1`
    /// key, `$3` now. May wait only for a concurrent inserter of the same key.
    INSERT_KEY_HEAD = "INSERT INTO @extschema@.leaderlock \
           (key, holder, term, tenures, changed_at, slots) \
         VALUES ($1, NULL, $2, 1, $3, $4) \
         ON CONFLICT (key) DO NOTHING \
         RETURNING term";
    /// A key of many slots with no live holder, its row locked, admits one
    /// holder from now on. `$1` key.
    SET_ONE_SLOT = "UPDATE @extschema@.leaderlock SET slots = 1 WHERE key = $1";
    /// Worker: vacate the leases just locked (primary key lookups). `$1` keys,
    /// `$2` now.
    VACATE_KEYS = "UPDATE @extschema@.leaderlock \
            SET holder = NULL, value = NULL, session_pid = NULL, session_start = NULL, \
                owner = NULL, expiries = expiries + 1, changed_at = $2 \
          WHERE key = ANY($1)";
    /// Contract 13, le_force_release: lock the live lease of `$1`, whoever
    /// holds it (the caller's right is checked before; `true`: the row's
    /// fourth column as `READ_LEASE` has it). Waits for a transaction that
    /// holds the row locked (a guarded write in progress must end first).
    LOCK_LIVE = concat!("SELECT holder, term, expires_at, true FROM @extschema@.leaderlock \
         WHERE key = $1 AND ", live!("@extschema@.le_now()"), " \
           AND ", session_live!("leaderlock.", "@extschema@.le_now()"), " \
         FOR NO KEY UPDATE");
    /// Worker: lock up to `$2` leases lapsed at `$1`, skipping rows other
    /// transactions hold locked. A lapsed lease always has recheck_at <= its
    /// expires_at <= `$1`, so the index range on recheck_at finds them all; the
    /// values are those of the locked (latest) row versions.
    LOCK_LAPSED = concat!("SELECT key, holder, term, expires_at FROM @extschema@.leaderlock \
         WHERE recheck_at <= $1 AND ", lapsed!("$1"), " \
         ORDER BY recheck_at \
         LIMIT $2 \
         FOR NO KEY UPDATE SKIP LOCKED");
    /// Worker (contract 9): lock tenure `$3` of key `$1`, handed to `$2` by a
    /// release at `$4` and never taken up, if it is still as handed: held by
    /// `$2`, live at `$5`, never renewed since (renewed_at = acquired_at);
    /// skipping it when another transaction holds it locked.
    LOCK_ABANDONED = concat!(
        "SELECT key, holder, term, expires_at FROM @extschema@.leaderlock \
         WHERE key = $1 AND term = $3 AND acquired_at = $4 AND renewed_at = acquired_at AND ",
        held_by!("$2", "$5"),
        " FOR NO KEY UPDATE SKIP LOCKED"
    );
    /// Worker (contract 10): lock the held leases bound to the session that
    /// had pid `$1` and started at `$2`, skipping rows other transactions hold.
    LOCK_SESSION_LEASES =
        "SELECT key, holder, term, expires_at FROM @extschema@.leaderlock \
         WHERE session_pid = $1 AND session_start = $2 AND holder IS NOT NULL \
         FOR NO KEY UPDATE SKIP LOCKED";
    /// Worker: how many held leases are still bound to that session (after
    /// vacating the ones it could lock). `$1` pid, `$2` start.
    SESSION_LEASES_LEFT = "SELECT count(*) FROM @extschema@.leaderlock \
         WHERE session_pid = $1 AND session_start = $2 AND holder IS NOT NULL";
    /// Worker: lock up to `$1` held leases bound to sessions that seem to no
    /// longer exist (no backend with that pid and start time). Through the
    /// partial index on session_pid: only session-bound rows are looked at.
    /// The list of backends is read once per transaction and kept, so a
    /// session newer than that read looks gone: `STILL_ORPHANED` decides.
    LOCK_ORPHANED = "SELECT l.key, l.holder, l.term, l.expires_at, \
                l.session_pid, l.session_start FROM @extschema@.leaderlock l \
         WHERE l.session_pid IS NOT NULL AND l.holder IS NOT NULL \
           AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_stat_get_activity(l.session_pid) a \
                            WHERE a.backend_start = l.session_start) \
         LIMIT $1 \
         FOR NO KEY UPDATE OF l SKIP LOCKED";
    /// Worker: forget the list of backends read earlier in this transaction.
    FRESH_ACTIVITY = "SELECT pg_catalog.pg_stat_clear_snapshot()";
    /// Worker: of the sessions `$2` (pids) / `$3` (starts) of the leases `$1`,
    /// the keys whose session is gone, by a fresh read of the backends. Their
    /// rows are locked by then, so no session can bind them meanwhile.
    STILL_ORPHANED = "SELECT c.key \
           FROM unnest($1::text[], $2::int[], $3::timestamptz[]) AS c(key, pid, started) \
          WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_stat_get_activity(c.pid) a \
                             WHERE a.backend_start = c.started)";
    /// le_lease: the row of `$1` as stored; the caller applies the clock.
    LEASE_ROW = concat!(
        "SELECT holder, term, ",
        expiry_of!("leaderlock."),
        ", value FROM @extschema@.leaderlock WHERE key = $1"
    );
    /// Worker: when to check next, as of `$1`: the earliest recheck_at still
    /// ahead (an index probe), or the real expiry of a lease whose recheck_at
    /// has passed (few: leases that stopped renewing, or lapsed rows the last
    /// check had to skip, which show up here as already past).
    NEXT_CHECK = "SELECT least( \
           (SELECT min(expires_at) FROM @extschema@.leaderlock \
             WHERE holder IS NOT NULL AND recheck_at <= $1), \
           (SELECT min(recheck_at) FROM @extschema@.leaderlock \
             WHERE holder IS NOT NULL AND recheck_at > $1))";
    /// The holder moves its live lease `$1`, its row locked, into session
    /// `$2` (expires_at `$3`: infinity) or out of sessions (`$2` NULL,
    /// expires_at `$3` = now + ttl); ttl `$4`, renewed at `$5`; bound to
    /// the backend of pid `$6` started at `$7` from now on (contract 10), or
    /// to none (NULL). Same term.
    REBIND = "UPDATE @extschema@.leaderlock \
            SET session = $2::uuid, expires_at = $3, recheck_at = $3, ttl = $4, renewed_at = $5, \
                session_pid = $6, session_start = $7 \
          WHERE key = $1 \
      RETURNING term";
}
