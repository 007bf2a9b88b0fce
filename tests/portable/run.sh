#!/usr/bin/env bash
# Tests the portable edition (portable/leaderlock.sql) against a throwaway
# PostgreSQL cluster started without shared_preload_libraries:
#   1. initdb, start on 127.0.0.1 at a free port above 56000;
#   2. create a non-superuser admin role (LOGIN CREATEROLE, owner of the test
#      databases: what a managed service gives you), and install the script
#      with `psql -f` as that role;
#   3. run the repository's pg_regress files (tests/pg_regress) and
#      isolation specs (tests/isolation) against it, as the superuser the
#      compiled edition's suites use, with tests/portable/expected/*.out in
#      place of the compiled edition's outputs where the portable edition
#      must differ (tests/portable/README.md says which and why);
#   4. notification payloads byte for byte and le_acquire's wait
#      (tests/portable/notify.py), the concurrency check
#      (tests/portable/concurrency.py) and the
#      reinstall check (portable/migrate, portable -> portable);
#   5. the repository's client tests (tests/client) that concern both
#      editions, with the CLI named by LEADERLOCK_CLI;
#   6. the install-time and cross-session security checks
#      (tests/portable/security.sh: a dedicated schema, refused schemas,
#      planted operators, uninstall, SET membership, after a promotion,
#      the retention settings a role sets for its own session, the runs'
#      retention for every job and the bound on jobs per role), and in
#      the same step a publication FOR ALL TABLES
#      (tests/portable/publication.sh: the cluster runs with wal_level =
#      logical for it).
#
# Usage: tests/portable/run.sh [--bindir DIR] [--keep] [--only regress,isolation,notify,concurrency,migrate,client,security]
#   --bindir   PostgreSQL's bin directory (default /usr/lib/postgresql/15/bin;
#              for 18: /opt/leaderlock/postgresql/18/bin, whose lib/ goes
#              into LD_LIBRARY_PATH by itself)
# Runs as root (the server runs as user postgres) or as a non-root user.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
BINDIR=/usr/lib/postgresql/15/bin
KEEP=0
ONLY=regress,isolation,notify,concurrency,migrate,client,security
while [ $# -gt 0 ]; do
  case $1 in
    --bindir) BINDIR=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --only) ONLY=$2; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
wants() { [[ ",$ONLY," == *",$1,"* ]]; }

if [ -d "$BINDIR/../lib" ] && [ -f "$BINDIR/../lib/libpq.so.5" ]; then
  export LD_LIBRARY_PATH="$(cd "$BINDIR/../lib" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
PGXS=$("$BINDIR/pg_config" --pgxs 2>/dev/null || true)
PGXS_TEST=$(dirname "$PGXS")/../src/test
[ -x "$PGXS_TEST/regress/pg_regress" ] || PGXS_TEST=/usr/lib/postgresql/15/lib/pgxs/src/test
MAJOR=$("$BINDIR/postgres" --version | sed -E 's/.* ([0-9]+)\..*/\1/; s/.* ([0-9]+)$/\1/')

WORK=$(mktemp -d "${PORTABLE_TEST_TMP:-/tmp/portable-test}-XXXXXX")
chmod 755 "$WORK"
as_server=()
if [ "$(id -u)" -eq 0 ]; then
  chown postgres "$WORK"
  as_server=(sudo -u postgres env "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}")
fi

PORT=${PORTABLE_TEST_PORT:-$(python3 "$REPO/scripts/free_port.py")}

