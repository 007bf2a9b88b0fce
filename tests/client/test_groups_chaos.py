"""Contract 26 under chaos (docs/groups.md): a group of 256 partitions whose
members are processes of their own (group_member.py: the Python client's
leaderlock.member, ttl 2 s) scaled 1 -> 8 -> 3, one change at a time:
joins, graceful leaves, kill -9, a SIGSTOP longer than the ttl and its
SIGCONT, a server restart (pg_ctl restart -m fast) and an outage (the
server down longer than the ttl) while they run.
Each change waits until the group is stable again, plus a short dwell, so
the history between two changes is the first one's doing. Checked:

1. the ledger of fenced writes (le_assert_partition and the INSERT in one
   transaction): no write under a superseded term (the partition's term,
   read by the INSERT itself, is the write's), terms in commit order never
   go back on a partition, one member per term, the member the history
   granted that term to;
2. the members' own ticks (unguarded acts, each between two readings of the
   system-wide monotonic clock around `owns`): on a partition, no member
   acts in a term after another member acted in a later one (never two
   members inside their windows);
3. after each change, every partition owned by a live member, no
   revocation pending, and max - min owned per live member <= 1, within
   ttl + 2 renewal periods (+ the poll's 0.1 s), counted from the change
   (a restart or the outage: from its end, when the server is back);
4. from the history: a join (the SIGCONT's rejoin too) moves at most
   ceil(P/N) + 1 partitions (N members after it), revoking none of them
   twice; a leave, a kill or a
   stop moves only the leaver's partitions, each once.

Short in the test command (about 35 s). By hand, longer:
LEADERLOCK_GROUPS_CHAOS_ROUNDS=N adds N-1 cycles 3 -> 8 -> 3 (each with a
stop, a restart and an outage at random points; random dwells);
LEADERLOCK_GROUPS_CHAOS_SEED picks the run. Checking the checker, by hand:
LEADERLOCK_CHECK_THE_CHECKER (group_member.py) makes every member
misbehave; the test must then fail, and says which check caught it.
"""
import math
import os
import random
import shutil
import signal
import subprocess
import tempfile
import time
import unittest
from collections import defaultdict

import psycopg2

from harness import DB, HOST, PGDATA, PORT, PORTABLE, WORK, Cluster, connect, numbered, wait_for

TTL = 2.0
RENEW = TTL / 3
PARTITIONS = 256
# Longer than the bound: a member that does not give a revoked partition
# back (it acks at its next round) makes the time to stable fail.
DRAIN = 5.0
# ttl + 2 renewal periods from the change itself (a kill or a stop too:
# its session lapses within the ttl), plus the poll's period (0.1 s).
ALLOWANCE = 0.1
BOUND = TTL + 2 * RENEW + ALLOWANCE
ROUNDS = int(os.environ.get("LEADERLOCK_GROUPS_CHAOS_ROUNDS", "1"))
SEED = int(os.environ.get("LEADERLOCK_GROUPS_CHAOS_SEED", str(time.time_ns() % 100000)))
HERE = os.path.dirname(os.path.abspath(__file__))
MEMBER = os.path.join(HERE, "group_member.py")
CLIENT_SRC = os.path.join(HERE, "..", "..", "clients", "python", "src")
PY_CLIENT = os.environ.get("PY_CLIENT_PYTHON", "/opt/leaderlock/python-client/bin/python")
EVENTS = ("partition_granted", "partition_revoked", "partition_freed")
JOINS = ("join", "cont")
LEAVES = ("leave", "kill", "stop")


class Proc:
    def __init__(self, name, popen):
        self.name, self.popen = name, popen
        self.state = "live"  # live, stopped, gone


