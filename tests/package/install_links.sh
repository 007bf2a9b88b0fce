#!/usr/bin/env bash
# The tarball's installer (packaging/install.sh) against links planted by the
# user who owns the directories it writes (security issue 35): run as root,
# directories owned by postgres stand in for pkglibdir and
# sharedir/extension (a pg_config of this test's own names them; pkglibdir
# through a link to a directory, as some distributions have it). Before
# install.sh runs, postgres plants links to a file only root can read
# (mode 600) and to a directory only root can write:
#   - at the temporary names an installer writing .FILE.new.$$ would use
#     (install.sh is started waiting on a FIFO, so its PID is known first);
#   - at the final names (leaderlock.so, an SQL script, the control file).
# Passes if the file and the directory are untouched, every installed file
# is a regular file with the tarball's content and mode 644, nothing else
# is left in the directories, and a second install (an upgrade) renames
# over the first one's files rather than writing into them (what keeps a
# running server's mapped library intact). Not root: the same, with the
# links planted by yourself. No PostgreSQL, no build; about a second.
#
#   tests/package/install_links.sh [INSTALL_SH]   (default: packaging/install.sh)
set -euo pipefail
REPO_ROOT=$(cd "$(dirname "$0")/../.." && pwd)
INSTALL_SH=$(readlink -f "${1:-$REPO_ROOT/packaging/install.sh}")
FAILED=0
fail() { echo "FAILED: $*" >&2; FAILED=1; }

work=$(mktemp -d /tmp/leaderlock-install-links.XXXXXX)
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"  # the planter reaches the directories below it
if [ "$(id -u)" -eq 0 ]; then
  planter=postgres
  id "$planter" >/dev/null 2>&1 || planter=nobody
  as_planter() { sudo -u "$planter" -- "$@"; }
else
  planter=$(id -un)
  as_planter() { "$@"; }
fi

# What PostgreSQL's directories would be: pkglibdir is a link to the real
# directory; both directories belong to the planter.
lib=$work/pg/lib ext=$work/pg/share/extension
mkdir -p "$lib" "$ext"
ln -s lib "$work/pg/liblink"
chown "$planter" "$lib" "$ext"
cat >"$work/pg_config" <<EOF
#!/bin/sh
case \$1 in
  --version) echo "PostgreSQL 15.99" ;;
  --pkglibdir) echo "$work/pg/liblink" ;;
  --sharedir) echo "$work/pg/share" ;;
  *) exit 1 ;;
esac
EOF
chmod 755 "$work/pg_config"

# What the links point at: a file only its owner can read, a directory only
# its owner can write.
secret=$work/secret secretdir=$work/secretdir
printf 'only root reads this\n' >"$secret"
chmod 600 "$secret"
cp -p "$secret" "$work/secret.orig"
mkdir -m 700 "$secretdir"

# tarball N: a tarball's layout (what stage_build lays out), version N's content.
files=(lib/leaderlock.so extension/leaderlock--1.0.sql extension/leaderlock--0.9--1.0.sql extension/leaderlock.control)
tarball() {
  local t=$work/tarball$1 f
  mkdir -p "$t/lib" "$t/extension"
  for f in "${files[@]}"; do
    { printf 'version %s of %s\n' "$1" "$f"; head -c 4096 /dev/urandom; } >"$t/$f"
    chmod 600 "$t/$f"  # its mode is install.sh's, not the tarball's
  done
  sed -e 's/@VERSION@/0.0.0-test/g' -e 's/@PG_MAJOR@/15/g' "$INSTALL_SH" >"$t/install.sh"
  chmod 755 "$t/install.sh"
}

# installed F: the path F (lib/... or extension/...) is installed at.
installed() {
  case $1 in
    lib/*) echo "$lib/${1#lib/}" ;;
    extension/*) echo "$ext/${1#extension/}" ;;
  esac
}

# install N: runs tarball N's install.sh as root, with links planted at the
# temporary names its PID gives. Fails the test if it fails.
install() {
  local t=$work/tarball$1 pid f links=()
  rm -f "$work/go"
  mkfifo "$work/go"
  # (umask 077: the modes installed must not depend on the caller's)
  (umask 077; read -r _ <"$work/go"; exec "$t/install.sh" "$work/pg_config") >"$work/install.log" 2>&1 &
  pid=$!
  for f in "${files[@]}"; do
    links+=("$(dirname "$(installed "$f")")/.$(basename "$f").new.$pid")
  done
  as_planter sh -c 'for l; do ln -s "$0" "$l"; done' "$secret" "${links[@]}"
  echo go >"$work/go"
  if ! wait "$pid"; then
    fail "install.sh (tarball $1) failed: $(cat "$work/install.log")"
  fi
  PLANTED+=("${links[@]}")
}

PLANTED=()
tarball 1
tarball 2
# Links at the final names: to the file, and to the directory (into which
# mv without -T would move the new file).
as_planter ln -s "$secret" "$lib/leaderlock.so"
as_planter ln -s "$secretdir" "$ext/leaderlock--1.0.sql"
as_planter ln -s "$secretdir" "$ext/leaderlock.control"
install 1
# the first install's library, by another name: an upgrade must not write into it
ln "$lib/leaderlock.so" "$work/old.so" 2>/dev/null || fail "leaderlock.so is not in $lib after the first install"
install 2

if [ -L "$secret" ] || ! cmp -s "$secret" "$work/secret.orig"; then
  fail "the private file $secret was written through a link"
fi
[ "$(stat -c '%a %U' "$secret")" = "600 $(id -un)" ] || fail "the private file is now $(stat -c '%a %U' "$secret")"
[ -z "$(ls -A "$secretdir")" ] || fail "files were moved into the private directory: $(ls -A "$secretdir")"
for f in "${files[@]}"; do
  i=$(installed "$f")
  if [ -L "$i" ] || [ ! -f "$i" ]; then
    fail "$i is not a regular file: $(ls -ld "$i" 2>&1)"
  elif ! cmp -s "$i" "$work/tarball2/$f"; then
    fail "$i does not hold the tarball's $f"
  elif [ "$(stat -c %a "$i")" != 644 ]; then
    fail "$i has mode $(stat -c %a "$i"), not 644"
  fi
done
if [ -f "$work/old.so" ] && ! cmp -s "$work/old.so" "$work/tarball1/lib/leaderlock.so"; then
  fail "the upgrade wrote into the installed library instead of renaming over it"
fi
# Nothing left behind but the installed files and the planted links.
want=$( { for f in "${files[@]}"; do installed "$f"; done; printf '%s\n' "${PLANTED[@]}"; } | sort)
got=$(find "$lib" "$ext" -mindepth 1 | sort)
[ "$want" = "$got" ] || fail "the directories hold $(echo; echo "$got"); expected $(echo; echo "$want")"

if [ "$FAILED" -ne 0 ]; then
  echo "install.sh ($INSTALL_SH) follows links planted by $planter" >&2
  exit 1
fi
echo "install.sh writes through no link planted by $planter (as $(id -un)): passed"
