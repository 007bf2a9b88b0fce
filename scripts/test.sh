#!/usr/bin/env bash
# Quick start 2: set everything up and run every test, on every supported
# PostgreSQL version (15, 14, 16, 17, 18), or on the ones given:
#
#   ./scripts/test.sh              all five versions (what CI runs)
#   ./scripts/test.sh --pg 17      one version (repeat --pg for more)
#   ./scripts/test.sh --pg 17 --only pg_regress,isolation
#                                  only these suites (of: lint, unit, package,
#                                  pg_regress, isolation, client, portable,
#                                  bench); without
#                                  package, a debug build is installed instead
#   ./scripts/test.sh --pg-config ~/pg17/bin/pg_config --only pg_regress
#                                  a PostgreSQL of your own instead of the
#                                  default one of its version
#   ./scripts/test.sh --pg 17 --only pg_regress --test upgrade
#                                  only the tests whose name contains this:
#                                  pg_regress and isolation files, #[pg_test]
#                                  and client test methods (unittest -k)
#
# Run as root, it sets up what is missing first (scripts/setup.sh) and runs
# the servers as postgres. Run as anyone else, on a machine set up once by
# root, it runs them as you; the extension is installed into the
# PostgreSQL tested, so that one must be writable by you (--pg-config).
#
# Once:             cargo fmt --check; src/'s parts import downward only; documentation
#                   links resolve; pyflakes; the client library and CLI (crates/):
#                   clippy, cargo test, build; as root, the test command as
#                   a contributor runs it (tests/contributor/run.sh: not
#                   root, --pg-config of a PostgreSQL 16 of its own); with
#                   package: the tarball's install.sh against links planted
#                   by the owner of the directories it writes
#                   (tests/package/install_links.sh)
# Per version:
#   lint            cargo clippy -D warnings, built for that version: on 15
#                   and on the versions some code is compiled for alone
#                   (#[cfg(feature = "pgN")]: today 14 and 18)
#   unit            #[pg_test] tests in one backend: cargo pgrx test pg15 (and
#                   the plain #[test]s) on 15; on 14 and 18 the same functions
#                   of a pg_test build, called as it calls them
#                   (tests/unit/run.py); 16 and 17 run those functions' SQL
#                   through the suites below
#   pg_regress      the SQL API as a user sees it (tests/pg_regress)
#   isolation       concurrent sessions (tests/isolation, isolationtester)
#   client          real clients: notifications, races, stress, errors,
#                   the background worker, restarts, a standby, failover,
#                   `leaderlock run` under chaos and through pgbouncer (tests/client);
#                   the CLI's, the demo's, the examples' and scheduled
#                   runs' tests on 15 only; every client's tour against a
#                   database set against its clients (tests/clients/hostile.py:
#                   no statement depends on the search_path) on 15 only; the modules of the SQL
#                   logic (acquire, slots, priority, sessions, runs...) on
#                   15 only (the same Rust everywhere; pg_regress and
#                   isolation check that logic on every version); the
#                   crash-and-failover chaos for 20 s on 15, 15 s elsewhere
#                   (LEADERLOCK_CHAOS_SECONDS overrides);
#                   the slowest tests are listed at the end (run.py); they
#                   run on a cluster of their own, beside the stages that
#                   follow them (their output printed when they end)
#   package         on 15 and 18: scripts/package.sh builds the tarball and
#                   the Debian package(s); tests/package/run.sh checks them
#                   and installs from the Debian package (apt-get on 15, its
#                   files on 18); on 18 the extension image passes pg_regress;
#                   the suites below run against what was installed; after
#                   them, on 15: installs under a busy server by every path,
#                   the CLI's package, apt-get remove
#   portable        on 15 and 18: the portable edition (portable/) against
#                   the same pg_regress and isolation files, its payloads,
#                   concurrency, attacks, a promotion, and the move to the
#                   compiled edition and back; on 15 also the client tests
#                   and the Python and Rust clients' scenarios (tests/portable)
#   bench smoke     on 15: ./bench/run.sh --quick, and bench/worker_lag.sh,
#                   cli_handover.sh, cli_status.sh, console.sh, acquire_wake.sh,
#                   session_end.sh, scale.sh, half_open.sh, etcd.sh, editions.sh, renew_all.sh, paths.sh,
#                   clients.sh (on 15) small:
#                   every benchmark with tiny sizes, so none can rot
#
# The versions run in two lanes: 15; and the others one after the other
# in the background, from 15's client stages on (run_version, start_lane).
# Each suite runs against its own throwaway cluster on a free port, with
# leaderlock preloaded. Exits non-zero if anything fails, on any version.
# LEADERLOCK_STRESS_SECONDS (default 12) sets the stress test's length.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

