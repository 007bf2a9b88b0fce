"""Blocking acquire (contract 9): from a release to the next holder's
acquisition, with many waiters.

WAITERS candidates wait in le_acquire(key, id, '10 s', '1 min') on KEYS
keys (WAITERS / KEYS per key). Each candidate is a process of its own with
its own connection, as the replicas of an application are: in one process
of 100 threads, the winner's thread would wait for Python's lock behind
the others, and the client, not the server, would make the tail. A winner
holds its lease HOLD ms (or a time drawn uniformly from HOLD x [1 - SPREAD,
1 + SPREAD]), then releases; one of the key's waiters must take it. Every
handover is timed two ways:

  server  acquired.at - released.at of the key's notifications: both are the
          server clock, read by le_release just before its commit and by the
          winner's le_acquire once it has the row; the release's commit (a
          WAL flush, fsync on) is inside. 0 when the release hands the lease
          over itself (every candidate here can be handed it: one statement
          in autocommit, no value, no session binding): the bench counts
          those, from the notifications' sending backends.
  client  from le_release returning (the release committed) to the winner's
          le_acquire returning (its own commit included), on this machine's
          monotonic clock (one clock for every process).

Targets, with 100 waiters on 10 keys: p99 < 5 ms after the release commits
at a hold of 100 ms, < 10 ms at a hold of 10 ms.
The keys exist and every backend has run each statement once before the
clock starts; the first round (one handover per key, when all candidates
start at the same instant: a herd of 100) is reported on its own, the
steady state without it. Handovers won after the last counted release are
left out: candidates are disconnecting then, and each one leaving knocks on
the others of its key. Also reported: how many other releases fall within
2 ms of a release (with one fixed hold, the keys hand over in step, and
their commits queue for the same WAL flushes), and the CPU used by the
waiting backends while they wait (a poll would show).

Usage: acquire_wake.py PORT [--waiters 100] [--keys 10] [--handovers 1000]
                            [--hold-ms 100] [--hold-spread 0] [--json FILE]
"""
import argparse
import bisect
import json
import multiprocessing
import os
import random
import sys
import threading
import time

import psycopg2.errors

import bench

# Each candidate reports, in order, (kind, key, monotonic time) of its wins
# and of its releases. It asks no term: one more statement per win would land
# in the very handovers measured. The parent gives each win its term from the
# key's `acquired` notifications to that candidate (the n-th win, the n-th
# term), and each release the term of the win before it.
WON, RELEASED = "won", "released"


