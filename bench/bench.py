"""leaderlock side by side with what users would otherwise use.

Systems, on the same server in the same run:
  leaderlock  le_try_acquire / le_renew / le_release
  upsert      the classic recipe on a plain table:
                INSERT ... ON CONFLICT (key) DO UPDATE ... WHERE t.valid_until < now() OR t.leader_id = $id
                and UPDATE ... WHERE key = $k AND leader_id = $id for renewals
  advisory    pg_try_advisory_xact_lock (in memory, not durable); session locks for W4/W5
  select1     SELECT 1, the round-trip floor

Workloads (see bench/README.md): W1 renew, W2 contention, W3 scale, W4
handover, W5 failover. Throughput comes from pgbench (-M prepared, several
clients, fixed durations, repeated; the median is reported); the latencies of
W4 and W5 from a small client program here.

Usage: bench.py PORT OUTDIR [--quick]
"""
import argparse
import json
import os
import re
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone

import psycopg2

PG_BIN = os.environ.get("PG_BIN", "/usr/lib/postgresql/15/bin")
HOST = "127.0.0.1"


# ---------------------------------------------------------------- helpers

# A client process (python -c SESSION_HOLDER HOST PORT KEY ID TTL) that takes
# KEY as a session-bound lease held by ID, prints "ready", and keeps its
# connection until killed.
SESSION_HOLDER = """
import sys, psycopg2
host, port, key, holder, ttl = sys.argv[1:6]
c = psycopg2.connect(host=host, port=int(port), user="postgres", dbname="postgres")
c.autocommit = True
cur = c.cursor()
cur.execute("SELECT le_try_acquire(%s, %s, %s::interval, session_bound => true)", (key, holder, ttl))
assert cur.fetchone()[0]
print("ready", flush=True)
sys.stdin.read()
"""


def connect(port, autocommit=True, dbname="postgres"):
    c = psycopg2.connect(host=HOST, port=port, user="postgres", dbname=dbname)
    c.autocommit = autocommit
    return c


def q(conn, sql, args=()):
    with conn.cursor() as cur:
        cur.execute(sql, args)
        return cur.fetchall() if cur.description else None


def one(conn, sql, args=()):
    rows = q(conn, sql, args)
    return rows[0][0] if rows else None


def wait_for_worker(conn, timeout=10.0):
    """Waits until a worker serves the database (it starts within a second
    of the server or of CREATE EXTENSION): session-bound leases are refused
    (55000) until then."""
    deadline = time.monotonic() + timeout
    while not one(conn, "SELECT le_worker_running()"):
        if time.monotonic() > deadline:
            raise RuntimeError("no worker serves the database")
        time.sleep(0.05)


def percentile(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(p / 100 * len(s) + 0.5) - 1))]


def parse_time(text):
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc).timestamp()


def worker_pid(conn, dbname="postgres"):
    """The pid of the worker serving `dbname`."""
    return one(conn, "SELECT pid FROM pg_stat_activity WHERE backend_type = 'leaderlock worker' "
                     "AND datname = %s", (dbname,))


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Backend:
    """One connection (autocommit) and its backend's CPU time and the WAL
    position, for figures per call (renew_all.py, scale.py)."""

    def __init__(self, port):
        self.conn = connect(port)
        self.cur = self.conn.cursor()
        self.pid = self.one("SELECT pg_backend_pid()")

    def one(self, sql, args=()):
        self.cur.execute(sql, args)
        return self.cur.fetchone()[0]

    def run(self, sql, args=()):
        self.cur.execute(sql, args)
        return self.cur.rowcount

    def cpu(self):
        return cpu_seconds(self.pid)

    def wal(self):
        return int(self.one("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn"))


def say(text):
    print(text, flush=True)


def server_cpu_seconds(conn):
    """CPU time used so far by the server: every live process of it, plus
    the exited backends the postmaster has reaped."""
    data = one(conn, "SHOW data_directory")
    with open(os.path.join(data, "postmaster.pid")) as f:
        postmaster = f.readline().strip()
    hz = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1]
        except OSError:
            continue
        fields = fields.split()
        if pid == postmaster or fields[1] == postmaster:  # the postmaster or its child
            total += int(fields[11]) + int(fields[12])
            if pid == postmaster:
                total += int(fields[13]) + int(fields[14])
    return total / hz


