"""Worker expiry lag benchmark (contract section 5).

With LIVE leases held (a share of them being renewed all along), EXPIRING
more leases are left to lapse at times spread over WINDOW seconds. A
listener records when each `expired` notification arrives; the lag is
arrival time minus the lease's expires_at (same host, same clock), an upper
bound on "expires_at to the commit of its notification". Also reports the
worker's CPU time, while idle and while expiring, from /proc, and the plans
of the worker's statements (index scans, no table scan).

With --databases N, the leases (live and expiring) are spread evenly over
N databases (postgres and N - 1 made for the run), each served by its own
worker (contract 12); CPU is then the sum over the workers.

Usage: worker_lag.py PORT [--live N] [--expiring N] [--window S] [--idle S] [--renew-rate R]
                          [--databases N]
Prints a summary; with --json FILE also writes the figures.
"""
import argparse
import json
import sys
import threading
import time

import bench
from queries import load as load_queries

QUERIES = load_queries()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("port", type=int)
    ap.add_argument("--live", type=int, default=10_000)
    ap.add_argument("--expiring", type=int, default=1_000)
    ap.add_argument("--window", type=float, default=20.0)
    ap.add_argument("--idle", type=float, default=10.0)
    ap.add_argument("--renew-rate", type=float, default=200.0, help="renewals per second of live leases")
    ap.add_argument("--databases", type=int, default=1, help="spread the leases over this many databases")
    ap.add_argument("--json")
    args = ap.parse_args()

    c = bench.connect(args.port)
    cur = c.cursor()
    databases = ["postgres"] + [f"bench_lag_{i}" for i in range(1, args.databases)]
    for db in databases[1:]:
        cur.execute(f"DROP DATABASE IF EXISTS {db}")  # names made above, not input
        cur.execute(f"CREATE DATABASE {db}")
        dc = bench.connect(args.port, dbname=db)
        bench.one(dc, "CREATE EXTENSION leaderlock")
        dc.close()
    deadline = time.monotonic() + 30
    while any(bench.worker_pid(c, db) is None for db in databases):
        assert time.monotonic() < deadline, "not every database got a worker (max_worker_processes?)"
        time.sleep(0.05)
    pids = [bench.worker_pid(c, db) for db in databases]

    def cpu():
        return sum(bench.cpu_seconds(p) for p in pids)

    # Live lease i lives in database i % N.
    def db_of(i):
        return databases[i % len(databases)]

    print(f"setting up {args.live} live leases (1 hour ttl) in {len(databases)} database(s)", flush=True)
    for n, db in enumerate(databases):
        dc = bench.connect(args.port, dbname=db)
        dcur = dc.cursor()
        dcur.execute("DELETE FROM leaderlock WHERE key LIKE 'bench-lag-%'")
        dcur.execute("SELECT count(*) FILTER (WHERE le_try_acquire('bench-lag-live-' || i, 'holder-' || i, "
                     "'1 hour')) FROM generate_series(1, %s) i WHERE i %% %s = %s",
                     (args.live, len(databases), n))
        dcur.execute("VACUUM ANALYZE leaderlock")
        dc.close()

    # Plans of the worker's statements, as the extension runs them.
    plans = {}
    for name, params in [("NEXT_CHECK", "(clock_timestamp())"), ("LOCK_LAPSED", "(clock_timestamp(), 1000)"),
                       ("VACATE_KEYS", "(ARRAY['a', 'b'], clock_timestamp())")]:
        cur.execute(f"PREPARE bench_plan AS {QUERIES[name]}")
        cur.execute(f"EXPLAIN (COSTS OFF) EXECUTE bench_plan{params}")
        plans[name] = [r[0] for r in cur.fetchall()]
        cur.execute("DEALLOCATE bench_plan")

    stop = threading.Event()
    renewed = [0]

    def renewer():
        rcs = {db: bench.connect(args.port, dbname=db) for db in databases}
        i = 0
        period = 1.0 / args.renew_rate if args.renew_rate > 0 else None
        next_at = time.monotonic()
        while period and not stop.is_set():
            i = i % args.live + 1
            bench.one(rcs[db_of(i)], "SELECT le_renew(%s, %s)", (f"bench-lag-live-{i}", f"holder-{i}"))
            renewed[0] += 1
            next_at += period
            time.sleep(max(0.0, next_at - time.monotonic()))
        for rc in rcs.values():
            rc.close()

    rt = threading.Thread(target=renewer, daemon=True)
    rt.start()

    print(f"idle phase: {args.idle:.0f} s with {args.live} live leases, {args.renew_rate:.0f} renewals/s", flush=True)
    cpu0, t0 = cpu(), time.monotonic()
    time.sleep(args.idle)
    idle_cpu = (cpu() - cpu0) / (time.monotonic() - t0)

    print(f"expiry phase: {args.expiring} leases lapsing over {args.window:.0f} s", flush=True)
    share = [args.expiring // len(databases) + (1 if n < args.expiring % len(databases) else 0)
             for n in range(len(databases))]
    expiring = [bench.ExpiryLag(args.port, k, args.window, "bench-lag-exp-", grace=30, dbname=db)
                for db, k in zip(databases, share)]
    for e in expiring:
        e.start()
    cpu1, t1 = cpu(), time.monotonic()
    for e in expiring:
        e.finish()
    lags = [x for e in expiring for x in e.lags]
    check_lags = [x for e in expiring for x in e.check_lags]
    heard = {"received": len(lags), "lag_ms": bench.spread(lags), "check_lag_ms": bench.spread(check_lags)}
    busy_cpu = (cpu() - cpu1) / (time.monotonic() - t1)
    stop.set()
    rt.join()

    wrongly_expired = 0
    for db in databases:
        dc = bench.connect(args.port, dbname=db)
        wrongly_expired += bench.one(dc, "SELECT count(*) FROM leaderlock "
                                         "WHERE key LIKE %s AND holder IS NULL", ("bench-lag-live-%",))
        bench.one(dc, "DELETE FROM leaderlock WHERE key LIKE %s", ("bench-lag-%",))
        dc.close()
    for db in databases[1:]:
        cur.execute(f"DROP DATABASE {db}")
    figures = {
        "databases": len(databases),
        "live_leases": args.live, "expiring": args.expiring, "received": heard["received"],
        "window_s": args.window, "renewals_per_s": args.renew_rate, "renewals_done": renewed[0],
        "lag_ms": heard["lag_ms"],
        "check_lag_ms": heard["check_lag_ms"],
        "worker_cpu_percent": {"idle": 100 * idle_cpu, "expiring": 100 * busy_cpu},
        "live_leases_wrongly_expired": wrongly_expired,
        "plans": plans,
    }

    print()
    print(f"expired notifications received: {heard['received']} of {args.expiring}")
    if heard["lag_ms"]:
        l = figures["lag_ms"]
        print(f"lag, expires_at to notification received: p50 {l['p50']:.1f} ms, p99 {l['p99']:.1f} ms, "
              f"max {l['max']:.1f} ms")
        l = figures["check_lag_ms"]
        print(f"  of which expires_at to the worker's check: p50 {l['p50']:.1f} ms, p99 {l['p99']:.1f} ms, "
              f"max {l['max']:.1f} ms")
    workers = "worker" if len(databases) == 1 else f"{len(databases)} workers together"
    print(f"{workers} CPU: idle {100 * idle_cpu:.2f} %, while expiring {100 * busy_cpu:.2f} % of one core")
    print(f"live leases wrongly expired: {wrongly_expired}; renewals done: {renewed[0]}")
    for name, plan in plans.items():
        print(f"plan of {name}:")
        for line in plan:
            print("    " + line)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=2)
    if heard["received"] < args.expiring or wrongly_expired:
        sys.exit(1)


if __name__ == "__main__":
    main()
