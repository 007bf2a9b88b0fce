"""Scheduled runs (contract 22): what a run costs, and how late runs start,
side by side with a ShedLock-style recipe on the same server.

1. Throughput, pgbench (-M prepared), C clients, each its own job:
   - leaderlock: per transaction of the script, read `le_now()` (what every
     replica does before it claims), `le_claim_run` of a run due within the
     last day (at random: a new run each time), `le_finish_run` with its
     term: three statements, two commits that write (the claim and the
     finish, each made durable, contract 8.3);
   - ShedLock-style: the recipe ShedLock's JDBC provider runs for a tick,
     on a table of its own (name primary key, lock_until, locked_at,
     locked_by): `UPDATE ... SET lock_until = now() + at_most, ... WHERE
     name = $1 AND lock_until <= now()`, then the unlock, `UPDATE ... SET
     lock_until = now() WHERE name = $1`: two commits too, no history, no
     term, nothing recorded of a tick lost.
   Reported: transactions (ticks) per second, median of --reps runs.
2. Delay from due to start with five replicas, every --period over
   --slots due instants:
   - leaderlock: five `leaderlock run --every PERIOD` processes; each run's
     command records when it started and its LEADERLOCK_DUE;
   - ShedLock-style: five Python replicas, each sleeping until the next
     multiple of the period on its own clock (as a per-node scheduler
     fires), then running the lock UPDATE; the one that locks records its
     start, then unlocks.
   Delay = start - due, on this machine's wall clock (due instants are on
   the server's lease clock, which starts at the wall clock and has no step
   or stall to take out here; the offset between the two, measured at the
   start, is subtracted). Reported: p50, p99 and max, and how many due
   instants ran once, twice or never.

Usage: runs.py PORT CLI [--clients 4] [--seconds 10] [--reps 3]
                         [--period-ms 500] [--slots 120] [--json FILE]
"""
import argparse
import json
import os
import subprocess
import tempfile
import threading
import time

import bench

LEADERLOCK_SCRIPT = """\\set n random(1, 86000000000)
SELECT le_now() - interval '1 day' + make_interval(secs => :n / 1000000.0) AS d \\gset
SELECT coalesce(le_claim_run('bench-tp-' || :client_id, :d::timestamptz, 'r', interval '1 minute'), 0) AS t \\gset
SELECT le_finish_run('bench-tp-' || :client_id, :d::timestamptz, 'r', :t, true);
"""

SHEDLOCK_TABLE = """
CREATE TABLE IF NOT EXISTS bench_shedlock (
    name       text PRIMARY KEY,
    lock_until timestamptz NOT NULL,
    locked_at  timestamptz NOT NULL,
    locked_by  text NOT NULL
)"""

SHEDLOCK_SCRIPT = """UPDATE bench_shedlock SET lock_until = now() + interval '1 minute', locked_at = now(), locked_by = 'r' WHERE name = 'bench-sl-' || :client_id AND lock_until <= now();
UPDATE bench_shedlock SET lock_until = now() WHERE name = 'bench-sl-' || :client_id;
"""

# The command every leaderlock replica runs: records its start and due
# (a shell and date(1): a few milliseconds, as a small program would take).
RECORDER = 'echo "$(date +%s.%N) $LEADERLOCK_DUE $LEADERLOCK_ID" >> "$0"'