cleanup() {
  if [ "$KEEP" = 1 ]; then
    echo "kept: $WORK (port $PORT); stop with: ${as_server[*]} $BINDIR/pg_ctl -D $WORK/data stop"
    return
  fi
  "${as_server[@]}" "$BINDIR/pg_ctl" -D "$WORK/data" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

echo "=== PostgreSQL $MAJOR ($BINDIR), port $PORT, in $WORK"
"${as_server[@]}" "$BINDIR/initdb" -D "$WORK/data" -U postgres -E UTF8 --locale=C.UTF-8 -A trust >/dev/null
"${as_server[@]}" "$BINDIR/pg_ctl" -D "$WORK/data" -l "$WORK/server.log" -w \
  -o "-p $PORT -c listen_addresses=127.0.0.1 -c unix_socket_directories=$WORK -c shared_preload_libraries='' -c max_prepared_transactions=2 -c wal_level=logical" \
  start >/dev/null

PSQL=("$BINDIR/psql" -X -q -h 127.0.0.1 -p "$PORT" -v ON_ERROR_STOP=1)
"${PSQL[@]}" -U postgres -d postgres -c "SHOW shared_preload_libraries" -tA | grep -qx '' \
  || { echo "shared_preload_libraries is not empty" >&2; exit 1; }
"${PSQL[@]}" -U postgres -d postgres <<'SQL'
CREATE ROLE ll_admin LOGIN CREATEROLE NOSUPERUSER;
CREATE DATABASE leaderlock_pg_regress OWNER ll_admin;
CREATE DATABASE leaderlock_isolation OWNER ll_admin;
CREATE DATABASE leaderlock_concurrency OWNER ll_admin;
CREATE DATABASE leaderlock_migrate OWNER ll_admin;
SQL

install() {  # install DB: the script, with psql -f, as the non-superuser admin
  # The schema must be the admin's alone (portable/README.md, "Installing"):
  # the repository's files name public.leaderlock, so public is handed to
  # the admin (tests/portable/security.sh installs into a schema leaderlock).
  "${PSQL[@]}" -U postgres -d "$1" -c "ALTER SCHEMA public OWNER TO ll_admin" \
    -c "REVOKE CREATE ON SCHEMA public FROM PUBLIC"
  "${PSQL[@]}" -U ll_admin -d "$1" -1 -f "$REPO/portable/leaderlock.sql" >/dev/null
}

FAILED=()

# pg_regress runs psql from --bindir: a psql that hides the CONTEXT field
# (PL/pgSQL names its function there; the compiled edition sends none).
mkdir -p "$WORK/bin"
cat >"$WORK/bin/psql" <<SH
#!/bin/sh
exec "$BINDIR/psql" -v SHOW_CONTEXT=never "\$@"
SH
chmod 755 "$WORK/bin/psql"

# inputs: the repository's files, with the portable expected outputs over them
overlay() {  # overlay SUITE: tests/SUITE + tests/portable/expected -> $WORK/SUITE-in
  local in="$WORK/$1-in"
  mkdir -p "$in"
  cp -r "$REPO/tests/$1/." "$in/"
  if [ -d "$HERE/expected/$1" ]; then cp "$HERE/expected/$1/"*.out "$in/expected/"; fi
  # the portable schedule: the suite's, less the files tests/portable/README.md
  # skips, plus the portable edition's own (tests/portable/sql, pg_regress)
  grep -v -x -F -f <(sed -n "s/^skip $1: //p" "$HERE/README.md" | sed 's/^/test: /') \
    "$REPO/tests/$1/schedule" >"$in/schedule.portable"
  if [ "$1" = pg_regress ]; then
    cp "$HERE/sql/"*.sql "$in/sql/"
    for f in "$HERE/sql/"*.sql; do echo "test: $(basename "$f" .sql)" >>"$in/schedule.portable"; done
  fi
  echo "$in"
}

run_suite() {  # run_suite SUITE TOOL DB
  local suite=$1 tool=$2 db=$3 in out
  in=$(overlay "$suite")
  out="$WORK/$suite-out"
  mkdir -p "$out"; chmod 777 "$out"
  install "$db"
  echo "=== $suite: $(grep -c '^test:' "$in/schedule.portable") files ($(sed -n "s/^skip $suite: //p" "$HERE/README.md" | tr '\n' ' ')skipped)"
  if ! "$tool" --host=127.0.0.1 --port="$PORT" --user=postgres --bindir="$WORK/bin" \
      --inputdir="$in" --outputdir="$out" --use-existing --dbname="$db" \
      --schedule="$in/schedule.portable"; then
    cat "$out/regression.diffs" 2>/dev/null || true
    FAILED+=("$suite")
  fi
}

wants regress && run_suite pg_regress "$PGXS_TEST/regress/pg_regress" leaderlock_pg_regress
wants isolation && run_suite isolation "$PGXS_TEST/isolation/pg_isolation_regress" leaderlock_isolation

if wants concurrency; then
  echo "=== concurrency: 8 sessions racing for 3 keys"
  install leaderlock_concurrency
  /usr/bin/python3 "$HERE/concurrency.py" \
      "host=127.0.0.1 port=$PORT dbname=leaderlock_concurrency user=ll_admin" \
    || FAILED+=("concurrency")
fi

if wants notify; then
  echo "=== notify: payloads byte for byte, le_acquire's polling wait"
  "${PSQL[@]}" -U postgres -d postgres -c "CREATE DATABASE leaderlock_notify OWNER ll_admin"
  install leaderlock_notify
  /usr/bin/python3 "$HERE/notify.py" "host=127.0.0.1 port=$PORT dbname=leaderlock_notify user=ll_admin" \
    || FAILED+=("notify")
fi

if wants migrate; then
  echo "=== migrate: portable -> portable (reinstall), every lease and term kept"
  install leaderlock_migrate
  LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-} bash "$HERE/migrate.sh" "$BINDIR/psql" \
      "host=127.0.0.1 port=$PORT dbname=leaderlock_migrate user=ll_admin" "$REPO" \
    || FAILED+=("migrate")
fi

