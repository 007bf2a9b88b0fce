#!/usr/bin/env bash
# Portable -> portable: portable/reinstall.sql keeps every lease, term and
# counter (live, vacant, lapsed leases, values, owners), and the functions
# go on from there. Usage: migrate.sh PSQL CONNINFO REPO
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
SQL
snapshot() { q -At -c "SELECT row(l.*)::text FROM leaderlock l ORDER BY key" -c "SELECT row(f.*)::text FROM leaderlock_failover f"; }
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
DROP ROLE ll_mig_other;
SQL
)
expected=$'t\nf\nt\n3\nt\n2|1'
if [ "$out" != "$expected" ]; then
  echo "  FAIL: after the reinstall got:"; echo "$out"; exit 1
fi
echo "  ok: owners, terms and counters go on after the reinstall"
