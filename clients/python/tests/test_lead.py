"""The Python client against a real server (LEADERLOCK_DSN: a database with
leaderlock, either edition; the test freezes backends with SIGSTOP, so it
runs on the server's host as root or as the server's user)."""
import asyncio
import contextlib
import os
import signal
import threading
import time
import unittest
import uuid

import psycopg

import leaderlock

from support import DSN, sql, wait




def renewer_pid(lease):
    """The backend renewing `lease` (the client's connections are named)."""
    return sql("SELECT pid FROM pg_stat_activity WHERE application_name = 'leaderlock python' "
               "AND pid <> pg_backend_pid() ORDER BY backend_start DESC LIMIT 1")


def served_or_gone(pid, what):
    """Whether backend `pid` has run a statement containing `what` to its end
    (or exited, as it does once it finds its client gone)."""
    return not sql("SELECT count(*) FROM pg_stat_activity WHERE pid = %s "
                   "AND NOT (state = 'idle' AND strpos(query, %s) > 0)", (pid, what))


class Frozen:
    """SIGSTOP a backend for the block: its calls hang as on a frozen server."""

    def __init__(self, pid):
        self.pid = pid

    def __enter__(self):
        os.kill(self.pid, signal.SIGSTOP)

    def __exit__(self, *exc):
        os.kill(self.pid, signal.SIGCONT)


