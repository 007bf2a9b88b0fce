#!/usr/bin/env bash
# Two builds of the extension side by side (bench/builds.py): the one of
# git revision REV and the working tree's, each built (release) into its
# own copy of PostgreSQL N's relocatable tree, each copy serving a
# throwaway cluster (leaderlock preloaded, default settings, fsync on),
# both running at once.
#
#   ./bench/builds.sh --before REV [--pg N] [--swap] [builds.py options:
#                     --rounds 6 --seconds 5 --handovers 1000 --json FILE ...]
#
# --swap: the two clusters trade places (builds.py's first arm, "before",
# serves the working tree's build): a machine that favours one place shows
# in an A/A run (REV the working tree's own commit); the geometric mean of
# a run's ratio and the inverse of the swapped run's cancels it.
#
# N is 14, 16, 17 (default) or 18: PostgreSQL 15 is Debian's, one tree
# that cannot be copied.
set -euo pipefail
source "$(dirname "$0")/../scripts/lib.sh"
BEFORE=""
PG=17
SWAP=0
ARGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --before) BEFORE=$2; shift 2 ;;
    --pg) PG=$2; shift 2 ;;
    --swap) SWAP=1; shift ;;
    *) ARGS+=("$1"); shift ;;
  esac
done
[ -n "$BEFORE" ] || { echo "usage: $0 --before REV [--pg N] [builds.py options]" >&2; exit 2; }
[ "$PG" != 15 ] || { echo "PostgreSQL 15 is Debian's tree, which cannot be copied: --pg 14, 16, 17 or 18" >&2; exit 2; }
"$REPO_ROOT/scripts/setup.sh" >/dev/null
use_pg "$PG"
BEFORE_SHA=$(git -C "$REPO_ROOT" rev-parse --verify "$BEFORE^{commit}")
WORK=$(mktemp -d /tmp/leaderlock-builds.XXXXXX)
give_to_server "$WORK"
cleanup() {
  local arm
  for arm in before after; do stop_cluster "$WORK/data-$arm" immediate; done
  git -C "$REPO_ROOT" worktree remove --force "$WORK/src-before" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
git -C "$REPO_ROOT" worktree add --detach "$WORK/src-before" "$BEFORE_SHA" >/dev/null
declare -A PORTS
for arm in before after; do
  src=$REPO_ROOT
  [ "$arm" = after ] || src=$WORK/src-before
  tree=$WORK/pg-$arm
  cp -a "$(dirname "$PG_BIN")" "$tree"
  log "building $arm ($([ "$arm" = after ] && echo "the working tree" || echo "$BEFORE_SHA")) into a copy of PostgreSQL $PG"
  (
    # The revision before builds in a target directory of its own: cargo
    # tells path dependencies apart by their path relative to the
    # workspace, so the two trees would take each other's artifacts.
    [ "$arm" = after ] || export CARGO_TARGET_DIR=$WORK/target
    REPO_ROOT=$src
    PG_CONFIG=$tree/bin/pg_config
    EXT_VERSION=$(cargo_version "$src/Cargo.toml")
    stage_build "$WORK/stage-$arm"
  )
  "$WORK/stage-$arm/install.sh" "$tree/bin/pg_config" >/dev/null
  PORTS[$arm]=$(free_port)
  (PG_BIN=$tree/bin; start_cluster "$WORK/data-$arm" "${PORTS[$arm]}" "fsync = on")
  (PG_BIN=$tree/bin; psql_at "${PORTS[$arm]}" -d postgres -c "CREATE EXTENSION leaderlock")
done
if [ "$SWAP" = 1 ]; then
  /usr/bin/python3 "$REPO_ROOT/bench/builds.py" "${PORTS[after]}" "${PORTS[before]}" "${ARGS[@]}"
else
  /usr/bin/python3 "$REPO_ROOT/bench/builds.py" "${PORTS[before]}" "${PORTS[after]}" "${ARGS[@]}"
fi
