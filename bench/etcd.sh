#!/usr/bin/env bash
# leaderlock and etcd 3.4 side by side: sets up (installs
# Debian's etcd-server and etcd-client when missing), starts a throwaway
# PostgreSQL cluster with leaderlock preloaded (default settings, fsync on)
# and a throwaway single-member etcd (default settings: its WAL is fsynced
# too) on free ports, runs bench/etcd.py. Arguments are passed on, e.g.
# --clients 8 --seconds 10 --rounds 50 --failovers 10 --json F --chart F;
# --pg N (first) picks the PostgreSQL version.
set -euo pipefail
source "$(dirname "$0")/../scripts/lib.sh"
if [ "${1:-}" = --pg ]; then
  use_pg "$2"
  shift 2
fi
source "$REPO_ROOT/bench/etcd_lib.sh"
start_throwaway_etcd
/usr/bin/python3 "$REPO_ROOT/bench/etcd.py" "$PORT" "$ETCD_URL" "$@"
