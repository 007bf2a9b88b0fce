#!/usr/bin/env bash
# Builds and tests the Go client in module mode, as a user's `go get` builds
# it: go.mod and go.sum as committed (the client's with no replace directive;
# resourcelock's takes the client beside it), modules from
# the Go module proxy into one module cache that every run reuses
# (/opt/leaderlock/go, which scripts/setup.sh fills once), the go command
# and the toolchain that goenv.sh picks (Go 1.26 or later, else a pinned
# one), GOFLAGS=-mod=readonly. Then gofmt, go vet, and go test against
# LEADERLOCK_DSN (the test that restarts the server also needs
# LEADERLOCK_PGDATA and PG_BIN, see restart_test.go), for the client's
# module and then resourcelock's (client-go's resourcelock.Interface on a
# leaderlock lease: a module of its own, so that the client does not bring
# client-go's dependencies; LEADERLOCK_DSN's role a superuser, for the
# database of its own that counts the renewals' HOT updates).
# `test.sh --candidate FILE` builds the scenario suite's candidate
# (internal/candidate) into FILE instead; `test.sh --run-candidate FILE`
# its runner of scheduled runs (internal/runcandidate); `test.sh --tour
# FILE` the tour of every statement (internal/tour), which
# tests/clients/hostile.py runs as GO_TOUR.
# Builds share one build cache (below), across runs.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/goenv.sh"
go_env
WORK=$(mktemp -d /tmp/leaderlock-go-XXXXXX)
trap 'chmod -R u+w "$WORK" 2>/dev/null; rm -rf "$WORK"' EXIT
# The build cache: LEADERLOCK_GO_CACHE if set, else $GO_HOME/cache, kept
# across runs (keyed by every input, so what one build left is only used
# where it is the same: client-go alone takes about 4 minutes of CPU to
# compile), else (not writable by us) one of this run's own.
if [ -n "${LEADERLOCK_GO_CACHE:-}" ]; then
  GOCACHE=$LEADERLOCK_GO_CACHE
elif mkdir -p "$GO_HOME/cache" 2>/dev/null && [ -w "$GO_HOME/cache" ]; then
  GOCACHE=$GO_HOME/cache
else
  GOCACHE=$WORK/cache
fi
export GOCACHE

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
status=0
go vet ./... && go test -count=1 -v ${GO_TEST_RUN:+-run "$GO_TEST_RUN"} ./... || status=1   # GO_TEST_RUN: a pattern, to run some
# resourcelock (its own module): with GO_TEST_RUN, only if GO_RESOURCELOCK_RUN
# (a pattern too) asks for it
if [ -z "${GO_TEST_RUN:-}" ] || [ -n "${GO_RESOURCELOCK_RUN:-}" ]; then
  (cd resourcelock && go vet ./... && \
    go test -count=1 -v ${GO_RESOURCELOCK_RUN:+-run "$GO_RESOURCELOCK_RUN"} ./...) || status=1
fi
exit $status
