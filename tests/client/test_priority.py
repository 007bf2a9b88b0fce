"""Contract 18 with real waiting sessions: le_acquire's priority and
le_candidates. While a candidate waits for a key, no candidate of lower
priority takes it (neither le_try_acquire racing in nor le_acquire);
priority never preempts a live holder; a candidate that stops waiting, by
timeout, cancel or termination, stops counting at once.

Bounds are liveness bounds; timing goals belong to bench/acquire_wake.sh.
"""
import sys
import threading
import time
import unittest

import psycopg2

from harness import PORTABLE, connect, one, wait_for
from test_acquire import GENEROUS, Waiter, frozen, sleeping


@unittest.skipIf(PORTABLE, "priorities need the preloaded library: tests/portable/README.md")
class PriorityTest(unittest.TestCase):
    def setUp(self):
        self.conn = connect()
        self.key = f"prio-{self.id().rsplit('.', 1)[-1]}-{time.time_ns()}"
        self.closers = []

    def tearDown(self):
        for c in self.closers:
            c.close()
        self.conn.close()

    def hold(self, who="holder", ttl="1 minute"):
        self.assertTrue(one(self.conn, "SELECT le_try_acquire(%s, %s, %s)", (self.key, who, ttl)))

    def waiter(self, who, priority, wait="1 minute", **kw):
        w = Waiter(self.key, who, wait=wait, priority=priority, **kw)
        self.closers.append(w)
        self.assertTrue(wait_for(lambda: sleeping(self.conn, w.pid) or w.returned_at, GENEROUS),
                        "the waiter never slept")
        self.assertIsNone(w.returned_at, w.error)
        return w

    def candidates(self):
        with self.conn.cursor() as cur:
            cur.execute("SELECT id, priority FROM le_candidates(%s)", (self.key,))
            return cur.fetchall()

    def release(self, who):
        self.assertTrue(one(self.conn, "SELECT le_release(%s, %s)", (self.key, who)))

    def test_the_highest_priority_is_served_first_then_the_longest_waiting(self):
        self.hold()
        low = self.waiter("low", 1)
        high = self.waiter("high", 5)
        mid_first = self.waiter("mid-first", 3)
        mid_second = self.waiter("mid-second", 3)
        self.assertEqual(self.candidates(), [("high", 5), ("mid-first", 3), ("mid-second", 3), ("low", 1)])
        since = one(self.conn, "SELECT bool_and(waiting_since <= le_now()) FROM le_candidates(%s)",
                    (self.key,))
        self.assertTrue(since)
        order = []
        for w, who in ((high, "high"), (mid_first, "mid-first"), (mid_second, "mid-second"), (low, "low")):
            self.release(order[-1] if order else "holder")
            self.assertIs(w.join(), True, who)
            order.append(who)
            time.sleep(0.05)
            # the others still wait
            self.assertEqual([c[0] for c in self.candidates()],
                             [x for x in ("high", "mid-first", "mid-second", "low") if x not in order])
        self.assertEqual(order, ["high", "mid-first", "mid-second", "low"])
        self.assertEqual(self.candidates(), [])

    def test_no_lower_candidate_takes_the_key_while_a_higher_one_waits(self):
        """Rivals hammer le_try_acquire (priority 0) and a lower le_acquire
        waits too; when the holder releases, the waiting candidate of
        higher priority gets the key every time."""
        for round_ in range(5):
            self.hold(ttl="1 minute")
            term = one(self.conn, "SELECT term FROM leaderlock WHERE key = %s", (self.key,))
            lower = self.waiter(f"lower-{round_}", 0)
            high = self.waiter(f"high-{round_}", 1)
            stop, won, errors = threading.Event(), [], []

            def rival(n):
                c = connect()
                try:
                    while not stop.is_set():
                        if one(c, "SELECT le_try_acquire(%s, %s, '1 minute')", (self.key, f"rival-{n}")):
                            won.append(n)
                except psycopg2.Error as e:
                    errors.append(e)
                finally:
                    c.close()

            rivals = [threading.Thread(target=rival, args=(n,), daemon=True) for n in range(3)]
            for t in rivals:
                t.start()
            time.sleep(0.1)
            self.release("holder")
            self.assertIs(high.join(), True)
            time.sleep(0.1)
            stop.set()
            for t in rivals:
                t.join(GENEROUS)
            self.assertEqual((won, errors), ([], []))
            self.assertEqual(one(self.conn, "SELECT holder || ':' || term FROM leaderlock WHERE key = %s",
                                 (self.key,)), f"high-{round_}:{term + 1}")
            # the lower candidate waits on; then gets its turn
            self.assertIsNone(lower.returned_at)
            self.release(f"high-{round_}")
            self.assertIs(lower.join(), True)
            self.release(f"lower-{round_}")

    def test_priority_never_preempts_a_live_holder(self):
        self.hold(who="low-holder", ttl="2 seconds")
        high = self.waiter("high", 10, wait="5 seconds")
        for _ in range(4):
            self.assertTrue(one(self.conn, "SELECT le_renew(%s, 'low-holder')", (self.key,)))
            self.assertTrue(one(self.conn, "SELECT le_try_acquire(%s, 'low-holder', '2 seconds')", (self.key,)))
            time.sleep(0.5)
        self.assertIsNone(high.returned_at)
        self.assertEqual(one(self.conn, "SELECT le_leader(%s)", (self.key,)), "low-holder")
        self.release("low-holder")
        self.assertIs(high.join(), True)

    def test_a_candidate_that_stops_waiting_stops_counting(self):
        self.hold()
        gives_up = self.waiter("gives-up", 9, wait="700 milliseconds")
        cancelled = self.waiter("cancelled", 8)
        terminated = self.waiter("terminated", 7)
        low = self.waiter("low", 1)
        self.assertEqual([c[0] for c in self.candidates()], ["gives-up", "cancelled", "terminated", "low"])
        self.assertIs(gives_up.join(), False)
        one(self.conn, "SELECT pg_cancel_backend(%s)", (cancelled.pid,))
        cancelled.join()
        self.assertIsInstance(cancelled.error, psycopg2.errors.QueryCanceled)
        one(self.conn, "SELECT pg_terminate_backend(%s)", (terminated.pid,))
        terminated.join()
        self.assertTrue(wait_for(lambda: [c[0] for c in self.candidates()] == ["low"], timeout=GENEROUS),
                        self.candidates())
        # Nobody outranks the low one any more: the release is its.
        self.release("holder")
        self.assertIs(low.join(), True)

    def test_slots_serve_the_highest_priority_first(self):
        for who in ("a", "b"):
            self.assertTrue(one(self.conn, "SELECT le_try_acquire(%s, %s, '1 minute', slots => 2)",
                                (self.key, who)))
        low = Waiter(self.key, "low", slots=2, priority=0)
        high = Waiter(self.key, "high", slots=2, priority=2)
        self.closers += [low, high]
        self.assertTrue(wait_for(lambda: len(self.candidates()) == 2, GENEROUS))
        self.release("a")
        self.assertIs(high.join(), True)
        self.assertIsNone(low.returned_at)
        self.release("b")
        self.assertIs(low.join(), True)

    def test_a_release_goes_to_the_waiting_candidate_not_back_to_the_releaser(self):
        """The holder releases and at once campaigns again (le_try_acquire,
        the same priority); the candidate that waited gets the key every
        time: the release knocked on it, and the key is its until it looked.
        (Without that, the releaser, a round trip away, usually came first.)"""
        for round_ in range(10):
            self.key = f"{self.key.rsplit('#', 1)[0]}#{round_}"
            self.hold()
            w = self.waiter(f"waiter-{round_}", 0)
            self.release("holder")
            again = one(self.conn, "SELECT le_try_acquire(%s, 'holder', '1 minute')", (self.key,))
            self.assertFalse(again, f"round {round_}: the releaser took the key back")
            self.assertIs(w.join(), True)
            self.assertEqual(one(self.conn, "SELECT le_leader(%s)", (self.key,)), f"waiter-{round_}")

    def test_a_frozen_candidate_keeps_the_key_reserved_briefly(self):
        """The candidate knocked on is frozen (SIGSTOP of its backend): the
        key is reserved to it for a moment only; then another takes it. Its
        le_acquire, thawed, waits on. (It asks for a value: a candidate the
        release can hand the lease to is handed it instead, frozen or not,
        test_acquire.HandOverTest.test_a_frozen_first_in_line_is_handed_it.)"""
        self.hold()
        w = self.waiter("frozen", 0, wait="30 seconds", value='{"frozen": true}')
        with frozen(w.pid):
            self.release("holder")
            released = time.monotonic()
            self.assertFalse(one(self.conn, "SELECT le_try_acquire(%s, 'other', '1 minute')", (self.key,)))
            self.assertTrue(wait_for(lambda: one(self.conn, "SELECT le_try_acquire(%s, 'other', '1 minute')",
                                                 (self.key,)), timeout=GENEROUS, interval=0.01))
            print(f"\n  reserved to the frozen candidate for {(time.monotonic() - released) * 1000:.0f} ms",
                  file=sys.stderr)
        time.sleep(0.2)
        self.assertIsNone(w.returned_at, w.error)
        self.release("other")
        self.assertIs(w.join(), True)

    def test_bad_priority(self):
        with self.assertRaises(psycopg2.errors.NullValueNotAllowed):
            one(self.conn, "SELECT le_acquire(%s, 'a', '1 minute', '0', priority => NULL)", (self.key,))
        self.assertEqual(one(self.conn, "SELECT count(*) FROM leaderlock WHERE key = %s", (self.key,)), 0)


if __name__ == "__main__":
    unittest.main()
