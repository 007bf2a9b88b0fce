#!/usr/bin/env bash
# Portable -> compiled -> portable on a live database, keeping every lease,
# term, owner, value and counter (portable/to-compiled.sql and
# to-portable.sql), on a cluster with the compiled edition installed and
# preloaded (scripts/test.sh runs it on PostgreSQL 15 and 18 after the
# package suite installed it). After the move to the compiled edition the
# worker serves the database and the leases go on from their terms; after
# the move back, the portable functions do.
set -euo pipefail
major=${PG_MAJOR:?}  # (lib.sh, when sourced, picks its default version)
source "$(dirname "$0")/../../scripts/lib.sh"
use_pg "$major"
fail() { log "FAILED: $*"; exit 1; }
DATA=$(mktemp -d /tmp/leaderlock-editions.XXXXXX)
PORT=$(free_port)
trap 'stop_cluster "$DATA/data" immediate; rm -rf "$DATA"' EXIT
give_to_server "$DATA"
start_cluster "$DATA/data" "$PORT"
q() { psql_at "$PORT" -d editions -At "$@"; }
psql_at "$PORT" -d postgres -c "CREATE ROLE ll_admin LOGIN CREATEROLE NOSUPERUSER" \
  -c "CREATE ROLE ll_app NOLOGIN" -c "GRANT ll_app TO ll_admin" -c "CREATE DATABASE editions OWNER ll_admin"
# the portable edition installs only into a schema that is the admin's alone
psql_at "$PORT" -d editions -c "ALTER SCHEMA public OWNER TO ll_admin" -c "REVOKE CREATE ON SCHEMA public FROM PUBLIC"
# the portable edition, installed as a managed service's admin would
"$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PORT" -U ll_admin -d editions -1 \
  -f "$REPO_ROOT/portable/leaderlock.sql" >/dev/null
[ "$(q -c "SELECT le_capabilities()->>'edition'")" = portable ] || fail "not the portable edition"
q >/dev/null <<'SQL'
SET ROLE ll_app;
SELECT le_try_acquire('e-live', 'a', '1 hour', value => '{"addr": "10.0.0.1", "n": 12345678901234567890}');
RESET ROLE;
SELECT le_try_acquire('e-vacant', 'a', '1 hour'), le_release('e-vacant', 'a');
SELECT le_try_acquire('e-vacant', 'b', '1 hour'), le_release('e-vacant', 'b');
SELECT le_try_acquire('e-held', 'c', '1 hour'), le_renew('e-held', 'c');
SQL
snapshot() {
  q -c "SELECT key, holder, term, acquired_at, renewed_at, expires_at, ttl, value, owner, tenures, releases,
               expiries, changed_at FROM leaderlock ORDER BY key"
}
before=$(snapshot)

# to the compiled edition (as a superuser; the compiled files are installed)
(cd "$REPO_ROOT/portable" && psql_at "$PORT" -d editions -f to-compiled.sql >/dev/null)
[ "$(q -c "SELECT extversion FROM pg_extension WHERE extname = 'leaderlock'")" = "$EXT_VERSION" ] \
  || fail "the compiled edition is not installed"
after=$(snapshot)
[ "$before" = "$after" ] || { diff <(echo "$before") <(echo "$after") || true; fail "rows differ after to-compiled"; }
for _ in $(seq 100); do [ "$(q -c "SELECT le_worker_running()")" = t ] && break; sleep 0.1; done
[ "$(q -c "SELECT le_worker_running()")" = t ] || fail "no worker serves the database after to-compiled"
got=$(q <<'SQL'
SET ROLE ll_app;
SELECT le_renew('e-live', 'a');
RESET ROLE;
SELECT le_try_acquire('e-vacant', 'd', '1 hour');
SELECT term FROM leaderlock WHERE key = 'e-vacant';
SELECT le_try_acquire('e-held', 'x', '1 hour');
SQL
)
[ "$got" = $'t\nt\n3\nf' ] || fail "after to-compiled: $got"
log "portable -> compiled: $(echo "$before" | wc -l) leases identical, the worker serves the database, terms go on"

# and back
before=$(snapshot)
(cd "$REPO_ROOT/portable" && psql_at "$PORT" -d editions -v owner=ll_admin -f to-portable.sql >/dev/null)
[ -z "$(q -c "SELECT extversion FROM pg_extension WHERE extname = 'leaderlock'")" ] || fail "the extension is still there"
[ "$(q -c "SELECT le_capabilities()->>'edition'")" = portable ] || fail "not the portable edition after to-portable"
after=$(snapshot)
[ "$before" = "$after" ] || { diff <(echo "$before") <(echo "$after") || true; fail "rows differ after to-portable"; }
got=$(q <<'SQL'
SELECT le_release('e-vacant', 'd');
SELECT le_try_acquire('e-vacant', 'e', '1 hour');
SELECT term FROM leaderlock WHERE key = 'e-vacant';
SET ROLE ll_app;
SELECT le_renew('e-live', 'a');
SQL
)
[ "$got" = $'t\nt\n4\nt' ] || fail "after to-portable: $got"
log "compiled -> portable: $(echo "$before" | wc -l) leases identical, terms go on"