@unittest.skipIf(PORTABLE, "contract 26 is the compiled edition's")
@unittest.skipUnless(PGDATA, "restarts the server: needs LEADERLOCK_PGDATA")
@unittest.skipUnless(os.path.exists(PY_CLIENT), f"the Python client's interpreter ({PY_CLIENT})")
class GroupsChaosTest(unittest.TestCase):
    def setUp(self):
        self.conn = connect()
        suffix = f"{os.getpid()}_{time.time_ns()}"
        self.group = f"chaos-{suffix}"
        self.ledger = f"groups_chaos_ledger_{suffix}"
        self.dir = tempfile.mkdtemp(prefix="groups-chaos-", dir=WORK)
        self.sql(f"CREATE TABLE {self.ledger} (partition int, term bigint, member text, at timestamptz, "
                 "current_term bigint, id bigserial)")
        self.procs = {}
        self.rng = random.Random(SEED)
        self.changes = []
        self.stuck = []  # members that did not leave when told to

    def tearDown(self):
        for p in self.procs.values():
            if p.popen.poll() is None:
                p.popen.send_signal(signal.SIGCONT)
                p.popen.kill()
                p.popen.wait(10)
        self.sql(f"DROP TABLE {self.ledger}")
        self.conn.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- the cluster -----------------------------------------------------------

    def sql(self, sql, args=(), fetch=None):
        """Runs sql on this test's connection, connecting again once when the
        server restarted under it; fetch: "one" (the first column of the
        first row) or "all"."""
        for attempt in (1, 2):
            try:
                with self.conn.cursor() as cur:
                    cur.execute(sql, args)
                    if fetch == "one":
                        return cur.fetchone()[0]
                    return cur.fetchall() if fetch == "all" else None
            except (psycopg2.OperationalError, psycopg2.InterfaceError):
                if attempt == 2:
                    raise
                self.conn.close()
                self.conn = connect()

    def snapshot(self):
        """Each partition: its member, and whether it is settled (not
        revoked, its owner's session the one it was granted under, live)."""
        return self.sql(
            "SELECT p.partition, p.member, p.revoke_until IS NULL AND coalesce(s.expires_at > le_now(), false) "
            "FROM leaderlock_partitions p "
            "LEFT JOIN leaderlock_members m ON m.grp = p.grp AND m.member = p.member AND m.session = p.session "
            "LEFT JOIN leaderlock_sessions s ON s.session = m.session "
            "WHERE p.grp = %s AND p.partition <= %s", (self.group, PARTITIONS), fetch="all")

    def stable(self, expected):
        """Whether every partition is settled with a member of `expected`,
        and they own floor(P/N) or ceil(P/N) each; and what was seen."""
        rows = self.snapshot()
        counts = {m: 0 for m in expected}
        unsettled = 0
        for _, member, settled in rows:
            if member in counts and settled:
                counts[member] += 1
            else:
                unsettled += 1
        spread = max(counts.values()) - min(counts.values())
        ok = len(rows) == PARTITIONS and unsettled == 0 and spread <= 1
        return ok, f"{unsettled} unsettled, owned {sorted(counts.values())}"

    def wait_stable(self, timeout):
        """The monotonic time the group was first seen stable with the live
        members (polled every 0.1 s), or None after `timeout`."""
        expected = {n for n, p in self.procs.items() if p.state == "live"}
        deadline = time.monotonic() + timeout
        seen = ""
        while time.monotonic() < deadline:
            for n in expected:
                code = self.procs[n].popen.poll()
                self.assertIsNone(code, f"member {n} exited ({code}): {self.output(n)}")
            ok, seen = self.stable(expected)
            if ok:
                return time.monotonic()
            time.sleep(0.1)
        print(f"\n  not stable after {timeout:.1f} s: {seen}")
        return None

    # -- the members -----------------------------------------------------------

    def spawn(self, name):
        dsn = f"host={HOST} port={PORT} dbname={DB} user=postgres"
        out = open(os.path.join(self.dir, name + ".out"), "w")
        env = {**os.environ, "PYTHONPATH": CLIENT_SRC}
        popen = subprocess.Popen([PY_CLIENT, MEMBER, dsn, self.group, name, str(TTL), str(PARTITIONS), str(DRAIN),
                                  self.ledger, self.dir], env=env, stdout=out, stderr=subprocess.STDOUT)
        out.close()
        self.procs[name] = Proc(name, popen)

    def output(self, name):
        with open(os.path.join(self.dir, name + ".out"), errors="replace") as f:
            return f.read()[-2000:]

    def events(self, name):
        """The member's events file: (word, rest...) per line."""
        path = os.path.join(self.dir, name + ".events")
        if not os.path.exists(path):
            return []
        with open(path) as f:
            return [line.split() for line in f if line.strip()]

    def first_event(self, name, word):
        for e in self.events(name):
            if e[0] == word:
                return float(e[1])
        return None

    def wait_exit(self, proc):
        """Waits for a member told to leave; one still there after 10 s is
        killed, and counted against check 3."""
        try:
            proc.popen.wait(10)
        except subprocess.TimeoutExpired:
            proc.popen.kill()
            proc.popen.wait(10)
            self.stuck.append(proc.name)

    def live(self):
        return sorted(n for n, p in self.procs.items() if p.state == "live")

    # -- the changes -----------------------------------------------------------

    def change(self, kind, name, dwell):
        """One change, then the wait until the group is stable again (its
        time recorded), then `dwell` seconds of steady work."""
        at = self.sql("SELECT le_now()", fetch="one")  # the history's clock: where its window starts
        t0 = began = time.monotonic()
        proc = self.procs.get(name)
        if kind == "join":
            self.spawn(name)
        elif kind == "leave":
            proc.popen.send_signal(signal.SIGTERM)  # it ends its `with` block: le_leave
            proc.state = "gone"
        elif kind == "kill":
            proc.popen.kill()
            proc.state = "gone"
        elif kind == "stop":
            proc.popen.send_signal(signal.SIGSTOP)
            proc.state = "stopped"
        elif kind == "cont":
            proc.popen.send_signal(signal.SIGCONT)
            proc.state = "live"
        elif kind == "restart":
            Cluster.main().restart("fast")
            t0 = time.monotonic()  # its end: the server is back
        elif kind == "outage":
            # down longer than the ttl: the lease clock counts it, so every
            # session lapses and the members come back as newcomers
            Cluster.main().stop("fast")
            time.sleep(TTL + 0.5)
            Cluster.main().start()
            t0 = time.monotonic()
        seen = self.wait_stable(BOUND + 10)
        if kind == "join":
            t0 = self.first_event(name, "entering") or t0  # the child's first le_join is sent after this
        if kind == "leave":
            self.wait_exit(proc)
        if kind in ("restart", "outage"):
            name = f"({t0 - began:.1f} s)"  # how long the server was away
        self.changes.append({"kind": kind, "name": name, "at": at, "t0": t0, "start": t0, "seen": seen,
                             "n": len(self.live())})
        if kind == "stop":  # stopped longer than the ttl, whatever the dwell
            dwell = max(dwell, began + TTL + 0.5 - time.monotonic())
        time.sleep(dwell)

    def schedule(self):
        """The changes: (kind, member) in order. Round 1: joins to 8, a stop
        and its cont, a restart, then leaves and kills down to 3 with an
        outage (the server down longer than the ttl) among them; each later
        round grows to 8 and shrinks to 3 again, with a stop, a restart and
        an outage at random points."""
        names = (f"m{i}" for i in range(1, 1000))
        live = []
        plan = []

        def grow():
            while len(live) < 8:
                live.append(next(names))
                plan.append(("join", live[-1]))

        def stop():
            victim = self.rng.choice(live)
            plan.extend([("stop", victim), ("cont", victim)])

        def shrink(kinds):
            for kind in kinds:
                victim = self.rng.choice(live)
                live.remove(victim)
                plan.append((kind, victim))

        live.append(next(names))
        plan.append(("join", live[0]))
        grow()
        stop()
        plan.append(("restart", None))
        shrink(["leave", "kill"])
        plan.append(("outage", None))
        shrink(["leave", "kill", "leave"])
        for _ in range(ROUNDS - 1):
            extras = ["stop", "restart", "outage"]
            self.rng.shuffle(extras)
            grow()
            for extra in extras:
                if extra == "stop":
                    stop()
                else:
                    plan.append((extra, None))
                shrink([self.rng.choice(["leave", "kill"])])
            shrink([self.rng.choice(["leave", "kill"]) for _ in range(2)])
        return plan

    # -- the test --------------------------------------------------------------

    def test_scaling_with_kills_stops_and_a_restart(self):
        started = time.monotonic()
        print(f"\n  groups chaos: seed {SEED}, {ROUNDS} round(s), ttl {TTL} s, bound {BOUND:.2f} s")
        if os.environ.get("LEADERLOCK_CHECK_THE_CHECKER"):
            print(f"  checking the checker: members misbehave ({os.environ['LEADERLOCK_CHECK_THE_CHECKER']}): "
                  "this run must fail")
        for kind, name in self.schedule():
            dwell = 1.0 if ROUNDS == 1 else self.rng.uniform(1.0, 3.0)
            self.change(kind, name, dwell)
        end = self.sql("SELECT le_now()", fetch="one")  # the history after this is the survivors' leaving
        for p in self.procs.values():
            if p.state == "live":
                p.popen.send_signal(signal.SIGTERM)
        for p in self.procs.values():
            if p.state == "live":
                self.wait_exit(p)
                p.state = "gone"
        self.assertTrue(wait_for(lambda: numbered(self.conn), timeout=10), "the history is not numbered")
        history = self.sql("SELECT position, at, event, (payload->>'partition')::int, payload->>'member', "
                           "(payload->>'term')::bigint FROM leaderlock_history "
                           "WHERE key = %s AND event = ANY(%s) ORDER BY position",
                           (self.group, list(EVENTS)), fetch="all")
        ledger = self.sql(f"SELECT partition, term, member, current_term FROM {self.ledger} "
                          "ORDER BY partition, at, id", fetch="all")
        ticks = self.read_ticks()
        granted = {(p, term): member for _, _, event, p, member, term in history if event == "partition_granted"}
        problems = {
            "1 ledger": self.check_ledger(ledger, granted),
            "2 ticks": self.check_ticks(ticks, granted),
            "3 stable": self.check_stable(),
            "4 moves": self.check_moves(history, end),
        }
        self.report(ledger, ticks, started)
        for check, found in problems.items():
            for line in found[:10]:
                print(f"  check {check}: {line}")
        self.assertEqual({k: len(v) for k, v in problems.items() if v}, {},
                         "checks failed (the lines above say how)")
        # the chaos did something: partitions moved, and every member wrote
        self.assertGreater(len(ledger), 2000)
        self.assertGreater(len(granted), 4 * PARTITIONS)

    def read_ticks(self):
        """Every member's ticks: (before, after, partition, term, member)."""
        ticks = []
        for name in self.procs:
            path = os.path.join(self.dir, name + ".ticks")
            if not os.path.exists(path):
                continue
            with open(path) as f:
                for line in f:
                    parts = line.split()
                    if len(parts) == 4:  # (a line cut by kill -9 is not one)
                        ticks.append((float(parts[0]), float(parts[1]), int(parts[2]), int(parts[3]), name))
        return ticks

    # -- the checks ------------------------------------------------------------

    def check_ledger(self, ledger, granted):
        found = []
        last = {}
        member_of = {}
        for partition, term, member, current in ledger:
            if current != term:
                found.append(f"partition {partition}: {member} wrote in term {term} when it was {current}")
            if term < last.get(partition, 0):
                found.append(f"partition {partition}: {member} wrote in term {term} after term {last[partition]}")
            last[partition] = max(term, last.get(partition, 0))
            if member_of.setdefault((partition, term), member) != member:
                found.append(f"partition {partition} term {term}: {member} and {member_of[(partition, term)]}")
            if granted.get((partition, term)) != member:
                found.append(f"partition {partition} term {term}: {member} wrote, the history granted it to "
                             f"{granted.get((partition, term))}")
        return found

    def check_ticks(self, ticks, granted):
        """Per partition and term: the member, the latest start and the
        earliest end of its acts' readings of `owns`; a term's act that
        started after another member's act of a later term ended overlaps."""
        found = []
        terms = defaultdict(dict)  # partition -> term -> [member, max before, min after]
        for before, after, partition, term, member in ticks:
            t = terms[partition].setdefault(term, [member, before, after])
            if t[0] != member:
                found.append(f"partition {partition} term {term}: {member} and {t[0]} both acted")
            t[1], t[2] = max(t[1], before), min(t[2], after)
            if granted.get((partition, term)) != member:
                found.append(f"partition {partition} term {term}: {member} acted, the history granted it to "
                             f"{granted.get((partition, term))}")
        for partition, by_term in terms.items():
            for term, (member, last_start, _) in by_term.items():
                for later, (other, _, first_end) in by_term.items():
                    if later > term and other != member and last_start > first_end:
                        found.append(f"partition {partition}: {member} acted in term {term} "
                                     f"{last_start - first_end:.3f} s after {other} did in term {later}")
        return found

    def check_stable(self):
        found = [f"{name} did not leave within 10 s of its SIGTERM" for name in self.stuck]
        for c in self.changes:
            if c["seen"] is None:
                found.append(f"{c['kind']} {c['name'] or ''}: never stable")
            elif c["seen"] - c["start"] > BOUND:
                found.append(f"{c['kind']} {c['name'] or ''}: stable {c['seen'] - c['start']:.2f} s after "
                             f"its clock started (bound {BOUND:.2f} s)")
        return found

    def check_moves(self, history, end):
        """Each change's window of the history (from its start to the next
        one's): the grants to another member than the partition's last."""
        found = []
        last = {}    # partition -> the member it was last granted to
        owner = {}   # partition -> its owner now (None: free)
        windows = [c["at"] for c in self.changes[1:]] + [end]
        events = iter(history)
        pending = next(events, None)
        for c, until in zip(self.changes, windows):
            owned_before = {p for p, m in owner.items() if m == c["name"]}
            moved = defaultdict(int)
            c["revoked"] = 0
            while pending is not None and pending[1] < until:
                _, at, event, p, member, term = pending
                if at < c["at"]:
                    found.append(f"{event} of partition {p} before any change: {at}")
                if event == "partition_granted":
                    if last.get(p) != member:
                        moved[p] += 1
                    last[p] = owner[p] = member
                elif event == "partition_freed":
                    owner[p] = None
                else:
                    c["revoked"] += 1
                pending = next(events, None)
            c["moves"] = sum(moved.values())
            what = f"{c['kind']} {c['name'] or ''} (N={c['n']})"
            if c["kind"] in JOINS:
                c["most"] = math.ceil(PARTITIONS / c["n"]) + 1
                if c["moves"] > c["most"]:
                    found.append(f"{what}: moved {c['moves']} partitions, at most {c['most']} allowed")
                # each move of a live owner's partition revoked once: none
                # withdrawn and revoked again while the others give back
                if c["revoked"] > c["moves"]:
                    found.append(f"{what}: {c['revoked']} revocations for {c['moves']} moves")
            elif c["kind"] in LEAVES:
                c["most"] = len(owned_before)
                others = sorted(p for p in moved if p not in owned_before)
                twice = sorted(p for p, n in moved.items() if n > 1)
                if others or twice:
                    found.append(f"{what}: moved partitions not the leaver's {others[:8]} or more than once "
                                 f"{twice[:8]}")
        return found

    def report(self, ledger, ticks, started):
        print(f"  {'change':<16} {'N':>2} {'since it':>9} {'since clock':>12} {'moves':>6} {'max':>5} {'revoked':>8}")
        for c in self.changes:
            since = f"{c['seen'] - c['t0']:.2f} s" if c["seen"] else "never"
            clock = f"{c['seen'] - c['start']:.2f} s" if c["seen"] else "never"
            print(f"  {c['kind'] + ' ' + (c['name'] or ''):<16} {c['n']:>2} {since:>9} {clock:>12} "
                  f"{c.get('moves', '?'):>6} {c.get('most', '-'):>5} {c.get('revoked', '?'):>8}")
        counts = defaultdict(lambda: defaultdict(int))
        for name in self.procs:
            for e in self.events(name):
                if e[0] == "counts":
                    for kv in e[1:]:
                        k, v = kv.split("=")
                        counts[name][k] += int(v)
        refused = sum(c["refused"] for c in counts.values())
        errors = sum(c["errors"] for c in counts.values())
        print(f"  {len(ledger)} fenced writes, {len(ticks)} ticks, {refused} refused by the guard (LE001), "
              f"{errors} failed on a lost connection (members that exited); "
              f"{time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    unittest.main()
