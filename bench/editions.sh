#!/usr/bin/env bash
# The compiled and the portable edition side by side in one run (renew,
# contended try-acquire, handover, failover after kill -9): sets up, builds
# the CLI, starts a throwaway cluster with leaderlock preloaded (default
# settings, fsync on), runs bench/editions.py. Arguments are passed on,
# e.g. --rounds 5 --json FILE; --pg N (first) picks the PostgreSQL version.
set -euo pipefail
source "$(dirname "$0")/../scripts/lib.sh"
run_bench --cli editions.py -- "$@"
