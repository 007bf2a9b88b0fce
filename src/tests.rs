//! `#[pg_test]` unit tests: every rule of contract sections 2, 3 and 6, run
//! inside one backend. Several sessions, LISTEN/NOTIFY delivery and the
//! worker are tested with real clients under `tests/`.

use pgrx::prelude::*;

#[pg_schema]
mod tests {
    use crate::lease;
    use crate::notify::{rfc3339, Event, ExpiryReason};
    use pgrx::pg_sys::panic::CaughtError;
    use pgrx::prelude::*;

    // ---- helpers ---------------------------------------------------------

    fn bool_of(sql: &str) -> bool {
        Spi::get_one::<bool>(sql).expect("query").expect("not null")
    }

    fn text_of(sql: &str) -> Option<String> {
        Spi::get_one::<String>(sql).expect("query")
    }

    fn i64_of(sql: &str) -> i64 {
        Spi::get_one::<i64>(sql).expect("query").expect("not null")
    }

    /// (holder, term, state) of a key from the status view.
    fn lease_of(key: &str) -> (Option<String>, i64, String) {
        Spi::connect(|c| {
            let row = c
                .select(
                    "SELECT holder, term, state FROM leaderlock_status WHERE key = $1",
                    None,
                    &[key.into()],
                )
                .expect("select")
                .first();
            (
                row.get::<String>(1).expect("holder"),
                row.get::<i64>(2).expect("term").expect("term"),
                row.get::<String>(3).expect("state").expect("state"),
            )
        })
    }

    /// Runs `f` as a worker's check would, in the extension's schema: for
    /// tests that call the library's Rust functions directly.
    fn in_call<T>(f: impl FnOnce() -> T) -> T {
        let schema = crate::bgworker::extension_schema().expect("the extension is installed");
        let _call = crate::call::enter_worker(schema);
        f()
    }

    /// The extension's statements as the library runs them: in the
    /// extension's schema.
    fn in_schema(sql: &str) -> String {
        let schema = text_of(
            "SELECT quote_ident(n.nspname) FROM pg_extension e \
               JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'leaderlock'",
        )
        .expect("the extension is installed");
        sql.replace("@extschema@", &schema)
    }

    /// The whole table as text, to show that something changed nothing.
    fn table_image() -> String {
        text_of("SELECT coalesce(string_agg(l::text, ';' ORDER BY key), '') FROM leaderlock l")
            .unwrap_or_default()
    }

    fn sleep_ms(ms: u64) {
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }

    /// Before a test that times a short lease: every function's first call
    /// in a backend loads the library and prepares its plans, which took
    /// over a second for a debug build on a busy machine.
    fn warm_up() {
        assert!(bool_of("SELECT le_try_acquire('warm-up', 'w', '1 minute')"));
        assert!(bool_of("SELECT le_renew('warm-up', 'w')"));
        assert_eq!(text_of("SELECT le_leader('warm-up')").as_deref(), Some("w"));
        assert!(bool_of("SELECT le_release('warm-up', 'w')"));
    }

    /// Runs `sql` in a subtransaction. Returns None when it succeeds, else
    /// the SQLSTATE and message of its error (the subtransaction is rolled
    /// back, as a client's failed statement would be).
    fn error_of(sql: &str) -> Option<(PgSqlErrorCode, String)> {
        let (cxt, owner) = unsafe { (pg_sys::CurrentMemoryContext, pg_sys::CurrentResourceOwner) };
        unsafe { pg_sys::BeginInternalSubTransaction(std::ptr::null()) };
        PgTryBuilder::new(|| {
            Spi::run(sql).expect("spi");
            unsafe {
                pg_sys::ReleaseCurrentSubTransaction();
                pg_sys::MemoryContextSwitchTo(cxt);
                pg_sys::CurrentResourceOwner = owner;
            }
            None
        })
        .catch_others(|e| {
            unsafe {
                pg_sys::MemoryContextSwitchTo(cxt);
                pg_sys::RollbackAndReleaseCurrentSubTransaction();
                pg_sys::MemoryContextSwitchTo(cxt);
                pg_sys::CurrentResourceOwner = owner;
            }
            let report = match e {
                CaughtError::PostgresError(r)
                | CaughtError::ErrorReport(r)
                | CaughtError::RustPanic { ereport: r, .. } => r,
            };
            Some((report.sql_error_code(), report.message().to_string()))
        })
        .execute()
    }

    /// Asserts that `sql` fails with `code`, that the message contains every
    /// word of `mentions`, and that the table is unchanged.
    fn assert_rejected(sql: &str, code: PgSqlErrorCode, mentions: &[&str]) {
        let before = table_image();
        let (got, message) = error_of(sql).unwrap_or_else(|| panic!("{sql} did not fail"));
        assert_eq!(got, code, "{sql}: {message}");
        for m in mentions {
            assert!(
                message.contains(m),
                "{sql}: message {message:?} lacks {m:?}"
            );
        }
        assert_eq!(table_image(), before, "{sql} changed the table");
    }

    // ---- 3.1 le_try_acquire ----------------------------------------------

    #[pg_test]
    fn first_acquire_starts_term_one_with_consistent_times() {
        assert!(bool_of("SELECT le_try_acquire('k', 'a', '10 seconds')"));
        let (holder, term, state) = lease_of("k");
        assert_eq!(
            (holder.as_deref(), term, state.as_str()),
            (Some("a"), 1, "held")
        );
        assert!(bool_of(
            "SELECT acquired_at = renewed_at AND expires_at = renewed_at + interval '10 seconds' \
                    AND ttl = interval '10 seconds' FROM leaderlock WHERE key = 'k'"
        ));
    }

    #[pg_test]
    fn live_lease_of_another_is_not_taken_and_unchanged() {
        assert!(bool_of("SELECT le_try_acquire('k', 'a', '10 seconds')"));
        let before = table_image();
        assert!(!bool_of("SELECT le_try_acquire('k', 'b', '10 seconds')"));
        assert_eq!(table_image(), before);
        assert_eq!(text_of("SELECT le_leader('k')").as_deref(), Some("a"));
    }

    #[pg_test]
    fn reacquire_by_live_holder_extends_same_term() {
        assert!(bool_of("SELECT le_try_acquire('k', 'a', '10 seconds')"));
        let acquired = text_of("SELECT acquired_at::text FROM leaderlock WHERE key = 'k'");
        sleep_ms(5);
        assert!(bool_of("SELECT le_try_acquire('k', 'a', '30 seconds')"));
        let (_, term, _) = lease_of("k");
        assert_eq!(term, 1);
        assert_eq!(
            text_of("SELECT acquired_at::text FROM leaderlock WHERE key = 'k'"),
            acquired
        );
        assert!(bool_of(
            "SELECT renewed_at > acquired_at AND expires_at = renewed_at + interval '30 seconds' \
                    AND ttl = interval '30 seconds' FROM leaderlock WHERE key = 'k'"
        ));
    }

    #[pg_test]
    fn lapsed_lease_is_taken_over_with_next_term() {
        assert!(bool_of("SELECT le_try_acquire('k', 'a', '1 millisecond')"));
        sleep_ms(10);
        assert_eq!(lease_of("k").2, "lapsed");
        assert!(bool_of("SELECT le_try_acquire('k', 'b', '10 seconds')"));
        let (holder, term, state) = lease_of("k");
        assert_eq!(
            (holder.as_deref(), term, state.as_str()),
            (Some("b"), 2, "held")
        );
        assert!(bool_of(
            "SELECT acquired_at = renewed_at FROM leaderlock WHERE key = 'k'"
        ));
    }

    #[pg_test]
    fn own_lapsed_lease_is_a_new_term() {
        assert!(bool_of("SELECT le_try_acquire('k', 'a', '1 millisecond')"));
        sleep_ms(10);
        assert!(bool_of("SELECT le_try_acquire('k', 'a', '10 seconds')"));
        assert_eq!(lease_of("k").1, 2);
    }

