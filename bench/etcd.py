"""leaderlock and etcd 3.4 side by side, on the same machine in the same run
(renewals per second, handover after a release, and failover
after kill -9 of the leader).

- Renewals: CLIENTS processes each renew their own lease as fast as they
  can for SECONDS: `SELECT le_renew(...)` over psycopg2, and etcd's lease
  keepalive over its HTTP/JSON gateway (one POST /v3/lease/keepalive each;
  persistent connections). Same Python driver on both sides.
- Handover: a follower is already waiting (`le_acquire` with a wait;
  etcd's election API, POST /v3/election/campaign, which blocks); the
  leader gives up (`le_release`; POST /v3/election/resign). Time from the
  start of the release to the follower's call returning as leader.
- Failover: the leader is a process of its own that renews every ttl/4 and
  reports each renewal's expiry; it is killed with SIGKILL right after one.
  A follower is waiting as above. Time from that lease's expiry to the
  follower becoming leader. Same ttl on both sides.

Usage: etcd.py PG_PORT ETCD_URL [--clients N] [--seconds S] [--rounds N] [--failovers N] [--ttl S]
       [--json FILE] [--chart FILE]
"""
import argparse
import base64
import http.client
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time
from urllib.parse import urlparse

import bench


# How long the follower has been waiting when the leader lets go. Not less
# than etcd's watcher sync interval (100 ms): a watch that starts at a past
# revision, as a campaign's does, is caught up by a loop that runs that
# often, so a resign within ~100 ms of the campaign waits for it (measured:
# ~38 ms handovers at 50 ms, ~3 ms at 200 ms). A follower normally waits
# much longer than that.
FOLLOWER_WAITS_S = 0.3


def b64(text):
    return base64.b64encode(text.encode()).decode()


class Etcd:
    """A persistent HTTP connection to etcd's JSON gateway."""

    def __init__(self, url):
        u = urlparse(url)
        self.host, self.port = u.hostname, u.port
        self.conn = http.client.HTTPConnection(self.host, self.port, timeout=60)

    def call(self, path, body):
        self.conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        r = self.conn.getresponse()
        data = r.read()
        if r.status != 200:
            raise RuntimeError(f"etcd {path}: {r.status} {data[:200]!r}")
        # keepalive answers as a stream: one JSON object per line
        return json.loads(data.splitlines()[0])

    def grant(self, ttl):
        return self.call("/v3/lease/grant", {"TTL": ttl})["ID"]

    def keepalive(self, lease):
        return int(self.call("/v3/lease/keepalive", {"ID": lease})["result"].get("TTL", 0))

    def campaign(self, name, lease, value):
        return self.call("/v3/election/campaign", {"name": b64(name), "lease": lease, "value": b64(value)})["leader"]

    def resign(self, leader):
        self.call("/v3/election/resign", {"leader": leader})

    def revoke(self, lease):
        self.call("/v3/lease/revoke", {"ID": lease})

    def close(self):
        self.conn.close()


# ---------------------------------------------------------------- renewals

def renew_leaderlock(port, i, seconds, out):
    c = bench.connect(port)
    key, me = f"etcd-side-renew-{i}", f"c{i}"
    assert bench.one(c, "SELECT le_try_acquire(%s, %s, '1 hour')", (key, me))
    n, stop = 0, time.monotonic() + seconds
    while time.monotonic() < stop:
        assert bench.one(c, "SELECT le_renew(%s, %s)", (key, me))
        n += 1
    bench.one(c, "SELECT le_release(%s, %s)", (key, me))
    c.close()
    out.put(n)


def renew_etcd(url, i, seconds, out):
    e = Etcd(url)
    lease = e.grant(3600)
    n, stop = 0, time.monotonic() + seconds
    while time.monotonic() < stop:
        assert e.keepalive(lease) > 0
        n += 1
    e.revoke(lease)
    e.close()
    out.put(n)


def renewals(target, arg, clients, seconds):
    out = multiprocessing.Queue()
    procs = [multiprocessing.Process(target=target, args=(arg, i, seconds, out)) for i in range(clients)]
    for p in procs:
        p.start()
    total = sum(out.get() for _ in procs)
    for p in procs:
        p.join()
    return total / seconds


# ---------------------------------------------------------------- handover

