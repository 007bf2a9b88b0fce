#!/usr/bin/env bash
# Quick start 1: set everything up, start a throwaway PostgreSQL 15 cluster
# with leaderlock preloaded on a free local port, and run an election you
# can watch (scripts/../demo/election.py). The cluster is removed at the end;
# pass --keep to leave it running and play with it in psql.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

KEEP=0
[ "${1:-}" = "--keep" ] && KEEP=1

cleanup() {
  if [ "$KEEP" = 1 ]; then
    log "cluster left running: psql -h 127.0.0.1 -p $PORT -U postgres"
    log "stop it with: sudo -u postgres $PG_BIN/pg_ctl -D $DIR/data stop"
  else
    remove_throwaway_cluster
  fi
}
trap cleanup EXIT
start_throwaway_cluster
/usr/bin/python3 "$REPO_ROOT/demo/election.py" "$PORT"