    #[pg_test]
    fn vacant_lease_is_acquired_with_next_term() {
        assert!(bool_of("SELECT le_try_acquire('k', 'a', '10 seconds')"));
        assert!(bool_of("SELECT le_release('k', 'a')"));
        assert!(bool_of("SELECT le_try_acquire('k', 'b', '10 seconds')"));
        assert_eq!(lease_of("k"), (Some("b".into()), 2, "held".into()));
    }

    #[pg_test]
    fn terms_grow_by_one_per_tenure_and_are_never_reused() {
        let mut expected = 0;
        for round in 0..5 {
            let id = if round % 2 == 0 { "a" } else { "b" };
            assert!(bool_of(&format!(
                "SELECT le_try_acquire('k', '{id}', '10 seconds')"
            )));
            expected += 1;
            assert!(bool_of(&format!("SELECT le_renew('k', '{id}')")));
            assert!(bool_of(&format!(
                "SELECT le_try_acquire('k', '{id}', '10 seconds')"
            )));
            assert_eq!(lease_of("k").1, expected, "renewals keep the term");
            assert!(bool_of(&format!("SELECT le_release('k', '{id}')")));
            assert_eq!(lease_of("k").1, expected, "release keeps the term");
        }
    }

    #[pg_test]
    fn keys_are_independent() {
        assert!(bool_of("SELECT le_try_acquire('k1', 'a', '10 seconds')"));
        assert!(bool_of("SELECT le_try_acquire('k2', 'b', '10 seconds')"));
        assert_eq!(text_of("SELECT le_leader('k1')").as_deref(), Some("a"));
        assert_eq!(text_of("SELECT le_leader('k2')").as_deref(), Some("b"));
    }

    // ---- recheck_at: the worker's indexed cue ---------------------------------

    #[pg_test]
    fn recheck_at_stays_at_or_before_the_expiry_and_moves_rarely() {
        let recheck = || text_of("SELECT recheck_at::text FROM leaderlock WHERE key = 'k'");
        let invariant = || {
            bool_of("SELECT bool_and(recheck_at <= expires_at) FROM leaderlock WHERE holder IS NOT NULL")
        };
        assert!(bool_of("SELECT le_try_acquire('k', 'a', '1 hour')"));
        assert!(bool_of(
            "SELECT recheck_at = expires_at FROM leaderlock WHERE key = 'k'"
        ));
        let first = recheck();
        // Renewals well within half the ttl keep it: no indexed column changes.
        for _ in 0..3 {
            assert!(bool_of("SELECT le_renew('k', 'a')"));
            assert!(bool_of("SELECT le_try_acquire('k', 'a', '1 hour')"));
            assert_eq!(recheck(), first);
            assert!(invariant());
        }
        // A shorter ttl pulls it back to the new expiry.
        assert!(bool_of("SELECT le_renew('k', 'a', '10 seconds')"));
        assert!(bool_of(
            "SELECT recheck_at = expires_at FROM leaderlock WHERE key = 'k'"
        ));
        assert!(invariant());
        // Renewing with under half the ttl left moves it to the new expiry.
        assert!(bool_of(
            "SELECT le_try_acquire('j', 'a', '40 milliseconds')"
        ));
        sleep_ms(25);
        assert!(bool_of("SELECT le_renew('j', 'a')"));
        assert!(bool_of(
            "SELECT recheck_at = expires_at FROM leaderlock WHERE key = 'j'"
        ));
        assert!(invariant());
    }

    // ---- 2.2 time ----------------------------------------------------------

    #[pg_test]
    fn liveness_uses_the_clock_not_transaction_start() {
        // The whole test is one transaction: now() stays put, the clock moves.
        warm_up();
        assert!(bool_of("SELECT le_try_acquire('k', 'a', '2 seconds')"));
        assert_eq!(text_of("SELECT le_leader('k')").as_deref(), Some("a"));
        sleep_ms(2100);
        assert_eq!(text_of("SELECT le_leader('k')"), None);
        assert!(!bool_of("SELECT le_renew('k', 'a')"));
        assert!(bool_of(
            "SELECT renewed_at > now() FROM leaderlock WHERE key = 'k'"
        ));
    }

    #[pg_test]
    fn a_day_of_ttl_is_exactly_24_hours_in_any_time_zone() {
        Spi::run("SET LOCAL TimeZone = 'America/New_York'").unwrap();
        assert!(bool_of("SELECT le_try_acquire('k', 'a', '1 day')"));
        assert!(bool_of(
            "SELECT expires_at - renewed_at = interval '24 hours' \
                    AND extract(epoch FROM expires_at) - extract(epoch FROM renewed_at) = 86400 \
               FROM leaderlock WHERE key = 'k'"
        ));
    }

    // ---- 3.2 le_renew ------------------------------------------------------

    #[pg_test]
    fn renew_extends_live_own_lease_same_term() {
        assert!(bool_of("SELECT le_try_acquire('k', 'a', '10 seconds')"));
        sleep_ms(5);
        assert!(bool_of("SELECT le_renew('k', 'a')"));
        assert!(bool_of(
            "SELECT renewed_at > acquired_at AND expires_at = renewed_at + interval '10 seconds' \
               FROM leaderlock WHERE key = 'k'"
        ));
        assert!(bool_of("SELECT le_renew('k', 'a', '1 minute')"));
        assert!(bool_of(
            "SELECT expires_at = renewed_at + interval '1 minute' AND ttl = interval '1 minute' \
               FROM leaderlock WHERE key = 'k'"
        ));
        assert!(bool_of("SELECT le_renew('k', 'a', NULL)"));
        assert!(bool_of(
            "SELECT ttl = interval '1 minute' AND expires_at = renewed_at + ttl \
               FROM leaderlock WHERE key = 'k'"
        ));
        assert_eq!(lease_of("k").1, 1);
    }

    #[pg_test]
    fn renew_refuses_everything_else_and_changes_nothing() {
        assert!(!bool_of("SELECT le_renew('unknown', 'a')"));
        assert_eq!(table_image(), "");

        assert!(bool_of("SELECT le_try_acquire('live', 'a', '10 seconds')"));
        let before = table_image();
        assert!(!bool_of("SELECT le_renew('live', 'b')"), "other holder");
        assert_eq!(table_image(), before);

        assert!(bool_of("SELECT le_try_acquire('k', 'a', '1 millisecond')"));
        let before = table_image();
        sleep_ms(10);
        assert!(
            !bool_of("SELECT le_renew('k', 'a')"),
            "lapsed: renew never acquires"
        );
        assert_eq!(table_image(), before);

        assert!(bool_of("SELECT le_try_acquire('k', 'a', '10 seconds')"));
        assert!(bool_of("SELECT le_release('k', 'a')"));
        let before = table_image();
        assert!(!bool_of("SELECT le_renew('k', 'a')"), "vacant");
        assert_eq!(table_image(), before);
    }

    // ---- 3.3 le_release ----------------------------------------------------

    #[pg_test]
    fn release_vacates_keeps_term_and_sets_expiry_to_now() {
        assert!(bool_of("SELECT le_try_acquire('k', 'a', '10 seconds')"));
        let t0 = i64_of("SELECT (extract(epoch FROM clock_timestamp()) * 1e6)::bigint");
        assert!(bool_of("SELECT le_release('k', 'a')"));
        let t1 = i64_of("SELECT (extract(epoch FROM clock_timestamp()) * 1e6)::bigint");
        assert_eq!(lease_of("k"), (None, 1, "vacant".into()));
        let released = i64_of(
            "SELECT (extract(epoch FROM expires_at) * 1e6)::bigint FROM leaderlock WHERE key = 'k'",
        );
        assert!(
            t0 <= released && released <= t1,
            "{t0} <= {released} <= {t1}"
        );
        assert_eq!(text_of("SELECT le_leader('k')"), None);
    }

    // ---- 16 many keys, one holder -------------------------------------------

