#!/bin/sh
# Prints the SQL that installs the portable edition through pg_tle (Trusted
# Language Extensions, e.g. on Amazon RDS and Aurora, where no file can be
# placed): run it as a member of pgtle_admin, then, in each database,
# CREATE EXTENSION leaderlock;
#     portable/make-pgtle.sh > leaderlock-pgtle.sql && psql -f leaderlock-pgtle.sql
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
VERSION=$(sed -n "s/^default_version = '\(.*\)'/\1/p" "$HERE/leaderlock.control")
if grep -q '\$_pgtle_\$' "$HERE/leaderlock.sql"; then
  echo "leaderlock.sql contains \$_pgtle_\$" >&2; exit 1
fi
printf "SELECT pgtle.install_extension(\n  'leaderlock',\n  '%s',\n  'Leader election: leases with fencing terms, LISTEN/NOTIFY announcements (portable edition)',\n\$_pgtle_\$\n" "$VERSION"
cat "$HERE/leaderlock.sql"
printf '$_pgtle_$,\n  ARRAY['"'"'plpgsql'"'"']\n);\n'
