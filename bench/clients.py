"""Every client side by side (Python, Node.js, Go, and the Rust client
inside `leaderlock run`), with the candidates of tests/clients:

- handover: a leader shut down (SIGTERM) while another candidate waits;
  from the leader's last tick to the next leader's first (both write the
  same file with the host's clock), over ROUNDS rounds;
- CPU per renewal: one leader for SECONDS with ttl 0.6 s (a renewal every
  200 ms; `leaderlock run` takes no less) and again with ttl 30 s (one
  every 10 s); the difference in the process's CPU time (user + system, in
  clock ticks of 10 ms: run long enough), divided by the difference in
  renewals.
  (Of `leaderlock run`, the CLI and its supervisor; the command is apart.)

Usage: clients.py PORT CLI [--rounds N] [--seconds S] [--dbname DB] [--json FILE]
Needs GO_CANDIDATE and PY_CLIENT_PYTHON as tests/clients/scenarios.py.
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "clients"))
import scenarios  # noqa: E402

CLIENTS = ("python", "node", "go", "rust")


def cpu_seconds(pid):
    """utime + stime of pid and of its children that are still running."""
    total = 0.0
    pids = [pid] + [int(p) for p in subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)],
                                                    capture_output=True, text=True).stdout.split()]
    for p in pids:
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(") ", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except FileNotFoundError:
            pass
    return total


def leader_of(records):
    """The id of the last tick recorded, if any."""
    t = scenarios.ticks(records)
    return t[-1][1] if t else None


def handovers(client, dsn, rounds, work):
    gaps = []
    for r in range(rounds):
        records = os.path.join(work, f"{client}-handover-{r}")
        key = f"bench-clients-{client}-{uuid.uuid4().hex[:6]}"
        a = scenarios.Candidate((client, None), dsn, key, "a", 10, records, work)
        try:
            if not scenarios.wait_for(lambda: scenarios.ticks(records), 15):
                raise RuntimeError(f"{client}: nobody led")
            b = scenarios.Candidate((client, None), dsn, key, "b", 10, records, work)
            try:
                time.sleep(0.5)
                a.signal(signal.SIGTERM)
                if not scenarios.wait_for(lambda: leader_of(records) == "b", 10):
                    raise RuntimeError(f"{client}: no handover")
                t = scenarios.ticks(records)
                gaps.append((min(x[0] for x in t if x[1] == "b") - max(x[0] for x in t if x[1] == "a")) * 1000)
            finally:
                b.end()
        finally:
            a.end()
    return gaps


def cpu_per_renewal(client, dsn, seconds, work):
    spent = {}
    for ttl in (0.6, 30.0):
        records = os.path.join(work, f"{client}-cpu-{ttl}")
        c = scenarios.Candidate((client, None), dsn, f"bench-cpu-{client}-{uuid.uuid4().hex[:6]}", "a", ttl, records, work)
        try:
            if not scenarios.wait_for(lambda: scenarios.ticks(records), 15):
                raise RuntimeError(f"{client}: nobody led")
            before = cpu_seconds(c.proc.pid)
            time.sleep(seconds)
            spent[ttl] = cpu_seconds(c.proc.pid) - before
        finally:
            c.end()
    renewals = seconds / 0.2 - seconds / 10.0
    return (spent[0.6] - spent[30.0]) / renewals * 1e6  # µs per renewal


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("port", type=int)
    ap.add_argument("cli")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--dbname", default="postgres")
    ap.add_argument("--json")
    args = ap.parse_args()
    os.environ["LEADERLOCK_CLI"] = args.cli
    dsn = f"postgresql://postgres@127.0.0.1:{args.port}/{args.dbname}"
    work = tempfile.mkdtemp(prefix="leaderlock-bench-clients-")
    os.chmod(work, 0o777)
    out = {}
    for client in CLIENTS:
        gaps = handovers(client, dsn, args.rounds, work)
        cpu = cpu_per_renewal(client, dsn, args.seconds, work)
        out[client] = {"handover_ms": {"p50": statistics.median(gaps), "max": max(gaps), "rounds": len(gaps)},
                       "cpu_us_per_renewal": cpu}
        print(f"  {client:<6} handover p50 {statistics.median(gaps):6.1f} ms, max {max(gaps):6.1f} ms "
              f"({len(gaps)} rounds); CPU per renewal {cpu:7.0f} µs", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
