"""The headline figures of several PostgreSQL versions side by side.

Usage: versions.py OUTDIR DIR...   (each DIR holds bench.py's results.json
and worker_lag.py's worker_lag.json for one version, written by
bench/versions.sh). Writes OUTDIR/versions.md and OUTDIR/versions.json.
"""
import json
import os
import sys

from report import ratio


def load(d):
    with open(os.path.join(d, "results.json")) as f:
        r = json.load(f)
    with open(os.path.join(d, "worker_lag.json")) as f:
        r["lag"] = json.load(f)
    return r


def headline(r):
    """One version's headline figures: (label, text) pairs, in table order."""
    w1, w2, w3, w4, w5, lag = (r[k] for k in ("W1", "W2", "W3", "W4", "W5", "lag"))
    m = lambda w, s: w[s]["median"]  # noqa: E731
    ms = lambda x: f"{x['p50']:.2f} / {x['p99']:.2f}"  # noqa: E731
    ll3 = w3["leaderlock"]
    return [
        ("W1 renew own key: leaderlock tx/s (plain UPDATE tx/s)",
         f"{m(w1, 'leaderlock'):.0f} ({m(w1, 'upsert'):.0f})"),
        ("W1 leaderlock vs the plain UPDATE (target >= 0.9x)",
         f"{ratio(m(w1, 'leaderlock'), m(w1, 'upsert')):.2f}x"),
        ("W2 contention: leaderlock tx/s, vs the upsert (target >= 1x)",
         f"{m(w2, 'leaderlock'):.0f}, {ratio(m(w2, 'leaderlock'), m(w2, 'upsert')):.2f}x"),
        (f"W3 {ll3['renewals']:,} renewals over {r['config']['scale_keys']:,} keys: tx/s, HOT",
         f"{ll3['tps']:.0f}, {100 * ll3['hot_ratio']:.0f} %"),
        ("W4 handover after release, ms p50 / p99 (target p99 < 10)", ms(w4["leaderlock"])),
        ("W5 failover after a kill, ms after expiry p50 / p99 (target p99 < 150)", ms(w5["leaderlock"])),
        (f"worker lag, {lag['live_leases']:,} live leases, ms p50 / p99 / max (target p99 <= 100)",
         f"{lag['lag_ms']['p50']:.1f} / {lag['lag_ms']['p99']:.1f} / {lag['lag_ms']['max']:.1f}"),
        ("worker CPU idle / expiring, % of a core",
         f"{lag['worker_cpu_percent']['idle']:.2f} / {lag['worker_cpu_percent']['expiring']:.2f}"),
    ]


def server(r):
    return r["environment"]["server"].split(" on ")[0].split(" (")[0]


def main():
    out, dirs = sys.argv[1], sys.argv[2:]
    runs = [load(d) for d in dirs]
    figures = [headline(r) for r in runs]
    rows = ["| figure | " + " | ".join(server(r) for r in runs) + " |",
            "|---|" + "---|" * len(runs)]
    for i, (label, _) in enumerate(figures[0]):
        rows.append(f"| {label} | " + " | ".join(f[i][1] for f in figures) + " |")
    cfg = runs[0]["config"]
    started = ", ".join(f"{server(r)} at {r['environment']['date']}" for r in runs)
    notes = (f"\nOne run of bench/versions.sh (bench/run.sh started: {started}); "
             f"{runs[0]['environment']['cpus']} cpus; each version "
             f"on its own throwaway cluster with default settings (fsync on), one after the other; "
             f"{cfg['clients']} clients, {cfg['seconds']} s x {cfg['reps']} runs per throughput figure "
             f"(median). Every figure: pgN/results.json and pgN/worker_lag.json.")
    table = "\n".join(rows) + "\n" + notes
    print(table)
    with open(os.path.join(out, "versions.md"), "w") as f:
        f.write(table + "\n")
    with open(os.path.join(out, "versions.json"), "w") as f:
        json.dump({server(r): dict(h) for r, h in zip(runs, figures)}, f, indent=2)


if __name__ == "__main__":
    main()
