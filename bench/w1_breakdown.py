"""Where W1's renewal time goes: the plain UPDATE baseline against the
pieces of le_renew, run alternately on the same server.

  plain UPDATE (baseline)      the upsert recipe's renewal, as W1 runs it:
                               on an 8-row table the planner picks a
                               sequential scan
  plain UPDATE, index plan     the same through its primary key, as on any
                               table of more than a few pages (and as every
                               leaderlock statement runs)
  SECURITY DEFINER function    that same UPDATE inside a PL/pgSQL function
                               that is SECURITY DEFINER with a pinned
                               search_path (contract 7): the floor of any
                               function that renews
  guarded UPDATE, no lock      le_renew's statement (queries::RENEW) run
                               directly, without its non-blocking lock
  + SKIP LOCKED lock (= RENEW) the same with its FOR NO KEY UPDATE SKIP LOCKED
                               sub-select (what "never waits" costs)
  le_renew()                   the function
  le_try_acquire by the holder the holder renewing by acquiring again (the
                               pattern the main README suggests)
  le_renew, no enable_seqscan  a copy of it (same C symbol) without its
    setting                    enable_seqscan setting, run in sessions with
                               enable_seqscan off: what the setting costs

Every variant but the first runs with index plans. Besides transactions per
second, it prints the server's CPU time per transaction (all its
processes), which the pgbench clients competing for the same cores disturb
less.

Usage: w1_breakdown.py PORT [--clients N] [--seconds S] [--rounds R]
"""
import argparse
import re
import statistics

import bench
from queries import load

INDEX_PLANS = "-c enable_seqscan=off"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("port", type=int)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    c = bench.connect(args.port)
    bench.q(c, bench.RECIPE_TABLE)
    bench.q(c, "CREATE OR REPLACE FUNCTION bench_renew_plain(k text, i text) RETURNS boolean "
               "LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$ BEGIN "
               + bench.RECIPE_RENEW.format(key="k", id="i", ttl="1 hour") + "; RETURN FOUND; END $$")
    bench.q(c, "CREATE OR REPLACE FUNCTION bench_renew_noseqscan(key text, id text, ttl interval DEFAULT NULL) "
               "RETURNS boolean VOLATILE SECURITY DEFINER SET search_path = public, pg_temp "
               "LANGUAGE c AS '$libdir/leaderlock', 'le_renew_wrapper'")
    bench.reset(c, "w1-")
    for i in range(args.clients):
        bench.one(c, "SELECT le_try_acquire(%s, %s, '1 hour')", (f"w1-{i}", f"c{i}"))
        bench.q(c, bench.RECIPE_ACQUIRE.format(key="%s", id="%s", ttl="1 hour"), (f"w1-{i}", f"c{i}"))
    bench.q(c, "VACUUM ANALYZE leaderlock")
    bench.q(c, "VACUUM ANALYZE recipe_leases")

    key, me = "('w1-' || :client_id)", "('c' || :client_id)"
    renew = load()["RENEW"]
    for param, value in [("$1", key), ("$2", me), ("$3", "clock_timestamp()"), ("$4", "interval '1 hour'"),
                         ("$5", "current_user::regrole::oid")]:
        renew = renew.replace(param, value)
    # (the table is named with its schema: FROM @extschema@.leaderlock)
    no_lock = re.sub(r"AND key = \(SELECT key FROM \S*leaderlock .*?SKIP LOCKED\)", "", renew, flags=re.S)
    assert no_lock != renew
    plain = bench.RECIPE_RENEW.format(key=key, id=me, ttl="1 hour") + ";\n"
    variants = {
        "plain UPDATE (baseline)": (plain, None),
        "plain UPDATE, index plan": (plain, INDEX_PLANS),
        "SECURITY DEFINER function": (f"SELECT bench_renew_plain({key}, {me});\n", INDEX_PLANS),
        "guarded UPDATE, no lock": (no_lock + ";\n", INDEX_PLANS),
        "+ SKIP LOCKED lock (= RENEW)": (renew + ";\n", INDEX_PLANS),
        "le_renew()": (f"SELECT le_renew({key}, {me}, '1 hour');\n", None),
        "le_try_acquire by the holder": (f"SELECT le_try_acquire({key}, {me}, '1 hour');\n", None),
        "le_renew, no enable_seqscan": (f"SELECT bench_renew_noseqscan({key}, {me}, '1 hour');\n", INDEX_PLANS),
    }
    runs = {name: [] for name in variants}
    for _ in range(args.rounds):
        for name, (script, options) in variants.items():
            stats = {}
            before = bench.server_cpu_seconds(c)
            tps = bench.pgbench(args.port, script, args.clients, seconds=args.seconds,
                                options=options, stats=stats)
            cpu = (bench.server_cpu_seconds(c) - before) / stats["transactions"] * 1e6
            runs[name].append((tps, cpu))
    base = statistics.median(t for t, _ in runs["plain UPDATE (baseline)"])
    base_cpu = statistics.median(u for _, u in runs["plain UPDATE (baseline)"])
    print(f"{args.clients} clients, {args.seconds} s x {args.rounds}, medians; "
          "server CPU microseconds per transaction:")
    for name, r in runs.items():
        tps = statistics.median(t for t, _ in r)
        cpu = statistics.median(u for _, u in r)
        print(f"  {name:<30} {tps:8.0f} tx/s {tps / base:5.2f}x   {cpu:6.1f} us {cpu / base_cpu:5.2f}x"
              f"   ({', '.join(f'{t:.0f}' for t, _ in r)})")


if __name__ == "__main__":
    main()
