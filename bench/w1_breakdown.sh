#!/usr/bin/env bash
# W1 breakdown: sets up, starts a throwaway cluster with
# leaderlock preloaded (default settings, fsync on),
# runs bench/w1_breakdown.py. Arguments are passed on, e.g. --clients 8
# --seconds 10 --rounds 3; --pg N (first) picks the PostgreSQL version.
set -euo pipefail
source "$(dirname "$0")/../scripts/lib.sh"
run_bench w1_breakdown.py -- "$@"
