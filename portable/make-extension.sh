#!/bin/sh
# Writes the portable edition as extension files into DIR (default: the
# extension directory of the pg_config on PATH, i.e. `pg_config
# --sharedir`/extension): leaderlock.control and
# leaderlock--0.5.0-portable.sql, the same SQL as leaderlock.sql.
# Then, in a database: CREATE EXTENSION leaderlock;   (no superuser needed)
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
VERSION=$(sed -n "s/^default_version = '\(.*\)'/\1/p" "$HERE/leaderlock.control")
DIR=${1:-$(pg_config --sharedir)/extension}
mkdir -p "$DIR"
cp "$HERE/leaderlock.control" "$DIR/leaderlock.control"
cp "$HERE/leaderlock.sql" "$DIR/leaderlock--$VERSION.sql"
echo "$DIR/leaderlock.control, $DIR/leaderlock--$VERSION.sql"
