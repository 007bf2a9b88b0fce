#!/usr/bin/env bash
# One idempotent setup path for a fresh Debian 12 machine, run as root:
# Debian packages, cargo-pgrx (pinned), and `cargo pgrx init` for PostgreSQL 15.
# Safe to run any number of times; each step is skipped when already done.
set -euo pipefail

PGRX_VERSION=0.18.1
PG_MAJOR=15
PG_BIN=/usr/lib/postgresql/${PG_MAJOR}/bin
PACKAGES=(
  "postgresql-${PG_MAJOR}" "postgresql-server-dev-${PG_MAJOR}" "postgresql-contrib"
  libclang-dev clang pkg-config sudo build-essential
  # client test harness, demo and benchmark chart (Debian's own, pinned by the release)
  python3 python3-psycopg2 python3-matplotlib
)

log() { printf '[setup] %s\n' "$*"; }

if [ "$(id -u)" -ne 0 ]; then
  echo "scripts/setup.sh must run as root (it installs Debian packages)" >&2
  exit 1
fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  log "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  log "Debian packages already installed"
fi

# Debian's postgresql-common starts a 15/main cluster on install; we never use it.
if command -v pg_lsclusters >/dev/null && pg_lsclusters -h 2>/dev/null | grep -q online; then
  log "note: a Debian cluster is running; leaderlock tests use their own clusters and ports"
fi

export PATH="$HOME/.cargo/bin:$PATH"
if ! command -v cargo >/dev/null; then
  echo "cargo not found: install the Rust toolchain (1.95) first" >&2
  exit 1
fi

if [ "$(cargo pgrx --version 2>/dev/null || true)" = "cargo-pgrx ${PGRX_VERSION}" ]; then
  log "cargo-pgrx ${PGRX_VERSION} already installed"
else
  log "installing cargo-pgrx ${PGRX_VERSION} (takes several minutes)"
  cargo install cargo-pgrx --version "${PGRX_VERSION}" --locked
fi

PGRX_HOME="${PGRX_HOME:-$HOME/.pgrx}"
if grep -qs "^pg${PG_MAJOR} = \"${PG_BIN}/pg_config\"" "${PGRX_HOME}/config.toml"; then
  log "cargo pgrx already initialised for pg${PG_MAJOR}"
else
  log "cargo pgrx init --pg${PG_MAJOR}=${PG_BIN}/pg_config"
  cargo pgrx init "--pg${PG_MAJOR}=${PG_BIN}/pg_config"
fi

log "done"
