"""Session-bound leases (contract 10) when the holder's host vanishes: from
the moment the holder stops answering (its address gone: packets to it
are dropped, no FIN, no RST) to the lease being vacated, with the server's TCP
keepalives set to --idle, --interval and --count (run by
bench/half_open.sh, which makes the network namespace and the cluster).

Each round a client in the namespace connects to 10.231.0.1, acquires a
session-bound lease with ttl 1 hour (so the ttl never ends it here) and
says so; its address goes; this process polls the lease every 10 ms over
127.0.0.1. Printed: the time to the lease being vacated (expected: about
idle + interval x count, less what passed since the client's last packet)
next to that sum.

Usage: half_open.py PORT --netns NS --netns-if IF [--idle 2] [--interval 1]
[--count 2] [--rounds 3] [--json FILE]
"""
import argparse
import json
import os
import subprocess
import sys
import time

import bench


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("port", type=int)
    ap.add_argument("--netns", required=True)
    ap.add_argument("--netns-if", required=True)
    ap.add_argument("--idle", type=int, default=2)
    ap.add_argument("--interval", type=int, default=1)
    ap.add_argument("--count", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json")
    args = ap.parse_args()
    admin = bench.connect(args.port)
    for name, value in (("idle", args.idle), ("interval", args.interval), ("count", args.count)):
        bench.q(admin, f"ALTER SYSTEM SET tcp_keepalives_{name} = {int(value)}")
    # Keepalives are not sent while data is unacknowledged: this bounds
    # that case (and, on Linux, overrides the keepalive count) alike.
    expected = args.idle + args.interval * args.count
    bench.q(admin, f"ALTER SYSTEM SET tcp_user_timeout = {expected * 1000}")
    bench.q(admin, "SELECT pg_reload_conf()")
    # New sessions have it once the postmaster has reloaded.
    deadline = time.monotonic() + 10
    while True:
        probe = bench.connect(args.port)
        idle = bench.one(probe, "SHOW tcp_keepalives_idle")
        probe.close()
        if idle == str(args.idle) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    bench.say(f"half-open holder: {args.rounds} rounds, server tcp_keepalives idle {args.idle} s, "
              f"interval {args.interval} s, count {args.count}, tcp_user_timeout {expected} s "
              f"(idle + interval x count = {expected} s)")
    took = []
    probe = bench.connect(args.port)
    bench.wait_for_worker(probe)
    probe.close()
    for i in range(args.rounds):
        key = f"bench-half-open-{os.getpid()}-{i}"
        child = subprocess.Popen(["ip", "netns", "exec", args.netns, sys.executable, "-c", bench.SESSION_HOLDER,
                                  "10.231.0.1", str(args.port), key, "vanishing-host", "1 hour"],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        if child.stdout.readline().strip() != "ready":
            raise RuntimeError("the client did not acquire")
        # The holder's address goes: packets to it arrive and are dropped
        # unanswered, as for a host that lost power. (Taking the link down
        # instead makes the server's own sends fail, which Linux's
        # keepalives retry without counting.)
        addr = ["ip", "netns", "exec", args.netns, "ip", "addr"]
        cut = time.time()
        subprocess.run([*addr, "del", "10.231.0.2/30", "dev", args.netns_if], check=True)
        deadline = time.monotonic() + expected + 30
        while bench.one(admin, "SELECT holder FROM leaderlock WHERE key = %s", (key,)) is not None:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the lease outlived its holder by {expected + 30} s")
            time.sleep(0.01)
        took.append(time.time() - cut)
        subprocess.run([*addr, "add", "10.231.0.2/30", "dev", args.netns_if], check=True)
        child.kill()
        child.wait()
        child.stdout.close()
        child.stdin.close()
    spread = bench.spread([t * 1000 for t in took])
    bench.say(f"  holder gone -> lease vacated: p50 {spread['p50'] / 1000:.2f} s  max {spread['max'] / 1000:.2f} s "
              f"(keepalive sum {expected} s)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"idle": args.idle, "interval": args.interval, "count": args.count,
                       "holder_gone_to_vacated_s": [round(t, 3) for t in took],
                       "at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
