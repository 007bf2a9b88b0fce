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
if ! command -v etcd >/dev/null || ! command -v etcdctl >/dev/null; then
  log "installing Debian packages: etcd-server etcd-client"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends etcd-server etcd-client
fi
ETCD_PID=
cleanup() {
  local rc=$?
  if [ -n "$ETCD_PID" ]; then kill "$ETCD_PID" 2>/dev/null; wait "$ETCD_PID" 2>/dev/null || true; fi
  remove_throwaway_cluster
  exit "$rc"
}
trap cleanup EXIT
start_throwaway_cluster "fsync = on"
CLIENT_PORT=$(free_port)
PEER_PORT=$(free_port)
ETCD_URL="http://127.0.0.1:$CLIENT_PORT"
log "starting a throwaway etcd $(etcd --version | awk 'NR==1 {print $3}') at $ETCD_URL"
etcd --name bench --data-dir "$DIR/etcd" \
  --listen-client-urls "$ETCD_URL" --advertise-client-urls "$ETCD_URL" \
  --listen-peer-urls "http://127.0.0.1:$PEER_PORT" \
  --initial-advertise-peer-urls "http://127.0.0.1:$PEER_PORT" \
  --initial-cluster "bench=http://127.0.0.1:$PEER_PORT" >"$DIR/etcd.log" 2>&1 &
ETCD_PID=$!
for _ in $(seq 100); do
  ETCDCTL_API=3 etcdctl --endpoints "$ETCD_URL" endpoint health >/dev/null 2>&1 && break
  sleep 0.1
done
ETCDCTL_API=3 etcdctl --endpoints "$ETCD_URL" endpoint health >/dev/null 2>&1 || { cat "$DIR/etcd.log"; exit 1; }
/usr/bin/python3 "$REPO_ROOT/bench/renew_all.py" "$PORT" "$ETCD_URL" --etcd-pid "$ETCD_PID" "$@"
