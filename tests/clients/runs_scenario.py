"""Scheduled runs (contract 22) through every client: the same scenario and
the same assertions for Python, Node.js, Go, Java and Rust (`leaderlock run
--every`, whose command is run_ticker.py).

Each client ships a runner program, started as

    PROGRAM DSN JOB ID PERIOD_MS TTL_SECONDS GRACE_SECONDS RECORDS WORK_SECONDS

that schedules JOB every PERIOD_MS as ID and, for each run it claims,
appends to RECORDS "start ID TERM DUE UNIX_SECONDS", then every 20 ms
"tick ...", each while its run is still its own by its local deadline
(checked right before each record), and after WORK_SECONDS "end ..." (or
"lost ..." when the run stopped being its own first). Its starts and ticks
are what it did as the run's runner. DUE is RFC 3339 UTC with
microseconds.

Per client (the clients side by side, each on a job of its own), five
replicas for --slots due instants, every --period-ms,
with a claim's ttl of 1 s and a misfire grace of 3 s (a lost runner's run is
claimed again), while this script, every 0.5 to 1.5 s, either kill -9s a
replica (started again under a new id) or stops one with SIGSTOP for 1.2 to
2 s (mostly the replica running a run right then). Then, from the runners'
records and the server's `leaderlock_runs`:

- every due instant of the window has its run, settled (succeeded, failed
  or missed), once;
- every claim's term is unique; the runners of one run never overlap in
  time (first to last record), and a later one has a higher term;
- no run is claimed after it finished: its row's term is its last
  runner's (or later), and its attempts are at least its runners;
- the chaos reached runners: at least one run was claimed again.

With --pgdata, the server is also restarted (pg_ctl restart -m fast) once,
halfway, under every client's replicas at once.

Usage: runs_scenario.py --dsn postgresql://USER@HOST:PORT/DB [--clients python,node,go,java,rust]
                        [--slots 20] [--period-ms 300] [--pgdata DIR]
Needs: psycopg2; PY_CLIENT_PYTHON (python), node with clients/node built,
GO_RUN_CANDIDATE (go: clients/go/test.sh --run-candidate FILE), JAVA_RUN_CANDIDATE
(java: clients/java/test.sh --run-candidate FILE), LEADERLOCK_CLI (rust).
"""
import argparse
import collections
import datetime
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time

import psycopg2

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
RUN_TICKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "run_ticker.py")
CLIENTS = ("python", "node", "go", "java", "rust")
TTL_S = 1.0
GRACE_S = 3.0


def command(client, dsn, job, me, period_ms, records, work):
    args = [dsn, job, me, str(period_ms), str(TTL_S), str(GRACE_S), records, str(work)]
    if client == "python":
        return [os.environ.get("PY_CLIENT_PYTHON", sys.executable),
                os.path.join(REPO, "clients/python/tests/run_candidate.py"), *args]
    if client == "node":
        return ["node", os.path.join(REPO, "clients/node/test/run_candidate.mjs"), *args]
    if client == "go":
        return [os.environ["GO_RUN_CANDIDATE"], *args]
    if client == "java":
        return [os.environ["JAVA_RUN_CANDIDATE"], *args]
    if client == "rust":
        return [os.environ["LEADERLOCK_CLI"], "--dsn", dsn, "run", "--every", f"{period_ms}ms", "--job", job,
                "--id", me, "--ttl", f"{TTL_S}s", "--grace", "0.25s", "--misfire-grace", f"{GRACE_S}s",
                "--", sys.executable, RUN_TICKER, records, str(work)]
    raise ValueError(client)


def micros(rfc3339):
    d = datetime.datetime.strptime(rfc3339, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc)
    return round(d.timestamp() * 1e6)


def records(path):
    """(kind, id, term, due in µs, time) per line; a line cut by a kill -9
    is left out."""
    out = []
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 5 and line.endswith("\n"):
                kind, me, term, due, t = parts
                out.append((kind, me, int(term), micros(due), float(t)))
    return out


def query(dsn, sql, args=()):
    with psycopg2.connect(dsn) as c, c.cursor() as cur:
        cur.execute(sql, args)
        return cur.fetchall()


