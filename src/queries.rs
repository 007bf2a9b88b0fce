//! Every SQL statement the extension runs, in one place.
//!
//! All of them take their values as bind parameters; none is ever built from
//! user input. They run with `search_path = pg_catalog, pg_temp`, so every
//! function, operator and type resolves in pg_catalog only, and their
//! operands have exact types (no implicit cast could make an operator of
//! another schema the best match). The extension's own objects are written
//! `@extschema@.name`: `plans.rs` puts in the schema the extension is in,
//! by OID (`call.rs`), never a name fixed at install time.
//!
//! The lease rules in them (liveness, the next term, an expiry, a renewal
//! of one tenure) are the macros of `leaderlock_protocol::sql`, which a
//! unit test holds to the functions the model checks; no statement spells
//! one out itself (the worker's cue, recheck_at, is not a rule: it only
//! says when to look).
//!
//! Row locks are always taken with `SKIP LOCKED` where the contract says a
//! call must not wait (3.1, 3.2, 5), and only on rows the caller may change,
//! so a rival that merely tries never blocks the holder.

use leaderlock_protocol::{expiry, held_by, lapsed, live, next_term, not_live, of_term};

/// Whether the calling role may act on a lease as its owner (contract 13):
/// a member of the role that acquired it (superusers are members of
/// every role), or anyone for a tenure from before 0.4.0 (no owner).
/// `$N` below is the caller: the session's current role.
macro_rules! owned_by {
    ($param:literal) => {
        concat!(
            "(owner IS NULL OR pg_catalog.pg_has_role(",
            $param,
            "::oid, owner, 'MEMBER'))"
        )
    };
}

/// Contract 21: the expiry the rules apply to a row of `leaderlock`: its
/// own, or, for a tenure held under a session (stored with expires_at
/// infinity), its session's; -infinity once the session's row is gone.
macro_rules! expiry_of {
    ($p:literal) => {
        concat!(
            "(CASE WHEN ",
            $p,
            "session IS NULL OR ",
            $p,
            "holder IS NULL THEN ",
            $p,
            "expires_at \
             ELSE coalesce((SELECT x.expires_at FROM @extschema@.leaderlock_sessions x \
                             WHERE x.session = ",
            $p,
            "session), '-infinity'::timestamptz) END)"
        )
    };
}

/// Contract 21: a row's session, if it names one, is live at `$now` (rows
/// held under no session pass). A scalar sub-select, not EXISTS: the
/// planner may turn an EXISTS under OR into a hashed sub-plan that reads
/// every session; this one is always a lookup by the session's key.
macro_rules! session_live {
    ($p:literal, $now:literal) => {
        concat!(
            "(",
            $p,
            "session IS NULL OR coalesce((SELECT x.expires_at FROM @extschema@.leaderlock_sessions x \
              WHERE x.session = ",
            $p,
            "session), '-infinity'::timestamptz) > ",
            $now,
            ")"
        )
    };
}

/// The SET list of a renewal at `$now` by `$ttl` (SQL text). recheck_at,
/// the worker's indexed cue, is kept when it is still between half a ttl
/// from now and the new expiry, so the update changes no indexed column
/// and is HOT; otherwise it becomes the new expiry.
macro_rules! renewal {
    ($now:literal, $ttl:literal) => {
        concat!(
            "renewed_at = ",
            $now,
            ", expires_at = ",
            expiry!($now, $ttl),
            ", ",
            "recheck_at = CASE WHEN recheck_at <= ",
            expiry!($now, $ttl),
            " AND recheck_at >= ",
            $now,
            " + ",
            $ttl,
            " / 2.0::float8 THEN recheck_at ",
            "ELSE ",
            expiry!($now, $ttl),
            " END"
        )
    };
}

