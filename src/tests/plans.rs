//! Contract 5: the statements on the table use its indexes only, also
//! with stale statistics; the failover statements need no JIT.

use pgrx::prelude::*;

#[pg_schema]
mod tests {
    use crate::tests::helpers::*;
    use pgrx::prelude::*;

    // ---- 5 the worker's (and the API's) statements use indexes only --------

    #[pg_test]
    fn statements_on_the_table_never_scan_it_whole() {
        use crate::store::queries as q;
        Spi::run(
            "INSERT INTO leaderlock \
                    (key, holder, term, acquired_at, renewed_at, expires_at, ttl, recheck_at) \
             SELECT 'k' || i, CASE WHEN i % 2 = 0 THEN 'h' || i END, 1, now(), now(), \
                    now() + i * interval '1 second', interval '10 seconds', \
                    now() + i * interval '1 second' \
               FROM generate_series(1, 10000) i",
        )
        .unwrap();
        // and tenures of keys of many slots: 1,000 keys of 10 slots
        Spi::run(
            "INSERT INTO leaderlock_slots \
                    (key, slot, holder, term, acquired_at, renewed_at, expires_at, ttl, recheck_at) \
             SELECT 's' || (i / 10), i % 10 + 1, CASE WHEN i % 2 = 0 THEN 'h' || i END, i, now(), \
                    now(), now() + i * interval '1 second', interval '10 seconds', \
                    now() + i * interval '1 second' \
               FROM generate_series(0, 9999) i",
        )
        .unwrap();
        // and 1,000 sessions, keys of the last 1,000 keys held under them
        Spi::run(
            "INSERT INTO leaderlock_sessions \
                    (session, id, owner, ttl, opened_at, renewed_at, expires_at, recheck_at, \
                     lock_delay, keep_values) \
             SELECT pg_catalog.gen_random_uuid(), 'h' || i, 10, interval '10 seconds', now(), \
                    now(), now() + i * interval '1 second', now() + i * interval '1 second', \
                    interval '0', false \
               FROM generate_series(1, 1000) i",
        )
        .unwrap();
        Spi::run(
            "UPDATE leaderlock l SET session = s.session, expires_at = 'infinity' \
               FROM (SELECT session, row_number() OVER () AS n FROM leaderlock_sessions) s \
              WHERE l.key = 'k' || (9000 + s.n)",
        )
        .unwrap();
        // and the held tenures of the last 100 keys of many slots, 5 per session
        Spi::run(
            "UPDATE leaderlock_slots t SET session = s.session, expires_at = 'infinity' \
               FROM (SELECT session, row_number() OVER () AS n FROM leaderlock_sessions) s \
              WHERE t.holder IS NOT NULL AND t.key = 's' || (900 + (s.n - 1) / 5) \
                AND t.slot = ((s.n - 1) % 5) * 2 + 1",
        )
        .unwrap();
        Spi::run("ANALYZE leaderlock").unwrap();
        Spi::run("ANALYZE leaderlock_slots").unwrap();
        Spi::run("ANALYZE leaderlock_sessions").unwrap();
        // Tables of the older schemas the library still serves, as they
        // were: the current one without the columns added since.
        let schema = in_schema("@extschema@");
        for (old, dropped) in [
            (
                "0.3.0",
                "owner, tenures, releases, expiries, changed_at, slots, session, delayed_until",
            ),
            (
                "0.2.0",
                "owner, tenures, releases, expiries, changed_at, slots, session, delayed_until, \
                 value, session_pid, session_start",
            ),
        ] {
            let name = old_schema(old);
            Spi::run(&format!(
                "CREATE SCHEMA {name}; \
                 CREATE TABLE {name}.leaderlock (LIKE {schema}.leaderlock INCLUDING ALL); \
                 INSERT INTO {name}.leaderlock SELECT * FROM {schema}.leaderlock; \
                 ALTER TABLE {name}.leaderlock {}; \
                 ANALYZE {name}.leaderlock",
                dropped
                    .split(", ")
                    .map(|c| format!("DROP COLUMN {c}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
            .unwrap();
        }
        // value, session pid and start, caller (10: the bootstrap superuser)
        let tenure = "NULL, NULL, NULL, 10";
        let insert_args = format!("'new', 'h', now(), now(), '1 second', 1, {tenure}, NULL");
        let start_args = format!("'k2', 'h', now(), now(), '1 second', 1, {tenure}, NULL");
        let insert_args_0_4 = format!("'new', 'h', now(), now(), '1 second', 1, {tenure}");
        let take_args = format!("{start_args}, 3, 'h', NULL, NULL::timestamptz");
        let start_args_0_4 = format!("'k2', 'h', now(), now(), '1 second', 1, {tenure}");
        let session = "'00000000-0000-0000-0000-000000000001'::uuid";
        let vacate_session = "ARRAY['k2'], now(), false, NULL, now(), true";
        let rebind = format!("'k2', {session}, now(), '1 second', now(), NULL, NULL");
        let vacate_session_slots = format!("{vacate_session}, ARRAY[1]");
        let rebind_slot = format!("'s2', {session}, now(), '1 second', now(), 1");
        let old_tenure = "'new', 'h', now(), now(), '1 second', 1, NULL, NULL, NULL";
        let samples: std::collections::HashMap<&str, &str> = [
            ("READ_LEASE", "'k2', 10"),
            ("LOCK_ACQUIRABLE", "'k2', 'h2', 10"),
            ("LOCK_OWN", "'k2', 'h2', 10"),
            ("HOLDS_LIVE", "'k2', 'h2', 10, NULL"),
            ("LOCK_OWN_0_4", "'k2', 'h2', 10, now()"),
            ("LOCK_LIVE", "'k2'"),
            ("LOCK_LIVE_0_4", "'k2', now()"),
            ("INSERT_FIRST_TERM", insert_args.as_str()),
            ("START_TERM", start_args.as_str()),
            ("TAKE_AS_READ", take_args.as_str()),
            ("SET_VALUE", "'k2', '{}'"),
            ("LOCK_SESSION_LEASES", "12345, now()"),
            ("SESSION_LEASES_LEFT", "12345, now()"),
            ("LOCK_ORPHANED", "1000"),
            ("LEASE_ROW", "'k2'"),
            ("RENEW", "'k2', 'h2', now(), NULL::interval, 10, NULL::int8"),
            ("VACATE", "'k2', now()"),
            ("SHARE_LOCK_LEASE", "'k2', 10"),
            ("LIVE_HOLDER", "'k2', now()"),
            ("LOCK_LAPSED", "now() + interval '1 hour', 1000"),
            ("LOCK_ABANDONED", "'k2', 'h2', 1, now(), now()"),
            ("VACATE_KEYS", "ARRAY['k2', 'k4'], now()"),
            ("RENEW_ALL", "'h2', now(), 10"),
            ("READ_LEASE_0_4", "'k2', 10"),
            ("LOCK_ACQUIRABLE_0_4", "'k2', 'h2', 10, now()"),
            ("LOCK_STALE_TENURES", "'s2', 3"),
            ("STALE_TENURES", "'s2', 3"),
            ("KEY_SLOTS", "'k2'"),
            ("LOCK_KEY_HEAD", "'k2'"),
            ("INSERT_KEY_HEAD", "'new', 1, now(), 3"),
            ("SET_ONE_SLOT", "'k2'"),
            ("READ_OWN_SLOT", "'s2', 'h20', 10"),
            ("SLOT_SUMMARY", "'s2', now(), 'h20', 10"),
            ("SLOT_TAKE", "'s2', 'h20', 10"),
            (
                "TAKE_SLOT",
                "'s2', 3, 'h', 1, now(), now(), '1 second', NULL, 10, NULL, 10",
            ),
            (
                "START_SLOT",
                "'s2', 3, 'h', 5, now(), now(), '1 second', NULL, 10, NULL",
            ),
            (
                "RENEW_SLOT",
                "'s2', 'h20', now(), NULL::interval, 10, 2::int8",
            ),
            ("LOCK_OWN_SLOT", "'s2', 'h20', 10"),
            ("SHARE_LOCK_SLOT", "'s2', 1, 10"),
            ("VACATE_SLOT", "'s2', 1, now()"),
            ("SET_SLOT_VALUE", "'s2', 1, NULL"),
            ("LIFT_DELAY", "'k2', now()"),
            ("LOCK_LIVE_SLOTS", "'s2'"),
            ("HOLDERS", "'s2', now()"),
            ("LOCK_LAPSED_SLOTS", "now() + interval '1 hour', 1000"),
            ("VACATE_SLOTS", "ARRAY['s2'], ARRAY[1], now()"),
            ("NEXT_CHECK_SLOTS", "now()"),
            ("RENEW_ALL_SLOTS", "'h20', now(), 10"),
            ("LOCK_ALL_OWN_SLOTS", "'h20', 10"),
            ("VACATE_LIVE_SLOTS", "ARRAY['s2'], ARRAY[1], now()"),
            ("LOCK_ALL_OWN", "'h2', 10"),
            ("VACATE_LIVE_KEYS", "ARRAY['k2', 'k4'], now()"),
            ("NEXT_CHECK", "now()"),
            (
                "RENEW_0_4",
                "'k2', 'h2', now(), NULL::interval, 10, NULL::int8",
            ),
            ("SHARE_LOCK_LEASE_0_4", "'k2', 10"),
            ("LIVE_HOLDER_0_4", "'k2', now()"),
            ("LEASE_ROW_0_4", "'k2'"),
            ("RENEW_ALL_0_4", "'h2', now(), 10"),
            ("LOCK_ALL_OWN_0_4", "'h2', 10, now()"),
            ("INSERT_FIRST_TERM_0_4", insert_args_0_4.as_str()),
            ("START_TERM_0_4", start_args_0_4.as_str()),
            ("LOCK_SESSION_KEYS", session),
            ("LOCK_SESSION_KEYS_WAIT", session),
            ("SESSION_KEYS_LEFT", session),
            ("VACATE_SESSION_KEYS", vacate_session),
            ("SESSION_OF_KEY", "'k2', 'h2', NULL::int8"),
            ("RENEW_ALL_SESSIONS", "'h2', now(), 10"),
            ("REBIND", rebind.as_str()),
            ("LOCK_SESSION_SLOTS", session),
            ("LOCK_SESSION_SLOTS_WAIT", session),
            ("VACATE_SESSION_SLOTS", vacate_session_slots.as_str()),
            ("REBIND_SLOT", rebind_slot.as_str()),
            ("READ_LEASE_0_3", "'k2'"),
            ("LOCK_ACQUIRABLE_0_3", "'k2', 'h2', 10, now()"),
            ("LOCK_OWN_0_3", "'k2', 'h2', 10, now()"),
            ("RENEW_0_3", "'k2', 'h2', now(), NULL::interval"),
            ("SHARE_LOCK_LEASE_0_3", "'k2'"),
            ("INSERT_FIRST_TERM_0_3", old_tenure),
            ("START_TERM_0_3", old_tenure),
            ("VACATE_0_3", "'k2', now()"),
            ("VACATE_KEYS_0_3", "ARRAY['k2', 'k4']"),
            (
                "INSERT_FIRST_TERM_0_2",
                "'new', 'h', now(), now(), '1 second', 1",
            ),
            ("START_TERM_0_2", "'k2', 'h', now(), now(), '1 second', 1"),
            ("VACATE_0_2", "'k2', now()"),
            ("VACATE_KEYS_0_2", "ARRAY['k2', 'k4']"),
        ]
        .into_iter()
        .collect();
        // Every statement of queries.rs that names the table is listed; the
        // ones for older schemas call no le_now (it came with 0.5.0: the
        // lease clock's now is their parameter).
        for (name, sql) in q::all() {
            let older = ["_0_2", "_0_3", "_0_4"].iter().any(|v| name.ends_with(v));
            assert!(
                !(older && sql.contains("le_now")),
                "queries::{name} is for a schema before 0.5.0, which has no le_now"
            );
            let on_table = sql.split("@extschema@.").skip(1).any(|rest| {
                matches!(
                    rest.split(|c: char| !c.is_alphanumeric() && c != '_')
                        .next(),
                    Some("leaderlock" | "leaderlock_slots")
                )
            });
            if on_table {
                assert!(
                    q::ON_THE_TABLE.iter().any(|&(n, _, _)| n == name)
                        || q::WHOLE_TABLE_ON_PURPOSE.contains(&name),
                    "queries::{name} names the table but is not in queries::ON_THE_TABLE"
                );
            }
        }
        for mode in ["force_custom_plan", "force_generic_plan"] {
            Spi::run(&format!("SET LOCAL plan_cache_mode = {mode}")).unwrap();
            for &(name, version, sql) in q::ON_THE_TABLE {
                let args = samples
                    .get(name)
                    .unwrap_or_else(|| panic!("no sample arguments for queries::{name}"));
                let sql = if version.is_empty() {
                    in_schema(sql)
                } else {
                    sql.replace("@extschema@", &old_schema(version))
                };
                // (typed where a parameter the statement leaves unused,
                // the caller's role on 0.3.0, comes before one it uses)
                let types = if ["LOCK_ACQUIRABLE_0_3", "LOCK_OWN_0_3"].contains(&name) {
                    "(text, text, oid, timestamptz)"
                } else {
                    ""
                };
                Spi::run(&format!("PREPARE leaderlock_plan{types} AS {sql}")).unwrap();
                let execute = format!("EXECUTE leaderlock_plan({args})");
                let plan: String = Spi::connect(|c| {
                    c.select(&format!("EXPLAIN (COSTS OFF) {execute}"), None, &[])
                        .unwrap()
                        .map(|row| row.get::<String>(1).unwrap().unwrap())
                        .collect::<Vec<_>>()
                        .join("\n")
                });
                Spi::run("DEALLOCATE leaderlock_plan").unwrap();
                assert!(!plan.contains("Seq Scan"), "{mode}: {name}: {sql}\n{plan}");
            }
        }
    }

    /// The scratch schema holding a table of an older schema version.
    fn old_schema(version: &str) -> String {
        format!("leaderlock_{}", version.replace('.', "_"))
    }

    #[pg_test]
    fn failover_statements_need_no_jit() {
        // As inside the functions: a sequential scan would cost 10^10 and be
        // JIT-compiled (and the one-row table tempts the planner to one).
        use crate::store::queries as q;
        Spi::run("SET LOCAL enable_seqscan = off").unwrap();
        Spi::run("SET LOCAL jit = on").unwrap();
        Spi::run("SET LOCAL jit_above_cost = 100000").unwrap();
        for sql in [
            q::SAFE_TIMELINE,
            q::LOCK_SAFE_TIMELINE,
            q::MARK_SAFE_TIMELINE,
            q::OUTLAST_FAILOVER,
            q::OUTLAST_FAILOVER_SLOTS,
            q::PROMOTED_LEASES,
            q::PROMOTED_SLOTS,
            q::OUTLAST_FAILOVER_RUNS,
        ] {
            let sql = in_schema(sql)
                .replace("$1", "pg_catalog.now()")
                .replace("$2", "pg_catalog.now()")
                .replace("timeline = pg_catalog.now()", "timeline = 1");
            let (plan, cost): (String, f64) = Spi::connect(|c| {
                let rows: Vec<String> = c
                    .select(&format!("EXPLAIN {sql}"), None, &[])
                    .unwrap()
                    .map(|row| row.get::<String>(1).unwrap().unwrap())
                    .collect();
                let top = &rows[0];
                let cost = top[top.find("..").unwrap() + 2..top.find(" rows").unwrap()]
                    .parse()
                    .unwrap();
                (rows.join("\n"), cost)
            });
            assert!(!plan.contains("Seq Scan"), "{sql}\n{plan}");
            assert!(cost < 100000.0, "{sql} costs {cost}: JIT\n{plan}");
        }
    }

    #[pg_test]
    fn functions_use_the_primary_key_even_with_stale_statistics() {
        // Statistics of an 8-row table: left alone, the planner would scan
        // it sequentially, and keep that cached plan as the table grows.
        Spi::run(
            "INSERT INTO leaderlock \
                    (key, holder, term, acquired_at, renewed_at, expires_at, ttl, recheck_at) \
             SELECT 's' || i, 'h', 1, now(), now(), now() + interval '1 hour', \
                    interval '1 hour', now() + interval '1 hour' \
               FROM generate_series(1, 8) i",
        )
        .unwrap();
        Spi::run("ANALYZE leaderlock").unwrap();
        let seq_scans = || {
            i64_of(
                "SELECT coalesce(sum(seq_scan), 0)::bigint FROM pg_stat_xact_user_tables \
                  WHERE relid = 'leaderlock'::regclass",
            )
        };
        let before = seq_scans();
        for i in 0..20 {
            let k = format!("'grow-{i}'");
            assert!(bool_of(&format!(
                "SELECT le_try_acquire({k}, 'a', '1 hour')"
            )));
            assert!(bool_of(&format!("SELECT le_renew({k}, 'a')")));
            assert!(!bool_of(&format!(
                "SELECT le_try_acquire({k}, 'b', '1 hour')"
            )));
            assert_eq!(i64_of(&format!("SELECT le_assert_leader({k}, 'a')")), 1);
            assert_eq!(
                text_of(&format!("SELECT le_leader({k})")).as_deref(),
                Some("a")
            );
            assert!(bool_of(&format!("SELECT le_release({k}, 'a')")));
        }
        assert_eq!(
            seq_scans(),
            before,
            "a function scanned the table sequentially"
        );
    }
}
