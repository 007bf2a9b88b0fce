"""Handover between two `leaderlock run` processes (issue: the CLI).

Each round: candidate i leads and runs `sleep HOLD`; candidate i+1 is started
as soon as i's command runs, and waits (LISTEN). When i's command exits, i
releases the lease and exits; i+1 hears `released`, acquires and starts its
command. The handover is the time from i's "child_exited" log line to i+1's
"child_started" line (both CLIs log JSON with wall-clock times; same host,
same clock): everything between the leader's command ending and the next
leader's command starting. Also the part up to the release (i's "released").

Usage: cli_handover.py PORT CLI [--rounds N] [--hold S] [--json FILE]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import bench


def events(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.startswith("{")]


def first(path, name, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [e for e in events(path) if e["event"] == name]
        if found:
            return found[0]
        time.sleep(0.005)
    raise RuntimeError(f"no {name} in {path}: {events(path)[-3:]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("port", type=int)
    ap.add_argument("cli")
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--hold", type=float, default=0.2)
    ap.add_argument("--json")
    args = ap.parse_args()
    dsn = f"host=127.0.0.1 port={args.port} user=postgres dbname=postgres"
    key = f"bench-cli-handover-{os.getpid()}"
    work = tempfile.mkdtemp(prefix="leaderlock-cli-handover-")

    def start(i):
        log = os.path.join(work, f"{i}.log")
        with open(log, "w") as f:
            p = subprocess.Popen([args.cli, "--dsn", dsn, "run", "--log-format", "json", "--key", key,
                                  "--ttl", "10s", "--", "sleep", str(args.hold)],
                                 stderr=f, stdin=subprocess.DEVNULL)
        return p, log

    bench.say(f"CLI handover: {args.rounds} rounds, each leader's command runs {args.hold} s")
    procs = [start(0)]
    first(procs[0][1], "child_started")
    handover, to_release = [], []
    for i in range(args.rounds):
        procs.append(start(i + 1))
        p, log = procs[i]
        if p.wait(timeout=30) != 0:
            raise RuntimeError(f"leader {i} failed: {events(log)[-3:]}")
        exited = first(log, "child_exited")["ts"]
        released = first(log, "released")["ts"]
        started = first(procs[i + 1][1], "child_started")["ts"]
        handover.append((started - exited) * 1000)
        to_release.append((released - exited) * 1000)
    procs[-1][0].terminate()
    procs[-1][0].wait()
    out = {"rounds": args.rounds, "hold_s": args.hold,
           "handover_ms": bench.spread(handover), "exit_to_release_ms": bench.spread(to_release),
           "at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    h, r = out["handover_ms"], out["exit_to_release_ms"]
    bench.say(f"  command exit -> next command start: p50 {h['p50']:.2f} ms  p99 {h['p99']:.2f} ms  "
              f"max {h['max']:.2f} ms (target p99 < 20 ms)")
    bench.say(f"  of which exit -> release committed: p50 {r['p50']:.2f} ms  p99 {r['p99']:.2f} ms")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
