#!/usr/bin/env bash
# Quick start 1: set everything up, start a throwaway PostgreSQL cluster
# with leaderlock preloaded on a free local port, and run an election you
# can watch (scripts/../demo/election.py). The cluster is removed at the end.
#
#   ./scripts/demo.sh [--pg N] [--keep]
#
# --pg N picks the PostgreSQL version (14 to 18, default 15); --keep leaves
# the cluster running to play with it in psql.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

KEEP=0
while [ $# -gt 0 ]; do
  case "$1" in
    --keep) KEEP=1 ;;
    --pg) use_pg "$2"; shift ;;
    *) echo "usage: $0 [--pg N] [--keep]" >&2; exit 2 ;;
  esac
  shift
done

cleanup() {
  if [ "$KEEP" = 1 ]; then
    log "cluster left running: $PG_BIN/psql -h 127.0.0.1 -p $PORT -U postgres"
    log "stop it with: sudo -u postgres $PG_BIN/pg_ctl -D $DIR/data stop"
  else
    remove_throwaway_cluster
  fi
}
trap cleanup EXIT
start_throwaway_cluster
/usr/bin/python3 "$REPO_ROOT/demo/election.py" "$PORT"
