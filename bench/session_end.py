"""Session-bound leases (contract 10): from the end of the holder's
connection to the announcement that its lease ended.

Each round a client process (python, psycopg2) connects, acquires a
session-bound lease with ttl 30 s and says so; this process then kills it
with SIGKILL. Its backend sees the connection close and exits; the worker
vacates the lease and notifies `expired` with "reason":"session_ended".
Timed, on this machine's wall clock (server and client share it):

  kill -> announced   from just before kill(2) to the payload's `at` (the
                      worker's clock reading as it vacates the lease)
  kill -> received    from just before kill(2) to the LISTENing client
                      receiving the notification (commit and delivery in)

Both start at the kill, before the backend's exit, so they bound "within
N ms of the backend's exit" from above. Target: p99 < 20 ms.

Usage: session_end.py PORT [--rounds 200] [--json FILE]
"""
import argparse
import json
import os
import select
import signal
import subprocess
import sys
import time

import bench


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("port", type=int)
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--json")
    args = ap.parse_args()
    prefix = f"bench-session-{os.getpid()}-"
    listener = bench.connect(args.port)
    bench.wait_for_worker(listener)
    bench.q(listener, "LISTEN leaderlock")
    bench.say(f"session end: {args.rounds} rounds, kill -9 of a client holding a session-bound lease (ttl 30 s)")
    announced, received = [], []
    for i in range(args.rounds):
        key = f"{prefix}{i}"
        child = subprocess.Popen([sys.executable, "-c", bench.SESSION_HOLDER, bench.HOST, str(args.port), key,
                                  "child", "30 seconds"],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        if child.stdout.readline().strip() != "ready":
            raise RuntimeError("the client did not acquire")
        drain(listener)
        killed = time.time()
        os.kill(child.pid, signal.SIGKILL)
        event, at = wait_expired(listener, key)
        child.wait()
        child.stdout.close()
        child.stdin.close()
        if event["reason"] != "session_ended":
            raise RuntimeError(f"expired for another reason: {event}")
        announced.append((bench.parse_time(event["at"]) - killed) * 1000)
        received.append((at - killed) * 1000)
    out = {"rounds": args.rounds, "kill_to_announced_ms": bench.spread(announced),
           "kill_to_received_ms": bench.spread(received),
           "at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    a, r = out["kill_to_announced_ms"], out["kill_to_received_ms"]
    bench.say(f"  kill -9 -> worker vacates (payload at): p50 {a['p50']:.2f} ms  p99 {a['p99']:.2f} ms  "
              f"max {a['max']:.2f} ms")
    bench.say(f"  kill -9 -> notification received:       p50 {r['p50']:.2f} ms  p99 {r['p99']:.2f} ms  "
              f"max {r['max']:.2f} ms  (target p99 < 20 ms)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
    return 0


def drain(conn):
    conn.poll()
    conn.notifies.clear()


def wait_expired(conn, key, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        select.select([conn], [], [], 0.05)
        conn.poll()
        now = time.time()
        while conn.notifies:
            e = json.loads(conn.notifies.pop(0).payload)
            if e["key"] == key and e["event"] == "expired":
                return e, now
    raise RuntimeError(f"no expired notification for {key} within {timeout} s")


if __name__ == "__main__":
    sys.exit(main())