class Failure(Exception):
    pass


def wait_for_server(dsn, timeout=60):
    """le_now() once the server answers (after a restart)."""
    end = time.monotonic() + timeout
    while True:
        try:
            return query(dsn, "SELECT le_now()")[0][0]
        except psycopg2.OperationalError:
            if time.monotonic() > end:
                raise
            time.sleep(0.2)


def restart_server(dsn, pgdata):
    """pg_ctl restart -m fast, as the scenario suite does it."""
    import argparse as _argparse
    import scenarios
    server = _argparse.Namespace(dsn=dsn, args=_argparse.Namespace(pgdata=pgdata), bindir=None)
    down = time.time()
    scenarios.pg_ctl(server, "-m", "fast", "-w", "-t", "60", "-l", scenarios.server_log(pgdata), "restart")
    print(f"  .. the server restarted in {time.time() - down:.2f} s, every client's replicas running", flush=True)


def check(cond, what):
    if not cond:
        raise Failure(what)


def scenario(client, dsn, slots, period_ms):
    job = f"runs-scenario-{client}-{os.getpid()}-{random.randrange(1 << 20)}"
    work = tempfile.mkdtemp(prefix="leaderlock-runs-")
    os.chmod(work, 0o777)
    path = os.path.join(work, "records")
    period = period_ms / 1000
    gen = collections.Counter()
    procs = {}

    def start(name):
        gen[name] += 1
        procs[name] = subprocess.Popen(command(client, dsn, job, f"{name}-{gen[name]}", period_ms, path,
                                               period * 0.3),
                                       env=dict(os.environ, PYTHONPATH=os.path.join(REPO, "clients/python/src")),
                                       stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, f"{name}.log"), "a"))

    for name in "ABCDE":
        start(name)
    # The window begins with the first run a replica claimed: how long a
    # replica takes to start (a JVM's, under load, beyond the misfire
    # grace) is not what is checked.
    first_due = None
    started = time.monotonic()
    while first_due is None and time.monotonic() < started + 60:
        time.sleep(0.05)
        try:
            first_due = query(dsn, "SELECT min(due) FROM leaderlock_runs WHERE job = %s", (job,))[0][0]
        except psycopg2.OperationalError:
            pass
    check(first_due is not None, "no run claimed within 60 s of the replicas' start")
    t0 = first_due - datetime.timedelta(microseconds=1)
    actions = collections.Counter()
    end = time.monotonic() + slots * period
    try:
        while time.monotonic() < end:
            time.sleep(random.uniform(0.5, 1.5))
            try:
                holder = query(dsn, "SELECT holder FROM leaderlock_runs WHERE job = %s AND finished_at IS NULL "
                                    "AND expires_at > le_now() ORDER BY due DESC LIMIT 1", (job,))
            except psycopg2.OperationalError:   # the server is restarting (--pgdata)
                holder = None
            running = [n for n in procs if holder and holder[0][0] == f"{n}-{gen[n]}"]
            name = running[0] if running and random.random() < 0.8 else random.choice("ABCDE")
            actions["at_the_runner"] += bool(running) and name == running[0]
            if random.random() < 0.5:
                actions["kill_9"] += 1
                procs[name].kill()
                procs[name].wait()
                start(name)
            else:
                actions["sigstop"] += 1
                procs[name].send_signal(signal.SIGSTOP)
                time.sleep(random.uniform(1.2, 2.0))
                procs[name].send_signal(signal.SIGCONT)
        time.sleep(GRACE_S + TTL_S)   # the last runs finish, or are claimed again and finish
    finally:
        for p in procs.values():
            p.send_signal(signal.SIGCONT)
            p.terminate()
        for p in procs.values():
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    t1 = wait_for_server(dsn)
    rows = query(dsn, "SELECT due, term, attempts, outcome, finished_at IS NOT NULL FROM leaderlock_runs "
                      "WHERE job = %s", (job,))
    row_of = {round(r[0].timestamp() * 1e6): r for r in rows}
    step = period_ms * 1000
    first = (round(t0.timestamp() * 1e6) // step + 1) * step
    last = (round((t1.timestamp() - GRACE_S - 2 * TTL_S) * 1e6) // step) * step
    window = range(first, last + 1, step)
    missing = [d for d in window if d not in row_of]
    check(not missing, f"{len(missing)} due instants without a run")
    unsettled = [d for d in window if not row_of[d][4]]
    check(not unsettled, f"{len(unsettled)} runs never settled")
    recs = records(path)
    starts = [(t, me, term, due) for kind, me, term, due, t in recs if kind == "start"]
    terms = [term for _, _, term, _ in starts]
    check(len(terms) == len(set(terms)), "a term was issued twice")
    # A runner acts at its start and ticks (each after checking the run is
    # still its own); "lost" and "end" are what it says afterwards.
    spans = {}
    for kind, me, term, due, t in recs:
        if kind == "lost":
            check(not any(k in ("tick", "end") and m == me and tm == term and tt > t
                          for k, m, tm, _, tt in recs), f"{me} recorded after it lost term {term}")
        if kind not in ("start", "tick"):
            continue
        first_t, last_t, d = spans.get((me, term), (t, t, due))
        spans[(me, term)] = (min(first_t, t), max(last_t, t), d)
    per_run = collections.defaultdict(list)
    for (me, term), (s, e, due) in spans.items():
        per_run[due].append((s, e, term, me))
    again = 0
    for due, runners in per_run.items():
        runners.sort()
        for (s1, e1, t1, m1), (s2, e2, t2, m2) in zip(runners, runners[1:]):
            check(e1 < s2, f"run {due}: {m1} (term {t1}) still ran when {m2} (term {t2}) started")
            check(t1 < t2, f"run {due}: term {t2} after term {t1}")
        row = row_of.get(due)
        check(row is not None, f"run {due} ran but has no row")
        check(row[1] >= runners[-1][2], f"run {due}: its row's term {row[1]} is below its runner's")
        check(row[2] >= len(runners), f"run {due}: {len(runners)} runners, {row[2]} attempts")
        again += row[2] > 1
    outcomes = collections.Counter(row_of[d][3] for d in window)
    check(outcomes["succeeded"] >= len(window) // 2, f"most runs must succeed: {dict(outcomes)}")
    if actions["at_the_runner"] >= 4:
        check(again > 0, "no run was claimed again: the chaos never reached a runner")
    return (f"{len(window)} due instants every {period_ms} ms, {dict(actions)}; outcomes {dict(outcomes)}, "
            f"{again} claimed again, {len(starts)} runs started")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dsn", required=True)
    ap.add_argument("--clients", default=",".join(CLIENTS))
    ap.add_argument("--slots", type=int, default=20)
    ap.add_argument("--period-ms", type=int, default=300)
    ap.add_argument("--pgdata", help="the server's data directory: also restart it, once, halfway")
    args = ap.parse_args()
    clients = [c for c in args.clients.split(",") if c]
    for c in clients:
        if c not in CLIENTS:
            raise SystemExit(f"runs_scenario.py: unknown client {c!r} (known: {', '.join(CLIENTS)})")
    failed = []
    t0 = time.monotonic()

    def one_client(client):
        try:
            summary = scenario(client, args.dsn, args.slots, args.period_ms)
            print(f"  ok    {client}: {summary}", flush=True)
        except Exception as e:   # a failed check, or the harness's own error
            failed.append(client)
            print(f"  FAIL  {client}: {type(e).__name__}: {e}", flush=True)

    # The clients side by side, each on a job of its own, with chaos of its own.
    threads = [threading.Thread(target=one_client, args=(c,)) for c in clients]
    for t in threads:
        t.start()
    if args.pgdata:
        # one restart of the server, halfway, under every client at once
        time.sleep(args.slots * args.period_ms / 1000 / 2)
        restart_server(args.dsn, args.pgdata)
    for t in threads:
        t.join()
    print(f"runs scenario: {len(clients) - len(failed)} passed, {len(failed)} failed in "
          f"{time.monotonic() - t0:.0f} s", flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
