"""What the history of transitions (contract 23) costs the workloads it must
not slow down by more than 5 %: W1 (each client renewing its own key:
renewals record nothing, so only the check that the history exists is
added) and W4 (a hand-over: the release and the take-over each record a
row, and the worker numbers them). Also the hand-overs' throughput
(acquire then release, as fast as they go), where the recording weighs
most.

"Without" is the same build with the history's head table renamed: the
library then finds no history and neither records nor numbers (what a
schema from before 0.5.0 gets). The arms alternate, round after round, on
one cluster, so that the machine's drift falls on both, each after a
VACUUM and a CHECKPOINT (so neither pays for the other's dead rows and
dirty pages); each figure is the median of the rounds, each ratio the
median of the rounds' ratios (the arms of a round ran back to back). Not in the figures:
the history's own vacuuming (each row is written twice, recorded and then
numbered), which autovacuum does in the background.

Usage: history_cost.py PORT [--rounds N] [--seconds S] [--handovers N] [--json FILE]
"""
import argparse
import json
import statistics
import sys

import bench
from bench import connect, handover_leaderlock, median_tps, one, q, say

HEAD, OFF = "leaderlock_history_head", "leaderlock_history_head_off"


def history(conn, on):
    """Turns the recording on or off (see above)."""
    present = one(conn, "SELECT to_regclass(%s) IS NOT NULL", (HEAD,))
    if present != on:
        q(conn, f"ALTER TABLE {OFF if on else HEAD} RENAME TO {HEAD if on else OFF}")
    # the backends' and the worker's plans follow the rename at their next call


def hold_keys(conn, n):
    q(conn, "DELETE FROM leaderlock WHERE key LIKE 'w1-%%'")
    for i in range(n):
        one(conn, "SELECT le_try_acquire(%s, %s, '1 hour')", (f"w1-{i}", f"c{i}"))
    q(conn, "VACUUM ANALYZE leaderlock")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("port", type=int)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--handovers", type=int, default=100)
    ap.add_argument("--json")
    args = ap.parse_args()
    c = connect(args.port)
    q(c, bench.RECIPE_TABLE)  # handover_leaderlock's reset clears it too
    env = bench.environment(c)
    say(f"history cost on {env['server'].split(',')[0]}, {env['cpus']} cpus: {args.rounds} rounds, "
        f"{args.clients} clients x {args.seconds} s, {args.handovers} hand-overs a round")
    renew = "SELECT le_renew('w1-' || :client_id, 'c' || :client_id, '10 seconds');\n"
    cycle = ("SELECT le_try_acquire('hc-' || :client_id, 'c' || :client_id, '10 seconds');\n"
             "SELECT le_release('hc-' || :client_id, 'c' || :client_id);\n")
    figures = {arm: {"w1_tps": [], "handover_tps": [], "w4_p50_ms": [], "w4_p99_ms": []}
               for arm in ("with", "without")}
    recorded = {}
    for r in range(args.rounds):
        for arm in (("with", "without") if r % 2 == 0 else ("without", "with")):
            history(c, arm == "with")
            # Each arm from the same state: the last arm's dead rows vacuumed
            # and its dirty pages written, not left to fall on this one.
            q(c, "VACUUM leaderlock, leaderlock_history")
            q(c, "CHECKPOINT")
            before = one(c, "SELECT count(*) FROM leaderlock_history")
            f = figures[arm]
            f["w1_tps"].append(median_tps(args.port, renew, args.clients, args.seconds, 1,
                                          before=lambda: hold_keys(c, args.clients))["median"])
            f["handover_tps"].append(median_tps(args.port, cycle, args.clients, args.seconds, 1)["median"])
            w4 = handover_leaderlock(args.port, args.handovers)
            f["w4_p50_ms"].append(w4["p50"])
            f["w4_p99_ms"].append(w4["p99"])
            recorded[arm] = recorded.get(arm, 0) + one(c, "SELECT count(*) FROM leaderlock_history") - before
            say(f"  round {r + 1} {arm:<7}  W1 {f['w1_tps'][-1]:8.0f} tps   hand-overs "
                f"{f['handover_tps'][-1]:7.0f} tps   W4 p50 {w4['p50']:.2f} ms p99 {w4['p99']:.2f} ms")
    history(c, True)
    medians = {arm: {k: statistics.median(v) for k, v in f.items()} for arm, f in figures.items()}
    # Paired: each round's two arms ran back to back, so the median of the
    # rounds' ratios is less exposed to the machine's drift than the ratio
    # of the medians.
    ratios = {k: statistics.median(w / o for w, o in zip(figures["with"][k], figures["without"][k]))
              for k in medians["with"]}
    # the prune in the rounds without ran nowhere: rows recorded "without" must be none
    assert recorded.get("without", 0) == 0, f"recorded {recorded['without']} rows with the history off"
    print()
    print("| figure | with the history (median of rounds) | without | with / without (median of the rounds' ratios) |")
    print("|---|---|---|---|")
    for k, label in [("w1_tps", "W1 renew own key, tx/s"), ("handover_tps", "acquire + release cycles, tx/s"),
                     ("w4_p50_ms", "W4 hand-over p50, ms"), ("w4_p99_ms", "W4 hand-over p99, ms")]:
        print(f"| {label} | {medians['with'][k]:.2f} | {medians['without'][k]:.2f} | {ratios[k]:.3f} |")
    print(f"\nrows recorded: {recorded.get('with', 0)} with, {recorded.get('without', 0)} without")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"environment": env, "rounds": args.rounds, "seconds": args.seconds,
                       "clients": args.clients, "handovers": args.handovers, "figures": figures,
                       "medians": medians, "ratios": ratios, "recorded": recorded}, out, indent=2)
    c.close()


if __name__ == "__main__":
    sys.exit(main())
