#!/usr/bin/env bash
# Failover under a real HA manager, as a benchmark: tests/client/test_patroni.py
# (Patroni 3.0.2 + etcd 3.4, two PostgreSQL 15 nodes, two `leaderlock run`
# candidates) with more rounds. Prints, next to Patroni's ttl and loop_wait,
# the time from the primary's loss (SIGKILL of its Patroni and PostgreSQL) to
# the next command's start, p50 / p99 over the rounds.
#   ./bench/patroni.sh [FAILOVERS] [SWITCHOVERS]     (default 10 and 3)
set -euo pipefail
cd "$(dirname "$0")/.."
LEADERLOCK_PATRONI_FAILOVERS=${1:-10} LEADERLOCK_PATRONI_SWITCHOVERS=${2:-3} \
  ./scripts/test.sh --pg 15 --only client --test patroni 2>&1 | grep -E "Patroni \(ttl|^Ran|^OK|FAILED"
