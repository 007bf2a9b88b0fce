"""Where W1's renewal time goes: the plain UPDATE baseline against the
pieces of le_renew, run alternately in the same session of the server.

  plain UPDATE                 the upsert recipe's renewal (a HOT update)
  guarded UPDATE               le_renew's statement (queries::RENEW) run
                               directly, without the non-blocking lock
  + SKIP LOCKED lock           the same with its FOR NO KEY UPDATE SKIP LOCKED
                               sub-select (what "never waits" costs)
  le_renew                     the function: validation, SECURITY DEFINER
                               with a pinned search_path, SPI
  le_renew, no SET clauses     a copy of the function (same C symbol)
                               without its search_path and enable_seqscan
                               settings (issue 12's second idea)
  le_renew, no SET, INVOKER    the same, not SECURITY DEFINER either

Usage: w1_breakdown.py PORT [--clients N] [--seconds S] [--rounds R]
"""
import argparse
import re
import statistics

import bench
from queries import load


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("port", type=int)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    c = bench.connect(args.port)
    bench.q(c, bench.RECIPE_TABLE)
    # Copies of le_renew for measuring what its SET clauses and SECURITY
    # DEFINER cost; the same C function.
    for name, definer in [("bench_renew_noset", "SECURITY DEFINER"), ("bench_renew_invoker", "")]:
        bench.q(c, f"CREATE OR REPLACE FUNCTION {name}(key text, id text, ttl interval DEFAULT NULL) "
                   f"RETURNS boolean VOLATILE {definer} LANGUAGE c "
                   f"AS '$libdir/leaderlock', 'le_renew_wrapper'")
    bench.reset(c, "w1-")
    for i in range(args.clients):
        bench.one(c, "SELECT le_try_acquire(%s, %s, '1 hour')", (f"w1-{i}", f"c{i}"))
        bench.q(c, bench.RECIPE_ACQUIRE.format(key="%s", id="%s", ttl="1 hour"), (f"w1-{i}", f"c{i}"))
    c.close()

    key, me = "('w1-' || :client_id)", "('c' || :client_id)"
    renew = load()["RENEW"]
    for param, value in [("$1", key), ("$2", me), ("$3", "clock_timestamp()"), ("$4", "interval '1 hour'"),
                         ("$5", "current_user::regrole::oid")]:
        renew = renew.replace(param, value)
    no_lock = re.sub(r"AND key = \(SELECT key FROM leaderlock.*?SKIP LOCKED\)", "", renew, flags=re.S)
    assert no_lock != renew
    variants = {
        "plain UPDATE (baseline)": bench.RECIPE_RENEW.format(key=key, id=me, ttl="1 hour") + ";\n",
        "guarded UPDATE, no lock": no_lock + ";\n",
        "+ SKIP LOCKED lock (= RENEW)": renew + ";\n",
        "le_renew()": f"SELECT le_renew({key}, {me}, '1 hour');\n",
        "le_renew, no SET clauses": f"SELECT bench_renew_noset({key}, {me}, '1 hour');\n",
        "le_renew, no SET, INVOKER": f"SELECT bench_renew_invoker({key}, {me}, '1 hour');\n",
    }
    runs = {name: [] for name in variants}
    for _ in range(args.rounds):
        for name, script in variants.items():
            runs[name].append(bench.pgbench(args.port, script, args.clients, seconds=args.seconds))
    base = statistics.median(runs["plain UPDATE (baseline)"])
    print(f"{args.clients} clients, {args.seconds} s x {args.rounds}, median tx/s:")
    for name, r in runs.items():
        m = statistics.median(r)
        print(f"  {name:<30} {m:8.0f}  {m / base:5.2f}x   ({', '.join(f'{x:.0f}' for x in r)})")


if __name__ == "__main__":
    main()
