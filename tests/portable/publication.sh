#!/usr/bin/env bash
# The portable edition under a publication FOR ALL TABLES (audit of 0.5.0,
# B: CDC, Debezium, a logical-replication migration), against a running
# server started with wal_level = logical (run.sh starts its cluster so):
#   1. leaderlock_history_pending (no primary key, on purpose) has REPLICA
#      IDENTITY FULL: the numbering's DELETE works under a publication that
#      publishes deletes, so transitions are numbered and le_expire_lapsed
#      vacates and announces a lapsed lease;
#   2. a numbering that fails (simulated: the table's replica identity set
#      back to DEFAULT by the superuser) never takes le_expire_lapsed's
#      expiries with it: the lease is vacated, announced and counted, a
#      WARNING says why nothing was numbered, and the next call numbers the
#      rows once the table is repaired.
# Usage: publication.sh PSQL HOST PORT   (run.sh calls it)
set -euo pipefail
PSQL=$1 HOST=$2 PORT=$3
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
DB=ll_pub
q() { local user=$1; shift; "$PSQL" -X -q -At -v ON_ERROR_STOP=1 -h "$HOST" -p "$PORT" -U "$user" -d "$DB" "$@"; }
fail=0
ok() { echo "  ok: $*"; }
bad() { echo "  FAIL: $*"; fail=1; }

[ "$("$PSQL" -X -At -h "$HOST" -p "$PORT" -U postgres -d postgres -c "SHOW wal_level")" = logical ] || { echo "  FAIL: wal_level is not logical"; exit 1; }
"$PSQL" -X -q -v ON_ERROR_STOP=1 -h "$HOST" -p "$PORT" -U postgres -d postgres >/dev/null <<SQL
CREATE ROLE ll_pub_admin LOGIN;
CREATE ROLE ll_pub_app LOGIN;
CREATE DATABASE $DB OWNER ll_pub_admin;
SQL
q ll_pub_admin -c "CREATE SCHEMA leaderlock"
PGOPTIONS="-c search_path=leaderlock" "$PSQL" -X -q -v ON_ERROR_STOP=1 -h "$HOST" -p "$PORT" -U ll_pub_admin -d "$DB" \
  -1 -f "$REPO/portable/leaderlock.sql" >/dev/null
q postgres -c "ALTER DATABASE $DB SET search_path = \"\$user\", public, leaderlock" \
  -c "CREATE PUBLICATION ll_pub_all FOR ALL TABLES" >/dev/null

ident=$(q postgres -c "SELECT relreplident FROM pg_class WHERE oid = 'leaderlock.leaderlock_history_pending'::regclass")
[ "$ident" = f ] && ok "1: leaderlock_history_pending has REPLICA IDENTITY FULL" || bad "1: its replica identity is '$ident'"

# 1. Transitions are numbered; a lapsed lease is vacated and announced.
p0=$(q ll_pub_app -c "SELECT le_history_position()")
q ll_pub_app -c "SELECT le_try_acquire('pub-1', 'app-1', '500 ms')" -c "SELECT le_try_acquire('pub-live', 'app-1', '1 h')" >/dev/null
out=$(q ll_pub_app -c "SELECT le_expire_lapsed()" 2>&1 || true)
got=$(q ll_pub_app -c "SELECT string_agg(event || ' ' || key, ', ' ORDER BY position) FROM le_history($p0)")
[ "$got" = "acquired pub-1, acquired pub-live" ] && ok "1: numbered under the publication: $got" \
  || bad "1: le_expire_lapsed: $out; numbered: '$got'"
sleep 0.6
out=$(q ll_pub_app -c "LISTEN leaderlock" -c "SELECT le_expire_lapsed()" 2>&1 || true)
got=$(q ll_pub_app -c "SELECT coalesce(holder, 'vacant') FROM leaderlock WHERE key = 'pub-1'" \
        -c "SELECT string_agg(event || ' ' || key, ', ' ORDER BY position) FROM le_history($p0)")
if [ "$(echo "$out" | head -1)" = 1 ] && echo "$out" | grep -q '"event":"expired","key":"pub-1"' \
   && [ "$got" = $'vacant\nacquired pub-1, acquired pub-live, expired pub-1' ]; then
  ok "1: the lapsed lease vacated, announced and numbered"
else bad "1: le_expire_lapsed: $out / $got"; fi

# 2. The numbering fails (replica identity DEFAULT, no primary key): the
# expiries are kept, a WARNING says so, the next call numbers.
q postgres -c "ALTER TABLE leaderlock.leaderlock_history_pending REPLICA IDENTITY DEFAULT"
q ll_pub_app -c "SELECT le_try_acquire('pub-2', 'app-1', '200 ms')" >/dev/null
sleep 0.3
out=$(q ll_pub_app -c "LISTEN leaderlock" -c "SELECT le_expire_lapsed()" 2>&1 || true)
got=$(q ll_pub_app -c "SELECT coalesce(holder, 'vacant') || ' ' || expiries FROM leaderlock WHERE key = 'pub-2'" \
        -c "SELECT count(*) FROM leaderlock_history_pending WHERE key = 'pub-2'")
warning='WARNING:  leaderlock: the history was not numbered: cannot delete from table "leaderlock_history_pending" because it does not have a replica identity and publishes deletes'
detail='DETAIL:  The expiries of this call are kept; the numbering is tried again at the next call (SQLSTATE 55000).'
if [ "$(echo "$out" | grep -vE '^(WARNING|DETAIL|HINT|CONTEXT|PL/pgSQL|Asynchronous)' | head -1)" = 1 ] \
   && echo "$out" | grep -qxF "$warning" && echo "$out" | grep -qxF "$detail" \
   && echo "$out" | grep -q '"event":"expired","key":"pub-2"' && [ "$got" = $'vacant 1\n2' ]; then
  ok "2: a failed numbering: the lapsed lease still vacated (1), announced, a WARNING; 2 transitions wait"
else bad "2: le_expire_lapsed: $out / $got"; fi
q postgres -c "ALTER TABLE leaderlock.leaderlock_history_pending REPLICA IDENTITY FULL"
out=$(q ll_pub_app -c "SELECT le_expire_lapsed()" 2>&1 || true)
got=$(q ll_pub_app -c "SELECT count(*) FROM leaderlock_history_pending" \
        -c "SELECT string_agg(event || ' ' || key, ', ' ORDER BY position) FROM le_history($p0) WHERE key = 'pub-2'")
[ "$out" = 0 ] && [ "$got" = $'0\nacquired pub-2, expired pub-2' ] \
  && ok "2: repaired, the next call numbers them: $(echo "$got" | tail -1)" || bad "2: after the repair: $out / $got"

q postgres -c "DROP PUBLICATION ll_pub_all" >/dev/null
"$PSQL" -X -q -h "$HOST" -p "$PORT" -U postgres -d postgres -c "DROP DATABASE $DB" \
  -c "DROP ROLE ll_pub_admin" -c "DROP ROLE ll_pub_app" >/dev/null
[ "$fail" = 0 ] || exit 1
echo "  ok: publication checks passed"
