#!/usr/bin/env bash
# Builds and tests the Java client (client/: the library; shedlock/: the
# ShedLock LockProvider) with Maven, every dependency and plugin pinned in
# pom.xml, against the server LEADERLOCK_DSN names (a superuser's, on this
# host: the tests stop backends with SIGSTOP); without it the tests that need
# a server are skipped.
#
# Maven's repository is a fixed one, LEADERLOCK_MAVEN_REPO (default
# /opt/leaderlock/maven), filled once from Maven Central by
# `test.sh --prefetch` (scripts/setup.sh runs it); once filled, every run is
# offline (-o).
#
#   test.sh                        the format check (google-java-format, through
#                                  spotless) and every test (mvn verify)
#   test.sh --prefetch             fetches what the build and the tests need
#                                  (idempotent: again only after a pom.xml changed)
#   test.sh --candidate FILE       builds the scenario suite's candidate
#                                  (tests/clients/scenarios.py: JAVA_CANDIDATE) into FILE
#   test.sh --run-candidate FILE   its runner of scheduled runs (runs_scenario.py:
#                                  JAVA_RUN_CANDIDATE)
#   test.sh --tour FILE            the tour of every statement (tests/clients/hostile.py:
#                                  JAVA_TOUR)
#
# FILE is a shell script that runs the program with java, its jars in FILE.lib/;
# several of these flags build once.
# JAVA_TEST=Class[#method] runs some tests only.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO_LOCAL=${LEADERLOCK_MAVEN_REPO:-/opt/leaderlock/maven}
STAMP=$REPO_LOCAL/.leaderlock-prefetched
MVN=(mvn -q -B -Dstyle.color=never -Dmaven.repo.local="$REPO_LOCAL")
DEPENDENCY=org.apache.maven.plugins:maven-dependency-plugin:3.8.1
cd "$HERE"

# poms_hash: what the fetched repository was fetched for.
poms_hash() {
  cat pom.xml client/pom.xml shedlock/pom.xml | sha256sum | cut -d' ' -f1
}

if [ "${1:-}" = --prefetch ]; then
  if [ "$(cat "$STAMP" 2>/dev/null)" = "$(poms_hash)" ]; then
    exit 0
  fi
  mkdir -p "$REPO_LOCAL"
  # The whole build once, online, with no server (the tests that need one
  # skip): every plugin, the tests' runtime (surefire's JUnit provider) and
  # the formatter are fetched as they are used; then what the candidates'
  # builds use.
  env -u LEADERLOCK_DSN "${MVN[@]}" verify
  "${MVN[@]}" -pl client -DincludeScope=runtime -DoutputDirectory="$(mktemp -d)" \
    "$DEPENDENCY:copy-dependencies" >/dev/null
  poms_hash >"$STAMP"
  chmod -R a+rX "$REPO_LOCAL"
  exit 0
fi

if [ -f "$STAMP" ]; then
  MVN+=(-o)
fi

# programs FILE MAIN...: builds once, then each FILE runs its MAIN (a class
# of the modules' tests) with the library, the ShedLock provider and their
# runtime dependencies, which FILE.lib holds.
programs() {
  local build file main lib
  build=$(mktemp -d)
  "${MVN[@]}" -Dspotless.check.skip=true -DskipTests -DincludeScope=runtime -DoutputDirectory="$build" \
    package "$DEPENDENCY:copy-dependencies"
  cp client/target/leaderlock-client-*.jar shedlock/target/leaderlock-shedlock-*.jar "$build/"
  mkdir -p "$build/client" "$build/shedlock"
  cp -r client/target/test-classes "$build/client/"
  cp -r shedlock/target/test-classes "$build/shedlock/"
  chmod -R a+rX "$build"
  while [ $# -gt 0 ]; do
    file=$(realpath -m "$1") main=$2
    shift 2
    lib="$file.lib"
    rm -rf "$lib"
    cp -r "$build" "$lib"
    cat >"$file" <<EOF
#!/bin/sh
# $main of the Java client's tests (clients/java/test.sh built it)
exec java -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xss512k \\
  '-Djava.util.logging.SimpleFormatter.format=%1\$tT.%1\$tL %4\$s %5\$s%6\$s%n' \\
  -cp '$lib/*:$lib/client/test-classes:$lib/shedlock/test-classes' $main "\$@"
EOF
    chmod 755 "$file"
  done
  rm -rf "$build"
}

if [ $# -gt 0 ]; then
  wanted=()
  while [ $# -gt 0 ]; do
    case "$1" in
      --candidate) main=io.github.leaderlock.Candidate ;;
      --run-candidate) main=io.github.leaderlock.RunCandidate ;;
      --tour) main=io.github.leaderlock.Tour ;;
      *) echo "usage: $0 [--prefetch | [--candidate FILE] [--run-candidate FILE] [--tour FILE]]" >&2; exit 2 ;;
    esac
    [ $# -ge 2 ] || { echo "$0: $1 needs a FILE" >&2; exit 2; }
    wanted+=("$2" "$main")
    shift 2
  done
  programs "${wanted[@]}"
  exit 0
fi

# Each test class's log goes to its module's target/surefire-reports: a
# failed class's is printed (its last 80 lines).
rm -rf client/target/surefire-reports shedlock/target/surefire-reports
if ! "${MVN[@]}" ${JAVA_TEST:+-Dtest="$JAVA_TEST" -Dsurefire.failIfNoSpecifiedTests=false} verify; then
  for report in */target/surefire-reports/*.txt; do
    case $report in *-output.txt) continue ;; esac
    if grep -q "FAILURE" "$report" 2>/dev/null; then
      out=${report%.txt}-output.txt
      echo "--- $report" >&2
      cat "$report" >&2
      if [ -f "$out" ]; then echo "--- the last lines of $out" >&2; tail -n 80 "$out" >&2; fi
    fi
  done
  exit 1
fi
# the figures the tests print (each class's "figure:" lines)
cat */target/surefire-reports/*-output.txt 2>/dev/null | grep -h '^figure: ' || true
