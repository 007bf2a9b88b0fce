#!/usr/bin/env bash
# `leaderlock status` on a database with many leases: sets up, builds the
# CLI, starts a throwaway cluster with leaderlock preloaded (default
# settings, fsync on), runs bench/cli_status.py. Arguments are passed on,
# e.g. --keys 10000 --json FILE; --pg N (first) picks the PostgreSQL version.
set -euo pipefail
source "$(dirname "$0")/../scripts/lib.sh"
run_bench --cli cli_status.py -- "$@"
