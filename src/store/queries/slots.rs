//! Statements on `leaderlock_slots`: the tenures of keys of many slots
//! (contract 17).

use leaderlock_protocol::{held_by, lapsed, live, next_term, not_live, of_term};

/// The taken slots of key `$1` at `$now`: how many (`n`) and the earliest
/// end (`earliest`). Taken: a live tenure (under a session, while the
/// session is live), or a vacant slot whose lock-delay runs (contract 21).
macro_rules! taken_slots {
    ($now:literal) => {
        concat!(
            "SELECT count(*) AS n, min(e) AS earliest FROM ( \
               SELECT CASE WHEN holder IS NULL THEN delayed_until ELSE ",
            expiry_of!("leaderlock_slots."),
            " END AS e FROM @extschema@.leaderlock_slots WHERE key = $1) t \
             WHERE e > ",
            $now
        )
    };
}

/// The latest tenure id `$id` holds on key `$1`, read without locking:
/// slot, term, expires_at (`e`), whether the caller `$caller` may act as
/// its owner (`owned`), session.
macro_rules! own_slot {
    ($id:literal, $caller:literal) => {
        concat!(
            "SELECT slot, term, ",
            expiry_of!("leaderlock_slots."),
            " AS e, ",
            owned_by!($caller),
            " AS owned, session FROM @extschema@.leaderlock_slots \
              WHERE key = $1 AND holder = ",
            $id,
            " ORDER BY 4 DESC, 3 DESC LIMIT 1"
        )
    };
}