    #[pg_test]
    fn renew_all_extends_each_live_lease_by_its_own_ttl() {
        for (key, ttl) in [("a1", "10 seconds"), ("a2", "1 minute"), ("a3", "1 hour")] {
            assert!(bool_of(&format!(
                "SELECT le_try_acquire('{key}', 'h', '{ttl}')"
            )));
        }
        assert!(bool_of("SELECT le_try_acquire('other', 'x', '1 hour')"));
        assert!(bool_of(
            "SELECT le_try_acquire('lapsed', 'h', '1 millisecond')"
        ));
        sleep_ms(10);
        let other_before = i64_of(
            "SELECT (extract(epoch FROM expires_at) * 1e6)::bigint FROM leaderlock WHERE key = 'other'",
        );
        assert_eq!(i64_of("SELECT le_renew_all('h')"), 3);
        // Each by its own ttl, from one clock reading; terms kept.
        assert_eq!(
            i64_of(
                "SELECT count(*) FROM leaderlock WHERE holder = 'h' AND term = 1 \
                   AND expires_at = renewed_at + ttl AND renewed_at > acquired_at \
                   AND key LIKE 'a_'"
            ),
            3
        );
        assert_eq!(
            i64_of("SELECT count(DISTINCT renewed_at) FROM leaderlock WHERE key LIKE 'a_'"),
            1
        );
        assert_eq!(lease_of("lapsed"), (Some("h".into()), 1, "lapsed".into()));
        assert_eq!(
            i64_of(
                "SELECT (extract(epoch FROM expires_at) * 1e6)::bigint FROM leaderlock WHERE key = 'other'"
            ),
            other_before
        );
        assert_eq!(i64_of("SELECT le_renew_all('nobody')"), 0);
    }

    #[pg_test]
    fn release_all_vacates_each_live_lease_and_keeps_terms() {
        for key in ["b1", "b2"] {
            assert!(bool_of(&format!(
                "SELECT le_try_acquire('{key}', 'h', '1 hour')"
            )));
        }
        assert!(bool_of("SELECT le_release('b2', 'h')"));
        assert!(bool_of("SELECT le_try_acquire('b2', 'h', '1 hour')"));
        assert!(bool_of("SELECT le_try_acquire('other', 'x', '1 hour')"));
        assert_eq!(i64_of("SELECT le_release_all('h')"), 2);
        assert_eq!(lease_of("b1"), (None, 1, "vacant".into()));
        assert_eq!(lease_of("b2"), (None, 2, "vacant".into()));
        assert_eq!(lease_of("other"), (Some("x".into()), 1, "held".into()));
        assert_eq!(i64_of("SELECT le_release_all('h')"), 0);
        assert_eq!(
            i64_of("SELECT le_renew_all('h')"),
            0,
            "renew never acquires"
        );
    }

    // ---- 17 keys of many slots -------------------------------------------

    #[pg_test]
    fn many_slot_terms_come_from_one_sequence_and_slots_are_reused() {
        for id in ["a", "b"] {
            assert!(bool_of(&format!(
                "SELECT le_try_acquire('sem', '{id}', '1 hour', slots => 2)"
            )));
        }
        assert!(!bool_of(
            "SELECT le_try_acquire('sem', 'c', '1 hour', slots => 2)"
        ));
        assert!(bool_of("SELECT le_release('sem', 'a')"));
        assert!(bool_of(
            "SELECT le_try_acquire('sem', 'c', '1 hour', slots => 2)"
        ));
        assert_eq!(
            text_of(
                "SELECT string_agg(holder || ':' || term || '@' || slot, ',' ORDER BY slot) \
                   FROM leaderlock_slots WHERE key = 'sem'"
            )
            .as_deref(),
            Some("c:3@1,b:2@2"),
            "the freed slot 1 taken again, with the next term"
        );
        assert_eq!(i64_of("SELECT term FROM leaderlock WHERE key = 'sem'"), 3);
        assert_eq!(i64_of("SELECT count(*) FROM le_holders('sem')"), 2);
        assert_eq!(text_of("SELECT le_leader('sem')"), None);
    }

    // ---- 18 candidates and priority ----------------------------------------

    #[pg_test]
    fn priorities_need_the_preloaded_library_and_nobody_is_listed_without_it() {
        // (these tests run without shared_preload_libraries)
        assert_rejected(
            "SELECT le_acquire('p', 'a', '1 hour', '0', priority => 1)",
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            &["preloaded"],
        );
        assert!(bool_of(
            "SELECT le_acquire('p', 'a', '1 hour', '10 milliseconds', priority => 0)"
        ));
        assert_eq!(i64_of("SELECT count(*) FROM le_candidates('p')"), 0);
    }

    #[pg_test]
    fn payloads_carry_slots_only_for_keys_of_many() {
        let e = Event::Released {
            key: "k",
            holder: "h",
            term: 1,
            at: 0,
            forced: false,
        };
        let with =
            |slots| -> serde_json::Value { serde_json::from_str(&e.payload_with(slots)).unwrap() };
        assert_eq!(with(Some(3))["slots"], 3);
        assert!(with(Some(1)).get("slots").is_none());
        assert!(with(None).get("slots").is_none());
    }

    #[pg_test]
    fn release_refuses_everything_else_and_changes_nothing() {
        assert!(!bool_of("SELECT le_release('unknown', 'a')"));
        assert!(bool_of("SELECT le_try_acquire('live', 'a', '10 seconds')"));
        assert!(bool_of("SELECT le_try_acquire('k', 'a', '1 millisecond')"));
        let before = table_image();
        assert!(!bool_of("SELECT le_release('live', 'b')"), "other holder");
        sleep_ms(10);
        assert!(!bool_of("SELECT le_release('k', 'a')"), "lapsed");
        assert_eq!(table_image(), before);
    }

    // ---- le_leader and the status view --------------------------------------

    #[pg_test]
    fn leader_is_the_live_holder_only() {
        warm_up();
        assert_eq!(text_of("SELECT le_leader('unknown')"), None);
        assert!(bool_of("SELECT le_try_acquire('k', 'a', '1 second')"));
        assert_eq!(text_of("SELECT le_leader('k')").as_deref(), Some("a"));
        sleep_ms(1100);
        assert_eq!(text_of("SELECT le_leader('k')"), None);
    }

    #[pg_test]
    fn status_view_states_and_remaining() {
        assert!(bool_of("SELECT le_try_acquire('held', 'a', '1 hour')"));
        assert!(bool_of(
            "SELECT le_try_acquire('lapsed', 'a', '1 millisecond')"
        ));
        assert!(bool_of("SELECT le_try_acquire('vacant', 'a', '1 hour')"));
        assert!(bool_of("SELECT le_release('vacant', 'a')"));
        sleep_ms(10);
        assert_eq!(
            text_of(
                "SELECT string_agg(key || '=' || state, ',' ORDER BY key) FROM leaderlock_status"
            )
            .as_deref(),
            Some("held=held,lapsed=lapsed,vacant=vacant")
        );
        assert!(bool_of(
            "SELECT remaining > interval '59 minutes' AND remaining <= interval '1 hour' \
               FROM leaderlock_status WHERE key = 'held'"
        ));
        assert!(bool_of(
            "SELECT bool_and(remaining IS NULL) FROM leaderlock_status WHERE key <> 'held'"
        ));
    }

    // ---- 3.4 le_assert_leader -----------------------------------------------

    #[pg_test]
    fn assert_leader_returns_term_of_live_holder() {
        assert!(bool_of("SELECT le_try_acquire('k', 'a', '10 seconds')"));
        assert_eq!(i64_of("SELECT le_assert_leader('k', 'a')"), 1);
        assert_eq!(i64_of("SELECT le_assert_leader('k', 'a', 1)"), 1);
    }