def handover_leaderlock(port, rounds, ttl):
    key = "etcd-side-handover"
    leader, follower = bench.connect(port), bench.connect(port)
    times = []
    for r in range(rounds):
        a, b = (leader, follower) if r % 2 == 0 else (follower, leader)
        ida, idb = f"h{r}", f"h{r + 1}"
        assert bench.one(a, "SELECT le_try_acquire(%s, %s, make_interval(secs => %s))", (key, ida, ttl))
        got = {}

        def wait():
            got["ok"] = bench.one(b, "SELECT le_acquire(%s, %s, make_interval(secs => %s), '30 seconds')",
                                  (key, idb, ttl))
            got["at"] = time.perf_counter()

        t = threading.Thread(target=wait)
        t.start()
        time.sleep(FOLLOWER_WAITS_S)
        start = time.perf_counter()
        assert bench.one(a, "SELECT le_release(%s, %s)", (key, ida))
        t.join()
        assert got["ok"]
        times.append((got["at"] - start) * 1000)
        assert bench.one(b, "SELECT le_release(%s, %s)", (key, idb))
    leader.close()
    follower.close()
    return bench.spread(times)


def handover_etcd(url, rounds, ttl):
    name = "etcd-side-handover"
    times = []
    for r in range(rounds):
        a, b = Etcd(url), Etcd(url)
        la, lb = a.grant(ttl), b.grant(ttl)
        keep = threading.Event()

        def keepalive():  # both leases stay alive while the follower waits
            k = Etcd(url)
            while not keep.wait(ttl / 4):
                k.keepalive(la)
                k.keepalive(lb)
            k.close()

        kt = threading.Thread(target=keepalive)
        kt.start()
        leader = a.campaign(name, la, f"h{r}")
        got = {}

        def wait():
            got["leader"] = b.campaign(name, lb, f"h{r + 1}")
            got["at"] = time.perf_counter()

        t = threading.Thread(target=wait)
        t.start()
        time.sleep(FOLLOWER_WAITS_S)
        start = time.perf_counter()
        a.resign(leader)
        t.join()
        times.append((got["at"] - start) * 1000)
        b.resign(got["leader"])
        keep.set()
        kt.join()
        a.revoke(la)
        b.revoke(lb)
        a.close()
        b.close()
    return bench.spread(times)


# ---------------------------------------------------------------- failover

LEADER_LEADERLOCK = """
import sys, time, psycopg2
c = psycopg2.connect(host="127.0.0.1", port=int(sys.argv[1]), user="postgres", dbname="postgres")
c.autocommit = True
cur = c.cursor()
key, ttl = sys.argv[2], float(sys.argv[3])
cur.execute("SELECT le_try_acquire(%s, 'leader', make_interval(secs => %s))", (key, ttl))
assert cur.fetchone()[0]
while True:
    cur.execute("SELECT le_renew(%s, 'leader')", (key,))
    assert cur.fetchone()[0]
    cur.execute("SELECT extract(epoch FROM expires_at) FROM leaderlock WHERE key = %s", (key,))
    print(cur.fetchone()[0], flush=True)
    time.sleep(ttl / 4)
"""

LEADER_ETCD = """
import sys, time
sys.path.insert(0, sys.argv[4])
from etcd import Etcd
e = Etcd(sys.argv[1])
name, ttl = sys.argv[2], int(sys.argv[3])
lease = e.grant(ttl)
e.campaign(name, lease, "leader")
while True:
    granted = e.keepalive(lease)
    print(time.time() + granted, flush=True)
    time.sleep(ttl / 4)
"""


def failover(leader_cmd, follow, rounds):
    """`follow()` waits to become leader and returns the time it did;
    `leader_cmd` starts a leader that prints each renewal's expiry."""
    lags = []
    for _ in range(rounds):
        leader = subprocess.Popen(leader_cmd, stdout=subprocess.PIPE, text=True)
        leader.stdout.readline()  # leading
        got = {}
        t = threading.Thread(target=lambda: got.update(at=follow()))
        t.start()
        time.sleep(0.3)
        leader.stdout.readline()
        expires_at = float(leader.stdout.readline())  # right after a renewal
        os.kill(leader.pid, signal.SIGKILL)
        leader.wait()
        t.join()
        lags.append((got["at"] - expires_at) * 1000)
    return bench.spread(lags)


