#!/usr/bin/env bash
# Scheduled runs (contract 22): claim+finish throughput and the delay from
# due instant to start with five `leaderlock run --every` replicas, side by
# side with a ShedLock-style recipe. Sets up, builds the CLI, starts a
# throwaway cluster with leaderlock preloaded (default settings, fsync on),
# runs bench/runs.py. Arguments are passed on, e.g. --slots 120 --json
# FILE; --pg N (first) picks the PostgreSQL version.
set -euo pipefail
source "$(dirname "$0")/../scripts/lib.sh"
run_bench --cli runs.py -- "$@"
