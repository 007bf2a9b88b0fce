"""`leaderlock console`'s reads at many keys: how long a page of the key
list takes when the database holds KEYS live leases (the first page, one
in the middle, the last, a prefix matching 100 keys, one key's page), and
how long `leaderlock metrics` takes to read the whole database (its
aggregates) as it reports it (leaderlock_metrics_read_seconds).

Fills the table directly (one INSERT of KEYS held leases, an hour each:
the fill is not what is measured), starts the console, then requests each
page ROUNDS times over HTTP and prints p50 and max in milliseconds, from
sending the request to the last byte of the answer, with the rows of each.

Usage: console.py PORT CLI [--keys N] [--rounds N] [--json FILE]
"""
import argparse
import json
import os
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import bench


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
from free_port import free_port  # noqa: E402 (never an ephemeral port: it says why)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("port", type=int)
    ap.add_argument("cli")
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--json")
    args = ap.parse_args()
    conn = bench.connect(args.port)
    prefix = f"bench-console-{os.getpid()}-"
    started = time.monotonic()
    bench.q(conn, "INSERT INTO leaderlock (key, holder, term, acquired_at, renewed_at, expires_at, ttl, "
                  "recheck_at, owner, tenures, changed_at) "
                  "SELECT %s || pg_catalog.lpad(i::text, 8, '0'), 'holder-' || (i %% 7), 1, le_now(), le_now(), "
                  "le_now() + interval '1 hour', interval '1 hour', le_now() + interval '1 hour', "
                  "'postgres'::regrole, 1, le_now() FROM generate_series(0, %s) i", (prefix, args.keys - 1))
    bench.q(conn, "ANALYZE leaderlock")
    bench.say(f"leaderlock console: {args.keys} held leases (filled in {time.monotonic() - started:.1f} s), "
              f"{args.rounds} rounds per page")
    port = free_port()
    dsn = f"host=127.0.0.1 port={args.port} user=postgres dbname=postgres"
    console = subprocess.Popen([args.cli, "--dsn", dsn, "console", "--listen", f"127.0.0.1:{port}"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(base + "/api/config", timeout=1).read()
                break
            except OSError:
                time.sleep(0.1)
        middle = prefix + f"{args.keys // 2:08d}"
        last = prefix + f"{max(args.keys - 50, 0):08d}"
        narrow = prefix + f"{args.keys // 3:08d}"[:-2]
        pages = {
            "first page": "/api/keys?limit=100&prefix=" + urllib.parse.quote(prefix),
            "middle page": "/api/keys?limit=100&after=" + urllib.parse.quote(middle),
            "last page": "/api/keys?limit=100&after=" + urllib.parse.quote(last),
            "prefix (100 keys)": "/api/keys?limit=100&prefix=" + urllib.parse.quote(narrow),
            "one key": "/api/key?key=" + urllib.parse.quote(middle),
        }
        results = {}
        for name, path in pages.items():
            times = []
            for _ in range(args.rounds):
                t = time.monotonic()
                with urllib.request.urlopen(base + path, timeout=30) as r:
                    body = json.loads(r.read())
                times.append((time.monotonic() - t) * 1000)
            rows = len(body.get("rows", body.get("holders", [])))
            results[name] = {"p50_ms": bench.percentile(times, 50), "max_ms": max(times), "rows": rows}
        bench.say(f"  {'page':<20} {'p50 ms':>8} {'max ms':>8} {'rows':>6}")
        for name, r in results.items():
            bench.say(f"  {name:<20} {r['p50_ms']:8.1f} {r['max_ms']:8.1f} {r['rows']:6d}")
        # `leaderlock metrics` beside it: how long one read of the whole
        # database (its aggregates) takes, as it reports it
        mport = free_port()
        exporter = subprocess.Popen([args.cli, "--dsn", dsn, "metrics", "--listen", f"127.0.0.1:{mport}",
                                     "--every", "1s"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        reads = []
        try:
            deadline = time.monotonic() + 30 + args.rounds * 2
            while len(reads) < max(args.rounds // 4, 2) and time.monotonic() < deadline:
                time.sleep(1.05)
                try:
                    text = urllib.request.urlopen(f"http://127.0.0.1:{mport}/metrics", timeout=2).read().decode()
                except OSError:
                    continue
                for line in text.splitlines():
                    if line.startswith("leaderlock_metrics_read_seconds "):
                        reads.append(float(line.split()[1]) * 1000)
        finally:
            exporter.kill()
            exporter.wait()
        if reads:
            results["metrics read"] = {"p50_ms": bench.percentile(reads, 50), "max_ms": max(reads), "rows": 0}
            bench.say(f"  {'metrics read':<20} {results['metrics read']['p50_ms']:8.1f} "
                      f"{results['metrics read']['max_ms']:8.1f}      -")
    finally:
        console.kill()
        console.wait()
        bench.q(conn, "DELETE FROM leaderlock WHERE key LIKE %s", (prefix + "%",))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"keys": args.keys, "rounds": args.rounds, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