def failover_leaderlock(port, rounds, ttl):
    key = "etcd-side-failover"
    c = bench.connect(port)

    def follow():
        assert bench.one(c, "SELECT le_acquire(%s, 'follower', make_interval(secs => %s), '60 seconds')",
                         (key, ttl))
        at = time.time()
        bench.one(c, "SELECT le_release(%s, 'follower')", (key,))
        return at

    cmd = [sys.executable, "-c", LEADER_LEADERLOCK, str(port), key, str(ttl)]
    r = failover(cmd, follow, rounds)
    c.close()
    return r


def failover_etcd(url, rounds, ttl):
    name = "etcd-side-failover"

    def follow():
        e = Etcd(url)
        lease = e.grant(ttl)
        keep = threading.Event()

        def keepalive():
            k = Etcd(url)
            while not keep.wait(ttl / 4):
                k.keepalive(lease)
            k.close()

        kt = threading.Thread(target=keepalive)
        kt.start()
        leader = e.campaign(name, lease, "follower")
        at = time.time()
        e.resign(leader)
        keep.set()
        kt.join()
        e.revoke(lease)
        e.close()
        return at

    here = os.path.dirname(os.path.abspath(__file__))
    cmd = [sys.executable, "-c", LEADER_ETCD, url, name, str(int(ttl)), here]
    return failover(cmd, follow, rounds)


# ---------------------------------------------------------------- report

def chart(results, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    systems = ["leaderlock", "etcd"]
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.8))
    axes[0].bar(systems, [results[s]["renewals_per_s"] for s in systems], color=["#336699", "#999999"])
    axes[0].set_title(f"renewals/s ({results['clients']} clients)")
    for ax, what, title in [(axes[1], "handover_ms", "handover after release, ms"),
                            (axes[2], "failover_ms", "failover after kill -9, ms\n(from lease expiry)")]:
        x = range(len(systems))
        ax.bar([i - 0.2 for i in x], [results[s][what]["p50"] for s in systems], 0.4, label="p50")
        ax.bar([i + 0.2 for i in x], [results[s][what]["p99"] for s in systems], 0.4, label="p99")
        ax.set_xticks(list(x), systems)
        ax.set_title(title)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pg_port", type=int)
    ap.add_argument("etcd_url")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rounds", type=int, default=50, help="handovers per system")
    ap.add_argument("--failovers", type=int, default=10, help="kill -9 rounds per system")
    ap.add_argument("--ttl", type=int, default=3, help="lease ttl in seconds for the failovers (etcd's minimum is 2)")
    ap.add_argument("--json")
    ap.add_argument("--chart")
    args = ap.parse_args()

    results = {"clients": args.clients, "seconds": args.seconds, "ttl_s": args.ttl,
               "etcd_version": subprocess.run(["etcd", "--version"], capture_output=True, text=True)
               .stdout.splitlines()[0]}
    for system, port_or_url, renew, handover, fail in [
            ("leaderlock", args.pg_port, renew_leaderlock, handover_leaderlock, failover_leaderlock),
            ("etcd", args.etcd_url, renew_etcd, handover_etcd, failover_etcd)]:
        bench.say(f"{system}: renewals, {args.clients} clients x {args.seconds:.0f} s")
        rps = renewals(renew, port_or_url, args.clients, args.seconds)
        bench.say(f"{system}: {args.rounds} handovers")
        h = handover(port_or_url, args.rounds, args.ttl)
        bench.say(f"{system}: {args.failovers} failovers (kill -9 of the leader, ttl {args.ttl} s)")
        f = fail(port_or_url, args.failovers, args.ttl)
        results[system] = {"renewals_per_s": rps, "handover_ms": h, "failover_ms": f}

    print()
    print("| system | renewals/s | handover p50 / p99 | failover after kill -9, from expiry, p50 / p99 |")
    print("|---|---|---|---|")
    for s in ("leaderlock", "etcd"):
        r = results[s]
        print(f"| {s} | {r['renewals_per_s']:.0f} | {r['handover_ms']['p50']:.1f} / {r['handover_ms']['p99']:.1f} ms "
              f"| {r['failover_ms']['p50']:.1f} / {r['failover_ms']['p99']:.1f} ms |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    if args.chart:
        chart(results, args.chart)


if __name__ == "__main__":
    main()
