#!/usr/bin/env bash
# The package suite for one PostgreSQL version (scripts/test.sh calls it;
# lib.sh's use_pg has picked the version):
#
#   tests/package/run.sh install DIST   before the other suites: checks the
#       tarball and the Debian package scripts/package.sh wrote into DIST,
#       and installs the extension from the Debian package: on PostgreSQL 15
#       (Debian's own, as root) with apt-get; on the other versions (no
#       PGDG server package here) its files go into that version's tree by
#       the tarball's install.sh. On 18, first, the extension image: a
#       cluster loads everything from the unpacked image and passes
#       pg_regress's election and upgrade. Then the other suites run against
#       what was installed.
#   tests/package/run.sh after DIST     after them, on 15 as root: installs
#       under a running, busy server by every documented path
#       (test_live_install.py), the command-line tool's package, and
#       apt-get remove leaving no file behind.
set -euo pipefail
major=${PG_MAJOR:?}  # (lib.sh, when sourced, picks its default version)
source "$(dirname "$0")/../../scripts/lib.sh"
use_pg "$major"
what=$1 DIST=$2
VWORK=${LEADERLOCK_WORK:-$(mktemp -d)}
TARBALL=$DIST/leaderlock-$EXT_VERSION-pg$PG_MAJOR-x86_64-linux
DEB=$DIST/postgresql-$PG_MAJOR-leaderlock_${EXT_VERSION}-1_amd64.deb
fail() { log "FAILED: $*"; exit 1; }

# Debian's own PostgreSQL 15, where apt-get can install the package.
debian_pg15() {
  [ "$PG_MAJOR" = 15 ] && [ "$(id -u)" -eq 0 ] && [ "$PG_CONFIG" = /usr/lib/postgresql/15/bin/pg_config ] \
    && dpkg -s postgresql-15 >/dev/null 2>&1
}

check_tarball() {
  local f other
  tar -xzf "$TARBALL.tar.gz" -C "$DIST"
  for f in lib/leaderlock.so extension/leaderlock.control install.sh "extension/leaderlock--$EXT_VERSION.sql"; do
    [ -f "$TARBALL/$f" ] || fail "the tarball lacks $f"
  done
  # built against this version's headers: its magic block says so
  [[ $(nm -D "$TARBALL/lib/leaderlock.so") == *" T Pg_magic_func"* ]] || fail "no Pg_magic_func"
  other=$(pg_bin_of "$([ "$PG_MAJOR" = 15 ] && echo 16 || echo 15)")/pg_config
  if "$TARBALL/install.sh" "$other" >/dev/null 2>&1; then fail "install.sh accepted $other"; fi
}

# The package's name, fields and files: exactly the tarball's files where
# the PGDG packages put them (the directories Debian's pg_config of 15
# names, with this version's number).
check_deb() {
  local field want got f
  [ -f "$DEB" ] || fail "no $DEB"
  for field in "Package: postgresql-$PG_MAJOR-leaderlock" "Version: $EXT_VERSION-1" "Architecture: amd64"; do
    dpkg-deb -f "$DEB" | grep -qx "$field" || fail "$DEB: no '$field'"
  done
  dpkg-deb -f "$DEB" Depends | grep -q "^postgresql-$PG_MAJOR, libc6 (>= " || fail "Depends: $(dpkg-deb -f "$DEB" Depends)"
  want=$( { echo "./usr/lib/postgresql/$PG_MAJOR/lib/leaderlock.so"
            for f in "$TARBALL"/extension/*; do echo "./usr/share/postgresql/$PG_MAJOR/extension/${f##*/}"; done
            for f in changelog.Debian.gz changelog.gz copyright; do
              echo "./usr/share/doc/postgresql-$PG_MAJOR-leaderlock/$f"; done; } | sort)
  got=$(dpkg-deb -c "$DEB" | awk '$1 !~ /^d/ {print $6}' | sort)
  [ "$want" = "$got" ] || fail "$DEB holds $got; expected $want"
  [ "$(dirname "$(dirname "$(/usr/lib/postgresql/15/bin/pg_config --pkglibdir)")")" = /usr/lib/postgresql ] \
    || fail "Debian's pg_config no longer says /usr/lib/postgresql/15/lib"
  dpkg-deb --fsys-tarfile "$DEB" | tar -xOf - "./usr/lib/postgresql/$PG_MAJOR/lib/leaderlock.so" \
    | cmp -s - "$TARBALL/lib/leaderlock.so" || fail "the package's library is not the tarball's"
}