def throughput(port, clients, seconds, reps):
    conn = bench.connect(port)
    bench.q(conn, SHEDLOCK_TABLE)
    bench.q(conn, "INSERT INTO bench_shedlock SELECT 'bench-sl-' || i, now(), now(), '' "
                  "FROM generate_series(0, %s) i ON CONFLICT DO NOTHING", (clients,))
    out = {}
    for name, script in (("leaderlock", LEADERLOCK_SCRIPT), ("shedlock_style", SHEDLOCK_SCRIPT)):
        runs = [bench.pgbench(port, script, clients, seconds=seconds) for _ in range(reps)]
        out[name] = {"tps_runs": runs, "tps": sorted(runs)[len(runs) // 2]}
        bench.say(f"  {name:15} {out[name]['tps']:8.0f} ticks/s (median of {reps} x {seconds} s, "
                  f"{clients} clients)")
    finished = bench.one(conn, "SELECT count(*) FROM leaderlock_runs WHERE job LIKE 'bench-tp-%%' "
                               "AND outcome = 'succeeded'")
    out["leaderlock"]["runs_recorded"] = finished
    conn.close()
    return out


def micros_of(rfc3339):
    from datetime import datetime, timezone
    d = datetime.strptime(rfc3339, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
    return d.timestamp()


def delays(starts, dues, first, last, period):
    """Per due instant in [first, last]: how many started, and the first
    start's delay in ms."""
    count = {}
    lag = {}
    for start, due in zip(starts, dues):
        if first <= due <= last:
            count[due] = count.get(due, 0) + 1
            lag[due] = min(lag.get(due, 1e9), (start - due) * 1000)
    expected = int(round((last - first) / period)) + 1
    once = sum(1 for n in count.values() if n == 1)
    more = sum(1 for n in count.values() if n > 1)
    values = sorted(lag.values())
    return {"due_instants": expected, "ran_once": once, "ran_more": more, "never": expected - len(count),
            "p50_ms": bench.percentile(values, 50), "p99_ms": bench.percentile(values, 99),
            "max_ms": max(values) if values else None}


def leaderlock_delay(port, cli, period_ms, slots, work):
    conn = bench.connect(port)
    offset = bench.one(conn, "SELECT extract(epoch FROM le_now() - clock_timestamp())::float8")
    records = os.path.join(work, "leaderlock.log")
    job = f"bench-delay-{os.getpid()}"
    procs = [subprocess.Popen([cli, "--dsn", f"host={bench.HOST} port={port} user=postgres dbname=postgres",
                               "run", "--every", f"{period_ms}ms", "--job", job, "--ttl", "5s", "--id", f"r{i}",
                               "--", "/bin/sh", "-c", RECORDER, records],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for i in range(5)]
    period = period_ms / 1000
    time.sleep(1.0 + slots * period + 1.0)
    for p in procs:
        p.terminate()
    for p in procs:
        p.wait()
    starts, dues = [], []
    with open(records) as f:
        for line in f:
            t, due, _ = line.split()
            starts.append(float(t) + offset)   # on the lease clock
            dues.append(micros_of(due))
    first = min(dues) + period       # the first replica's start may fall mid-period
    last = first + (slots - 2) * period
    conn.close()
    return delays(starts, dues, first, last, period)


def shedlock_delay(port, period_ms, slots):
    conn = bench.connect(port)
    bench.q(conn, SHEDLOCK_TABLE)
    name = f"bench-delay-sl-{os.getpid()}"
    bench.q(conn, "INSERT INTO bench_shedlock VALUES (%s, now(), now(), '') ON CONFLICT DO NOTHING", (name,))
    period = period_ms / 1000
    end = time.time() + 1.0 + slots * period
    starts, dues = [], []
    lock = threading.Lock()

    def replica(i):
        c = bench.connect(port)
        while True:
            now = time.time()
            due = (int(now / period) + 1) * period
            if due > end:
                break
            time.sleep(due - now)
            # ShedLock: lock_until = now + lockAtMostFor if free; the winner runs
            won = bench.q(c, "UPDATE bench_shedlock SET lock_until = now() + interval '5 seconds', "
                             "locked_at = now(), locked_by = %s WHERE name = %s AND lock_until <= now() "
                             "RETURNING 1", (f"r{i}", name))
            if won:
                with lock:
                    starts.append(time.time())
                    dues.append(due)
                # lockAtLeastFor: held until half the period has passed, so
                # a replica whose clock runs a little late cannot run it again
                bench.q(c, "UPDATE bench_shedlock SET lock_until = GREATEST(now(), locked_at + %s * interval '1 second') "
                           "WHERE name = %s", (period / 2, name))
        c.close()

    threads = [threading.Thread(target=replica, args=(i,)) for i in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    conn.close()
    first = min(dues) + period
    return delays(starts, dues, first, first + (slots - 2) * period, period)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("port", type=int)
    ap.add_argument("cli")
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--period-ms", type=int, default=500)
    ap.add_argument("--slots", type=int, default=120)
    ap.add_argument("--json")
    args = ap.parse_args()
    conn = bench.connect(args.port)
    env = bench.environment(conn)
    conn.close()
    bench.say(f"scheduled runs: throughput ({args.clients} clients)")
    tp = throughput(args.port, args.clients, args.seconds, args.reps)
    bench.say(f"scheduled runs: delay from due to start, 5 replicas, every {args.period_ms} ms, "
              f"{args.slots} due instants")
    with tempfile.TemporaryDirectory() as work:
        os.chmod(work, 0o777)
        ours = leaderlock_delay(args.port, args.cli, args.period_ms, args.slots, work)
    theirs = shedlock_delay(args.port, args.period_ms, args.slots)
    for name, d in (("leaderlock", ours), ("shedlock_style", theirs)):
        bench.say(f"  {name:15} p50 {d['p50_ms']:6.1f} ms  p99 {d['p99_ms']:6.1f} ms  max {d['max_ms']:6.1f} ms; "
                  f"of {d['due_instants']}: {d['ran_once']} ran once, {d['ran_more']} more than once, "
                  f"{d['never']} never")
    if ours["ran_more"]:
        raise SystemExit("runs.py: a due instant ran more than once with leaderlock")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"environment": env, "args": vars(args), "throughput": tp,
                       "delay": {"leaderlock": ours, "shedlock_style": theirs}}, f, indent=2)


if __name__ == "__main__":
    main()
