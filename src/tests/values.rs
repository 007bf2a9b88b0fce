//! Contracts 11 and 23: the leader value, le_lease, the history's rows.

use pgrx::prelude::*;

#[pg_schema]
mod tests {
    use crate::tests::helpers::*;
    use pgrx::prelude::*;

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
