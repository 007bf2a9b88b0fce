"""Turns bench.py's results into a table of medians and ratios, and a chart."""


def mb(b):
    return b / 1048576


def ratio(a, b):
    return a / b if b else float("nan")


def verdict(ok):
    return "met" if ok else "**missed**"


def table(r):
    w1, w2, w3, w4, w5 = (r[k] for k in ("W1", "W2", "W3", "W4", "W5"))
    m = lambda w, s: w[s]["median"]  # noqa: E731
    rows = [
        "| workload | leaderlock | upsert recipe | advisory lock | SELECT 1 | leaderlock vs baseline | target |",
        "|---|---|---|---|---|---|---|",
    ]
    r1 = ratio(m(w1, "leaderlock"), m(w1, "upsert"))
    rows.append(f"| W1 renew own key, tx/s (median) | {m(w1, 'leaderlock'):.0f} | {m(w1, 'upsert'):.0f} "
                f"(plain UPDATE) | {m(w1, 'advisory'):.0f} | {m(w1, 'select1'):.0f} | "
                f"{r1:.2f}x the plain UPDATE | >= 0.9x: {verdict(r1 >= 0.9)} |")
    r2 = ratio(m(w2, "leaderlock"), m(w2, "upsert"))
    rows.append(f"| W2 contention, tx/s (median) | {m(w2, 'leaderlock'):.0f} | {m(w2, 'upsert'):.0f} "
                f"| {m(w2, 'advisory'):.0f} | {m(w2, 'select1'):.0f} | {r2:.2f}x the upsert | "
                f">= 1x: {verdict(r2 >= 1)} |")
    ll, up = w3["leaderlock"], w3["upsert"]
    rows.append(f"| W3 renewals of {ll['renewals']:,} over many keys, tx/s | {ll['tps']:.0f} | {up['tps']:.0f} "
                f"| | | {ratio(ll['tps'], up['tps']):.2f}x | |")
    size = lambda x, k: mb(x[k]["table_bytes"] + x[k]["index_bytes"])  # noqa: E731
    rows.append(f"| W3 table + indexes, MB, before -> after | {size(ll, 'size_before'):.1f} -> "
                f"{size(ll, 'size_after'):.1f} | {size(up, 'size_before'):.1f} -> {size(up, 'size_after'):.1f} "
                f"| | | | bounded |")
    rows.append(f"| W3 HOT updates | {100 * ll['hot_ratio']:.0f} % | {100 * up['hot_ratio']:.0f} % | | | | |")
    lag = ll["expiry_lag_ms"]
    rows.append(f"| W3 worker CPU; expiry lag p50 / p99 / max | {ll['worker_cpu_percent']:.2f} %; "
                f"{lag['p50']:.1f} / {lag['p99']:.1f} / {lag['max']:.1f} ms | (no expiry) | | | | |")
    h = lambda x: f"{x['p50']:.2f} / {x['p99']:.2f}"  # noqa: E731
    poll = r["config"]["poll_ms"]
    rows.append(f"| W4 handover, ms p50 / p99 | {h(w4['leaderlock'])} | {h(w4['upsert'])} (polling "
                f"{poll} ms) | {h(w4['advisory'])} | | | p99 < 10 ms: "
                f"{verdict(w4['leaderlock']['p99'] < 10)} |")
    rows.append(f"| W5 failover (ttl 2 s), ms after expiry p50 / p99 | {h(w5['leaderlock'])} | "
                f"{h(w5['upsert'])} (polling {poll} ms) | {h(w5['advisory'])} (after the kill, no ttl) | | | "
                f"p99 < 150 ms: {verdict(w5['leaderlock']['p99'] < 150)} |")
    env = r["environment"]
    notes = (f"\n{env['date']}; {env['server'].split(',')[0]}; {env['cpus']} cpus; settings "
             + ", ".join(f"{k}={v}" for k, v in sorted(env["settings"].items()))
             + f"; {r['config']['clients']} clients, {r['config']['seconds']} s x {r['config']['reps']} "
             f"runs per throughput figure.")
    return "\n".join(rows) + "\n" + notes


def chart(r, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    systems = ["leaderlock", "upsert", "advisory", "select1"]
    labels = {"leaderlock": "leaderlock", "upsert": "upsert recipe", "advisory": "advisory lock",
              "select1": "SELECT 1"}
    colors = {"leaderlock": "#2b6cb0", "upsert": "#dd6b20", "advisory": "#718096", "select1": "#a0aec0"}
    fig, axes = plt.subplots(1, 4, figsize=(17, 4.5))

    for ax, w, title in [(axes[0], "W1", "W1 renew own key"), (axes[1], "W2", "W2 contention (4 keys)")]:
        vals = [r[w][s]["median"] for s in systems]
        ax.bar([labels[s] for s in systems], vals, color=[colors[s] for s in systems])
        ax.set_title(f"{title}\ntransactions/s, median, higher is better")
        ax.tick_params(axis="x", rotation=20)

    ax = axes[2]
    w3 = r["W3"]
    names = ["leaderlock", "upsert"]
    before = [(w3[s]["size_before"]["table_bytes"] + w3[s]["size_before"]["index_bytes"]) / 1048576 for s in names]
    after = [(w3[s]["size_after"]["table_bytes"] + w3[s]["size_after"]["index_bytes"]) / 1048576 for s in names]
    x = range(len(names))
    ax.bar([i - 0.2 for i in x], before, 0.4, label="before", color="#cbd5e0")
    ax.bar([i + 0.2 for i in x], after, 0.4, label=f"after {w3['leaderlock']['renewals']:,} renewals",
           color=[colors[s] for s in names])
    ax.set_xticks(list(x), [labels[s] for s in names])
    ax.set_title("W3 table + indexes, MB")
    ax.legend(fontsize=8)

    ax = axes[3]
    groups = [("W4 handover", r["W4"]), ("W5 failover", r["W5"])]
    width = 0.25
    for i, s in enumerate(["leaderlock", "advisory", "upsert"]):
        xs = [g + (i - 1) * width for g in range(len(groups))]
        ax.bar(xs, [g[1][s]["p99"] for g in groups], width, label=labels[s], color=colors[s])
    ax.set_xticks(range(len(groups)), [g[0] for g in groups])
    ax.set_yscale("log")
    ax.set_title("p99 latency, ms (log), lower is better")
    ax.legend(fontsize=8)

    fig.suptitle(f"leaderlock vs baselines, {r['environment']['date']}", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
