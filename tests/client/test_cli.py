"""`leaderlock run`, `status` and `watch` against real clusters.

The commands the CLI runs are tests/client/cli_child.py: each records its own
start, a tick every 10 ms and its end in a shared log, so the tests check
what the children themselves saw (never two running at once), not what the
CLI claims. The CLI binary comes from LEADERLOCK_CLI (scripts/test.sh builds
it). LEADERLOCK_CLI_CHAOS_SECONDS (default 30) sets the chaos run's length.
"""
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
import unittest

from harness import client_side, DB, HOST, LAZY_DB, PORT, PORTABLE, WORK, Listener, parse_time, Cluster, connect, free_port, one, pgbouncer, wait_for

CLI = os.environ.get("LEADERLOCK_CLI", "")
CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cli_child.py")
CHAOS_SECONDS = float(os.environ.get("LEADERLOCK_CLI_CHAOS_SECONDS", "30"))

NOT_ACQUIRED, LEASE_LOST, UNREACHABLE, REJECTED, INTERNAL, CANNOT_RUN = 120, 121, 122, 123, 124, 127
# A lease's expiry as a time of the wall clock, comparable with the records'
# (expires_at is a time of the server's lease clock, which a credited stall
# of the whole server sets behind the wall clock: contract 2.2).
EXPIRES_WALL = ("SELECT extract(epoch FROM clock_timestamp() + (expires_at - le_now())) "
                "FROM leaderlock WHERE key = %s")


def dsn(port=PORT, dbname=None):
    """The test cluster's database, or database postgres of another port (a
    cluster of a test's own, pgbouncer)."""
    return f"host={HOST} port={port} user=postgres dbname={dbname or (DB if port == PORT else 'postgres')}"


def records(path):
    """The children's records: (kind, pid, term, time)."""
    if not os.path.exists(path):
        return []
    out = []
    with open(path) as f:
        for line in f:
            kind, pid, term, t = line.split()
            out.append((kind, int(pid), term, float(t)))
    return out


def tenures(path):
    """Per child: (first record, last record, pid, term), by start time."""
    spans = {}
    for kind, pid, term, t in records(path):
        first, last, _ = spans.get(pid, (t, t, term))
        spans[pid] = (min(first, t), max(last, t), term)
    return sorted((first, last, pid, term) for pid, (first, last, term) in spans.items())


def assert_never_two(test, path):
    """No child started before every earlier child's last record; terms
    never go down from one child to the next."""
    spans = tenures(path)
    for (s1, e1, p1, t1), (s2, e2, p2, t2) in zip(spans, spans[1:]):
        test.assertLess(e1, s2, f"child {p1} (term {t1}) still ran when {p2} (term {t2}) started")
        test.assertLessEqual(int(t1), int(t2), f"term went down: {t1} then {t2}")
    return spans


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is not running
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except FileNotFoundError:
        return False


class Run:
    """One `leaderlock run` process, logging JSON lines to a file."""

    def __init__(self, test, *args, port=PORT, dbname=None, env=None, command=None, dsn_extra=""):
        self.log_path = tempfile.mktemp(prefix="cli-", suffix=".log", dir=test.dir)
        self.log_file = open(self.log_path, "w")
        cmd = [CLI, "--dsn", f"{dsn(port, dbname)} {dsn_extra}".strip(), "run", "--log-format", "json", *args, "--",
               *(command or [sys.executable, CHILD, test.children])]
        self.proc = subprocess.Popen(cmd, stderr=self.log_file, stdin=subprocess.DEVNULL,
                                     env={**os.environ, **(env or {})})
        self.pid = self.proc.pid
        test.addCleanup(self.kill)

    def events(self, name=None):
        with open(self.log_path) as f:
            lines = [json.loads(line) for line in f if line.startswith("{")]
        return [e for e in lines if name is None or e["event"] == name]

    def wait(self, timeout=30):
        return self.proc.wait(timeout)

    def signal(self, signo):
        os.kill(self.pid, signo)

    def kill(self):
        if self.proc.poll() is None:
            os.kill(self.pid, signal.SIGCONT)
            self.proc.kill()
            self.proc.wait()
        self.log_file.close()


