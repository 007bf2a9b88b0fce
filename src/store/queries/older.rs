//! Statements for schemas older than the library's (0.2.0 to 0.4.0),
//! chosen by `schema_version` until ALTER EXTENSION leaderlock UPDATE.
//! Those schemas have no `le_now`: a statement that compares with now takes
//! the lease clock's as its last parameter, which the current statement of
//! the same name is passed too and leaves unused (the expiries this library
//! writes count by the lease clock, which lags the wall clock after a stall).

use leaderlock_protocol::{held_by, live, next_term, not_live, of_term};

statements! {
    /// `LIVE_HOLDER` on the 0.4.0 schema (no sessions).
    LIVE_HOLDER_0_4 =
        concat!("SELECT holder FROM @extschema@.leaderlock WHERE key = $1 AND ", live!("$2"));
    /// `READ_LEASE` on the 0.4.0 schema (one slot per key).
    READ_LEASE_0_4 = concat!(
        "SELECT holder, term, expires_at, ",
        owned_by!("$2"),
        ", 1 FROM @extschema@.leaderlock WHERE key = $1"
    );
    /// `LOCK_ACQUIRABLE` on the 0.4.0 schema (every key of one slot). Above,
    /// `slots = 1`: a key that became one of many slots since it was read
    /// is not taken as a key of one holder (contract 17).
    LOCK_ACQUIRABLE_0_4 = concat!(
        "SELECT holder, term, expires_at, true FROM @extschema@.leaderlock \
         WHERE key = $1 \
           AND (",
        not_live!("$4"),
        " OR (holder = $2 AND ",
        owned_by!("$3"),
        ")) FOR NO KEY UPDATE SKIP LOCKED"
    );
    /// `LOCK_OWN` on a schema before 0.5.0, which has no `le_now`: the
    /// lease clock's now passed as `$4` (the expiries this library wrote
    /// count by it; the wall clock may be ahead of it after a stall).
    LOCK_OWN_0_4 = concat!(
        "SELECT term, expires_at FROM @extschema@.leaderlock \
         WHERE key = $1 AND ", held_by!("$2", "$4"), " AND ",
        owned_by!("$3"),
        " FOR NO KEY UPDATE SKIP LOCKED"
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
    /// `INSERT_FIRST_TERM` on the 0.4.0 schema (no sessions).
    INSERT_FIRST_TERM_0_4 = "INSERT INTO @extschema@.leaderlock \
           (key, holder, term, acquired_at, renewed_at, expires_at, ttl, recheck_at, \
            value, session_pid, session_start, owner, tenures, changed_at) \
         VALUES ($1, $2, $6, $3, $3, $4, $5, $4, $7::jsonb, $8, $9, $10::oid, 1, $3) \
         ON CONFLICT (key) DO NOTHING \
         RETURNING term";
    /// `START_TERM` on the 0.4.0 schema (no sessions).
    START_TERM_0_4 = concat!("UPDATE @extschema@.leaderlock \
            SET holder = $2, term = ", next_term!("$6"), ", acquired_at = $3, \
                renewed_at = $3, expires_at = $4, ttl = $5, recheck_at = $4, \
                value = $7::jsonb, session_pid = $8, session_start = $9, \
                owner = $10::oid, tenures = tenures + 1, changed_at = $3, \
                expiries = expiries + CASE WHEN holder IS NULL THEN 0 ELSE 1 END \
          WHERE key = $1 \
      RETURNING term");
    /// `SHARE_LOCK_LEASE` on the 0.4.0 schema (no sessions).
    SHARE_LOCK_LEASE_0_4 = concat!(
        "SELECT holder, term, expires_at, ",
        owned_by!("$2"),
        " FROM @extschema@.leaderlock WHERE key = $1 FOR SHARE"
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
    /// `LOCK_ALL_OWN` on the 0.4.0 schema (no sessions, no `le_now`: the
    /// lease clock's now is `$3`).
    LOCK_ALL_OWN_0_4 = concat!(
        "SELECT key, term FROM @extschema@.leaderlock \
          WHERE ", held_by!("$1", "$3"), " AND ",
        owned_by!("$2"),
        " FOR NO KEY UPDATE SKIP LOCKED"
    );
    /// `LOCK_LIVE` on a schema before 0.5.0, which has no `le_now`: the
    /// lease clock's now passed as `$2`.
    LOCK_LIVE_0_4 = concat!("SELECT holder, term, expires_at, true FROM @extschema@.leaderlock \
         WHERE key = $1 AND ", live!("$2"), " \
         FOR NO KEY UPDATE");
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
        not_live!("$4"),
        " OR holder = $2) FOR NO KEY UPDATE SKIP LOCKED"
    );
    /// `LOCK_OWN` on the 0.3.0 schema.
    LOCK_OWN_0_3 = concat!("SELECT term, expires_at FROM @extschema@.leaderlock \
         WHERE key = $1 AND ", held_by!("$2", "$4"), " \
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
}