statements! {
    /// What an acquisition of key `$1` at `$2` reads, without locking, in
    /// one statement: the taken slots, then id `$3`'s latest tenure as
    /// `READ_OWN_SLOT` reads it for the caller `$4` (NULLs when it has none),
    /// then the lapsed sessions (at `$2`) that still hold a slot of the key
    /// (the acquisition ends them first, and reads again).
    SLOT_SUMMARY = concat!(
        "SELECT t.n, t.earliest, o.slot, o.term, o.e, o.owned, o.session, \
                (SELECT pg_catalog.array_agg(DISTINCT y.session) \
                   FROM @extschema@.leaderlock_slots y \
                  WHERE y.key = $1 AND y.holder IS NOT NULL AND y.session IS NOT NULL \
                    AND NOT ", session_live!("y.", "$2"), ") FROM (",
        taken_slots!("$2"),
        ") t LEFT JOIN LATERAL (",
        own_slot!("$3", "$4"),
        ") o ON true"
    );
    /// Snapshot read of the tenure `$2` holds on key `$1` (its latest one),
    /// without locking: slot, term, expires_at, and whether the caller `$3`
    /// may act as its owner.
    READ_OWN_SLOT = own_slot!("$2", "$3");
    /// What a take of a slot of key `$1` by id `$2` reads once the key's row
    /// is locked (`LOCK_KEY_HEAD`), in one statement whose snapshot is
    /// taken after that lock, so that every tenure started by then is in
    /// it (a tenure starts only under the lock): the end of id `$2`'s live
    /// tenure of the key (whoever owns it: an id holds one tenure of a key
    /// at most); the first slot of 1 to `$3` no tenure lives in nor a
    /// lock-delay runs in, locked, skipping rows other transactions hold
    /// (vacant, or lapsed: its holder returned; a tenure under a session is
    /// stored live, only its end vacates it), and its holder; the lowest
    /// number of 1 to `$3` with no row yet; the taken slots and their
    /// earliest end.
    SLOT_TAKE = concat!(
        "SELECT (SELECT min(", expiry_of!("o."), ") FROM @extschema@.leaderlock_slots o \
                  WHERE o.key = $1 AND ", held_by!("o.", "$2", "@extschema@.le_now()"), " AND ",
        session_live!("o.", "@extschema@.le_now()"), "), \
                f.slot, f.holder, \
                (SELECT min(n) FROM pg_catalog.generate_series(1, $3) AS n \
                  WHERE NOT EXISTS (SELECT 1 FROM @extschema@.leaderlock_slots x \
                                     WHERE x.key = $1 AND x.slot = n)), \
                t.n, t.earliest \
           FROM (", taken_slots!("@extschema@.le_now()"), ") t \
           LEFT JOIN LATERAL (SELECT slot, holder FROM @extschema@.leaderlock_slots \
                  WHERE key = $1 AND slot <= $3 \
                    AND ", not_live!("@extschema@.le_now()"), " \
                    AND (delayed_until IS NULL OR delayed_until <= @extschema@.le_now()) \
                  ORDER BY slot LIMIT 1 \
                  FOR NO KEY UPDATE SKIP LOCKED) f ON true"
    );
    /// A new tenure in slot `$2` of key `$1`, whose row is locked, in one
    /// statement: the key's next term (the timeline's floor `$4` after a
    /// failover, contract 8.1), counted as a tenure, the key admitting `$11`
    /// slots from now on (its row keeps no holder: a lapsed one is vacated
    /// and counted as an expiry); then the tenure, in the free slot's row
    /// `SLOT_TAKE` locked, or a new row (which only a holder of the key's row
    /// lock writes). The other parameters are `START_SLOT`'s. Returns the
    /// term.
    TAKE_SLOT = concat!(
        "WITH t AS (UPDATE @extschema@.leaderlock \
            SET holder = NULL, term = ", next_term!("$4"), ", tenures = tenures + 1, \
                changed_at = $5, slots = $11, value = NULL, session_pid = NULL, \
                session_start = NULL, owner = NULL, \
                expiries = expiries + CASE WHEN holder IS NULL THEN 0 ELSE 1 END \
          WHERE key = $1 \
          RETURNING term) \
         INSERT INTO @extschema@.leaderlock_slots AS s \
           (key, slot, holder, term, acquired_at, renewed_at, expires_at, ttl, recheck_at, \
            value, owner, changed_at, session) \
         SELECT $1, $2, $3, t.term, $5, $5, $6, $7, $6, $8::jsonb, $9::oid, $5, $10::uuid FROM t \
         ON CONFLICT (key, slot) DO UPDATE \
            SET holder = $3, term = excluded.term, acquired_at = $5, renewed_at = $5, \
                expires_at = $6, ttl = $7, recheck_at = $6, value = $8::jsonb, owner = $9::oid, \
                changed_at = $5, session = $10::uuid, delayed_until = NULL, \
                expiries = s.expiries + CASE WHEN s.holder IS NULL THEN 0 ELSE 1 END \
      RETURNING term"
    );
    /// Changing key `$1`'s slots, its row locked: lock its tenures with a
    /// holder (lapsed ones: live ones make it 22023) in slots above `$2`,
    /// skipping rows other transactions hold (a fenced transaction's share
    /// lock, the worker) and tenures under a session (only its end vacates
    /// them: `STALE_TENURES` counts them, so the change waits for it).
    /// Returns key, holder, term, expires_at, slot.
    LOCK_STALE_TENURES = "SELECT key, holder, term, expires_at, slot \
           FROM @extschema@.leaderlock_slots \
          WHERE key = $1 AND slot > $2 AND holder IS NOT NULL AND session IS NULL \
          FOR NO KEY UPDATE SKIP LOCKED";
    /// How many tenures with a holder key `$1` has in slots above `$2`.
    STALE_TENURES = "SELECT count(*) FROM @extschema@.leaderlock_slots \
          WHERE key = $1 AND slot > $2 AND holder IS NOT NULL";
    /// A new tenure in slot `$2` of key `$1` (a new row, or the locked free
    /// one). `$3` id, `$4` term, `$5` now, `$6` expires_at (and recheck_at),
    /// `$7` ttl, `$8` value as jsonb text or NULL, `$9` the caller, who owns it,
    /// `$10` the session it is held under (then `$6` is infinity), or NULL.
    /// A lapsed tenure taken over before the worker vacated it counts as an
    /// expiry.
    START_SLOT = "INSERT INTO @extschema@.leaderlock_slots AS s \
           (key, slot, holder, term, acquired_at, renewed_at, expires_at, ttl, recheck_at, \
            value, owner, changed_at, session) \
         VALUES ($1, $2, $3, $4, $5, $5, $6, $7, $6, $8::jsonb, $9::oid, $5, $10::uuid) \
         ON CONFLICT (key, slot) DO UPDATE \
            SET holder = $3, term = $4, acquired_at = $5, renewed_at = $5, expires_at = $6, \
                ttl = $7, recheck_at = $6, value = $8::jsonb, owner = $9::oid, changed_at = $5, \
                session = $10::uuid, delayed_until = NULL, \
                expiries = s.expiries + CASE WHEN s.holder IS NULL THEN 0 ELSE 1 END";
    /// `RENEW` for a tenure of a key of many slots: the one `$2` holds live
    /// on key `$1` at `$3` (in term `$6`, or any), owned by a role the caller
    /// `$5` is a member of, by `$4` or its own ttl. Returns the new expiry,
    /// the term, the slot.
    RENEW_SLOT = concat!(
        "UPDATE @extschema@.leaderlock_slots SET ",
        renewal!("$3", "coalesce($4, ttl)"),
        ", ttl = coalesce($4, ttl) \
          WHERE key = $1 AND ", held_by!("$2", "$3"), " AND session IS NULL \
            AND slot = (SELECT slot FROM @extschema@.leaderlock_slots \
                         WHERE key = $1 AND ", held_by!("$2", "$3"), " AND session IS NULL AND ",
        of_term!("$6"),
        " AND ",
        owned_by!("$5"),
        " LIMIT 1 FOR NO KEY UPDATE SKIP LOCKED) \
      RETURNING expires_at, term, slot"
    );
    /// `LOCK_OWN` for a tenure of a key of many slots: slot, term, expires_at.
    LOCK_OWN_SLOT = concat!(
        "SELECT slot, term, ",
        expiry_of!("leaderlock_slots."),
        " FROM @extschema@.leaderlock_slots \
         WHERE key = $1 AND ", held_by!("$2", "@extschema@.le_now()"), " AND ",
        session_live!("leaderlock_slots.", "@extschema@.le_now()"),
        " AND ",
        owned_by!("$3"),
        " LIMIT 1 FOR NO KEY UPDATE SKIP LOCKED"
    );
    /// `SHARE_LOCK_LEASE` for slot `$2` of key `$1`: holder, term,
    /// expires_at, and whether the caller `$3` may act as its owner.
    SHARE_LOCK_SLOT = concat!(
        "SELECT holder, term, ",
        expiry_of!("leaderlock_slots."),
        ", ",
        owned_by!("$3"),
        " FROM @extschema@.leaderlock_slots WHERE key = $1 AND slot = $2 FOR SHARE"
    );
    /// `VACATE` for slot `$2` of key `$1`, locked and live. `$3` now.
    VACATE_SLOT = "UPDATE @extschema@.leaderlock_slots \
            SET holder = NULL, expires_at = $3, value = NULL, owner = NULL, \
                releases = releases + 1, changed_at = $3 \
          WHERE key = $1 AND slot = $2";
    /// `SET_VALUE` for slot `$2` of key `$1`; `$3` value as jsonb text or NULL.
    SET_SLOT_VALUE =
        "UPDATE @extschema@.leaderlock_slots SET value = $3::jsonb WHERE key = $1 AND slot = $2";
    /// le_force_release on a key of many slots: lock its live tenures,
    /// waiting for transactions that hold them (as `LOCK_LIVE`).
    LOCK_LIVE_SLOTS = concat!("SELECT slot, holder, term FROM @extschema@.leaderlock_slots \
         WHERE key = $1 AND ", live!("@extschema@.le_now()"), " \
           AND ", session_live!("leaderlock_slots.", "@extschema@.le_now()"), " \
         ORDER BY slot \
         FOR NO KEY UPDATE");
    /// le_holders: the live tenures of key `$1` at `$2`, by slot.
    HOLDERS = concat!("SELECT holder, term, ",
        expiry_of!("leaderlock_slots."),
        ", value FROM @extschema@.leaderlock_slots \
         WHERE key = $1 AND ", live!("$2"), " AND ", session_live!("leaderlock_slots.", "$2"), " \
         ORDER BY slot");
    /// Worker: lock up to `$2` tenures of many-slot keys lapsed at `$1`, as
    /// `LOCK_LAPSED`, with their key's slots (for the payloads).
    LOCK_LAPSED_SLOTS = concat!("SELECT s.key, s.holder, s.term, s.expires_at, s.slot, \
                (SELECT h.slots FROM @extschema@.leaderlock h WHERE h.key = s.key) \
           FROM @extschema@.leaderlock_slots s \
          WHERE s.recheck_at <= $1 AND ", lapsed!("s.", "$1"), " \
          ORDER BY s.recheck_at \
          LIMIT $2 \
          FOR NO KEY UPDATE OF s SKIP LOCKED");
    /// Worker: vacate the tenures just locked: keys `$1`, slots `$2`, `$3` now.
    VACATE_SLOTS = "UPDATE @extschema@.leaderlock_slots s \
            SET holder = NULL, value = NULL, owner = NULL, expiries = s.expiries + 1, \
                changed_at = $3 \
           FROM ROWS FROM (pg_catalog.unnest($1::text[]), pg_catalog.unnest($2::int[])) AS v(key, slot) \
          WHERE s.key = v.key AND s.slot = v.slot";
    /// Worker: `NEXT_CHECK` over the tenures of many-slot keys.
    NEXT_CHECK_SLOTS = "SELECT least( \
           (SELECT min(expires_at) FROM @extschema@.leaderlock_slots \
             WHERE holder IS NOT NULL AND recheck_at <= $1), \
           (SELECT min(recheck_at) FROM @extschema@.leaderlock_slots \
             WHERE holder IS NOT NULL AND recheck_at > $1))";
    /// `RENEW_ALL` over the tenures of many-slot keys `$1` holds.
    RENEW_ALL_SLOTS = concat!(
        "WITH renewed AS ( \
           UPDATE @extschema@.leaderlock_slots l SET ",
        renewal!("$2", "l.ttl"),
        " \
             FROM (SELECT key, slot FROM @extschema@.leaderlock_slots \
                    WHERE ", held_by!("$1", "$2"), " AND session IS NULL AND ",
        owned_by!("$3"),
        " FOR NO KEY UPDATE SKIP LOCKED) own \
            WHERE l.key = own.key AND l.slot = own.slot AND ", held_by!("l.", "$1", "$2"), " \
        RETURNING l.expires_at) \
         SELECT count(*), min(expires_at) FROM renewed"
    );
    /// `LOCK_ALL_OWN` over the tenures of many-slot keys: key, slot, term.
    LOCK_ALL_OWN_SLOTS = concat!(
        "SELECT key, slot, term FROM @extschema@.leaderlock_slots \
          WHERE ", held_by!("$1", "@extschema@.le_now()"), " AND ",
        session_live!("leaderlock_slots.", "@extschema@.le_now()"),
        " AND ",
        owned_by!("$2"),
        " FOR NO KEY UPDATE SKIP LOCKED"
    );
    /// `VACATE_LIVE_KEYS` for tenures: keys `$1`, slots `$2`, still live at
    /// `$3`. Returns key, term and the key's slots of each.
    VACATE_LIVE_SLOTS = concat!("UPDATE @extschema@.leaderlock_slots s \
            SET holder = NULL, expires_at = $3, value = NULL, owner = NULL, \
                releases = s.releases + 1, changed_at = $3 \
           FROM ROWS FROM (pg_catalog.unnest($1::text[]), pg_catalog.unnest($2::int[])) AS v(key, slot) \
          WHERE s.key = v.key AND s.slot = v.slot AND ", live!("s.", "$3"), " \
      RETURNING s.key, s.term, \
                (SELECT h.slots FROM @extschema@.leaderlock h WHERE h.key = s.key)");
    /// `REBIND` for the holder's live tenure in slot `$6` of key `$1` (its
    /// row locked); not session-bound (contract 10 is for keys of one slot).
    REBIND_SLOT = "UPDATE @extschema@.leaderlock_slots \
            SET session = $2::uuid, expires_at = $3, recheck_at = $3, ttl = $4, renewed_at = $5 \
          WHERE key = $1 AND slot = $6 \
      RETURNING term";
}
