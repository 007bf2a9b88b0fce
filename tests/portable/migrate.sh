#!/usr/bin/env bash
# Portable -> portable: portable/reinstall.sql keeps every lease, term and
# counter (live, vacant, lapsed leases, values, owners; the tenures of a key
# of many slots, live, lapsed and vacant, in leaderlock_slots; scheduled
# runs, live, finished and missed, their job's term and owner, and the row
# of job '' that keeps the highest term of the jobs forgotten, contract 22;
# sessions, their keys and tenures and a lock-delay, contract 21; a
# schedule of another role, contract 24, and a key it marked as expected to
# be led, contract 25; a group with revoked partitions, contract 26), and
# the functions go on from there.
# Usage: migrate.sh PSQL CONNINFO REPO
set -euo pipefail
PSQL=$1 CONN=$2 REPO=$3
q() { "$PSQL" -X -q -v ON_ERROR_STOP=1 "$CONN" "$@"; }
q <<'SQL' >/dev/null
CREATE ROLE ll_mig_app;
GRANT ll_mig_app TO ll_admin;
SET ROLE ll_mig_app;
SELECT le_try_acquire('m-live', 'a', '1 hour', value => '{"addr": "10.0.0.1", "n": 12345678901234567890}');
RESET ROLE;
SELECT le_try_acquire('m-vacant', 'a', '1 hour'), le_release('m-vacant', 'a');
SELECT le_try_acquire('m-vacant', 'b', '1 hour'), le_release('m-vacant', 'b');
SELECT le_try_acquire('m-lapsed', 'c', '10 milliseconds');
SELECT pg_sleep(0.05);
SELECT le_try_acquire('m-floor', 'd', '1 hour');
-- contract 17: a key of 3 slots with a live tenure of another role (with a
-- value), a vacated one and a lapsed one
SET ROLE ll_mig_app;
SELECT le_try_acquire('m-sem', 's1', '1 hour', value => '{"shard": 1}', slots => 3);
RESET ROLE;
SELECT le_try_acquire('m-sem', 's2', '1 hour', slots => 3);
SELECT le_try_acquire('m-sem', 's3', '10 milliseconds', slots => 3);
SELECT le_release('m-sem', 's2');
SELECT pg_sleep(0.05);
-- contract 22: a job's runs, one claimed live by another role (term 1), one
-- finished (term 2), one recorded missed
SELECT date_trunc('second', le_now()) AS now0 \gset
SET ROLE ll_mig_app;
SELECT le_claim_run('m-job', :'now0'::timestamptz - interval '1 minute', 'r1', '1 hour');
RESET ROLE;
SELECT le_claim_run('m-job', :'now0'::timestamptz - interval '2 minutes', 'r2', '1 hour');
SELECT le_finish_run('m-job', :'now0'::timestamptz - interval '2 minutes', 'r2', 2, true, 'done');
SELECT le_claim_run('m-job', :'now0'::timestamptz - interval '3 minutes', 'r3', '1 hour', '1 second');
-- and the row of job '' (the highest term of the jobs the retention forgot)
INSERT INTO leaderlock_jobs (job, term) VALUES ('', 41);
-- contract 21: a live session of another role keeping values, with two
-- keys (one with a value) and a tenure of a key of many slots (with a
-- value), and a key and a slot vacated under a lock-delay
SET ROLE ll_mig_app;
SELECT le_open_session('m-ses', '1 hour', keep_values => true) AS ms \gset
SELECT le_try_acquire_in(:'ms', 'm-ses-1', '{"v": 1}'), le_try_acquire_in(:'ms', 'm-ses-2'),
       le_try_acquire_in(:'ms', 'm-ses-pool', '{"v": 2}', slots => 2);
