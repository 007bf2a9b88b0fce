# The Go toolchain and module cache of the Go builds (clients/go/test.sh
# and scripts/setup.sh source this; it defines, runs nothing).
#
# go_env: exports what every Go build here runs with:
#   - the go command: LEADERLOCK_GO if set, else /usr/local/go/bin/go (where
#     machines of the project's kind have a current Go), else the first on
#     PATH; it runs GO_MIN (the highest `go` directive of clients/go's
#     modules) or later as it is (GOTOOLCHAIN=local), and an older one from
#     Go 1.21 on runs the pinned GO_PIN instead, which the go command takes
#     from the Go module proxy into the module cache and checks against the
#     checksum database (GOTOOLCHAIN=GO_PIN); Debian 12's own Go (1.19) can
#     do neither: go_env says so and fails;
#   - the module cache: GOPATH=LEADERLOCK_GO_HOME (/opt/leaderlock/go),
#     GOMODCACHE under it, so that a machine downloads each module once
#     (scripts/setup.sh does, as root) and every build reuses it;
#   - GOFLAGS=-mod=readonly (go.mod and go.sum as committed: a build never
#     adds a requirement or a checksum) -buildvcs=false; GOWORK=off.
GO_MIN=1.26.0
GO_PIN=go1.26.8
GO_HOME=${LEADERLOCK_GO_HOME:-/opt/leaderlock/go}

# go_version_at_least VERSION MIN: VERSION (1.26.8, 1.26rc1) is MIN or later.
go_version_at_least() {
  [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" = "$2" ]
}

go_env() {
  local gobin version
  gobin=${LEADERLOCK_GO:-}
  if [ -z "$gobin" ]; then
    if [ -x /usr/local/go/bin/go ]; then gobin=/usr/local/go/bin/go; else gobin=$(command -v go || true); fi
  fi
  if [ -z "$gobin" ] || [ ! -x "$gobin" ]; then
    echo "goenv.sh: no go command (LEADERLOCK_GO, /usr/local/go/bin/go, PATH): install Go $GO_MIN or later" >&2
    return 1
  fi
  version=$(GOTOOLCHAIN=local "$gobin" env GOVERSION 2>/dev/null || "$gobin" version | awk '{print $3}')
  version=${version#go}
  if go_version_at_least "$version" "$GO_MIN"; then
    export GOTOOLCHAIN=local
  elif go_version_at_least "$version" 1.21; then
    export GOTOOLCHAIN=$GO_PIN
  else
    echo "goenv.sh: $gobin is Go $version: Go $GO_MIN or later is needed, or Go 1.21 or later to fetch $GO_PIN" \
      "from the module proxy (machines of the project's kind have a current Go in /usr/local/go)" >&2
    return 1
  fi
  export PATH="$(dirname "$gobin"):$PATH"
  export GO111MODULE=on GOWORK=off GOPATH="$GO_HOME" GOMODCACHE="$GO_HOME/pkg/mod" \
    GOFLAGS="-mod=readonly -buildvcs=false"
}
