#!/usr/bin/env bash
# Session-bound leases (contract 10): sets up, starts a throwaway cluster with
# leaderlock preloaded (default settings, fsync on),
# runs bench/session_end.py. Arguments are passed on, e.g. --rounds 200
# --json FILE; --pg N (first) picks the PostgreSQL version.
set -euo pipefail
source "$(dirname "$0")/../scripts/lib.sh"
run_bench session_end.py -- "$@"
