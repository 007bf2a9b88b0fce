#!/usr/bin/env bash
# Session-bound leases (contract 10) when the holder's host vanishes without
# closing its connection (power lost, network cut): no FIN reaches the
# server, so only the server's TCP keepalives (tcp_keepalives_idle,
# _interval, _count) end the holder's backend, and with it the lease.
#
# Makes a network namespace with a veth pair (10.231.0.1 on this side,
# 10.231.0.2 inside), starts a throwaway cluster listening on 127.0.0.1 and
# 10.231.0.1, runs the holder inside the namespace, removes the holder's
# address (packets to it are dropped unanswered), and times until the lease
# is vacated. Needs root (ip netns). Arguments are passed on to
# bench/half_open.py (--idle S --interval S --count N --rounds N);
# --pg N (first) picks the PostgreSQL version.
set -euo pipefail
source "$(dirname "$0")/../scripts/lib.sh"
if [ "${1:-}" = --pg ]; then use_pg "$2"; shift 2; fi
[ "$(id -u)" -eq 0 ] || { log "needs root (it makes a network namespace)"; exit 2; }

NS=leaderlock-ho-$$
HOST_IF=llho$$h
NS_IF=llho$$n
cleanup() {
  remove_throwaway_cluster
  ip link del "$HOST_IF" 2>/dev/null || true
  ip netns del "$NS" 2>/dev/null || true
}
trap cleanup EXIT
ip netns add "$NS"
ip link add "$HOST_IF" type veth peer name "$NS_IF"
ip link set "$NS_IF" netns "$NS"
ip addr add 10.231.0.1/30 dev "$HOST_IF"
ip link set "$HOST_IF" up
ip netns exec "$NS" ip addr add 10.231.0.2/30 dev "$NS_IF"
ip netns exec "$NS" ip link set "$NS_IF" up
ip netns exec "$NS" ip link set lo up

start_throwaway_cluster "fsync = on" "listen_addresses = '127.0.0.1,10.231.0.1'"
echo "host all all 10.231.0.2/32 trust" >>"$DIR/data/pg_hba.conf"
psql_at "$PORT" -d postgres -c "SELECT pg_reload_conf()" >/dev/null
/usr/bin/python3 "$REPO_ROOT/bench/half_open.py" "$PORT" --netns "$NS" --netns-if "$NS_IF" "$@"
