"""What the history of transitions (contract 23) costs the workloads it must
not slow down by more than 5 %: W1 (each client renewing its own key:
renewals record nothing, so only the check that the history exists is
added) and W4 (a hand-over: the release and the take-over each record a
row, and the worker numbers them). Also the hand-overs' throughput
(acquire then release, as fast as they go), where the recording weighs
most.

"Without" is the same build with the history's head table renamed: the
library then finds no history and neither records nor numbers (what a
schema from before 0.5.0 gets).

W1 and the cycles: the arms alternate, round after round, in one database,
each after a VACUUM ANALYZE and a CHECKPOINT, and the arm with the history
once its last rows are numbered (so neither pays for the other's rows, dead
rows and dirty pages); each figure is the median of the rounds, each ratio
the median of the rounds' ratios (the arms of a round ran back to back).

W4: two databases of the cluster, one with the history and one without,
each with its leader and follower connections (and the worker serving
both); the hand-overs alternate between them one by one (with, without,
without, with, ...), so the machine's drift and the placement of the
processes on its cores fall on both alike: a hand-over's latency varies
between runs by more than the 5 % measured. The connections are made
afresh every `--block` hand-overs; the p50 ratio is the median of the
blocks' ratios, the p99 ratio that of the pooled p99s.

Not in the figures: the history's own vacuuming (each row is written
twice, recorded and then moved when numbered), which autovacuum does in
the background.

Usage: history_cost.py PORT [--rounds N] [--seconds S] [--handovers N] [--block N] [--json FILE]
"""
import argparse
import json
import statistics
import sys
import time

import bench
from bench import connect, hold_keys, median_tps, one, percentile, q, say, w4_paired

HEAD, OFF = "leaderlock_history_head", "leaderlock_history_head_off"
# W4's second database: the history renamed away for good
OFF_DB = "history_cost_without"


