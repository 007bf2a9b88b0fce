#!/usr/bin/env bash
# Contract 8.1 and 8.2 on the portable edition with a real standby: terms
# never go back across a promotion, and held leases outlast it.
#
#   1. a primary (no preload) with the portable edition installed by a
#      non-superuser; leases: 'held' (live, 1 hour), 'vacant' (term 3,
#      released), 'lapsing' (live 2 s), and 'sem', a key of 2 slots
#      (contract 17) with one live tenure (term 1) and a vacated one (2);
#   2. a standby from pg_basebackup -R; reads work there, writes do not;
#   3. the primary is stopped (its last leases acknowledged), the standby
#      promoted with pg_ctl promote, and at once, before anything else
#      (in particular before the checkpoint that promotion requests has
#      necessarily finished), a new key and the vacant key are acquired:
#      their terms must be >= 2^32 + 1 (the floor of timeline 2), and so
#      must the term of a new tenure of 'sem'; 'held', 'lapsing' and the
#      live tenure of 'sem' must last at least until the promotion + ttl
#      (leaderlock_status: the raw expires_at of a lease held across the
#      promotion is extended when read, never by locking its row); a
#      group's member of before (contract 26) outlasts it too (its
#      partition is revoked for a new member, not granted at once), and
#      the grant after its ack gets the floor; a member that had lapsed
#      and lost its partitions, revived by the promotion, owns them again
#      at its next renewal.
#
# Usage: tests/portable/promotion.sh [--bindir DIR]   (default PostgreSQL 15;
#        /opt/leaderlock/postgresql/18/bin for 18)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
BINDIR=/usr/lib/postgresql/15/bin
[ "${1:-}" = --bindir ] && BINDIR=$2
if [ -f "$BINDIR/../lib/libpq.so.5" ]; then
  export LD_LIBRARY_PATH="$(cd "$BINDIR/../lib" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
MAJOR=$("$BINDIR/postgres" --version | sed -E 's/.* ([0-9]+)(\.[0-9]+)?.*/\1/')
WORK=$(mktemp -d "${PORTABLE_TEST_TMP:-/tmp/portable-promotion}-XXXXXX")
chmod 755 "$WORK"
as_server=()
if [ "$(id -u)" -eq 0 ]; then
  chown postgres "$WORK"
  as_server=(sudo -u postgres env "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}")
fi
P1=$(python3 "$REPO/scripts/free_port.py"); P2=$(python3 "$REPO/scripts/free_port.py")
cleanup() {
  for d in primary standby; do
    "${as_server[@]}" "$BINDIR/pg_ctl" -D "$WORK/$d" -m immediate stop >/dev/null 2>&1 || true
  done
  rm -rf "$WORK"
}
trap cleanup EXIT
opts() { echo "-p $1 -c listen_addresses=127.0.0.1 -c unix_socket_directories=$WORK -c shared_preload_libraries='' -c checkpoint_timeout=1h"; }
q() { local port=$1; shift; "$BINDIR/psql" -X -q -At -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" "$@"; }

echo "=== PostgreSQL $MAJOR: primary on $P1, standby on $P2"
"${as_server[@]}" "$BINDIR/initdb" -D "$WORK/primary" -U postgres -E UTF8 --locale=C.UTF-8 -A trust >/dev/null
"${as_server[@]}" "$BINDIR/pg_ctl" -D "$WORK/primary" -l "$WORK/primary.log" -w -o "$(opts "$P1")" start >/dev/null \
  || { cat "$WORK/primary.log"; exit 1; }
q "$P1" -U postgres -d postgres -c "CREATE ROLE ll_admin LOGIN CREATEROLE" -c "CREATE DATABASE ll OWNER ll_admin"
q "$P1" -U postgres -d ll -c "ALTER SCHEMA public OWNER TO ll_admin" -c "REVOKE CREATE ON SCHEMA public FROM PUBLIC"
q "$P1" -U ll_admin -d ll -1 -f "$REPO/portable/leaderlock.sql" >/dev/null
q "$P1" -U ll_admin -d ll >/dev/null <<'SQL'
SELECT le_join('grp', 'old-member', '1 hour', 2) IS NOT NULL;   -- contract 26: terms 1
SELECT le_try_acquire('held', 'old-primary', '1 hour');
SELECT le_try_acquire('vacant', 'a', '1 hour'), le_release('vacant', 'a');
SELECT le_try_acquire('vacant', 'b', '1 hour'), le_release('vacant', 'b');
SELECT le_try_acquire('vacant', 'c', '1 hour'), le_release('vacant', 'c');
SELECT le_try_acquire('lapsing', 'old-primary', '2 seconds');
SELECT le_try_acquire('sem', 'old-primary', '1 hour', slots => 2);
SELECT le_try_acquire('sem', 'old-2', '1 hour', slots => 2), le_release('sem', 'old-2');
-- a group whose one member lapsed, its partitions freed by a step (a
-- join and a leave), no step due: the promotion revives the member
SELECT le_join('lapsed', 'gone', '2 seconds', 2) IS NOT NULL, pg_sleep(2.1);
SELECT le_join('lapsed', 'passer', '1 hour') IS NOT NULL, le_leave('lapsed', 'passer');
SQL

"${as_server[@]}" "$BINDIR/pg_basebackup" -h 127.0.0.1 -p "$P1" -U postgres -D "$WORK/standby" -R -X stream -c fast
"${as_server[@]}" "$BINDIR/pg_ctl" -D "$WORK/standby" -l "$WORK/standby.log" -w -o "$(opts "$P2")" start >/dev/null \
  || { cat "$WORK/standby.log"; exit 1; }
for _ in $(seq 100); do
  [ "$(q "$P2" -U ll_admin -d ll -c "SELECT count(*) FROM leaderlock" 2>/dev/null)" = 4 ] && break
  sleep 0.1
done
echo "standby: in recovery $(q "$P2" -U ll_admin -d ll -c "SELECT pg_is_in_recovery()"), le_leader('held') = $(q "$P2" -U ll_admin -d ll -c "SELECT le_leader('held')"), le_try_acquire by a rival: $(q "$P2" -U ll_admin -d ll -c "SELECT le_try_acquire('held', 'x', '1 minute')")"
if q "$P2" -U ll_admin -d ll -c "SELECT le_try_acquire('vacant', 'x', '1 minute')" >/dev/null 2>"$WORK/err"; then
  echo "FAIL: a takeover succeeded on the standby"; exit 1
fi
echo "standby: a takeover fails: $(head -1 "$WORK/err")"

# The old primary stops; the standby is promoted; at once, a new tenure.
"${as_server[@]}" "$BINDIR/pg_ctl" -D "$WORK/primary" -m fast -w stop >/dev/null
"${as_server[@]}" "$BINDIR/pg_ctl" -D "$WORK/standby" -w promote >/dev/null
out=$(q "$P2" -U ll_admin -d ll -F ' ' <<'SQL'
SELECT clock_timestamp() AS promoted_by \gset
SELECT (SELECT timeline_id FROM pg_control_checkpoint()) AS checkpoint_tl,
       substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) AS walfile_tl,
       le_try_acquire('after-promotion', 'new-primary', '1 minute') AS new_key,
       le_try_acquire('vacant', 'new-primary', '1 minute') AS vacant_key,
       le_try_acquire('sem', 'new-primary', '1 minute', slots => 2) AS sem_key;
SELECT key, term, holder, expires_at >= :'promoted_by'::timestamptz + ttl AND state = 'held' AS outlasts
  FROM leaderlock_status ORDER BY key;
SELECT 'failover', timeline, changed_at IS NOT NULL FROM leaderlock_failover;
SQL
)
echo "$out" | sed 's/^/  /'
read -r checkpoint_tl walfile_tl new_key vacant_key sem_key <<<"$(echo "$out" | head -1)"
floor=$(( (1 << 32) + 1 ))
fail=0
term_of() { echo "$out" | awk -v k="$1" '$1 == k { print $2 }'; }
[ "$new_key" = t ] && [ "$vacant_key" = t ] && [ "$sem_key" = t ] \
  || { echo "FAIL: acquisitions after promotion refused"; fail=1; }