def pgbench(port, script, clients, seconds=None, transactions=None, options=None, stats=None,
            dbname="postgres"):
    """Runs a pgbench custom script; returns transactions per second
    (excluding connection time). `options`: PGOPTIONS for its sessions.
    `stats`: a dict that gets the number of transactions."""
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as f:
        f.write(script)
        path = f.name
    os.chmod(path, 0o644)
    cmd = [f"{PG_BIN}/pgbench", "-h", HOST, "-p", str(port), "-U", "postgres", "-n",
           "-M", "prepared", "-c", str(clients), "-j", str(min(clients, 2)), "-f", path, dbname]
    cmd += ["-T", str(seconds)] if seconds else ["-t", str(transactions)]
    env = dict(os.environ, PGOPTIONS=options or "")
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    os.unlink(path)
    if out.returncode != 0:
        raise RuntimeError(f"pgbench failed: {out.stderr}\n{out.stdout}")
    if stats is not None:
        stats["transactions"] = int(re.search(r"actually processed: (\d+)", out.stdout).group(1))
    m = re.search(r"tps = ([\d.]+) \(without initial connection time\)", out.stdout)
    failed = re.search(r"number of failed transactions: (\d+)", out.stdout)
    if failed and int(failed.group(1)):
        raise RuntimeError(f"pgbench: failed transactions\n{out.stdout}")
    return float(m.group(1))


def median_tps(port, script, clients, seconds, reps, before=None, dbname="postgres"):
    runs = []
    for _ in range(reps):
        if before:
            before()
        runs.append(pgbench(port, script, clients, seconds=seconds, dbname=dbname))
    return {"median": statistics.median(runs), "runs": runs}


# ---------------------------------------------------------------- setup

RECIPE_TABLE = """
CREATE TABLE IF NOT EXISTS recipe_leases (
    key text PRIMARY KEY,
    leader_id text,
    valid_until timestamptz
)"""

RECIPE_ACQUIRE = """INSERT INTO recipe_leases AS t (key, leader_id, valid_until)
VALUES ({key}, {id}, now() + interval '{ttl}')
ON CONFLICT (key) DO UPDATE SET leader_id = EXCLUDED.leader_id, valid_until = EXCLUDED.valid_until
WHERE t.valid_until < now() OR t.leader_id = EXCLUDED.leader_id"""

RECIPE_RENEW = """UPDATE recipe_leases SET valid_until = now() + interval '{ttl}'
WHERE key = {key} AND leader_id = {id}"""


def reset(conn, prefix):
    q(conn, "DELETE FROM leaderlock WHERE key LIKE %s", (prefix + "%",))
    q(conn, "DELETE FROM recipe_leases WHERE key LIKE %s", (prefix + "%",))


# ---------------------------------------------------------------- W1, W2

def w1_renew(port, cfg):
    """N clients, each renewing its own key."""
    n = cfg["clients"]
    c = connect(port)

    def hold_keys():
        reset(c, "w1-")
        for i in range(n):
            one(c, "SELECT le_try_acquire(%s, %s, '1 hour')", (f"w1-{i}", f"c{i}"))
            q(c, RECIPE_ACQUIRE.format(key="%s", id="%s", ttl="1 hour"), (f"w1-{i}", f"c{i}"))
        q(c, "VACUUM ANALYZE leaderlock")
        q(c, "VACUUM ANALYZE recipe_leases")

    key, me = "'w1-' || :client_id", "'c' || :client_id"
    scripts = {
        "leaderlock": f"SELECT le_renew({key}, {me}, '10 seconds');\n",
        "upsert": RECIPE_RENEW.format(key=key, id=me, ttl="10 seconds") + ";\n",
        "advisory": f"SELECT pg_try_advisory_xact_lock(hashtext({key}));\n",
        "select1": "SELECT 1;\n",
    }
    out = {}
    for system, script in scripts.items():
        out[system] = median_tps(port, script, n, cfg["seconds"], cfg["reps"], before=hold_keys)
        say(f"  W1 {system:<10} {out[system]['median']:10.0f} tps  {fmt_runs(out[system]['runs'])}")
    # every renewal must have succeeded: the keys are still held by their clients
    held = one(c, "SELECT count(*) FROM leaderlock WHERE key LIKE 'w1-%%' AND holder = 'c' || substr(key, 4) "
                  "AND expires_at > clock_timestamp()")
    assert held == n, f"W1: only {held} of {n} leaderlock keys still held"
    c.close()
    return out


