#!/usr/bin/env bash
# Packages of leaderlock, in target/dist/ (or --out DIR):
#
#   ./scripts/package.sh                  every supported PostgreSQL version
#   ./scripts/package.sh --pg 17          one (repeat --pg for more)
#   ./scripts/package.sh --no-cli         without the command-line tool's package
#
# For each PostgreSQL major version N:
#   postgresql-N-leaderlock_VERSION-1_amd64.deb   the Debian package, named and
#       laid out as the PostgreSQL project's apt repository (PGDG) does:
#       /usr/lib/postgresql/N/lib/leaderlock.so and
#       /usr/share/postgresql/N/extension/, Depends: postgresql-N;
#   leaderlock-VERSION-pgN-x86_64-linux.tar.gz    lib/, extension/ and
#       install.sh, which installs them into any PostgreSQL N by rename:
#       tar xzf leaderlock-VERSION-pgN-x86_64-linux.tar.gz
#       sudo leaderlock-VERSION-pgN-x86_64-linux/install.sh /path/to/pg_config
#   for N = 18 also leaderlock-VERSION-pg18-oci.tar: an OCI image holding only
#       the extension's files, for CloudNativePG's image volumes
#       (scripts/image.sh; docs/packages.md).
# And once: leaderlock-cli_CLIVERSION-1_amd64.deb, /usr/bin/leaderlock with
# its man pages (generated from its own --help).
#
# The Debian packages are made with dpkg-deb (Debian's own tool, already on
# every Debian machine) around what `cargo pgrx package` builds: cargo-deb
# packs one Cargo binary from Cargo metadata and knows nothing of a
# PostgreSQL extension's per-version paths. A library built for one major
# version refuses to load into another (PostgreSQL checks the module magic),
# so pick the package of your server's version.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

VERSIONS=() OUT="$REPO_ROOT/target/dist" CLI=1
while [ $# -gt 0 ]; do
  case "$1" in
    --pg) use_pg "$2"; VERSIONS+=("$2"); shift ;;
    --out) OUT=$2; shift ;;
    --no-cli) CLI= ;;
    *) echo "usage: $0 [--pg N]... [--out DIR] [--no-cli]" >&2; exit 2 ;;
  esac
  shift
done
[ "${#VERSIONS[@]}" -gt 0 ] || VERSIONS=("${PG_VERSIONS[@]}")
"$REPO_ROOT/scripts/setup.sh" >/dev/null
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
# Who answers for the packages: set it when you publish them.
MAINTAINER=${DEB_MAINTAINER:-leaderlock developers <packages@leaderlock.invalid>}
# A fixed time for every file and the changelog: the same sources give the
# same packages (the last commit's time, else the Cargo.toml's). Given only
# to the packing tools: cargo would rebuild everything for a changed
# SOURCE_DATE_EPOCH (a C build script tracks it).
EPOCH=${SOURCE_DATE_EPOCH:-$(git -C "$REPO_ROOT" log -1 --format=%ct 2>/dev/null \
  || stat -c %Y "$REPO_ROOT/Cargo.toml")}

# shlibs FILE: the Depends dpkg-shlibdeps derives from FILE's libraries.
shlibs() {
  local dir
  dir=$(mktemp -d)
  mkdir "$dir/debian"
  printf 'Source: leaderlock\n\nPackage: leaderlock\nArchitecture: any\n' >"$dir/debian/control"
  (cd "$dir" && dpkg-shlibdeps -O -e "$1" 2>/dev/null) | sed -n 's/^shlibs:Depends=//p'
  rm -rf "$dir"
}

