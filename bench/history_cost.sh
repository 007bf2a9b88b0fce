#!/usr/bin/env bash
# What the history of transitions (contract 23) costs: W1 (renewals) and
# W4 (hand-overs) with the history recording and without it, alternating,
# on one throwaway cluster (leaderlock preloaded, default settings, fsync
# on); runs bench/history_cost.py. Arguments are passed on, e.g. --rounds 5
# --json FILE; --pg N (first) picks the PostgreSQL version.
set -euo pipefail
source "$(dirname "$0")/../scripts/lib.sh"
run_bench history_cost.py -- "$@"
