#!/usr/bin/env bash
# Quick start 2: set everything up and run every test.
#
#   format and lint  cargo fmt --check, cargo clippy -D warnings
#   unit             #[pg_test] tests in one backend (cargo pgrx test)
#   pg_regress       the SQL API as a user sees it (tests/pg_regress)
#   isolation        concurrent sessions (tests/isolation, isolationtester)
#   client           real clients: notifications, races, stress, errors,
#                    the background worker, restarts, a standby (tests/client)
#   bench smoke      ./bench/run.sh --quick and a small bench/worker_lag.sh:
#                    every benchmark with tiny sizes, so none can rot
#
# Each suite runs against its own throwaway cluster on a free port, with
# leaderlock preloaded. Exits non-zero if anything fails.
# LEADERLOCK_STRESS_SECONDS (default 12) sets the stress test's length.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

"$REPO_ROOT/scripts/setup.sh"

WORK=$(mktemp -d /tmp/leaderlock-test.XXXXXX)
chown postgres:postgres "$WORK"
export LEADERLOCK_WORK=$WORK
FAILED=()

cleanup() {
  local d
  for d in "$WORK"/*/; do
    [ -f "$d/PG_VERSION" ] && stop_cluster "$d" immediate
  done
  if [ "${#FAILED[@]}" -eq 0 ]; then rm -rf "$WORK"; else log "logs kept in $WORK"; fi
}
trap cleanup EXIT

stage() { printf '\n=== %s\n' "$*"; }
fail() { FAILED+=("$1"); log "FAILED: $1"; }

stage "format and lint"
(cd "$REPO_ROOT" && cargo fmt --check) || fail "cargo fmt --check"
(cd "$REPO_ROOT" && cargo clippy --all-targets -q -- -D warnings) || fail "cargo clippy"

stage "unit tests (#[pg_test])"
(cd "$REPO_ROOT" && cargo pgrx test pg15 --runas postgres --pgdata "$WORK/pgtest") || fail "unit tests"

stage "install"
install_extension

PORT=$(free_port)
MAIN="$WORK/main"
start_cluster "$MAIN" "$PORT"
psql_at "$PORT" -d postgres -c "CREATE EXTENSION leaderlock"
psql_at "$PORT" -d postgres -c "CREATE DATABASE leaderlock_lazy"
psql_at "$PORT" -d leaderlock_lazy -c "CREATE EXTENSION leaderlock"
log "test cluster on 127.0.0.1:$PORT, data in $MAIN"

# regress_suite NAME TOOL TESTS...: runs a pg_regress-style suite from tests/NAME.
regress_suite() {
  local name=$1 tool=$2; shift 2
  "$tool" --host=127.0.0.1 --port="$PORT" --user=postgres \
    --inputdir="$REPO_ROOT/tests/$name" --outputdir="$WORK/$name" \
    --dbname="leaderlock_$name" --load-extension=leaderlock "$@" \
    || { cat "$WORK/$name/regression.diffs" 2>/dev/null; fail "$name"; }
}
PGXS_TEST="$PG_BIN/../lib/pgxs/src/test"

stage "pg_regress"
regress_suite pg_regress "$PGXS_TEST/regress/pg_regress" election bad_input privileges

stage "isolation"
regress_suite isolation "$PGXS_TEST/isolation/pg_isolation_regress" race nowait fencing rollback

stage "client tests"
(cd "$REPO_ROOT/tests/client" && \
  LEADERLOCK_PORT=$PORT LEADERLOCK_PGDATA=$MAIN PG_BIN=$PG_BIN \
  /usr/bin/python3 -m unittest discover -v -p 'test_*.py') \
  || { tail -n 40 "$MAIN/server.log"; fail "client tests"; }

stage "bench smoke (bench/run.sh --quick, bench/worker_lag.sh small)"
"$REPO_ROOT/bench/run.sh" --quick || fail "bench smoke"
"$REPO_ROOT/bench/worker_lag.sh" --live 500 --expiring 20 --window 2 --idle 1 --renew-rate 20 \
  || fail "worker lag smoke"

echo
if [ "${#FAILED[@]}" -gt 0 ]; then
  log "FAILED: ${FAILED[*]}"
  exit 1
fi
log "all tests passed"
