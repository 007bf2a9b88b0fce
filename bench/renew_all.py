"""Many keys, one holder (contract 16): what keeping N leases alive costs,
per lease, in one run on one server, with etcd 3.4 on the same machine.

A holder has N keys (le_try_acquire, ttl 5 minutes). Each round runs every
workload once, in this order, and each is timed on the client (wall time of
the round) and by the CPU time of the server process doing the work (the
PostgreSQL backend of the benchmark's connection, from /proc; with
--etcd-pid, the etcd process); for PostgreSQL also the WAL the server wrote
meanwhile (pg_current_wal_lsn before and after):

- `SELECT le_renew_all('holder')`: one statement renews all N; it must
  return N every round;
- N `le_renew(key, 'holder')` calls, autocommit, one connection (a commit
  each, the way clients renew today); then the same N calls inside one
  transaction (BEGIN ... COMMIT), which separates the per-statement cost
  from the per-commit one;
- the plain SQL baseline, an ordinary table of N rows shaped like
  leaderlock's (key text primary key, holder, expires_at, ttl; an index on
  holder; fillfactor 50): N single-row
  `UPDATE ... SET expires_at = clock_timestamp() + ttl WHERE key = $1 AND
  holder = $2`, autocommit and then in one transaction, and one
  `UPDATE ... WHERE holder = $1` over all N rows (the fair one-statement
  baseline);
- etcd: one lease (ttl 300 s) to which the N keys are attached (puts with
  the lease, in transactions of 128, etcd's default --max-txn-ops, through
  the HTTP/JSON gateway as bench/etcd.py), and one POST /v3/lease/keepalive
  for it per round: one call keeps all N keys alive;
- etcd with a lease per key (the way to give N keys N independent
  lifetimes there): M keepalives of M leases, M = min(N, --etcd-per-key).

The per-statement le_renew and UPDATE are prepared (PREPARE/EXECUTE, as
pgbench -M prepared in the other benchmarks). One untimed warm-up round
comes first.

Then, RELEASE_ROUNDS times (the keys taken again, untimed, between rounds):
`SELECT le_release_all('holder')`, which must return N; the plain table's
`UPDATE ... SET holder = NULL ... WHERE holder = $1`; and etcd's revoke of
the one lease, which deletes its N keys.

Per-lease cost = round time / number of leases the round kept alive.
Reported per workload: median and p95 of the rounds, per lease, and the
ratio to le_renew_all's per-lease cost. Every round in the --json file.

Usage: renew_all.py PG_PORT ETCD_URL [--keys N] [--rounds N] [--release-rounds N]
       [--etcd-per-key M] [--etcd-pid PID] [--json FILE]
"""
import argparse
import json
import statistics
import subprocess
import time

import bench
from etcd import Etcd, b64

HOLDER = "holder"
TTL_S = 300
ETCD_TXN_OPS = 128  # etcd's default --max-txn-ops

PLAIN_TABLE = """
CREATE TABLE plain_leases (
    key        text PRIMARY KEY,
    holder     text,
    expires_at timestamptz,
    ttl        interval
) WITH (fillfactor = 50)"""
PLAIN_INDEX = "CREATE INDEX plain_leases_holder_idx ON plain_leases (holder) WHERE holder IS NOT NULL"


def fail(message):
    raise SystemExit(f"renew_all.py: FAILED: {message}")


# ---------------------------------------------------------------- setup

def acquire_all(pg, keys):
    """Takes the N keys for HOLDER in one statement."""
    got = pg.one("SELECT count(*) FROM (SELECT le_try_acquire(k, %s, make_interval(secs => %s)) AS ok "
                 "FROM unnest(%s::text[]) k) s WHERE ok", (HOLDER, TTL_S, keys))
    if got != len(keys):
        fail(f"le_try_acquire took {got} of {len(keys)} keys")


def held(pg):
    return pg.one("SELECT count(*) FROM leaderlock_status WHERE holder = %s AND state = 'held'", (HOLDER,))


