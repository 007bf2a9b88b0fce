#!/bin/sh
# Installs leaderlock @VERSION@ into a PostgreSQL @PG_MAJOR@:
#
#   install.sh /path/to/pg_config
#
# (the files next to this script: lib/leaderlock.so and extension/*).
#
# Safe under a running server: each file is copied beside its destination
# under a temporary name and then renamed over the old one. rename(2) is
# atomic: processes that have the old library mapped keep it, and one that
# loads it now gets the old file or the new one, never half of each.
# Writing into the old file instead (as cp or `cargo pgrx install` do)
# changes the code under every process that has it mapped, which crashes
# them and then the server.
#
# The library goes first and the control file last, so that a session that
# sees the new default version also finds the library its scripts need.
set -eu
PG_CONFIG=${1:-pg_config}
here=$(cd "$(dirname "$0")" && pwd)
major=$("$PG_CONFIG" --version | sed 's/^PostgreSQL \([0-9]*\).*/\1/')
if [ "$major" != "@PG_MAJOR@" ]; then
  echo "this leaderlock build is for PostgreSQL @PG_MAJOR@; $PG_CONFIG is PostgreSQL $major" >&2
  exit 1
fi
libdir=$("$PG_CONFIG" --pkglibdir)
extdir=$("$PG_CONFIG" --sharedir)/extension
tmp=
trap '[ -z "$tmp" ] || rm -f "$tmp"' EXIT

# put FILE DIR MODE: FILE into DIR by rename.
put() {
  tmp=$2/.$(basename "$1").new.$$
  cp "$1" "$tmp"
  chmod "$3" "$tmp"
  mv -f "$tmp" "$2/$(basename "$1")"
  tmp=
}

put "$here/lib/leaderlock.so" "$libdir" 755
for f in "$here"/extension/*.sql; do
  put "$f" "$extdir" 644
done
put "$here/extension/leaderlock.control" "$extdir" 644
echo "installed leaderlock @VERSION@ into $libdir and $extdir"
echo "next: shared_preload_libraries = 'leaderlock' in postgresql.conf, restart, CREATE EXTENSION leaderlock;"
echo "(a server running with it preloaded goes on with the library it started with, in every"
echo " process, new sessions included, until it is restarted; then ALTER EXTENSION leaderlock UPDATE)"