@client_side
class CliCase(unittest.TestCase):
    """Fixtures and helpers of the CLI tests (no tests of its own: the
    other CLI test files build on it)."""

    @classmethod
    def setUpClass(cls):
        if not (CLI and os.access(CLI, os.X_OK)):
            raise RuntimeError(f"LEADERLOCK_CLI must name the built leaderlock binary (got {CLI!r})")
        cls.conn = connect()

    @classmethod
    def tearDownClass(cls):
        cls.conn.close()

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="cli-", dir=WORK)
        os.chmod(self.dir, 0o777)
        self.children = os.path.join(self.dir, "children.log")
        self.key = f"cli-{self._testMethodName}-{random.randrange(1 << 30)}"
        self.addCleanup(self.no_child_left)

    def no_child_left(self):
        for _, _, pid, _ in tenures(self.children):
            self.assertTrue(wait_for(lambda: not alive(pid), timeout=5), f"child {pid} outlived the test")

    def run_once(self, *args, timeout=30, **kw):
        r = Run(self, *args, **kw)
        return r, r.wait(timeout)

    def holder(self):
        return one(self.conn, "SELECT le_leader(%s)", (self.key,))

    def cluster(self):
        if PORTABLE:
            self.skipTest("a cluster of its own, with the compiled edition (what the CLI does when "
                          "the server goes away does not depend on the edition)")
        c = Cluster.create("cli")
        self.addCleanup(c.remove)
        return c

    def hold(self, id="someone-else", ttl="30 seconds"):
        self.assertTrue(one(self.conn, "SELECT le_try_acquire(%s, %s, %s)", (self.key, id, ttl)))


