"""`leaderlock status` at many keys (issue: production connections).

Fills the database with KEYS leases, half held and half vacant (released;
lapsed ones would not stay lapsed, the worker expires them at once), every
tenth key 255 characters long. Then runs, ROUNDS times
each, `status`, `status --held`, `status --json` and `status KEY`, and
prints the wall time of each (p50 and max, from starting the process to its
exit) with the size of what it printed and its widest line.

Usage: cli_status.py PORT CLI [--keys N] [--rounds N] [--json FILE]
"""
import argparse
import json
import os
import subprocess
import time

import bench


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("port", type=int)
    ap.add_argument("cli")
    ap.add_argument("--keys", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--json")
    args = ap.parse_args()
    conn = bench.connect(args.port)
    prefix = f"bench-status-{os.getpid()}-"
    keys = [prefix + (f"{i:06d}-" + "x" * 255)[:255 - len(prefix)] if i % 10 == 0 else prefix + f"{i:06d}"
            for i in range(args.keys)]
    bench.say(f"leaderlock status: {args.keys} leases (half held, half vacant; every tenth key 255 "
              f"characters), {args.rounds} rounds per command")
    started = time.monotonic()
    for i, key in enumerate(keys):
        bench.q(conn, "SELECT le_try_acquire(%s, %s, '1 hour')", (key, f"holder-{i % 7}"))
        if i % 2:
            bench.q(conn, "SELECT le_release(%s, %s)", (key, f"holder-{i % 7}"))
    bench.say(f"  filled in {time.monotonic() - started:.1f} s")
    dsn = f"host=127.0.0.1 port={args.port} user=postgres dbname=postgres"
    commands = {"status": [], "status --held": ["--held"], "status --json": ["--json"],
                "status KEY": [keys[0]]}
    results = {}
    for name, extra in commands.items():
        times = []
        for _ in range(args.rounds):
            t = time.monotonic()
            out = subprocess.run([args.cli, "--dsn", dsn, "status", *extra], capture_output=True, text=True)
            times.append((time.monotonic() - t) * 1000)
            if out.returncode != 0:
                raise SystemExit(f"{name}: exit {out.returncode}: {out.stderr}")
        lines = out.stdout.splitlines()
        results[name] = {"p50_ms": bench.percentile(times, 50), "max_ms": max(times), "lines": len(lines),
                         "bytes": len(out.stdout.encode()), "widest": max(map(len, lines))}
        if name == "status":
            results[name]["summary"] = lines[-1]
    bench.say(f"  {'command':<16} {'p50 ms':>8} {'max ms':>8} {'lines':>7} {'bytes':>10} {'widest':>7}")
    for name, r in results.items():
        bench.say(f"  {name:<16} {r['p50_ms']:8.1f} {r['max_ms']:8.1f} {r['lines']:7d} {r['bytes']:10d} "
                  f"{r['widest']:7d}")
    bench.say(f"  summary line: {results['status']['summary']}")
    bench.q(conn, "DELETE FROM leaderlock WHERE key LIKE %s", (prefix + "%",))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"keys": args.keys, "rounds": args.rounds, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