SELECT le_open_session('m-ses-d', '200 milliseconds', lock_delay => '1 minute') AS md \gset
SELECT le_try_acquire_in(:'md', 'm-ses-d'), le_try_acquire_in(:'md', 'm-ses-dpool', slots => 2);
RESET ROLE;
SELECT pg_sleep(0.3);
SELECT le_try_acquire('m-ses-d', 'x', '1 hour');   -- ends the lapsed session: the delays start
-- contracts 24 and 25: a schedule of another role, and its mark of its key
SET ROLE ll_mig_app;
SELECT le_schedule('m-sched', cron => '0 3 * * MON-FRI', tz => 'Europe/Paris', overlap => 'forbid') IS NOT NULL;
SELECT le_expect_leader('m-live', '1 minute');
-- contract 26: a group of another role, two of its member's four
-- partitions revoked for a second member
SELECT le_join('m-grp', 'ga', '1 hour', 4, '1 hour') IS NOT NULL;
RESET ROLE;
SELECT le_join('m-grp', 'gb', '1 hour') IS NOT NULL;
SQL
snapshot() {
  q -At -c "SELECT row(l.*)::text FROM leaderlock l ORDER BY key" -c "SELECT row(f.*)::text FROM leaderlock_failover f" \
        -c "SELECT row(s.*)::text FROM leaderlock_slots s ORDER BY key, slot" \
        -c "SELECT row(j.*)::text FROM leaderlock_jobs j ORDER BY job" \
        -c "SELECT row(r.*)::text FROM leaderlock_runs r ORDER BY job, due" \
        -c "SELECT row(x.*)::text FROM leaderlock_sessions x ORDER BY session" \
        -c "SELECT row(x.*)::text FROM leaderlock_schedules x ORDER BY job" \
        -c "SELECT row(e.*)::text FROM leaderlock_expected e ORDER BY key" \
        -c "SELECT row(g.*)::text FROM leaderlock_groups g ORDER BY grp" \
        -c "SELECT row(m.*)::text FROM leaderlock_members m ORDER BY grp, member" \
        -c "SELECT row(p.*)::text FROM leaderlock_partitions p ORDER BY grp, partition" \
        -c "SELECT row(h.position, h.at, h.event, h.key, h.holder, h.term, h.role, h.payload)::text
              FROM leaderlock_history h ORDER BY position" \
        -c "SELECT row(d.*)::text FROM leaderlock_history_head d"
}
# every transition above numbered (contract 23: the history comes along, positions and all)
q -At -c "SELECT _le_number_history()" >/dev/null
before=$(snapshot)
(cd "$REPO/portable" && q -f reinstall.sql) | sed 's/^/  /'
after=$(snapshot)
if [ "$before" != "$after" ]; then
  echo "  FAIL: rows differ after the reinstall"; diff <(echo "$before") <(echo "$after") || true; exit 1
fi
echo "  ok: $(echo "$before" | wc -l) rows identical after the reinstall"
# N8: a reader's open transaction makes the move fail within its lock
# timeout (2 s), nothing changed, instead of stalling it and every call
# queued behind it.
q -c "BEGIN" -c "SELECT count(*) FROM leaderlock" -c "SELECT pg_sleep(5)" -c "COMMIT" >/dev/null &
reader=$!
sleep 0.5
t0=$(date +%s.%N)
out=$( (cd "$REPO/portable" && q -f reinstall.sql) 2>&1 ) && rc=0 || rc=$?
took=$(echo "$(date +%s.%N) - $t0" | bc)
wait "$reader"
if [ "$rc" = 0 ] || ! echo "$out" | grep -q "lock timeout" || [ "$(echo "$took < 4" | bc)" != 1 ]; then
  echo "  FAIL: the reinstall behind an open reader (rc $rc, $took s): $out"; exit 1
