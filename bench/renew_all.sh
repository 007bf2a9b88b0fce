#!/usr/bin/env bash
# Many keys, one holder: le_renew_all and le_release_all against N le_renew
# calls, plain UPDATEs and etcd 3.4's one lease for many keys, in one run.
# Sets up (installs Debian's etcd-server and etcd-client when missing),
# starts a throwaway PostgreSQL cluster with leaderlock preloaded (default
# settings, fsync on) and a throwaway single-member etcd (default settings:
# its WAL is fsynced too) on free ports, runs bench/renew_all.py. Arguments
# are passed on, e.g. --keys 10000 --rounds 20 --json FILE; --pg N (first)
# picks the PostgreSQL version.
set -euo pipefail
source "$(dirname "$0")/../scripts/lib.sh"
if [ "${1:-}" = --pg ]; then
  use_pg "$2"
  shift 2
fi
source "$REPO_ROOT/bench/etcd_lib.sh"
start_throwaway_etcd
/usr/bin/python3 "$REPO_ROOT/bench/renew_all.py" "$PORT" "$ETCD_URL" --etcd-pid "$ETCD_PID" "$@"
