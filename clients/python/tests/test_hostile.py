"""The Python client against other roles' doings (LEADERLOCK_DSN, as
test_lead.py; the role must be a superuser: it makes a role of no rights,
and the followers count their calls with track_functions = all).

- A flood of forged `released` notifications from a role with no rights:
  a waiting candidate's tries stay bounded (one per HINT_FLOOR at most,
  docs/clients.md), and a real release is still taken over at once.
- A rival holding the key with another number of slots: the candidate
  waits (a warning, once) and leads once the rival is gone.
"""
import asyncio
import json
import logging
import sys
import threading
import time
import unittest
import uuid

import psycopg
from psycopg.conninfo import make_conninfo

import leaderlock

from support import DSN, sql, wait
# The followers' sessions count their function calls (pg_stat_user_functions):
# no other session does, so le_try_acquire's count is theirs.
TRACKED = make_conninfo(DSN, options="-c track_functions=all")
MALLORY = "ll_py_mallory"
FLOOD_SECONDS = 2.0
MAX_RATE = 120  # tries per second; the rule allows one per 10 ms plus a round trip
TTL = 20  # polling every ttl/2 = 10 s: a take-over within seconds is a hint's doing






def tries():
    """le_try_acquire calls the server counted, from sessions that track them."""
    return int(sql("SELECT coalesce(sum(calls), 0) FROM pg_stat_user_functions WHERE funcname = 'le_try_acquire'"))


class Counted:
    """The tries of the followers started in the block: every session of
    application 'leaderlock python' that starts in it. Their counts reach
    the shared statistics when the backend exits at the latest, so
    `count()` waits for them to be gone and the total to settle."""

    def __enter__(self):
        self.since = sql("SELECT clock_timestamp()")
        self.before = tries()
        return self

    def backends(self):
        return sql("SELECT coalesce(array_agg(pid), '{}') FROM pg_stat_activity "
                   "WHERE application_name = 'leaderlock python' AND backend_start >= %s", (self.since,))

    def __exit__(self, *exc):
        pass

    def count(self):
        assert wait(lambda: not self.backends(), 15), "the followers' sessions did not end"
        last, steady = tries(), time.monotonic()
        while time.monotonic() - steady < 0.5:
            time.sleep(0.1)
            now = tries()
            if now != last:
                last, steady = now, time.monotonic()
        return last - self.before


class Flood:
    """Forged `released` announcements of `key`, as fast as one session of a
    role with no rights sends them, from a thread, for the block."""

    def __init__(self, key):
        self.key, self.sent, self.stop = key, 0, threading.Event()

    def __enter__(self):
        self.conn = psycopg.connect(make_conninfo(DSN, user=MALLORY), autocommit=True)
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.started = time.monotonic()
        self.thread.start()
        return self

    def run(self):
        while not self.stop.is_set():
            self.sent += 1
            payload = json.dumps({"event": "released", "key": self.key, "holder": "mallory",
                                  "term": self.sent, "at": "2026-01-01T00:00:00.000000Z"})
            self.conn.execute("SELECT pg_notify('leaderlock', %s)", (payload,))

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(10)
        self.seconds = time.monotonic() - self.started
        self.conn.close()


def setUpModule():
    if not sql("SELECT rolsuper FROM pg_roles WHERE rolname = current_user"):
        raise unittest.SkipTest("LEADERLOCK_DSN's role is not a superuser")
    if not sql("SELECT 1 FROM pg_roles WHERE rolname = %s", (MALLORY,)):
        sql(f"CREATE ROLE {MALLORY} LOGIN")


class FloodCase(unittest.TestCase):
    def setUp(self):
        self.key = f"py-{self._testMethodName}-{uuid.uuid4().hex[:8]}"
        self.assertTrue(sql("SELECT le_try_acquire(%s, 'rival', '60 seconds')", (self.key,)))
        self.addCleanup(sql, "SELECT le_release(%s, 'rival')", (self.key,))

    def flood_then_release(self, led, counted, stop):
        """Floods while the follower waits, then releases the rival's lease;
        checks the follower's tries (once `stop()` ended it) while flooded
        and that it led at once."""
        time.sleep(1.0)  # the follower is waiting, LISTENing
        with Flood(self.key) as flood:
            time.sleep(FLOOD_SECONDS)
        released = time.monotonic()
        self.assertTrue(sql("SELECT le_release(%s, 'rival')", (self.key,)))
        self.assertTrue(led.wait(5), "not leading 5 s after the release (it polls every 10 s)")
        took = time.monotonic() - released
        stop()
        n = counted.count()
        seconds = flood.seconds + took
        print(f"\n  {self._testMethodName}: {flood.sent} forged releases in {flood.seconds:.1f} s; "
              f"{n} tries, {n / seconds:.0f}/s; led {took * 1000:.0f} ms after the release", file=sys.stderr)
        self.assertGreater(n, 10, "the hints brought no try forward")
        self.assertLessEqual(n / seconds, MAX_RATE, f"{n} tries in {seconds:.1f} s")


