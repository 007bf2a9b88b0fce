//! Every SQL statement the extension runs, by table (one file each; the
//! statements for older schemas in `older`).
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

/// The worker's due rows of `$table` (keyed by `$id`, due by its `$cue`
/// at `$1`) with their owners in turn: joined as `t` on `t.id`, ordered
/// by `in_turn!`'s ORDER BY. Each role's earliest due row has turn 1, its
/// second turn 2, ...; among equal turns the roles after `$3` (the owner
/// served last; NULL before the first) come first, then from the lowest:
/// one role's many due rows never keep another's waiting behind them,
/// even when a round takes only one (lease/turns.rs).
macro_rules! due_in_turn {
    ($table:literal, $id:literal, $cue:literal) => {
        concat!(
            "JOIN (SELECT d.",
            $id,
            " AS id, d.",
            $cue,
            " AS cue, d.owner, \
                    pg_catalog.row_number() OVER (PARTITION BY d.owner ORDER BY d.",
            $cue,
            ") AS turn \
               FROM @extschema@.",
            $table,
            " d WHERE d.",
            $cue,
            " <= $1) t ON t.id = "
        )
    };
}

/// The ORDER BY of `due_in_turn!`'s rows.
macro_rules! in_turn {
    () => {
        "ORDER BY t.turn, t.owner <= $3::oid, t.owner, t.cue"
    };
}

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
            leaderlock_protocol::expiry!($now, $ttl),
            ", ",
            "recheck_at = CASE WHEN recheck_at <= ",
            leaderlock_protocol::expiry!($now, $ttl),
            " AND recheck_at >= ",
            $now,
            " + ",
            $ttl,
            " / 2.0::float8 THEN recheck_at ",
            "ELSE ",
            leaderlock_protocol::expiry!($now, $ttl),
            " END"
        )
    };
}

/// Defines each statement as a `pub const` of its module and lists them
/// all, by name, in the module's `ALL` (`all()` joins them): the plan test
/// iterates it, and it is what `bench/statements.json` holds for the
/// benchmarks (a unit test keeps that file equal to it).
macro_rules! statements {
    ($($(#[$doc:meta])* $name:ident = $sql:expr;)*) => {
        $($(#[$doc])* pub const $name: &str = $sql;)*

        /// Every statement of this module: (name, SQL).
        #[allow(dead_code)]
        #[cfg(any(test, feature = "pg_test"))]
        pub const ALL: &[(&str, &str)] = &[$((stringify!($name), $name)),*];
    };
}

mod expected;
mod failover;
mod groups;
mod history;
mod leases;
mod older;
mod runs;
mod schedules;
mod sessions;
mod slots;
mod workers;

pub use expected::*;
pub use failover::*;
pub use groups::*;
pub use history::*;
pub use leases::*;
pub use older::*;
pub use runs::*;
pub use schedules::*;
pub use sessions::*;
pub use slots::*;
pub use workers::*;

/// Every statement the extension runs: (name, SQL).
#[cfg(any(test, feature = "pg_test"))]
pub fn all() -> impl Iterator<Item = (&'static str, &'static str)> {
    [
        failover::ALL,
        history::ALL,
        leases::ALL,
        older::ALL,
        runs::ALL,
        sessions::ALL,
        slots::ALL,
        workers::ALL,
    ]
    .into_iter()
    .flatten()
    .copied()
}

/// Every statement on the table `leaderlock`, by name, with
/// the schema it is written for ("" the current one, or "0.3.0", "0.2.0").
/// The plan test in `src/tests/plans.rs` runs each against 10,000 rows and fails
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
    ("HOLDS_LIVE", "", HOLDS_LIVE),
    ("LOCK_OWN_0_4", "", LOCK_OWN_0_4),
    ("RENEW", "", RENEW),
    ("INSERT_FIRST_TERM", "", INSERT_FIRST_TERM),
    ("START_TERM", "", START_TERM),
    ("TAKE_AS_READ", "", TAKE_AS_READ),
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
    ("LOCK_ACQUIRABLE_0_4", "", LOCK_ACQUIRABLE_0_4),
    ("LOCK_STALE_TENURES", "", LOCK_STALE_TENURES),
    ("STALE_TENURES", "", STALE_TENURES),
    ("SET_ONE_SLOT", "", SET_ONE_SLOT),
    ("READ_OWN_SLOT", "", READ_OWN_SLOT),
    ("SLOT_SUMMARY", "", SLOT_SUMMARY),
    ("SLOT_TAKE", "", SLOT_TAKE),
    ("TAKE_SLOT", "", TAKE_SLOT),
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
    "GROUPS_DUE_AFTER_FAILOVER",
];

#[cfg(test)]
mod export {
    /// `bench/statements.json`: every statement of `ALL` by name, for the
    /// benchmarks (bench/queries.py), which read it instead of this source.
    /// `LEADERLOCK_WRITE_STATEMENTS=1 cargo pgrx test` rewrites it.
    #[test]
    fn bench_statements_json_is_current() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/bench/statements.json");
        let all: std::collections::BTreeMap<&str, &str> = super::all().collect();
        let json = serde_json::to_string_pretty(&all).unwrap() + "\n";
        if std::env::var_os("LEADERLOCK_WRITE_STATEMENTS").is_some() {
            std::fs::write(path, &json).unwrap();
        }
        let committed = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            committed == json,
            "{path} differs from queries::all(): run LEADERLOCK_WRITE_STATEMENTS=1 cargo pgrx test"
        );
    }
}
