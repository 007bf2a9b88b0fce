-- Removes the portable edition from the current schema: DROP EXTENSION
-- where it was installed with CREATE EXTENSION (or pg_tle), else exactly
-- the objects portable/leaderlock.sql makes (this version's and earlier
-- portable versions'), named by their signatures, without CASCADE: an
-- object of anyone else's, in that schema or depending on leaderlock's,
-- is never dropped; if one depends on leaderlock, nothing is dropped and
-- the error names it. Refuses to touch the compiled edition. The tables
-- go too (leaderlock, leaderlock_slots, leaderlock_sessions,
-- leaderlock_jobs, leaderlock_runs, leaderlock_history, leaderlock_schedules,
-- leaderlock_expected, leaderlock_groups, leaderlock_members,
-- leaderlock_partitions): run save.sql first to keep the leases, sessions,
-- runs, schedules, marks and groups.
SET LOCAL client_min_messages = warning;
DO $uninstall$
DECLARE
    s text := pg_catalog.current_schema();
    old_path text := pg_catalog.current_setting('search_path');
    ext text := (SELECT e.extversion FROM pg_catalog.pg_extension e
                  WHERE e.extname OPERATOR(pg_catalog.=) 'leaderlock');
    fns text;
    msg text;
    detail text;
BEGIN
    PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
    PERFORM pg_catalog.set_config('client_min_messages', 'warning', true);  -- (IF EXISTS notices)
    IF ext IS NOT NULL THEN
        IF ext NOT LIKE '%portable' THEN
            RAISE EXCEPTION 'leaderlock: the installed extension is the compiled edition (version %); use DROP EXTENSION leaderlock', ext;
        END IF;
        DROP EXTENSION leaderlock;
        PERFORM pg_catalog.set_config('search_path', old_path, true);
        RETURN;
    END IF;
    IF s IS NULL OR pg_catalog.to_regclass(pg_catalog.quote_ident(s) || '.leaderlock') IS NULL THEN
        RAISE EXCEPTION 'leaderlock: no leaderlock table in schema %', s;
    END IF;
    SELECT pg_catalog.string_agg(pg_catalog.format('%I.%s', s, f), ', ') INTO fns
      FROM pg_catalog.unnest(ARRAY[
        -- the API
        'le_try_acquire(text, text, interval, boolean, jsonb, integer)',
        'le_acquire(text, text, interval, interval, boolean, jsonb, integer)',
        'le_renew(text, text, interval, bigint)', 'le_release(text, text, bigint)', 'le_renew_all(text)',
        'le_release_all(text)', 'le_proclaim(text, text, jsonb)',
        'le_force_release(text)', 'le_assert_leader(text, text, bigint)', 'le_leader(text)',
        'le_lease(text)', 'le_holders(text)', 'le_worker_running()', 'le_database_stats()',
        'le_capabilities()', 'le_expire_lapsed()', 'le_now()',
        'le_claim_run(text, timestamptz, text, interval, interval)',
        'le_renew_run(text, timestamptz, text, interval, bigint)',
        'le_finish_run(text, timestamptz, text, bigint, boolean, text)',
        'le_open_session(text, interval, boolean, interval, boolean)', 'le_renew_session(uuid, interval)',
        'le_close_session(uuid)', 'le_try_acquire_in(uuid, text, jsonb, integer)',
        'le_acquire_in(uuid, text, interval, jsonb, integer, integer)',
        'le_history(bigint, text, text, integer)', 'le_history_position()',
        'le_schedule(text, interval, text, text, interval, text, integer)', 'le_unschedule(text)',
        'le_pause_schedule(text)', 'le_resume_schedule(text)', 'le_next_due(text, timestamptz)', 'le_backfill_due(text)',
        'le_schedule_times(text)', 'le_expect_leader(text, interval)', 'le_unexpect_leader(text)',
        -- the internals
        '_le_record(timestamptz, text, text, text, bigint, text)', '_le_number_history()', '_le_prune_runs()',
        '_le_name(text, text)', '_le_seconds(numeric)', '_le_admin_setting(text)',
        '_le_setting_us(text, bigint, bigint, bigint)',
        '_le_us(interval)', '_le_hours(interval)', '_le_ttl(interval, boolean)', '_le_wait(interval)',
        '_le_session_bound(boolean)', '_le_session_arg(uuid)', '_le_keep_values(boolean)',
        '_le_lock_delay(interval)', '_le_priority(integer)',
        '_le_value(jsonb)', '_le_slots(integer)', '_le_escape_debug(text)',
        '_le_slots_differ(text, integer, integer)', '_le_due(timestamptz)',
        '_le_not_before_due(timestamptz, timestamptz)', '_le_misfire_grace(interval)', '_le_term(bigint, boolean)',
        '_le_outcome(boolean)', '_le_detail(text)', '_le_session_role()', '_le_caller()',
        '_le_act_as(oid)', '_le_key(text, oid)', '_le_rfc3339(timestamptz)',
        '_le_announce(text, text, text, bigint, timestamptz, text, timestamptz, jsonb, boolean, integer, text)',
        '_le_announce_run(text, text, timestamptz, text, bigint, timestamptz, timestamptz, integer, text)',
        '_le_durable()', '_le_timeline()', '_le_term_floor()', '_le_promoted_at()',
        '_le_failover_record()', '_le_unrestricted()',
        '_le_session_lasts(uuid, timestamptz)',
        '_le_extend(text, text, timestamptz, interval, oid, bigint, boolean, uuid)', '_le_lock_own(text, text, oid)',
        '_le_extend_slot(text, text, timestamptz, interval, oid, bigint, boolean, uuid)',
        '_le_lock_own_slot(text, text, oid)', '_le_end_stale_tenures(text, integer)',
        '_le_attempt_slots(text, text, interval, jsonb, oid, bigint, integer, integer, boolean, timestamptz, uuid, timestamptz)',
        '_le_extend_sessions(uuid, text, timestamptz, interval, oid, timestamptz)',
        '_le_end_session(uuid, boolean, timestamptz, text)', '_le_end_lapsed_key(text, timestamptz)',
        '_le_attempt(text, text, interval, jsonb, oid, bigint, integer, uuid)',
        '_le_acquire_wait(text, text, interval, interval, jsonb, integer, uuid)',
        '_le_again(text, text, oid, bigint, integer)', '_le_renew(text, text, interval, oid, bigint)',
        '_le_release(text, text, oid, bigint)', '_le_renew_all(text, oid)', '_le_release_all(text, oid)',
        '_le_proclaim(text, text, jsonb, oid)',
        '_le_force_release(text, oid)', '_le_assert_leader(text, text, bigint, oid)',
        '_le_expire_lapsed()',
        '_le_claim_run(text, timestamptz, text, interval, interval, oid)',
        '_le_renew_run(text, timestamptz, text, interval, oid, bigint)',
        '_le_finish_run(text, timestamptz, text, bigint, boolean, text, oid)',
        '_le_open_session(text, interval, interval, boolean, oid)', '_le_renew_session(uuid, interval, oid)',
        '_le_close_session(uuid, oid)',
        -- (contracts 24 and 25: the calendar, schedules, keys expected to be led)
        '_le_debug_str(text)', '_le_unix_us(timestamptz)', '_le_from_unix_us(numeric)', '_le_us_interval(numeric)',
        '_le_every_next(numeric, timestamptz)', '_le_tz_known(text)', '_le_tz_why(text)',
        '_le_cron_ws(text, integer)', '_le_cron_ordinal(text, integer)', '_le_cron_name(text, integer)',
        '_le_cron_spec(text, integer, boolean)', '_le_cron_root(text, integer, boolean)',
        '_le_cron_named(integer, text)',
        '_le_cron_set(integer, text[], text[], numeric[], numeric[], text[], text[], numeric[])',
        '_le_cron_field(text, integer, integer)', '_le_cron_parse(text)',
        '_le_local_instants(timestamp, text)', '_le_cron_local_next(bigint[], integer[], text, timestamp)',
        '_le_cron_next(bigint[], integer[], text, timestamptz)', '_le_calendar(interval, text, text)',
        '_le_next_after(numeric, bigint[], integer[], text, timestamptz)',
        '_le_schedule_calendar(interval, text, text)', '_le_schedule_grace(interval, numeric)',
        '_le_overlap(text)', '_le_within(interval)', '_le_json_seconds(numeric)',
        '_le_announce_leaderless(text, timestamptz, timestamptz, numeric, timestamptz)',
        '_le_max_jobs()', '_le_may_make_job(oid)', '_le_make_job(text, oid)',
        '_le_lock_claimable(text, timestamptz, timestamptz, timestamptz, timestamptz)',
        '_le_other_run_live(text, timestamptz, timestamptz, timestamptz)',
        '_le_record_missed(text, timestamptz, timestamptz, text, bigint, boolean)',
        '_le_settle_job(text, numeric, bigint[], integer[], text, numeric, timestamptz, timestamptz, text, timestamptz, timestamptz, timestamptz, timestamptz, integer)',
        '_le_settle(timestamptz)',
        '_le_before_change(text, boolean, interval, text, text, interval, timestamptz, text, timestamptz, timestamptz)',
        '_le_check_expected(timestamptz)', '_le_schedule(text, interval, text, text, interval, text, oid, integer)', '_le_backfill(integer)', '_le_announce_schedule(text, text, timestamptz)',
        '_le_not_schedule_owner(text)', '_le_unschedule(text, oid)', '_le_set_paused(text, boolean, oid)',
        '_le_mark_member(text, oid)', '_le_expect_leader(text, interval, oid)', '_le_unexpect_leader(text, oid)',
        -- (contract 26: groups)
        'le_join(text, text, interval, integer, interval)', 'le_leave(text, text)',
        'le_ack(text, text, integer, bigint)', 'le_assignment(text, text)',
        'le_assert_partition(text, integer, text, bigint)',
        '_le_partitions(integer)', '_le_drain(interval)', '_le_partition(integer)',
        '_le_group_refused(text, text, text)',
        '_le_announce_partition(text, text, integer, text, bigint, timestamptz, timestamptz)',
        '_le_group_settle(text, integer, interval, timestamptz)', '_le_groups_due(timestamptz)',
        '_le_group_step_due(text, integer, interval, boolean, timestamptz)',
        '_le_group_grant(text, integer, text, uuid, bigint, bigint, timestamptz)',
        '_le_may_make_group(oid)', '_le_group_renew(uuid, interval, oid, timestamptz)',
        '_le_join(text, text, interval, integer, interval, oid)', '_le_leave(text, text, oid)',
        '_le_ack(text, text, integer, bigint, oid)', '_le_assert_partition(text, integer, text, bigint, oid)',
        -- earlier portable versions' API and internals
        'le_try_acquire(text, text, interval, boolean, jsonb)',
        'le_acquire(text, text, interval, interval, boolean, jsonb)',
        '_le_announce(text, text, text, bigint, timestamptz, text, timestamptz, jsonb, boolean)',
        '_le_attempt(text, text, interval, jsonb, oid, bigint)',
        -- (before sessions, contract 21)
        '_le_announce(text, text, text, bigint, timestamptz, text, timestamptz, jsonb, boolean, integer)',
        '_le_extend(text, text, timestamptz, interval, oid, bigint)',
        '_le_attempt(text, text, interval, jsonb, oid, bigint, integer)',
        '_le_setting_us(text, bigint)', '_le_failover_step()', '_le_failover_ready()',
        '_le_expire(text)', '_le_touch(text)',
        -- (before keys of many slots under sessions, contract 21)
        '_le_slots_in(integer)', '_le_extend_slot(text, text, timestamptz, interval, oid, bigint)',
        '_le_attempt_slots(text, text, interval, jsonb, oid, bigint, integer, integer, boolean, timestamptz)'])
      AS f;
    BEGIN
        EXECUTE pg_catalog.format('DROP VIEW IF EXISTS %1$I.leaderlock_status, %1$I.leaderlock_stats, '
                                  '%1$I.leaderlock_database_stats, %1$I._le_caller_key, '
                                  '%1$I.leaderlock_schedule_status, %1$I.leaderlock_group_status', s);
        EXECUTE 'DROP FUNCTION IF EXISTS ' || fns;
        EXECUTE pg_catalog.format('DROP TYPE IF EXISTS %1$I.leaderlock_lease', s);
        EXECUTE pg_catalog.format('DROP TABLE %1$I.leaderlock, %1$I.leaderlock_failover', s);
        EXECUTE pg_catalog.format('DROP TABLE IF EXISTS %1$I.leaderlock_slots', s);
        EXECUTE pg_catalog.format('DROP TABLE IF EXISTS %1$I.leaderlock_sessions', s);
        EXECUTE pg_catalog.format('DROP TABLE IF EXISTS %1$I.leaderlock_history, %1$I.leaderlock_history_pending, '
                                  '%1$I.leaderlock_history_head', s);
        EXECUTE pg_catalog.format('DROP TABLE IF EXISTS %1$I.leaderlock_runs, %1$I.leaderlock_jobs', s);
        EXECUTE pg_catalog.format('DROP TABLE IF EXISTS %1$I.leaderlock_schedules, %1$I.leaderlock_expected', s);
        EXECUTE pg_catalog.format('DROP TABLE IF EXISTS %1$I.leaderlock_groups, %1$I.leaderlock_members, '
                                  '%1$I.leaderlock_partitions', s);
        EXECUTE pg_catalog.format('DROP TABLE IF EXISTS %1$I._le_secret', s);
        EXECUTE pg_catalog.format('DROP SEQUENCE IF EXISTS %1$I._le_promo_tl, %1$I._le_promo_at', s);
    EXCEPTION WHEN dependent_objects_still_exist THEN
        GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT, detail = PG_EXCEPTION_DETAIL;
        RAISE EXCEPTION USING ERRCODE = 'dependent_objects_still_exist',
            MESSAGE = pg_catalog.format('leaderlock: not uninstalled: objects that are not leaderlock''s depend on it (%s)', msg),
            DETAIL = detail,
            HINT = 'Nothing was dropped. Drop or change those objects first (their owners may), then run this again.';
    END;
    PERFORM pg_catalog.set_config('search_path', old_path, true);
END
$uninstall$;