class SyncTest(unittest.TestCase):
    def setUp(self):
        self.key = f"py-{self._testMethodName}-{uuid.uuid4().hex[:8]}"

    def test_leads_then_releases_on_exit(self):
        with leaderlock.lead(DSN, self.key, ttl=5) as lease:
            self.assertTrue(lease.alive)
            self.assertEqual(sql("SELECT le_leader(%s)", (self.key,)), lease.id)
            self.assertEqual(lease.term, sql("SELECT term FROM leaderlock WHERE key = %s", (self.key,)))
            host, pid, rand = lease.id.split(":")
            self.assertEqual(int(pid), os.getpid())
        self.assertIsNone(sql("SELECT le_leader(%s)", (self.key,)))
        self.assertFalse(lease.alive)

    def test_the_value_is_announced_with_the_leadership(self):
        with leaderlock.lead(DSN, self.key, ttl=5, value={"at": "host-1:8080"}) as lease:
            self.assertEqual(lease.value, {"at": "host-1:8080"})
            self.assertEqual(sql("SELECT value->>'at' FROM le_lease(%s)", (self.key,)), "host-1:8080")

    def test_timeout_zero_tries_once(self):
        with leaderlock.lead(DSN, self.key, ttl=5, id="first"):
            t0 = time.monotonic()
            with self.assertRaises(leaderlock.NotAcquired) as caught:
                with leaderlock.lead(DSN, self.key, timeout=0):
                    self.fail("a second leader")
            self.assertEqual(caught.exception.holder, "first")
            self.assertLess(time.monotonic() - t0, 1.0)

    def test_timeout_passes(self):
        with leaderlock.lead(DSN, self.key, ttl=5):
            t0 = time.monotonic()
            with self.assertRaises(leaderlock.NotAcquired):
                with leaderlock.lead(DSN, self.key, timeout=0.5):
                    self.fail("a second leader")
            self.assertGreaterEqual(time.monotonic() - t0, 0.5)

    def test_waits_and_leads_when_the_holder_leaves(self):
        got = {}

        def second():
            with leaderlock.lead(DSN, self.key, ttl=5, timeout=20) as lease:
                got["at"], got["term"] = time.monotonic(), lease.term
        with leaderlock.lead(DSN, self.key, ttl=5) as first:
            t = threading.Thread(target=second)
            t.start()
            time.sleep(0.5)
            self.assertNotIn("at", got)
        left = time.monotonic()
        t.join(20)
        self.assertEqual(got["term"], first.term + 1)
        self.assertLess(got["at"] - left, 1.5, "the release did not reach the waiting candidate")

    def test_renewals_keep_the_lease_past_its_ttl(self):
        with leaderlock.lead(DSN, self.key, ttl=1.0) as lease:
            time.sleep(2.5)
            lease.check()
            self.assertEqual(sql("SELECT le_leader(%s)", (self.key,)), lease.id)

    def test_refused_renewals_end_the_lease_at_the_local_deadline(self):
        """Its row locked by another transaction, every renewal is refused
        while the lease still shows as ours: retried, and at the local
        deadline the lease is lost."""
        with leaderlock.lead(DSN, self.key, ttl=1.5) as lease:
            with psycopg.connect(DSN) as blocker:
                blocker.execute("SELECT 1 FROM leaderlock WHERE key = %s FOR UPDATE", (self.key,))
                # every renewal applied was sent before the block
                bound = time.monotonic() + 1.5
                self.assertTrue(lease.lost.wait(3))
                lost_seen = time.monotonic()
                # read once lost, when nothing moves it (a renewal committed just
                # before the block may have been applied after it)
                deadline = lease.deadline
                self.assertLess(deadline, bound, "the deadline is past block + ttl")
                self.assertGreaterEqual(lost_seen, deadline, "lost before the deadline")
                self.assertLess(lost_seen - deadline, 0.25, "lost well after the deadline")
                with self.assertRaises(leaderlock.LeaseLost):
                    lease.check()

    def test_leaving_while_the_server_hangs_takes_ttl_over_3_at_most(self):
        with leaderlock.lead(DSN, self.key, ttl=1.5) as lease:
            pid = renewer_pid(lease)
            os.kill(pid, signal.SIGSTOP)
            t0 = time.monotonic()
        try:
            self.assertLess(time.monotonic() - t0, 1.5 / 3 + 1.5)
        finally:
            os.kill(pid, signal.SIGCONT)

    def test_a_release_that_heard_no_answer_is_sent_again_before_the_next_campaign(self):
        """The release hangs (its backend stopped) and is given up on: it
        may still arrive. The next campaign under the same id sends it again
        first, so it takes a new term instead of extending the old one; the
        late release, served at last, names the old term and ends nothing."""
        me = f"py-{uuid.uuid4().hex[:8]}"
        with leaderlock.lead(DSN, self.key, ttl=1.5, id=me) as lease:
            old, pid = lease.term, renewer_pid(lease)
            os.kill(pid, signal.SIGSTOP)
        try:
            with leaderlock.lead(DSN, self.key, ttl=1.5, id=me, timeout=5) as again:
                self.assertGreater(again.term, old)
                os.kill(pid, signal.SIGCONT)
                self.assertTrue(wait(lambda: served_or_gone(pid, "le_release")))
                again.check()
                self.assertEqual(sql("SELECT le_leader(%s)", (self.key,)), me)
        finally:
            with contextlib.suppress(ProcessLookupError):  # gone once it served the release
                os.kill(pid, signal.SIGCONT)

    def test_a_release_sent_again_that_meets_its_row_locked_holds_the_campaign_back(self):
        """The release sent again meets the lease's row locked (a guarded
        transaction of the old tenure still open): answered false while the
        tenure is live, so the campaign waits and sends it again, and leads
        in a new term once the lock is gone, never in the old one."""
        me = f"py-{uuid.uuid4().hex[:8]}"
        with leaderlock.lead(DSN, self.key, ttl=6, id=me) as lease:  # still live when the lock goes
            old, pid = lease.term, renewer_pid(lease)
            os.kill(pid, signal.SIGSTOP)
            blocker = psycopg.connect(DSN)
            blocker.execute("SELECT le_assert_leader(%s, %s)", (self.key, me))  # share-locks the row
        try:
            result = {}

            def again():
                with leaderlock.lead(DSN, self.key, ttl=6, id=me, timeout=10) as lease2:
                    result["term"] = lease2.term

            t = threading.Thread(target=again)
            t.start()
            time.sleep(1.0)
            self.assertNotIn("term", result, "led while the old tenure's row was locked")
            blocker.commit()
            t.join(10)
            self.assertGreater(result.get("term", old), old)
        finally:
            blocker.close()
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)

    def test_a_frozen_connection_is_replaced(self):
        """A renewal stuck on one connection (its backend stopped) is given
        up after ttl/3 and retried on a new one: the lease is kept."""
        with leaderlock.lead(DSN, self.key, ttl=1.5) as lease:
            with Frozen(renewer_pid(lease)):
                time.sleep(3)
                lease.check()
                self.assertEqual(sql("SELECT le_leader(%s)", (self.key,)), lease.id)

    def test_bad_arguments(self):
        for kw in ({"ttl": 0}, {"ttl": -1}, {"timeout": -1}, {"poll": 0}):
            with self.assertRaises(ValueError):
                leaderlock.lead(DSN, self.key, **kw)
        with self.assertRaises(ValueError):
            leaderlock.lead(DSN, "")


