-- Every statement the functions run is a key lookup, best done through the
-- primary key whatever the table's statistics say. Plans are cached per
-- backend: one made while the table had a few rows would otherwise stay a
-- sequential scan as the table grows (quadratic when one transaction
-- acquires many keys). The setting applies only inside each call.
ALTER FUNCTION le_try_acquire(text, text, interval, boolean, jsonb, integer) SET enable_seqscan = off;
ALTER FUNCTION le_acquire(text, text, interval, interval, boolean, jsonb, integer, integer)
    SET enable_seqscan = off;
ALTER FUNCTION le_renew(text, text, interval, bigint) SET enable_seqscan = off;
ALTER FUNCTION le_release(text, text, bigint) SET enable_seqscan = off;
ALTER FUNCTION le_renew_all(text) SET enable_seqscan = off;
ALTER FUNCTION le_release_all(text) SET enable_seqscan = off;
ALTER FUNCTION le_proclaim(text, text, jsonb) SET enable_seqscan = off;
ALTER FUNCTION le_leader(text) SET enable_seqscan = off;
ALTER FUNCTION le_lease(text) SET enable_seqscan = off;
ALTER FUNCTION le_holders(text) SET enable_seqscan = off;
ALTER FUNCTION le_force_release(text) SET enable_seqscan = off;
ALTER FUNCTION le_claim_run(text, timestamptz, text, interval, interval) SET enable_seqscan = off;
ALTER FUNCTION le_renew_run(text, timestamptz, text, interval, bigint) SET enable_seqscan = off;
ALTER FUNCTION le_finish_run(text, timestamptz, text, bigint, boolean, text) SET enable_seqscan = off;
ALTER FUNCTION le_schedule(text, interval, text, text, interval, text, integer) SET enable_seqscan = off;
ALTER FUNCTION le_unschedule(text) SET enable_seqscan = off;
ALTER FUNCTION le_pause_schedule(text) SET enable_seqscan = off;
ALTER FUNCTION le_resume_schedule(text) SET enable_seqscan = off;
ALTER FUNCTION le_next_due(text, timestamptz) SET enable_seqscan = off;
ALTER FUNCTION le_backfill_due(text) SET enable_seqscan = off;
ALTER FUNCTION le_expect_leader(text, interval) SET enable_seqscan = off;
ALTER FUNCTION le_unexpect_leader(text) SET enable_seqscan = off;
ALTER FUNCTION le_open_session(text, interval, boolean, interval, boolean) SET enable_seqscan = off;
ALTER FUNCTION le_renew_session(uuid, interval) SET enable_seqscan = off;
ALTER FUNCTION le_close_session(uuid) SET enable_seqscan = off;
ALTER FUNCTION le_try_acquire_in(uuid, text, jsonb, integer) SET enable_seqscan = off;
ALTER FUNCTION le_acquire_in(uuid, text, interval, jsonb, integer, integer) SET enable_seqscan = off;
ALTER FUNCTION le_join(text, text, interval, integer, interval) SET enable_seqscan = off;
ALTER FUNCTION le_leave(text, text) SET enable_seqscan = off;
ALTER FUNCTION le_ack(text, text, integer, bigint) SET enable_seqscan = off;
ALTER FUNCTION le_assignment(text, text) SET enable_seqscan = off;
