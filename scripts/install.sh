#!/usr/bin/env bash
# From source: builds leaderlock for the PostgreSQL whose pg_config you give
# and installs it there by rename, as the tarball's install.sh does, so it is
# safe under a running server that has the library loaded (`cargo pgrx
# install` writes into the old file, which crashes such a server):
#
#   ./scripts/install.sh /usr/lib/postgresql/17/bin/pg_config
#   ./scripts/install.sh PG_CONFIG --debug      a debug build
#
# Needs cargo-pgrx and that version's server headers (./scripts/setup.sh
# installs cargo-pgrx; Debian's postgresql-server-dev-N has the headers).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
[ $# -ge 1 ] && [ -x "$1" ] || { echo "usage: $0 /path/to/pg_config [--debug]" >&2; exit 2; }
PG_CONFIG=$1
PG_MAJOR=$(pg_config_major "$PG_CONFIG")
PROFILE=release
[ "${2:-}" != --debug ] || PROFILE=dev
command -v cargo-pgrx >/dev/null || { echo "cargo-pgrx is missing: run ./scripts/setup.sh" >&2; exit 2; }
PROFILE=$PROFILE install_extension
log "installed into $("$PG_CONFIG" --pkglibdir) and $("$PG_CONFIG" --sharedir)/extension"
