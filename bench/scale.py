"""A million leases on one primary, measured (issue 40).

What leaderlock costs with N live keys (default 1,000,000) against the same
figures with N_SMALL live (default 10,000), in one run on one server, and
etcd 3.4 beside it on the same machine with the same number of keys on
leases. Two kinds of live keys, one after the other, each on a table of its
own making (the other kind's rows deleted, VACUUM FULL in between):

- sessions: S sessions of K keys each (le_open_session, then one statement
  per session: SELECT le_try_acquire_in(...) FROM generate_series(1, K));
- plain: S holders of K single-key leases each (le_try_acquire, one
  statement per holder the same way).

Setup runs those statements over --setup-connections connections at once
(ttl 1 hour: nothing lapses by itself during the run), then VACUUM ANALYZE.
etcd gets S leases (ttl 1 hour) with K keys each (puts with the lease, in
transactions of 128, etcd's default --max-txn-ops, through the HTTP/JSON
gateway as bench/etcd.py), up to --etcd-keys keys.

At each size (small, then grown to large), for each kind:

1. renewal cost, one client, sequential calls, autocommit, prepared
   statements (ROUNDS rounds after a short warm-up; median of the rounds):
   le_renew_session (per key held: a call's time over K), le_renew_all of a
   holder of K leases (per lease), le_renew of random keys (per lease);
   etcd: POST /v3/lease/keepalive of a lease with K keys (per key). Backend
   (etcd process) CPU from /proc; WAL from pg_current_wal_lsn before and
   after each round, over the calls and over the leases renewed;
2. worker expiry lag: LAG_EXPIRING sessions of one key each (sessions) or
   leases (plain) lapse at random times over LAG_WINDOW seconds while the N
   stay live and a client renews live ones at RENEW_RATE a second; a
   LISTENing client takes each `expired` notification's arrival time minus
   its expires_at (as worker_lag.py); also the worker's CPU meanwhile;
   LAG_REPS times, the medians of their p50, p99 and max reported;
3. (sessions) vacating VACATE sessions of K keys at once, VACATE_REPS
   times (median): all renewed in one statement to lapse VACATE_IN seconds
   later; from the first of their expires_at to the last `expired`
   notification received. And le_close_session of as many (loaded again),
   all in one statement: from the statement's start to the last `released`
   received. Also the CPU time of the process that vacated them (the
   worker; the closing backend), and, once, the statements the worker runs
   for those sessions, timed from this client in a transaction rolled
   back. etcd: VACATE leases of K keys left to lapse together, from their
   expiry (the last keepalive's answer + ttl) to the last delete event
   received on a watch of their keys;
4. acquisition throughput, one client, sequential, autocommit: le_try_acquire
   of new keys and le_try_acquire_in of new keys under one session;
5. size: pg_total_relation_size of leaderlock (+ leaderlock_sessions) over
   N, right after the load; etcd's db size over its keys;
   plans and timings (EXPLAIN (ANALYZE, BUFFERS, WAL), under the worker's
   settings, in a transaction rolled back) of the worker's statements.

At the large size, for each kind: STEADY seconds of renewals as fast as one
client goes (le_renew_session round robin over the sessions; le_renew_all
round robin over the holders), sampling pg_stat_user_tables (n_dead_tup,
autovacuum runs) and any autovacuum at work on the tables every second.

Targets are printed next to the figures, met or missed. Other jobs may
share the machine: every measurement records how busy its CPUs were
(/proc/stat), and the backend's CPU time per call is reported beside the
wall time (it moves less with other jobs' load). The header says how the
extension the server runs was built (release, or a dev build at
opt-level 0, whose own Rust code runs many times slower).

Usage: scale.py PG_PORT ETCD_URL [--sessions S] [--small-sessions S0] [--keys K]
       [--vacate V] [--vacate-reps R] [--rounds R] [--renew-calls C] [--renew-keys C]
       [--acquire A] [--lag-expiring E] [--lag-window S] [--lag-reps R] [--renew-rate R]
       [--steady S] [--vacate-in S] [--etcd-vacate-ttl S] [--etcd-keys M]
       [--setup-connections C] [--etcd-pid PID] [--json FILE]
"""
import argparse
import http.client
import json
import os
import random
import select
import statistics
import subprocess
import threading
import time

import bench
from etcd import Etcd, b64
from queries import load as load_queries

QUERIES = load_queries()
TTL_S = 3600
ETCD_TXN_OPS = 128  # etcd's default --max-txn-ops
# The worker's session settings (queries::PIN_SESSION) that change plans.
WORKER_SETTINGS = ["SET enable_seqscan = off", "SET jit = off", "SET max_parallel_workers_per_gather = 0"]


def fail(message):
    raise SystemExit(f"scale.py: FAILED: {message}")


def extension_build(pid):
    """How the leaderlock.so the server process `pid` has mapped was
    built, from the paths its debug information names: "release",
    "dev (opt-level 0)", or None when it cannot tell (the mapping is read
    through /proc, so a library replaced since the server started is still
    the one examined)."""
    try:
        with open(f"/proc/{pid}/maps") as f:
            maps = [line.split(maxsplit=5) for line in f if "/leaderlock.so" in line]
    except OSError:
        return None
    data = None
    # through the mapping (root), else the file the mapping names
    for path in ([f"/proc/{pid}/map_files/{m[0]}" for m in maps[:1]] + [m[5].strip() for m in maps[:1]]):
        try:
            with open(path, "rb") as f:
                data = f.read()
            break
        except OSError:
            continue
    if data is None:
        return None
    if b"/target/debug/build/" in data:
        return "dev (opt-level 0)"
    if b"/target/release/build/" in data:
        return "release"
    return None


class Pg(bench.Backend):
    """bench.Backend, with its port, the server's version and rows."""

    def __init__(self, port):
        super().__init__(port)
        self.port = port
        self.version = self.one("SELECT current_setting('server_version_num')::int")

    def row(self, sql, args=()):
        self.cur.execute(sql, args)
        return self.cur.fetchone()

    def rows(self, sql, args=()):
        self.cur.execute(sql, args)
        return self.cur.fetchall()

    def wal_fpi(self):
        """(WAL position, full-page images written so far by the server,
        pg_stat_wal.wal_fpi, with this backend's own counts flushed first;
        None before PostgreSQL 15)."""
        if self.version < 150000:
            return self.wal(), None
        lsn = int(self.one("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn FROM pg_stat_force_next_flush()"))
        return lsn, int(self.one("SELECT wal_fpi FROM pg_stat_wal"))


# ---------------------------------------------------------------- setup