def setup_pg(pg, keys):
    pg.run("DELETE FROM leaderlock WHERE key LIKE 'ra-%%'")
    acquire_all(pg, keys)
    pg.run("DROP TABLE IF EXISTS plain_leases")
    pg.run(PLAIN_TABLE)
    pg.run(PLAIN_INDEX)
    pg.run("INSERT INTO plain_leases SELECT k, %s, clock_timestamp() + make_interval(secs => %s), "
           "make_interval(secs => %s) FROM unnest(%s::text[]) k", (HOLDER, TTL_S, TTL_S, keys))
    pg.run("VACUUM ANALYZE leaderlock")
    pg.run("VACUUM ANALYZE plain_leases")
    pg.run("PREPARE ll_renew(text, text) AS SELECT le_renew($1, $2)")
    pg.run("PREPARE plain_renew(text, text) AS "
           "UPDATE plain_leases SET expires_at = clock_timestamp() + ttl WHERE key = $1 AND holder = $2")
    pg.run("PREPARE plain_renew_all(text) AS "
           "UPDATE plain_leases SET expires_at = clock_timestamp() + ttl WHERE holder = $1")


def etcd_put(e, keys, leases):
    """Puts each key with its lease, ETCD_TXN_OPS to a transaction."""
    for i in range(0, len(keys), ETCD_TXN_OPS):
        e.call("/v3/kv/txn", {"success": [
            {"request_put": {"key": b64(k), "value": b64(HOLDER), "lease": lease}}
            for k, lease in zip(keys[i:i + ETCD_TXN_OPS], leases[i:i + ETCD_TXN_OPS])]})


def etcd_lease_keys(e, lease):
    """(remaining ttl, number of keys attached) of a lease."""
    r = e.call("/v3/lease/timetolive", {"ID": lease, "keys": True})
    return int(r.get("TTL", -1)), len(r.get("keys", []))


def etcd_count(e, prefix):
    end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
    r = e.call("/v3/kv/range", {"key": b64(prefix), "range_end": b64(end), "count_only": True})
    return int(r.get("count", 0))


def etcd_one_lease(e, keys):
    lease = e.grant(TTL_S)
    etcd_put(e, keys, [lease] * len(keys))
    ttl, attached = etcd_lease_keys(e, lease)
    if attached != len(keys) or ttl <= 0:
        fail(f"etcd lease {lease}: {attached} keys attached of {len(keys)}, ttl {ttl}")
    return lease


# ---------------------------------------------------------------- workloads

def renew_all(pg, n):
    got = pg.one("SELECT le_renew_all(%s)", (HOLDER,))
    if got != n:
        fail(f"le_renew_all returned {got}, expected {n}")


def renew_each(pg, keys, one_tx):
    cur = pg.cur
    if one_tx:
        cur.execute("BEGIN")
    for k in keys:
        cur.execute("EXECUTE ll_renew(%s, %s)", (k, HOLDER))
        if cur.fetchone()[0] is not True:
            fail(f"le_renew({k!r}, {HOLDER!r}) returned false")
    if one_tx:
        cur.execute("COMMIT")


def plain_each(pg, keys, one_tx):
    cur = pg.cur
    if one_tx:
        cur.execute("BEGIN")
    for k in keys:
        cur.execute("EXECUTE plain_renew(%s, %s)", (k, HOLDER))
        if cur.rowcount != 1:
            fail(f"plain UPDATE of {k!r} updated {cur.rowcount} rows")
    if one_tx:
        cur.execute("COMMIT")


def plain_all(pg, n):
    got = pg.run("EXECUTE plain_renew_all(%s)", (HOLDER,))
    if got != n:
        fail(f"plain UPDATE ... WHERE holder updated {got} rows, expected {n}")


def keepalive(e, leases):
    for lease in leases:
        if e.keepalive(lease) <= 0:
            fail(f"etcd keepalive of lease {lease}: expired")


def measure(fn, cpu, wal=None):
    """(wall ms, CPU ms of the process doing the work, WAL bytes written;
    None for what is not measured)."""
    w0 = wal() if wal else None
    c0 = cpu() if cpu else None
    t0 = time.perf_counter()
    fn()
    wall = (time.perf_counter() - t0) * 1000
    c1 = cpu() if cpu else None
    return wall, (c1 - c0) * 1000 if cpu else None, wal() - w0 if wal else None


def stats(rounds_ms, cpu_ms, wal_bytes, leases):
    med = statistics.median(rounds_ms)
    out = {"leases": leases, "rounds_ms": rounds_ms, "cpu_ms": cpu_ms, "wal_bytes": wal_bytes,
           "median_ms": med, "p95_ms": bench.percentile(rounds_ms, 95), "min_ms": min(rounds_ms),
           "max_ms": max(rounds_ms), "per_lease_us": med * 1000 / leases,
           "per_lease_us_p95": bench.percentile(rounds_ms, 95) * 1000 / leases}
    cpus = [c for c in cpu_ms if c is not None]
    # The kernel counts CPU in 10 ms ticks: a mean over all rounds, and only
    # when it adds up to 10 ticks or more.
    out["cpu_per_lease_us"] = (sum(cpus) * 1000 / (leases * len(cpus))
                               if cpus and sum(cpus) >= 100 else None)
    out["wal_per_lease_bytes"] = (statistics.median(wal_bytes) / leases
                                  if None not in wal_bytes else None)
    return out


