"""Two builds of leaderlock side by side, on one machine in one run: each
in its own copy of one PostgreSQL tree, each copy serving a cluster of its
own (leaderlock preloaded, default settings, fsync on), both running at
once so that the machine's drift falls on both alike.

W1 (each of 8 clients renewing its own key) and W2 (8 clients calling
le_try_acquire on 4 keys): the arms back to back in each round, the order
alternating; each figure is the median of the rounds, each ratio the
median of the rounds' ratios, with their spread (min to max).
W4 (a waiting follower taking over a release): the arms one hand-over at
a time, alternating; the p50 ratio is the median of the blocks' ratios,
the p99 ratio that of the pooled p99s.
acquire_wake (many candidates waiting in le_acquire, bench/acquire_wake.py
at a small size): the arms in turn, each round; the p99 ratio is the
median of the rounds' ratios of the client's p99.

Usage: builds.py BEFORE_PORT AFTER_PORT [--rounds 6] [--seconds 5]
                 [--handovers 1000] [--block 50] [--wake-rounds 4] [--json FILE]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

import bench
from bench import connect, hold_keys, median_tps, percentile, q, say, w4_paired

ARMS = ("before", "after")


def spread(ratios):
    return {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios)}


def acquire_wake(port):
    """The client's p99 (ms) of a small acquire_wake run against `port`."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        path = f.name
    here = os.path.dirname(os.path.abspath(__file__))
    subprocess.run([sys.executable, os.path.join(here, "acquire_wake.py"), str(port), "--waiters", "20",
                    "--keys", "4", "--handovers", "200", "--hold-ms", "20", "--json", path],
                   check=True, stdout=subprocess.DEVNULL)
    with open(path) as f:
        out = json.load(f)
    os.unlink(path)
    return out["client_release_committed_to_acquire_returned_ms"]["p99"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("before", type=int)
    ap.add_argument("after", type=int)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--handovers", type=int, default=1000)
    ap.add_argument("--block", type=int, default=50)
    ap.add_argument("--wake-rounds", type=int, default=4)
    ap.add_argument("--json")
    args = ap.parse_args()
    ports = {"before": args.before, "after": args.after}
    conns = {arm: connect(port) for arm, port in ports.items()}
    for arm, c in conns.items():
        bench.wait_for_worker(c)
    say(f"two builds side by side: {args.rounds} rounds of {args.clients} clients x {args.seconds} s; "
        f"{args.handovers} hand-overs an arm, interleaved; {args.wake_rounds} acquire_wake rounds")
    renew = "SELECT le_renew('w1-' || :client_id, 'c' || :client_id, '10 seconds');\n"
    contend = ("\\set k random(1, 4)\n"
               "SELECT le_try_acquire('w2-' || :k, 'c' || :client_id, '1 second');\n")
    figures = {arm: {"w1_tps": [], "w2_tps": [], "wake_p99_ms": []} for arm in ARMS}
    for r in range(args.rounds):
        for arm in (ARMS if r % 2 == 0 else ARMS[::-1]):
            c = conns[arm]
            q(c, "VACUUM ANALYZE leaderlock")
            q(c, "CHECKPOINT")
            f = figures[arm]
            f["w1_tps"].append(median_tps(ports[arm], renew, args.clients, args.seconds, 1,
                                          before=lambda: hold_keys(c, args.clients))["median"])
            q(c, "DELETE FROM leaderlock WHERE key LIKE 'w2-%%'")
            f["w2_tps"].append(median_tps(ports[arm], contend, args.clients, args.seconds, 1)["median"])
            say(f"  round {r + 1} {arm:<6}  W1 {f['w1_tps'][-1]:8.0f} tps   W2 {f['w2_tps'][-1]:8.0f} tps")
    for r in range(args.wake_rounds):
        for arm in (ARMS if r % 2 == 0 else ARMS[::-1]):
            figures[arm]["wake_p99_ms"].append(acquire_wake(ports[arm]))
            say(f"  acquire_wake round {r + 1} {arm:<6}  p99 {figures[arm]['wake_p99_ms'][-1]:.2f} ms")
    w4 = w4_paired({arm: (ports[arm], "postgres") for arm in ARMS}, args.handovers, args.block, "w4b-")

    medians = {arm: {k: statistics.median(v) for k, v in figures[arm].items() if v} for arm in ARMS}
    ratios = {k: spread([a / b for a, b in zip(figures["after"][k], figures["before"][k])])
              for k in medians["after"]}
    for arm, lags in w4.items():
        medians[arm]["w4_p50_ms"] = percentile(lags, 50)
        medians[arm]["w4_p99_ms"] = percentile(lags, 99)
    blocks = [percentile(w4["after"][b:b + args.block], 50) / percentile(w4["before"][b:b + args.block], 50)
              for b in range(0, args.handovers, args.block)]
    ratios["w4_p50_ms"] = spread(blocks)
    p99 = medians["after"]["w4_p99_ms"] / medians["before"]["w4_p99_ms"]
    ratios["w4_p99_ms"] = {"median": p99, "min": p99, "max": p99}

    print()
    print("| figure | before | after | after / before (median; min to max) |")
    print("|---|---|---|---|")
    # For throughput a ratio above 1 is better; for latencies below 1.
    for k, label in [("w1_tps", "W1 renew own key, tx/s"),
                     ("w2_tps", "W2 contended le_try_acquire, tx/s"),
                     ("w4_p50_ms", "W4 hand-over p50, ms"),
                     ("w4_p99_ms", "W4 hand-over p99, ms"),
                     ("wake_p99_ms", "acquire_wake client p99, ms")]:
        s = ratios[k]
        print(f"| {label} | {medians['before'][k]:.2f} | {medians['after'][k]:.2f} | "
              f"{s['median']:.3f} ({s['min']:.3f} to {s['max']:.3f}) |")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"environment": bench.environment(conns["after"]), "rounds": args.rounds,
                       "seconds": args.seconds, "clients": args.clients, "handovers": args.handovers,
                       "block": args.block, "figures": figures, "w4_ms": w4, "medians": medians,
                       "ratios": ratios}, out, indent=2)
    for c in conns.values():
        c.close()


if __name__ == "__main__":
    sys.exit(main())