    #[pg_test]
    fn assert_leader_refusals_name_key_id_holder_and_term() {
        warm_up();
        let refused = |key: &str, id: &str, term: Option<i64>| {
            in_call(|| lease::assert_leader(key, id, term))
                .expect_err("should refuse")
                .message()
        };
        let m = refused("nokey", "a", None);
        assert!(
            m.contains("\"nokey\"") && m.contains("\"a\"") && m.contains("never"),
            "{m}"
        );

        assert!(bool_of("SELECT le_try_acquire('k', 'a', '1 second')"));
        let m = refused("k", "b", None);
        assert!(
            m.contains("\"b\"") && m.contains("holder is \"a\"") && m.contains("term 1"),
            "{m}"
        );
        let m = refused("k", "a", Some(7));
        assert!(m.contains("term 1") && m.contains("term 7"), "{m}");
        sleep_ms(1100);
        let m = refused("k", "a", None);
        assert!(
            m.contains("lapsed") && m.contains("\"a\"") && m.contains("term 1"),
            "{m}"
        );
        assert!(bool_of("SELECT le_try_acquire('k', 'b', '10 seconds')"));
        assert!(bool_of("SELECT le_release('k', 'b')"));
        let m = refused("k", "b", None);
        assert!(m.contains("vacant") && m.contains("term 2"), "{m}");
    }

    // ---- 6 bad input ---------------------------------------------------------

    #[pg_test]
    fn null_arguments_are_22004() {
        use PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED as NULL;
        assert!(bool_of("SELECT le_try_acquire('k', 'a', '10 seconds')"));
        assert_rejected(
            "SELECT le_try_acquire(NULL, 'a', '1 second')",
            NULL,
            &["key", "NULL"],
        );
        assert_rejected(
            "SELECT le_try_acquire('k', NULL, '1 second')",
            NULL,
            &["id", "NULL"],
        );
        assert_rejected(
            "SELECT le_try_acquire('k', 'a', NULL)",
            NULL,
            &["ttl", "NULL"],
        );
        assert_rejected("SELECT le_renew(NULL, 'a')", NULL, &["key"]);
        assert_rejected("SELECT le_renew('k', NULL)", NULL, &["id"]);
        assert_rejected("SELECT le_release(NULL, 'a')", NULL, &["key"]);
        assert_rejected("SELECT le_release('k', NULL)", NULL, &["id"]);
        assert_rejected("SELECT le_leader(NULL)", NULL, &["key"]);
        assert_rejected("SELECT le_assert_leader(NULL, 'a')", NULL, &["key"]);
        assert_rejected("SELECT le_assert_leader('k', NULL)", NULL, &["id"]);
    }

    #[pg_test]
    fn empty_or_long_names_are_22023() {
        use PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE as BAD;
        assert!(bool_of("SELECT le_try_acquire('k', 'a', '10 seconds')"));
        assert_rejected(
            "SELECT le_try_acquire('', 'a', '1 second')",
            BAD,
            &["key", "empty"],
        );
        assert_rejected(
            "SELECT le_try_acquire('k', '', '1 second')",
            BAD,
            &["id", "empty"],
        );
        assert_rejected(
            "SELECT le_try_acquire(repeat('x', 256), 'a', '1 second')",
            BAD,
            &["key", "256", "255"],
        );
        // 128 two-byte characters: 256 bytes, though only 128 characters.
        assert_rejected(
            "SELECT le_try_acquire('k', repeat('é', 128), '1 second')",
            BAD,
            &["id", "256", "255 bytes"],
        );
        assert_rejected("SELECT le_renew('', 'a')", BAD, &["key"]);
        assert_rejected("SELECT le_release('k', '')", BAD, &["id"]);
        assert_rejected("SELECT le_leader('')", BAD, &["key"]);
        assert_rejected(
            "SELECT le_assert_leader('k', repeat('x', 300))",
            BAD,
            &["id", "255"],
        );
        // exactly 255 bytes is fine
        assert!(bool_of(
            "SELECT le_try_acquire(repeat('x', 255), repeat('y', 255), '1 second')"
        ));
    }

    #[pg_test]
    fn bad_ttls_are_22023() {
        use PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE as BAD;
        assert!(bool_of("SELECT le_try_acquire('k', 'a', '10 seconds')"));
        assert_rejected(
            "SELECT le_try_acquire('k', 'a', '0 seconds')",
            BAD,
            &["ttl", "positive"],
        );
        assert_rejected(
            "SELECT le_try_acquire('k', 'a', '-5 seconds')",
            BAD,
            &["ttl", "positive"],
        );
        assert_rejected(
            "SELECT le_try_acquire('k', 'a', '1 month')",
            BAD,
            &["ttl", "month"],
        );
        assert_rejected(
            "SELECT le_try_acquire('k', 'a', '1 year')",
            BAD,
            &["ttl", "year"],
        );
        assert_rejected(
            "SELECT le_try_acquire('k', 'a', '1 day 1 second')",
            BAD,
            &["ttl", "leaderlock.max_ttl", "86400s"],
        );
        assert_rejected("SELECT le_renew('k', 'a', '0 seconds')", BAD, &["ttl"]);
        assert_rejected("SELECT le_renew('k', 'a', '2 days')", BAD, &["max_ttl"]);
        // max_ttl is a setting: lower it and the limit follows
        Spi::run("SET LOCAL leaderlock.max_ttl = '1min'").unwrap();
        assert_rejected(
            "SELECT le_try_acquire('k', 'a', '61 seconds')",
            BAD,
            &["60s"],
        );
        assert!(bool_of("SELECT le_try_acquire('k', 'a', '60 seconds')"));
    }

    #[pg_test]
    fn negative_term_is_22023() {
        assert!(bool_of("SELECT le_try_acquire('k', 'a', '10 seconds')"));
        assert_rejected(
            "SELECT le_assert_leader('k', 'a', -1)",
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            &["term", "negative"],
        );
    }

    // ---- 7 security ------------------------------------------------------------

    #[pg_test]
    fn ordinary_roles_read_but_cannot_write_the_table() {
        Spi::run("CREATE ROLE leaderlock_test_user NOLOGIN").unwrap();
        for (privilege, granted) in [
            ("SELECT", true),
            ("INSERT", false),
            ("UPDATE", false),
            ("DELETE", false),
            ("TRUNCATE", false),
        ] {
            assert_eq!(
                bool_of(&format!(
                    "SELECT has_table_privilege('leaderlock_test_user', 'leaderlock', '{privilege}')"
                )),
                granted,
                "{privilege}"
            );
        }
        Spi::run("SET LOCAL ROLE leaderlock_test_user").unwrap();
        assert!(bool_of("SELECT le_try_acquire('k', 'a', '10 seconds')"));
        assert_eq!(
            text_of("SELECT holder FROM leaderlock WHERE key = 'k'").as_deref(),
            Some("a")
        );
        let denied = PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE;
        assert_rejected("UPDATE leaderlock SET term = 0", denied, &[]);
        assert_rejected("DELETE FROM leaderlock", denied, &[]);
        assert_rejected(
            "INSERT INTO leaderlock (key, term) VALUES ('x', 1)",
            denied,
            &[],
        );
        assert_rejected("TRUNCATE leaderlock", denied, &[]);
    }

    #[pg_test]
    fn functions_are_security_invoker_with_pinned_search_path() {
        // The acting role is current_user (src/call.rs); every name a
        // statement uses resolves in pg_catalog or, qualified, in the
        // extension's schema.
        assert_eq!(
            text_of(
                "SELECT string_agg(proname || ':' || prosecdef || ':' || \
                        array_to_string(proconfig, ','), ' ' ORDER BY proname) \
                   FROM pg_proc WHERE proname IN ('le_try_acquire', 'le_renew', 'le_release', \
                                                  'le_assert_leader', 'le_acquire', \
                                                  'le_proclaim', 'le_force_release', \
                                                  'le_lease', 'le_leader')"
            )
            .as_deref(),
            Some(
                "le_acquire:false:search_path=pg_catalog, pg_temp,enable_seqscan=off \
                 le_assert_leader:false:search_path=pg_catalog, pg_temp,enable_seqscan=off \
                 le_force_release:false:search_path=pg_catalog, pg_temp,enable_seqscan=off \
                 le_leader:false:search_path=pg_catalog, pg_temp,enable_seqscan=off \
                 le_lease:false:search_path=pg_catalog, pg_temp,enable_seqscan=off \
                 le_proclaim:false:search_path=pg_catalog, pg_temp,enable_seqscan=off \
                 le_release:false:search_path=pg_catalog, pg_temp,enable_seqscan=off \
                 le_renew:false:search_path=pg_catalog, pg_temp,enable_seqscan=off \
                 le_try_acquire:false:search_path=pg_catalog, pg_temp,enable_seqscan=off"
            )
        );
    }

