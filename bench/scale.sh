#!/usr/bin/env bash
# A million leases on one primary, measured: renewal cost per lease
# (le_renew_session, le_renew_all, le_renew, etcd 3.4's keepalive of a lease
# of many keys), worker expiry lag, vacating 100,000 keys of sessions at once,
# acquisitions, size and WAL per lease, autovacuum under steady renewals,
# with 1,000,000 live keys against 10,000, in one run. Sets up (installs
# Debian's etcd-server and etcd-client when missing), starts a throwaway
# PostgreSQL cluster with leaderlock preloaded (default settings, fsync on)
# and a throwaway single-member etcd (default settings: its WAL is fsynced
# too) on free ports, runs bench/scale.py. Arguments are passed on, e.g.
# --sessions 1000 --keys 1000 --json FILE; --pg N (first) picks the
# PostgreSQL version.
set -euo pipefail
source "$(dirname "$0")/../scripts/lib.sh"
if [ "${1:-}" = --pg ]; then
  use_pg "$2"
  shift 2
fi
source "$REPO_ROOT/bench/etcd_lib.sh"
start_throwaway_etcd
/usr/bin/python3 "$REPO_ROOT/bench/scale.py" "$PORT" "$ETCD_URL" --etcd-pid "$ETCD_PID" "$@"