class AsyncTest(unittest.IsolatedAsyncioTestCase):
    def setUp(self):
        self.key = f"pya-{self._testMethodName}-{uuid.uuid4().hex[:8]}"

    async def test_leads_and_releases(self):
        async with leaderlock.lead(DSN, self.key, ttl=5) as lease:
            self.assertEqual(sql("SELECT le_leader(%s)", (self.key,)), lease.id)
            with self.assertRaises(leaderlock.NotAcquired):
                async with leaderlock.lead(DSN, self.key, timeout=0):
                    self.fail("a second leader")
        self.assertIsNone(sql("SELECT le_leader(%s)", (self.key,)))

    async def test_the_body_is_cancelled_at_the_local_deadline(self):
        """Renewals refused (the row locked by another transaction) until
        the local deadline: the body is cancelled there."""
        stepped_after = []
        with self.assertRaises(leaderlock.LeaseLost):
            async with leaderlock.lead(DSN, self.key, ttl=1.5) as lease:
                with psycopg.connect(DSN) as blocker:
                    blocker.execute("SELECT 1 FROM leaderlock WHERE key = %s FOR UPDATE", (self.key,))
                    while True:
                        await asyncio.sleep(0.01)
                        if time.monotonic() > lease.deadline:
                            stepped_after.append(time.monotonic() - lease.deadline)
        # The deadline's timer runs before any later wake-up of the body: at
        # most the one step already due when the deadline passed.
        self.assertLessEqual(len(stepped_after), 1, stepped_after)

    async def test_a_frozen_connection_is_replaced(self):
        async with leaderlock.lead(DSN, self.key, ttl=1.5) as lease:
            with Frozen(renewer_pid(lease)):
                await asyncio.sleep(3)
                lease.check()

    async def test_leaving_while_the_server_hangs_takes_ttl_over_3_at_most(self):
        """The reviewer's case: the backend frozen as the block ends; the
        release is abandoned at its bound instead of waiting for the server."""
        t0 = None
        async with leaderlock.lead(DSN, self.key, ttl=1.5) as lease:
            pid = renewer_pid(lease)
            os.kill(pid, signal.SIGSTOP)
            t0 = time.monotonic()
        try:
            self.assertLess(time.monotonic() - t0, 1.5 / 3 + 1.5)
        finally:
            os.kill(pid, signal.SIGCONT)

    async def test_a_release_that_heard_no_answer_is_sent_again_before_the_next_campaign(self):
        me = f"pya-{uuid.uuid4().hex[:8]}"
        async with leaderlock.lead(DSN, self.key, ttl=1.5, id=me) as lease:
            old, pid = lease.term, renewer_pid(lease)
            os.kill(pid, signal.SIGSTOP)
        try:
            async with leaderlock.lead(DSN, self.key, ttl=1.5, id=me, timeout=5) as again:
                self.assertGreater(again.term, old)
                os.kill(pid, signal.SIGCONT)
                self.assertTrue(wait(lambda: served_or_gone(pid, "le_release")))
                again.check()
                self.assertEqual(sql("SELECT le_leader(%s)", (self.key,)), me)
        finally:
            with contextlib.suppress(ProcessLookupError):  # gone once it served the release
                os.kill(pid, signal.SIGCONT)

    async def test_renewals_keep_the_lease(self):
        async with leaderlock.lead(DSN, self.key, ttl=1.0) as lease:
            await asyncio.sleep(2.5)
            lease.check()


class ElectorTest(unittest.TestCase):
    def setUp(self):
        self.key = f"pye-{self._testMethodName}-{uuid.uuid4().hex[:8]}"

    def test_two_electors_one_leader_and_a_handover_on_stop(self):
        seen = {"a": [], "b": []}

        def elector(name):
            return leaderlock.Elector(
                DSN, self.key, ttl=2, id=name,
                on_started=lambda lease: seen[name].append(("started", lease.term)),
                on_stopped=lambda lease, why: seen[name].append(("stopped", why)),
                on_new_leader=lambda holder: seen[name].append(("leader", holder)))
        a = elector("a")
        a.start()
        self.assertTrue(wait(lambda: ("started", 1) in seen["a"] or any(e[0] == "started" for e in seen["a"])))
        b = elector("b")
        b.start()
        self.assertTrue(wait(lambda: ("leader", "a") in seen["b"]))
        time.sleep(1.5)  # past a's ttl: renewals keep it
        self.assertFalse(any(e[0] == "started" for e in seen["b"]))
        a.stop(5)
        self.assertEqual(seen["a"][-1], ("stopped", "released"))
        self.assertTrue(wait(lambda: any(e[0] == "started" for e in seen["b"]), 3))
        self.assertEqual(sql("SELECT le_leader(%s)", (self.key,)), "b")
        b.stop(5)
        self.assertIsNone(sql("SELECT le_leader(%s)", (self.key,)))




if __name__ == "__main__":
    unittest.main()