    // ---- 4 notification payloads (delivery is tested with real clients) ----

    #[pg_test]
    fn run_payloads_name_the_job_and_due_instant() {
        use crate::notify::RunEvent;
        let claimed = RunEvent::Claimed {
            holder: "r\"1",
            term: 7,
            expires_at: 70_000_000,
            attempt: 2,
        };
        let v: serde_json::Value =
            serde_json::from_str(&claimed.payload("job\n1", 60_000_000, 61_000_000)).unwrap();
        assert_eq!(v["event"], "run_claimed");
        assert_eq!(v["job"], "job\n1");
        assert_eq!(v["due"], "2000-01-01T00:01:00.000000Z");
        assert_eq!(v["holder"], "r\"1");
        assert_eq!(v["term"], 7);
        assert_eq!(v["at"], "2000-01-01T00:01:01.000000Z");
        assert_eq!(v["expires_at"], "2000-01-01T00:01:10.000000Z");
        assert_eq!(v["attempt"], 2);
        assert!(v.get("key").is_none(), "runs are not leases: no key");
        let finished = RunEvent::Finished {
            holder: "r",
            term: 7,
            outcome: "failed",
        };
        let v: serde_json::Value = serde_json::from_str(&finished.payload("j", 0, 0)).unwrap();
        assert_eq!(v["event"], "run_finished");
        assert_eq!(v["outcome"], "failed");
        assert!(v.get("expires_at").is_none());
        let missed = RunEvent::Missed.payload("j", 0, 5);
        assert_eq!(
            missed,
            r#"{"event":"run_missed","job":"j","due":"2000-01-01T00:00:00.000000Z","at":"2000-01-01T00:00:00.000005Z"}"#
        );
    }

