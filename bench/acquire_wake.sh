#!/usr/bin/env bash
# Blocking acquire (contract 9): sets up, starts a throwaway cluster with
# leaderlock preloaded (default settings, fsync on, room for the waiters),
# runs bench/acquire_wake.py. Arguments are passed on, e.g. --handovers 1000
# --json FILE; --pg N (first) picks the PostgreSQL version.
set -euo pipefail
source "$(dirname "$0")/../scripts/lib.sh"
run_bench acquire_wake.py -- "$@"
