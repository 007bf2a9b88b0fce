#!/usr/bin/env bash
# Builds and tests the Go client in module mode, as a user's `go get` builds
# it: go.mod and go.sum as committed (no replace directive), modules from
# the Go module proxy into one module cache that every run reuses
# (/opt/leaderlock/go, which scripts/setup.sh fills once), the go command
# and the toolchain that goenv.sh picks (Go 1.26 or later, else a pinned
# one), GOFLAGS=-mod=readonly. Then gofmt, go vet, and go test against
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
source "$HERE/goenv.sh"
go_env
WORK=$(mktemp -d /tmp/leaderlock-go-XXXXXX)
trap 'chmod -R u+w "$WORK" 2>/dev/null; rm -rf "$WORK"' EXIT
export GOCACHE="${LEADERLOCK_GO_CACHE:-$WORK/cache}"

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
echo "[go] $(go version) (GOTOOLCHAIN=$GOTOOLCHAIN, GOMODCACHE=$GOMODCACHE)"
go vet ./...
go test -count=1 -v ${GO_TEST_RUN:+-run "$GO_TEST_RUN"} ./...   # GO_TEST_RUN: a pattern, to run some