VERSIONS=()
SUITES=(lint unit package pg_regress isolation client portable bench contributor)
ONLY=""
TEST_PATTERN=""
while [ $# -gt 0 ]; do
  case "$1" in
    --pg) use_pg "$2"; VERSIONS+=("$2"); shift ;;
    --pg-config)
      # a PostgreSQL of your own, in place of the default one of its version
      LEADERLOCK_PG_CONFIG=$(readlink -f "$2"); export LEADERLOCK_PG_CONFIG
      v=$(pg_config_major "$LEADERLOCK_PG_CONFIG")
      use_pg "$v"; VERSIONS+=("$v"); shift ;;
    --test) TEST_PATTERN=$2; shift ;;
    --only)
      for s in ${2//,/ }; do
        [[ " ${SUITES[*]} " == *" $s "* ]] || { echo "unknown suite '$s' (suites: ${SUITES[*]})" >&2; exit 2; }
      done
      ONLY=",$2,"; shift ;;
    *) echo "usage: $0 [--pg N]... [--pg-config PATH] [--only SUITE,...] [--test NAME]   (N in ${PG_VERSIONS[*]}; default: all)" >&2; exit 2 ;;
  esac
  shift
done
# wants SUITE: whether this run includes it.
wants() { [ -z "$ONLY" ] || [[ $ONLY == *",$1,"* ]]; }
[ "${#VERSIONS[@]}" -gt 0 ] || VERSIONS=("${PG_VERSIONS[@]}")

"$REPO_ROOT/scripts/setup.sh"

WORK=$(mktemp -d /tmp/leaderlock-test.XXXXXX)
give_to_server "$WORK"
# Everything this run prints is also kept in $WORK/main.log (kept when a
# suite failed): what a failed stage printed is in it whatever came after.
exec > >(tee -a "$WORK/main.log") 2>&1
# The Go builds (the client's tests and resourcelock's, its candidates and
# tour, the portable edition's and the benchmark's) share one build cache,
# kept across runs in /opt/leaderlock/go/cache (clients/go/test.sh): each
# one alone compiles the standard library and pgx again (about 20 s), and
# resourcelock client-go (about 4 minutes of CPU).
# Its clusters (about a hundred: each suite's, the client tests' own, the
# benchmarks') are copies of the first one initdb made for their
# PostgreSQL tree (scripts/lib.sh, initdb_into).
export LEADERLOCK_INITDB_CACHE=$WORK/initdb
FAILED=()
SUMMARY=()
T0=$SECONDS

cleanup() {
  local d
  [ -z "${CLIENT_PID:-}" ] || kill "$CLIENT_PID" 2>/dev/null || true
  [ -z "${LANE_PID:-}" ] || kill "$LANE_PID" 2>/dev/null || true
  for d in "$WORK"/*/*/; do
    [ -f "$d/PG_VERSION" ] && stop_cluster "$d" immediate
  done
  if [ "${#FAILED[@]}" -eq 0 ]; then rm -rf "$WORK"; else log "logs kept in $WORK"; fi
}
trap cleanup EXIT

# stage NAME: a heading, with the time since the run began; and the stage
# before it ends (stage_end). part NAME: the same for what runs once,
# outside the versions. To see where the time goes.
STAGE="" STAGE_T0=0 STAGE_TIMES=()
stage() {
  stage_end
  STAGE="PostgreSQL $PG_MAJOR: $*" STAGE_T0=$SECONDS
  printf '\n=== PostgreSQL %s: %s   [at %d:%02d]\n' "$PG_MAJOR" "$*" $(( (SECONDS - T0) / 60 )) $(( (SECONDS - T0) % 60 ))
}
part() {
  stage_end
  STAGE="$*" STAGE_T0=$SECONDS
  printf '\n=== %s\n' "$*"
}
# stage_end: says how long the current stage or part took (at the next one,
# and at the end of a version's phase), and keeps it for the list at the end.
stage_end() {
  [ -n "$STAGE" ] || return 0
  local took=$(( SECONDS - STAGE_T0 ))
  log "$STAGE: $took s"
  STAGE_TIMES+=("$(printf '%5d s  %s' "$took" "$STAGE")")
  STAGE=""
}
fail() { FAILED+=("pg$PG_MAJOR $1"); log "FAILED on PostgreSQL $PG_MAJOR: $1"; }

if wants lint; then
  part 'format'
  (cd "$REPO_ROOT" && cargo fmt --all --check) || FAILED+=("cargo fmt --check")
  part 'modules import downward only (scripts/check_imports.py)'
  python3 "$REPO_ROOT/scripts/check_imports.py" || FAILED+=("imports or file length in src/")
  part 'the model calls only what the code calls (scripts/check_core.py)'
  python3 "$REPO_ROOT/scripts/check_core.py" || FAILED+=("the model's functions")
  part 'documentation links stay in the repository and resolve (scripts/check_links.py)'
  python3 "$REPO_ROOT/scripts/check_links.py" || FAILED+=("documentation links")
  part "no documentation paragraph over 1,500 characters (scripts/check_docs.py)"; python3 "$REPO_ROOT/scripts/check_docs.py" || FAILED+=("docs paragraphs")
  part "the alert rules (promtool test rules monitoring/leaderlock-alerts.test.yml)"
  (cd "$REPO_ROOT/monitoring" && promtool check rules leaderlock-alerts.yml && promtool test rules leaderlock-alerts.test.yml) \
    || FAILED+=("alert rules")
  part 'Python: pyflakes'
  (cd "$REPO_ROOT" && /usr/bin/python3 -m pyflakes tests bench scripts examples demo clients/python) || FAILED+=("pyflakes")