# build_deb ROOT PACKAGE VERSION DEPENDS SUMMARY DESCRIPTION: ROOT (files
# laid out as installed) with its documentation and DEBIAN/ into OUT.
build_deb() {
  local root=$1 package=$2 version=$3 depends=$4 summary=$5 description=$6
  local doc=$root/usr/share/doc/$package
  mkdir -p "$doc" "$root/DEBIAN"
  { printf 'Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n'
    printf 'Upstream-Name: leaderlock\n\nFiles: *\nCopyright: 2026, the leaderlock developers\n'
    printf 'License: PostgreSQL\n'
    sed -e 's/^$/./' -e 's/^/ /' "$REPO_ROOT/LICENSE"; } >"$doc/copyright"
  gzip -9n <"$REPO_ROOT/CHANGELOG.md" >"$doc/changelog.gz"
  printf '%s (%s) unstable; urgency=medium\n\n  * Built from the leaderlock sources (changelog.gz: what each release brought).\n\n -- %s  %s\n' \
    "$package" "$version" "$MAINTAINER" "$(date -u -R -d "@$EPOCH")" | gzip -9n >"$doc/changelog.Debian.gz"
  chmod 644 "$doc"/*
  (cd "$root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum) \
    >"$root/DEBIAN/md5sums"
  cat >"$root/DEBIAN/control" <<EOF
Package: $package
Source: leaderlock
Version: $version
Architecture: amd64
Maintainer: $MAINTAINER
Installed-Size: $(du -sk --exclude=DEBIAN "$root" | cut -f1)
Depends: $depends
Section: database
Priority: optional
Description: $summary
$(printf '%s\n' "$description" | fold -s -w 72 | sed -e 's/ *$//' -e 's/^/ /')
EOF
  find "$root" -exec touch -h -d "@$EPOCH" {} +
  SOURCE_DATE_EPOCH=$EPOCH dpkg-deb --root-owner-group -Zxz --build "$root" "$OUT/${package}_${version}_amd64.deb" >/dev/null
  log "wrote $OUT/${package}_${version}_amd64.deb"
}

package_version() {
  use_pg "$1"
  local name="leaderlock-$EXT_VERSION-pg$PG_MAJOR-x86_64-linux" tmp root package
  tmp=$(mktemp -d)
  log "cargo pgrx package for PostgreSQL $PG_MAJOR"
  stage_build "$tmp/$name"
  tar -czf "$OUT/$name.tar.gz" --owner=0 --group=0 --mtime="@$EPOCH" -C "$tmp" "$name"
  log "wrote $OUT/$name.tar.gz"

  package=postgresql-$PG_MAJOR-leaderlock
  root=$tmp/deb
  mkdir -p "$root/usr/lib/postgresql/$PG_MAJOR/lib" "$root/usr/share/postgresql/$PG_MAJOR/extension"
  install -m 644 "$tmp/$name/lib/leaderlock.so" "$root/usr/lib/postgresql/$PG_MAJOR/lib/"
  install -m 644 "$tmp/$name"/extension/* "$root/usr/share/postgresql/$PG_MAJOR/extension/"
  build_deb "$root" "$package" "$EXT_VERSION-1" \
    "postgresql-$PG_MAJOR, $(shlibs "$tmp/$name/lib/leaderlock.so")" \
    "leader election inside PostgreSQL $PG_MAJOR" \
    "leaderlock turns a PostgreSQL database into a leader-election service: leases with fencing terms that never go back, LISTEN/NOTIFY announcements, and background workers that expire dead leaders' leases. Add 'leaderlock' to shared_preload_libraries, restart, and CREATE EXTENSION leaderlock. This package is for PostgreSQL $PG_MAJOR."

  if [ "$PG_MAJOR" = 18 ]; then
    SOURCE_DATE_EPOCH=$EPOCH "$REPO_ROOT/scripts/image.sh" "$tmp/$name" "$OUT"
  fi
  rm -rf "$tmp"
}

package_cli() {
  local tmp version
  build_cli
  version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$REPO_ROOT/crates/cli/Cargo.toml" | head -n1)
  tmp=$(mktemp -d)
  mkdir -p "$tmp/usr/bin" "$tmp/usr/share/man/man1"
  install -m 755 "$CLI_BIN" "$tmp/usr/bin/leaderlock"
  "$CLI_BIN" __man "$tmp/usr/share/man/man1"
  gzip -9n "$tmp"/usr/share/man/man1/*.1
  chmod 644 "$tmp"/usr/share/man/man1/*
  build_deb "$tmp" leaderlock-cli "$version-1" "$(shlibs "$CLI_BIN")" \
    "run a command only while it leads a leaderlock election" \
    "leaderlock run -- cmd runs cmd only while this process holds a leaderlock lease in PostgreSQL, renews the lease, and stops cmd at its local deadline if the lease cannot be renewed; leaderlock status and leaderlock watch show leases and their announcements. Needs a PostgreSQL server with the leaderlock extension (postgresql-N-leaderlock) somewhere it can reach."
  rm -rf "$tmp"
}

for v in "${VERSIONS[@]}"; do
  package_version "$v"
done
[ -z "$CLI" ] || package_cli