def w2_contention(port, cfg):
    """N clients calling try_acquire on a handful of keys."""
    keys, n = cfg["contended_keys"], cfg["clients"]
    c = connect(port)

    def fresh():
        reset(c, "w2-")

    pick = f"\\set k random(1, {keys})\n"
    key, me = "'w2-' || :k", "'c' || :client_id"
    scripts = {
        "leaderlock": pick + f"SELECT le_try_acquire({key}, {me}, '1 second');\n",
        "upsert": pick + RECIPE_ACQUIRE.format(key=key, id=me, ttl="1 second") + ";\n",
        "advisory": pick + f"SELECT pg_try_advisory_xact_lock(hashtext({key}));\n",
        "select1": pick + "SELECT 1;\n",
    }
    out = {}
    for system, script in scripts.items():
        out[system] = median_tps(port, script, n, cfg["seconds"], cfg["reps"], before=fresh)
        say(f"  W2 {system:<10} {out[system]['median']:10.0f} tps  {fmt_runs(out[system]['runs'])}")
    c.close()
    return out


def fmt_runs(runs):
    return "(" + ", ".join(f"{r:.0f}" for r in runs) + ")"


# ---------------------------------------------------------------- W3

def relation_sizes(conn, table):
    return {
        "table_bytes": one(conn, "SELECT pg_table_size(%s::regclass)", (table,)),
        "index_bytes": one(conn, "SELECT pg_indexes_size(%s::regclass)", (table,)),
    }


def update_stats(conn, table):
    """(n_tup_upd, n_tup_hot_upd) of `table` once they stop changing. The
    sessions measured (pgbench's) have exited, which reports their counts;
    PostgreSQL 14's statistics collector receives them a moment later, 15+
    has them at once."""
    last = None
    for _ in range(100):
        q(conn, "SELECT pg_stat_clear_snapshot()")
        now = tuple(q(conn, "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables "
                            "WHERE relid = %s::regclass", (table,))[0])
        if now == last:
            return now
        last = now
        time.sleep(0.3)
    return last