def parallel(port, jobs, fn, connections):
    """fn(cursor, job) for every job, over `connections` connections at
    once; the results in the jobs' order."""
    results = [None] * len(jobs)
    todo = iter(range(len(jobs)))
    lock = threading.Lock()
    errors = []

    def work():
        c = bench.connect(port)
        cur = c.cursor()
        try:
            while not errors:
                with lock:
                    i = next(todo, None)
                if i is None:
                    return
                results[i] = fn(cur, jobs[i])
        except BaseException as e:  # noqa: B902 - reported below, in the main thread
            errors.append(e)
        finally:
            c.close()

    threads = [threading.Thread(target=work) for _ in range(max(1, min(connections, len(jobs))))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


def open_session(cur, job):
    """A session `sid` holding `keys` keys named prefix || 1..keys; its uuid."""
    sid, prefix, keys, ttl = job
    cur.execute("SELECT le_open_session(%s, make_interval(secs => %s))", (sid, ttl))
    s = cur.fetchone()[0]
    cur.execute("SELECT count(*) FILTER (WHERE le_try_acquire_in(%s::uuid, %s || i)) "
                "FROM generate_series(1, %s) i", (s, prefix, keys))
    got = cur.fetchone()[0]
    if got != keys:
        fail(f"le_try_acquire_in took {got} of {keys} keys under session {sid}")
    return s


def acquire_plain(cur, job):
    """`keys` leases named prefix || 1..keys held by `holder`."""
    holder, prefix, keys, ttl = job
    cur.execute("SELECT count(*) FILTER (WHERE le_try_acquire(%s || i, %s, make_interval(secs => %s))) "
                "FROM generate_series(1, %s) i", (prefix, holder, ttl, keys))
    got = cur.fetchone()[0]
    if got != keys:
        fail(f"le_try_acquire took {got} of {keys} keys for {holder}")
    return holder


class Live:
    """The live keys of one kind: S sessions (or holders) of K keys."""

    def __init__(self, kind, k):
        self.kind, self.k = kind, k
        self.ids = []      # session ids (sessions) or holders (plain)
        self.handles = []  # session uuids (sessions) or holders (plain)

    @property
    def n(self):
        return len(self.handles) * self.k

    def prefix(self, j):
        return f"sc-{'s' if self.kind == 'sessions' else 'h'}{j}-"

    def key(self, j, i):
        return f"{self.prefix(j)}{i}"

    def grow(self, port, count, connections):
        first = len(self.handles)
        jobs = [(self.prefix(j)[:-1], self.prefix(j), self.k, TTL_S) for j in range(first, count)]
        fn = open_session if self.kind == "sessions" else acquire_plain
        self.ids += [j[0] for j in jobs]
        self.handles += parallel(port, jobs, fn, connections)


def vacuum(pg, full=False):
    for t in ("leaderlock", "leaderlock_sessions"):
        pg.run(f"VACUUM {'FULL ' if full else ''}{t}")  # the extension's tables: names, not input
        pg.run(f"ANALYZE {t}")


def clean(pg, full=True):
    pg.run("DELETE FROM leaderlock WHERE key LIKE 'sc-%%'")
    pg.run("DELETE FROM leaderlock_sessions WHERE id LIKE 'sc-%%'")
    vacuum(pg, full)


def sizes(pg, n):
    out = {}
    for t in ("leaderlock", "leaderlock_sessions"):
        total, table, index = pg.row("SELECT pg_total_relation_size(%s::regclass), pg_table_size(%s::regclass), "
                                     "pg_indexes_size(%s::regclass)", (t, t, t))
        out[t] = {"total_bytes": total, "table_bytes": table, "index_bytes": index}
    out["live_keys"] = n
    total = out["leaderlock"]["total_bytes"] + out["leaderlock_sessions"]["total_bytes"]
    out["bytes_per_lease"] = total / n
    out["table_bytes_per_lease"] = (out["leaderlock"]["table_bytes"] + out["leaderlock_sessions"]["table_bytes"]) / n
    out["index_bytes_per_lease"] = (out["leaderlock"]["index_bytes"] + out["leaderlock_sessions"]["index_bytes"]) / n
    return out


# ---------------------------------------------------------------- etcd

def etcd_put(e, keys, lease, between=None):
    """Puts each key with `lease`, ETCD_TXN_OPS to a transaction; calls
    between() after each transaction."""
    for i in range(0, len(keys), ETCD_TXN_OPS):
        e.call("/v3/kv/txn", {"success": [{"request_put": {"key": b64(k), "value": b64("h"), "lease": lease}}
                                          for k in keys[i:i + ETCD_TXN_OPS]]})
        if between:
            between()


class EtcdLive:
    """etcd: S leases with K keys each."""

    def __init__(self, e, k):
        self.e, self.k, self.leases = e, k, []

    @property
    def n(self):
        return len(self.leases) * self.k

    def grow(self, count):
        for j in range(len(self.leases), count):
            lease = self.e.grant(TTL_S)
            etcd_put(self.e, [f"/sc/l{j}/{i}" for i in range(self.k)], lease)
            self.leases.append(lease)
        r = self.e.call("/v3/kv/range", {"key": b64("/sc/l"), "range_end": b64("/sc/m"), "count_only": True})
        if int(r.get("count", 0)) != self.n:
            fail(f"etcd holds {r.get('count')} keys of {self.n}")

    def status(self):
        """The db's size, after compacting the history (etcd keeps every
        revision until then; deployments compact every few minutes)."""
        rev = self.e.call("/v3/kv/range", {"key": b64("/sc/"), "count_only": True})["header"]["revision"]
        self.e.call("/v3/kv/compaction", {"revision": rev, "physical": True})
        r = self.e.call("/v3/maintenance/status", {})
        return {"db_size_bytes": int(r.get("dbSize", 0)), "db_size_in_use_bytes": int(r.get("dbSizeInUse", 0))}


class Watch:
    """A watch of etcd keys from `prefix` (HTTP/JSON gateway, streamed):
    the arrival time of each DELETE event, until `count` or `timeout`."""

    def __init__(self, url, prefix, count, timeout):
        host, port = url.split("//")[1].split(":")
        self.conn = http.client.HTTPConnection(host, int(port), timeout=timeout + 10)
        end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        self.conn.request("POST", "/v3/watch", json.dumps({"create_request": {"key": b64(prefix),
                                                                              "range_end": b64(end)}}))
        self.resp = self.conn.getresponse()
        first = json.loads(self.resp.readline())
        if not first.get("result", {}).get("created"):
            fail(f"etcd watch not created: {first}")
        self.count, self.deadline, self.deletes = count, time.monotonic() + timeout, []
        self.thread = threading.Thread(target=self.read, daemon=True)
        self.thread.start()

    def read(self):
        while len(self.deletes) < self.count and time.monotonic() < self.deadline:
            line = self.resp.readline()
            if not line:
                return
            now = time.time()
            for ev in json.loads(line).get("result", {}).get("events", []):
                if ev.get("type") == "DELETE":
                    self.deletes.append(now)

    def finish(self):
        self.thread.join(max(0.0, self.deadline - time.monotonic()) + 1)
        self.conn.close()
        return self.deletes


def etcd_vacate(e, url, leases, k, ttl, tag):
    """`leases` leases of k keys each lapse together: from their expiry to
    the last delete event received on a watch."""
    prefix = f"/sc/vac{tag}/"
    granted = [e.grant(ttl) for _ in range(leases)]
    last = [time.monotonic()]

    def keep_up():  # the load takes longer than the ttl
        if time.monotonic() - last[0] > 1:
            for lease in granted:
                e.keepalive(lease)
            last[0] = time.monotonic()

    for j, lease in enumerate(granted):
        etcd_put(e, [f"{prefix}{j}/{i}" for i in range(k)], lease, keep_up)
    watch = Watch(url, prefix, leases * k, timeout=ttl + 60)
    answered = []
    for lease in granted:
        if e.keepalive(lease) <= 0:
            fail("etcd: a vacated lease expired during the load")
        answered.append(time.time())
    deletes = watch.finish()
    if len(deletes) != leases * k:
        fail(f"etcd: {len(deletes)} delete events of {leases * k}")
    first_expiry, last_expiry = answered[0] + ttl, answered[-1] + ttl
    return {"keys": leases * k, "leases": leases, "ttl_s": ttl, "received": len(deletes),
            "to_last_received_ms": (max(deletes) - first_expiry) * 1000,
            "to_first_received_ms": (min(deletes) - first_expiry) * 1000,
            "from_last_expiry_ms": (max(deletes) - last_expiry) * 1000,
            "expiries_spread_ms": (last_expiry - first_expiry) * 1000}


# ---------------------------------------------------------------- measuring

def measure(fn, cpu, wal=None):
    """(wall ms, CPU ms of the process doing the work, WAL bytes written,
    full-page images among them; None for what is not measured). `wal`:
    Pg.wal_fpi."""
    w0, f0 = wal() if wal else (None, None)
    c0 = cpu() if cpu else None
    t0 = time.perf_counter()
    fn()
    wall = (time.perf_counter() - t0) * 1000
    c1 = cpu() if cpu else None
    w1, f1 = wal() if wal else (None, None)
    return (wall, (c1 - c0) * 1000 if cpu else None, w1 - w0 if wal else None,
            f1 - f0 if f0 is not None else None)


def rounds_of(make_round, rounds, calls, leases_per_call, cpu, wal=None, warm_up=None):
    """Runs make_round(r)() `rounds` times (after warm_up()); per call and
    per lease figures from the median round."""
    if warm_up:
        warm_up()
    machine = Machine()
    ms, cpu_ms, wal_b, fpi = [], [], [], []
    for r in range(rounds):
        w, c, b, f = measure(make_round(r), cpu, wal)
        ms.append(w)
        cpu_ms.append(c)
        wal_b.append(b)
        fpi.append(f)
    med = statistics.median(ms)
    leases = calls * leases_per_call
    out = {"calls_per_round": calls, "leases_per_call": leases_per_call, "rounds_ms": ms, "cpu_ms": cpu_ms,
           "wal_bytes": wal_b, "full_page_images": fpi, "median_ms": med, "per_call_us": med * 1000 / calls,
           "per_lease_us": med * 1000 / leases, "machine": machine.since()}
    cpus = [c for c in cpu_ms if c is not None]
    # The kernel counts CPU in 10 ms ticks: a mean over the rounds, when it
    # adds up to ten ticks or more.
    out["cpu_per_lease_us"] = sum(cpus) * 1000 / (leases * len(cpus)) if cpus and sum(cpus) >= 100 else None
    if None not in wal_b:
        out["wal_per_call_bytes"] = statistics.median(wal_b) / calls
        out["wal_per_lease_bytes"] = statistics.median(wal_b) / leases
    if fpi and None not in fpi:
        out["full_page_images_per_call"] = statistics.median(fpi) / calls
    return out


def renew_sessions(pg, live, args):
    pg.run("PREPARE sc_renew_session(uuid) AS SELECT le_renew_session($1)")
    calls = args.renew_calls
    handles = live.handles

    def make(r, base=0):
        def go():
            for i in range(calls):
                pg.cur.execute("EXECUTE sc_renew_session(%s)", (handles[(base + r * calls + i) % len(handles)],))
                if pg.cur.fetchone()[0] is not True:
                    fail("le_renew_session returned false")
        return go

    out = rounds_of(make, args.rounds, calls, live.k, pg.cpu, pg.wal_fpi, warm_up=make(0, len(handles) // 2))
    pg.run("DEALLOCATE sc_renew_session")
    return out


def renew_all(pg, live, args):
    pg.run("PREPARE sc_renew_all(text) AS SELECT le_renew_all($1)")
    calls = min(args.renew_calls, max(1, len(live.handles)))
    holders = live.handles

    def make(r, base=0):
        def go():
            for i in range(calls):
                pg.cur.execute("EXECUTE sc_renew_all(%s)", (holders[(base + r * calls + i) % len(holders)],))
                got = pg.cur.fetchone()[0]
                if got != live.k:
                    fail(f"le_renew_all returned {got}, expected {live.k}")
        return go

    out = rounds_of(make, args.rounds, calls, live.k, pg.cpu, pg.wal_fpi,
                    warm_up=make(0, len(holders) // 2) if len(holders) > 1 else None)
    pg.run("DEALLOCATE sc_renew_all")
    return out


def renew_each(pg, live, args):
    pg.run("PREPARE sc_renew(text, text) AS SELECT le_renew($1, $2)")
    rnd = random.Random(40)
    calls = args.renew_keys

    def pick():
        j = rnd.randrange(len(live.handles))
        return live.key(j, rnd.randrange(1, live.k + 1)), live.handles[j]

    def make(_r):
        picks = [pick() for _ in range(calls)]

        def go():
            for key, holder in picks:
                pg.cur.execute("EXECUTE sc_renew(%s, %s)", (key, holder))
                if pg.cur.fetchone()[0] is not True:
                    fail(f"le_renew of {key} returned false")
        return go

    out = rounds_of(make, args.rounds, calls, 1, pg.cpu, pg.wal_fpi, warm_up=make(-1))
    pg.run("DEALLOCATE sc_renew")
    return out


def etcd_keepalives(e, elive, args, etcd_cpu):
    calls = args.renew_calls

    def make(r, base=0):
        def go():
            for i in range(calls):
                if e.keepalive(elive.leases[(base + r * calls + i) % len(elive.leases)]) <= 0:
                    fail("etcd keepalive: lease expired")
        return go

    return rounds_of(make, args.rounds, calls, elive.k, etcd_cpu, warm_up=make(0, len(elive.leases) // 2))


def acquisitions(pg, args, tag):
    """le_try_acquire of new keys, le_try_acquire_in of new keys under one
    session: acquisitions a second (median of the rounds)."""
    pg.run("PREPARE sc_acq(text) AS SELECT le_try_acquire($1, 'sc-acq', interval '1 hour')")
    pg.run("PREPARE sc_acq_in(uuid, text) AS SELECT le_try_acquire_in($1, $2)")
    s = pg.one("SELECT le_open_session('sc-acq', interval '1 hour')")
    out = {}
    for name, stmt, args_of in [("le_try_acquire", "EXECUTE sc_acq(%s)", lambda key: (key,)),
                                ("le_try_acquire_in", "EXECUTE sc_acq_in(%s, %s)", lambda key: (s, key))]:
        def make(r, name=name, stmt=stmt, args_of=args_of):
            keys = [f"sc-acq-{tag}-{name}-{r}-{i}" for i in range(args.acquire)]

            def go():
                for key in keys:
                    pg.cur.execute(stmt, args_of(key))
                    if pg.cur.fetchone()[0] is not True:
                        fail(f"{name} of a new key returned false")
            return go
        make(-1)()  # warm-up
        r = rounds_of(make, args.rounds, args.acquire, 1, pg.cpu, pg.wal_fpi)
        r["per_second"] = args.acquire * 1000 / r["median_ms"]
        out[name] = r
    pg.run("DEALLOCATE sc_acq")
    pg.run("DEALLOCATE sc_acq_in")
    pg.run("DELETE FROM leaderlock WHERE key LIKE 'sc-acq-%%'")
    pg.run("DELETE FROM leaderlock_sessions WHERE id = 'sc-acq'")
    return out


# ---------------------------------------------------------------- worker lag

class SessionExpiryLag(bench.ExpiryLag):
    """ExpiryLag for sessions: `count` sessions of one key each, lapsing at
    random times over `window` seconds; the lag of each key's `expired`."""

    def start(self):
        self.listener = bench.connect(self.port, dbname=self.dbname)
        bench.q(self.listener, "LISTEN leaderlock")
        c = bench.connect(self.port, dbname=self.dbname)
        got = bench.one(c, "SELECT count(*) FILTER (WHERE le_try_acquire_in(s, %s || i)) FROM "
                           "(SELECT i, le_open_session(%s || i, make_interval(secs => 1 + random() * %s)) s "
                           "FROM generate_series(1, %s) i) x", (self.prefix, self.prefix, self.window, self.count))
        c.close()
        if got != self.count:
            fail(f"lag sessions: {got} of {self.count} keys acquired")
        self.thread = threading.Thread(target=self.listen, daemon=True)
        self.thread.start()


def worker_lag(port, live, args):
    stop = threading.Event()
    renewed = [0]

    def renewer():
        c = bench.connect(port)
        rnd = random.Random(41)
        period = 1.0 / args.renew_rate if args.renew_rate > 0 else None
        next_at = time.monotonic()
        while period and not stop.is_set():
            j = rnd.randrange(len(live.handles))
            if live.kind == "sessions":
                ok = bench.one(c, "SELECT le_renew_session(%s)", (live.handles[j],))
            else:
                ok = bench.one(c, "SELECT le_renew(%s, %s)", (live.key(j, rnd.randrange(1, live.k + 1)),
                                                               live.handles[j]))
            if not ok:
                fail("a live lease was not renewed during the lag measurement")
            renewed[0] += 1
            next_at += period
            time.sleep(max(0.0, next_at - time.monotonic()))
        c.close()

    c = bench.connect(port)
    pid = bench.worker_pid(c)
    lag_class = SessionExpiryLag if live.kind == "sessions" else bench.ExpiryLag
    lag = lag_class(port, args.lag_expiring, args.lag_window, "sc-lag-", grace=30)
    rt = threading.Thread(target=renewer, daemon=True)
    rt.start()
    lag.start()
    machine = Machine(c)
    cpu0, t0 = bench.cpu_seconds(pid), time.monotonic()
    heard = lag.finish()
    cpu = (bench.cpu_seconds(pid) - cpu0) / (time.monotonic() - t0)
    load = machine.since()
    stop.set()
    rt.join()
    bench.q(c, "DELETE FROM leaderlock WHERE key LIKE 'sc-lag-%%'")
    bench.q(c, "DELETE FROM leaderlock_sessions WHERE id LIKE 'sc-lag-%%'")
    c.close()
    if heard["received"] != args.lag_expiring:
        fail(f"worker lag: {heard['received']} of {args.lag_expiring} expiries heard")
    return {"expiring": args.lag_expiring, "window_s": args.lag_window, "renewals_per_s": args.renew_rate,
            "renewals_done": renewed[0], "lag_ms": heard["lag_ms"], "check_lag_ms": heard["check_lag_ms"],
            "worker_cpu_percent": 100 * cpu, "machine": load}


# ---------------------------------------------------------------- vacating

class Collector:
    """LISTENs on leaderlock and keeps (arrival time, payload) of each
    notification of `event` for a key starting `prefix`, until `count`
    arrived or `timeout` passed. Payloads are parsed afterwards, so that
    the arrival times are the client's reading of the socket."""

    def __init__(self, port, prefix, event, count, timeout):
        self.conn = bench.connect(port)
        bench.q(self.conn, "LISTEN leaderlock")
        self.marks = (f'"event":"{event}"', f'"key":"{prefix}')
        self.count, self.deadline, self.got = count, time.monotonic() + timeout, []
        self.thread = threading.Thread(target=self.listen, daemon=True)
        self.thread.start()

    def listen(self):
        c, (event, key) = self.conn, self.marks
        while len(self.got) < self.count and time.monotonic() < self.deadline:
            select.select([c], [], [], 0.5)
            c.poll()
            now = time.time()
            batch = c.notifies[:]
            del c.notifies[:]
            self.got += [(now, n.payload) for n in batch if event in n.payload and key in n.payload]

    def finish(self):
        self.thread.join()
        self.conn.close()
        return [(t, json.loads(p)) for t, p in self.got]


def vacate(pg, args, k, how, tag, emulate=False):
    """args.vacate sessions of k keys end together: `expire` (renewed in one
    statement to lapse args.vacate_in seconds later) or `close`
    (le_close_session of all in one statement). Times to the notifications
    received. `emulate`: first times the worker's statements for these
    sessions from this client, in a transaction rolled back
    (worker_statements)."""
    v = args.vacate
    prefix = f"sc-vac{tag}-"
    jobs = [(f"{prefix}{j}", f"{prefix}{j}-", k, TTL_S) for j in range(v)]
    t_load = time.monotonic()
    handles = parallel(pg.port, jobs, open_session, args.setup_connections)
    load_s = time.monotonic() - t_load
    pg.run("ANALYZE leaderlock")
    statements = worker_statements(pg, handles) if emulate else None
    event = "expired" if how == "expire" else "released"
    machine = Machine(pg.conn)
    # CPU time of the process that vacates: the worker, or this backend
    doer = bench.worker_pid(pg.conn) if how == "expire" else pg.pid
    doer_cpu = bench.cpu_seconds(doer)
    col = Collector(pg.port, prefix, event, v * k, timeout=args.vacate_in + 120)
    t0 = time.time()
    if how == "expire":
        got = pg.one("SELECT count(*) FILTER (WHERE le_renew_session(s, make_interval(secs => %s))) "
                     "FROM unnest(%s::uuid[]) s", (args.vacate_in, handles))
        first, last = pg.row("SELECT extract(epoch FROM min(expires_at)), extract(epoch FROM max(expires_at)) "
                             "FROM leaderlock_sessions WHERE session = ANY(%s::uuid[])", (handles,))
        start, statement_ms = float(first), None
        spread_ms = (float(last) - float(first)) * 1000
    else:
        got = pg.one("SELECT count(*) FILTER (WHERE le_close_session(s)) FROM unnest(%s::uuid[]) s", (handles,))
        start, statement_ms, spread_ms = t0, (time.time() - t0) * 1000, None
    if got != v:
        fail(f"vacate ({how}): {got} of {v} sessions renewed or closed")
    heard = col.finish()
    load = machine.since()
    doer_cpu = bench.cpu_seconds(doer) - doer_cpu
    left = pg.one("SELECT count(*) FROM leaderlock WHERE key LIKE %s AND holder IS NOT NULL", (prefix + "%",))
    pg.run("DELETE FROM leaderlock WHERE key LIKE %s", (prefix + "%",))
    pg.run("DELETE FROM leaderlock_sessions WHERE id LIKE %s", (prefix + "%",))
    if len(heard) != v * k or left:
        fail(f"vacate ({how}): {len(heard)} of {v * k} notifications received, {left} keys still held")
    received = [t for t, _ in heard]
    at = [bench.parse_time(p["at"]) for _, p in heard]
    return {"how": how, "sessions": v, "keys": v * k, "received": len(heard), "load_s": load_s,
            "statement_ms": statement_ms, "expiries_spread_ms": spread_ms,
            "to_last_received_ms": (max(received) - start) * 1000,
            "to_first_received_ms": (min(received) - start) * 1000,
            "first_at_ms": (min(at) - start) * 1000, "last_at_ms": (max(at) - start) * 1000,
            "per_session_ms": (max(at) - min(at)) * 1000 / max(1, v - 1),
            "delivery_ms": (max(received) - min(received)) * 1000, "machine": load,
            "vacating_process_cpu_ms": doer_cpu * 1000,
            "worker_statements": statements}


NOTIFY_LIKE = ("SELECT count(pg_catalog.pg_notify('leaderlock_scale_probe', '{\"event\":\"expired\",\"key\":\"' "
               "|| k || '\",\"holder\":\"sc-vac\",\"term\":1,\"at\":\"2026-11-28T18:00:00.000000Z\",'"
               "'\"expires_at\":\"2026-11-28T18:00:00.000000Z\",\"reason\":\"session_expired\"}')) "
               "FROM unnest(%s::text[]) k")


def worker_statements(pg, handles):
    """What ending these sessions costs in SQL: the statements the worker
    runs for each lapsed session (session_leases::expire_lapsed and end:
    SESSION_KEYS_LEFT, LOCK_SESSION_KEYS, VACATE_SESSION_KEYS, a pg_notify
    a key with a payload of the same shape, SESSION_KEYS_LEFT,
    DELETE_SESSION, SESSION_KEYS_LEFT), prepared, under the worker's
    settings, run from this client in one transaction, rolled back. Total
    ms of each."""
    for s in WORKER_SETTINGS:
        pg.run(s)
    names = {"SESSION_KEYS_LEFT": "uuid", "LOCK_SESSION_KEYS": "uuid", "DELETE_SESSION": "uuid",
             "VACATE_SESSION_KEYS": "text[], timestamptz, boolean, timestamptz, timestamptz, boolean"}
    for name, types in names.items():
        pg.run(f"PREPARE sc_{name.lower()}({types}) AS {QUERIES[name]}")  # the extension's own text
    spent = {n: 0.0 for n in ("SESSION_KEYS_LEFT", "LOCK_SESSION_KEYS", "VACATE_SESSION_KEYS",
                              "pg_notify (one a key)", "DELETE_SESSION")}
    keys_total = 0

    def timed(name, sql, params):
        t0 = time.perf_counter()
        pg.cur.execute(sql, params)
        rows = pg.cur.fetchall() if pg.cur.description else None
        spent[name] += time.perf_counter() - t0
        return rows

    pg.run("BEGIN")
    try:
        t0 = time.perf_counter()
        for s in handles:
            timed("SESSION_KEYS_LEFT", "EXECUTE sc_session_keys_left(%s)", (s,))
            keys = [r[0] for r in timed("LOCK_SESSION_KEYS", "EXECUTE sc_lock_session_keys(%s)", (s,))]
            keys_total += len(keys)
            timed("VACATE_SESSION_KEYS", "EXECUTE sc_vacate_session_keys(%s, clock_timestamp(), false, NULL, "
                                         "clock_timestamp(), false)", (keys,))
            timed("pg_notify (one a key)", NOTIFY_LIKE, (keys,))
            timed("SESSION_KEYS_LEFT", "EXECUTE sc_session_keys_left(%s)", (s,))
            timed("DELETE_SESSION", "EXECUTE sc_delete_session(%s)", (s,))
            timed("SESSION_KEYS_LEFT", "EXECUTE sc_session_keys_left(%s)", (s,))
        total = time.perf_counter() - t0
    finally:
        pg.run("ROLLBACK")
        for name in names:
            pg.run(f"DEALLOCATE sc_{name.lower()}")
        pg.run("RESET ALL")
    return {"sessions": len(handles), "keys": keys_total, "total_ms": total * 1000,
            "ms": {n: v * 1000 for n, v in spent.items()},
            "us_per_key": {n: v * 1e6 / max(1, keys_total) for n, v in spent.items()}}


class Machine:
    """The machine's CPU (all processes, /proc/stat) and the PostgreSQL
    server's, from now on: other jobs share these 2 cores."""

    def __init__(self, conn=None):
        self.conn = conn
        self.t0, self.busy0 = time.monotonic(), self.busy()
        self.server0 = bench.server_cpu_seconds(conn) if conn else None

    @staticmethod
    def busy():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return (sum(v[:8]) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")  # all but idle and iowait

    def since(self):
        wall = time.monotonic() - self.t0
        cpus = os.cpu_count()
        out = {"seconds": wall, "machine_busy_percent": 100 * (self.busy() - self.busy0) / (wall * cpus),
               "loadavg_1min": os.getloadavg()[0]}
        if self.conn:
            out["server_percent_of_machine"] = (100 * (bench.server_cpu_seconds(self.conn) - self.server0)
                                                / (wall * cpus))
        return out


def median_of(reps, key):
    return statistics.median(r[key] for r in reps)


# ---------------------------------------------------------------- plans

def explain(port, statements):
    """EXPLAIN (ANALYZE, BUFFERS, WAL) of the extension's statements by name,
    with the worker's settings, each in a transaction rolled back:
    {name: {"plan": lines, "execution_ms": float}}."""
    c = bench.connect(port)
    cur = c.cursor()
    for s in WORKER_SETTINGS:
        cur.execute(s)
    out = {}
    for name, types, params in statements:
        cur.execute(f"PREPARE sc_plan({types}) AS {QUERIES[name]}")  # the extension's own text
        try:
            cur.execute("BEGIN")
            cur.execute(f"EXPLAIN (ANALYZE, BUFFERS, WAL) EXECUTE sc_plan{params[0]}", params[1])
            lines = [r[0] for r in cur.fetchall()]
        finally:
            cur.execute("ROLLBACK")
            cur.execute("DEALLOCATE sc_plan")
        ms = [float(x.split(":")[1].split()[0]) for x in lines if x.startswith("Execution Time")]
        out[name] = {"plan": [x if len(x) < 240 else x[:200] + " ...'" for x in lines],
                     "execution_ms": ms[0] if ms else None}
    c.close()
    return out


def session_plans(pg, live):
    s = live.handles[0]
    keys = [r[0] for r in pg.rows("SELECT key FROM leaderlock WHERE session = %s::uuid", (s,))]
    owner = pg.one("SELECT oid FROM pg_roles WHERE rolname = current_user")
    now = "clock_timestamp()"
    return explain(pg.port, [
        ("NEXT_CHECK", "timestamptz", (f"({now})", ())),
        ("NEXT_CHECK_SESSIONS", "timestamptz", (f"({now})", ())),
        ("LOCK_LAPSED_SESSIONS", "timestamptz, bigint", (f"({now}, 1000)", ())),
        ("LOCK_SESSION_KEYS", "uuid", ("(%s)", (s,))),
        ("VACATE_SESSION_KEYS", "text[], timestamptz, boolean, timestamptz, timestamptz, boolean",
         (f"(%s, {now}, false, NULL, {now}, false)", (keys,))),
        ("SESSION_KEYS_LEFT", "uuid", ("(%s)", (s,))),
        ("DELETE_SESSION", "uuid", ("(%s)", (s,))),
        ("RENEW_SESSION", "uuid, timestamptz, interval, oid", (f"(%s, {now}, NULL, %s)", (s, owner))),
    ])


def plain_plans(pg, live):
    holder = live.handles[0]
    keys = [live.key(0, i) for i in range(1, live.k + 1)]
    owner = pg.one("SELECT oid FROM pg_roles WHERE rolname = current_user")
    now = "clock_timestamp()"
    return explain(pg.port, [
        ("NEXT_CHECK", "timestamptz", (f"({now})", ())),
        ("LOCK_LAPSED", "timestamptz, bigint", (f"({now}, 1000)", ())),
        ("VACATE_KEYS", "text[], timestamptz", (f"(%s, {now})", (keys,))),
        ("RENEW_ALL", "text, timestamptz, oid", (f"(%s, {now}, %s)", (holder, owner))),
        ("RENEW", "text, text, timestamptz, interval, oid, bigint",
         (f"(%s, %s, {now}, NULL, %s, NULL)", (keys[0], holder, owner))),
    ])


# ---------------------------------------------------------------- steady load

def steady(pg, live, seconds):
    """`seconds` of renewals as fast as one client goes, sampling the
    tables' statistics and any autovacuum on them every second."""
    stat_conn = bench.connect(pg.port)
    tables = ("leaderlock", "leaderlock_sessions")

    def snapshot():
        bench.q(stat_conn, "SELECT pg_stat_clear_snapshot()")
        out = {}
        for t in tables:
            r = bench.q(stat_conn, "SELECT n_live_tup, n_dead_tup, n_tup_upd, n_tup_hot_upd, autovacuum_count, "
                                   "autoanalyze_count, pg_total_relation_size(relid) FROM pg_stat_user_tables "
                                   "WHERE relid = %s::regclass", (t,))[0]
            out[t] = dict(zip(("live", "dead", "upd", "hot_upd", "autovacuums", "autoanalyzes", "bytes"), r))
        running = bench.q(stat_conn, "SELECT c.relname, p.phase FROM pg_stat_progress_vacuum p "
                                     "JOIN pg_class c ON c.oid = p.relid WHERE c.relname = ANY(%s)", (list(tables),))
        out["vacuum_running"] = {name: phase for name, phase in running}
        out["wal"] = int(bench.one(stat_conn, "SELECT pg_current_wal_lsn() - '0/0'::pg_lsn"))
        return out

    stop = threading.Event()
    samples = []

    def sampler():
        t0 = time.monotonic()
        while not stop.is_set():
            s = snapshot()
            s["t"] = time.monotonic() - t0
            samples.append(s)
            stop.wait(1.0)

    if live.kind == "sessions":
        pg.run("PREPARE sc_steady(uuid) AS SELECT le_renew_session($1)")
    else:
        pg.run("PREPARE sc_steady(text) AS SELECT le_renew_all($1)")
    th = threading.Thread(target=sampler, daemon=True)
    th.start()
    calls, i = 0, 0
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        pg.cur.execute("EXECUTE sc_steady(%s)", (live.handles[i],))
        got = pg.cur.fetchone()[0]
        if got is not True and got != live.k:
            fail(f"steady renewal returned {got}")
        i = (i + 1) % len(live.handles)
        calls += 1
    elapsed = time.monotonic() - t0
    stop.set()
    th.join()
    last = snapshot()
    stat_conn.close()
    pg.run("DEALLOCATE sc_steady")
    first = samples[0]
    out = {"seconds": elapsed, "calls": calls, "leases_renewed": calls * live.k,
           "calls_per_s": calls / elapsed, "leases_per_s": calls * live.k / elapsed,
           "wal_bytes_per_s": (last["wal"] - first["wal"]) / elapsed, "tables": {}, "samples": samples}
    for t in tables:
        upd = last[t]["upd"] - first[t]["upd"]
        out["tables"][t] = {
            "dead_max": max(s[t]["dead"] for s in samples), "dead_at_end": last[t]["dead"],
            "live_at_end": last[t]["live"],
            "autovacuums": last[t]["autovacuums"] - first[t]["autovacuums"],
            "autoanalyzes": last[t]["autoanalyzes"] - first[t]["autoanalyzes"],
            "seconds_with_vacuum_running": sum(1 for s in samples if t in s["vacuum_running"]),
            "updates": upd, "hot_ratio": (last[t]["hot_upd"] - first[t]["hot_upd"]) / upd if upd else None,
            "bytes_before": first[t]["bytes"], "bytes_after": last[t]["bytes"]}
    return out


# ---------------------------------------------------------------- the run

def battery(pg, live, args, tag, elive=None, e=None, etcd_url=None, etcd_cpu=None, large=False):
    """Every figure of one kind at one size."""
    out = {"live_keys": live.n, "sessions" if live.kind == "sessions" else "holders": len(live.handles),
           "keys_each": live.k}
    vacuum(pg)
    out["size"] = sizes(pg, live.n)
    bench.say(f"  {live.kind} {tag}: {live.n:,} live keys, {out['size']['bytes_per_lease']:.0f} bytes a key "
              f"(table and indexes)")
    out["plans"] = session_plans(pg, live) if live.kind == "sessions" else plain_plans(pg, live)
    out["renew"] = {}
    if live.kind == "sessions":
        out["renew"]["le_renew_session"] = renew_sessions(pg, live, args)
    else:
        out["renew"]["le_renew_all"] = renew_all(pg, live, args)
        out["renew"]["le_renew"] = renew_each(pg, live, args)
    for name, r in out["renew"].items():
        fpi = r.get("full_page_images_per_call")
        bench.say(f"    {name}: {r['per_call_us']:,.1f} µs a call, {r['per_lease_us']:,.2f} µs a lease, "
                  f"WAL {r.get('wal_per_call_bytes', 0):,.0f} B a call"
                  + (f" ({fpi:,.2f} full-page images a call)" if fpi is not None else ""))
    if elive is not None:
        out["etcd"] = {"live_keys": elive.n, "leases": len(elive.leases),
                       "keepalive": etcd_keepalives(e, elive, args, etcd_cpu), "status": elive.status()}
        out["etcd"]["bytes_per_key"] = out["etcd"]["status"]["db_size_in_use_bytes"] / elive.n
        ka = out["etcd"]["keepalive"]
        bench.say(f"    etcd keepalive ({elive.n:,} keys on {len(elive.leases):,} leases): "
                  f"{ka['per_call_us']:,.1f} µs a call, {ka['per_lease_us']:,.2f} µs a key")
    out["acquire"] = acquisitions(pg, args, tag + live.kind[0])
    bench.say("    acquisitions/s: " + ", ".join(f"{n} {r['per_second']:,.0f}" for n, r in out["acquire"].items()))
    reps = []
    for _ in range(args.lag_reps):
        reps.append(worker_lag(pg.port, live, args))
        lag, check, m = reps[-1]["lag_ms"], reps[-1]["check_lag_ms"], reps[-1]["machine"]
        bench.say(f"    worker lag ({args.lag_expiring} expiring): p50 {lag['p50']:.1f} / p99 {lag['p99']:.1f} / "
                  f"max {lag['max']:.1f} ms (to the worker's check: p50 {check['p50']:.1f} / p99 "
                  f"{check['p99']:.1f} ms); worker CPU {reps[-1]['worker_cpu_percent']:.1f} %; machine busy "
                  f"{m['machine_busy_percent']:.0f} %, server {m['server_percent_of_machine']:.0f} %, "
                  f"load average {m['loadavg_1min']:.1f}")
    out["lag"] = {"reps": reps}  # the medians of the repetitions' figures
    for figure in ("lag_ms", "check_lag_ms"):
        out["lag"][figure] = {q: statistics.median(x[figure][q] for x in reps) for q in ("p50", "p99", "max")}
    if live.kind == "sessions":
        out["vacate"] = {}
        for how in ("expire", "close"):
            reps = [vacate(pg, args, live.k, how, f"{tag}{how[0]}{r}", emulate=how == "close" and not r)
                    for r in range(args.vacate_reps)]
            out["vacate"][how] = {"reps": reps, "to_last_received_ms": median_of(reps, "to_last_received_ms")}
            bench.say(f"    {how} {args.vacate} sessions x {live.k} keys: last notification after "
                      + ", ".join(f"{r['to_last_received_ms']:,.0f}" for r in reps) + " ms (first and last `at`: "
                      + ", ".join(f"{r['first_at_ms']:,.0f}-{r['last_at_ms']:,.0f}" for r in reps)
                      + " ms; its CPU " + ", ".join(f"{r['vacating_process_cpu_ms']:,.0f}" for r in reps)
                      + " ms; machine busy "
                      + ", ".join(f"{r['machine']['machine_busy_percent']:.0f}" for r in reps) + " %)")
            for r in reps:
                w = r["worker_statements"]
                if w:
                    bench.say(f"      the worker's statements for these {w['keys']:,} keys, from this client: "
                              f"{w['total_ms']:,.0f} ms; µs a key: "
                              + ", ".join(f"{n} {v:.1f}" for n, v in w["us_per_key"].items()))
        if e is not None:
            reps = [etcd_vacate(e, etcd_url, args.vacate, live.k, args.etcd_vacate_ttl, f"{tag}{r}")
                    for r in range(args.vacate_reps)]
            out["vacate"]["etcd"] = {"reps": reps, "to_last_received_ms": median_of(reps, "to_last_received_ms")}
            bench.say(f"    etcd: {args.vacate} leases x {live.k} keys lapse: last delete event after "
                      + ", ".join(f"{r['to_last_received_ms']:,.0f}" for r in reps) + " ms")
    if large and args.steady > 0:
        out["steady"] = st = steady(pg, live, args.steady)
        bench.say(f"    steady renewals for {st['seconds']:.0f} s: {st['leases_per_s']:,.0f} leases/s; "
                  + "; ".join(f"{t}: n_dead_tup max {v['dead_max']:,}, {v['autovacuums']} autovacuum(s)"
                              for t, v in st["tables"].items()))
    return out


def fmt(v, unit=""):
    if v is None:
        return "-"
    s = f"{v:,.2f}" if abs(v) < 10 else f"{v:,.1f}" if abs(v) < 100 else f"{v:,.0f}"
    return s + unit


def report(res, args):
    """The figures side by side, the targets met or missed."""
    s = res["sessions"]
    small, large = "small", "large"
    ns, nl = s[small]["live_keys"], s[large]["live_keys"]
    # (figure, small, large, lower is better, judged against the 2x target):
    # a figure that repeats another's ratio (per call and per lease of the
    # same calls), a single sample (max) and etcd's are shown, not judged.
    rows = []

    def r(kind, size, *path):
        v = res[kind][size]
        for k in path:
            if v is None:
                return None
            v = v.get(k)
        return v

    def row(name, kind, path, lower=True, judged=True, at=None):
        """The figure at `path` of `kind` at both sizes, and how busy the
        machine was meanwhile (the measurement's `machine`, or the median
        of its repetitions'); `at`: the measurement's path, when not
        path[:-1]."""
        a, b = (r(kind, size, *path) for size in (small, large))
        busy = []
        for size in (small, large):
            m = r(kind, size, *(at or path[:-1]))
            reps = m.get("reps") if isinstance(m, dict) else None
            if reps:
                busy.append(statistics.median(x["machine"]["machine_busy_percent"] for x in reps if "machine" in x)
                            if all("machine" in x for x in reps) else None)
            else:
                busy.append((m or {}).get("machine", {}).get("machine_busy_percent") if isinstance(m, dict)
                            else None)
        rows.append((name, a, b, lower, judged and not name.startswith("etcd"), busy))

    renewals = [("sessions", "le_renew_session", "key held"), ("plain", "le_renew_all", "lease"),
                ("plain", "le_renew", "lease")]
    for kind, name, per in renewals:
        row(f"{name}, µs per {per}", kind, ("renew", name, "per_lease_us"))
    row("etcd keepalive of a lease of K keys, µs per key", "sessions", ("etcd", "keepalive", "per_lease_us"))
    for kind, name, per in renewals:
        row(f"{name}, backend CPU µs per {per}", kind, ("renew", name, "cpu_per_lease_us"))
    for kind, name, _ in renewals:
        row(f"{name}, µs per call", kind, ("renew", name, "per_call_us"), judged=False)
    row("etcd keepalive, µs per call", "sessions", ("etcd", "keepalive", "per_call_us"))
    for kind, name, _ in renewals:
        row(f"WAL per {name} call, bytes", kind, ("renew", name, "wal_per_call_bytes"))
        row(f"WAL per lease renewed by {name}, bytes", kind, ("renew", name, "wal_per_lease_bytes"), judged=False)
        row(f"full-page images per {name} call", kind, ("renew", name, "full_page_images_per_call"),
            judged=False)
    for kind, what in [("sessions", "sessions of one key"), ("plain", "leases")]:
        for q in ("p50", "p99", "max"):
            row(f"worker lag, {what} lapsing, ms {q}", kind, ("lag", "lag_ms", q), judged=q != "max", at=("lag",))
    for how, what in [("expire", "expire together"), ("close", "closed in one statement")]:
        row(f"{args.vacate} sessions x {args.keys} keys {what}: to the last notification, ms (median)",
            "sessions", ("vacate", how, "to_last_received_ms"))
    row(f"etcd: {args.vacate} leases x {args.keys} keys lapse: to the last delete event, ms (median)",
        "sessions", ("vacate", "etcd", "to_last_received_ms"))
    for kind in ("sessions", "plain"):
        for name in ("le_try_acquire", "le_try_acquire_in"):
            row(f"{name} of new keys per second ({kind} live)", kind, ("acquire", name, "per_second"), lower=False)
            row(f"{name} of new keys, backend CPU µs each ({kind} live)", kind,
                ("acquire", name, "cpu_per_lease_us"))
    for kind in ("sessions", "plain"):
        row(f"table + indexes, bytes per key ({kind})", kind, ("size", "bytes_per_lease"))
    row("etcd db size in use (compacted), bytes per key", "sessions", ("etcd", "bytes_per_key"))

    el_small = res["sessions"][small].get("etcd", {}).get("live_keys")
    el_large = res["sessions"][large].get("etcd", {}).get("live_keys")
    bench.say("")
    bench.say(f"| figure | {ns:,} live | {nl:,} live | large / small | within 2x | machine busy, % |")
    bench.say("|---|---|---|---|---|---|")
    worse = []
    for name, a, b, lower, judged, busy in rows:
        ratio = None if not a or b is None else b / a
        bad = ratio is not None and (ratio > 2 if lower else ratio < 0.5)
        if bad and judged:
            worse.append((name, ratio))
        verdict = "-" if ratio is None or not judged else "**no**" if bad else "yes"
        load = " / ".join("-" if x is None else f"{x:.0f}" for x in busy)
        bench.say(f"| {name} | {fmt(a)} | {fmt(b)} | {fmt(ratio)}x | {verdict} | {load} |")
    if el_large is not None:
        bench.say(f"(etcd: {el_small:,} and {el_large:,} keys on leases of {args.keys} keys)")

    targets = []
    sr = r("sessions", large, "renew", "le_renew_session", "per_lease_us")
    ek = r("sessions", large, "etcd", "keepalive", "per_lease_us")
    if sr is not None and ek is not None:
        targets.append(("session renewal per key <= etcd keepalive per key (large)",
                        f"{fmt(sr)} µs vs {fmt(ek)} µs", sr <= ek))
    for kind in ("sessions", "plain"):
        p99 = r(kind, large, "lag", "lag_ms", "p99")
        targets.append((f"worker expiry lag p99 <= 100 ms with {nl:,} {kind} keys live", f"{fmt(p99)} ms",
                        p99 <= 100))
    for how in ("expire", "close"):
        t = r("sessions", large, "vacate", how, "to_last_received_ms")
        targets.append((f"{args.vacate * args.keys:,} keys of sessions ({how}) vacated and announced < 2 s",
                        f"{fmt(t)} ms", t < 2000))
    targets.append(("no figure at the large size worse than 2x its figure at the small one",
                    "; ".join(f"{n}: {fmt(x)}x" for n, x in worse) or "none worse", not worse))
    bench.say("")
    bench.say("| target | measured | |")
    bench.say("|---|---|---|")
    for name, measured, met in targets:
        bench.say(f"| {name} | {measured} | {'met' if met else '**missed**'} |")
    bench.say("")
    bench.say("| statement (EXPLAIN ANALYZE, worker's settings) | ms, small | ms, large | plan at the large size |")
    bench.say("|---|---|---|---|")
    for kind in ("sessions", "plain"):
        for name, big in res[kind][large]["plans"].items():
            little = res[kind][small]["plans"].get(name, {})
            scans = sorted({x.strip().split(" on ")[0].lstrip("-> ").strip() + " on " + x.split(" on ")[1].split()[0]
                            for x in big["plan"] if " on " in x and "Scan" in x})
            bench.say(f"| {name} ({kind} live) | {fmt(little.get('execution_ms'))} | {fmt(big['execution_ms'])} "
                      f"| {'; '.join(scans)} |")
    for kind in ("sessions", "plain"):
        st = res[kind][large].get("steady")
        if st:
            bench.say(f"steady renewals ({kind}), {st['seconds']:.0f} s, {st['calls_per_s']:,.0f} calls/s, "
                      f"{st['leases_per_s']:,.0f} leases/s, WAL {st['wal_bytes_per_s'] / 1e6:,.1f} MB/s:")
            for t, v in st["tables"].items():
                hot = f"{100 * v['hot_ratio']:.0f} %" if v["hot_ratio"] is not None else "-"
                bench.say(f"  {t}: n_dead_tup max {v['dead_max']:,}, at the end {v['dead_at_end']:,}; "
                          f"autovacuums {v['autovacuums']}, autoanalyzes {v['autoanalyzes']}, a vacuum running in "
                          f"{v['seconds_with_vacuum_running']} of {len(st['samples'])} samples; "
                          f"{v['updates']:,} updates, HOT {hot}; "
                          f"{v['bytes_before'] / 1e6:,.1f} -> {v['bytes_after'] / 1e6:,.1f} MB")
    return {"rows": [dict(zip(("figure", "small", "large", "lower_is_better", "judged", "machine_busy_percent"), x))
                     for x in rows],
            "targets": [{"target": n, "measured": m, "met": ok} for n, m, ok in targets]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pg_port", type=int)
    ap.add_argument("etcd_url")
    ap.add_argument("--sessions", type=int, default=1_000, help="sessions (and plain holders) at the large size")
    ap.add_argument("--small-sessions", type=int, default=10, help="the same at the small size")
    ap.add_argument("--keys", type=int, default=1_000, help="keys of each session (and leases of each holder)")
    ap.add_argument("--vacate", type=int, default=100, help="sessions (of --keys keys) ending together")
    ap.add_argument("--vacate-reps", type=int, default=3)
    ap.add_argument("--vacate-in", type=float, default=2.0,
                    help="seconds from the last renewal of the sessions vacated together to their expiry")
    ap.add_argument("--etcd-vacate-ttl", type=int, default=5, help="ttl of etcd's leases vacated together")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--renew-calls", type=int, default=100,
                    help="le_renew_session / le_renew_all / etcd keepalive calls a round")
    ap.add_argument("--renew-keys", type=int, default=1_000, help="le_renew calls a round")
    ap.add_argument("--acquire", type=int, default=1_000, help="new keys a round, for each acquisition function")
    ap.add_argument("--lag-expiring", type=int, default=500)
    ap.add_argument("--lag-window", type=float, default=10.0)
    ap.add_argument("--lag-reps", type=int, default=3, help="repetitions of the lag measurement (median)")
    ap.add_argument("--renew-rate", type=float, default=200.0, help="renewals a second during the lag measurement")
    ap.add_argument("--steady", type=float, default=120.0, help="seconds of steady renewals at the large size")
    ap.add_argument("--etcd-keys", type=int, help="at most this many keys on leases in etcd (default: as many)")
    ap.add_argument("--setup-connections", type=int, default=2)
    ap.add_argument("--etcd-pid", type=int, help="the etcd server's pid, for its CPU time")
    ap.add_argument("--json")
    args = ap.parse_args()
    if min(args.sessions, args.small_sessions, args.keys, args.vacate, args.vacate_reps, args.rounds, args.lag_reps,
           args.renew_calls, args.renew_keys, args.acquire, args.lag_expiring, args.setup_connections) < 1:
        ap.error("sizes, rounds and counts must be at least 1")
    if args.small_sessions > args.sessions:
        ap.error("--small-sessions must not exceed --sessions")
    etcd_sessions = min(args.sessions, (args.etcd_keys or args.sessions * args.keys) // args.keys)

    pg = Pg(args.pg_port)
    e = Etcd(args.etcd_url)
    etcd_cpu = (lambda: bench.cpu_seconds(args.etcd_pid)) if args.etcd_pid else None
    env = bench.environment(pg.conn)
    env["extension_build"] = extension_build(pg.pid)
    etcd_version = subprocess.run(["etcd", "--version"], capture_output=True, text=True).stdout.split()[2]
    bench.say(f"a million leases: {args.small_sessions:,} then {args.sessions:,} sessions (and holders) of "
              f"{args.keys:,} keys; {env['server'].split(',')[0]}, leaderlock build: {env['extension_build']}, "
              f"etcd {etcd_version}, {env['cpus']} cpus; one client, sequential calls, for every cost figure")
    started = time.monotonic()
    clean(pg)
    e.call("/v3/kv/deleterange", {"key": b64("/sc/"), "range_end": b64("/sc0")})  # a run cut short
    res = {"config": vars(args), "environment": env, "etcd_version": etcd_version, "setup": {}}
    elive = EtcdLive(e, args.keys)
    for kind in ("sessions", "plain"):
        live = Live(kind, args.keys)
        res[kind] = {}
        for tag, count in (("small", args.small_sessions), ("large", args.sessions)):
            vacuum(pg, full=True)  # the space the small size's tests left, so that sizes are the load's
            etcd_s = [None]

            def etcd_grow(count=count):
                t0 = time.monotonic()
                try:
                    elive.grow(min(count, etcd_sessions))
                except BaseException as e:  # noqa: B902 - reported by the main thread
                    etcd_s.append(e)
                    raise
                etcd_s[0] = time.monotonic() - t0

            # etcd loads meanwhile, on its own connection
            loader = threading.Thread(target=etcd_grow) if kind == "sessions" else None
            if loader:
                loader.start()
            t0 = time.monotonic()
            live.grow(args.pg_port, count, args.setup_connections)
            load_s = time.monotonic() - t0
            if loader:
                loader.join()
                if etcd_s[0] is None:
                    fail(f"loading etcd failed: {etcd_s[1:]}")
            etcd_s = etcd_s[0]
            res["setup"][f"{kind}_{tag}"] = {"live_keys": live.n, "pg_seconds": load_s, "etcd_keys": elive.n,
                                             "etcd_seconds": etcd_s}
            bench.say(f"{kind}, {tag}: loaded to {live.n:,} keys in {load_s:.1f} s"
                      + (f"; etcd to {elive.n:,} keys in {etcd_s:.1f} s" if etcd_s is not None else ""))
            res[kind][tag] = battery(pg, live, args, tag, *((elive, e, args.etcd_url, etcd_cpu)
                                                            if kind == "sessions" else ()),
                                     large=tag == "large")
        clean(pg)
    res["summary"] = report(res, args)
    res["seconds"] = time.monotonic() - started
    bench.say(f"run took {res['seconds'] / 60:.1f} min")
    for lease in elive.leases:
        e.revoke(lease)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1, default=str)
            f.write("\n")
    e.close()
    pg.conn.close()


if __name__ == "__main__":
    main()
