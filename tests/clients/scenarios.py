"""One scenario suite for every client (Python, Node.js, Go, and the Rust
one through `leaderlock run`), against a real server.

Each client ships a candidate program that campaigns for KEY as ID and,
while it leads, appends "tick ID TERM UNIX_SECONDS" to a records file every
20 ms, checking its lease before each tick. The records are the proof:
ticks of two ids never interleave, a new leader's term is higher, a
candidate paused past its ttl writes nothing once resumed.

Scenarios, for each client:
- two candidates: exactly one leads, for several ttls;
- shutdown (SIGTERM) of the leader: the other leads within milliseconds;
- kill -9 of the leader: the other leads within ttl + its polling period;
- SIGSTOP of the leader past its ttl: the other takes over once the lease
  ends, and the paused one, resumed, never ticks again in that term (of
  `leaderlock run`, the CLI is paused and its supervisor stops the command
  at the deadline);
- with --pgdata: the whole server frozen (SIGSTOP of every process) past
  the ttl: the leader stops at its local deadline, and after the server
  resumes somebody leads again;
- with --pgbouncer: two candidates through pgbouncer in transaction
  pooling mode, and kill -9 of the leader there.

Usage: scenarios.py --dsn postgresql://USER@HOST:PORT/DB [--clients python,node,go,rust]
                    [--ttl S] [--pgdata DIR] [--pgbouncer]
Needs: LEADERLOCK_CLI (rust), PY_CLIENT_PYTHON (python; default python3),
GO_CANDIDATE (go: clients/go/test.sh --candidate FILE builds it), node
with clients/node built. Prints each measured figure; exits 1 on a failure.
"""
import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from urllib.parse import urlparse

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
TICKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ticker.py")


def command(client, dsn, key, me, ttl, records):
    if client == "python":
        return [os.environ.get("PY_CLIENT_PYTHON", sys.executable),
                os.path.join(REPO, "clients/python/tests/candidate.py"), dsn, key, me, str(ttl), records]
    if client == "node":
        return ["node", os.path.join(REPO, "clients/node/test/candidate.mjs"), dsn, key, me, str(ttl), records]
    if client == "go":
        return [os.environ["GO_CANDIDATE"], dsn, key, me, str(ttl), records]
    if client == "rust":  # the Rust client inside `leaderlock run`; the command ticks
        return [os.environ["LEADERLOCK_CLI"], "--dsn", dsn, "run", "--key", key, "--id", me, "--ttl", f"{ttl}s",
                "--restart", "--", sys.executable, TICKER, records]
    raise ValueError(client)


class Candidate:
    def __init__(self, client, dsn, key, me, ttl, records, work):
        env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "clients/python/src"))
        self.log = open(os.path.join(work, f"{me}.log"), "w")
        self.proc = subprocess.Popen(command(client, dsn, key, me, ttl, records), env=env,
                                     stdout=self.log, stderr=self.log, stdin=subprocess.DEVNULL)
        self.id = me

    def signal(self, signo):
        os.kill(self.proc.pid, signo)

    def end(self):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def ticks(path):
    out = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 4 and parts[0] == "tick":
                    out.append((float(parts[3]), parts[1], int(parts[2])))
    return sorted(out)


def wait_for(predicate, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.02)
    return False