def history(conn, on):
    """Turns the recording on or off (see above)."""
    present = one(conn, "SELECT to_regclass(%s) IS NOT NULL", (HEAD,))
    if present != on:
        q(conn, f"ALTER TABLE {OFF if on else HEAD} RENAME TO {HEAD if on else OFF}")
    # the backends' and the worker's plans follow the rename at their next call


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("port", type=int)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--handovers", type=int, default=1000)
    ap.add_argument("--block", type=int, default=50)
    ap.add_argument("--json")
    args = ap.parse_args()
    c = connect(args.port)
    env = bench.environment(c)
    say(f"history cost on {env['server'].split(',')[0]}, {env['cpus']} cpus: {args.rounds} rounds of "
        f"{args.clients} clients x {args.seconds} s; {args.handovers} hand-overs an arm, interleaved")
    renew = "SELECT le_renew('w1-' || :client_id, 'c' || :client_id, '10 seconds');\n"
    cycle = ("SELECT le_try_acquire('hc-' || :client_id, 'c' || :client_id, '10 seconds');\n"
             "SELECT le_release('hc-' || :client_id, 'c' || :client_id);\n")
    rows = ("SELECT (SELECT count(*) FROM leaderlock_history) "
            "+ (SELECT count(*) FROM leaderlock_history_pending)")
    figures = {arm: {"w1_tps": [], "handover_tps": []} for arm in ("with", "without")}
    recorded = {}
    for r in range(args.rounds):
        for arm in (("with", "without") if r % 2 == 0 else ("without", "with")):
            history(c, arm == "with")
            # Each arm from the same state: the last arm's dead rows vacuumed
            # and its dirty pages written, not left to fall on this one.
            q(c, "VACUUM ANALYZE leaderlock, leaderlock_history, leaderlock_history_pending")
            q(c, "CHECKPOINT")
            before = one(c, rows)
            f = figures[arm]
            f["w1_tps"].append(median_tps(args.port, renew, args.clients, args.seconds, 1,
                                          before=lambda: hold_keys(c, args.clients))["median"])
            f["handover_tps"].append(median_tps(args.port, cycle, args.clients, args.seconds, 1)["median"])
            recorded[arm] = recorded.get(arm, 0) + one(c, rows) - before
            if arm == "with":
                # its last rows numbered now, not by the next arm's worker
                deadline = time.monotonic() + 10
                while one(c, "SELECT count(*) FROM leaderlock_history_pending") and time.monotonic() < deadline:
                    time.sleep(0.05)
            say(f"  round {r + 1} {arm:<7}  W1 {f['w1_tps'][-1]:8.0f} tps   hand-overs "
                f"{f['handover_tps'][-1]:7.0f} tps")
    history(c, True)
    # the rounds without recorded nothing (the renaming took)
    assert recorded.get("without", 0) == 0, f"recorded {recorded['without']} rows with the history off"
    # (--rounds 0: W4 alone)
    medians = {arm: {k: statistics.median(v) for k, v in f.items() if v} for arm, f in figures.items()}
    # Paired: each round's two arms ran back to back, so the median of the
    # rounds' ratios is less exposed to the machine's drift than the ratio
    # of the medians.
    ratios = {k: statistics.median(w / o for w, o in zip(figures["with"][k], figures["without"][k]))
              for k in medians["with"]}

    q(c, f"DROP DATABASE IF EXISTS {OFF_DB}")
    q(c, f"CREATE DATABASE {OFF_DB}")
    off = connect(args.port, dbname=OFF_DB)
    q(off, "CREATE EXTENSION leaderlock")
    history(off, False)
    q(c, "VACUUM leaderlock, leaderlock_history, leaderlock_history_pending")
    q(c, "CHECKPOINT")
    before = one(c, rows)
    w4 = w4_paired({"with": (args.port, "postgres"), "without": (args.port, OFF_DB)},
                   args.handovers, args.block, "w4p-")
    assert one(c, rows) - before >= 3 * args.handovers, "W4 with the history: three rows a hand-over"
    assert one(off, rows) == 0, "W4 without the history recorded rows"
    off.close()
    q(c, f"DROP DATABASE {OFF_DB}")
    for arm, lags in w4.items():
        medians[arm]["w4_p50_ms"] = percentile(lags, 50)
        medians[arm]["w4_p99_ms"] = percentile(lags, 99)
    by_block = [percentile(w4["with"][b:b + args.block], 50) / percentile(w4["without"][b:b + args.block], 50)
                for b in range(0, args.handovers, args.block)]
    ratios["w4_p50_ms"] = statistics.median(by_block)
    ratios["w4_p99_ms"] = medians["with"]["w4_p99_ms"] / medians["without"]["w4_p99_ms"]
    say(f"  W4 p50 ratio by block of {args.block}: " + " ".join(f"{r:.2f}" for r in by_block))

    print()
    print("| figure | with the history | without | with / without |")
    print("|---|---|---|---|")
    for k, label in [("w1_tps", "W1 renew own key, tx/s (median of rounds; median of the rounds' ratios)"),
                     ("handover_tps", "acquire + release cycles, tx/s (the same)"),
                     ("w4_p50_ms", "W4 hand-over p50, ms (pooled; median of the blocks' ratios)"),
                     ("w4_p99_ms", "W4 hand-over p99, ms (pooled; their ratio)")]:
        if k in ratios:
            print(f"| {label} | {medians['with'][k]:.2f} | {medians['without'][k]:.2f} | {ratios[k]:.3f} |")
    print(f"\nrows recorded by the throughput rounds: {recorded.get('with', 0)} with, "
          f"{recorded.get('without', 0)} without")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"environment": env, "rounds": args.rounds, "seconds": args.seconds,
                       "clients": args.clients, "handovers": args.handovers, "block": args.block,
                       "figures": figures, "w4_ms": w4, "medians": medians, "ratios": ratios,
                       "recorded": recorded}, out, indent=2)
    c.close()


if __name__ == "__main__":
    sys.exit(main())