class CliTest(CliCase):
    # --- one run ---

    def test_runs_the_command_while_leading_and_exits_with_its_code(self):
        r, code = self.run_once("--key", self.key, "--id", "me-1", "--ttl", "5s",
                                command=[sys.executable, CHILD, self.children, "0.3", "7"],
                                env={"CLI_CHILD_ENV": "1"})
        self.assertEqual(code, 7)
        env = [k for k, *_ in records(self.children) if k.startswith("env:")]
        term = one(self.conn, "SELECT term FROM leaderlock WHERE key = %s", (self.key,))
        self.assertEqual(env, [f"env:LEADERLOCK_KEY={self.key},LEADERLOCK_ID=me-1,LEADERLOCK_TERM={term}"])
        # released on the way out, not left to expire
        self.assertIsNone(self.holder())
        self.assertEqual([e["event"] for e in r.events() if e["event"] in ("leading", "child_started", "child_exited", "released")],
                         ["leading", "child_started", "child_exited", "released"])

    def test_default_key_and_id(self):
        r, code = self.run_once(command=[sys.executable, CHILD, self.children, "0.1"], env={"CLI_CHILD_ENV": "1"})
        self.assertEqual(code, 0)
        env = dict(kv.split("=", 1) for kv in records(self.children)[1][0][4:].split(","))
        # the key defaults to the command's file name
        self.assertEqual(env["LEADERLOCK_KEY"], os.path.basename(sys.executable))
        host, pid, rand = env["LEADERLOCK_ID"].split(":")
        self.assertEqual((host, int(pid)), (os.uname().nodename, r.pid))
        self.assertRegex(rand, "^[0-9a-f]{8}$")

    def test_try_once_when_held(self):
        self.hold()
        _, code = self.run_once("--key", self.key, "--timeout", "0")
        self.assertEqual(code, NOT_ACQUIRED)
        self.assertEqual(records(self.children), [])
        self.assertEqual(self.holder(), "someone-else")

    def test_timeout_gives_up(self):
        self.hold()
        t0 = time.monotonic()
        _, code = self.run_once("--key", self.key, "--timeout", "1s")
        self.assertEqual(code, NOT_ACQUIRED)
        self.assertGreaterEqual(time.monotonic() - t0, 1.0)
        self.assertEqual(records(self.children), [])

    def test_waits_then_leads_when_the_holder_releases(self):
        self.hold()
        r = Run(self, "--key", self.key, "--ttl", "5s")
        self.assertTrue(wait_for(lambda: r.events("refused"), timeout=10))
        self.assertEqual(records(self.children), [])
        released_at = time.time()
        self.assertTrue(one(self.conn, "SELECT le_release(%s, 'someone-else')", (self.key,)))
        self.assertTrue(wait_for(lambda: records(self.children), timeout=10))
        self.assertGreater(records(self.children)[0][3], released_at)
        r.signal(signal.SIGTERM)
        self.assertEqual(r.wait(), 128 + signal.SIGTERM)

    def test_unreachable_database(self):
        _, code = self.run_once("--key", self.key, "--timeout", "0", port=free_port())
        self.assertEqual(code, UNREACHABLE)
        _, code = self.run_once("--key", self.key, "--timeout", "1s", port=free_port())
        self.assertEqual(code, UNREACHABLE)

    def test_rejected_by_the_server(self):
        r, code = self.run_once("--key", "k" * 300)
        self.assertEqual(code, REJECTED)
        self.assertIn("22023", r.events("rejected")[0]["error"])
        self.assertEqual(records(self.children), [])

    def test_a_database_without_the_extension_is_named(self):
        """`run` and `status` in a database without the extension say so, by
        name, instead of a missing function's or relation's error; rejected."""
        one(self.conn, "DROP DATABASE IF EXISTS ll_cli_noext")
        one(self.conn, "CREATE DATABASE ll_cli_noext")
        self.addCleanup(one, self.conn, "DROP DATABASE IF EXISTS ll_cli_noext WITH (FORCE)")
        want = 'extension leaderlock is not installed in database "ll_cli_noext"'
        r, code = self.run_once("--key", self.key, "--timeout", "0", dbname="ll_cli_noext")
        self.assertEqual(code, REJECTED)
        self.assertIn(want, r.events("rejected")[0]["error"])
        out = subprocess.run([CLI, "--dsn", dsn(dbname="ll_cli_noext"), "status"], capture_output=True,
                             text=True, timeout=30)
        self.assertEqual(out.returncode, REJECTED)
        self.assertIn(want, out.stderr)

    def test_bad_flags(self):
        # a grace that leaves no room for the renewal due at ttl/3 is refused
        for args in (["--ttl", "2s", "--grace", "2s"], ["--ttl", "3s", "--grace", "2s"], ["--ttl", "ten"],
                     ["--ttl", "0"]):
            _, code = self.run_once("--key", self.key, *args)
            self.assertEqual(code, 2, args)
        self.assertIsNone(self.holder())

    def test_command_that_cannot_start(self):
        _, code = self.run_once("--key", self.key, command=["/nonexistent/command"])
        self.assertEqual(code, CANNOT_RUN)
        self.assertIsNone(self.holder())

    def test_signals(self):
        r = Run(self, "--key", self.key, "--ttl", "5s")
        self.assertTrue(wait_for(lambda: any(k == "tick" for k, *_ in records(self.children))))
        r.signal(signal.SIGHUP)
        r.signal(signal.SIGUSR1)
        self.assertTrue(wait_for(lambda: {"hup", "usr1"} <= {k for k, *_ in records(self.children)}))
        r.signal(signal.SIGINT)
        self.assertEqual(r.wait(), 128 + signal.SIGINT)
        self.assertEqual(records(self.children)[-1][0], "term")
        self.assertIsNone(self.holder())

    def test_restart(self):
        r = Run(self, "--key", self.key, "--ttl", "5s", "--restart", "--restart-delay", "0.1s",
                command=[sys.executable, CHILD, self.children, "0.2", "3"])
        self.assertTrue(wait_for(lambda: len([k for k, *_ in records(self.children) if k == "start"]) >= 3))
        spans = assert_never_two(self, self.children)
        self.assertEqual(len({term for *_, term in spans}), 1, "restarts within one tenure keep the term")
        r.signal(signal.SIGTERM)
        self.assertEqual(r.wait(), 128 + signal.SIGTERM)

    def test_slots_runs_up_to_n_commands_at_once(self):
        """`run --slots 2`: two of three candidates run the command at
        once, each in a term of its own; when one stops, the third takes
        its slot."""
        runs = [Run(self, "--key", self.key, "--ttl", "3s", "--slots", "2") for _ in range(3)]

        def leading():
            return [r for r in runs if r.events("leading")]

        self.assertTrue(wait_for(lambda: len(leading()) == 2 and any(r.events("refused") for r in runs),
                                 timeout=10), [r.events() for r in runs])
        time.sleep(0.5)
        self.assertEqual(len(leading()), 2)
        now = time.time()
        running = {pid for kind, pid, _, t in records(self.children) if kind == "tick" and t > now - 0.2}
        self.assertEqual(len(running), 2)
        terms = sorted(r.events("leading")[0]["term"] for r in leading())
        self.assertEqual(len(set(terms)), 2, terms)
        self.assertEqual(one(self.conn, "SELECT count(*) FROM le_holders(%s)", (self.key,)), 2)
        first = leading()[0]
        third = [r for r in runs if r not in leading()][0]
        first.signal(signal.SIGTERM)
        self.assertEqual(first.wait(), 128 + signal.SIGTERM)
        self.assertTrue(wait_for(lambda: third.events("leading"), timeout=10))
        self.assertGreater(third.events("leading")[0]["term"], terms[-1])
        for r in runs:
            if r.proc.poll() is None:
                r.signal(signal.SIGTERM)
                r.wait()
        self.assertEqual(one(self.conn, "SELECT count(*) FROM le_holders(%s)", (self.key,)), 0)

    @unittest.skipIf(PORTABLE, "priorities need the preloaded library")
    def test_priority_leads_first(self):
        """`run --priority 5` leads before a `run` of priority 0 that
        waited longer; the other leads once it stops."""
        self.hold(ttl="1 minute")
        low = Run(self, "--key", self.key, "--ttl", "3s")
        self.assertTrue(wait_for(lambda: low.events("refused"), timeout=10))
        high = Run(self, "--key", self.key, "--ttl", "3s", "--priority", "5")
        self.assertTrue(wait_for(lambda: one(self.conn, "SELECT count(*) FROM le_candidates(%s) "
                                                        "WHERE priority = 5", (self.key,)) == 1,
                                 timeout=10))
        self.assertTrue(one(self.conn, "SELECT le_release(%s, 'someone-else')", (self.key,)))
        self.assertTrue(wait_for(lambda: high.events("leading"), timeout=10))
        time.sleep(0.5)
        self.assertEqual(low.events("leading"), [])
        high.signal(signal.SIGTERM)
        self.assertEqual(high.wait(), 128 + signal.SIGTERM)
        self.assertTrue(wait_for(lambda: low.events("leading"), timeout=10))
        self.assertGreater(low.events("leading")[0]["term"], high.events("leading")[0]["term"])
        low.signal(signal.SIGTERM)
        low.wait()

    def test_kill_9_of_the_cli_stops_the_command(self):
        r = Run(self, "--key", self.key, "--ttl", "5s")
        self.assertTrue(wait_for(lambda: records(self.children)))
        r.proc.kill()
        r.wait()
        self.assertTrue(wait_for(lambda: records(self.children)[-1][0] == "term", timeout=5))
        expires = one(self.conn, EXPIRES_WALL, (self.key,))
        self.assertLess(records(self.children)[-1][3], float(expires))

    def test_takes_over_a_dead_leader_where_no_worker_serves(self):
        """Where no worker serves the database (LAZY_DB here; every database
        of the portable edition) the CLI learns it from le_capabilities,
        tries every ttl/4 and calls le_expire_lapsed before each try: a
        leader killed with -9 is replaced within ttl/4 of its lease's end,
        and the expiry is announced first."""
        listener = Listener(LAZY_DB)
        self.addCleanup(listener.close)
        a = Run(self, "--key", self.key, "--id", "dead", "--ttl", "2s", dbname=LAZY_DB)
        self.assertTrue(wait_for(lambda: a.events("leading")))
        self.assertEqual([(e["worker"], e["poll_every_ms"]) for e in a.events("served")], [(False, 500)])
        b = Run(self, "--key", self.key, "--id", "next", "--ttl", "2s", dbname=LAZY_DB)
        self.assertTrue(wait_for(lambda: b.events("refused")))
        a.proc.kill()
        a.wait()
        self.assertTrue(wait_for(lambda: b.events("leading"), timeout=10))
        got = [e for e in listener.events(timeout=1) if e != "marker" and e["key"] == self.key]
        self.assertEqual([(e["event"], e.get("holder")) for e in got[1:]],
                         [("expired", "dead"), ("acquired", "next")])
        expired, acquired = got[1], got[2]
        self.assertEqual(expired["reason"], "ttl")
        late = (parse_time(acquired["at"]) - parse_time(expired["expires_at"])).total_seconds()
        self.assertLess(late, 0.5 + 0.3, "taken over later than the polling period allows")
        b.signal(signal.SIGTERM)
        b.wait()

    def test_kill_9_of_the_supervisor(self):
        """The kernel kills the command (PR_SET_PDEATHSIG) and the CLI kills
        the rest of its group; the lease is left to expire, not released:
        nothing can prove the group is gone."""
        r = Run(self, "--key", self.key, "--ttl", "5s",
                command=["sh", "-c", f"{sys.executable} {CHILD} {self.children} & wait"])
        self.assertTrue(wait_for(lambda: records(self.children)))
        supervisor = int(subprocess.run(["ps", "-o", "pid=", "--ppid", str(r.pid)],
                                        capture_output=True, text=True).stdout.split()[0])
        os.kill(supervisor, signal.SIGKILL)
        self.assertEqual(r.wait(), INTERNAL)
        # the grandchild (the recorder, not the group leader) is gone too
        pid = records(self.children)[0][1]
        self.assertTrue(wait_for(lambda: not alive(pid), timeout=5))
        self.assertIsNotNone(self.holder())

    def test_a_locked_row_defers_a_renewal_but_never_stops_the_command(self):
        """A renewal refused because another transaction holds the lease's
        row locked (the step after a failover, a superuser's transaction),
        while the server shows the lease ours and live, is not a lost
        lease: retried until the deadline, the command never stopped."""
        r = Run(self, "--key", self.key, "--id", "me", "--ttl", "3s")
        self.assertTrue(wait_for(lambda: records(self.children), timeout=10))
        locker = connect(autocommit=False)
        self.addCleanup(locker.close)
        one(locker, "SELECT 1 FROM leaderlock WHERE key = %s FOR UPDATE", (self.key,))
        self.assertTrue(wait_for(lambda: r.events("renewal_deferred"), timeout=5), r.events())
        time.sleep(0.5)
        locker.rollback()
        time.sleep(3)  # past the deadline the last renewal before the lock gave
        self.assertIsNone(r.proc.poll(), r.events())
        self.assertEqual(r.events("stopped"), [])
        self.assertEqual(len({pid for _, pid, _, _ in records(self.children)}), 1)
        self.assertEqual(one(self.conn, "SELECT holder FROM leaderlock WHERE key = %s", (self.key,)), "me")
        r.signal(signal.SIGTERM)
        self.assertEqual(r.wait(), 128 + signal.SIGTERM)

    def test_sigstop_of_the_cli_stops_the_command_before_expiry(self):
        r = Run(self, "--key", self.key, "--ttl", "2s", "--grace", "0.5s")
        self.assertTrue(wait_for(lambda: records(self.children)))
        r.signal(signal.SIGSTOP)
        stopped_at = time.time()
        # The lease cannot move now: nobody renews it.
        self.assertTrue(wait_for(lambda: records(self.children)[-1][0] == "term", timeout=5))
        kept = one(self.conn, "SELECT expires_at FROM leaderlock WHERE key = %s", (self.key,))
        expires = float(one(self.conn, EXPIRES_WALL, (self.key,)))
        time.sleep(0.5)  # (an expiry by the worker keeps expires_at)
        self.assertEqual(one(self.conn, "SELECT expires_at FROM leaderlock WHERE key = %s", (self.key,)), kept,
                         "renewed while stopped")
        self.assertLess(records(self.children)[-1][3], expires)
        # (a renewal sent just before the SIGSTOP may commit after stopped_at was read)
        self.assertLess(expires - stopped_at, 2.0 + 0.25)
        # Another candidate takes over once it lapses; the stopped CLI,
        # resumed, gives up with "lease lost".
        self.assertTrue(wait_for(lambda: one(self.conn, "SELECT le_try_acquire(%s, 'next', '30 seconds')", (self.key,)), timeout=5))
        r.signal(signal.SIGCONT)
        self.assertEqual(r.wait(), LEASE_LOST)
        self.assertEqual(self.holder(), "next")

    # --- the database goes away ---

    def test_database_down_stops_the_command_before_expiry(self):
        c = self.cluster()
        r = Run(self, "--key", self.key, "--ttl", "2s", "--grace", "0.5s", port=c.port)
        self.assertTrue(wait_for(lambda: records(self.children)))
        c.stop("immediate")
        self.assertEqual(r.wait(), UNREACHABLE)
        last = records(self.children)[-1]
        self.assertEqual(last[0], "term")
        c.start()
        with c.connect() as conn:
            expires = float(one(conn, EXPIRES_WALL, (self.key,)))
        self.assertLess(last[3], expires)

    def test_database_hangs(self):
        """Every server process stopped (SIGSTOP): calls hang instead of
        failing, and the command must still stop at the local deadline."""
        c = self.cluster()
        r = Run(self, "--key", self.key, "--ttl", "2s", "--grace", "0.5s", port=c.port)
        self.assertTrue(wait_for(lambda: records(self.children)))
        postmaster = c.postmaster_pid()
        pids = [postmaster] + [int(p) for p in subprocess.run(
            ["ps", "-o", "pid=", "--ppid", str(postmaster)], capture_output=True, text=True).stdout.split()]
        frozen_at = time.time()
        for p in pids:
            os.kill(p, signal.SIGSTOP)
        try:
            self.assertEqual(r.wait(timeout=15), UNREACHABLE)
        finally:
            for p in pids:
                os.kill(p, signal.SIGCONT)
        last = records(self.children)[-1]
        self.assertEqual(last[0], "term")
        # stopped within a ttl of the freeze: no renewal started after it
        self.assertLess(last[3], frozen_at + 2.0)
        with c.connect() as conn:
            expires = float(one(conn, EXPIRES_WALL, (self.key,)))
        self.assertLess(last[3], expires)

    # --- contention ---

    def test_two_runs_under_chaos(self):
        """Two `run --restart` candidates for one key, for
        LEADERLOCK_CLI_CHAOS_SECONDS: kill -9 of the leading CLI (restarted
        with a new id), kill -9 of the command, SIGSTOP of the leading CLI.
        The children's own records must never overlap."""
        args = ("--key", self.key, "--ttl", "1s", "--grace", "0.25s", "--restart", "--restart-delay", "0.05s")
        gen = {"A": 0, "B": 0}
        runs = {}

        def start(name):
            gen[name] += 1
            runs[name] = Run(self, *args, "--id", f"{name}-{gen[name]}")

        start("A")
        start("B")
        actions = {"kill_cli": 0, "kill_child": 0, "stop_cli": 0}
        end = time.monotonic() + CHAOS_SECONDS
        while time.monotonic() < end:
            time.sleep(random.uniform(0.5, 1.5))
            for name, r in runs.items():
                self.assertIsNone(r.proc.poll(), f"{name} exited on its own: {r.events()[-3:]}")
            holder = self.holder()
            leader = next((n for n in runs if holder == f"{n}-{gen[n]}"), None)
            if leader is None:
                continue
            action = random.choice(list(actions))
            actions[action] += 1
            if action == "kill_cli":
                runs[leader].proc.kill()
                runs[leader].wait()
                start(leader)
            elif action == "kill_child":
                starts = [pid for kind, pid, *_ in records(self.children) if kind == "start"]
                if starts and alive(starts[-1]):
                    os.kill(starts[-1], signal.SIGKILL)
            else:
                runs[leader].signal(signal.SIGSTOP)
                time.sleep(random.uniform(1.2, 2.0))
                runs[leader].signal(signal.SIGCONT)
        for r in runs.values():
            # A CLI restarted just now may not have its signal handlers yet
            # (SIGTERM would kill it outright): they are in place once it
            # reports its connection.
            self.assertTrue(wait_for(lambda: r.events("connected"), timeout=10))
            r.signal(signal.SIGTERM)
        for r in runs.values():
            self.assertEqual(r.wait(), 128 + signal.SIGTERM)
        spans = assert_never_two(self, self.children)
        terms = {term for *_, term in spans}
        print(f"\n  chaos {CHAOS_SECONDS:.0f} s: {actions}, {len(spans)} children, {len(terms)} terms",
              file=sys.stderr)
        self.assertGreaterEqual(len(terms), 3, "leadership never moved: the chaos did nothing")

    def test_through_pgbouncer_transaction_pooling(self):
        """Behind pgbouncer in transaction mode LISTEN cannot be relied on:
        the second candidate must take over by polling, and every call must
        work without named prepared statements. With one server connection
        for both candidates, the first one's release is announced on that
        connection while the first one is attached to it: only the first
        candidate can get the notification, so the second one must poll."""
        port = pgbouncer(self, pool_size=1)
        first = Run(self, "--key", self.key, "--ttl", "3s", port=port,
                    command=[sys.executable, CHILD, self.children, "1.5"])
        self.assertTrue(wait_for(lambda: records(self.children), timeout=10))
        second = Run(self, "--key", self.key, "--ttl", "3s", port=port)
        self.assertEqual(first.wait(), 0)
        self.assertTrue(wait_for(lambda: len(tenures(self.children)) == 2, timeout=10),
                        f"the second candidate never led: {second.events()[-3:]}")
        assert_never_two(self, self.children)
        second.signal(signal.SIGTERM)
        self.assertEqual(second.wait(), 128 + signal.SIGTERM)
        for r in (first, second):
            self.assertEqual(r.events("disconnected"), [], "a call failed through pgbouncer")
        self.assertIsNone(self.holder())

    def test_metrics_and_health(self):
        """--metrics: Prometheus text that follows the tenure (leading,
        term, renewals, seconds to the local deadline, exits and stops by
        cause), and /healthz: 200 while renewals succeed, 503 while the
        leader's renewals have failed for two thirds of a ttl (its row
        locked here), 200 again once they succeed."""
        import urllib.error
        import urllib.request
        port = free_port()
        r = Run(self, "--key", self.key, "--id", "me", "--ttl", "6s", "--grace", "0.5s",
                "--metrics", f"127.0.0.1:{port}")
        self.assertTrue(wait_for(lambda: records(self.children), timeout=10))

        def get(path):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
                    return response.status, response.read().decode()
            except urllib.error.HTTPError as e:
                return e.code, e.read().decode()

        def value(name, text=None):
            text = text or get("/metrics")[1]
            for line in text.splitlines():
                if line.startswith(f"leaderlock_{name}{{"):
                    return float(line.rsplit(" ", 1)[1])
            return None
        self.assertTrue(wait_for(lambda: value("renewals_total") >= 1, timeout=5))
        status, text = get("/metrics")
        self.assertEqual(status, 200)
        self.assertIn(f'leaderlock_leading{{key="{self.key}"}} 1', text)
        self.assertEqual(value("term", text), 1)
        self.assertTrue(0 < value("deadline_seconds", text) <= 6, text)
        self.assertEqual(get("/healthz"), (200, "ok\n"))
        self.assertEqual(get("/other")[0], 404)
        locker = connect(autocommit=False)
        self.addCleanup(locker.close)
        one(locker, "SELECT 1 FROM leaderlock WHERE key = %s FOR UPDATE", (self.key,))
        health = []
        self.assertTrue(wait_for(lambda: health.append(get("/healthz")) or health[-1][0] == 503,
                                 timeout=5, interval=0.05))
        locker.rollback()
        self.assertIn("leading, but no renewal has succeeded", health[-1][1])
        self.assertTrue(wait_for(lambda: get("/healthz")[0] == 200, timeout=5))
        self.assertGreaterEqual(value("renewals_failed_total"), 1)
        self.assertEqual(r.events("stopped"), [])
        r.signal(signal.SIGTERM)
        self.assertEqual(r.wait(), 128 + signal.SIGTERM)

    # --- status and watch ---

    def test_status(self):
        self.hold("status-holder")
        out = subprocess.run([CLI, "--dsn", dsn(), "status", self.key], capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr)
        header, line = out.stdout.splitlines()
        self.assertEqual(header.split(), ["KEY", "STATE", "HOLDER", "TERM", "REMAINING", "EXPIRES_AT"])
        self.assertEqual(line.split()[:4], [self.key, "held", "status-holder", "1"])
        out = subprocess.run([CLI, "--dsn", dsn(), "status", self.key + "-none"], capture_output=True, text=True)
        self.assertEqual(out.returncode, 1)
        out = subprocess.run([CLI, "--dsn", dsn(), "status"], capture_output=True, text=True)
        self.assertIn(self.key, out.stdout)

    @unittest.skipIf(PORTABLE, "groups (contract 26) are the compiled edition's")
    def test_status_of_a_group(self):
        """status --group: each partition's member, term and state, a
        member's name shown as data (a terminal escape is not sent), the
        summary, --json, and exit 1 for a group that does not exist."""
        group = self.key + "-group"
        hostile = "m\x1b[31mred"
        one(self.conn, "SELECT le_join(%s, 'a', '1 hour', 4)::text", (group,))
        one(self.conn, "SELECT le_join(%s, %s, '1 hour')::text", (group, hostile))
        self.addCleanup(one, self.conn, "SELECT le_leave(%s, %s), le_leave(%s, 'a')", (group, hostile, group))
        for partition, term, state in self.rows("SELECT partition, term, state FROM le_assignment(%s, 'a')", (group,)):
            if state == "revoked":
                one(self.conn, "SELECT le_ack(%s, 'a', %s, %s)", (group, partition, term))
        out = subprocess.run([CLI, "--dsn", dsn(), "status", "--group", group], capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr)
        lines = out.stdout.splitlines()
        self.assertEqual(lines[0].split(), ["PARTITION", "MEMBER", "TERM", "STATE", "LIVE", "UNTIL"])
        self.assertNotIn("\x1b", out.stdout)
        self.assertEqual([line.split()[:4] for line in lines[1:3]], [["1", "a", "1", "owned"], ["2", "a", "1", "owned"]])
        self.assertEqual([line.split()[2:4] for line in lines[3:5]], [["2", "owned"], ["2", "owned"]])
        self.assertEqual(lines[-1], "4 partitions: 4 owned and 0 revoked among 2 members, 0 free")
        whole = subprocess.run([CLI, "--dsn", dsn(), "status", "--group", group, "--json"],
                               capture_output=True, text=True)
        rows = [json.loads(line) for line in whole.stdout.splitlines()]
        self.assertEqual([r["member"] for r in rows], ["a", "a", hostile, hostile])
        self.assertTrue(all(r["member_live"] for r in rows))
        none = subprocess.run([CLI, "--dsn", dsn(), "status", "--group", group + "-none"],
                              capture_output=True, text=True)
        self.assertEqual((none.returncode, none.stdout), (1, ""))
        # watch --group: the group's changes from the history, nothing else
        # (a key of the group's name holds on meanwhile)
        one(self.conn, "SELECT le_try_acquire(%s, 'holder-of-a-key-named-like-the-group', '30 seconds')", (group,))
        self.addCleanup(one, self.conn, "SELECT le_force_release(%s)", (group,))
        w = subprocess.Popen([CLI, "--dsn", dsn(), "watch", "--group", group, "--since", "0"],
                             stdout=subprocess.PIPE, text=True)
        time.sleep(2)
        w.terminate()
        events = [json.loads(line) for line in w.communicate(timeout=10)[0].splitlines()]
        self.assertEqual({e["event"] for e in events}, {"partition_granted", "partition_revoked"})
        self.assertEqual({e["group"] for e in events}, {group})
        self.assertEqual(sum(e["event"] == "partition_granted" and e["member"] == hostile for e in events), 2)

    def rows(self, sql, args):
        with self.conn.cursor() as c:
            c.execute(sql, args)
            return c.fetchall()

    def test_status_of_many_keys_stays_readable(self):
        """Held leases first, a 255-character key shortened in the table of
        every key (whole with --json and for one key), --held, and a
        summary line that counts what the table shows."""
        long_key = self.key + "-" + "x" * (255 - len(self.key) - 1)
        one(self.conn, "SELECT le_try_acquire(%s, 'h', '1 minute'), le_release(%s, 'h')",
            (self.key + "-vacant", self.key + "-vacant"))
        one(self.conn, "SELECT le_try_acquire(%s, 'h', '1 minute')", (long_key,))
        self.addCleanup(one, self.conn, "SELECT le_force_release(%s)", (long_key,))
        out = subprocess.run([CLI, "--dsn", dsn(), "status"], capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr)
        lines = out.stdout.splitlines()
        self.assertTrue(all(len(line) < 255 for line in lines), max(lines, key=len))
        # the STATE column (keys of other suites may hold spaces and wide characters)
        states = [re.search(r"\s(held|lapsed|vacant)\s", line).group(1) for line in lines[1:-1]]
        order = {"held": 0, "lapsed": 1, "vacant": 2}
        self.assertEqual(states, sorted(states, key=order.get))
        self.assertIn(long_key[:40], out.stdout)
        self.assertNotIn(long_key, out.stdout)
        counts = {s: states.count(s) for s in order}
        self.assertEqual(lines[-1], f"{len(states)} leases: {counts['held']} held, {counts['lapsed']} lapsed, "
                                    f"{counts['vacant']} vacant")
        held = subprocess.run([CLI, "--dsn", dsn(), "status", "--held"], capture_output=True, text=True)
        self.assertEqual({line.split()[1] for line in held.stdout.splitlines()[1:-1]}, {"held"})
        whole = subprocess.run([CLI, "--dsn", dsn(), "status", "--json"], capture_output=True, text=True)
        leases = {lease["key"]: lease for lease in map(json.loads, whole.stdout.splitlines())}
        self.assertEqual(leases[long_key]["holder"], "h")
        self.assertGreater(leases[long_key]["remaining_seconds"], 0)
        self.assertEqual(leases[self.key + "-vacant"]["state"], "vacant")
        self.assertIn(long_key, subprocess.run([CLI, "--dsn", dsn(), "status", long_key], capture_output=True,
                                               text=True).stdout)

    def test_watch(self):
        import threading
        w = subprocess.Popen([CLI, "--dsn", dsn(), "watch", self.key], stdout=subprocess.PIPE, text=True)
        self.addCleanup(lambda: (w.kill(), w.wait()))
        got = []
        threading.Thread(target=lambda: got.extend(json.loads(line) for line in w.stdout), daemon=True).start()
        # LISTEN happens some time after the start: announce until heard.
        deadline = time.monotonic() + 10
        while len(got) < 4 and time.monotonic() < deadline:
            one(self.conn, "SELECT le_try_acquire(%s || '-other', 'x', '1 minute')", (self.key,))
            self.hold("w")
            one(self.conn, "SELECT le_release(%s, 'w')", (self.key,))
            time.sleep(0.2)
        self.assertGreaterEqual(len(got), 4)
        self.assertEqual({p["key"] for p in got}, {self.key})
        self.assertEqual({p["event"] for p in got}, {"acquired", "released"})


if __name__ == "__main__":
    unittest.main()
