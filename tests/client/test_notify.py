"""Notifications on channel leaderlock, received by a real LISTENing client
(contract section 4)."""
import threading
import time
import unittest
from datetime import timedelta

import psycopg2

from harness import LAZY_DB, PORTABLE, Listener, connect, one, parse_time, row

NASTY_KEY = 'job "nightly" \\ C:\\temp\\ \'quoted\' é 雪 🦀 \t\n\x01 {"json": true}'
NASTY_ID = 'host-\\"1\\" ünïcødé 名前 \x7f \r\n }'


class NotificationTest(unittest.TestCase):
    def setUp(self):
        self.conn = connect()
        self.listener = Listener()
        self.key = f"notify-{self.id()}"

    def tearDown(self):
        self.listener.close()
        self.conn.close()

    def heard(self, *keys):
        """What the listener heard until a marker, of this test's keys only
        (`keys`, or the test's own): a lease another module left behind
        may expire meanwhile, announced on the same channel."""
        keys = set(keys) or {self.key, NASTY_KEY + self.key}
        return [e for e in self.listener.until_marker(self.conn) if e.get("key") in keys]

    def acquire(self, key, holder, ttl="10 seconds"):
        return one(self.conn, "SELECT le_try_acquire(%s, %s, %s)", (key, holder, ttl))

    def test_acquired_payload_with_quotes_backslashes_and_non_ascii(self):
        self.assertTrue(self.acquire(NASTY_KEY + self.key, NASTY_ID, "7 seconds"))
        events = self.heard()
        self.assertEqual(len(events), 1, events)
        e = events[0]
        self.assertEqual(e["event"], "acquired")
        self.assertEqual(e["key"], NASTY_KEY + self.key)
        self.assertEqual(e["holder"], NASTY_ID)
        self.assertIsNone(e["previous_holder"])
        self.assertIn("previous_holder", e)
        term, acquired_at, expires_at = row(
            self.conn,
            "SELECT term, acquired_at, expires_at FROM leaderlock WHERE key = %s",
            (NASTY_KEY + self.key,))
        self.assertEqual(e["term"], term)
        self.assertEqual(parse_time(e["at"]), acquired_at)
        self.assertEqual(parse_time(e["expires_at"]), expires_at)
        self.assertEqual(parse_time(e["expires_at"]) - parse_time(e["at"]), timedelta(seconds=7))

    def test_released_payload(self):
        self.assertTrue(self.acquire(self.key, NASTY_ID))
        self.assertTrue(one(self.conn, "SELECT le_release(%s, %s)", (self.key, NASTY_ID)))
        events = self.heard()
        self.assertEqual([e["event"] for e in events], ["acquired", "released"])
        released = events[1]
        self.assertEqual(released["key"], self.key)
        self.assertEqual(released["holder"], NASTY_ID)
        self.assertEqual(released["term"], events[0]["term"])
        self.assertNotIn("previous_holder", released)
        expires_at = one(self.conn, "SELECT expires_at FROM leaderlock WHERE key = %s", (self.key,))
        self.assertEqual(parse_time(released["at"]), expires_at)
        self.assertIs(released["forced"], False)

    def test_forced_release_payload_and_its_waiter(self):
        # Contract 13: announced as released, "forced": true; a le_acquire
        # waiting for the lease gets it at the forced release's commit.
        self.assertTrue(self.acquire(self.key, "stuck", "1 hour"))
        waiter = connect()
        got = {}

        def wait():
            got["acquired"] = one(waiter, "SELECT le_acquire(%s, 'next', '10 seconds', '20 seconds')",
                                  (self.key,))

        t = threading.Thread(target=wait)
        t.start()
        try:
            time.sleep(0.3)  # (likely waiting by then; either way it must get the lease)
            self.assertTrue(one(self.conn, "SELECT le_force_release(%s)", (self.key,)))
            t.join(20)
        finally:
            waiter.close()
        self.assertTrue(got.get("acquired"), "the waiter did not get the force-released lease")
        events = self.heard()
        self.assertEqual([(e["event"], e["holder"], e.get("forced")) for e in events],
                         [("acquired", "stuck", None), ("released", "stuck", True), ("acquired", "next", None)])
        self.assertEqual(events[1]["term"], events[0]["term"])
        self.assertEqual(events[2]["term"], events[0]["term"] + 1)

    def test_takeover_of_a_lapsed_lease_names_the_previous_holder(self):
        # In a database the worker does not serve, a lapsed lease stays
        # lapsed (no `expired` event) until someone takes it over; the
        # portable edition's takeover announces the expiry first
        # (portable/README.md, difference 1).
        lazy = connect(LAZY_DB)
        listener = Listener(LAZY_DB)
        try:
            self.assertTrue(one(lazy, "SELECT le_try_acquire(%s, 'old', '1 millisecond')", (self.key,)))
            one(lazy, "SELECT pg_sleep(0.01)")
            self.assertTrue(one(lazy, "SELECT le_try_acquire(%s, 'new', '10 seconds')", (self.key,)))
            events = [e for e in listener.until_marker(lazy) if e.get("key") == self.key]
        finally:
            listener.close()
            lazy.close()
        if PORTABLE:
            self.assertEqual([e["event"] for e in events], ["acquired", "expired", "acquired"])
            self.assertEqual((events[1]["holder"], events[1]["reason"]), ("old", "ttl"))
            del events[1]
        self.assertEqual([e["event"] for e in events], ["acquired", "acquired"])
        self.assertIsNone(events[0]["previous_holder"])
        takeover = events[1]
        self.assertEqual(takeover["holder"], "new")
        self.assertEqual(takeover["previous_holder"], "old")
        self.assertEqual(takeover["term"], events[0]["term"] + 1)

    def test_renewals_and_reacquires_announce_nothing(self):
        self.assertTrue(self.acquire(self.key, "a"))
        self.assertEqual(len(self.heard()), 1)
        self.assertTrue(one(self.conn, "SELECT le_renew(%s, 'a')", (self.key,)))
        self.assertTrue(self.acquire(self.key, "a"))
        self.assertFalse(self.acquire(self.key, "b"))
        self.assertEqual(self.heard(), [])

    def test_rolled_back_acquire_announces_nothing(self):
        tx = connect(autocommit=False)
        try:
            self.assertTrue(one(tx, "SELECT le_try_acquire(%s, 'a', '10 seconds')", (self.key,)))
            tx.rollback()
        finally:
            tx.close()
        self.assertEqual(self.heard(), [])
        self.assertIsNone(one(self.conn, "SELECT le_leader(%s)", (self.key,)))

    def test_notification_is_sent_at_commit_not_before(self):
        tx = connect(autocommit=False)
        try:
            self.assertTrue(one(tx, "SELECT le_try_acquire(%s, 'a', '10 seconds')", (self.key,)))
            self.assertEqual(self.heard(), [])
            tx.commit()
        finally:
            tx.close()
        self.assertEqual([e["event"] for e in self.heard()], ["acquired"])

    def test_largest_names_fit_the_payload_limit(self):
        # 255 bytes each, every character escaped in JSON.
        key = "\x01" * 255
        holder = "\x02" * 255
        self.assertTrue(self.acquire(key, holder))
        self.assertTrue(one(self.conn, "SELECT le_release(%s, %s)", (key, holder)))
        self.assertTrue(self.acquire(key, "é" * 127))
        events = self.heard(key)
        self.assertEqual([e["event"] for e in events], ["acquired", "released", "acquired"])
        self.assertEqual(events[0]["key"], key)
        self.assertEqual(events[0]["holder"], holder)
        self.assertEqual(events[2]["holder"], "é" * 127)
        self.assertTrue(one(self.conn, "SELECT le_release(%s, %s)", (key, "é" * 127)))

    def test_rejected_call_announces_and_changes_nothing(self):
        self.assertTrue(self.acquire(self.key, "a"))
        self.heard()
        before = one(self.conn, "SELECT l::text FROM leaderlock l WHERE key = %s", (self.key,))
        for sql, args, state in [
            ("SELECT le_try_acquire(%s, 'b', '2 months')", (self.key,), "22023"),
            ("SELECT le_try_acquire(%s, '', '1 second')", (self.key,), "22023"),
            ("SELECT le_release(%s, NULL)", (self.key,), "22004"),
            ("SELECT le_renew(%s, 'a', '-1 second')", (self.key,), "22023"),
        ]:
            with self.assertRaises(psycopg2.Error) as caught:
                one(self.conn, sql, args)
            self.assertEqual(caught.exception.pgcode, state, sql)
        self.assertEqual(one(self.conn, "SELECT l::text FROM leaderlock l WHERE key = %s", (self.key,)),
                         before)
        self.assertEqual(self.heard(), [])


if __name__ == "__main__":
    unittest.main()