fi

# The lease rules, the client library and the CLI do not depend on the
# server version: lint, unit-test and build them once; the client tests of
# every version run them.
CLIENT_CRATES=(-p leaderlock-protocol -p leaderlock-client -p leaderlock-cli)
if wants lint; then
  part 'client library and CLI: lint'
  (cd "$REPO_ROOT" && cargo clippy --locked -q --all-targets "${CLIENT_CRATES[@]}" -- -D warnings) \
    || FAILED+=("cargo clippy (client, cli)")
fi
if wants unit; then
  part 'client library and CLI: unit tests'
  (cd "$REPO_ROOT" && cargo test --locked -q -p leaderlock-client -p leaderlock-cli) || FAILED+=("cargo test (client, cli)")
  # The model explores millions of states: optimised (the CLI's profile,
  # built anyway), it takes about 20 s; unoptimised, minutes.
  part 'the lease rules, model-checked (crates/protocol/tests: model.rs, key_rules.rs, slot_count.rs, runs_model.rs, groups_model.rs)'
  (cd "$REPO_ROOT" && cargo test --locked -q --profile cli -p leaderlock-protocol --features calendar -- --nocapture --test-threads=1) \
    || FAILED+=("the model of the lease rules")
fi
if wants package; then
  part "the tarball's install.sh writes through no planted link (tests/package/install_links.sh)"
  "$REPO_ROOT/tests/package/install_links.sh" || FAILED+=("install.sh and planted links")
fi
if wants client || wants bench || wants portable; then
  part 'build the CLI and the history checker'
  build_cli || FAILED+=("build the CLI")
  export LEADERLOCK_CLI=$CLI_BIN
  # The stress and chaos suites replay their histories through the lease
  # rules (crates/protocol: docs/verification.md).
  (cd "$REPO_ROOT" && cargo build -q --locked --profile cli -p leaderlock-protocol --bin leaderlock-check-history) \
    || FAILED+=("build the history checker")
  export LEADERLOCK_HISTORY_CHECKER=$REPO_ROOT/target/cli/leaderlock-check-history
fi

