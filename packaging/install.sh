#!/bin/sh
# Installs leaderlock @VERSION@ into a PostgreSQL @PG_MAJOR@:
#
#   install.sh /path/to/pg_config
#
# (the files next to this script: lib/leaderlock.so and extension/*).
#
# Safe under a running server: each file is written beside its destination
# under a temporary name and then renamed over the old one. rename(2) is
# atomic: processes that have the old library mapped keep it, and one that
# loads it now gets the old file or the new one, never half of each.
# Writing into the old file instead (as cp or `cargo pgrx install` do)
# changes the code under every process that has it mapped, which crashes
# them and then the server.
#
# Safe in directories another user can write (on some systems PostgreSQL's
# belong to postgres, and root runs this): nothing is written through a
# link that user plants. Each file is created under a random name with
# O_EXCL (the shell's `>` under set -C: it fails if anything is there, a
# link included), written and given its mode (644, by the umask) through
# that one descriptor, and renamed with mv -T: rename(2) replaces a link at
# the destination, never follows it, and a directory there is an error,
# not a place to move the file into. Nothing names the new file again but
# the rename, so swapping it for a link once it exists gains nothing; a
# chmod or a second open by name would follow such a link. Hence the
# library's mode is 644 too, as in the Debian package (loading it needs
# only read). The directories themselves are PostgreSQL's, links to a
# directory included: each is entered once (cd -P) and used by relative names.
#
# The library goes first and the control file last, so that a session that
# sees the new default version also finds the library its scripts need.
set -eu
umask 022
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

# put FILE DIR: FILE (an absolute path) into DIR by rename, mode 644.
put() {
  name=$(basename "$1")
  if [ ! -d "$2" ]; then
    echo "$2 is not a directory" >&2
    exit 1
  fi
  cd -P "$2"
  new=$(mktemp -u ".$name.XXXXXXXXXX")
  set -C
  exec 3>"$new"
  set +C
  tmp=$new
  cat "$1" >&3
  exec 3>&-
  mv -fT "$tmp" "$name"
  tmp=
}

put "$here/lib/leaderlock.so" "$libdir"
for f in "$here"/extension/*.sql; do
  put "$f" "$extdir"
done
put "$here/extension/leaderlock.control" "$extdir"
echo "installed leaderlock @VERSION@ into $libdir and $extdir"
echo "next: shared_preload_libraries = 'leaderlock' in postgresql.conf, restart, CREATE EXTENSION leaderlock;"
echo "(a server running with it preloaded goes on with the library it started with, in every"
echo " process, new sessions included, until it is restarted; then ALTER EXTENSION leaderlock UPDATE)"
