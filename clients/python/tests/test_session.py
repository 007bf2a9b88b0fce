"""Sessions (contract 21, docs/sessions.md) in the Python client, against a
real server (LEADERLOCK_DSN, a superuser's; the pause test stops a child
process with SIGSTOP).

- many keys under one session, ttl 1 s, kept 3 s by its one renewer: the
  server shows them held, the client sent one le_renew_session per ttl/3
  and nothing else that renews, and no key's row was written;
- a process paused past its deadline (SIGSTOP, tests/session_child.py):
  its first `alive` after waking is false, and it takes no step;
- close: every lease lost here first, every key vacated at once (rivals
  waiting in le_acquire get them right away);
- a renewal the server refuses (the session closed from elsewhere) loses
  the session and every lease at once, for good;
- bad input is BadArgument, from this client or from the server;
- acquire waits for a key another session releases, with the key's own
  term; guard fences with it; release frees one key.
"""
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import uuid

import psycopg

import leaderlock
from leaderlock import _sync

from support import DSN, sql, wait

CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "session_child.py")
CLIENT_PATH = os.path.dirname(os.path.dirname(os.path.abspath(leaderlock.__file__)))


def held_by(keys, me):
    """How many of `keys` the server says `me` holds (le_leader: live holders only)."""
    return sql("SELECT count(*) FROM unnest(%s::text[]) k WHERE le_leader(k) = %s", (keys, me))


