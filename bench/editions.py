"""The compiled and the portable edition side by side, in one run on one
cluster (contract 19): what a user gives up with the portable edition.

- renew: N clients, each renewing its own lease (pgbench, transactions/s);
- contended try-acquire: N clients calling le_try_acquire on a few keys;
- handover: a waiting le_acquire returns after the holder's le_release
  (client clock, from the release's start; compiled: woken at the commit;
  portable: its polling period);
- failover after a crash: a `leaderlock run` leader killed with -9 and a
  second one waiting; the delay from the dead lease's expires_at to the
  next tenure's acquired_at (server clock). Compiled: the worker announces
  the expiry. Portable: (a) le_expire_lapsed called every second by a
  scheduler (as pg_cron would), the candidate acting on notifications only
  (--poll 1h); (b) the candidate's own polling (ttl/4, with
  le_expire_lapsed before each try).

Database ll_compiled has the compiled extension, served by a worker;
ll_portable has portable/leaderlock.sql, installed by a role that is not a
superuser.

Usage: editions.py PORT CLI [--clients N] [--seconds S] [--reps N]
                   [--rounds N] [--ttl S] [--json FILE]
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import tempfile
import threading
import time

import bench

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
ADMIN = "ll_bench_admin"
DBS = {"compiled": "ll_compiled", "portable": "ll_portable"}


def setup(port):
    c = bench.connect(port)
    if not bench.one(c, "SELECT count(*) FROM pg_roles WHERE rolname = %s", (ADMIN,)):
        bench.q(c, f"CREATE ROLE {ADMIN} LOGIN CREATEROLE NOSUPERUSER")
    for db in DBS.values():
        bench.q(c, f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
        bench.q(c, f"CREATE DATABASE {db} OWNER {ADMIN}")
    c.close()
    c = bench.connect(port, dbname=DBS["compiled"])
    bench.q(c, "CREATE EXTENSION leaderlock")
    deadline = time.monotonic() + 30
    while not bench.one(c, "SELECT le_worker_running()"):
        if time.monotonic() > deadline:
            raise RuntimeError("no worker serves ll_compiled")
        time.sleep(0.1)
    c.close()
    c = bench.connect(port, dbname=DBS["portable"])
    bench.q(c, f"ALTER SCHEMA public OWNER TO {ADMIN}")
    bench.q(c, "REVOKE CREATE ON SCHEMA public FROM PUBLIC")
    c.close()
    subprocess.run([f"{bench.PG_BIN}/psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-1", "-h", bench.HOST,
                    "-p", str(port), "-U", ADMIN, "-d", DBS["portable"],
                    "-f", os.path.join(REPO, "portable", "leaderlock.sql")],
                   check=True, stdout=subprocess.DEVNULL)
    for edition, db in DBS.items():
        c = bench.connect(port, dbname=db)
        got = bench.one(c, "SELECT le_capabilities()->>'edition'")
        assert got == edition, (db, got)
        c.close()


def throughput(port, args):
    """Renew and contended try-acquire, the editions alternating run by run."""
    n = args.clients
    renew = "SELECT le_renew('r-' || :client_id, 'c' || :client_id, '10 seconds');\n"
    contend = "\\set k random(1, 4)\nSELECT le_try_acquire('t-' || :k, 'c' || :client_id, '1 second');\n"
    runs = {e: {"renew": [], "try_acquire": []} for e in DBS}
    for _ in range(args.reps):
        for edition, db in DBS.items():
            c = bench.connect(port, dbname=db)
            bench.q(c, "SELECT le_force_release(key) FROM leaderlock WHERE key LIKE 'r-%%' OR key LIKE 't-%%'")
            for i in range(n):
                assert bench.one(c, "SELECT le_try_acquire(%s, %s, '1 hour')", (f"r-{i}", f"c{i}"))
            runs[edition]["renew"].append(bench.pgbench(port, renew, n, seconds=args.seconds, dbname=db))
            held = bench.one(c, "SELECT count(*) FROM leaderlock WHERE key LIKE 'r-%%' "
                                "AND holder = 'c' || substr(key, 3) AND expires_at > clock_timestamp()")
            assert held == n, f"{edition}: only {held} of {n} renewed leases still held"
            runs[edition]["try_acquire"].append(bench.pgbench(port, contend, n, seconds=args.seconds, dbname=db))
            c.close()
    out = {}
    for edition in DBS:
        out[edition] = {w: {"median_tps": statistics.median(r), "runs": r} for w, r in runs[edition].items()}
        bench.say(f"  {edition:<9} renew {out[edition]['renew']['median_tps']:8.0f} tps, "
                  f"contended try-acquire {out[edition]['try_acquire']['median_tps']:8.0f} tps "
                  f"({n} clients, {args.reps} x {args.seconds} s)")
    return out


def handover(port, edition, rounds):
    """A waiting le_acquire returns this long after the holder's le_release started (ms)."""
    db = DBS[edition]
    holder, waiter = bench.connect(port, dbname=db), bench.connect(port, dbname=db)
    lags = []
    for r in range(rounds):
        key = f"h-{r}"
        assert bench.one(holder, "SELECT le_try_acquire(%s, 'holder', '1 minute')", (key,))
        done = {}

        def wait():
            done["ok"] = bench.one(waiter, "SELECT le_acquire(%s, 'waiter', '1 minute', '10 seconds')", (key,))
            done["at"] = time.monotonic()
        t = threading.Thread(target=wait)
        t.start()
        time.sleep(0.15)  # asleep by now in either edition
        start = time.monotonic()
        assert bench.one(holder, "SELECT le_release(%s, 'holder')", (key,))
        t.join()
        assert done["ok"], f"{edition}: the waiter did not get {key}"
        lags.append((done["at"] - start) * 1000)
        bench.q(holder, "SELECT le_force_release(%s)", (key,))
    holder.close()
    waiter.close()
    return bench.summary(lags)


