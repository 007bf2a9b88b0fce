#!/usr/bin/env bash
# The test command as a contributor runs it: not root, on a machine root set
# up once, against a PostgreSQL of their own (--pg-config). Run by root (the
# test command's `contributor` suite): makes the user leaderlock-contrib with
# the toolchain root uses (hard links, nothing downloaded) and a copy of
# PostgreSQL $PG_MAJOR's tree it owns, copies this work tree, and runs
#   ./scripts/test.sh --pg-config ~/pg/bin/pg_config --only pg_regress,isolation --test acquire
# as that user, with each suite's file named acquire: what a contributor's
# run adds is the build, the install into a tree of its own, a cluster run
# as itself and the suites' runners; every file of both suites runs on
# PostgreSQL 16 in the test command itself, from the same sources built
# with the same profile (all of them here again took 35 s: the same SQL
# against the same server). Then one pg_regress file again, timed.
set -euo pipefail
source "$(dirname "$0")/../../scripts/lib.sh"

[ "$(id -u)" -eq 0 ] || { echo "tests/contributor/run.sh makes a user: run it as root" >&2; exit 2; }
user=leaderlock-contrib
id "$user" >/dev/null 2>&1 || useradd --create-home --shell /bin/bash "$user"
home=$(getent passwd "$user" | cut -d: -f6)

# The toolchain and cargo-pgrx root uses, hard-linked (root keeps owning them).
sysroot=$(rustc --print sysroot)
if [ "$(cat "$home/rust/.from" 2>/dev/null)" != "$sysroot $(rustc --version)" ]; then
  rm -rf "$home/rust"
  cp -al "$sysroot" "$home/rust"
  echo "$sysroot $(rustc --version)" >"$home/rust/.from"
fi
install -D -m 755 "$(command -v cargo-pgrx)" "$home/bin/cargo-pgrx"

# A PostgreSQL of its own, and this work tree (tracked and new files, as
# they are now; not target/).
rm -rf "$home/pg" "$home/leaderlock"
cp -a "$(dirname "$PG_BIN")" "$home/pg"
mkdir "$home/leaderlock"
(cd "$REPO_ROOT" && git ls-files -z --cached --others --exclude-standard) \
  | (cd "$REPO_ROOT" && tar --null -T - -cf - 2>/dev/null) | tar -xf - -C "$home/leaderlock"
chown -R "$user:" "$home/pg" "$home/leaderlock" "$home/bin"
[ -d "$home/target" ] || install -d -o "$user" "$home/target"

as_contributor() {
  (cd "$home/leaderlock" && sudo -u "$user" -H -- env PATH="$home/rust/bin:$home/bin:/usr/bin:/bin" \
    CARGO_TARGET_DIR="$home/target" "$@")
}
as_contributor ./scripts/test.sh --pg-config "$home/pg/bin/pg_config" --only pg_regress,isolation --test acquire
t0=$(date +%s.%N)
as_contributor ./scripts/test.sh --pg-config "$home/pg/bin/pg_config" --only pg_regress --test election
log "a contributor's run of one pg_regress file (election), build up to date: \
$(python3 -c "import sys; print(round(float(sys.argv[2]) - float(sys.argv[1]), 1))" "$t0" "$(date +%s.%N)") s"
