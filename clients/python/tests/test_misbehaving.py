"""The Python client when the process or the server misbehaves (issue 36),
against a real server.

LEADERLOCK_DSN: a superuser's connection string (it makes databases and a
role). The tests pause candidates with SIGSTOP, so they run on the
server's host. LEADERLOCK_PGDATA (optional): the data directory of that
server, which the restart test restarts with PG_BIN/pg_ctl (PG_BIN default
/usr/lib/postgresql/15/bin; as the postgres user when run as root);
without it that test is skipped.

- For each shape of clients/python/README.md (sync, async, elector, run by
  tests/candidate.py exactly as written there): the leader paused past its
  ttl and resumed takes no step after its deadline, and the follower takes
  over; a plain SIGTERM releases (the follower leads within 100 ms of the
  release) and exits 143.
- lease.guard refuses a write once the server says the lease is lost
  (LE001 -> LeaseLost, the write rolled back).
- lead() sync and asyncio and the Elector wait through a server restart,
  then lead; a leader keeps its lease and term through it.
- Typed errors: NotInstalled naming the database, PrivilegeError, BadArgument
  (here and from the server), Unavailable; the user's application_name.
"""
import asyncio
import datetime
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import uuid

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

import leaderlock

from support import DSN, sql, wait
PGDATA = os.environ.get("LEADERLOCK_PGDATA")
PG_BIN = os.environ.get("PG_BIN", "/usr/lib/postgresql/15/bin")
CANDIDATE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "candidate.py")
# The candidates run the client these tests import (PYTHONPATH).
CLIENT_PATH = os.path.dirname(os.path.dirname(os.path.abspath(leaderlock.__file__)))
IDIOMS = ("sync", "async", "elector")
BARE_DB = "ll_py_bare"  # no extension
NOEXEC_DB = "ll_py_noexec"  # the extension, EXECUTE revoked from PUBLIC
NOEXEC_ROLE = "ll_py_noexec"






def ticks(path):
    """(unix seconds, id, term) of each tick in a records file, in order."""
    out = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 4 and parts[0] == "tick":
                    out.append((float(parts[3]), parts[1], int(parts[2])))
    return sorted(out)


def at(payload):
    """The server's time of an announcement, in unix seconds."""
    return datetime.datetime.fromisoformat(payload["at"].replace("Z", "+00:00")).timestamp()