def cli_run(cli, port, db, key, me, ttl, work, extra=()):
    log = os.path.join(work, f"{me}.log")
    dsn = f"host={bench.HOST} port={port} user=postgres dbname={db}"
    with open(log, "w") as f:
        p = subprocess.Popen([cli, "--dsn", dsn, "run", "--log-format", "json", "--key", key, "--id", me,
                              "--ttl", f"{ttl}s", *extra, "--", "sleep", "1000"],
                             stderr=f, stdin=subprocess.DEVNULL)
    return p, log


def logged(path, name, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open(path) as f:
            if any(json.loads(line)["event"] == name for line in f if line.startswith("{")):
                return True
        time.sleep(0.01)
    raise RuntimeError(f"no {name} in {path}")


def failover(port, cli, edition, mode, rounds, ttl):
    """Delay (ms, server clock) from a killed leader's expires_at to its
    successor's acquired_at."""
    db = DBS[edition]
    c = bench.connect(port, dbname=db)
    stop = threading.Event()
    sweeper = None
    if mode == "le_expire_lapsed every second":
        def sweep():
            s = bench.connect(port, dbname=db)
            while not stop.wait(1.0):
                bench.one(s, "SELECT le_expire_lapsed()")
            s.close()
        sweeper = threading.Thread(target=sweep)
        sweeper.start()
    extra = ("--poll", "1h") if mode == "le_expire_lapsed every second" else ()
    delays = []
    work = tempfile.mkdtemp(prefix="leaderlock-editions-")
    try:
        for r in range(rounds):
            key = f"f-{mode.split()[0]}-{r}"
            leader, leader_log = cli_run(cli, port, db, key, f"leader-{r}", ttl, work)
            logged(leader_log, "leading", 10)
            follower, follower_log = cli_run(cli, port, db, key, f"follower-{r}", ttl, work, extra)
            logged(follower_log, "refused", 10)
            leader.send_signal(signal.SIGKILL)
            leader.wait()
            time.sleep(0.1)  # a renewal already sent has committed or never will
            expires = bench.one(c, "SELECT expires_at FROM leaderlock WHERE key = %s", (key,))
            logged(follower_log, "leading", ttl + 10)
            acquired, holder = bench.q(c, "SELECT acquired_at, holder FROM leaderlock WHERE key = %s", (key,))[0]
            assert holder == f"follower-{r}", holder
            delays.append((acquired - expires).total_seconds() * 1000)
            follower.send_signal(signal.SIGTERM)
            follower.wait()
    finally:
        stop.set()
        if sweeper:
            sweeper.join()
        c.close()
    return bench.summary(delays)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("port", type=int)
    ap.add_argument("cli")
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--ttl", type=float, default=2.0)
    ap.add_argument("--json")
    args = ap.parse_args()
    setup(args.port)
    bench.say("editions side by side: throughput")
    out = {"throughput": throughput(args.port, args), "handover_ms": {}, "failover_ms": {}}
    for edition in DBS:
        out["handover_ms"][edition] = h = handover(args.port, edition, args.rounds * 4)
        bench.say(f"  {edition:<9} handover, release to le_acquire returning: p50 {h['p50']:.1f} ms, "
                  f"p99 {h['p99']:.1f} ms ({h['rounds']} rounds)")
    for edition, mode in (("compiled", "worker"), ("portable", "le_expire_lapsed every second"),
                          ("portable", "client polling")):
        f = failover(args.port, args.cli, edition, mode, args.rounds, args.ttl)
        out["failover_ms"][f"{edition}, {mode}"] = f
        bench.say(f"  {edition:<9} failover after kill -9 ({mode}), expires_at to next acquired_at: "
                  f"p50 {f['p50']:.0f} ms, max {f['max']:.0f} ms ({f['rounds']} rounds, ttl {args.ttl} s)")
    out["environment"] = bench.environment(bench.connect(args.port))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2, default=str)
            f.write("\n")


if __name__ == "__main__":
    main()