if wants client; then
  # The repository's client tests (tests/client: the Rust client through the
  # CLI, and the SQL API from psycopg2), the modules and tests that concern
  # both editions; tests/portable/README.md says which are skipped and why.
  echo "=== client: tests/client against the portable edition"
  if [ -z "${LEADERLOCK_CLI:-}" ]; then
    echo "LEADERLOCK_CLI must name the built leaderlock binary (scripts/test.sh builds it)" >&2
    FAILED+=("client")
  else
    for db in leaderlock_client leaderlock_client_lazy; do
      "${PSQL[@]}" -U postgres -d postgres -c "CREATE DATABASE $db OWNER ll_admin"
      install "$db"
    done
    mapfile -t modules < <(sed -n 's/^client module: //p' "$HERE/README.md")
    (cd "$REPO/tests/client" && \
      LEADERLOCK_EDITION=portable LEADERLOCK_PORT=$PORT LEADERLOCK_PGDATA=$WORK/data \
      LEADERLOCK_DB=leaderlock_client LEADERLOCK_LAZY_DB=leaderlock_client_lazy \
      LEADERLOCK_CLI_CHAOS_SECONDS=${LEADERLOCK_CLI_CHAOS_SECONDS:-10} PG_BIN=$BINDIR PG_MAJOR=$MAJOR \
      LEADERLOCK_HISTORY_CHAOS_SECONDS=${LEADERLOCK_HISTORY_CHAOS_SECONDS:-10} \
      /usr/bin/python3 -m unittest "${modules[@]}") || FAILED+=("client")
    # The clients' tests of what they do on their own (a paused process,
    # SIGTERM, a restart, the npm install) are the same against either
    # edition: they run against the compiled one only.
    echo "=== client: the Python client (clients/python/tests) against the portable edition"
    (cd "$REPO/clients/python" && \
      LEADERLOCK_DSN="host=127.0.0.1 port=$PORT dbname=leaderlock_client user=postgres" PYTHONPATH=src \
      /opt/leaderlock/python-client/bin/python -m unittest discover -s tests -p 'test_[lh]*.py') || FAILED+=("Python client")
    echo "=== client: the Go client (clients/go) against the portable edition"
    # (its tests of what the server answers: elections, refusals, fencing,
    # values, sessions, runs, the history; what it does on its own, a paused
    # process, SIGTERM, a restart, runs against the compiled edition only)
    LEADERLOCK_EDITION=portable LEADERLOCK_DSN="postgres://postgres@127.0.0.1:$PORT/leaderlock_client" \
      GO_TEST_RUN='^Test(TwoElectors|RefusedRenewals|TheValueIsAnnounced|AFloodOfForged|WaitsForARival|Guard|RefusalsForGood|Session|ScheduleThreeReplicas|ScheduleErrorRecords|HistoryWatcher)' \
      "$REPO/clients/go/test.sh" || FAILED+=("Go client")
    echo "=== client: the Node.js client (clients/node) against the portable edition"
    # (installed and built by the compiled edition's stage before this one,
    # in scripts/test.sh; by itself here)
    (cd "$REPO/clients/node" && \
      { [ -d node_modules ] || { npm ci --no-audit --no-fund --loglevel=error && npm run build --silent; }; } && \
      LEADERLOCK_DSN="postgresql://postgres@127.0.0.1:$PORT/leaderlock_client" \
      node --test --test-concurrency=1 test/lead.test.mjs test/hostile.test.mjs test/history.test.mjs) \
      || FAILED+=("Node.js client")
    if [ "$MAJOR" = 15 ]; then
      # Python's and the CLI's (Rust): what the edition changes is the
      # server's side, the same SQL for every client; Node.js's and Go's
      # scenarios run against the compiled edition, their own tests above
      # against this one (the test command keeps under its hour).
      echo "=== client: the Python (sync: the idioms are client-side, all run against the compiled edition) and Rust clients' scenarios (tests/clients/scenarios.py) against the portable edition"
      PY_CLIENT_PYTHON=/opt/leaderlock/python-client/bin/python \
          /usr/bin/python3 "$REPO/tests/clients/scenarios.py" --clients python:sync,rust \
          --dsn "postgresql://postgres@127.0.0.1:$PORT/leaderlock_client" --pgdata "$WORK/data" --pgbouncer \
        || FAILED+=("client scenarios")
    fi
  fi
fi

if wants security; then
  echo "=== security: install schema checks, planted operators, uninstall, act-as, failover"
  bash "$HERE/security.sh" "$BINDIR/psql" 127.0.0.1 "$PORT" "$MAJOR" || FAILED+=("security")
  # (in the security step: scripts/test.sh names the steps it runs)
  echo "=== security: a publication FOR ALL TABLES (wal_level = logical): the history numbered, expiries kept if not"
  bash "$HERE/publication.sh" "$BINDIR/psql" 127.0.0.1 "$PORT" || FAILED+=("security: publication")
fi

if [ "${#FAILED[@]}" -gt 0 ]; then
  echo "FAILED: ${FAILED[*]}"
  exit 1
fi
echo "=== all passed (PostgreSQL $MAJOR)"
