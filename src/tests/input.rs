//! Contract sections 6 and 7: bad input is refused with its SQLSTATE and
//! changes nothing; what ordinary roles may do.

use pgrx::prelude::*;

#[pg_schema]
mod tests {
    use crate::tests::helpers::*;
    use pgrx::prelude::*;

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
}
