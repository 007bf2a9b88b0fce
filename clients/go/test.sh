#!/usr/bin/env bash
# Builds and tests the Go client in module mode, as a user's `go get` would
# build it, but offline: no module proxy is reachable from the machines this
# runs on. go.mod and go.sum are the ones users get (no replace directive);
# a go.work generated in a temporary directory replaces each module go.mod
# requires with Debian 12's packaged sources of it (/usr/share/gocode/src,
# golang-github-jackc-pgx-v4-dev and its dependencies,
# golang-github-robfig-cron-dev), after checking that
# each Debian go.mod is byte for byte the one go.sum names for that version;
# modules of the dependency graph that provide no package we build are
# replaced by empty stand-ins. Then gofmt, go vet, and go test against
# LEADERLOCK_DSN (the test that restarts the server also needs
# LEADERLOCK_PGDATA and PG_BIN, see restart_test.go).
# `test.sh --candidate FILE` builds the scenario suite's candidate
# (internal/candidate) into FILE instead; `test.sh --run-candidate FILE`
# its runner of scheduled runs (internal/runcandidate); `test.sh --tour
# FILE` the tour of every statement (internal/tour), which
# tests/clients/hostile.py runs as GO_TOUR.
# Each run builds in a build cache of its own (the standard library and pgx
# from scratch, about 20 s), or in LEADERLOCK_GO_CACHE's: scripts/test.sh
# gives its builds one for the whole run (the cache is keyed by every
# input, so what one build left is only used where it is the same).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
GOCODE=${LEADERLOCK_GOCODE:-/usr/share/gocode/src}
WORK=$(mktemp -d /tmp/leaderlock-go-XXXXXX)
trap 'chmod -R u+w "$WORK" 2>/dev/null; rm -rf "$WORK"' EXIT

# requires GO_MOD: "path version" for each requirement of a go.mod file.
requires() {
  awk '
    /^require[ \t]*\(/ { block = 1; next }
    block && /^\)/ { block = 0; next }
    block && NF >= 2 && $1 !~ /^\/\// { print $1, $2; next }
    /^require[ \t]+[^( \t]/ { print $2, $3 }
  ' "$1"
}

# debian_dir PATH: Debian's packaged sources of module PATH. A major
# version's suffix (/v3) is not always part of Debian's directory
# (golang-github-robfig-cron-dev installs github.com/robfig/cron/v3 as
# github.com/robfig/cron): then the directory without it, if its go.mod
# declares that module.
debian_dir() {
  local dir=$GOCODE/$1 base
  if [ ! -f "$dir/go.mod" ] && [[ $1 =~ /v[0-9]+$ ]]; then
    base=$GOCODE/${1%/v*}
    if [ -f "$base/go.mod" ] && [ "$(awk '$1 == "module" { print $2; exit }' "$base/go.mod")" = "$1" ]; then
      dir=$base
    fi
  fi
  echo "$dir"
}

# gomod_hash FILE: the h1: hash go.sum gives a go.mod file (dirhash.Hash1 of
# the one file, named go.mod).
gomod_hash() {
  printf '%s  go.mod\n' "$(sha256sum <"$1" | cut -d' ' -f1)" | sha256sum | cut -d' ' -f1 | xxd -r -p | base64
}

{
  echo "go 1.19"
  echo
  echo "use $HERE"
  echo
  echo "replace ("
} >"$WORK/go.work"
declare -A replaced=()
while read -r path version; do
  dir=$(debian_dir "$path")
  [ -f "$dir/go.mod" ] || { echo "test.sh: $path: no $dir/go.mod (install Debian's package of it)" >&2; exit 1; }
  want=$(awk -v m="$path" -v v="$version/go.mod" '$1 == m && $2 == v { print $3 }' "$HERE/go.sum")
  got="h1:$(gomod_hash "$dir/go.mod")"
  if [ "$want" != "$got" ]; then
    echo "test.sh: $dir/go.mod is not $path $version's (go.sum: ${want:-none}, Debian's: $got)" >&2
    exit 1
  fi
  echo "	$path => $dir" >>"$WORK/go.work"
  replaced[$path]=1
done < <(requires "$HERE/go.mod")
# Everything else those modules require: an empty module, so that the graph
# is complete without a proxy (none of them provides a package we build).
for path in "${!replaced[@]}"; do requires "$(debian_dir "$path")/go.mod"; done | sort -u | while read -r path _; do
  [ -z "${replaced[$path]:-}" ] || continue
  mkdir -p "$WORK/stub/$path"
  echo "module $path" >"$WORK/stub/$path/go.mod"
  echo "	$path => $WORK/stub/$path" >>"$WORK/go.work"
done
echo ")" >>"$WORK/go.work"

export GO111MODULE=on GOWORK="$WORK/go.work" GOPROXY=off GOSUMDB=off GOFLAGS=-mod=readonly \
  GOPATH="$WORK/gopath" GOMODCACHE="$WORK/gopath/pkg/mod" GOCACHE="${LEADERLOCK_GO_CACHE:-$WORK/cache}"
cd "$HERE"
if [ "${1:-}" = --candidate ]; then
  go build -o "$2" ./internal/candidate
  exit 0
fi
if [ "${1:-}" = --run-candidate ]; then
  go build -o "$2" ./internal/runcandidate
  exit 0
fi
if [ "${1:-}" = --tour ]; then
  go build -o "$2" ./internal/tour
  exit 0
fi
unformatted=$(gofmt -l "$HERE")
[ -z "$unformatted" ] || { echo "gofmt: $unformatted" >&2; exit 1; }
go vet ./...
go test -count=1 -v ${GO_TEST_RUN:+-run "$GO_TEST_RUN"} ./...   # GO_TEST_RUN: a pattern, to run some