def candidate(i, port, keys, prefix, hold, target, ready, done, count, out):
    """One candidate process: campaign for its key until `target` releases
    have been counted (by all), then report what it saw."""
    key, me = keys[i % len(keys)], f"w{i}"
    seen = []
    try:
        conn = bench.connect(port)
        warm = f"{prefix}warm-{i}"
        bench.one(conn, "SELECT le_acquire(%s, %s, '1 minute', '0')", (warm, me))
        bench.one(conn, "SELECT le_release(%s, %s)", (warm, me))
        bench.one(conn, "SELECT le_acquire(%s, %s, '1 minute', '0') AND le_release(%s, %s)", (warm, me, warm, me))
        ready.wait()
        while not done.is_set():
            if not bench.one(conn, "SELECT le_acquire(%s, %s, '10 seconds', '1 minute')", (key, me)):
                continue
            seen.append((WON, key, time.monotonic()))
            time.sleep(random.uniform(*hold))
            bench.one(conn, "SELECT le_release(%s, %s)", (key, me))
            released = time.monotonic()
            with count.get_lock():
                count.value += 1
                if count.value <= target:
                    seen.append((RELEASED, key, released))
                if count.value >= target:
                    done.set()
        conn.close()
        out.put((None, me, seen))
    except Exception as e:  # noqa: BLE001 - reported by the parent
        out.put((repr(e), me, seen))
        done.set()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("port", type=int)
    ap.add_argument("--waiters", type=int, default=100)
    ap.add_argument("--keys", type=int, default=10)
    ap.add_argument("--handovers", type=int, default=1000)
    ap.add_argument("--hold-ms", type=float, default=100)
    ap.add_argument("--hold-spread", type=float, default=0.0,
                    help="each hold drawn from hold-ms x [1 - S, 1 + S] (default 0: fixed)")
    ap.add_argument("--idle-seconds", type=float, default=5,
                    help="how long the idle waiters' CPU is measured")
    ap.add_argument("--json")
    args = ap.parse_args()
    if not 0 <= args.hold_spread < 1:
        ap.error("--hold-spread must be in [0, 1)")
    prefix = f"bench-wake-{os.getpid()}-"
    keys = [f"{prefix}{k}" for k in range(args.keys)]
    hold = (args.hold_ms / 1000 * (1 - args.hold_spread), args.hold_ms / 1000 * (1 + args.hold_spread))
    spread = f" (+-{args.hold_spread:.0%})" if args.hold_spread else ""
    bench.say(f"blocking acquire: {args.waiters} waiters (one process each) on {args.keys} keys, "
              f"{args.handovers} handovers, each leader holds {args.hold_ms} ms{spread}")

    listener = bench.connect(args.port)
    bench.q(listener, "LISTEN leaderlock")
    # The keys exist (vacant) before the race; every backend has run each
    # statement once (library loaded, plans made) before the clock starts.
    setup = bench.connect(args.port)
    for key in keys:
        bench.one(setup, "SELECT le_try_acquire(%s, 'setup', '1 minute') AND le_release(%s, 'setup')",
                  (key, key))
    setup.close()

    # spawn, not fork: a forked child would share the listener's socket.
    mp = multiprocessing.get_context("spawn")
    ready, done = mp.Barrier(args.waiters + 1), mp.Event()
    count, out = mp.Value("i", 0), mp.Queue()
    target = args.handovers + args.keys
    procs = [mp.Process(target=candidate, daemon=True,
                        args=(i, args.port, keys, prefix, hold, target, ready, done, count, out))
             for i in range(args.waiters)]
    for p in procs:
        p.start()
    ready.wait(120)
    started = time.monotonic()
    done.wait(600)
    elapsed = time.monotonic() - started
    reports, errors = [], []
    for _ in procs:
        error, me, seen = out.get(timeout=120)
        if error:
            errors.append(error)
        reports.append((me, seen))
    for p in procs:
        p.join(30)
    if errors:
        raise RuntimeError(f"a candidate failed: {errors[0]}")
    events = []
    while True:
        listener.poll()
        if not listener.notifies:
            break
        while listener.notifies:
            n = listener.notifies.pop(0)
            events.append(dict(json.loads(n.payload), _pid=n.pid))
    # Terms: each candidate's wins of a key, in order, are the key's
    # acquisitions by that candidate, in order of term.
    terms = {}
    for e in sorted((e for e in events if e["event"] == "acquired"), key=lambda e: e["term"]):
        terms.setdefault((e["key"], e["holder"]), []).append(e["term"])
    wins, releases = {}, {}
    for me, seen in reports:
        taken, term = {}, None
        for kind, key, at in seen:
            if kind == WON:
                n = taken[key] = taken.get(key, -1) + 1
                term = terms[(key, me)][n]
                wins[(key, term)] = at
            else:
                releases[(key, term)] = at

    # The handovers: each counted release with the win of the next term,
    # won before the last counted release (key and term of the win).
    last = max(releases.values())
    handovers = {(key, term + 1) for key, term in releases if wins.get((key, term + 1), last + 1) <= last}
    # Client-side, in the order won.
    client_ms = [ms for _, ms in sorted((wins[(key, term)], (wins[(key, term)] - releases[(key, term - 1)]) * 1000)
                                        for key, term in handovers)]
    # Server-side: the same handovers, from the notifications.
    released = {(e["key"], e["term"]): bench.parse_time(e["at"]) for e in events
                if e["event"] == "released" and (e["key"], e["term"]) in releases}
    server_ms = [ms for _, ms in sorted(
        (wins[(e["key"], e["term"])], (bench.parse_time(e["at"]) - released[(e["key"], e["term"] - 1)]) * 1000)
        for e in events
        if e["event"] == "acquired" and (e["key"], e["term"]) in handovers and (e["key"], e["term"] - 1) in released)]
    # Handed over by the release itself (`acquired` sent by the releasing
    # backend): one transaction, so the server clock shows 0 for them.
    sender = {(e["event"], e["key"], e["term"]): e["_pid"] for e in events}
    handed = sum(1 for key, term in handovers
                 if sender.get(("acquired", key, term)) == sender.get(("released", key, term - 1)))
    at = sorted(releases.values())
    near = [bisect.bisect_right(at, t + 0.002) - bisect.bisect_left(at, t - 0.002) - 1 for t in at]
    first_round = args.keys

    idle = idle_cpu(args.port, min(args.waiters, 50), prefix, args.idle_seconds)

    out = {"waiters": args.waiters, "keys": args.keys, "hold_ms": args.hold_ms,
           "hold_spread": args.hold_spread, "client": "one process per candidate",
           "handovers_per_s": count.value / elapsed,
           "server_release_to_acquire_ms": bench.spread(server_ms[first_round:]),
           "client_release_committed_to_acquire_returned_ms": bench.spread(client_ms[first_round:]),
           "first_round_server_ms": bench.spread(server_ms[:first_round]),
           "first_round_client_ms": bench.spread(client_ms[:first_round]),
           "other_releases_within_2ms_mean": sum(near) / len(near),
           "handed_over_by_the_release": handed, "handovers_counted": len(handovers),
           "idle_waiters": idle,
           "at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    s, c = out["server_release_to_acquire_ms"], out["client_release_committed_to_acquire_returned_ms"]
    # The targets: 100 waiters on 10 keys, leaders holding 100 ms or 10 ms.
    goal = {100: 5, 10: 10}.get(args.hold_ms)
    goal_text = f"  (target p99 < {goal} ms)" if goal and (args.waiters, args.keys) == (100, 10) else ""
    bench.say("  steady state (after the first round):")
    bench.say(f"  server clock, release -> acquisition: p50 {s['p50']:.2f} ms  p99 {s['p99']:.2f} ms  "
              f"max {s['max']:.2f} ms  ({s['count']} handovers)")
    bench.say(f"  handed over by the release itself (one transaction): {handed} of all "
              f"{len(handovers)} handovers, first round included")
    bench.say(f"  client, release committed -> le_acquire returned: p50 {c['p50']:.2f} ms  "
              f"p99 {c['p99']:.2f} ms  max {c['max']:.2f} ms{goal_text}")
    f = out["first_round_client_ms"]
    bench.say(f"  first round (all {args.waiters} candidates at once), client: p50 {f['p50']:.2f} ms  "
              f"max {f['max']:.2f} ms")
    bench.say(f"  {out['handovers_per_s']:.0f} handovers/s; on average "
              f"{out['other_releases_within_2ms_mean']:.2f} other releases within 2 ms of one; "
              f"{idle['waiters']} idle waiters used {idle['cpu_ms']:.0f} ms CPU in {idle['seconds']:g} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
    return 0


def idle_cpu(port, n, prefix, seconds):
    """CPU used by n backends waiting in le_acquire on a lease held for the
    whole measurement: zero for a latch wait."""
    key = prefix + "idle"
    holder = bench.connect(port)
    bench.one(holder, "SELECT le_try_acquire(%s, 'holder', '1 minute')", (key,))
    conns = [bench.connect(port) for _ in range(n)]
    pids = [bench.one(c, "SELECT pg_backend_pid()") for c in conns]
    def wait(conn, me):
        try:
            bench.one(conn, "SELECT le_acquire(%s, %s, '1 minute', '30 seconds')", (key, me))
        except psycopg2.errors.QueryCanceled:
            pass  # stopped below, once measured

    threads = [threading.Thread(target=wait, args=(c, f"idle{i}"), daemon=True) for i, c in enumerate(conns)]
    for t in threads:
        t.start()
    time.sleep(1)
    before = sum(bench.cpu_seconds(p) for p in pids)
    time.sleep(seconds)
    used = sum(bench.cpu_seconds(p) for p in pids) - before
    # Stop them: a release would serve one, and the others would wait out
    # their 30 s.
    bench.one(holder, "SELECT count(pg_cancel_backend(pid)) FROM unnest(%s::int[]) AS pid", (pids,))
    bench.one(holder, "SELECT le_release(%s, 'holder')", (key,))
    for t in threads:
        t.join(40)
    for c in conns + [holder]:
        c.close()
    return {"waiters": n, "seconds": seconds, "cpu_ms": used * 1000}


if __name__ == "__main__":
    sys.exit(main())