class Pair:
    """Two candidate processes (tests/candidate.py) of one idiom on a key of
    their own: "a" started first (it leads), then "b"."""

    def __init__(self, test, idiom, ttl, work):
        self.idiom, self.ttl = idiom, ttl
        self.key = f"pym-{idiom}-{uuid.uuid4().hex[:8]}"
        self.records = os.path.join(work, f"{idiom}.records")
        self.work = work
        self.procs = {}
        test.addCleanup(self.end)

    def start(self, me):
        log = open(os.path.join(self.work, f"{self.idiom}-{me}.log"), "w")
        env = dict(os.environ, PYTHONPATH=CLIENT_PATH)
        dsn = make_conninfo(DSN, application_name=self.name(me))  # kept by the client
        self.procs[me] = subprocess.Popen(
            [sys.executable, CANDIDATE, dsn, self.key, me, str(self.ttl), self.records, self.idiom],
            env=env, stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        log.close()

    def name(self, me):
        return f"{self.key}-{me}"

    def waiting(self, me):
        """Whether `me` tried and now waits (its session idle after a try)."""
        return sql("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s AND state = 'idle' "
                   "AND (query LIKE '%%le_try_acquire%%' OR query LIKE '%%le_leader%%')", (self.name(me),)) > 0

    def ticks_of(self, me):
        return [t for t in ticks(self.records) if t[1] == me]

    def log(self, me):
        with open(os.path.join(self.work, f"{self.idiom}-{me}.log")) as f:
            return f.read()

    def end(self):
        for p in self.procs.values():
            if p.poll() is None:
                os.kill(p.pid, signal.SIGCONT)
                p.kill()
                p.wait()


class ShapesTest(unittest.TestCase):
    """Every idiom at once, each with a pair of candidate processes."""

    def pairs(self, ttl):
        work = self.work = tempfile.mkdtemp(prefix="leaderlock-py-")  # removed when the test passes
        pairs = [Pair(self, idiom, ttl, work) for idiom in IDIOMS]
        for p in pairs:
            p.start("a")
        for p in pairs:
            self.assertTrue(wait(lambda: p.ticks_of("a"), 15), f"{p.idiom}: a never led:\n{p.log('a')}")
        for p in pairs:
            p.start("b")
        for p in pairs:
            self.assertTrue(wait(lambda: p.waiting("b"), 15), f"{p.idiom}: b is not waiting:\n{p.log('b')}")
        time.sleep(0.2)
        for p in pairs:
            self.assertFalse(p.ticks_of("b"), f"{p.idiom}: b led while a did")
        return pairs

    def test_a_leader_paused_past_its_ttl_takes_no_step_after_its_deadline(self):
        ttl, pause = 2.0, 4.0
        pairs = self.pairs(ttl)
        for p in pairs:
            os.kill(p.procs["a"].pid, signal.SIGSTOP)
        stopped = time.time()
        time.sleep(pause)
        resumed = time.time()
        for p in pairs:
            os.kill(p.procs["a"].pid, signal.SIGCONT)
        time.sleep(1.5)  # a, resumed, would tick now if it took a step after its deadline
        for p in pairs:
            t = ticks(p.records)
            a, b = p.ticks_of("a"), p.ticks_of("b")
            self.assertTrue(b, f"{p.idiom}: b never took over")
            a_term = a[0][2]
            after = [x for x in a if x[2] == a_term and x[0] >= resumed]
            self.assertEqual(after, [], f"{p.idiom}: a ticked in term {a_term} after it was resumed")
            # the follower's first step comes after the paused one's last
            self.assertLess(a[-1][0], b[0][0], f"{p.idiom}: a's last tick after b's first")
            self.assertGreater(b[0][2], a_term)
            for (t1, id1, term1), (t2, id2, term2) in zip(t, t[1:]):
                if id1 != id2:
                    self.assertGreater(term2, term1, f"{p.idiom}: {id2} ticked at {t2} in term {term2} "
                                                     f"after {id1} in term {term1} at {t1}")
            print(f"\n  {self.id().split('.')[-1]} [{p.idiom}]: a paused {pause:.0f} s (ttl {ttl:.0f} s), "
                  f"last tick {stopped - a[-1][0]:+.3f} s before the pause, none after; "
                  f"b's first tick {b[0][0] - stopped:.2f} s after it", file=sys.stderr)
        self.addCleanup(shutil.rmtree, self.work, True)

    def test_sigterm_releases_and_the_follower_leads_within_100_ms(self):
        pairs = self.pairs(5.0)
        keys = {p.key: p for p in pairs}
        with psycopg.connect(DSN, autocommit=True) as listener:
            listener.execute("LISTEN leaderlock")
            for p in pairs:
                p.procs["a"].send_signal(signal.SIGTERM)
            seen = {k: {} for k in keys}
            end = time.monotonic() + 10
            while time.monotonic() < end and not all("acquired" in s for s in seen.values()):
                for n in listener.notifies(timeout=0.2, stop_after=1):
                    payload = json.loads(n.payload)
                    k = payload.get("key")
                    if k in seen and payload["event"] not in seen[k]:
                        seen[k][payload["event"]] = payload
        for p in pairs:
            s = seen[p.key]
            self.assertIn("released", s, f"{p.idiom}: no release:\n{p.log('a')}")
            self.assertEqual(s["released"]["holder"], "a")
            self.assertIn("acquired", s, f"{p.idiom}: b did not lead")
            self.assertEqual(s["acquired"]["holder"], "b")
            took = at(s["acquired"]) - at(s["released"])
            self.assertEqual(p.procs["a"].wait(10), 143, f"{p.idiom}:\n{p.log('a')}")
            self.assertTrue(wait(lambda: p.ticks_of("b"), 5))
            self.assertLess(p.ticks_of("a")[-1][0], p.ticks_of("b")[0][0])
            print(f"\n  {self.id().split('.')[-1]} [{p.idiom}]: b led {took * 1000:.1f} ms after a's release "
                  "(server times)", file=sys.stderr)
            self.assertLess(took, 0.1, f"{p.idiom}: b led {took:.3f} s after the release")
        self.addCleanup(shutil.rmtree, self.work, True)


class GuardTest(unittest.TestCase):
    def setUp(self):
        self.key = f"pym-guard-{uuid.uuid4().hex[:8]}"
        self.conn = psycopg.connect(DSN)  # the application's own connection, transactions
        self.addCleanup(self.conn.close)
        self.conn.execute("CREATE TEMP TABLE fenced (term bigint)")
        self.conn.commit()

    def rows(self):
        return self.conn.execute("SELECT count(*) FROM fenced").fetchone()[0]

    def take_over(self):
        """An admin vacates the lease and a rival takes the key."""
        self.assertTrue(sql("SELECT le_force_release(%s)", (self.key,)))
        self.assertTrue(sql("SELECT le_try_acquire(%s, 'rival', '30 seconds')", (self.key,)))
        self.addCleanup(sql, "SELECT le_release(%s, 'rival')", (self.key,))

    def test_guard_refuses_a_write_once_the_lease_is_lost(self):
        # ttl 30 s: no renewal in the test's time, so only the server knows
        with leaderlock.lead(DSN, self.key, ttl=30) as lease:
            with self.conn.transaction():
                self.assertEqual(lease.guard(self.conn), lease.term)
                self.conn.execute("INSERT INTO fenced VALUES (%s)", (lease.term,))
            self.assertEqual(self.rows(), 1)
            self.take_over()
            lease.check()  # by the local clock, still ours
            with self.assertRaises(leaderlock.LeaseLost) as caught:
                with self.conn.transaction():
                    lease.guard(self.conn)
                    self.conn.execute("INSERT INTO fenced VALUES (%s)", (lease.term,))
            self.assertEqual(caught.exception.reason, leaderlock.LeaseLost.NOT_LEADER)
            self.assertEqual(self.rows(), 1, "the write was not rolled back")
            with self.assertRaises(leaderlock.LeaseLost):
                lease.check()
            self.assertEqual(lease.reason, "not_leader")

    def test_guard_outside_a_transaction_is_refused(self):
        self.conn.autocommit = True
        with leaderlock.lead(DSN, self.key, ttl=30) as lease:
            with self.assertRaises(leaderlock.LeaderlockError):
                lease.guard(self.conn)

    def test_aguard_refuses_a_write_once_the_lease_is_lost(self):
        async def body():
            async with await psycopg.AsyncConnection.connect(DSN) as aconn:
                await aconn.execute("CREATE TEMP TABLE afenced (term bigint)")
                await aconn.commit()
                async with leaderlock.lead(DSN, self.key, ttl=30) as lease:
                    async with aconn.transaction():
                        await lease.aguard(aconn)
                        await aconn.execute("INSERT INTO afenced VALUES (%s)", (lease.term,))
                    self.take_over()
                    with self.assertRaises(leaderlock.LeaseLost) as caught:
                        async with aconn.transaction():
                            await lease.aguard(aconn)
                            await aconn.execute("INSERT INTO afenced VALUES (%s)", (lease.term,))
                    self.assertEqual(caught.exception.reason, "not_leader")
                cur = await aconn.execute("SELECT count(*) FROM afenced")
                self.assertEqual((await cur.fetchone())[0], 1)
        asyncio.run(body())


def restart_server():
    as_server = ["sudo", "-u", "postgres", "-H", "--"] if os.geteuid() == 0 else []
    libdir = os.path.join(os.path.dirname(PG_BIN), "lib")
    subprocess.run([*as_server, "env", f"LD_LIBRARY_PATH={libdir}", os.path.join(PG_BIN, "pg_ctl"),
                    "-D", PGDATA, "-l", os.path.join(PGDATA, "server.log"), "-w", "-t", "60",
                    "restart", "-m", "fast"], check=True, stdout=subprocess.DEVNULL)


def several_hosts():
    """DSN with a host where nothing listens first, then the server, and
    target_session_attrs=read-write, as for a replicated cluster (libpq
    tries each in turn); DSN itself when it names no TCP host and port."""
    given = conninfo_to_dict(DSN)
    host, port = given.get("host"), given.get("port")
    if not host or not port or host.startswith("/") or "," in host:
        return DSN
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    dead = s.getsockname()[1]
    s.close()
    return make_conninfo(DSN, host=f"127.0.0.1,{host}", port=f"{dead},{port}", target_session_attrs="read-write")


@unittest.skipUnless(PGDATA, "LEADERLOCK_PGDATA not set: the server cannot be restarted")
class RestartTest(unittest.TestCase):
    def test_waiting_and_leading_through_a_server_restart(self):
        run = uuid.uuid4().hex[:8]
        keys = {k: f"pym-restart-{k}-{run}" for k in ("sync", "async", "elector", "leader")}
        for k in ("sync", "async", "elector"):  # held by a rival that never renews
            self.assertTrue(sql("SELECT le_try_acquire(%s, 'rival', '3 seconds')", (keys[k],)))
        led, errors = {}, {}

        def sync_waiter():
            try:
                with leaderlock.lead(several_hosts(), keys["sync"], ttl=5, timeout=40) as lease:
                    led["sync"] = lease.term
            except BaseException as e:
                errors["sync"] = e

        async def async_waiter():
            async with leaderlock.lead(DSN, keys["async"], ttl=5, timeout=40) as lease:
                led["async"] = lease.term

        def async_thread():
            try:
                asyncio.run(async_waiter())
            except BaseException as e:
                errors["async"] = e

        leading = threading.Event()
        stop_leading = threading.Event()
        steps = {"n": 0}

        def leader():
            try:
                with leaderlock.lead(DSN, keys["leader"], ttl=8, timeout=10) as lease:
                    led["leader"] = (lease.id, lease.term)
                    leading.set()
                    while not stop_leading.is_set():
                        lease.check()  # through the restart: never lost
                        steps["n"] += 1
                        time.sleep(0.05)
            except BaseException as e:
                errors["leader"] = e

        threads = [threading.Thread(target=f, daemon=True) for f in (sync_waiter, async_thread, leader)]
        elector_led = threading.Event()
        elector = leaderlock.Elector(DSN, keys["elector"], ttl=5, on_started=lambda lease: elector_led.set(),
                                     on_failed=lambda e: errors.setdefault("elector", e))
        with self.assertLogs("leaderlock", logging.WARNING) as logs:
            for t in threads:
                t.start()
            elector.start()
            self.assertTrue(leading.wait(10))
            time.sleep(1.0)  # every waiter connected, waiting
            self.assertEqual(led.keys(), {"leader"})
            t0 = time.monotonic()
            restart_server()
            restarted = time.monotonic() - t0
            for t in threads[:2]:
                t.join(40)
            self.assertTrue(elector_led.wait(40), "the elector did not lead after the restart")
            elector.stop(10)
            self.assertEqual(errors, {})
            self.assertEqual(set(led), {"sync", "async", "leader"})
            self.assertEqual(sql("SELECT le_leader(%s)", (keys["leader"],)), led["leader"][0])
            self.assertEqual(sql("SELECT term FROM le_lease(%s)", (keys["leader"],)), led["leader"][1])
            steps_before = steps["n"]
            time.sleep(0.2)
            self.assertGreater(steps["n"], steps_before, "the leader stopped acting")
            stop_leading.set()
            threads[2].join(10)
            self.assertEqual(errors, {})
        self.assertTrue(any("cannot be reached" in line for line in logs.output), logs.output)
        print(f"\n  test_waiting_and_leading_through_a_server_restart: restart took {restarted:.1f} s; "
              "sync (two hosts, the first dead, read-write), async and elector waited and led, the leader kept its term", file=sys.stderr)


class OldSchemaTest(unittest.TestCase):
    """Against the extension's schema 0.4.0 (the library updated, ALTER
    EXTENSION not yet run): le_renew and le_release have no `term` there,
    and the client leads, renews and releases without it."""

    DB = "ll_py_old_schema"

    @classmethod
    def setUpClass(cls):
        if not sql("SELECT rolsuper FROM pg_roles WHERE rolname = current_user"):
            raise unittest.SkipTest("LEADERLOCK_DSN's role is not a superuser")
        sql(f"DROP DATABASE IF EXISTS {cls.DB} WITH (FORCE)")
        sql(f"CREATE DATABASE {cls.DB}")
        cls.dsn = make_conninfo(DSN, dbname=cls.DB)
        try:  # the compiled edition's files, installed where the server runs
            sql("CREATE EXTENSION leaderlock VERSION '0.4.0'", dsn=cls.dsn)
        except psycopg.Error as e:
            sql(f"DROP DATABASE IF EXISTS {cls.DB} WITH (FORCE)")  # (tearDownClass does not run after a skip)
            raise unittest.SkipTest(f"no compiled edition 0.4.0 here: {e}")

    @classmethod
    def tearDownClass(cls):
        sql(f"DROP DATABASE IF EXISTS {cls.DB} WITH (FORCE)")

    def test_leads_renews_and_releases_without_terms(self):
        key = f"pyo-{uuid.uuid4().hex[:8]}"
        with leaderlock.lead(self.dsn, key, ttl=1.0) as lease:
            time.sleep(2.5)  # renewals every ttl/3
            lease.check()
            self.assertEqual(sql("SELECT le_leader(%s)", (key,), dsn=self.dsn), lease.id)
        self.assertIsNone(sql("SELECT le_leader(%s)", (key,), dsn=self.dsn))


class TypedErrorsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not sql("SELECT rolsuper FROM pg_roles WHERE rolname = current_user"):
            raise unittest.SkipTest("LEADERLOCK_DSN's role is not a superuser")
        for db in (BARE_DB, NOEXEC_DB):
            sql(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
            sql(f"CREATE DATABASE {db}")
        if not sql("SELECT 1 FROM pg_roles WHERE rolname = %s", (NOEXEC_ROLE,)):
            sql(f"CREATE ROLE {NOEXEC_ROLE} LOGIN")
        noexec_admin = make_conninfo(DSN, dbname=NOEXEC_DB)
        cls.bare = make_conninfo(DSN, dbname=BARE_DB)
        cls.noexec = make_conninfo(DSN, dbname=NOEXEC_DB, user=NOEXEC_ROLE)
        try:  # the compiled edition's files, installed where the server runs
            sql("CREATE EXTENSION leaderlock", dsn=noexec_admin)
        except psycopg.Error as e:
            cls.noexec = None
            cls.no_extension = str(e)
        else:
            sql("REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA public FROM PUBLIC", dsn=noexec_admin)

    @classmethod
    def tearDownClass(cls):
        for db in (BARE_DB, NOEXEC_DB):
            sql(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
        sql(f"DROP ROLE IF EXISTS {NOEXEC_ROLE}")

    def setUp(self):
        self.key = f"pym-{self._testMethodName}-{uuid.uuid4().hex[:8]}"

    def assert_quick(self, exc, fn):
        """`fn` raises `exc` at once (timeout=None would otherwise wait for ever)."""
        t0 = time.monotonic()
        with self.assertRaises(exc) as caught:
            fn()
        self.assertLess(time.monotonic() - t0, 5.0)
        return caught.exception

    def sync(self, dsn, **kw):
        def fn():
            with leaderlock.lead(dsn, self.key, **kw):
                self.fail("led")
        return fn

    def asyncio(self, dsn, **kw):
        async def body():
            async with leaderlock.lead(dsn, self.key, **kw):
                self.fail("led")
        return lambda: asyncio.run(body())

    def elector(self, dsn, **kw):
        def fn():
            failed = []
            e = leaderlock.Elector(dsn, self.key, on_failed=failed.append, **kw)
            e.start()
            e.join(10)
            self.assertFalse(e.is_alive())
            self.assertIs(failed[0], e.error)
            raise e.error
        return fn

    def test_not_installed_names_the_database(self):
        for shape in (self.sync, self.asyncio, self.elector):
            e = self.assert_quick(leaderlock.NotInstalled, shape(self.bare))
            self.assertIn(f'extension leaderlock is not installed in database "{BARE_DB}"', str(e))
            self.assertEqual(e.database, BARE_DB)
            self.assertIsInstance(e, leaderlock.Rejected)

    def test_a_role_without_execute_gets_a_privilege_error(self):
        if self.noexec is None:
            self.skipTest(f"CREATE EXTENSION leaderlock failed: {self.no_extension}")
        for shape in (self.sync, self.asyncio, self.elector):
            e = self.assert_quick(leaderlock.PrivilegeError, shape(self.noexec))
            self.assertEqual(e.sqlstate, "42501")

    def test_bad_ttls_are_bad_arguments(self):
        for ttl in (0, -1, "10"):
            with self.assertRaises(leaderlock.BadArgument):
                leaderlock.lead(DSN, self.key, ttl=ttl)
            with self.assertRaises(ValueError):  # BadArgument is one
                leaderlock.Elector(DSN, self.key, ttl=ttl)
        with self.assertRaises(leaderlock.BadArgument):
            leaderlock.lead("no_such_option=1", self.key)
        # above leaderlock.max_ttl (a day): the server refuses it (22023)
        for shape in (self.sync, self.asyncio):
            e = self.assert_quick(leaderlock.BadArgument, shape(DSN, ttl=10 ** 6))
            self.assertEqual(e.sqlstate, "22023")
            self.assertIn("max_ttl", str(e))

    def test_an_unreachable_server_is_unavailable_at_the_timeout(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        nowhere = f"host=127.0.0.1 port={port} dbname=postgres user=postgres"
        for shape in (self.sync, self.asyncio):
            t0 = time.monotonic()
            with self.assertLogs("leaderlock", logging.WARNING):
                e = self.assert_quick(leaderlock.Unavailable, shape(nowhere, timeout=1.0))
            self.assertGreaterEqual(time.monotonic() - t0, 1.0)  # it kept trying until then
            self.assertIsInstance(e, ConnectionError)
            self.assertIsInstance(e.__cause__, psycopg.OperationalError)

    def test_the_user_s_application_name_is_kept(self):
        named = make_conninfo(DSN, application_name="ll_py_myapp")
        with leaderlock.lead(named, self.key, ttl=5):
            self.assertGreaterEqual(sql("SELECT count(*) FROM pg_stat_activity "
                                        "WHERE application_name = 'll_py_myapp'"), 1)


if __name__ == "__main__":
    unittest.main()