/// Defines each statement as a `pub const` of this module and lists them
/// all, by name, in `ALL`: the plan test iterates it, and it is what
/// `bench/statements.json` holds for the benchmarks (a unit test keeps that
/// file equal to it).
macro_rules! statements {
    ($($(#[$doc:meta])* $name:ident = $sql:expr;)*) => {
        $($(#[$doc])* pub const $name: &str = $sql;)*

        /// Every statement of this module: (name, SQL).
        #[cfg(any(test, feature = "pg_test"))]
        pub const ALL: &[(&str, &str)] = &[$((stringify!($name), $name)),*];
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

    /// `LIVE_HOLDER` on the 0.4.0 schema (no sessions).
    LIVE_HOLDER_0_4 =
        concat!("SELECT holder FROM @extschema@.leaderlock WHERE key = $1 AND ", live!("$2"));

    /// Snapshot read of a lease, without locking it, whether the caller
    /// `$2` may act as its owner, and how many slots the key admits. `$1` key.
    READ_LEASE = concat!(
        "SELECT holder, term, ",
        expiry_of!("leaderlock."),
        ", ",
        owned_by!("$2"),
        ", slots, session, delayed_until FROM @extschema@.leaderlock WHERE key = $1"
    );

    /// `READ_LEASE` on the 0.4.0 schema (one slot per key).
    READ_LEASE_0_4 = concat!(
        "SELECT holder, term, expires_at, ",
        owned_by!("$2"),
        ", 1 FROM @extschema@.leaderlock WHERE key = $1"
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

    /// `LOCK_ACQUIRABLE` on the 0.4.0 schema (every key of one slot). Above,
    /// `slots = 1`: a key that became one of many slots since it was read
    /// is not taken as a key of one holder (contract 17).
    LOCK_ACQUIRABLE_0_4 = concat!(
        "SELECT holder, term, expires_at, true FROM @extschema@.leaderlock \
         WHERE key = $1 \
           AND (",
        not_live!("pg_catalog.clock_timestamp()"),
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

    /// `LOCK_OWN` on a schema before 0.5.0, which has no `le_now`: the wall
    /// clock, as then.
    LOCK_OWN_0_4 = concat!(
        "SELECT term, expires_at FROM @extschema@.leaderlock \
         WHERE key = $1 AND ", held_by!("$2", "pg_catalog.clock_timestamp()"), " AND ",
        owned_by!("$3"),
        " FOR NO KEY UPDATE SKIP LOCKED"
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

    /// `RENEW` on the 0.4.0 schema (no sessions).
    RENEW_0_4 = concat!(
        "UPDATE @extschema@.leaderlock SET ",
        renewal!("$3", "coalesce($4, ttl)"),
        ", ttl = coalesce($4, ttl), owner = coalesce(owner, $5::oid) \
          WHERE key = $1 AND ", held_by!("$2", "$3"), " \
            AND key = (SELECT key FROM @extschema@.leaderlock \
                        WHERE key = $1 AND ", held_by!("$2", "$3"), " AND ",
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

    /// `INSERT_FIRST_TERM` on the 0.4.0 schema (no sessions).
    INSERT_FIRST_TERM_0_4 = "INSERT INTO @extschema@.leaderlock \
           (key, holder, term, acquired_at, renewed_at, expires_at, ttl, recheck_at, \
            value, session_pid, session_start, owner, tenures, changed_at) \
         VALUES ($1, $2, $6, $3, $3, $4, $5, $4, $7::jsonb, $8, $9, $10::oid, 1, $3) \
         ON CONFLICT (key) DO NOTHING \
         RETURNING term";

    /// A new tenure on a locked row: vacant or lapsed before. The term grows by
    /// one, or jumps to the timeline's floor after a failover (contract 8.1).
    /// The value, the session binding and the owner are the new tenure's own.
    /// A lapsed lease taken over before the worker vacated it counts as an
    /// expiry too. Parameters as for `INSERT_FIRST_TERM`.
    START_TERM = concat!("UPDATE @extschema@.leaderlock \
            SET holder = $2, term = ", next_term!("$6"), ", acquired_at = $3, \
                renewed_at = $3, expires_at = $4, ttl = $5, recheck_at = $4, \
                value = $7::jsonb, session_pid = $8, session_start = $9, \
                owner = $10::oid, tenures = tenures + 1, changed_at = $3, \
                session = $11::uuid, delayed_until = NULL, \
                expiries = expiries + CASE WHEN holder IS NULL THEN 0 ELSE 1 END \
          WHERE key = $1 \
      RETURNING term");

    /// `START_TERM` on the 0.4.0 schema (no sessions).
    START_TERM_0_4 = concat!("UPDATE @extschema@.leaderlock \
            SET holder = $2, term = ", next_term!("$6"), ", acquired_at = $3, \
                renewed_at = $3, expires_at = $4, ttl = $5, recheck_at = $4, \
                value = $7::jsonb, session_pid = $8, session_start = $9, \
                owner = $10::oid, tenures = tenures + 1, changed_at = $3, \
                expiries = expiries + CASE WHEN holder IS NULL THEN 0 ELSE 1 END \
          WHERE key = $1 \
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

    /// `SHARE_LOCK_LEASE` on the 0.4.0 schema (no sessions).
    SHARE_LOCK_LEASE_0_4 = concat!(
        "SELECT holder, term, expires_at, ",
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

    /// `RENEW_ALL` on the 0.4.0 schema (no sessions).
    RENEW_ALL_0_4 = concat!(
        "WITH renewed AS ( \
           UPDATE @extschema@.leaderlock l SET ",
        renewal!("$2", "l.ttl"),
        ", owner = coalesce(l.owner, $3::oid) \
             FROM (SELECT key FROM @extschema@.leaderlock \
                    WHERE ", held_by!("$1", "$2"), " AND ",
        owned_by!("$3"),
        " FOR NO KEY UPDATE SKIP LOCKED) own \
            WHERE l.key = own.key AND ", held_by!("l.", "$1", "$2"), " \
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

    /// `LOCK_ALL_OWN` on the 0.4.0 schema (no sessions).
    LOCK_ALL_OWN_0_4 = concat!(
        "SELECT key, term FROM @extschema@.leaderlock \
          WHERE ", held_by!("$1", "@extschema@.le_now()"), " AND ",
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
    /// delays no holder. Returns the lapsed holder, if any, and the slots.
    LOCK_KEY_HEAD = concat!("SELECT holder, slots FROM @extschema@.leaderlock \
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

    /// The next term of a key whose row is locked: +1, or the timeline's
    /// floor `$2` after a failover (contract 8.1); counted as a tenure. The
    /// row keeps no holder (a lapsed one is vacated and counted as an
    /// expiry) and admits `$4` slots from now on. `$1` key, `$3` now.
    ISSUE_TERM = concat!("UPDATE @extschema@.leaderlock \
            SET holder = NULL, term = ", next_term!("$2"), ", tenures = tenures + 1, \
                changed_at = $3, slots = $4, value = NULL, session_pid = NULL, \
                session_start = NULL, owner = NULL, \
                expiries = expiries + CASE WHEN holder IS NULL THEN 0 ELSE 1 END \
          WHERE key = $1 \
      RETURNING term");

    /// A key of many slots with no live holder, its row locked, admits one
    /// holder from now on. `$1` key.
    SET_ONE_SLOT = "UPDATE @extschema@.leaderlock SET slots = 1 WHERE key = $1";

    /// The taken slots of key `$1` at `$2`: how many, and the earliest end.
    /// Taken: a live tenure (under a session, while the session is live),
    /// or a vacant slot whose lock-delay runs (contract 21).
    LIVE_SLOTS = concat!("SELECT count(*), min(e) FROM ( \
           SELECT CASE WHEN holder IS NULL THEN delayed_until ELSE ",
        expiry_of!("leaderlock_slots."),
        " END AS e FROM @extschema@.leaderlock_slots WHERE key = $1) t \
         WHERE e > $2");

    /// Snapshot read of the tenure `$2` holds on key `$1` (its latest one),
    /// without locking: slot, term, expires_at, and whether the caller `$3`
    /// may act as its owner.
    READ_OWN_SLOT = concat!(
        "SELECT slot, term, ",
        expiry_of!("leaderlock_slots."),
        ", ",
        owned_by!("$3"),
        ", session FROM @extschema@.leaderlock_slots WHERE key = $1 AND holder = $2 \
         ORDER BY 4 DESC, 3 DESC LIMIT 1"
    );

    /// Under the key's row lock: the earliest end of a live tenure of key
    /// `$1` held by id `$2` (whoever owns it), or NULL. An id holds one
    /// tenure of a key at most, as it holds a key of one slot.
    LIVE_TENURE_OF = concat!("SELECT min(", expiry_of!("leaderlock_slots."), ") \
          FROM @extschema@.leaderlock_slots \
         WHERE key = $1 AND ", held_by!("$2", "@extschema@.le_now()"), " AND ",
        session_live!("leaderlock_slots.", "@extschema@.le_now()"));

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

    /// Lock the first free slot of key `$1` among 1 to `$2`: vacant, or
    /// lapsed (its holder returned), skipping rows other transactions hold.
    /// A tenure under a session is stored live (only its end vacates it);
    /// a vacant slot whose lock-delay runs is not free (contract 21).
    LOCK_FREE_SLOT = concat!("SELECT slot, holder FROM @extschema@.leaderlock_slots \
         WHERE key = $1 AND slot <= $2 \
           AND ", not_live!("@extschema@.le_now()"), " \
           AND (delayed_until IS NULL OR delayed_until <= @extschema@.le_now()) \
         ORDER BY slot LIMIT 1 \
         FOR NO KEY UPDATE SKIP LOCKED");

    /// The lowest slot number of 1 to `$2` that key `$1` has no row for yet.
    NEW_SLOT = "SELECT min(n) FROM pg_catalog.generate_series(1, $2) AS n \
         WHERE NOT EXISTS (SELECT 1 FROM @extschema@.leaderlock_slots \
                            WHERE key = $1 AND slot = n)";

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

    /// Every held tenure of a many-slot key lasts at least until `$1` + its
    /// ttl, as `OUTLAST_FAILOVER` does for the others.
    OUTLAST_FAILOVER_SLOTS = concat!("UPDATE @extschema@.leaderlock_slots s \
            SET expires_at = ", expiry!("$1", "s.ttl"), ", recheck_at = ", expiry!("$1", "s.ttl"), " \
           FROM @extschema@.leaderlock h \
          WHERE s.holder IS NOT NULL AND s.expires_at < ", expiry!("$1", "s.ttl"), " \
            AND h.key = s.key AND h.slots > 1 AND s.slot <= h.slots \
      RETURNING s.key");

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

    /// `LOCK_LIVE` on a schema before 0.5.0, which has no `le_now`: the wall
    /// clock, as then.
    LOCK_LIVE_0_4 = concat!("SELECT holder, term, expires_at, true FROM @extschema@.leaderlock \
         WHERE key = $1 AND ", live!("pg_catalog.clock_timestamp()"), " \
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

    /// `LEASE_ROW` on the 0.4.0 schema (no sessions).
    LEASE_ROW_0_4 =
        "SELECT holder, term, expires_at, value FROM @extschema@.leaderlock WHERE key = $1";

    // Statements for the schema of 0.3.0: the library serves it until ALTER
    // EXTENSION ... UPDATE. The same parameters as the current ones (those
    // they do not use are ignored), and no owner: anyone acts as owner.

    /// `READ_LEASE` on the 0.3.0 schema.
    READ_LEASE_0_3 =
        "SELECT holder, term, expires_at, true, 1 FROM @extschema@.leaderlock WHERE key = $1";

    /// `LOCK_ACQUIRABLE` on the 0.3.0 schema.
    LOCK_ACQUIRABLE_0_3 = concat!(
        "SELECT holder, term, expires_at, true FROM @extschema@.leaderlock \
         WHERE key = $1 AND (",
        not_live!("pg_catalog.clock_timestamp()"),
        " OR holder = $2) FOR NO KEY UPDATE SKIP LOCKED"
    );

    /// `LOCK_OWN` on the 0.3.0 schema.
    LOCK_OWN_0_3 = concat!("SELECT term, expires_at FROM @extschema@.leaderlock \
         WHERE key = $1 AND ", held_by!("$2", "pg_catalog.clock_timestamp()"), " \
         FOR NO KEY UPDATE SKIP LOCKED");

    /// `RENEW` on the 0.3.0 schema (whose le_renew names no term).
    RENEW_0_3 = concat!(
        "UPDATE @extschema@.leaderlock SET ",
        renewal!("$3", "coalesce($4, ttl)"),
        ", ttl = coalesce($4, ttl) \
          WHERE key = $1 AND ", held_by!("$2", "$3"), " \
            AND key = (SELECT key FROM @extschema@.leaderlock \
                        WHERE key = $1 AND ", held_by!("$2", "$3"), " \
                          FOR NO KEY UPDATE SKIP LOCKED) \
      RETURNING expires_at, term"
    );

    /// `SHARE_LOCK_LEASE` on the 0.3.0 schema.
    SHARE_LOCK_LEASE_0_3 =
        "SELECT holder, term, expires_at, true FROM @extschema@.leaderlock WHERE key = $1 FOR SHARE";

    /// `INSERT_FIRST_TERM` on the 0.3.0 schema.
    INSERT_FIRST_TERM_0_3 = "INSERT INTO @extschema@.leaderlock \
           (key, holder, term, acquired_at, renewed_at, expires_at, ttl, recheck_at, \
            value, session_pid, session_start) \
         VALUES ($1, $2, $6, $3, $3, $4, $5, $4, $7::jsonb, $8, $9) \
         ON CONFLICT (key) DO NOTHING \
         RETURNING term";

    /// `START_TERM` on the 0.3.0 schema.
    START_TERM_0_3 = concat!("UPDATE @extschema@.leaderlock \
            SET holder = $2, term = ", next_term!("$6"), ", acquired_at = $3, \
                renewed_at = $3, expires_at = $4, ttl = $5, recheck_at = $4, \
                value = $7::jsonb, session_pid = $8, session_start = $9 \
          WHERE key = $1 \
      RETURNING term");

    /// `VACATE` on the 0.3.0 schema.
    VACATE_0_3 = "UPDATE @extschema@.leaderlock \
            SET holder = NULL, expires_at = $2, value = NULL, session_pid = NULL, \
                session_start = NULL \
          WHERE key = $1";

    /// `VACATE_KEYS` on the 0.3.0 schema.
    VACATE_KEYS_0_3 = "UPDATE @extschema@.leaderlock \
            SET holder = NULL, value = NULL, session_pid = NULL, session_start = NULL \
          WHERE key = ANY($1)";

    // And for schemas before 0.3.0.

    /// `INSERT_FIRST_TERM` on a schema before 0.3.0 (`$7`-`$9` unused).
    INSERT_FIRST_TERM_0_2 = "INSERT INTO @extschema@.leaderlock \
           (key, holder, term, acquired_at, renewed_at, expires_at, ttl, recheck_at) \
         VALUES ($1, $2, $6, $3, $3, $4, $5, $4) \
         ON CONFLICT (key) DO NOTHING \
         RETURNING term";

    /// `START_TERM` on a schema before 0.3.0 (`$7`-`$9` unused).
    START_TERM_0_2 = concat!("UPDATE @extschema@.leaderlock \
            SET holder = $2, term = ", next_term!("$6"), ", acquired_at = $3, \
                renewed_at = $3, expires_at = $4, ttl = $5, recheck_at = $4 \
          WHERE key = $1 \
      RETURNING term");

    /// `VACATE` on a schema before 0.3.0.
    VACATE_0_2 =
        "UPDATE @extschema@.leaderlock SET holder = NULL, expires_at = $2 WHERE key = $1";

    /// `VACATE_KEYS` on a schema before 0.3.0.
    VACATE_KEYS_0_2 =
        "UPDATE @extschema@.leaderlock SET holder = NULL WHERE key = ANY($1)";

    /// Worker: when to check next, as of `$1`: the earliest recheck_at still
    /// ahead (an index probe), or the real expiry of a lease whose recheck_at
    /// has passed (few: leases that stopped renewing, or lapsed rows the last
    /// check had to skip, which show up here as already past).
    NEXT_CHECK = "SELECT least( \
           (SELECT min(expires_at) FROM @extschema@.leaderlock \
             WHERE holder IS NOT NULL AND recheck_at <= $1), \
           (SELECT min(recheck_at) FROM @extschema@.leaderlock \
             WHERE holder IS NOT NULL AND recheck_at > $1))";

    /// Workers: the schema of the extension `$1` (a catalog read, run before
    /// the schema is known, so not through `plans.rs`).
    EXTENSION_NAMESPACE =
        "SELECT extnamespace FROM pg_catalog.pg_extension WHERE oid = $1";

    /// Workers: their session settings, whatever a database's or role's
    /// defaults say (ALTER DATABASE ... SET is open to the database's owner,
    /// who is trusted with nothing of other roles' leases): the search path
    /// and index plans the functions pin (see above and `api.rs`);
    /// transactions that may write, at READ COMMITTED, never cut short; the
    /// worker's own role; no JIT, no parallel workers (the server's other
    /// users need those processes). Settings this server lacks (of another
    /// version) are skipped. synchronous_commit is left as configured.
    PIN_SESSION = "SELECT pg_catalog.count(pg_catalog.set_config(s.name, s.value, false)) \
         FROM (VALUES ('role', 'none'), ('search_path', 'pg_catalog, pg_temp'), \
                      ('enable_seqscan', 'off'), ('enable_indexscan', 'on'), \
                      ('enable_indexonlyscan', 'on'), ('enable_bitmapscan', 'on'), \
                      ('default_transaction_read_only', 'off'), \
                      ('default_transaction_isolation', 'read committed'), \
                      ('default_transaction_deferrable', 'off'), \
                      ('statement_timeout', '0'), ('lock_timeout', '0'), \
                      ('idle_in_transaction_session_timeout', '0'), \
                      ('transaction_timeout', '0'), ('jit', 'off'), \
                      ('max_parallel_workers_per_gather', '0'), \
                      ('debug_parallel_query', 'off'), ('force_parallel_mode', 'off')) \
              AS s(name, value) \
        WHERE pg_catalog.current_setting(s.name, true) IS NOT NULL";

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

    /// Contract 22: a job's row, made by its first claim; may wait only for a
    /// concurrent first claim (bounded by `tenure::insert_first`). `$1` job.
    INSERT_JOB = "INSERT INTO @extschema@.leaderlock_jobs (job, term, owner) \
         SELECT $1, coalesce((SELECT f.term FROM @extschema@.leaderlock_jobs f WHERE f.job = ''), 0), \
                $2::oid \
         ON CONFLICT (job) DO NOTHING RETURNING term";

    /// How many jobs role `$1` made that are still kept (contract 22's
    /// bound per role).
    JOBS_MADE_BY = "SELECT pg_catalog.count(*) FROM @extschema@.leaderlock_jobs WHERE owner = $1::oid";

    /// Retention, for every job: the jobs of up to `$3` runs due before
    /// `$1` that are finished or have no live claim at `$2`, locked to be
    /// pruned, never waiting (a job a claim holds waits for a later prune,
    /// and its claims skip it meanwhile: they take turns on its row).
    LOCK_JOBS_TO_PRUNE = concat!(
        "SELECT j.job FROM @extschema@.leaderlock_jobs j \
          WHERE j.job IN (SELECT r.job FROM @extschema@.leaderlock_runs r \
                           WHERE r.due < $1 AND (r.finished_at IS NOT NULL OR ",
        not_live!("$2"),
        ") ORDER BY r.due LIMIT $3) \
          FOR UPDATE SKIP LOCKED"
    );

    /// The runs of the locked jobs `$1` due before `$2` that are finished
    /// or have no live claim at `$3` (a run still going on keeps its row),
    /// never waiting (a run another transaction holds goes at a later
    /// prune); and no run due before `$2` of those jobs is claimed again.
    /// How many runs went.
    PRUNE_JOBS_RUNS = concat!(
        "WITH gone AS ( \
           DELETE FROM @extschema@.leaderlock_runs r \
            WHERE (r.job, r.due) IN (SELECT job, due FROM @extschema@.leaderlock_runs \
                                     WHERE job = ANY($1::text[]) AND due < $2 \
                                       AND (finished_at IS NOT NULL OR ",
        not_live!("$3"),
        ") FOR UPDATE SKIP LOCKED) \
           RETURNING 1), \
         marked AS ( \
           UPDATE @extschema@.leaderlock_jobs SET pruned_before = GREATEST(pruned_before, $2) \
            WHERE job = ANY($1::text[]) RETURNING 1) \
         SELECT pg_catalog.count(*) FROM gone"
    );

    /// The row of job '' (the highest term of jobs forgotten), made by the
    /// first prune that forgets a job. Its term.
    MAKE_JOBS_FLOOR = "INSERT INTO @extschema@.leaderlock_jobs (job, term) VALUES ('', 0) \
         ON CONFLICT (job) DO NOTHING RETURNING term";

    /// The row of job '' locked without waiting: whether it exists (its
    /// lock then taken, or not: another prune holds it).
    LOCK_JOBS_FLOOR = "SELECT EXISTS (SELECT FROM @extschema@.leaderlock_jobs WHERE job = ''), \
                (SELECT true FROM @extschema@.leaderlock_jobs WHERE job = '' FOR UPDATE SKIP LOCKED)";

    /// Of the locked jobs `$1`, those with no run left go; the locked row
    /// of job '' keeps the highest term they had, which a job made again
    /// starts from (contract 22: no term issued twice). How many went.
    FORGET_JOBS = "WITH gone AS ( \
           DELETE FROM @extschema@.leaderlock_jobs j \
            WHERE j.job = ANY($1::text[]) AND j.job <> '' \
              AND NOT EXISTS (SELECT FROM @extschema@.leaderlock_runs r WHERE r.job = j.job) \
           RETURNING j.term), \
         floor AS ( \
           UPDATE @extschema@.leaderlock_jobs SET term = GREATEST(term, (SELECT pg_catalog.max(g.term) FROM gone g)) \
            WHERE job = '' AND EXISTS (SELECT FROM gone) RETURNING 1) \
         SELECT pg_catalog.count(*) FROM gone";

    /// Whether job `$1`'s row exists (a snapshot read: a claim inserts it only
    /// when it does not, since an insert that meets a row another
    /// transaction has updated waits for that transaction).
    JOB_EXISTS = "SELECT true FROM @extschema@.leaderlock_jobs WHERE job = $1";

    /// Whether the run of job `$1` due at `$2` has a row (read under the
    /// job's lock, so nothing inserts it meanwhile; checked first, for the
    /// reason of `JOB_EXISTS`: its runner may be renewing it right now).
    RUN_EXISTS = "SELECT true FROM @extschema@.leaderlock_runs WHERE job = $1 AND due = $2";

    /// Lock a job's row, never waiting: claims of one job take turns on it,
    /// and only they lock it (renewals and finishes never touch it). `$1` job.
    /// Before when its runs were pruned.
    LOCK_JOB = "SELECT pruned_before FROM @extschema@.leaderlock_jobs WHERE job = $1 \
         FOR NO KEY UPDATE SKIP LOCKED";

    /// The job's next term, on its locked row (contract 8.1's floor `$2`).
    NEXT_JOB_TERM = concat!(
        "UPDATE @extschema@.leaderlock_jobs SET term = ",
        next_term!("$2"),
        " WHERE job = $1 RETURNING term"
    );

    /// A run's row, on its first claim, under its job's lock (so nothing else
    /// inserts it meanwhile). Whether it was new. `$1` job, `$2` due.
    INSERT_RUN = "INSERT INTO @extschema@.leaderlock_runs (job, due) VALUES ($1, $2) \
         ON CONFLICT (job, due) DO NOTHING RETURNING true";

    /// Retention, on a new run of job `$1`: its runs due before `$2` that are
    /// finished or have no live claim at `$3` (a run still going on keeps its
    /// row: its runner renews and finishes it), never waiting (a row another
    /// transaction holds goes at a later prune).
    PRUNE_RUNS = concat!(
        "DELETE FROM @extschema@.leaderlock_runs WHERE job = $1 AND due IN \
           (SELECT due FROM @extschema@.leaderlock_runs \
             WHERE job = $1 AND due < $2 AND (finished_at IS NOT NULL OR ",
        not_live!("$3"),
        ") FOR UPDATE SKIP LOCKED)"
    );

    /// What a prune of job `$1` up to `$2` leaves behind: no run due before
    /// `$2` is claimed again (a shorter retention never brings one back).
    MARK_PRUNED = "UPDATE @extschema@.leaderlock_jobs \
            SET pruned_before = GREATEST(pruned_before, $2) WHERE job = $1";

    /// Lock a run only if it may be claimed at `$3`: unfinished and without a
    /// live claim (a rival never locks the runner's row), never waiting.
    /// `$1` job, `$2` due. Its last claim's holder and term.
    LOCK_CLAIMABLE_RUN = concat!(
        "SELECT holder, term FROM @extschema@.leaderlock_runs \
          WHERE job = $1 AND due = $2 AND finished_at IS NULL AND ",
        not_live!("$3"),
        " FOR NO KEY UPDATE SKIP LOCKED"
    );

    /// A claim of a locked run: `$3` id, `$4` term, `$5` now, `$6` ttl, `$7`
    /// the caller, who owns it. `$1` job, `$2` due. Its expiry and attempt.
    CLAIM_RUN = concat!(
        "UPDATE @extschema@.leaderlock_runs \
            SET holder = $3, term = $4, claimed_at = $5, expires_at = ",
        expiry!("$5", "$6"),
        ", ttl = $6, owner = $7::oid, attempts = attempts + 1 \
          WHERE job = $1 AND due = $2 \
      RETURNING expires_at, attempts"
    );

    /// A locked run past its misfire grace, recorded missed once, at `$3`,
    /// with why (`$4`). `$1` job, `$2` due.
    MISS_RUN = "UPDATE @extschema@.leaderlock_runs \
            SET finished_at = $3, outcome = 'missed', detail = $4 \
          WHERE job = $1 AND due = $2";

    /// Extend the claim `$3` holds live at `$4` on an unfinished run by `$5`
    /// or its stored ttl, in one statement that never waits and locks only
    /// the caller's own claim (as `RENEW`). `$6` the caller, `$7` the claim's
    /// term or NULL for any. `$1` job, `$2` due. Its expiry and term.
    RENEW_RUN = concat!(
        "UPDATE @extschema@.leaderlock_runs \
            SET expires_at = ",
        expiry!("$4", "coalesce($5, ttl)"),
        ", ttl = coalesce($5, ttl) \
          WHERE job = $1 AND due = $2 AND finished_at IS NULL AND ",
        held_by!("$3", "$4"),
        " AND due = (SELECT due FROM @extschema@.leaderlock_runs \
                      WHERE job = $1 AND due = $2 AND finished_at IS NULL AND ",
        held_by!("$3", "$4"),
        " AND ",
        of_term!("$7"),
        " AND ",
        owned_by!("$6"),
        " FOR NO KEY UPDATE SKIP LOCKED) \
      RETURNING expires_at, term"
    );

    /// Finish the run whose last claim is `$3`'s of term `$4` (live, or lapsed
    /// and not claimed again since), never waiting: `$5` now, `$6` outcome,
    /// `$7` detail, `$8` the caller. `$1` job, `$2` due.
    FINISH_RUN = concat!(
        "UPDATE @extschema@.leaderlock_runs \
            SET finished_at = $5, outcome = $6, detail = $7, \
                expires_at = LEAST(expires_at, $5) \
          WHERE job = $1 AND due = $2 \
            AND due = (SELECT due FROM @extschema@.leaderlock_runs \
                        WHERE job = $1 AND due = $2 AND finished_at IS NULL \
                          AND holder = $3 AND term = $4::int8 AND ",
        owned_by!("$8"),
        " FOR NO KEY UPDATE SKIP LOCKED) \
      RETURNING term"
    );

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
    /// lock-delay for what is left).
    MARK_ENDED = "UPDATE @extschema@.leaderlock_sessions \
            SET expires_at = least(expires_at, $2), recheck_at = least(recheck_at, $2), \
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

    /// `REBIND` for the holder's live tenure in slot `$6` of key `$1` (its
    /// row locked); not session-bound (contract 10 is for keys of one slot).
    REBIND_SLOT = "UPDATE @extschema@.leaderlock_slots \
            SET session = $2::uuid, expires_at = $3, recheck_at = $3, ttl = $4, renewed_at = $5 \
          WHERE key = $1 AND slot = $6 \
      RETURNING term";

    /// Lapsed sessions (at `$2`) that still hold a slot of key `$1`: the
    /// next acquisition of the key ends them first.
    LAPSED_SLOT_SESSIONS = concat!("SELECT DISTINCT session FROM @extschema@.leaderlock_slots \
          WHERE key = $1 AND holder IS NOT NULL AND session IS NOT NULL \
            AND NOT ", session_live!("leaderlock_slots.", "$2"));

    /// Contract 8.3: this transaction commits as `synchronous_commit = on` does
    /// (WAL flushed, and on synchronous standbys when there are any), until it
    /// ends; set when the session asked for less.
    SYNC_COMMIT_ON = "SELECT pg_catalog.set_config('synchronous_commit', 'on', true)";

    /// Contract 23: records a transition, to be numbered, where
    /// `history::record` cannot write the row directly (the table changed
    /// behind the extension). `$1` at, `$2` event, `$3` key (or job), `$4`
    /// holder, `$5` term, `$6` the acting role (NULL: the worker), `$7` the
    /// notification's payload, kept as the text sent.
    RECORD_HISTORY = "INSERT INTO @extschema@.leaderlock_history_pending \
        (at, event, key, holder, term, role, payload) VALUES ($1, $2, $3, $4, $5, $6, $7)";

    /// The history's head row, locked for numbering and pruning, never
    /// waiting (a transaction doing so already numbers what is committed):
    /// its pruned_through.
    LOCK_HISTORY_HEAD = "SELECT pruned_through FROM @extschema@.leaderlock_history_head \
        FOR NO KEY UPDATE SKIP LOCKED";

    /// Moves the first `$3` committed pending rows into the history, with
    /// the next positions in recording order: after the highest given or
    /// pruned (`$1`), and at least the term floor `$2`, so positions never
    /// go back after a failover either (a new timeline's floor is above any
    /// position an older one could give). Under the head row's lock. How
    /// many, and the last, announced on channel `leaderlock_history` (a
    /// hint: readers then read the history, which they trust).
    NUMBER_HISTORY = "WITH p AS (\
            SELECT x.ctid AS row_id FROM @extschema@.leaderlock_history_pending x \
             ORDER BY x.seq LIMIT $3), \
          d AS (\
            DELETE FROM @extschema@.leaderlock_history_pending x \
             WHERE x.ctid = ANY (ARRAY(SELECT p.row_id FROM p)) \
            RETURNING x.seq, x.at, x.event, x.key, x.holder, x.term, x.role, x.payload), \
          base AS (\
            SELECT greatest(\
                       coalesce((SELECT max(position) FROM @extschema@.leaderlock_history), 0::bigint), \
                       $1, $2 - 1::bigint) AS b), \
          u AS (\
            INSERT INTO @extschema@.leaderlock_history \
                   (position, at, event, key, holder, term, role, payload) \
            SELECT base.b + pg_catalog.row_number() OVER (ORDER BY d.seq), d.at, d.event, d.key, \
                   d.holder, d.term, d.role, d.payload::pg_catalog.jsonb \
              FROM d, base \
            RETURNING position), \
          k AS (\
            UPDATE @extschema@.leaderlock_history_head SET kept = kept + (SELECT count(*) FROM u) \
             WHERE EXISTS (SELECT FROM u)) \
        SELECT count(*), max(position), \
               CASE WHEN count(*) > 0 \
                    THEN pg_catalog.pg_notify('leaderlock_history', max(position)::text) END \
          FROM u";

    /// Deletes the oldest numbered rows older than `$2` or beyond the
    /// newest `$3` (by the head's count of rows kept: positions jump at a
    /// failover), at most `$4`, as a prefix of positions only (so "pruned
    /// through" stays true of every position up to it), and moves the head
    /// (`$1`, its pruned_through) past them. Reads only the rows that go
    /// and two more (it runs at every numbering): `c` is the first row
    /// within the count, `k` the first from there young enough to stay.
    /// Rows at or below `$1` exist only
    /// after the documented step that follows a restore (pruned_through set
    /// above them, docs/history.md): the retention deletes them too, and the
    /// head never goes back. Under the head row's lock. How many went.
    PRUNE_HISTORY = "WITH c AS (\
            SELECT h.position FROM @extschema@.leaderlock_history h ORDER BY h.position \
            OFFSET least(greatest((SELECT d.kept FROM @extschema@.leaderlock_history_head d) - $3, \
                                  0::bigint), $4) \
             LIMIT 1), \
          k AS (\
            SELECT h.position FROM @extschema@.leaderlock_history h \
             WHERE h.position >= (SELECT c.position FROM c) AND h.at >= $2 \
             ORDER BY h.position LIMIT 1), \
          cut AS (\
            SELECT max(f.position) AS through FROM (\
              SELECT h.position FROM @extschema@.leaderlock_history h \
               WHERE h.position < coalesce((SELECT k.position FROM k), 9223372036854775807::bigint) \
               ORDER BY h.position LIMIT $4) f), \
          gone AS (\
            DELETE FROM @extschema@.leaderlock_history h USING cut \
             WHERE h.position <= cut.through RETURNING 1), \
          head AS (\
            UPDATE @extschema@.leaderlock_history_head \
               SET pruned_through = greatest($1, cut.through), \
                   kept = greatest(kept - (SELECT count(*) FROM gone), 0::bigint) \
              FROM cut WHERE cut.through IS NOT NULL) \
        SELECT count(*) FROM gone";
}

/// Every statement of this file on the table `leaderlock`, by name, with
/// the schema it is written for ("" the current one, or "0.3.0", "0.2.0").
/// The plan test in `src/tests.rs` runs each against 10,000 rows and fails
/// on a sequential scan, on a statement it has no sample arguments for, and
/// on a statement of `ALL` that names the table but is missing here.
#[cfg(any(test, feature = "pg_test"))]
pub const ON_THE_TABLE: &[(&str, &str, &str)] = &[
    ("SET_VALUE", "", SET_VALUE),
    ("LIVE_HOLDER", "", LIVE_HOLDER),
    ("READ_LEASE", "", READ_LEASE),
    ("READ_LEASE_0_4", "", READ_LEASE_0_4),
    ("LOCK_ACQUIRABLE", "", LOCK_ACQUIRABLE),
    ("LOCK_OWN", "", LOCK_OWN),
    ("LOCK_OWN_0_4", "", LOCK_OWN_0_4),
    ("RENEW", "", RENEW),
    ("INSERT_FIRST_TERM", "", INSERT_FIRST_TERM),
    ("START_TERM", "", START_TERM),
    ("VACATE", "", VACATE),
    ("SHARE_LOCK_LEASE", "", SHARE_LOCK_LEASE),
    ("VACATE_KEYS", "", VACATE_KEYS),
    ("RENEW_ALL", "", RENEW_ALL),
    ("LOCK_ALL_OWN", "", LOCK_ALL_OWN),
    ("VACATE_LIVE_KEYS", "", VACATE_LIVE_KEYS),
    ("LOCK_ABANDONED", "", LOCK_ABANDONED),
    ("KEY_SLOTS", "", KEY_SLOTS),
    ("LOCK_KEY_HEAD", "", LOCK_KEY_HEAD),
    ("INSERT_KEY_HEAD", "", INSERT_KEY_HEAD),
    ("ISSUE_TERM", "", ISSUE_TERM),
    ("LIVE_SLOTS", "", LIVE_SLOTS),
    ("LOCK_ACQUIRABLE_0_4", "", LOCK_ACQUIRABLE_0_4),
    ("LIVE_TENURE_OF", "", LIVE_TENURE_OF),
    ("LOCK_STALE_TENURES", "", LOCK_STALE_TENURES),
    ("STALE_TENURES", "", STALE_TENURES),
    ("SET_ONE_SLOT", "", SET_ONE_SLOT),
    ("READ_OWN_SLOT", "", READ_OWN_SLOT),
    ("LOCK_FREE_SLOT", "", LOCK_FREE_SLOT),
    ("NEW_SLOT", "", NEW_SLOT),
    ("START_SLOT", "", START_SLOT),
    ("RENEW_SLOT", "", RENEW_SLOT),
    ("LOCK_OWN_SLOT", "", LOCK_OWN_SLOT),
    ("SHARE_LOCK_SLOT", "", SHARE_LOCK_SLOT),
    ("VACATE_SLOT", "", VACATE_SLOT),
    ("SET_SLOT_VALUE", "", SET_SLOT_VALUE),
    ("LIFT_DELAY", "", LIFT_DELAY),
    ("LOCK_LIVE_SLOTS", "", LOCK_LIVE_SLOTS),
    ("HOLDERS", "", HOLDERS),
    ("LOCK_LAPSED_SLOTS", "", LOCK_LAPSED_SLOTS),
    ("VACATE_SLOTS", "", VACATE_SLOTS),
    ("NEXT_CHECK_SLOTS", "", NEXT_CHECK_SLOTS),
    ("RENEW_ALL_SLOTS", "", RENEW_ALL_SLOTS),
    ("LOCK_ALL_OWN_SLOTS", "", LOCK_ALL_OWN_SLOTS),
    ("VACATE_LIVE_SLOTS", "", VACATE_LIVE_SLOTS),
    ("LOCK_LIVE", "", LOCK_LIVE),
    ("LOCK_LIVE_0_4", "", LOCK_LIVE_0_4),
    ("LOCK_LAPSED", "", LOCK_LAPSED),
    ("LOCK_SESSION_LEASES", "", LOCK_SESSION_LEASES),
    ("SESSION_LEASES_LEFT", "", SESSION_LEASES_LEFT),
    ("LOCK_ORPHANED", "", LOCK_ORPHANED),
    ("LEASE_ROW", "", LEASE_ROW),
    ("NEXT_CHECK", "", NEXT_CHECK),
    ("RENEW_0_4", "", RENEW_0_4),
    ("SHARE_LOCK_LEASE_0_4", "", SHARE_LOCK_LEASE_0_4),
    ("LIVE_HOLDER_0_4", "", LIVE_HOLDER_0_4),
    ("LEASE_ROW_0_4", "", LEASE_ROW_0_4),
    ("RENEW_ALL_0_4", "", RENEW_ALL_0_4),
    ("LOCK_ALL_OWN_0_4", "", LOCK_ALL_OWN_0_4),
    ("INSERT_FIRST_TERM_0_4", "", INSERT_FIRST_TERM_0_4),
    ("START_TERM_0_4", "", START_TERM_0_4),
    ("LOCK_SESSION_KEYS", "", LOCK_SESSION_KEYS),
    ("LOCK_SESSION_KEYS_WAIT", "", LOCK_SESSION_KEYS_WAIT),
    ("SESSION_KEYS_LEFT", "", SESSION_KEYS_LEFT),
    ("VACATE_SESSION_KEYS", "", VACATE_SESSION_KEYS),
    ("SESSION_OF_KEY", "", SESSION_OF_KEY),
    ("RENEW_ALL_SESSIONS", "", RENEW_ALL_SESSIONS),
    ("REBIND", "", REBIND),
    ("LOCK_SESSION_SLOTS", "", LOCK_SESSION_SLOTS),
    ("LOCK_SESSION_SLOTS_WAIT", "", LOCK_SESSION_SLOTS_WAIT),
    ("VACATE_SESSION_SLOTS", "", VACATE_SESSION_SLOTS),
    ("REBIND_SLOT", "", REBIND_SLOT),
    ("LAPSED_SLOT_SESSIONS", "", LAPSED_SLOT_SESSIONS),
    ("READ_LEASE_0_3", "0.3.0", READ_LEASE_0_3),
    ("LOCK_ACQUIRABLE_0_3", "0.3.0", LOCK_ACQUIRABLE_0_3),
    ("LOCK_OWN_0_3", "0.3.0", LOCK_OWN_0_3),
    ("RENEW_0_3", "0.3.0", RENEW_0_3),
    ("SHARE_LOCK_LEASE_0_3", "0.3.0", SHARE_LOCK_LEASE_0_3),
    ("INSERT_FIRST_TERM_0_3", "0.3.0", INSERT_FIRST_TERM_0_3),
    ("START_TERM_0_3", "0.3.0", START_TERM_0_3),
    ("VACATE_0_3", "0.3.0", VACATE_0_3),
    ("VACATE_KEYS_0_3", "0.3.0", VACATE_KEYS_0_3),
    ("INSERT_FIRST_TERM_0_2", "0.2.0", INSERT_FIRST_TERM_0_2),
    ("START_TERM_0_2", "0.2.0", START_TERM_0_2),
    ("VACATE_0_2", "0.2.0", VACATE_0_2),
    ("VACATE_KEYS_0_2", "0.2.0", VACATE_KEYS_0_2),
];

/// Statements on the table that are not index lookups, on purpose: run
/// once per promotion, over every held lease (plans checked by
/// `failover_statements_need_no_jit`).
#[cfg(any(test, feature = "pg_test"))]
pub const WHOLE_TABLE_ON_PURPOSE: &[&str] = &[
    "OUTLAST_FAILOVER",
    "OUTLAST_FAILOVER_SLOTS",
    "PROMOTED_LEASES",
    "PROMOTED_SLOTS",
    "OUTLAST_FAILOVER_RUNS",
    "OUTLAST_FAILOVER_SESSIONS",
    "PROMOTED_SESSIONS",
];

#[cfg(test)]
mod export {
    /// `bench/statements.json`: every statement of `ALL` by name, for the
    /// benchmarks (bench/queries.py), which read it instead of this source.
    /// `LEADERLOCK_WRITE_STATEMENTS=1 cargo pgrx test` rewrites it.
    #[test]
    fn bench_statements_json_is_current() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/bench/statements.json");
        let all: std::collections::BTreeMap<&str, &str> = super::ALL.iter().copied().collect();
        let json = serde_json::to_string_pretty(&all).unwrap() + "\n";
        if std::env::var_os("LEADERLOCK_WRITE_STATEMENTS").is_some() {
            std::fs::write(path, &json).unwrap();
        }
        let committed = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            committed == json,
            "{path} differs from queries::ALL: run LEADERLOCK_WRITE_STATEMENTS=1 cargo pgrx test"
        );
    }
}
