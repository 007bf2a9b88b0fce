//! Contract sections 2, 3 and 16-18 in one backend: acquire, renew,
//! release, the lease clock, renew and release all, keys of many slots,
//! candidates, le_leader and the status view, le_assert_leader.

use pgrx::prelude::*;

#[pg_schema]
mod tests {
    use crate::announce::notify::Event;
    use crate::lease;
    use crate::tests::helpers::*;
    use pgrx::prelude::*;

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
}
