#!/usr/bin/env bash
# Regenerates tests/portable/sql/calendar.sql: the cases of cases.py
# answered by the compiled edition's calendar (main.rs builds
# crates/protocol/src/calendar.rs itself), for the portable suite's
# comparison (tests/portable/README.md). Run it after a change of
# calendar.rs, of the cron or chrono-tz versions, or of the cases, then
# tests/portable/run.sh --only regress (the expected output lists the
# differences: none). Builds offline into CARGO_TARGET_DIR (default
# /tmp/leaderlock-calendar-cases), with one job.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 "$HERE/cases.py" >"$work/cases.tsv"
cargo run --quiet --release --offline -j1 --manifest-path "$HERE/Cargo.toml" \
  --target-dir "${CARGO_TARGET_DIR:-/tmp/leaderlock-calendar-cases}" <"$work/cases.tsv" >"$work/answers.tsv"
python3 "$HERE/cases.py" "$work/answers.tsv" >"$HERE/../sql/calendar.sql"
echo "wrote $(grep -c . "$work/answers.tsv") cases to tests/portable/sql/calendar.sql"