class FloodTest(FloodCase):
    def test_sync_lead_tries_at_a_bounded_rate_under_a_flood_of_forged_releases(self):
        led = threading.Event()

        def follower():
            with leaderlock.lead(TRACKED, self.key, ttl=TTL):
                led.set()
        with Counted() as counted:
            t = threading.Thread(target=follower, daemon=True)
            t.start()
            self.flood_then_release(led, counted, lambda: t.join(10))

    def test_async_lead_tries_at_a_bounded_rate_under_a_flood_of_forged_releases(self):
        led = threading.Event()

        async def follower():
            async with leaderlock.lead(TRACKED, self.key, ttl=TTL):
                led.set()
        with Counted() as counted:
            t = threading.Thread(target=lambda: asyncio.run(follower()), daemon=True)
            t.start()
            self.flood_then_release(led, counted, lambda: t.join(10))

    def test_the_elector_tries_at_a_bounded_rate_under_a_flood_of_forged_releases(self):
        led = threading.Event()
        with Counted() as counted:
            e = leaderlock.Elector(TRACKED, self.key, ttl=TTL, on_started=lambda lease: led.set())
            e.start()
            try:
                self.flood_then_release(led, counted, lambda: e.stop(10))
            finally:
                e.stop(10)


class SlotsDifferTest(unittest.TestCase):
    """A rival holds the key with 3 slots (these candidates ask for one)."""

    def setUp(self):
        self.key = f"py-{self._testMethodName}-{uuid.uuid4().hex[:8]}"

    def squat(self, seconds=1.0):
        """The rival's tenure, released after `seconds` (from a thread)."""
        self.assertTrue(sql("SELECT le_try_acquire(%s, 'squatter', '30 seconds', slots => 3)", (self.key,)))
        self.addCleanup(sql, "SELECT le_release(%s, 'squatter')", (self.key,))
        t = threading.Timer(seconds, sql, ("SELECT le_release(%s, 'squatter')", (self.key,)))
        t.start()
        self.addCleanup(t.cancel)
        self.ends = time.monotonic() + seconds

    def test_lead_waits_for_a_rival_with_other_slots_then_leads(self):
        self.squat()
        with self.assertLogs("leaderlock", logging.WARNING) as logs:
            with leaderlock.lead(DSN, self.key, ttl=5, timeout=10) as lease:
                self.assertGreaterEqual(time.monotonic(), self.ends)
                self.assertEqual(sql("SELECT le_leader(%s)", (self.key,)), lease.id)
        self.assertEqual(len(logs.records), 1, logs.output)
        self.assertIn("another number of slots", logs.output[0])

    def test_lead_s_timeout_still_ends_it_while_a_rival_with_other_slots_holds(self):
        self.squat(3.0)
        t0 = time.monotonic()
        with self.assertLogs("leaderlock", logging.WARNING):
            with self.assertRaises(leaderlock.NotAcquired):
                with leaderlock.lead(DSN, self.key, ttl=5, timeout=1):
                    self.fail("led while the rival held the key")
        self.assertGreaterEqual(time.monotonic() - t0, 1.0)

    def test_async_lead_waits_for_a_rival_with_other_slots_then_leads(self):
        self.squat()

        async def follower():
            async with leaderlock.lead(DSN, self.key, ttl=5, timeout=10) as lease:
                self.assertGreaterEqual(time.monotonic(), self.ends)
                self.assertEqual(sql("SELECT le_leader(%s)", (self.key,)), lease.id)
        with self.assertLogs("leaderlock", logging.WARNING) as logs:
            asyncio.run(follower())
        self.assertEqual(len(logs.records), 1, logs.output)

    def test_the_elector_waits_for_a_rival_with_other_slots_then_leads(self):
        self.squat()
        started = threading.Event()
        with self.assertLogs("leaderlock", logging.WARNING) as logs:
            e = leaderlock.Elector(DSN, self.key, ttl=5, on_started=lambda lease: started.set())
            e.start()
            try:
                self.assertTrue(started.wait(10))
                self.assertGreaterEqual(time.monotonic(), self.ends)
                self.assertIsNone(e.error)
            finally:
                e.stop(10)
        self.assertEqual(len(logs.records), 1, logs.output)
        self.assertIn("another number of slots", logs.output[0])


if __name__ == "__main__":
    unittest.main()
