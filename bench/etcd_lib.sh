# Sourced by the benchmarks that run etcd 3.4 beside PostgreSQL (etcd.sh,
# renew_all.sh, scale.sh), after scripts/lib.sh: `start_throwaway_etcd` sets up
# (installs Debian's etcd-server and etcd-client when missing), starts a
# throwaway PostgreSQL cluster with leaderlock preloaded (default settings,
# fsync on; its port in PORT) and a throwaway single-member etcd (default
# settings: its WAL is fsynced too; ETCD_URL, ETCD_PID) on free ports; both
# are removed when the script exits.
start_throwaway_etcd() {
  if ! command -v etcd >/dev/null || ! command -v etcdctl >/dev/null; then
    log "installing Debian packages: etcd-server etcd-client"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends etcd-server etcd-client
  fi
  ETCD_PID=
  trap 'rc=$?; if [ -n "$ETCD_PID" ]; then kill "$ETCD_PID" 2>/dev/null; wait "$ETCD_PID" 2>/dev/null || true; fi; remove_throwaway_cluster; exit "$rc"' EXIT
  start_throwaway_cluster "fsync = on"
  local client_port peer_port url
  client_port=$(free_port)
  peer_port=$(free_port)
  url="http://127.0.0.1:$client_port"
  ETCD_URL=$url
  log "starting a throwaway etcd $(etcd --version | awk 'NR==1 {print $3}') at $url"
  etcd --name bench --data-dir "$DIR/etcd" \
    --listen-client-urls "$url" --advertise-client-urls "$url" \
    --listen-peer-urls "http://127.0.0.1:$peer_port" \
    --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
    --initial-cluster "bench=http://127.0.0.1:$peer_port" >"$DIR/etcd.log" 2>&1 &
  ETCD_PID=$!
  for _ in $(seq 100); do
    ETCDCTL_API=3 etcdctl --endpoints "$url" endpoint health >/dev/null 2>&1 && break
    sleep 0.1
  done
  ETCDCTL_API=3 etcdctl --endpoints "$url" endpoint health >/dev/null 2>&1 || { cat "$DIR/etcd.log"; exit 1; }
}