class Failure(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failure(what)


def never_two(records):
    """Ticks of two ids never interleave, and each change of leader raises the term."""
    t = ticks(records)
    for (t1, id1, term1), (t2, id2, term2) in zip(t, t[1:]):
        if id1 != id2:
            check(term2 > term1, f"{id2} ticked in term {term2} at {t2:.3f} after {id1} in term {term1} at {t1:.3f}")
    return t


def leader_of(records):
    t = ticks(records)
    return t[-1][1] if t else None


def scenario(client, dsn, ttl, name, body):
    work = tempfile.mkdtemp(prefix=f"leaderlock-scenario-{client}-")
    os.chmod(work, 0o777)
    records = os.path.join(work, "records")
    key = f"scenario-{client}-{uuid.uuid4().hex[:8]}"  # no spaces: other suites parse `status`
    started = []

    def start(me):
        c = Candidate(client, dsn, key, me, ttl, records, work)
        started.append(c)
        return c
    try:
        figure = body(start, records)
        never_two(records)
        print(f"  ok   {client:<6} {name}: {figure}")
        return True
    except Failure as e:
        print(f"  FAIL {client:<6} {name}: {e} (logs in {work})")
        return False
    finally:
        for c in started:
            c.end()


def by_id(cands, me):
    return next(c for c in cands if c.id == me)


def server_processes(pgdata):
    with open(os.path.join(pgdata, "postmaster.pid")) as f:
        postmaster = int(f.readline())
    children = subprocess.run(["ps", "-o", "pid=", "--ppid", str(postmaster)], capture_output=True, text=True)
    return [postmaster] + [int(p) for p in children.stdout.split()]


def start_pgbouncer(dsn, work):
    """pgbouncer in transaction pooling mode in front of `dsn`'s database;
    returns (the DSN through it, its process)."""
    u = urlparse(dsn)
    db, user = u.path.lstrip("/"), u.username or "postgres"
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    d = tempfile.mkdtemp(prefix="pgbouncer-", dir=work)
    with open(os.path.join(d, "users.txt"), "w") as f:
        f.write(f'"{user}" ""\n')
    with open(os.path.join(d, "pgbouncer.ini"), "w") as f:
        f.write(f"[databases]\n{db} = host={u.hostname} port={u.port} dbname={db}\n[pgbouncer]\n"
                f"listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\nauth_type = trust\n"
                f"auth_file = {d}/users.txt\npool_mode = transaction\ndefault_pool_size = 4\n")
    as_user = ["sudo", "-u", "postgres"] if os.geteuid() == 0 else []
    if as_user:
        subprocess.run(["chown", "-R", "postgres", d], check=False)
    proc = subprocess.Popen(as_user + ["pgbouncer", os.path.join(d, "pgbouncer.ini")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if not wait_for(lambda: socket.socket().connect_ex(("127.0.0.1", port)) == 0, 10):
        raise RuntimeError("pgbouncer did not start")
    return f"postgresql://{user}@127.0.0.1:{port}/{db}", proc


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dsn", required=True)
    ap.add_argument("--clients", default="python,node,go,rust")
    ap.add_argument("--ttl", type=float, default=2.0)
    ap.add_argument("--pgdata", help="the server's data directory: also freeze the whole server")
    ap.add_argument("--pgbouncer", action="store_true", help="also run candidates through pgbouncer")
    args = ap.parse_args()
    ttl, dsn = args.ttl, args.dsn

    def one_leads(start, records):
        cands = [start("a"), start("b")]
        check(wait_for(lambda: ticks(records), 15), "nobody led")
        time.sleep(3 * ttl)
        ids = {i for _, i, _ in ticks(records)}
        check(len(ids) == 1, f"both ticked: {ids}")
        gaps = [b[0] - a[0] for a, b in zip(ticks(records), ticks(records)[1:])]
        check(max(gaps) < ttl / 2, f"the leader paused {max(gaps):.2f} s while leading")
        del cands
        return f"one leader for {3 * ttl:.0f} s"

    def leader_and_follower(start, records):
        """Candidates a and b, one leading for a second; returns them and the leader's id."""
        cands = [start("a")]
        check(wait_for(lambda: ticks(records), 15), "nobody led")
        cands.append(start("b"))
        time.sleep(1.0)
        return cands, leader_of(records)

    def handover(start, records, signo, within):
        """Seconds from the leader's last tick (it gets `signo`) to the next leader's first."""
        cands, first = leader_and_follower(start, records)
        by_id(cands, first).signal(signo)
        check(wait_for(lambda: leader_of(records) not in (None, first), within), "no handover")
        t = ticks(records)
        return min(x[0] for x in t if x[1] != first) - max(x[0] for x in t if x[1] == first)

    def shutdown(start, records):
        gap = handover(start, records, signal.SIGTERM, 10) * 1000
        check(gap < 500, f"handover took {gap:.0f} ms")
        return f"handover {gap:.0f} ms after the leader's last tick"

    def kill_9(start, records):
        gap = handover(start, records, signal.SIGKILL, ttl + 10)
        check(gap < ttl + 1.5, f"takeover {gap:.2f} s after the dead leader's last tick")
        return f"takeover {gap:.2f} s after the dead leader's last tick (ttl {ttl} s)"

    def paused(start, records):
        cands, first = leader_and_follower(start, records)
        old = by_id(cands, first)
        old.signal(signal.SIGSTOP)
        stopped_at = time.time()
        check(wait_for(lambda: leader_of(records) not in (None, first), ttl + 10), "no takeover")
        time.sleep(0.5)
        old.signal(signal.SIGCONT)
        time.sleep(1.5)
        t = ticks(records)
        # Its lease ran out within ttl of the pause (of `leaderlock run`
        # only the CLI is paused: its command goes on until the supervisor
        # stops it at the deadline); nothing after that, resumed or not.
        late = [x for x in t if x[1] == first and x[0] > stopped_at + ttl]
        check(not late, f"the paused leader ticked past its lease: {late[:3]}")
        took = min(x[0] for x in t if x[1] != first) - stopped_at
        last = max(x[0] for x in t if x[1] == first) - stopped_at
        return (f"its last tick {last:.2f} s after the pause, the next leader's first {took:.2f} s after; "
                "nothing once resumed")

    def frozen_server(start, records):
        cands = [start("a"), start("b")]
        check(wait_for(lambda: ticks(records), 15), "nobody led")
        time.sleep(1.0)
        last = ticks(records)[-1]
        pids = server_processes(args.pgdata)
        for p in pids:
            os.kill(p, signal.SIGSTOP)
        frozen_at = time.time()
        try:
            time.sleep(1.5 * ttl)
        finally:
            for p in pids:
                os.kill(p, signal.SIGCONT)
        t = ticks(records)
        late = [x for x in t if x[1] == last[1] and x[2] == last[2] and x[0] > frozen_at + ttl]
        check(not late, f"the leader ticked past its lease while the server was frozen: {late[:3]}")
        stopped = max(x[0] for x in t if x[1] == last[1] and x[2] == last[2]) - frozen_at
        check(wait_for(lambda: ticks(records)[-1][0] > time.time() - 0.5, 15), "nobody led after the server resumed")
        del cands
        return f"the leader stopped {stopped:.2f} s into the freeze (ttl {ttl} s); a leader again after it"

    ok = True
    for client in args.clients.split(","):
        for name, body in (("two candidates, one leader", one_leads), ("shutdown hands over", shutdown),
                           ("kill -9 of the leader", kill_9), ("SIGSTOP of the leader past its ttl", paused)):
            ok &= scenario(client, dsn, ttl, name, body)
        if args.pgdata:
            ok &= scenario(client, dsn, ttl, "the server frozen past the ttl", frozen_server)
    if args.pgbouncer:
        work = tempfile.mkdtemp(prefix="leaderlock-scenario-pgbouncer-")
        os.chmod(work, 0o777)
        bouncer_dsn, bouncer = start_pgbouncer(dsn, work)
        try:
            for client in args.clients.split(","):
                ok &= scenario(client, bouncer_dsn, ttl, "two candidates through pgbouncer (transaction pooling)",
                               one_leads)
                ok &= scenario(client, bouncer_dsn, ttl, "kill -9 of the leader through pgbouncer", kill_9)
        finally:
            bouncer.terminate()
            bouncer.wait()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