# The extension image on 18: everything from the unpacked image, nothing
# from the tree.
check_image() {
  local oci=$VWORK/image root=$VWORK/image-root port data=$VWORK/image-cluster
  rm -rf "$oci" "$root" "$data" && mkdir -p "$oci"
  tar -xf "$DIST/leaderlock-$EXT_VERSION-pg18-oci.tar" -C "$oci"
  umoci raw unpack --image "$oci:$EXT_VERSION-18-bookworm" "$root" >/dev/null 2>&1 || fail "umoci unpack"
  want=$(printf '%s\n' lib/leaderlock.so licenses/leaderlock/copyright share/extension/leaderlock.control \
         $(cd "$TARBALL" && ls extension/*.sql | sed 's|^|share/|') | sort)
  got=$(cd "$root" && find . -type f | sed 's|^\./||' | sort)
  [ "$want" = "$got" ] || fail "the image holds $got"
  # The pg_regress upgrade test starts from released versions' scripts.
  cp "$REPO_ROOT"/sql/released/*.sql "$root/share/extension/"
  chmod -R a+rX "$root"
  # Nothing of leaderlock in the tree: all of it must come from the image.
  rm -f "$("$PG_CONFIG" --pkglibdir)/leaderlock.so" "$("$PG_CONFIG" --sharedir)"/extension/leaderlock*
  port=$(free_port)
  start_cluster "$data" "$port" "extension_control_path = '\$system:$root/share'" \
    "dynamic_library_path = '\$libdir:$root/lib'" "leaderlock.databases = 'postgres'"
  grep -q " $root/lib/leaderlock.so$" "/proc/$(head -n1 "$data/postmaster.pid")/maps" \
    || { stop_cluster "$data"; fail "the postmaster did not preload the image's library"; }
  psql_at "$port" -d postgres -c "CREATE EXTENSION leaderlock" >/dev/null
  # pg_regress's files that load what the image brings: the current script
  # and the library every call runs (election), every update script
  # (upgrade). The image is made from the tarball, whose library is the
  # Debian package's byte for byte (check_deb), and the whole schedule runs
  # against that next: on the image too, it took 25 s more for the same
  # answers.
  as_postgres "$(pgxs_test_dir)/regress/pg_regress" --bindir="$PG_BIN" --host=127.0.0.1 --port="$port" \
    --user=postgres --inputdir="$REPO_ROOT/tests/pg_regress" --outputdir="$VWORK/image-regress" \
    --dbname=leaderlock_pg_regress --load-extension=leaderlock election upgrade \
    || { cat "$VWORK/image-regress/regression.diffs" 2>/dev/null; stop_cluster "$data"; fail "pg_regress on the image"; }
  stop_cluster "$data"
  log "PostgreSQL 18 with extension_control_path and dynamic_library_path on the unpacked image: preloaded, pg_regress's election and upgrade passed"
}

install_from_deb() {
  local root=$VWORK/deb-root f
  if debian_pg15; then
    apt-get install -y -q --reinstall "$DEB" >/dev/null || fail "apt-get install $DEB"
    dpkg -L "postgresql-$PG_MAJOR-leaderlock" | while read -r f; do
      [ -e "$f" ] || fail "$f, of the package, is missing"; done
    log "installed $(basename "$DEB") with apt-get"
  else
    # No PGDG server package here: the package's own files go into this
    # version's tree, as the tarball's install.sh puts them.
    rm -rf "$root" && mkdir -p "$root"
    dpkg-deb -x "$DEB" "$root"
    cp "$root/usr/lib/postgresql/$PG_MAJOR/lib/leaderlock.so" "$TARBALL/lib/"
    cp "$root/usr/share/postgresql/$PG_MAJOR"/extension/* "$TARBALL/extension/"
    "$TARBALL/install.sh" "$PG_CONFIG" >/dev/null
    log "installed the files of $(basename "$DEB") into $(dirname "$PG_BIN")"
  fi
}

after() {
  debian_pg15 || { log "nothing to do after the suites on PostgreSQL $PG_MAJOR"; return 0; }
  local package=postgresql-$PG_MAJOR-leaderlock files f cli
  (cd "$REPO_ROOT/tests/package" && LEADERLOCK_DIST=$DIST LEADERLOCK_DEB=$DEB \
     LEADERLOCK_TARBALL=$TARBALL PG_CONFIG=$PG_CONFIG /usr/bin/python3 -m unittest -v test_live_install) \
    || fail "installs under a running server"
  files=$(dpkg -L "$package" | while read -r f; do [ -d "$f" ] || echo "$f"; done)
  apt-get remove -y -q "$package" >/dev/null || fail "apt-get remove"
  for f in $files; do [ ! -e "$f" ] || fail "apt-get remove left $f"; done
  log "apt-get remove $package: none of its $(echo "$files" | wc -l) files left"
  # the command-line tool's package
  cli=$(ls "$DIST"/leaderlock-cli_*_amd64.deb)
  apt-get install -y -q --reinstall "$cli" >/dev/null || fail "apt-get install $cli"
  /usr/bin/leaderlock --version | grep -q "^leaderlock " || fail "leaderlock --version"
  for f in leaderlock leaderlock-run leaderlock-status leaderlock-watch; do
    [ -f "/usr/share/man/man1/$f.1.gz" ] || fail "no man page $f(1)"
  done
  zcat /usr/share/man/man1/leaderlock-run.1.gz | grep -qF '\-\-ttl' || fail "leaderlock-run(1) does not describe --ttl"
  files=$(dpkg -L leaderlock-cli | while read -r f; do [ -d "$f" ] || echo "$f"; done)
  apt-get remove -y -q leaderlock-cli >/dev/null || fail "apt-get remove leaderlock-cli"
  for f in $files; do [ ! -e "$f" ] || fail "apt-get remove left $f"; done
  log "$(basename "$cli"): installed, leaderlock --version and its man pages; removed without a trace"
}

case "$what" in
  install)
    check_tarball
    check_deb
    [ "$PG_MAJOR" != 18 ] || check_image
    install_from_deb ;;
  after) after ;;
  *) echo "usage: $0 install|after DIST" >&2; exit 2 ;;
esac