def w3_scale(port, cfg):
    """SCALE keys held and renewed: sizes after RENEWALS renewals, HOT
    ratio, worker CPU, and expiry lag of leases left to lapse meanwhile."""
    keys, renewals, n = cfg["scale_keys"], cfg["scale_renewals"], cfg["clients"]
    c = connect(port)
    reset(c, "w3-")
    say(f"  W3 holding {keys} keys in each system")
    one(c, "SELECT count(*) FILTER (WHERE le_try_acquire('w3-' || i, 'h' || i, '1 hour')) "
           "FROM generate_series(1, %s) i", (keys,))
    q(c, "INSERT INTO recipe_leases SELECT 'w3-' || i, 'h' || i, now() + interval '1 hour' "
         "FROM generate_series(1, %s) i", (keys,))
    for t in ("leaderlock", "recipe_leases"):
        q(c, f"VACUUM ANALYZE {t}")
    pick = f"\\set i random(1, {keys})\n"
    scripts = {
        "leaderlock": pick + "SELECT le_renew('w3-' || :i, 'h' || :i, '1 hour');\n",
        "upsert": pick + RECIPE_RENEW.format(key="'w3-' || :i", id="'h' || :i", ttl="1 hour") + ";\n",
    }
    out = {}
    pid = worker_pid(c)
    for system, script in scripts.items():
        table = "leaderlock" if system == "leaderlock" else "recipe_leases"
        before = relation_sizes(c, table)
        upd0, hot0 = update_stats(c, table)
        cpu0, t0 = cpu_seconds(pid), time.monotonic()
        lag = None
        if system == "leaderlock":
            # Leases left to lapse while the renewals run.
            lag_thread = ExpiryLag(port, cfg["scale_expiring"], cfg["scale_expiry_window"], "w3-lag-")
            lag_thread.start()
        tps = pgbench(port, script, n, transactions=renewals // n)
        if system == "leaderlock":
            heard = lag_thread.finish()
            assert heard["received"] == cfg["scale_expiring"], \
                f"W3: {heard['received']} of {cfg['scale_expiring']} expiries heard"
            lag = heard["lag_ms"]
        elapsed = time.monotonic() - t0
        cpu = (cpu_seconds(pid) - cpu0) / elapsed
        upd1, hot1 = update_stats(c, table)
        after = relation_sizes(c, table)
        out[system] = {
            "tps": tps, "renewals": renewals, "size_before": before, "size_after": after,
            "updates": upd1 - upd0, "hot_updates": hot1 - hot0,
            "hot_ratio": (hot1 - hot0) / max(1, upd1 - upd0),
        }
        if system == "leaderlock":
            out[system]["worker_cpu_percent"] = 100 * cpu
            out[system]["expiry_lag_ms"] = lag
        mb = lambda b: b / 1048576  # noqa: E731
        say(f"  W3 {system:<10} {tps:8.0f} renewals/s; table {mb(before['table_bytes']):.1f} -> "
            f"{mb(after['table_bytes']):.1f} MB, indexes {mb(before['index_bytes']):.1f} -> "
            f"{mb(after['index_bytes']):.1f} MB; HOT {100 * out[system]['hot_ratio']:.0f} %"
            + (f"; worker CPU {100 * cpu:.2f} %; expiry lag p50 {lag['p50']:.1f} / p99 {lag['p99']:.1f} / "
               f"max {lag['max']:.1f} ms ({lag['count']} leases)" if lag else ""))
    reset(c, "w3-")
    c.close()
    return out


class ExpiryLag:
    """Acquires `count` leases named `prefix` || i, lapsing at random times
    over `window` seconds, and measures in a LISTENing client the time from
    each lease's expires_at to the arrival of its `expired` notification,
    and to the worker's check that expired it (the payload's `at`). Gives up
    `grace` seconds after the window."""

    def __init__(self, port, count, window, prefix, grace=60, dbname="postgres"):
        self.port, self.count, self.window, self.dbname = port, count, window, dbname
        self.prefix, self.grace = prefix, grace
        self.lags, self.check_lags = [], []

    def start(self):
        self.listener = connect(self.port, dbname=self.dbname)
        q(self.listener, "LISTEN leaderlock")
        c = connect(self.port, dbname=self.dbname)
        one(c, "SELECT count(*) FILTER (WHERE le_try_acquire(%s || i, 'doomed', "
               "make_interval(secs => 1 + random() * %s))) FROM generate_series(1, %s) i",
            (self.prefix, self.window, self.count))
        c.close()
        self.thread = threading.Thread(target=self.listen, daemon=True)
        self.thread.start()

    def listen(self):
        deadline = time.monotonic() + self.window + self.grace
        while len(self.lags) < self.count and time.monotonic() < deadline:
            select.select([self.listener], [], [], 1.0)
            self.listener.poll()
            now = time.time()
            while self.listener.notifies:
                e = json.loads(self.listener.notifies.pop(0).payload)
                if e["event"] == "expired" and e["key"].startswith(self.prefix):
                    expires_at = parse_time(e["expires_at"])
                    self.lags.append((now - expires_at) * 1000)
                    self.check_lags.append((parse_time(e["at"]) - expires_at) * 1000)

    def finish(self):
        """Waits for the listener; returns how many expiries were heard and
        the spread of both lags, in ms (None when none were heard)."""
        self.thread.join()
        self.listener.close()
        return {"received": len(self.lags), "lag_ms": spread(self.lags),
                "check_lag_ms": spread(self.check_lags)}


def spread(values):
    if not values:
        return None
    return {"count": len(values), "p50": percentile(values, 50), "p99": percentile(values, 99),
            "max": max(values), "mean": statistics.mean(values)}


# ---------------------------------------------------------------- W4

def w4_handover(port, cfg):
    """A leader releases; a follower waiting for it takes over. Time from the
    release to the follower's successful acquire."""
    rounds = cfg["handover_rounds"]
    out = {"leaderlock": handover_leaderlock(port, rounds),
           "advisory": handover_advisory(port, rounds),
           "upsert": handover_upsert(port, max(5, rounds // 4), cfg["poll_ms"])}
    for system, r in out.items():
        say(f"  W4 {system:<10} p50 {r['p50']:7.2f} ms  p99 {r['p99']:7.2f} ms  ({r['rounds']} handovers"
            + (f", polling every {cfg['poll_ms']} ms" if system == "upsert" else "") + ")")
    return out


def summary(lags_ms, **extra):
    return {"p50": percentile(lags_ms, 50), "p99": percentile(lags_ms, 99), "max": max(lags_ms),
            "rounds": len(lags_ms), **extra}


def handover_leaderlock(port, rounds):
    """The follower blocks in a LISTEN loop (select on its socket) and calls
    le_try_acquire when it hears `released`. The release's time is the
    notification's `at` (server clock, same host as this client)."""
    leader, follower = connect(port), connect(port)
    reset(leader, "w4-")
    q(follower, "LISTEN leaderlock")
    lags = [handover_once(leader, follower, f"w4-{r}") for r in range(rounds)]
    leader.close()
    follower.close()
    return summary(lags)


def handover_once(leader, follower, key):
    """One W4 hand-over of `key` (the follower LISTENing on leaderlock):
    the follower's lag in ms, from the release's `at` to its acquisition."""
    assert one(leader, "SELECT le_try_acquire(%s, 'leader', '10 seconds')", (key,))
    follower.poll()
    follower.notifies.clear()
    got = {}

    def follow():
        got["at"], event = follow_and_acquire(follower, key, "released", "10 seconds")
        got["released"] = parse_time(event["at"])

    t = threading.Thread(target=follow)
    t.start()
    time.sleep(0.01)
    one(leader, "SELECT le_release(%s, 'leader')", (key,))
    t.join(15)
    assert "at" in got, "W4: follower did not take over"
    return (got["at"] - got["released"]) * 1000


def w4_paired(arms, handovers, block, prefix):
    """W4 in several arms, one hand-over at a time, alternating (each arm
    named, at (port, database)), fresh connections every `block`
    hand-overs: each arm's latencies in ms, in the order they ran."""
    names = list(arms)
    lags = {arm: [] for arm in names}
    pairs = {}
    for i in range(handovers):
        if i % block == 0:
            for leader, follower in pairs.values():
                leader.close()
                follower.close()
            pairs = {arm: (connect(port, dbname=db), connect(port, dbname=db))
                     for arm, (port, db) in arms.items()}
            for leader, follower in pairs.values():
                q(leader, "DELETE FROM leaderlock WHERE key LIKE %s", (prefix + "%",))
                q(follower, "LISTEN leaderlock")
        for arm in (names if i % 2 == 0 else names[::-1]):
            lags[arm].append(handover_once(*pairs[arm], f"{prefix}{i}"))
    for leader, follower in pairs.values():
        leader.close()
        follower.close()
    return lags


def hold_keys(conn, n):
    """W1's keys, each held by its client for an hour, the table analyzed."""
    q(conn, "DELETE FROM leaderlock WHERE key LIKE 'w1-%%'")
    for i in range(n):
        one(conn, "SELECT le_try_acquire(%s, %s, '1 hour')", (f"w1-{i}", f"c{i}"))
    q(conn, "VACUUM ANALYZE leaderlock")


def handover_advisory(port, rounds):
    """Session advisory lock: the follower blocks in pg_advisory_lock."""
    leader, follower = connect(port), connect(port)
    lags = []
    for r in range(rounds):
        k = 4_000_000 + r
        one(leader, "SELECT pg_advisory_lock(%s)", (k,))
        got = {}

        def follow():
            one(follower, "SELECT pg_advisory_lock(%s)", (k,))
            got["at"] = time.time()

        t = threading.Thread(target=follow)
        t.start()
        time.sleep(0.01)
        released = time.time()
        one(leader, "SELECT pg_advisory_unlock(%s)", (k,))
        t.join(10)
        lags.append((got["at"] - released) * 1000)
        one(follower, "SELECT pg_advisory_unlock(%s)", (k,))
    leader.close()
    follower.close()
    return summary(lags)


def handover_upsert(port, rounds, poll_ms):
    """The recipe has no notification: the follower polls the upsert. The
    leader "releases" by setting valid_until to now()."""
    leader, follower = connect(port), connect(port)
    lags = []
    acquire = RECIPE_ACQUIRE.format(key="%s", id="%s", ttl="10 seconds") + " RETURNING 1"
    for r in range(rounds):
        key = f"w4-recipe-{r}"
        assert q(leader, acquire, (key, "leader"))
        got = {}
        stop = threading.Event()

        def follow():
            time.sleep(poll_ms / 1000 * (r % 10) / 10)  # a random phase against the release
            while not stop.is_set():
                if q(follower, acquire, (key, "follower")):
                    got["at"] = time.time()
                    return
                time.sleep(poll_ms / 1000)

        t = threading.Thread(target=follow)
        t.start()
        time.sleep(0.05)
        released = time.time()
        q(leader, "UPDATE recipe_leases SET valid_until = now() WHERE key = %s AND leader_id = 'leader'", (key,))
        t.join(10)
        stop.set()
        lags.append((got["at"] - released) * 1000)
    leader.close()
    follower.close()
    return summary(lags)


# ---------------------------------------------------------------- W5

LEADER_PROGRAM = r"""
import sys, time, psycopg2
port, system, key = int(sys.argv[1]), sys.argv[2], sys.argv[3]
c = psycopg2.connect(host="127.0.0.1", port=port, user="postgres", dbname="postgres")
c.autocommit = True
cur = c.cursor()
if system == "advisory":
    cur.execute("SELECT pg_advisory_lock(%s)", (int(key),))
elif system == "leaderlock":
    cur.execute("SELECT le_try_acquire(%s, 'leader', '2 seconds')", (key,))
else:
    cur.execute(sys.argv[4], (key, "leader"))
print("leading", flush=True)
while True:
    time.sleep(0.5)
    if system == "leaderlock":
        cur.execute("SELECT le_renew(%s, 'leader')", (key,))
    elif system == "upsert":
        cur.execute(sys.argv[4], (key, "leader"))
"""


def w5_failover(port, cfg):
    """The leader's client process is killed (no release), ttl 2 s. Time
    from its lease's expires_at to a follower's successful acquire."""
    rounds = cfg["failover_rounds"]
    out = {"leaderlock": failover(port, "leaderlock", rounds, cfg),
           "upsert": failover(port, "upsert", rounds, cfg),
           "advisory": failover(port, "advisory", rounds, cfg)}
    for system, r in out.items():
        basis = "after the kill" if system == "advisory" else "after expires_at"
        say(f"  W5 {system:<10} p50 {r['p50']:7.2f} ms  p99 {r['p99']:7.2f} ms  {basis} ({r['rounds']} failovers"
            + (f", polling every {cfg['poll_ms']} ms" if system == "upsert" else "") + ")")
    return out


def failover(port, system, rounds, cfg):
    poll_s = cfg["poll_ms"] / 1000
    acquire = RECIPE_ACQUIRE.format(key="%s", id="%s", ttl="2 seconds") + " RETURNING 1"
    follower = connect(port)
    reset(follower, "w5-")
    q(follower, "LISTEN leaderlock")
    lags = []
    for r in range(rounds):
        key = str(5_000_000 + r) if system == "advisory" else f"w5-{system}-{r}"
        follower.notifies.clear()
        leader = subprocess.Popen([sys.executable, "-c", LEADER_PROGRAM, str(port), system, key, acquire],
                                  stdout=subprocess.PIPE, text=True)
        assert leader.stdout.readline().strip() == "leading"
        time.sleep(0.3 + 0.2 * (r % 3))  # kill at different points of the renewal cycle
        killed = time.time()
        leader.send_signal(signal.SIGKILL)
        leader.wait()
        if system == "leaderlock":
            acquired, event = follow_and_acquire(follower, key, "expired", "2 seconds")
            lags.append((acquired - parse_time(event["expires_at"])) * 1000)
        elif system == "upsert":
            expires = one(follower, "SELECT extract(epoch FROM valid_until) FROM recipe_leases WHERE key = %s",
                          (key,))
            time.sleep(poll_s * (r % 10) / 10)  # a random phase
            while not q(follower, acquire, (key, "follower")):
                time.sleep(poll_s)
            lags.append((time.time() - float(expires)) * 1000)
        else:
            one(follower, "SELECT pg_advisory_lock(%s)", (int(key),))
            lags.append((time.time() - killed) * 1000)
            one(follower, "SELECT pg_advisory_unlock(%s)", (int(key),))
    follower.close()
    return summary(lags)


def follow_and_acquire(follower, key, event, ttl, timeout=10):
    """A follower LISTENing on `follower`: waits for `event` on `key`, then
    calls le_try_acquire. Returns (time of the successful acquire, the
    notification's payload)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        select.select([follower], [], [], 1.0)
        follower.poll()
        for n in follower.notifies:
            e = json.loads(n.payload)
            if e["event"] == event and e["key"] == key:
                if one(follower, "SELECT le_try_acquire(%s, 'follower', %s)", (key, ttl)):
                    follower.notifies.clear()
                    return time.time(), e
        follower.notifies.clear()
    raise AssertionError(f"no {event} notification for {key} heard")


# ---------------------------------------------------------------- main

FULL = {"clients": 8, "seconds": 10, "reps": 3, "contended_keys": 4, "scale_keys": 100_000,
        "scale_renewals": 1_000_000, "scale_expiring": 500, "scale_expiry_window": 60,
        "handover_rounds": 200, "failover_rounds": 20, "poll_ms": 100}
QUICK = {"clients": 4, "seconds": 1, "reps": 1, "contended_keys": 4, "scale_keys": 2_000,
         "scale_renewals": 8_000, "scale_expiring": 20, "scale_expiry_window": 2,
         "handover_rounds": 10, "failover_rounds": 1, "poll_ms": 100}


def environment(conn):
    return {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "server": one(conn, "SELECT version()"),
        "cpus": os.cpu_count(),
        "settings": dict(q(conn, "SELECT name, setting FROM pg_settings WHERE name IN "
                                 "('fsync', 'synchronous_commit', 'shared_buffers', 'max_connections', "
                                 "'leaderlock.naptime', 'wal_level')")),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("port", type=int)
    ap.add_argument("outdir")
    ap.add_argument("--quick", action="store_true", help="tiny durations (CI)")
    args = ap.parse_args()
    cfg = QUICK if args.quick else FULL
    c = connect(args.port)
    q(c, RECIPE_TABLE)
    env = environment(c)
    c.close()
    say(f"leaderlock benchmarks ({'quick' if args.quick else 'full'} run) on {env['server'].split(',')[0]}, "
        f"{env['cpus']} cpus; {cfg['clients']} clients, {cfg['seconds']} s x {cfg['reps']} per measurement")
    results = {"config": cfg, "environment": env}
    for name, fn in [("W1", w1_renew), ("W2", w2_contention), ("W3", w3_scale), ("W4", w4_handover),
                     ("W5", w5_failover)]:
        say(f"{name}: {fn.__doc__.strip().splitlines()[0]}")
        results[name] = fn(args.port, cfg)
    os.makedirs(args.outdir, exist_ok=True)
    with open(os.path.join(args.outdir, "results.json"), "w") as f:
        json.dump(results, f, indent=2)
    import report
    table = report.table(results)
    print()
    print(table)
    with open(os.path.join(args.outdir, "results.md"), "w") as f:
        f.write(table + "\n")
    report.chart(results, os.path.join(args.outdir, "chart.png"))
    say(f"\nwrote {args.outdir}/results.json, results.md, chart.png")


if __name__ == "__main__":
    main()
