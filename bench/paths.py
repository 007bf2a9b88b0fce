"""How many SQL statements each path of a call runs inside the extension:
pg_stat_statements (track = all) counts the statements a function runs
through SPI (toplevel false); the figure is their calls per call of the
path, averaged over ROUNDS calls, each measured alone (reset, call, read).

Paths:
  acquire a free key   le_try_acquire of a key of one slot never used
  renew by acquire     the holder's le_try_acquire of its live lease
  take over a lapse    le_try_acquire of a key whose holder's ttl ran out
  renew                le_renew of the holder's live lease
  release              le_release, nobody waiting
  take a free slot     le_try_acquire of a key of 3 slots, one held
  claim a run          le_claim_run of a due run of an existing job

Usage: paths.py PORT [--rounds 20] [--json FILE]
"""
import argparse
import json
import time

import psycopg2

PATHS = [
    "acquire a free key",
    "renew by acquire",
    "take over a lapse",
    "renew",
    "release",
    "take a free slot",
    "claim a run",
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("port", type=int)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--json")
    args = ap.parse_args()
    conn = psycopg2.connect(host="127.0.0.1", port=args.port, dbname="postgres", user="postgres")
    conn.autocommit = True
    cur = conn.cursor()
    cur.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements SCHEMA public")

    def one(sql, params=()):
        cur.execute("SELECT public.pg_stat_statements_reset()")
        cur.execute(sql, params)
        cur.fetchall()
        cur.execute(
            "SELECT coalesce(sum(calls), 0)::int FROM public.pg_stat_statements "
            "WHERE NOT toplevel AND query NOT LIKE '%pg_stat_statements%'"
        )
        return cur.fetchone()[0]

    counts = {p: [] for p in PATHS}
    # Every function's plans prepared once, as in a long-lived connection.
    for r in range(args.rounds + 1):
        free = f"paths-free-{r}"
        got = {
            "acquire a free key": one("SELECT le_try_acquire(%s, 'a', '1 minute')", (free,)),
            "renew by acquire": one("SELECT le_try_acquire(%s, 'a', '1 minute')", (free,)),
            "renew": one("SELECT le_renew(%s, 'a')", (free,)),
            "release": one("SELECT le_release(%s, 'a')", (free,)),
        }
        lapsing = f"paths-lapse-{r}"
        cur.execute("SELECT le_try_acquire(%s, 'old', '1 millisecond')", (lapsing,))
        time.sleep(0.005)
        got["take over a lapse"] = one("SELECT le_try_acquire(%s, 'new', '1 minute')", (lapsing,))
        slots = f"paths-slots-{r}"
        cur.execute("SELECT le_try_acquire(%s, 'h1', '1 minute', slots => 3)", (slots,))
        got["take a free slot"] = one("SELECT le_try_acquire(%s, 'h2', '1 minute', slots => 3)", (slots,))
        cur.execute("SELECT le_claim_run('paths-job', le_now() - interval '1 hour', 'r', '1 minute')")
        got["claim a run"] = one(
            "SELECT le_claim_run('paths-job', le_now() - make_interval(secs => %s), 'r', '1 minute')",
            (r + 1,),
        )
        if r == 0:
            continue  # plans were being prepared
        # nested statements are counted (track = all), or nothing is measured
        assert all(got[p] > 0 for p in ("acquire a free key", "renew", "claim a run")), got
        for p in PATHS:
            counts[p].append(got[p])
    cur.execute("SELECT extversion FROM pg_extension WHERE extname = 'leaderlock'")
    version = cur.fetchone()[0]
    print(f"statements per call inside the extension ({args.rounds} calls each, leaderlock {version})")
    result = {}
    for p in PATHS:
        c = counts[p]
        result[p] = {"mean": sum(c) / len(c), "min": min(c), "max": max(c)}
        print(f"  {p:20s} {result[p]['mean']:5.2f}  (min {min(c)}, max {max(c)})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