# regress_suite NAME TOOL DIR EXT: runs the pg_regress-style suite in
# tests/NAME in the order of tests/NAME/schedule, which must name every
# tests/NAME/DIR/*.EXT (a new file never goes silently unrun).
regress_suite() {
  local name=$1 tool=$2 dir=$3 ext=$4 f t missing=()
  for f in "$REPO_ROOT/tests/$name/$dir"/*."$ext"; do
    t=$(basename "$f" ."$ext")
    grep -qx "test: $t" "$REPO_ROOT/tests/$name/schedule" || missing+=("$t")
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    log "tests/$name/schedule does not list: ${missing[*]}"
    fail "$name schedule"
  fi
  # the whole schedule, or (--test) the files whose name contains the pattern
  local which=(--schedule="$REPO_ROOT/tests/$name/schedule")
  if [ -n "$TEST_PATTERN" ]; then
    mapfile -t which < <(sed -n 's/^test: //p' "$REPO_ROOT/tests/$name/schedule" | grep -F -- "$TEST_PATTERN" || true)
    [ "${#which[@]}" -gt 0 ] || { log "no $name test matches '$TEST_PATTERN'"; return 0; }
  fi
  "$tool" --host=127.0.0.1 --port="$PORT" --user=postgres --bindir="$PG_BIN" \
    --inputdir="$REPO_ROOT/tests/$name" --outputdir="$VWORK/$name" \
    --dbname="leaderlock_$name" --load-extension=leaderlock "${which[@]}" \
    || { cat "$VWORK/$name/regression.diffs" 2>/dev/null; fail "$name"; }
}

# install_from_package: builds this version's packages and installs the
# extension from them (tests/package/run.sh install: the checks of what
# they hold, and on 18 the extension image).
install_from_package() {
  local dist="$VWORK/dist" cli=--no-cli
  [ "$PG_MAJOR" != 15 ] || cli=
  "$REPO_ROOT/scripts/package.sh" --pg "$PG_MAJOR" --out "$dist" $cli || return 1
  "$REPO_ROOT/tests/package/run.sh" install "$dist"
}

# lints_on N: whether clippy runs on PostgreSQL N: on 15, and on each version
# some code is compiled for alone (#[cfg(feature = "pgN")]); the others
# compile the same code and add only time.
lints_on() {
  [ "$1" = 15 ] || grep -rqE "feature = \"pg$1\"" "$REPO_ROOT/src"
}

# on_two_versions: whether the current version is one of the two (15, 18)
# where the packages and the portable edition are tested (the tests of
# clients and the whole chaos run on 15 alone).
on_two_versions() {
  [ "$PG_MAJOR" = 15 ] || [ "$PG_MAJOR" = 18 ]
}

# pg_tests: the #[pg_test] functions, as cargo pgrx test runs them (in a
# cluster that does not preload the library, each in a transaction rolled
# back), without building its test binary: almost a minute less per version.
# cargo pgrx test itself runs on 15, with the plain #[test] functions.
pg_tests() {
  local dir="$VWORK/pgtest" port rc=0
  FEATURES=pg_test PROFILE=dev install_extension || return 1
  port=$(free_port)
  start_cluster "$dir" "$port" "shared_preload_libraries = ''" || return 1
  psql_at "$port" -d postgres -c "CREATE DATABASE pgrx_tests" \
    && psql_at "$port" -d pgrx_tests -c "CREATE EXTENSION leaderlock CASCADE" \
    && /usr/bin/python3 "$REPO_ROOT/tests/unit/run.py" --port "$port" --log "$dir/server.log" \
      ${TEST_PATTERN:+--test "$TEST_PATTERN"} || rc=1
  stop_cluster "$dir" fast
  return $rc
}

# test_version N: every suite on PostgreSQL N.
test_version() {
  use_pg "$1"
  VWORK="$WORK/pg$PG_MAJOR"
  mkdir -p "$VWORK" && give_to_server "$VWORK"
  export LEADERLOCK_WORK=$VWORK
  local features=(--no-default-features --features "pg$PG_MAJOR")

  if wants lint && lints_on "$PG_MAJOR"; then
    stage "lint"
    (cd "$REPO_ROOT" && cargo clippy --all-targets -q "${features[@]}" -- -D warnings) \
      || fail "cargo clippy"
  fi

  if wants unit && [ "$PG_MAJOR" = 15 ]; then
    stage "unit tests (#[pg_test] and #[test]: cargo pgrx test)"
    runas=()
    [ "$(id -u)" -ne 0 ] || runas=(--runas postgres)
    (cd "$REPO_ROOT" && cargo pgrx test "pg$PG_MAJOR" ${TEST_PATTERN:+"$TEST_PATTERN"} "${runas[@]}" --pgdata "$VWORK/pgtest") \
      || fail "unit tests"
  elif wants unit && { [ "$PG_MAJOR" = 14 ] || [ "$PG_MAJOR" = 18 ]; }; then
    # The oldest and newest servers besides 15; 16 and 17 run the same
    # functions through pg_regress, isolation and the client tests (the
    # test command keeps under its hour).
    stage "unit tests (#[pg_test]: tests/unit/run.py)"
    pg_tests || fail "unit tests"
  fi

  # The tests below run against what the Debian package installs, on 15
  # and 18 (packages on two versions are enough, and the test command
  # keeps under its hour); elsewhere, or when only some suites run and
  # package is not one, against a debug build.
  local packaged=false
  if wants package && on_two_versions; then
    packaged=true
  fi
  if $packaged; then
    stage "package (scripts/package.sh) and install from it"
    install_from_package || fail "package"
  elif wants pg_regress || wants isolation || wants client || wants portable; then
    stage "install a debug build"
    PROFILE=dev install_extension || fail "install"
  fi
  # Install scripts of released versions, for the upgrade test to start from.
  install -m 644 "$REPO_ROOT"/sql/released/*.sql "$("$PG_CONFIG" --sharedir)/extension/"
  if wants pg_regress || wants isolation || wants client; then
    test_on_a_cluster
  fi
  # The portable edition, on 15 and 18 (tests/portable/README.md); the move
  # to the compiled edition and back needs the compiled one installed: before
  # the package suite's apt-get remove.
  if wants portable && on_two_versions; then
    stage "portable edition (tests/portable)"
    # (the client tests, which do not depend on the server's version, on 15)
    local steps=regress,isolation,notify,concurrency,migrate,security
    [ "$PG_MAJOR" != 15 ] || steps=$steps,client
    "$REPO_ROOT/tests/portable/run.sh" --bindir "$PG_BIN" --only "$steps" || fail "portable"
    "$REPO_ROOT/tests/portable/promotion.sh" --bindir "$PG_BIN" || fail "portable: promotion"
    "$REPO_ROOT/tests/portable/editions.sh" || fail "portable: editions"
  fi
  # (before apt-get remove, and before the benchmarks' load)
  join_client_tests
  if $packaged; then
    stage "package: installs under a running server, the CLI's package, apt-get remove"
    "$REPO_ROOT/tests/package/run.sh" after "$VWORK/dist" || fail "package (after)"
  fi
  stage_end
}

# suite_cluster DIR PORT: a cluster of this version as the suites want it,
# the extension in postgres and leaderlock_lazy. Workers serve postgres only
# (leaderlock_lazy stays unserved, and the regression databases' outputs do
# not depend on a worker); tests/client/test_databases.py switches to '*'
# (the default) and back.
suite_cluster() {
  start_cluster "$1" "$2" "leaderlock.databases = 'postgres'" "max_worker_processes = 24" \
    && psql_at "$2" -d postgres -c "CREATE EXTENSION leaderlock" \
    && psql_at "$2" -d postgres -c "CREATE DATABASE leaderlock_lazy" \
    && psql_at "$2" -d leaderlock_lazy -c "CREATE EXTENSION leaderlock"
}

# start_client_tests: the client tests (tests/client) in the background,
# on a cluster of their own (suite_cluster, as test_on_a_cluster's), beside
# the stages that follow (the clients' suites, the portable edition): they
# mostly wait (ttls, chaos runs; about a third of a core measured), so side
# by side the version's stages take about ten minutes less on 15.
# join_client_tests prints their output and verdict.
CLIENT_PID="" CLIENT_T0=0 CLIENT_DIR=""
start_client_tests() {
  local port dir="$VWORK/clients"
  port=$(free_port)
  suite_cluster "$dir" "$port" || { fail "client tests: their cluster"; return 0; }
  log "client tests: started on 127.0.0.1:$port (data in $dir), beside the stages below; their output at their end"
  CLIENT_T0=$SECONDS CLIENT_DIR=$dir
  { rc=0; client_tests "$port" "$dir" || rc=$?; echo "$SECONDS" >"$VWORK/client-tests.end"; exit "$rc"; } \
    >"$VWORK/client-tests.log" 2>&1 &
  CLIENT_PID=$!
}

join_client_tests() {
  [ -n "$CLIENT_PID" ] || return 0
  local rc=0
  stage_end  # (the wait below is not the last stage's time)
  wait "$CLIENT_PID" || rc=$?
  CLIENT_PID=""
  printf '\n=== PostgreSQL %s: client tests (beside the stages above: their output)\n' "$PG_MAJOR"
  cat "$VWORK/client-tests.log"
  local took=$(( $(cat "$VWORK/client-tests.end" 2>/dev/null || echo "$SECONDS") - CLIENT_T0 ))
  log "PostgreSQL $PG_MAJOR: client tests: $took s (beside other stages, which went on $(( SECONDS - CLIENT_T0 - took )) s after them)"
  STAGE_TIMES+=("$(printf '%5d s  %s' "$took" "PostgreSQL $PG_MAJOR: client tests (beside other stages)")")
  [ "$rc" -eq 0 ] || fail "client tests"
  stop_cluster "$CLIENT_DIR" fast
}

# client_tests PORT DATADIR: tests/client against that cluster.
client_tests() {
  local PORT=$1 main=$2
  # Every version runs the extension's own tests; the tests of the CLI, the
  # demo, the examples and scheduled runs (clients, whatever the server's
  # version) run on 15, with the other clients' suites, and the
  # crash-and-failover chaos runs 20 s there (15 s elsewhere), the CLI's
  # chaos 15 s, the history's watcher chaos 20 s (60 by hand: docs/history.md),
  # the scheduled runs' chaos 90 due instants 200 ms apart,
  # the many-clients stress 12 s on 15 (5 s elsewhere): the test command
  # keeps under its hour.
  local client_side=0 chaos=15 stress=5 skip=""
  if [ "$PG_MAJOR" = 15 ]; then client_side=1 chaos=20 stress=12; fi
  # The modules that test the extension's SQL logic (its functions'
  # answers and their concurrency, the same Rust on every version: #[cfg]
  # is only for 14's promotion path and 18's worker start) run on 15;
  # pg_regress and isolation check that logic on every version. The
  # others run the modules of the server's machinery (the worker,
  # notifications, promotions, restarts, storage, connections, limits).
  # (18 ran them too until the history's suites: three minutes.)
  case $PG_MAJOR in
    14|16|17|18) skip=test_acquire,test_slots,test_priority,test_sessions,test_groups,test_groups_chaos,test_several_primaries,test_many_keys,test_runs,test_publication ;;
  esac
  (cd "$REPO_ROOT/tests/client" && \
    LEADERLOCK_PORT=$PORT LEADERLOCK_PGDATA=$main LEADERLOCK_CLIENT_SIDE=$client_side \
    LEADERLOCK_SKIP_MODULES=$skip \
    LEADERLOCK_CHAOS_SECONDS=${LEADERLOCK_CHAOS_SECONDS:-$chaos} \
    LEADERLOCK_CLI_CHAOS_SECONDS=${LEADERLOCK_CLI_CHAOS_SECONDS:-15} \
    LEADERLOCK_HISTORY_CHAOS_SECONDS=${LEADERLOCK_HISTORY_CHAOS_SECONDS:-20} \
    LEADERLOCK_STRESS_SECONDS=${LEADERLOCK_STRESS_SECONDS:-$stress} \
    LEADERLOCK_RUNS_SLOTS=${LEADERLOCK_RUNS_SLOTS:-90} LEADERLOCK_RUNS_PERIOD_MS=${LEADERLOCK_RUNS_PERIOD_MS:-200} \
    /usr/bin/python3 run.py ${TEST_PATTERN:+-k "$TEST_PATTERN"}) \
    || { tail -n 40 "$main/server.log"; return 1; }
}

# test_on_a_cluster: pg_regress, isolation and (on 15) the clients' own
# suites, against a cluster of this version with the extension in postgres
# and leaderlock_lazy; it starts the client tests beside them.
test_on_a_cluster() {
  PORT=$(free_port)
  local main="$VWORK/main"
  suite_cluster "$main" "$PORT"
  log "test cluster: $(psql_at "$PORT" -d postgres -Atc 'SHOW server_version') on 127.0.0.1:$PORT, data in $main"

  local pgxs_test
  pgxs_test=$(pgxs_test_dir)
  if wants pg_regress; then
    stage "pg_regress"
    regress_suite pg_regress "$pgxs_test/regress/pg_regress" sql sql
  fi

  if wants isolation; then
    stage "isolation"
    regress_suite isolation "$pgxs_test/isolation/pg_isolation_regress" specs spec
  fi

  if wants client; then
    start_client_tests
  fi
  # (the other versions from here on, beside 15's client stages)
  if [ "$PG_MAJOR" = 15 ]; then
    start_lane
  fi

  if wants client && [ "$PG_MAJOR" = 15 ]; then
    stage "the Node.js client (clients/node: npm ci, build, node --test)"
    (cd "$REPO_ROOT/clients/node" && npm ci --no-audit --no-fund --loglevel=error && \
      LEADERLOCK_DSN="postgresql://postgres@127.0.0.1:$PORT/postgres" LEADERLOCK_PGDATA="$main" \
      npm test --silent) \
      || fail "Node.js client tests"
    stage "the Go client and its resourcelock (clients/go/test.sh: module mode, pgx v5; client-go's LeaderElector on a leaderlock lease)"
    LEADERLOCK_DSN="postgres://postgres@127.0.0.1:$PORT/postgres" LEADERLOCK_PGDATA="$main" \
      "$REPO_ROOT/clients/go/test.sh" \
      || fail "Go client tests"
    stage "the Java client (clients/java/test.sh: Maven offline, PgJDBC; the ShedLock provider and ShedLock's own provider tests)"
    LEADERLOCK_DSN="postgresql://postgres@127.0.0.1:$PORT/postgres" "$REPO_ROOT/clients/java/test.sh" \
      || fail "Java client tests"
    stage "the Python client (clients/python/tests)"
    (cd "$REPO_ROOT/clients/python" && \
      LEADERLOCK_DSN="host=127.0.0.1 port=$PORT dbname=postgres user=postgres" PYTHONPATH=src \
      LEADERLOCK_PGDATA="$main" \
      "$PY_CLIENT_VENV/bin/python" -m unittest discover -s tests ${TEST_PATTERN:+-k "$TEST_PATTERN"}) \
      || fail "Python client tests"
    stage "the Rust client against the server (crates/client/tests: server.rs, group.rs)"
    (cd "$REPO_ROOT" && LEADERLOCK_DSN="host=127.0.0.1 port=$PORT dbname=postgres user=postgres" \
      cargo test --locked -q -p leaderlock-client --test server --test group) \
      || fail "Rust client tests"
    stage "every client's scenarios (tests/clients/scenarios.py and runs_scenario.py: Python, Node.js, Go, Java, Rust)"
    "$REPO_ROOT/clients/go/test.sh" --candidate "$VWORK/go-candidate" \
      && "$REPO_ROOT/clients/go/test.sh" --run-candidate "$VWORK/go-run-candidate" \
      && "$REPO_ROOT/clients/java/test.sh" --candidate "$VWORK/java-candidate" \
        --run-candidate "$VWORK/java-run-candidate" --tour "$VWORK/java-tour" \
      && GO_CANDIDATE="$VWORK/go-candidate" JAVA_CANDIDATE="$VWORK/java-candidate" \
        PY_CLIENT_PYTHON="$PY_CLIENT_VENV/bin/python" \
        /usr/bin/python3 "$REPO_ROOT/tests/clients/scenarios.py" \
        --dsn "postgresql://postgres@127.0.0.1:$PORT/postgres" --pgdata "$main" --pgbouncer \
      && GO_RUN_CANDIDATE="$VWORK/go-run-candidate" JAVA_RUN_CANDIDATE="$VWORK/java-run-candidate" \
        PY_CLIENT_PYTHON="$PY_CLIENT_VENV/bin/python" \
        /usr/bin/python3 "$REPO_ROOT/tests/clients/runs_scenario.py" \
        --dsn "postgresql://postgres@127.0.0.1:$PORT/postgres" --pgdata "$main" \
      || fail "client scenarios"
    stage "no client statement depends on the search_path (tests/clients/hostile.py: every client's tour, both editions)"
    (cd "$REPO_ROOT" && cargo build -q --locked --profile cli -p leaderlock-client --example tour) \
      && "$REPO_ROOT/clients/go/test.sh" --tour "$VWORK/go-tour" \
      && hostile() { GO_TOUR="$VWORK/go-tour" JAVA_TOUR="$VWORK/java-tour" \
           LEADERLOCK_RUST_TOUR="$REPO_ROOT/target/cli/examples/tour" \
           PY_CLIENT_PYTHON="$PY_CLIENT_VENV/bin/python" \
           /usr/bin/python3 "$REPO_ROOT/tests/clients/hostile.py" \
           --dsn "postgresql://postgres@127.0.0.1:$PORT/postgres" "$@"; } \
      && hostile \
      && LEADERLOCK_SCHEMA=leaderlock hostile --edition portable --targets direct \
      || fail "clients' statements and the search_path"
  fi

  stop_cluster "$main" fast
}

# timed NAME COMMAND...: runs it and says how long it took (where the hour goes).
timed() {
  local name=$1 t=$SECONDS rc=0
  shift
  "$@" || rc=$?
  log "$name: $(( SECONDS - t )) s"
  return $rc
}

# bench_smoke: every benchmark, with tiny sizes, so none can rot (they
# check that each runs, and what each asserts, not their figures: those
# are for the full runs).
bench_smoke() {
  stage "bench smoke (bench/run.sh --quick, and every other benchmark small)"
  # The release build every benchmark would install again, once for all
  # (and the CLI built above): LEADERLOCK_PREBUILT (scripts/lib.sh).
  install_extension || fail "bench smoke: install"
  export LEADERLOCK_PREBUILT=1
  timed run "$REPO_ROOT/bench/run.sh" --pg "$PG_MAJOR" --quick || fail "bench smoke"
  timed worker_lag "$REPO_ROOT/bench/worker_lag.sh" --pg "$PG_MAJOR" --live 500 --expiring 20 --window 2 --idle 1 \
    --renew-rate 20 || fail "worker lag smoke"
  timed cli_handover "$REPO_ROOT/bench/cli_handover.sh" --pg "$PG_MAJOR" --rounds 5 --hold 0.1 || fail "CLI handover smoke"
  timed cli_status "$REPO_ROOT/bench/cli_status.sh" --pg "$PG_MAJOR" --keys 300 --rounds 2 || fail "CLI status smoke"
  timed console "$REPO_ROOT/bench/console.sh" --pg "$PG_MAJOR" --keys 20000 --rounds 2 || fail "console smoke"
  timed acquire_wake "$REPO_ROOT/bench/acquire_wake.sh" --pg "$PG_MAJOR" --waiters 10 --keys 2 --handovers 20 \
    --idle-seconds 1 || fail "blocking acquire smoke"
  timed runs "$REPO_ROOT/bench/runs.sh" --pg "$PG_MAJOR" --clients 2 --seconds 1 --reps 1 --slots 6 --period-ms 300 \
    || fail "scheduled runs smoke"
  timed session_end "$REPO_ROOT/bench/session_end.sh" --pg "$PG_MAJOR" --rounds 3 || fail "session end smoke"
  timed scale "$REPO_ROOT/bench/scale.sh" --pg "$PG_MAJOR" --sessions 4 --small-sessions 2 --keys 20 --vacate 3 \
    --vacate-reps 1 --vacate-in 1 --etcd-vacate-ttl 2 --rounds 1 --renew-calls 2 --renew-keys 20 --acquire 20 \
    --lag-expiring 5 --lag-window 0.5 --lag-reps 1 --renew-rate 20 --steady 1 || fail "a million leases smoke"
  if [ "$(id -u)" -eq 0 ]; then  # it makes a network namespace
    timed half_open "$REPO_ROOT/bench/half_open.sh" --pg "$PG_MAJOR" --rounds 1 --idle 1 --interval 1 --count 1 \
      || fail "half-open holder smoke"
  fi
  timed etcd "$REPO_ROOT/bench/etcd.sh" --pg "$PG_MAJOR" --clients 2 --seconds 1 --rounds 3 --failovers 1 \
    --ttl 2 || fail "etcd side-by-side smoke"
  timed editions "$REPO_ROOT/bench/editions.sh" --pg "$PG_MAJOR" --seconds 1 --reps 1 --rounds 1 \
    || fail "editions side-by-side smoke"
  timed renew_all "$REPO_ROOT/bench/renew_all.sh" --pg "$PG_MAJOR" --keys 200 --rounds 2 --release-rounds 1 \
    || fail "many keys, one holder smoke"
  timed paths "$REPO_ROOT/bench/paths.sh" --pg "$PG_MAJOR" --rounds 2 || fail "statements per call smoke"
  timed groups "$REPO_ROOT/bench/groups.sh" --pg "$PG_MAJOR" --partitions 200 --members 4 --recipe-partitions 40 \
    --recipe-members 3 --steady 1 --leaves 1 --ttl 2 || fail "groups at scale smoke"
  timed history_cost "$REPO_ROOT/bench/history_cost.sh" --pg "$PG_MAJOR" --rounds 1 --seconds 1 --clients 2 \
    --handovers 5 || fail "history cost smoke"
  if [ "$PG_MAJOR" = 15 ]; then  # the clients do not depend on the server's version
    timed clients "$REPO_ROOT/bench/clients.sh" --pg "$PG_MAJOR" --rounds 1 --seconds 1 || fail "clients side-by-side smoke"
  fi
  unset LEADERLOCK_PREBUILT
}

# The test command as a non-root contributor runs it, once (as root only:
# it makes that user; not on a run given a PostgreSQL of your own).
if wants contributor && [ "$(id -u)" -eq 0 ] && [ -z "${LEADERLOCK_PG_CONFIG:-}" ]; then
  part 'the test command as a contributor, not root (tests/contributor/run.sh)'
  t=$SECONDS
  LEADERLOCK_PG=16 "$REPO_ROOT/tests/contributor/run.sh" || FAILED+=("as a contributor")
  stage_end
  SUMMARY+=("as a contributor (not root, PostgreSQL 16 of its own): $(( SECONDS - t )) s")
fi

# run_version N: every suite on PostgreSQL N, its verdict and time kept.
run_version() {
  local t=$SECONDS before=${#FAILED[@]} verdict=passed
  test_version "$1"
  [ "${#FAILED[@]}" -gt "$before" ] && verdict=FAILED
  SUMMARY+=("PostgreSQL $1 ($("$PG_BIN/postgres" --version | awk '{print $NF}')): $verdict in $(( (SECONDS - t) / 60 )) min $(( (SECONDS - t) % 60 )) s")
}

# Two lanes. 15 runs the most (the clients' suites, their scenarios and
# tours, the portable edition, the benchmarks), and from its client stages
# on it mostly waits (ttls, chaos runs, the clients' own tests): the other
# versions run one after the other in a lane of their own, in the
# background, from there on (start_lane, called by test_on_a_cluster),
# beside 15's client stages and its benchmark smoke runs. Rust builds take
# turns (cargo's lock on target/); each version has its own tree, port and
# work directory. The side lane's output is printed, and its verdicts and
# stage times counted, when 15 is done. A run without 15, or of one
# version, runs its versions one after the other.
SIDE=() MAIN=()
if [[ " ${VERSIONS[*]} " == *" 15 "* ]] && [ "${#VERSIONS[@]}" -gt 1 ]; then
  MAIN=(15)
  for v in "${VERSIONS[@]}"; do [ "$v" = 15 ] || SIDE+=("$v"); done
else
  MAIN=("${VERSIONS[@]}")
fi
LANE_PID="" LANE_T0=0
start_lane() {
  [ "${#SIDE[@]}" -gt 0 ] && [ -z "$LANE_PID" ] || return 0
  stage_end
  log "side lane: PostgreSQL ${SIDE[*]} started in the background, beside the stages below; its output at the end"
  LANE_T0=$SECONDS
  (
    FAILED=() SUMMARY=() STAGE_TIMES=() CLIENT_PID=""
    for v in "${SIDE[@]}"; do run_version "$v"; done
    stage_end
    for f in "${FAILED[@]}"; do echo "$f"; done >"$WORK/lane.failed"
    for f in "${SUMMARY[@]}"; do echo "$f"; done >"$WORK/lane.summary"
    for f in "${STAGE_TIMES[@]}"; do echo "$f"; done >"$WORK/lane.stages"
    echo "$SECONDS" >"$WORK/lane.end"
  ) >"$WORK/lane.log" 2>&1 &
  LANE_PID=$!
}
join_lane() {
  [ -n "$LANE_PID" ] || return 0
  stage_end
  wait "$LANE_PID" || true
  LANE_PID=""
  printf '\n=== the side lane: PostgreSQL %s (beside the stages above: its output)\n' "${SIDE[*]}"
  cat "$WORK/lane.log"
  if [ -f "$WORK/lane.end" ]; then
    local line
    while IFS= read -r line; do [ -z "$line" ] || FAILED+=("$line"); done <"$WORK/lane.failed"
    while IFS= read -r line; do [ -z "$line" ] || SUMMARY+=("$line"); done <"$WORK/lane.summary"
    while IFS= read -r line; do [ -z "$line" ] || STAGE_TIMES+=("$line"); done <"$WORK/lane.stages"
    log "the side lane: $(( $(cat "$WORK/lane.end") - LANE_T0 )) s (beside the main lane, which went on $(( SECONDS - $(cat "$WORK/lane.end") )) s after it)"
  else
    FAILED+=("the side lane (PostgreSQL ${SIDE[*]}) ended before its end")
  fi
}

for v in "${MAIN[@]}"; do
  run_version "$v"
  # Every benchmark on one version, beside the side lane: enough that none
  # can rot.
  if [ "$v" = 15 ]; then
    start_lane
    if wants bench; then bench_smoke; fi
  fi
done
join_lane

stage_end
echo
if [ "${#STAGE_TIMES[@]}" -gt 0 ]; then
  echo "slowest stages:"
  printf '%s\n' "${STAGE_TIMES[@]}" | sort -rn | head -n 15
  echo
fi
printf '%s\n' "${SUMMARY[@]}"
log "total $(( (SECONDS - T0) / 60 )) min $(( (SECONDS - T0) % 60 )) s"
if [ "${#FAILED[@]}" -gt 0 ]; then
  # The last lines each failed stage printed, here at the end where a
  # reader of the run's tail sees them.
  echo
  echo "what each failed stage printed last (all of it: $WORK/main.log):"
  grep -n 'FAILED on PostgreSQL' "$WORK/main.log" | cut -d: -f1 | head -n 5 | while read -r n; do
    echo "---"
    sed -n "$(( n > 30 ? n - 30 : 1 )),${n}p" "$WORK/main.log" | cut -c1-300
  done
  # A stage's failing test may have printed long before its stage ended:
  # the first failures' own reports (unittest, Go, node:test, cargo,
  # pg_regress), each with the lines that follow it.
  echo
  echo "the first failures reported:"
  grep -n -E '^(FAIL|ERROR): |^--- FAIL|^not ok |panicked at| \.\.\. FAILED' "$WORK/main.log" \
    | cut -d: -f1 | head -n 6 | while read -r n; do
    echo "---"
    sed -n "${n},$(( n + 12 ))p" "$WORK/main.log" | cut -c1-300
  done
  log "FAILED: ${FAILED[*]}"
  exit 1
fi
log "all tests passed on PostgreSQL ${VERSIONS[*]}"
