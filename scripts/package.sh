#!/usr/bin/env bash
# Binary tarballs of leaderlock, one per PostgreSQL major version:
#
#   ./scripts/package.sh                  every supported version
#   ./scripts/package.sh --pg 17          one (repeat --pg for more)
#   ./scripts/package.sh --out DIR        where to write them (default target/dist)
#
# Each is built with `cargo pgrx package` against that version's headers and
# holds leaderlock-VERSION-pgN-x86_64-linux/ with lib/leaderlock.so,
# extension/ (control file and SQL scripts) and install.sh, which copies them
# into the PostgreSQL whose pg_config it is given:
#
#   tar xzf leaderlock-0.3.0-pg17-x86_64-linux.tar.gz
#   sudo leaderlock-0.3.0-pg17-x86_64-linux/install.sh /path/to/pg_config
#
# A library built for one major version refuses to load into another
# (PostgreSQL checks the module magic), so pick the tarball of your server.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

VERSIONS=() OUT="$REPO_ROOT/target/dist"
while [ $# -gt 0 ]; do
  case "$1" in
    --pg) use_pg "$2"; VERSIONS+=("$2"); shift ;;
    --out) OUT=$2; shift ;;
    *) echo "usage: $0 [--pg N]... [--out DIR]" >&2; exit 2 ;;
  esac
  shift
done
[ "${#VERSIONS[@]}" -gt 0 ] || VERSIONS=("${PG_VERSIONS[@]}")
"$REPO_ROOT/scripts/setup.sh" >/dev/null
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
EXT_VERSION=$(sed -n 's/^version = "\(.*\)"/\1/p' "$REPO_ROOT/Cargo.toml" | head -n1)

package_version() {
  use_pg "$1"
  local name="leaderlock-$EXT_VERSION-pg$PG_MAJOR-x86_64-linux"
  local tmp staged
  tmp=$(mktemp -d)
  log "cargo pgrx package for PostgreSQL $PG_MAJOR"
  (cd "$REPO_ROOT" && cargo pgrx package --pg-config "$PG_CONFIG" --out-dir "$tmp/staged" >/dev/null)
  # cargo pgrx package lays files out under the build machine's own paths
  # (pkglibdir, sharedir); the tarball holds them relative, for any layout.
  staged=$tmp/staged
  mkdir -p "$tmp/$name/lib" "$tmp/$name/extension"
  cp "$staged$("$PG_CONFIG" --pkglibdir)/leaderlock.so" "$tmp/$name/lib/"
  cp "$staged$("$PG_CONFIG" --sharedir)"/extension/leaderlock* "$tmp/$name/extension/"
  cat >"$tmp/$name/install.sh" <<EOF
#!/bin/sh
# Installs leaderlock $EXT_VERSION into a PostgreSQL $PG_MAJOR: install.sh /path/to/pg_config
set -eu
PG_CONFIG=\${1:-pg_config}
here=\$(cd "\$(dirname "\$0")" && pwd)
major=\$("\$PG_CONFIG" --version | sed 's/^PostgreSQL \\([0-9]*\\).*/\\1/')
if [ "\$major" != "$PG_MAJOR" ]; then
  echo "this leaderlock build is for PostgreSQL $PG_MAJOR; \$PG_CONFIG is PostgreSQL \$major" >&2
  exit 1
fi
install -m 755 "\$here/lib/leaderlock.so" "\$("\$PG_CONFIG" --pkglibdir)/"
install -m 644 "\$here"/extension/* "\$("\$PG_CONFIG" --sharedir)/extension/"
echo "installed leaderlock $EXT_VERSION into \$("\$PG_CONFIG" --pkglibdir) and \$("\$PG_CONFIG" --sharedir)/extension"
echo "next: shared_preload_libraries = 'leaderlock' in postgresql.conf, restart, CREATE EXTENSION leaderlock;"
EOF
  chmod 755 "$tmp/$name/install.sh"
  tar -czf "$OUT/$name.tar.gz" -C "$tmp" "$name"
  rm -rf "$tmp"
  log "wrote $OUT/$name.tar.gz"
}

for v in "${VERSIONS[@]}"; do
  package_version "$v"
done