for k in after-promotion vacant; do
  t=$(term_of "$k")
  if [ "${t:-0}" -lt "$floor" ]; then echo "FAIL: $k got term $t < 2^32 + 1"; fail=1; fi
done
[ "$(term_of vacant)" = "$floor" ] || { echo "FAIL: vacant: term $(term_of vacant), expected $floor"; fail=1; }
# the key of 2 slots: the new tenure's term is the floor (its key's
# sequence was at 2); the old one outlasts the promotion
sem_term=$(echo "$out" | awk '$1 == "sem" && $3 == "new-primary" { print $2 }')
[ "$sem_term" = "$floor" ] || { echo "FAIL: sem: new tenure's term $sem_term, expected $floor"; fail=1; }
echo "$out" | awk '$1 == "sem" && $3 == "old-primary" && $2 == 1 && $4 == "t" { ok = 1 } END { exit !ok }' \
  || { echo "FAIL: sem: the tenure of old-primary does not outlast the promotion"; fail=1; }
for k in held lapsing; do
  echo "$out" | awk -v k="$k" '$1 == k && $4 == "t" { ok = 1 } END { exit !ok }' \
    || { echo "FAIL: $k does not outlast the promotion"; fail=1; }
done
echo "$out" | grep -q '^failover 2 t$' || { echo "FAIL: leaderlock_failover not at timeline 2"; fail=1; }
# Contract 26: the member of before outlasts the promotion (its partition
# is revoked, not granted at once), and a grant after it starts at the floor
gout=$(q "$P2" -U ll_admin -d ll <<'SQL'
SELECT le_join('grp', 'new-member', '1 hour') IS NOT NULL;
SELECT state FROM le_assignment('grp', 'old-member') WHERE partition = 2;
SELECT le_ack('grp', 'old-member', 2, 1);
SELECT string_agg(partition || ':' || member || ':' || term, ' ' ORDER BY partition)
  FROM leaderlock_partitions WHERE grp = 'grp';
SELECT le_join('lapsed', 'gone', '2 seconds') IS NOT NULL;
SELECT count(*) FROM le_assignment('lapsed', 'gone') WHERE state = 'owned';
SQL
)
[ "$gout" = $'t\nrevoked\nt\n1:old-member:1 2:new-member:'"$floor"$'\nt\n2' ] \
  || { echo "FAIL: a group after the promotion: $(echo $gout)"; fail=1; }
echo "at the first acquisition: pg_control_checkpoint() timeline $checkpoint_tl, WAL file timeline $walfile_tl"
[ "$fail" = 0 ] || exit 1
echo "=== ok (PostgreSQL $MAJOR): terms after promotion >= 2^32 + 1, held leases outlast it (tenures of a key of many slots and a group's member too)"
