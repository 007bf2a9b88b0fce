#!/usr/bin/env bash
# Builds and tests the Go client offline, with Debian's Go (golang-go) and
# Go libraries (golang-github-jackc-pgx-v4-dev) in GOPATH mode: no module
# proxy is reachable from the machines this is built on. gofmt, go vet,
# then go test against LEADERLOCK_DSN. `test.sh --candidate FILE` builds the
# scenario suite's candidate (internal/candidate) into FILE instead.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
MODULE=github.com/leaderlock/leaderlock/clients/go
GOPATH_DIR=$(mktemp -d /tmp/leaderlock-gopath-XXXXXX)
trap 'rm -rf "$GOPATH_DIR"' EXIT
mkdir -p "$GOPATH_DIR/src/$(dirname "$MODULE")"
ln -s "$HERE" "$GOPATH_DIR/src/$MODULE"
export GO111MODULE=off GOPATH="$GOPATH_DIR:/usr/share/gocode" GOCACHE="$GOPATH_DIR/cache" GOFLAGS=
if [ "${1:-}" = --candidate ]; then
  cd "$GOPATH_DIR/src/$MODULE"
  go build -o "$2" ./internal/candidate
  exit 0
fi
unformatted=$(gofmt -l "$HERE")
[ -z "$unformatted" ] || { echo "gofmt: $unformatted" >&2; exit 1; }
cd "$GOPATH_DIR/src/$MODULE"
go vet .
go test -count=1 -v .
