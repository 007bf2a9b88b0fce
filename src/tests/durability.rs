//! Contracts 8, 9, 10 and 12: failover and durability, every database
//! served, le_acquire's waits, session-bound leases.

use pgrx::prelude::*;

#[pg_schema]
mod tests {

    use crate::tests::helpers::*;
    use pgrx::prelude::*;

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
        crate::lease::failover::forget_known_timeline();

        let before = i64_of("SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint");
        // A takeover before the step: refused, and the caller does not take
        // the step in its own transaction (it asks a worker for it).
        assert!(!bool_of("SELECT le_try_acquire('gone', 'x', '1 second')"));
        assert_eq!(i64_of("SELECT timeline FROM leaderlock_failover"), 0);
        // A renewal never shortens a lease: it needs no step.
        assert!(bool_of("SELECT le_renew('held', 'a')"));
        // The step, as the worker takes it.
        assert!(in_call(
            crate::lease::failover::make_leases_outlast_failover
        ));
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
        crate::lease::failover::forget_known_timeline();
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
}