def us(v):
    return f"{v:,.2f}" if v < 10 else f"{v:,.1f}" if v < 100 else f"{v:,.0f}"


def table(title, rows, base=None):
    bench.say("")
    bench.say(title)
    head = "| workload | leases | median ms / round | p95 ms | per lease, µs | CPU per lease, µs | WAL per lease |"
    sep = "|---|---|---|---|---|---|---|"
    if base:
        head += " vs le_renew_all |"
        sep += "---|"
    bench.say(head)
    bench.say(sep)
    for name, r in rows.items():
        cpu = us(r["cpu_per_lease_us"]) if r["cpu_per_lease_us"] is not None else "-"
        wal = f"{r['wal_per_lease_bytes']:,.0f} B" if r["wal_per_lease_bytes"] is not None else "-"
        line = (f"| {name} | {r['leases']:,} | {r['median_ms']:,.2f} | {r['p95_ms']:,.2f} "
                f"| {us(r['per_lease_us'])} | {cpu} | {wal} |")
        if base:
            line += f" {r['per_lease_us'] / base:,.2f}x |" if r["per_lease_us"] / base < 10 \
                else f" {r['per_lease_us'] / base:,.0f}x |"
        bench.say(line)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pg_port", type=int)
    ap.add_argument("etcd_url")
    ap.add_argument("--keys", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--release-rounds", type=int, default=5)
    ap.add_argument("--etcd-per-key", type=int, default=1_000,
                    help="at most this many one-key leases for the lease-per-key etcd workload")
    ap.add_argument("--etcd-pid", type=int, help="the etcd server's pid, for its CPU time")
    ap.add_argument("--json")
    args = ap.parse_args()
    if min(args.keys, args.rounds, args.release_rounds, args.etcd_per_key) < 1:
        ap.error("--keys, --rounds, --release-rounds and --etcd-per-key must be at least 1")
    n = args.keys
    keys = [f"ra-{i:06d}" for i in range(n)]
    m = min(n, args.etcd_per_key)

    pg = bench.Backend(args.pg_port)
    e = Etcd(args.etcd_url)
    etcd_cpu = (lambda: bench.cpu_seconds(args.etcd_pid)) if args.etcd_pid else None
    env = bench.environment(pg.conn)
    etcd_version = subprocess.run(["etcd", "--version"], capture_output=True, text=True).stdout.split()[2]
    bench.say(f"many keys, one holder: {n:,} keys, {args.rounds} rounds, {args.release_rounds} release rounds; "
              f"{env['server'].split(',')[0]}, etcd {etcd_version}, {env['cpus']} cpus")

    started = time.monotonic()
    setup_pg(pg, keys)
    one_lease_keys = [f"/ra/one-lease/{i:06d}" for i in range(n)]
    lease = etcd_one_lease(e, one_lease_keys)
    per_key_leases = [e.grant(TTL_S) for _ in range(m)]
    etcd_put(e, [f"/ra/per-key/{i:06d}" for i in range(m)], per_key_leases)
    if etcd_count(e, "/ra/per-key/") != m:
        fail("etcd: per-key lease keys missing")
    bench.say(f"  set up in {time.monotonic() - started:.1f} s")

    workloads = {  # name: (system, leases kept alive, one round, CPU of, WAL of)
        "le_renew_all, one statement":
            ("leaderlock", n, lambda: renew_all(pg, n), pg.cpu, pg.wal),
        "le_renew x N, autocommit":
            ("leaderlock", n, lambda: renew_each(pg, keys, False), pg.cpu, pg.wal),
        "le_renew x N, one transaction":
            ("leaderlock", n, lambda: renew_each(pg, keys, True), pg.cpu, pg.wal),
        "plain UPDATE x N, autocommit":
            ("plain", n, lambda: plain_each(pg, keys, False), pg.cpu, pg.wal),
        "plain UPDATE x N, one transaction":
            ("plain", n, lambda: plain_each(pg, keys, True), pg.cpu, pg.wal),
        "plain UPDATE ... WHERE holder, one statement":
            ("plain", n, lambda: plain_all(pg, n), pg.cpu, pg.wal),
        "etcd keepalive of one lease with N keys":
            ("etcd", n, lambda: keepalive(e, [lease]), etcd_cpu, None),
        "etcd keepalive x M, a lease per key":
            ("etcd", m, lambda: keepalive(e, per_key_leases), etcd_cpu, None),
    }
    for _, _, fn, _, _ in workloads.values():  # warm-up
        fn()
    rounds = {name: ([], [], []) for name in workloads}
    for r in range(args.rounds):
        t0 = time.monotonic()
        for name, (_, _, fn, cpu, wal) in workloads.items():
            for into, value in zip(rounds[name], measure(fn, cpu, wal)):
                into.append(value)
        bench.say(f"  round {r + 1}/{args.rounds}: {time.monotonic() - t0:.1f} s; le_renew_all "
                  f"{rounds['le_renew_all, one statement'][0][-1]:.1f} ms")
    if held(pg) != n:
        fail(f"after the rounds {held(pg)} of {n} leases are held by {HOLDER!r}")
    ttl, attached = etcd_lease_keys(e, lease)
    if attached != n or ttl <= 0:
        fail(f"after the rounds the etcd lease has {attached} of {n} keys, ttl {ttl}")
    results = {name: dict(stats(*rounds[name], leases), system=system)
               for name, (system, leases, _, _, _) in workloads.items()}
    base = results["le_renew_all, one statement"]["per_lease_us"]
    for r in results.values():
        r["vs_renew_all"] = r["per_lease_us"] / base

    # ------------------------------------------------------------ release
    released = {}

    def release():
        released["leaderlock"] = pg.one("SELECT le_release_all(%s)", (HOLDER,))

    def plain_release():
        released["plain"] = pg.run("UPDATE plain_leases SET holder = NULL, expires_at = clock_timestamp() "
                                   "WHERE holder = %s", (HOLDER,))

    releases = {"le_release_all, one statement": (release, pg.cpu, pg.wal),
                "plain UPDATE SET holder = NULL ... WHERE holder, one statement": (plain_release, pg.cpu, pg.wal),
                "etcd revoke of the one lease (deletes its N keys)": (lambda: e.revoke(lease), etcd_cpu, None)}
    rel = {name: ([], [], []) for name in releases}
    returned = []
    for r in range(args.release_rounds):
        if r:
            acquire_all(pg, keys)
            lease = etcd_one_lease(e, one_lease_keys)
        for name, (fn, cpu, wal) in releases.items():
            for into, value in zip(rel[name], measure(fn, cpu, wal)):
                into.append(value)
        returned.append(released["leaderlock"])
        if released["leaderlock"] != n:
            fail(f"le_release_all returned {released['leaderlock']}, expected {n}")
        if held(pg):
            fail(f"after le_release_all {held(pg)} leases are still held by {HOLDER!r}")
        if released["plain"] != n:
            fail(f"plain release updated {released['plain']} rows, expected {n}")
        if etcd_count(e, "/ra/one-lease/"):
            fail("etcd: keys left after the revoke")
        pg.run("UPDATE plain_leases SET holder = %s, expires_at = clock_timestamp() + ttl", (HOLDER,))
        bench.say(f"  release round {r + 1}/{args.release_rounds}: le_release_all "
                  f"{rel['le_release_all, one statement'][0][-1]:.1f} ms")
    release = {name: stats(*rel[name], n) for name in releases}

    table(f"Keeping {n:,} leases of one holder alive ({args.rounds} rounds; etcd per-key: M = {m:,}); "
          "CPU: the PostgreSQL backend / the etcd process", results, base)
    table(f"Releasing all {n:,} ({args.release_rounds} rounds)", release)
    bench.say(f"checks: le_renew_all returned {n} in every round, le_release_all {n} in every release round")

    if args.json:
        with open(args.json, "w") as f:
            json.dump({"keys": n, "rounds": args.rounds, "release_rounds": args.release_rounds,
                       "ttl_s": TTL_S, "etcd_per_key_leases": m, "etcd_version": etcd_version,
                       "environment": env, "renew": results, "release": release,
                       "checks": {"le_renew_all_returned": n, "le_release_all_returned": returned}},
                      f, indent=1, default=str)
            f.write("\n")
    e.close()
    pg.conn.close()


if __name__ == "__main__":
    main()
