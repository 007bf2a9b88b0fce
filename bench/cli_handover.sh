#!/usr/bin/env bash
# Handover between two `leaderlock run` processes: sets up, builds the CLI,
# starts a throwaway cluster with leaderlock preloaded (default settings,
# fsync on), runs bench/cli_handover.py. Arguments are passed on, e.g.
# --rounds 200 --json FILE; --pg N (first) picks the PostgreSQL version.
set -euo pipefail
source "$(dirname "$0")/../scripts/lib.sh"
run_bench --cli cli_handover.py -- "$@"