def stopped(pid):
    """Whether process `pid` is stopped (SIGSTOP delivered)."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "T"


class Statements:
    """Counts the statements the client sends on its connections, by kind,
    while installed (it wraps the internal connection's row())."""

    def __init__(self, test):
        self.sent = []
        original = _sync.Session.row

        def row(conn, until, query, args=()):
            self.sent.append(query)
            return original(conn, until, query, args)
        _sync.Session.row = row
        test.addCleanup(setattr, _sync.Session, "row", original)

    def count(self, what):
        return sum(what in q for q in self.sent)


class SessionTest(unittest.TestCase):
    def setUp(self):
        self.prefix = f"pys-{self._testMethodName}-{uuid.uuid4().hex[:8]}"

    def keys(self, n):
        return [f"{self.prefix}/{i}" for i in range(n)]

    def test_many_keys_are_kept_by_one_renewal_every_ttl_over_3(self):
        keys = self.keys(50)
        statements = Statements(self)
        with leaderlock.session(DSN, ttl=1.0) as s:
            leases = [s.try_acquire(k) for k in keys]
            self.assertTrue(all(isinstance(lease, leaderlock.Lease) for lease in leases))
            self.assertEqual({lease.term for lease in leases}, {1})
            rows = "SELECT array_agg(key || ':' || xmin::text ORDER BY key) FROM leaderlock WHERE key = ANY(%s)"
            before = sql(rows, (keys,))
            renewed_before = sql("SELECT renewed_at FROM leaderlock_sessions WHERE session = %s", (s.handle,))
            renewals_before = statements.count("le_renew")
            sessions_before = statements.count("le_renew_session(")
            time.sleep(3.0)  # three times the ttl
            self.assertTrue(s.alive)
            for lease in leases:
                lease.check()
            self.assertEqual(held_by(keys, s.id), 50, "the server does not show every key held")
            self.assertEqual(sql("SELECT count(*) FROM leaderlock_status WHERE key = ANY(%s) AND state = 'held'",
                                 (keys,)), 50)
            renewals = statements.count("le_renew") - renewals_before
            sessions = statements.count("le_renew_session(") - sessions_before
            # one renewal of the session every ttl/3: 9 in 3 s (timers are late, never early)
            self.assertEqual(renewals, sessions, "something else than le_renew_session renewed")
            self.assertTrue(7 <= sessions <= 10, f"{sessions} renewals in 3 s with ttl 1 s")
            self.assertEqual(sql(rows, (keys,)), before, "a renewal wrote the keys' rows")
            self.assertGreater(sql("SELECT renewed_at FROM leaderlock_sessions WHERE session = %s", (s.handle,)),
                               renewed_before)
        self.assertEqual(held_by(keys, s.id), 0)

    def test_a_process_paused_past_its_deadline_takes_no_step_when_it_wakes(self):
        records = tempfile.NamedTemporaryFile(prefix="leaderlock-session-", delete=False).name
        self.addCleanup(os.unlink, records)
        keys = self.keys(5)
        child = subprocess.Popen([sys.executable, CHILD, DSN, self.prefix, "5", "1.0", records],
                                 env=dict(os.environ, PYTHONPATH=CLIENT_PATH),
                                 stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

        def end():
            if child.poll() is None:
                os.kill(child.pid, signal.SIGCONT)
                child.kill()
            child.wait()
            child.stdout.close()
        self.addCleanup(end)

        def lines():
            with open(records) as f:
                return [line.split() for line in f]
        self.assertTrue(wait(lambda: any(r[0] == "effect" for r in lines()), 15), "the child never acted")
        os.kill(child.pid, signal.SIGSTOP)
        self.assertTrue(wait(lambda: stopped(child.pid), 2))
        paused = time.monotonic()
        time.sleep(2.0)  # twice the ttl
        resumed = time.monotonic()  # before SIGCONT: any call the child starts from now on is after it woke
        os.kill(child.pid, signal.SIGCONT)
        wait(lambda: child.poll() is not None, 3)  # it leaves at its first check (the records say what it did)
        out = lines()
        woke = [r for r in out if r[0] == "alive" and float(r[1]) >= resumed]
        self.assertTrue(woke, "no alive after waking")
        self.assertEqual(woke[0][3], "False", "its first alive after waking said True")
        self.assertEqual([r for r in woke if r[3] != "False"], [])
        self.assertEqual([r for r in out if r[0] == "effect" and float(r[1]) >= paused], [],
                         "a side effect after the pause")
        self.assertEqual(out[-1], ["lost", "expired"])
        self.assertEqual(child.wait(5), 0, child.stdout.read().decode())
        # the server ended it too: the keys are free (the worker vacates a lapsed session)
        self.assertTrue(wait(lambda: sql("SELECT count(*) FROM unnest(%s::text[]) k WHERE le_leader(k) IS NOT NULL",
                                         (keys,)) == 0, 5))

    def test_close_loses_every_lease_and_vacates_every_key_at_once(self):
        keys = self.keys(10)
        got = {}

        def rival(key):
            with psycopg.connect(DSN, autocommit=True) as c:
                won = c.execute("SELECT le_acquire(key => %s, id => 'rival', ttl => '5 s', wait => '8 s')",
                                (key,)).fetchone()[0]
                got[key] = (won, time.monotonic())
        with leaderlock.session(DSN, ttl=5.0) as s:
            leases = [s.try_acquire(k) for k in keys]
            self.assertTrue(all(leases))
            rivals = [threading.Thread(target=rival, args=(k,)) for k in keys[:3]]
            for r in rivals:
                r.start()
            self.assertTrue(wait(lambda: sql("SELECT count(*) FROM unnest(%s::text[]) k, le_candidates(k) c",
                                             (keys[:3],)) == 3, 5), "the rivals are not waiting")
            closing = time.monotonic()
        for r in rivals:
            r.join(10)
        for lease in leases:
            self.assertFalse(lease.alive)
            self.assertEqual(lease.reason, leaderlock.LeaseLost.RELEASED)
        with self.assertRaises(leaderlock.SessionLost):
            s.check()
        for k in keys[:3]:
            won, at = got[k]
            self.assertTrue(won, f"{k}: the rival did not get it")
            self.assertLess(at - closing, 0.5, f"{k}: the rival got it {at - closing:.3f} s after the close")
        self.assertEqual(sql("SELECT count(*) FROM unnest(%s::text[]) k WHERE le_leader(k) IS NOT NULL",
                             (keys[3:],)), 0)
        self.assertIsNone(sql("SELECT session FROM leaderlock_sessions WHERE session = %s", (s.handle,)))

    def test_a_refused_renewal_loses_the_session_and_every_lease_for_good(self):
        keys = self.keys(3)
        with leaderlock.session(DSN, ttl=3.0) as s:
            leases = [s.try_acquire(k) for k in keys]
            self.assertTrue(all(leases))
            # the same role closes it from another connection: the next renewal is refused
            self.assertIs(sql("SELECT le_close_session(%s)", (s.handle,)), True)
            closed = time.monotonic()
            deadline = s.deadline
            self.assertTrue(s.lost.wait(3.0))
            lost = time.monotonic()
            self.assertLess(lost - closed, 1.0 + 0.5, "not lost at the next renewal (ttl/3)")
            self.assertLess(lost, deadline, "lost at the deadline, not by the refusal")
            self.assertEqual(s.reason, leaderlock.LeaseLost.VACATED)
            self.assertFalse(s.alive)
            for lease in leases:
                self.assertFalse(lease.alive)
                with self.assertRaises(leaderlock.LeaseLost) as caught:
                    lease.check()
                self.assertEqual(caught.exception.reason, leaderlock.LeaseLost.VACATED)
            # for good: no acquisition under it, and it stays lost
            with self.assertRaises(leaderlock.SessionLost):
                s.try_acquire(f"{self.prefix}/again")
            time.sleep(1.2)
            self.assertFalse(s.alive)
            self.assertFalse(leases[0].alive)
        self.assertEqual(held_by(keys, s.id), 0)

    def test_bad_input_is_a_bad_argument(self):
        for kw in ({"ttl": 0}, {"ttl": -1}, {"ttl": "10"}, {"lock_delay": -1}, {"id": ""}, {"keep_values": "yes"}):
            with self.assertRaises(leaderlock.BadArgument, msg=kw) as caught:
                leaderlock.session(DSN, **kw)
            self.assertIsNone(caught.exception.sqlstate, kw)  # refused here, before any connection
        with leaderlock.session(DSN, ttl=5.0) as s:
            for call in (lambda: s.try_acquire(""), lambda: s.acquire("", 1.0), lambda: s.acquire("k", -1),
                         lambda: s.release("")):
                with self.assertRaises(leaderlock.BadArgument) as caught:
                    call()
                self.assertIsNone(caught.exception.sqlstate)
            self.assertTrue(s.alive)
        # what only the server knows: a ttl above leaderlock.max_ttl (one day by default)
        with self.assertRaises(leaderlock.BadArgument) as caught:
            with leaderlock.session(DSN, ttl=10 ** 6):
                self.fail("opened")
        self.assertEqual(caught.exception.sqlstate, "22023")

    def test_acquire_waits_gives_the_key_s_own_term_fences_writes_and_release_frees_one_key(self):
        a, b = self.keys(2)
        with leaderlock.session(DSN, ttl=5.0, id=f"{self.prefix}-rival") as rival, \
                leaderlock.session(DSN, ttl=5.0) as s, psycopg.connect(DSN) as conn:
            self.assertIsNotNone(rival.try_acquire(a))
            self.assertIsNone(s.try_acquire(a))
            got = {}
            waiter = threading.Thread(target=lambda: got.update(lease=s.acquire(a, 5.0, value={"at": "here"})))
            waiter.start()
            time.sleep(0.2)
            self.assertTrue(rival.release(a))
            waiter.join(5)
            lease = got["lease"]
            self.assertEqual(lease.term, 2)
            self.assertEqual(lease.term, sql("SELECT term FROM leaderlock WHERE key = %s", (a,)))
            self.assertEqual(lease.value, {"at": "here"})
            self.assertEqual(sql("SELECT value->>'at' FROM le_lease(%s)", (a,)), "here")
            with self.assertRaises(leaderlock.NotAcquired) as caught:
                rival.acquire(a, 0.2)
            self.assertEqual(caught.exception.holder, s.id)
            with conn.transaction():
                self.assertEqual(lease.guard(conn), 2)
            other = s.try_acquire(b)
            self.assertTrue(other.release())
            self.assertFalse(other.alive)
            self.assertTrue(lease.alive and s.alive)
            self.assertIsNone(sql("SELECT le_leader(%s)", (b,)))
            self.assertEqual(sql("SELECT le_leader(%s)", (a,)), s.id)
            self.assertEqual(s.leases, [lease])
        # closed: guard refuses before any statement
        with psycopg.connect(DSN) as conn:
            with self.assertRaises(leaderlock.LeaseLost):
                with conn.transaction():
                    lease.guard(conn)


if __name__ == "__main__":
    unittest.main()