    #[pg_test]
    fn payloads_are_json_with_the_contract_fields() {
        let acquired = Event::Acquired {
            key: "k",
            holder: "b",
            term: 3,
            at: 0,
            previous_holder: Some("a"),
            expires_at: 10_000_000,
            value: Some(r#"{"addr": "10.0.0.7:8080", "n": 123456789012345678901234567890}"#),
        };
        let v: serde_json::Value = serde_json::from_str(&acquired.payload()).unwrap();
        assert_eq!(v["event"], "acquired");
        assert_eq!(v["key"], "k");
        assert_eq!(v["holder"], "b");
        assert_eq!(v["term"], 3);
        assert_eq!(v["at"], "2000-01-01T00:00:00.000000Z");
        assert_eq!(v["previous_holder"], "a");
        assert_eq!(v["expires_at"], "2000-01-01T00:00:10.000000Z");
        assert_eq!(v["value"]["addr"], "10.0.0.7:8080");
        // numbers go through as written, not rounded to a double
        assert!(acquired
            .payload()
            .contains(r#""n": 123456789012345678901234567890"#));

        let first = Event::Acquired {
            key: "k",
            holder: "b",
            term: 1,
            at: 0,
            previous_holder: None,
            expires_at: 10_000_000,
            value: None,
        };
        let v: serde_json::Value = serde_json::from_str(&first.payload()).unwrap();
        assert!(v.get("previous_holder").is_some_and(|p| p.is_null()));
        assert!(v.get("value").is_some_and(|p| p.is_null()));

        for (reason, text) in [
            (ExpiryReason::Ttl, "ttl"),
            (ExpiryReason::SessionEnded, "session_ended"),
        ] {
            let expired = Event::Expired {
                key: "k",
                holder: "b",
                term: 3,
                at: 0,
                expires_at: 0,
                reason,
            };
            let v: serde_json::Value = serde_json::from_str(&expired.payload()).unwrap();
            assert_eq!(v["event"], "expired");
            assert_eq!(v["reason"], text);
            assert!(v.get("value").is_none());
        }

        let proclaimed = Event::Proclaimed {
            key: "k",
            holder: "b",
            term: 3,
            at: 0,
            value: Some("[1, 2]"),
        };
        let v: serde_json::Value = serde_json::from_str(&proclaimed.payload()).unwrap();
        assert_eq!(v["event"], "proclaimed");
        assert_eq!(v["value"], serde_json::json!([1, 2]));
        assert_eq!(v["term"], 3);

        let released = Event::Released {
            key: "k",
            holder: "b",
            term: 3,
            at: 0,
            forced: false,
        };
        let v: serde_json::Value = serde_json::from_str(&released.payload()).unwrap();
        assert_eq!(v["event"], "released");
        assert_eq!(v["forced"], false);
        assert!(v.get("previous_holder").is_none());
        let forced = Event::Released {
            key: "k",
            holder: "b",
            term: 3,
            at: 0,
            forced: true,
        };
        let v: serde_json::Value = serde_json::from_str(&forced.payload()).unwrap();
        assert_eq!(v["forced"], true);
        assert!(v.get("reason").is_none());
    }

    #[pg_test]
    fn payloads_survive_any_characters_and_fit_the_limit() {
        let nasty = "quote\" back\\slash \u{1} tab\t newline\n é 雪 🦀 </script> '";
        let e = Event::Released {
            key: nasty,
            holder: nasty,
            term: 1,
            at: 0,
            forced: true,
        };
        let v: serde_json::Value = serde_json::from_str(&e.payload()).unwrap();
        assert_eq!(v["key"], nasty);
        assert_eq!(v["holder"], nasty);

        // Worst case: every byte of 255-byte names escaped to \u00XX.
        let worst = "\u{1}".repeat(255);
        let worst_value = format!("\"{}\"", "\\u0001".repeat(333));
        assert_eq!(worst_value.len(), 2000);
        let e = Event::Acquired {
            key: &worst,
            holder: &worst,
            term: i64::MAX,
            at: 0,
            previous_holder: Some(&worst),
            expires_at: 0,
            // the largest value: 2000 bytes of JSON text
            value: Some(&worst_value),
        };
        let payload = e.payload();
        assert!(payload.len() < 8000, "{} bytes", payload.len());
        // and PostgreSQL accepts it
        crate::notify::queue(&payload);
    }

    #[pg_test]
    fn rfc3339_matches_postgres() {
        for ts in [
            "2000-01-01 00:00:00+00",
            "1999-12-31 23:59:59.999999+00",
            "2024-02-29 12:34:56.789012+00",
            "2026-11-22 11:25:03.000001+00",
            "2100-03-01 00:00:00+00",
            "1970-01-01 00:00:00+00",
        ] {
            let (micros, expected) = Spi::connect(|c| {
                let row = c
                    .select(
                        "SELECT ((extract(epoch FROM t) - 946684800) * 1000000)::bigint, \
                                to_char(t AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') \
                           FROM (SELECT $1::timestamptz AS t) s",
                        None,
                        &[ts.into()],
                    )
                    .unwrap()
                    .first();
                (
                    row.get::<i64>(1).unwrap().unwrap(),
                    row.get::<String>(2).unwrap().unwrap(),
                )
            });
            assert_eq!(rfc3339(micros), expected, "{ts}");
        }
    }

    // ---- the statements' lease rules are the protocol crate's ----------------

    /// Every rule of `leaderlock_protocol::sql` (the only form of the rules
    /// the statements of `queries.rs` use), evaluated by PostgreSQL over
    /// leases around their expiry, decides as the function the model
    /// checks: the statements cannot drift from the model.
    #[pg_test]
    fn the_sql_rules_decide_as_the_protocol_crate() {
        use crate::clock::{micros, ts};
        use leaderlock_protocol as p;
        use pgrx::datum::DatumWithOid;
        let now: i64 = 800_000_000_000_000;
        let ttl = 3_000_000;
        let mut cases = 0;
        for (rule, sql) in p::sql::RULES {
            let query = format!(
                "SELECT ({sql})::text FROM (SELECT $5::text AS holder, $6::timestamptz AS expires_at, \
                 $7::int8 AS term, interval '3 seconds' AS ttl) r"
            );
            for holder in [None, Some("a"), Some("b")] {
                let expiries: &[Option<i64>] = if holder.is_some() {
                    &[Some(now - 1), Some(now), Some(now + 1)]
                } else {
                    &[None, Some(now - 1), Some(now + 1)]
                };
                for &expires_at in expiries {
                    for term in [5, p::TERMS_PER_TIMELINE + 3] {
                        for named in [None, Some(term), Some(term - 1)] {
                            for floor in [1, 7, p::TERMS_PER_TIMELINE + 1] {
                                let lease = p::Lease {
                                    holder,
                                    term,
                                    expires_at: expires_at.unwrap_or(i64::MIN),
                                };
                                let live = p::is_live(holder.is_some(), expires_at, now);
                                let want = match *rule {
                                    "is_live" => live.to_string(),
                                    "not is_live" => (!live).to_string(),
                                    "is_held_by" => lease.is_held_by(&"a", now).to_string(),
                                    "may_vacate" => p::may_vacate(&lease, now).to_string(),
                                    "leads" => p::leads(&lease, &"a", named, now).to_string(),
                                    "next_term" => p::next_term(Some(term), floor).to_string(),
                                    "expiry" => p::expiry(now, ttl).to_string(),
                                    "expiry_after_promotion" => {
                                        p::expiry_after_promotion(now, ttl).to_string()
                                    }
                                    other => panic!("no Rust twin for the SQL rule {other}"),
                                };
                                let args = [
                                    ts(now).into(),
                                    "a".into(),
                                    named.map_or_else(DatumWithOid::null::<i64>, Into::into),
                                    floor.into(),
                                    holder.map_or_else(DatumWithOid::null::<&str>, Into::into),
                                    expires_at.map_or_else(
                                        DatumWithOid::null::<TimestampWithTimeZone>,
                                        |e| ts(e).into(),
                                    ),
                                    term.into(),
                                ];
                                let got = if rule.starts_with("expiry") {
                                    let q = query.replace("::text FROM", "::timestamptz FROM");
                                    let t =
                                        Spi::get_one_with_args::<TimestampWithTimeZone>(&q, &args)
                                            .expect("query");
                                    micros(t).map(|m| m.to_string())
                                } else {
                                    Spi::get_one_with_args::<String>(&query, &args).expect("query")
                                };
                                // A WHERE clause takes NULL as false.
                                let got = got.unwrap_or_else(|| "false".into());
                                assert_eq!(
                                    got, want,
                                    "{rule}: {sql} with holder {holder:?}, expires_at {expires_at:?} \
                                     (now {now}), term {term}, named {named:?}, floor {floor}"
                                );
                                cases += 1;
                            }
                        }
                    }
                }
            }
        }
        assert!(cases > 1000, "{cases} cases");
    }

    // ---- 5 the worker's (and the API's) statements use indexes only --------

    #[pg_test]
    fn statements_on_the_table_never_scan_it_whole() {
        use crate::queries as q;
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
            ("LOCK_OWN_0_4", "'k2', 'h2', 10"),
            ("LOCK_LIVE", "'k2'"),
            ("LOCK_LIVE_0_4", "'k2'"),
            ("INSERT_FIRST_TERM", insert_args.as_str()),
            ("START_TERM", start_args.as_str()),
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
            ("LOCK_ACQUIRABLE_0_4", "'k2', 'h2', 10"),
            ("LIVE_TENURE_OF", "'s2', 'h20'"),
            ("LOCK_STALE_TENURES", "'s2', 3"),
            ("STALE_TENURES", "'s2', 3"),
            ("KEY_SLOTS", "'k2'"),
            ("LOCK_KEY_HEAD", "'k2'"),
            ("INSERT_KEY_HEAD", "'new', 1, now(), 3"),
            ("ISSUE_TERM", "'k2', 1, now(), 3"),
            ("SET_ONE_SLOT", "'k2'"),
            ("LIVE_SLOTS", "'s2', now()"),
            ("READ_OWN_SLOT", "'s2', 'h20', 10"),
            ("LOCK_FREE_SLOT", "'s2', 10"),
            ("NEW_SLOT", "'s2', 10"),
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
            ("LOCK_ALL_OWN_0_4", "'h2', 10"),
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
            ("LAPSED_SLOT_SESSIONS", "'s2', now()"),
            ("READ_LEASE_0_3", "'k2'"),
            ("LOCK_ACQUIRABLE_0_3", "'k2', 'h2'"),
            ("LOCK_OWN_0_3", "'k2', 'h2'"),
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
        // Every statement of queries.rs that names the table is listed.
        for &(name, sql) in q::ALL {
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
                Spi::run(&format!("PREPARE leaderlock_plan AS {sql}")).unwrap();
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
        use crate::queries as q;
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

    // ---- 8 failover and durability -----------------------------------------

    #[pg_test]
    fn first_write_on_a_new_timeline_makes_held_leases_outlast_it() {
        // As if this server had just been promoted from timeline 0: the
        // table says held leases were last made safe on an older timeline.
        assert!(bool_of("SELECT le_try_acquire('held', 'a', '30 seconds')"));
        assert!(bool_of("SELECT le_try_acquire('gone', 'b', '20 seconds')"));
        assert!(bool_of("SELECT le_try_acquire('free', 'c', '1 hour')"));
        assert!(bool_of("SELECT le_release('free', 'c')"));
        // 'gone' lapsed by this server's data (its renewal may have been lost).
        Spi::run(
            "UPDATE leaderlock SET expires_at = clock_timestamp() - interval '1 second', \
                    recheck_at = clock_timestamp() - interval '1 second' WHERE key = 'gone'",
        )
        .unwrap();
        Spi::run("UPDATE leaderlock_failover SET timeline = 0").unwrap();
        crate::failover::forget_known_timeline();

        let before = i64_of("SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint");
        // A takeover before the step: refused, and the caller does not take
        // the step in its own transaction (it asks a worker for it).
        assert!(!bool_of("SELECT le_try_acquire('gone', 'x', '1 second')"));
        assert_eq!(i64_of("SELECT timeline FROM leaderlock_failover"), 0);
        // A renewal never shortens a lease: it needs no step.
        assert!(bool_of("SELECT le_renew('held', 'a')"));
        // The step, as the worker takes it.
        assert!(in_call(crate::failover::make_leases_outlast_failover));
        assert_eq!(text_of("SELECT le_leader('gone')").as_deref(), Some("b"));
        assert_eq!(i64_of("SELECT timeline FROM leaderlock_failover"), 1);
        let at_least = |key: &str, ttl_s: i64| {
            let expires = i64_of(&format!(
                "SELECT (extract(epoch FROM expires_at) * 1000000)::bigint FROM leaderlock \
                  WHERE key = '{key}'"
            ));
            assert!(expires >= before + ttl_s * 1_000_000, "{key} not extended");
        };
        at_least("gone", 20);
        at_least("held", 30);
        // recheck_at, the worker's cue, is never after the expiry.
        assert_eq!(
            i64_of("SELECT count(*) FROM leaderlock WHERE holder IS NOT NULL AND recheck_at > expires_at"),
            0
        );
        // A vacant lease stays vacant, and terms go on by one on timeline 1.
        assert_eq!(lease_of("free").0, None);
        assert!(bool_of("SELECT le_try_acquire('free', 'd', '1 hour')"));
        assert_eq!(lease_of("free").1, 2);
        // Done once: a later write extends nothing.
        let image = text_of("SELECT expires_at::text FROM leaderlock WHERE key = 'held'");
        crate::failover::forget_known_timeline();
        assert!(!bool_of("SELECT le_try_acquire('held', 'x', '1 second')"));
        assert_eq!(
            text_of("SELECT expires_at::text FROM leaderlock WHERE key = 'held'"),
            image
        );
    }

    #[pg_test]
    fn writes_commit_synchronously_refusals_change_nothing() {
        Spi::run("SET LOCAL synchronous_commit = off").unwrap();
        assert!(bool_of("SELECT le_try_acquire('sync', 'a', '1 hour')"));
        assert!(!bool_of("SELECT le_try_acquire('sync', 'b', '1 hour')"));
        // Set for the rest of this transaction, past the function's own SET clauses.
        assert_eq!(text_of("SHOW synchronous_commit").as_deref(), Some("on"));
        Spi::run("SET LOCAL synchronous_commit = off").unwrap();
        assert!(!bool_of("SELECT le_renew('sync', 'b')"));
        assert!(!bool_of("SELECT le_release('sync', 'b')"));
        assert_eq!(text_of("SHOW synchronous_commit").as_deref(), Some("off"));
        for call in [
            "SELECT le_renew('sync', 'a')",
            "SELECT le_release('sync', 'a')",
        ] {
            Spi::run("SET LOCAL synchronous_commit = local").unwrap();
            assert!(bool_of(call));
            assert_eq!(
                text_of("SHOW synchronous_commit").as_deref(),
                Some("on"),
                "{call}"
            );
        }
        // A stronger setting is kept.
        Spi::run("SET LOCAL synchronous_commit = remote_apply").unwrap();
        assert!(bool_of("SELECT le_try_acquire('sync', 'a', '1 hour')"));
        assert_eq!(
            text_of("SHOW synchronous_commit").as_deref(),
            Some("remote_apply")
        );
    }

    #[pg_test]
    fn worker_not_running_without_preload() {
        // The pg_test cluster does not preload leaderlock.
        assert!(!bool_of("SELECT le_worker_running()"));
        // No shared memory: no per-database counters; per-key ones work.
        assert!(bool_of("SELECT le_try_acquire('counted', 'a', '1 hour')"));
        assert_eq!(
            text_of("SELECT count(*)::text FROM leaderlock_database_stats").as_deref(),
            Some("0")
        );
        assert_eq!(
            text_of("SELECT tenures || '/' || held FROM leaderlock_stats WHERE key = 'counted'")
                .as_deref(),
            Some("1/true")
        );
    }

    // ---- 12 every database ---------------------------------------------------

    #[pg_test]
    fn every_database_is_served_by_default() {
        assert_eq!(
            text_of("SELECT current_setting('leaderlock.databases')").as_deref(),
            Some("*")
        );
        assert_eq!(
            text_of("SELECT current_setting('leaderlock.database')").as_deref(),
            Some("")
        );
    }

    // ---- 9 le_acquire -------------------------------------------------------

    #[pg_test]
    fn acquire_with_no_wait_is_try_acquire() {
        assert!(bool_of("SELECT le_acquire('w0', 'a', '1 hour', '0')"));
        assert!(!bool_of("SELECT le_acquire('w0', 'b', '1 hour', '0')"));
        // the holder extends, same term
        assert!(bool_of("SELECT le_acquire('w0', 'a', '1 hour', '0')"));
        assert_eq!(lease_of("w0").1, 1);
        assert!(bool_of("SELECT le_release('w0', 'a')"));
        assert!(bool_of("SELECT le_acquire('w0', 'b', '1 hour', '0')"));
        assert_eq!(lease_of("w0"), (Some("b".into()), 2, "held".into()));
    }

    #[pg_test]
    fn acquire_waits_out_its_wait_then_refuses() {
        warm_up();
        assert!(bool_of("SELECT le_try_acquire('w', 'a', '1 hour')"));
        let before = table_image();
        let started = std::time::Instant::now();
        assert!(!bool_of(
            "SELECT le_acquire('w', 'b', '1 hour', '300 milliseconds')"
        ));
        // It waited (a lower bound only: how much longer is not a test's business).
        assert!(started.elapsed() >= std::time::Duration::from_millis(300));
        assert_eq!(table_image(), before);
    }

    #[pg_test]
    fn acquire_takes_over_when_the_lease_lapses_during_the_wait() {
        warm_up();
        assert!(bool_of(
            "SELECT le_try_acquire('w', 'a', '300 milliseconds')"
        ));
        // Nothing vacates it here (no worker): the waiter itself wakes at the
        // expiry and takes over, a new term.
        assert!(bool_of("SELECT le_acquire('w', 'b', '1 hour', '1 minute')"));
        assert_eq!(lease_of("w"), (Some("b".into()), 2, "held".into()));
    }

    #[pg_test]
    fn acquire_rejects_bad_waits_and_changes_nothing() {
        assert!(bool_of("SELECT le_try_acquire('w', 'a', '1 hour')"));
        use PgSqlErrorCode::*;
        assert_rejected(
            "SELECT le_acquire('w', 'b', '1 hour', NULL)",
            ERRCODE_NULL_VALUE_NOT_ALLOWED,
            &["wait"],
        );
        assert_rejected(
            "SELECT le_acquire('w', 'b', '1 hour', '-1 second')",
            ERRCODE_INVALID_PARAMETER_VALUE,
            &["wait", "negative"],
        );
        assert_rejected(
            "SELECT le_acquire('w', 'b', '1 hour', '1 month')",
            ERRCODE_INVALID_PARAMETER_VALUE,
            &["wait", "month"],
        );
        assert_rejected(
            "SELECT le_acquire('w', 'b', '1 hour', '301 seconds')",
            ERRCODE_INVALID_PARAMETER_VALUE,
            &["wait", "leaderlock.max_wait", "300s"],
        );
        assert_rejected(
            "SELECT le_acquire('w', 'b', NULL, '1 second')",
            ERRCODE_NULL_VALUE_NOT_ALLOWED,
            &["ttl"],
        );
        assert_rejected(
            "SELECT le_acquire('', 'b', '1 hour', '1 second')",
            ERRCODE_INVALID_PARAMETER_VALUE,
            &["key"],
        );
        Spi::run("SET LOCAL leaderlock.max_wait = '10s'").unwrap();
        assert_rejected(
            "SELECT le_acquire('w', 'b', '1 hour', '11 seconds')",
            ERRCODE_INVALID_PARAMETER_VALUE,
            &["leaderlock.max_wait", "10s"],
        );
    }

    // ---- 10 session-bound leases ---------------------------------------------

    #[pg_test]
    fn session_bound_needs_the_worker() {
        // The pg_test cluster does not preload leaderlock: refused, clearly.
        use PgSqlErrorCode::*;
        for sql in [
            "SELECT le_try_acquire('s', 'a', '1 hour', session_bound => true)",
            "SELECT le_acquire('s', 'a', '1 hour', '0', session_bound => true)",
        ] {
            assert_rejected(
                sql,
                ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                &["session-bound", "shared_preload_libraries"],
            );
        }
        assert_rejected(
            "SELECT le_try_acquire('s', 'a', '1 hour', session_bound => NULL)",
            ERRCODE_NULL_VALUE_NOT_ALLOWED,
            &["session_bound"],
        );
        // false is a plain lease
        assert!(bool_of(
            "SELECT le_try_acquire('s', 'a', '1 hour', session_bound => false)"
        ));
        assert!(bool_of(
            "SELECT session_pid IS NULL AND session_start IS NULL FROM leaderlock WHERE key = 's'"
        ));
    }

    // ---- 11 value and le_lease -------------------------------------------------

    #[pg_test]
    fn value_is_set_at_acquisition_and_by_proclaim_and_goes_with_the_tenure() {
        let value_of = |k: &str| {
            text_of(&format!(
                "SELECT value::text FROM leaderlock WHERE key = '{k}'"
            ))
        };
        assert!(bool_of(
            r#"SELECT le_try_acquire('v', 'a', '1 hour', value => '{"addr": "10.0.0.1:80"}')"#
        ));
        assert_eq!(value_of("v").as_deref(), Some(r#"{"addr": "10.0.0.1:80"}"#));
        // Kept by an extension without a value, replaced by one with.
        assert!(bool_of("SELECT le_try_acquire('v', 'a', '1 hour')"));
        assert_eq!(value_of("v").as_deref(), Some(r#"{"addr": "10.0.0.1:80"}"#));
        assert!(bool_of(
            "SELECT le_try_acquire('v', 'a', '1 hour', value => '2')"
        ));
        assert_eq!(value_of("v").as_deref(), Some("2"));
        // Exact numbers, whatever their size.
        assert!(bool_of(
            "SELECT le_proclaim('v', 'a', '123456789012345678901234567890.000000000000001')"
        ));
        assert_eq!(
            value_of("v").as_deref(),
            Some("123456789012345678901234567890.000000000000001")
        );
        assert_eq!(
            text_of("SELECT value::text FROM leaderlock_status WHERE key = 'v'").as_deref(),
            value_of("v").as_deref()
        );
        // Only the live holder proclaims.
        let before = table_image();
        assert!(!bool_of("SELECT le_proclaim('v', 'b', '3')"));
        assert!(!bool_of("SELECT le_proclaim('nope', 'a', '3')"));
        assert_eq!(table_image(), before);
        // NULL clears it.
        assert!(bool_of("SELECT le_proclaim('v', 'a', NULL)"));
        assert_eq!(value_of("v"), None);
        assert!(bool_of("SELECT le_proclaim('v', 'a', '[1]')"));
        // Released: no leader, no value; the next tenure starts without one.
        assert!(bool_of("SELECT le_release('v', 'a')"));
        assert_eq!(value_of("v"), None);
        assert!(bool_of("SELECT le_try_acquire('v', 'b', '1 hour')"));
        assert_eq!(value_of("v"), None);
    }

    #[pg_test]
    fn value_over_2000_bytes_is_rejected() {
        assert!(bool_of("SELECT le_try_acquire('v', 'a', '1 hour')"));
        use PgSqlErrorCode::*;
        // 1998 characters and two quotes: exactly 2000 bytes, accepted.
        assert!(bool_of(
            "SELECT le_proclaim('v', 'a', to_jsonb(repeat('x', 1998)))"
        ));
        for sql in [
            "SELECT le_proclaim('v', 'a', to_jsonb(repeat('x', 1999)))",
            "SELECT le_try_acquire('v', 'a', '1 hour', value => to_jsonb(repeat('x', 1999)))",
            "SELECT le_acquire('v2', 'a', '1 hour', '0', value => to_jsonb(repeat('é', 1000)))",
        ] {
            assert_rejected(
                sql,
                ERRCODE_INVALID_PARAMETER_VALUE,
                &["value", "2000 bytes"],
            );
        }
        assert_rejected(
            "SELECT le_proclaim('v', NULL, '1')",
            ERRCODE_NULL_VALUE_NOT_ALLOWED,
            &["id"],
        );
    }

    #[pg_test]
    fn lease_is_one_record_of_the_lease_as_it_stands() {
        let row = |k: &str| {
            text_of(&format!(
                "SELECT concat_ws('|', key, coalesce(holder, '-'), coalesce(term::text, '-'), \
                        (expires_at IS NOT NULL), (remaining > '0' AND remaining <= '1 hour'), \
                        coalesce(value::text, '-')) \
                   FROM le_lease('{k}')"
            ))
            .unwrap()
        };
        assert_eq!(row("unknown"), "unknown|-|-|f|-");
        assert!(bool_of(
            r#"SELECT le_try_acquire('l', 'a', '1 hour', value => '{"x": 1}')"#
        ));
        assert_eq!(row("l"), r#"l|a|1|t|t|{"x": 1}"#);
        assert!(bool_of("SELECT le_release('l', 'a')"));
        assert_eq!(row("l"), "l|-|1|t|-");
        // exactly one record, with the contract's columns
        assert_eq!(i64_of("SELECT count(*) FROM le_lease('unknown')"), 1);
        assert_eq!(
            text_of(
                "SELECT string_agg(attname, ',' ORDER BY attnum) FROM pg_attribute \
                  WHERE attrelid = 'leaderlock_lease'::regclass AND attnum > 0"
            )
            .as_deref(),
            Some("key,holder,term,expires_at,remaining,value")
        );
        assert_rejected(
            "SELECT le_lease(NULL)",
            PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
            &["key"],
        );
    }

    #[pg_test]
    fn lapsed_lease_shows_no_holder_in_le_lease() {
        warm_up();
        assert!(bool_of(
            "SELECT le_try_acquire('l', 'a', '100 milliseconds', value => '1')"
        ));
        sleep_ms(200);
        assert_eq!(
            text_of("SELECT concat_ws('|', coalesce(holder, '-'), term, coalesce(remaining::text, '-'), coalesce(value::text, '-')) FROM le_lease('l')").as_deref(),
            Some("-|1|-|-")
        );
    }

    /// Contract 23: a transition's row is written into
    /// leaderlock_history_pending without a statement (`history::record`):
    /// as INSERT would write it, found through its index as the numbering
    /// reads it; into a table changed behind the extension (another index,
    /// a trigger) by the INSERT statement instead, which maintains them.
    #[pg_test]
    fn history_row_written_directly_or_by_insert_into_a_changed_table() {
        assert!(bool_of("SELECT le_try_acquire('hp', 'a', '10 seconds')"));
        assert!(bool_of(
            "SELECT count(*) = 1 FROM leaderlock_history_pending \
              WHERE key = 'hp' AND event = 'acquired' AND holder = 'a' AND term = 1 \
                AND role = (SELECT oid FROM pg_roles WHERE rolname = current_user) \
                AND at = (SELECT acquired_at FROM leaderlock WHERE key = 'hp') \
                AND payload::jsonb->>'key' = 'hp' AND payload::jsonb->>'holder' = 'a'"
        ));
        // through the index (seqscan off), as against the table (seq + 0:
        // no index can answer it)
        Spi::run("SET LOCAL enable_seqscan = off").expect("set");
        assert_eq!(
            i64_of("SELECT count(*) FROM leaderlock_history_pending WHERE seq > 0"),
            i64_of("SELECT count(*) FROM leaderlock_history_pending WHERE seq + 0 > 0")
        );
        // another index: the row must be in it too
        Spi::run("CREATE INDEX hp_extra ON leaderlock_history_pending (key)").expect("index");
        assert!(bool_of("SELECT le_release('hp', 'a')"));
        assert_eq!(
            i64_of("SELECT count(*) FROM leaderlock_history_pending WHERE key = 'hp'"),
            2,
            "the extra index misses the row"
        );
        Spi::run("DROP INDEX hp_extra").expect("drop");
        // a trigger: it must fire (this one marks the row)
        Spi::run(
            "CREATE FUNCTION hp_t() RETURNS trigger LANGUAGE plpgsql \
                 AS 'BEGIN NEW.holder := NEW.holder || ''!''; RETURN NEW; END'; \
             CREATE TRIGGER hp_t BEFORE INSERT ON leaderlock_history_pending \
                 FOR EACH ROW EXECUTE FUNCTION hp_t()",
        )
        .expect("trigger");
        assert!(bool_of("SELECT le_try_acquire('hp', 'b', '10 seconds')"));
        assert!(bool_of(
            "SELECT count(*) = 1 FROM leaderlock_history_pending \
              WHERE key = 'hp' AND event = 'acquired' AND holder = 'b!'"
        ));
        Spi::run("DROP TRIGGER hp_t ON leaderlock_history_pending").expect("drop");
        assert_eq!(
            i64_of("SELECT count(*) FROM leaderlock_history_pending WHERE key = 'hp' AND seq > 0"),
            3
        );
    }
}
