#!/usr/bin/env bash
# `leaderlock console` on a database with many keys: sets up, builds the
# CLI, starts a throwaway cluster with leaderlock preloaded, runs
# bench/console.py. Arguments are passed on, e.g. --keys 1000000 --json
# FILE; --pg N (first) picks the PostgreSQL version.
set -euo pipefail
source "$(dirname "$0")/../scripts/lib.sh"
run_bench --cli console.py -- "$@"
