# Shared helpers for the leaderlock scripts: install the extension, run a
# throwaway PostgreSQL 15 cluster as the `postgres` user on a free port.
# Sourced, not run.

PG_MAJOR=15
PG_BIN=/usr/lib/postgresql/${PG_MAJOR}/bin
PG_CONFIG=${PG_BIN}/pg_config
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export PATH="$HOME/.cargo/bin:$PATH"

log() { printf '[%s] %s\n' "$(basename "$0")" "$*"; }

# Build and install the extension into the Debian PostgreSQL 15 tree.
# PROFILE=release (default) or dev.
install_extension() {
  local profile=${PROFILE:-release}
  local flag=()
  [ "$profile" = release ] && flag=(--release)
  log "building and installing leaderlock ($profile)"
  (cd "$REPO_ROOT" && cargo pgrx install "${flag[@]}" --pg-config "$PG_CONFIG" >/dev/null)
}

# A TCP port nobody listens on.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

as_postgres() { sudo -u postgres -H -- "$@"; }

# start_cluster DIR PORT [extra postgresql.conf lines...]
# Creates (if needed) and starts a cluster in DIR, owned by postgres, with
# leaderlock preloaded, trust auth on localhost, socket in DIR.
start_cluster() {
  local dir=$1 port=$2; shift 2
  if [ ! -f "$dir/PG_VERSION" ]; then
    mkdir -p "$dir" && chown postgres:postgres "$dir" && chmod 700 "$dir"
    as_postgres "$PG_BIN/initdb" -D "$dir" -A trust -U postgres --no-sync >/dev/null
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

stop_cluster() {
  local dir=$1 mode=${2:-fast}
  if [ -f "$dir/postmaster.pid" ]; then
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
start_throwaway_cluster() {
  "$REPO_ROOT/scripts/setup.sh" >/dev/null
  install_extension
  DIR=$(mktemp -d /tmp/leaderlock-cluster.XXXXXX)
  chown postgres:postgres "$DIR"
  PORT=$(free_port)
  log "starting a throwaway cluster on 127.0.0.1:$PORT"
  start_cluster "$DIR/data" "$PORT" "$@"
  psql_at "$PORT" -d postgres -c "CREATE EXTENSION leaderlock"
}

remove_throwaway_cluster() {
  [ -n "${DIR:-}" ] || return 0
  stop_cluster "$DIR/data" fast
  rm -rf "$DIR"
}