fi
[ "$(snapshot)" = "$before" ] || { echo "  FAIL: rows changed by the refused reinstall"; exit 1; }
echo "  ok: behind a reader's open transaction the reinstall fails in $(printf %.1f "$took") s (lock timeout), nothing changed"
# The functions go on from the carried state.
out=$(q -At <<'SQL'
SET ROLE ll_mig_app;
SELECT le_renew('m-live', 'a');                            -- the owner still owns it
RESET ROLE;
CREATE ROLE ll_mig_other;
GRANT ll_mig_other TO ll_admin;
SET ROLE ll_mig_other;
SELECT le_release('m-live', 'a');                          -- another role may not
RESET ROLE;
SELECT le_try_acquire('m-vacant', 'e', '1 hour');
SELECT term FROM leaderlock WHERE key = 'm-vacant';        -- 3: goes on from 2
SELECT le_try_acquire('m-lapsed', 'f', '1 hour');
SELECT term, expiries FROM leaderlock WHERE key = 'm-lapsed';
SET ROLE ll_mig_other;
SELECT le_renew('m-sem', 's1');                            -- another role may not renew s1's tenure
RESET ROLE;
SET ROLE ll_mig_app;
SELECT le_renew('m-sem', 's1'), le_assert_leader('m-sem', 's1');   -- its owner may: term 1
RESET ROLE;
SELECT le_try_acquire('m-sem', 's4', '1 hour', slots => 3); -- the vacant slot 2, term 4
SELECT le_try_acquire('m-sem', 's5', '1 hour', slots => 3); -- the lapsed slot 3, term 5
SELECT le_try_acquire('m-sem', 's6', '1 hour', slots => 3); -- every slot live
SELECT string_agg(holder || ':' || term, ' ' ORDER BY slot) FROM leaderlock_slots WHERE key = 'm-sem';
SELECT tenures, releases, expiries FROM leaderlock_stats WHERE key = 'm-sem';
SET ROLE ll_mig_other;
SELECT le_renew_run('m-job', (SELECT due FROM leaderlock_runs WHERE holder = 'r1'), 'r1');  -- another role may not
RESET ROLE;
SET ROLE ll_mig_app;
SELECT le_renew_run('m-job', (SELECT due FROM leaderlock_runs WHERE holder = 'r1'), 'r1', NULL, 1);  -- its owner may
RESET ROLE;
SELECT le_claim_run('m-job', date_trunc('second', le_now()), 'r4', '1 hour');  -- the job's next term, 3
SET ROLE ll_mig_other;
SELECT le_renew_session((SELECT session FROM leaderlock_sessions WHERE id = 'm-ses'));  -- another role may not
RESET ROLE;
SET ROLE ll_mig_app;
SELECT le_renew_session((SELECT session FROM leaderlock_sessions WHERE id = 'm-ses')),  -- its owner may
       le_assert_leader('m-ses-2', 'm-ses'),                                             -- held under it: term 1
       le_assert_leader('m-ses-pool', 'm-ses');                                          -- its tenure too
RESET ROLE;
SELECT le_try_acquire('m-ses-d', 'y', '1 hour'),
       (SELECT holder IS NULL AND delayed_until > now() FROM leaderlock WHERE key = 'm-ses-d'),                                         -- the lock-delay goes on
       le_try_acquire('m-ses-dpool', 'y', '1 hour', slots => 2),                                  -- slot 2 (slot 1 delayed)
       (SELECT holder IS NULL AND delayed_until > now()
          FROM leaderlock_slots WHERE key = 'm-ses-dpool' AND slot = 1);
SET ROLE ll_mig_app;
SELECT le_close_session((SELECT session FROM leaderlock_sessions WHERE id = 'm-ses'));
RESET ROLE;
SELECT value FROM leaderlock WHERE key = 'm-ses-1';                                      -- kept by the session
SELECT value FROM leaderlock_slots WHERE key = 'm-ses-pool';                              -- its tenure's too
SELECT le_claim_run('m-new', date_trunc('second', le_now()), 'r1', '1 hour');  -- a new job starts above job '': 42
SELECT owner::regrole FROM leaderlock_jobs WHERE job = 'm-job';                           -- the role that made it
SET ROLE ll_mig_other;                                            -- another role may change neither
DO $$ BEGIN PERFORM le_unschedule('m-sched'); EXCEPTION WHEN insufficient_privilege THEN NULL; END $$;
DO $$ BEGIN PERFORM le_unexpect_leader('m-live'); EXCEPTION WHEN insufficient_privilege THEN NULL; END $$;
RESET ROLE;
SELECT to_char(le_next_due('m-sched', '2026-11-27 10:00:00+00') AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI');
SET ROLE ll_mig_app;
SELECT le_pause_schedule('m-sched'), le_unschedule('m-sched'), le_unexpect_leader('m-live');  -- its owner may
RESET ROLE;
DROP ROLE ll_mig_other;
SQL
)
expected=$'t\nf\nt\n3\nt\n2|1\nf\nt|1\nt\nt\nf\ns1:1 s4:4 s5:5\n5|1|1\nf\nt\n3\nf\nt|1|1\nf|t|t|t\nt\n{"v": 1}\n{"v": 2}\n42\nll_mig_app\n2026-11-30 02:00\nt|t|t'
if [ "$out" != "$expected" ]; then
  echo "  FAIL: after the reinstall got:"; echo "$out"; exit 1
fi
echo "  ok: owners, terms, counters, sessions, schedules and marks go on after the reinstall"
# A group goes on: the revoked partition given back goes to the other
# member in the next term, the others stay; both leave.
out=$(q -At <<'SQL'
SET ROLE ll_mig_app;
SELECT le_ack('m-grp', 'ga', 3, 1);
RESET ROLE;
SELECT string_agg(partition || ':' || member || ':' || term, ' ' ORDER BY partition)
  FROM leaderlock_partitions WHERE grp = 'm-grp';
SELECT le_assert_partition('m-grp', 3, 'gb', 2);
SELECT le_leave('m-grp', 'gb');
SET ROLE ll_mig_app;
SELECT le_leave('m-grp', 'ga');
RESET ROLE;
SELECT count(*) FROM leaderlock_partitions WHERE grp = 'm-grp' AND member IS NOT NULL;
SQL
)
[ "$out" = $'t\n1:ga:1 2:ga:1 3:gb:2 4:ga:1\n2\nt\nt\n0' ] || { echo "  FAIL: the group after the reinstall got:"; echo "$out"; exit 1; }
echo "  ok: a group's members, partitions and terms go on after the reinstall"
