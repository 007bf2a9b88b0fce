"""Contract 9-11 with real sessions on the test cluster (leaderlock
preloaded, worker serving database postgres): le_acquire's waits, session-
bound leases, the leader value in notifications.

Bounds here are generous liveness bounds (did it happen at all), never
timing goals: bench/acquire_wake.sh and bench/session_end.sh measure those.
"""
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
import unittest

import psycopg2
import psycopg2.errors

from harness import PORTABLE, Cluster, Listener, connect, one, pgbouncer, row, wait_for

GENEROUS = 10.0


class Waiter:
    """le_acquire in a thread of its own, on a connection of its own."""

    def __init__(self, key, id_, ttl="1 minute", wait="1 minute", port=None, **kw):
        self.conn = connect(port=port) if port else connect()
        self.pid = one(self.conn, "SELECT pg_backend_pid()")
        self.result, self.error, self.returned_at = None, None, None
        args = ", ".join(f"{k} => %({k})s" for k in kw)
        sql = "SELECT le_acquire(%(key)s, %(id)s, %(ttl)s, %(wait)s" + (", " + args if args else "") + ")"
        params = dict(key=key, id=id_, ttl=ttl, wait=wait, **kw)

        def run():
            try:
                self.result = one(self.conn, sql, params)
            except psycopg2.Error as e:
                self.error = e
            self.returned_at = time.monotonic()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def join(self, timeout=GENEROUS):
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "le_acquire did not return"
        return self.result

    def close(self):
        try:
            self.conn.close()
        except psycopg2.Error:
            pass


@contextlib.contextmanager
def frozen(pid):
    """Process `pid` stopped (SIGSTOP) for the `with` block, then resumed."""
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def sleeping(conn, pid):
    """Whether backend `pid` sleeps in le_acquire's wait event (the portable
    edition's le_acquire sleeps in pg_sleep between looks)."""
    event = ("Timeout", "PgSleep") if PORTABLE else ("Extension", "Extension")
    return one(conn, "SELECT wait_event_type = %s AND wait_event = %s "
                     "FROM pg_stat_activity WHERE pid = %s", (*event, pid)) is True


def context_switches(pid):
    """Times process `pid` went to sleep so far (/proc/PID/status)."""
    with open(f"/proc/{pid}/status") as f:
        return int(next(line for line in f if line.startswith("voluntary_ctxt_switches:")).split()[1])


def cpu_ticks(pid):
    """utime + stime of a process, in clock ticks (/proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


class Waiting:
    """`waiter`: a Waiter on a key, once it sleeps, closed at tearDown
    (`self.waiters`)."""

    def waiter(self, *args, **kw):
        w = Waiter(*args, **kw)
        self.waiters.append(w)
        self.assertTrue(wait_for(lambda: sleeping(self.conn, w.pid) or w.returned_at, timeout=GENEROUS),
                        "the waiter never slept")
        return w


class AcquireTest(Waiting, unittest.TestCase):
    def setUp(self):
        self.conn = connect()
        self.key = f"acq-{self.id().rsplit('.', 1)[-1]}-{time.time_ns()}"
        self.waiters = []

    def tearDown(self):
        for w in self.waiters:
            w.close()
        self.conn.close()

    def lease(self, key=None):
        return row(self.conn, "SELECT holder, term, value::text FROM le_lease(%s)", (key or self.key,))

    def test_release_commit_wakes_the_waiter(self):
        self.assertTrue(one(self.conn, "SELECT le_try_acquire(%s, 'a', '1 minute')", (self.key,)))
        w = self.waiter(self.key, "b")
        self.assertIsNone(w.returned_at)
        listener = Listener()
        try:
            holder = connect(autocommit=False)
            one(holder, "SELECT le_release(%s, 'a')", (self.key,))
            time.sleep(0.3)
            # released but not committed: still asleep
            self.assertIsNone(w.returned_at)
            self.assertTrue(sleeping(self.conn, w.pid))
            holder.commit()
            holder.close()
            # True can only come from the release: the lease had a minute left
            self.assertIs(w.join(), True)
            events = [e for e in listener.until_marker(self.conn) if e["key"] == self.key]
        finally:
            listener.close()
        self.assertEqual(self.lease()[:2], ("b", 2))
        self.assertEqual([(e["event"], e["holder"], e["term"]) for e in events],
                         [("released", "a", 1), ("acquired", "b", 2)])

    def test_waiter_takes_over_at_expiry(self):
        self.assertTrue(one(self.conn, "SELECT le_try_acquire(%s, 'a', '1 second')", (self.key,)))
        w = self.waiter(self.key, "b", wait="30 seconds")
        self.assertIs(w.join(timeout=GENEROUS + 30), True)
        self.assertEqual(self.lease()[:2], ("b", 2))

    def test_wait_passes_and_refuses(self):
        self.assertTrue(one(self.conn, "SELECT le_try_acquire(%s, 'a', '1 minute')", (self.key,)))
        w = self.waiter(self.key, "b", wait="500 milliseconds")
        self.assertIs(w.join(), False)
        self.assertEqual(self.lease()[:2], ("a", 1))

    @unittest.skipIf(PORTABLE, "the portable edition's le_acquire polls (portable/README.md, difference 2)")
    def test_a_waiter_uses_no_cpu(self):
        self.assertTrue(one(self.conn, "SELECT le_try_acquire(%s, 'a', '1 minute')", (self.key,)))
        w = self.waiter(self.key, "b")
        before = cpu_ticks(w.pid)
        time.sleep(2)
        spent = cpu_ticks(w.pid) - before
        self.assertTrue(sleeping(self.conn, w.pid))
        # A polling loop would spend ticks; a latch wait spends none.
        self.assertLessEqual(spent, 1, f"the waiting backend used {spent} clock ticks in 2 s")
        one(self.conn, "SELECT le_release(%s, 'a')", (self.key,))
        self.assertIs(w.join(), True)

    @unittest.skipIf(PORTABLE, "the portable edition's le_acquire polls (portable/README.md, difference 2)")
    def test_a_release_wakes_only_the_candidate_that_will_win(self):
        """Each release wakes the one candidate its key serves first (here
        the longest waiting); the last in line sleeps through three
        handovers without waking once, then wins the fourth."""
        self.assertTrue(one(self.conn, "SELECT le_try_acquire(%s, 'h', '1 minute')", (self.key,)))
        line = [self.waiter(self.key, f"w{i}") for i in range(4)]
        last = line[-1]
        before = context_switches(last.pid)
        for i, holder in enumerate(["h", "w0", "w1"]):
            self.assertTrue(one(self.conn, "SELECT le_release(%s, %s)", (self.key, holder)))
            self.assertIs(line[i].join(), True)
            self.assertEqual(self.lease()[0], f"w{i}")
        time.sleep(0.2)
        woken = context_switches(last.pid) - before
        self.assertTrue(sleeping(self.conn, last.pid))
        # Woken by each release, it would have gone back to sleep each time.
        self.assertLessEqual(woken, 1, f"the last waiter woke {woken} times in three handovers")
        self.assertTrue(one(self.conn, "SELECT le_release(%s, 'w2')", (self.key,)))
        self.assertIs(last.join(), True)
        self.assertEqual(self.lease()[0], "w3")

    @unittest.skipIf(PORTABLE, "the portable edition's le_acquire polls (portable/README.md, difference 2)")
    def test_a_candidate_terminated_at_its_turn_wakes_the_next(self):
        """The release woke w0 alone; w0 is terminated before it could look
        (frozen meanwhile): on its way out it wakes w1, who takes the lease
        long before the holder's minute would have run out."""
        self.assertTrue(one(self.conn, "SELECT le_try_acquire(%s, 'h', '1 minute')", (self.key,)))
        first, second = self.waiter(self.key, "w0"), self.waiter(self.key, "w1")
        with frozen(first.pid):
            self.assertTrue(one(self.conn, "SELECT le_release(%s, 'h')", (self.key,)))
            self.assertTrue(one(self.conn, "SELECT pg_terminate_backend(%s)", (first.pid,)))
            time.sleep(0.2)
            self.assertIsNone(second.returned_at)
        self.assertIs(second.join(), True)
        self.assertEqual(self.lease()[0], "w1")
        first.join()
        self.assertIsInstance(first.error, psycopg2.OperationalError)

    def test_cancel_and_terminate_end_the_wait(self):
        self.assertTrue(one(self.conn, "SELECT le_try_acquire(%s, 'a', '1 minute')", (self.key,)))
        w = self.waiter(self.key, "b")
        self.assertTrue(one(self.conn, "SELECT pg_cancel_backend(%s)", (w.pid,)))
        w.join()
        self.assertIsInstance(w.error, psycopg2.errors.QueryCanceled)
        w2 = self.waiter(self.key, "c")
        self.assertTrue(one(self.conn, "SELECT pg_terminate_backend(%s)", (w2.pid,)))
        w2.join()
        self.assertIsInstance(w2.error, psycopg2.OperationalError)
        self.assertEqual(self.lease()[:2], ("a", 1))
        # and the holder can still renew and release
        self.assertTrue(one(self.conn, "SELECT le_renew(%s, 'a')", (self.key,)))
        self.assertTrue(one(self.conn, "SELECT le_release(%s, 'a')", (self.key,)))

    def test_many_waiters_one_leader_at_a_time(self):
        """20 candidates loop on le_acquire for one key; each winner renews
        (which never waits: a row lock left by a loser would refuse it),
        checks it leads (le_assert_leader) through its tenure and releases.
        Every release must hand over to exactly one of them."""
        rounds, stop = 200, threading.Event()
        tenures, errors = [], []
        lock = threading.Lock()

        def candidate(i):
            c = connect()
            try:
                while not stop.is_set():
                    if not one(c, "SELECT le_acquire(%s, %s, '1 minute', '5 seconds')",
                               (self.key, f"c{i}")):
                        continue
                    # Renewals never wait, so a loser's leftover row lock would
                    # refuse them for as long as that loser waits (seconds). A
                    # loser's lock attempt racing with the win holds the row for
                    # microseconds and may refuse one try: a few tries 10 ms apart.
                    renewed = False
                    for _ in range(5):
                        renewed = one(c, "SELECT le_renew(%s, %s)", (self.key, f"c{i}"))
                        if renewed:
                            break
                        time.sleep(0.01)
                    self.assertTrue(renewed, "the new leader could not renew")
                    term = one(c, "SELECT le_assert_leader(%s, %s)", (self.key, f"c{i}"))
                    time.sleep(0.005)
                    self.assertEqual(one(c, "SELECT le_assert_leader(%s, %s)", (self.key, f"c{i}")), term)
                    with lock:
                        tenures.append((term, f"c{i}"))
                        if len(tenures) >= rounds:
                            stop.set()
                    self.assertTrue(one(c, "SELECT le_release(%s, %s)", (self.key, f"c{i}")))
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)
                stop.set()
            finally:
                c.close()

        threads = [threading.Thread(target=candidate, args=(i,)) for i in range(20)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        self.assertEqual(errors, [])
        terms = sorted(t for t, _ in tenures)
        self.assertGreaterEqual(len(terms), rounds)
        self.assertEqual(terms, list(range(1, len(terms) + 1)), "a term was skipped or issued twice")
        self.assertGreater(len({h for _, h in tenures}), 1, "leadership never moved")

    def test_through_pgbouncer_transaction_pooling(self):
        """One statement: a waiter works behind transaction pooling, where
        LISTEN cannot be relied on."""
        port = pgbouncer(self, pool_size=2)
        via = connect(port=port)
        self.assertTrue(one(via, "SELECT le_try_acquire(%s, 'a', '1 minute')", (self.key,)))
        w = self.waiter(self.key, "b", port=port)
        self.assertTrue(one(via, "SELECT le_release(%s, 'a')", (self.key,)))
        self.assertIs(w.join(), True)
        via.close()
        self.assertEqual(self.lease()[:2], ("b", 2))


@unittest.skipIf(PORTABLE, "the portable edition's le_acquire polls (portable/README.md, difference 2)")
class HandOverTest(Waiting, unittest.TestCase):
    """A release in an implicit transaction hands the lease to the candidate
    first in line, in its own transaction, when that candidate waits in an
    implicit transaction for a plain tenure (no value, not session-bound, one
    slot): the `acquired` notification then comes from the releasing backend,
    at the release's instant. A tenure handed over and never taken up goes
    to the worker, which vacates it (`expired`, reason `abandoned`)."""

    def setUp(self):
        self.conn = connect()
        self.key = f"hand-{self.id().rsplit('.', 1)[-1]}-{time.time_ns()}"
        self.waiters, self.others = [], []
        self.assertTrue(one(self.conn, "SELECT le_try_acquire(%s, 'a', '1 minute')", (self.key,)))
        self.listener = Listener()  # after: hears only what the test does

    def tearDown(self):
        self.listener.close()
        for c in self.waiters + self.others:
            c.close()
        self.conn.close()

    def waiter_in_a_block(self, id_, **kw):
        """le_acquire in a transaction block (not committed): (connection,
        backend pid, thread)."""
        c = self.connection(autocommit=False)
        pid = one(c, "SELECT pg_backend_pid()")
        args = "".join(f", {k} => %({k})s" for k in kw)
        t = self.in_background(c, f"SELECT le_acquire(%(key)s, %(id)s, '1 minute', '1 minute'{args})",
                               dict(key=self.key, id=id_, **kw))
        self.assertTrue(wait_for(lambda: sleeping(self.conn, pid), timeout=GENEROUS), "it never slept")
        return c, pid, t

    def connection(self, **kw):
        c = connect(**kw)
        self.others.append(c)
        return c

    def lease(self):
        return row(self.conn, "SELECT holder, term FROM le_lease(%s)", (self.key,))

    def events(self):
        return [e for e in self.listener.until_marker(self.conn) if e["key"] == self.key]

    def in_background(self, conn, sql, args):
        """Runs `sql` on `conn` in a thread; returns the thread (its error,
        if any, in `.error`)."""
        def run():
            try:
                one(conn, sql, args)
            except psycopg2.Error as e:
                t.error = e
        t = threading.Thread(target=run, daemon=True)
        t.error = None
        t.start()
        return t

    def test_a_release_hands_the_lease_to_the_first_in_line(self):
        w = self.waiter(self.key, "b")
        releaser = self.connection()
        pid = one(releaser, "SELECT pg_backend_pid()")
        self.assertTrue(one(releaser, "SELECT le_release(%s, 'a')", (self.key,)))
        self.assertIs(w.join(), True)
        self.assertEqual(self.lease(), ("b", 2))
        released, acquired = self.events()
        self.assertEqual((released["event"], released["holder"], released["term"]), ("released", "a", 1))
        self.assertEqual((acquired["event"], acquired["holder"], acquired["term"]), ("acquired", "b", 2))
        self.assertIsNone(acquired["previous_holder"])
        # One transaction, the release's: same sender, same instant.
        self.assertEqual((released["_pid"], acquired["_pid"]), (pid, pid))
        self.assertEqual(acquired["at"], released["at"])
        # The tenure is the waiter's own: its role owns it, it renews it.
        self.assertTrue(one(w.conn, "SELECT le_renew(%s, 'b')", (self.key,)))
        self.assertEqual(one(self.conn, "SELECT owner::regrole::text FROM leaderlock_status WHERE key = %s",
                             (self.key,)), "postgres")

    def test_no_hand_over_in_a_transaction_block_or_for_a_value_or_a_session(self):
        """The waiter then takes the lease itself: `acquired` comes from it."""
        cases = [
            ("the waiter's transaction is a block", {}, True, False),
            ("the release's transaction is a block", {}, False, True),
            ("the waiter asks for a value", {"value": '{"v": 1}'}, False, False),
            ("the waiter binds it to its session", {"session_bound": True}, False, False),
        ]
        holder = "a"
        for i, (case, kw, waiter_block, release_block) in enumerate(cases):
            with self.subTest(case):
                if waiter_block:
                    c, pid, t = self.waiter_in_a_block(f"w{i}")
                else:
                    w = self.waiter(self.key, f"w{i}", **kw)
                    pid = w.pid
                releaser = self.connection(autocommit=not release_block)
                self.assertTrue(one(releaser, "SELECT le_release(%s, %s)", (self.key, holder)))
                if release_block:
                    releaser.commit()
                if waiter_block:
                    t.join(GENEROUS)
                    self.assertIsNone(t.error)
                    c.commit()
                else:
                    self.assertIs(w.join(), True)
                self.assertEqual(self.lease()[0], f"w{i}")
                acquired = [e for e in self.events() if e["event"] == "acquired"]
                self.assertEqual([e["_pid"] for e in acquired], [pid], case)
                holder = f"w{i}"

    def test_a_first_in_line_that_cannot_be_handed_it_is_not_passed_over(self):
        """Contract 18: the candidate of higher priority waits in a block (not
        grantable); the grantable one of lower priority is not handed the
        lease, and the first takes it itself."""
        c, first_pid, t = self.waiter_in_a_block("p", priority=5)
        low = self.waiter(self.key, "q")
        self.assertTrue(one(self.connection(), "SELECT le_release(%s, 'a')", (self.key,)))
        t.join(GENEROUS)
        self.assertFalse(t.is_alive())
        self.assertIsNone(t.error)
        c.commit()
        self.assertEqual(self.lease(), ("p", 2))
        self.assertEqual([e["_pid"] for e in self.events() if e["event"] == "acquired"], [first_pid])
        self.assertIsNone(low.returned_at)
        self.assertTrue(one(self.conn, "SELECT pg_cancel_backend(%s)", (low.pid,)))
        low.join()

    def test_a_frozen_first_in_line_is_handed_it(self):
        """The first in line is frozen (SIGSTOP of its backend): the release
        hands it the lease all the same, as it would be a leader that froze
        after it took the lease; thawed, it returns true."""
        w = self.waiter(self.key, "b")
        with frozen(w.pid):
            self.assertTrue(one(self.connection(), "SELECT le_release(%s, 'a')", (self.key,)))
            self.assertEqual(self.lease(), ("b", 2))
            self.assertFalse(one(self.conn, "SELECT le_try_acquire(%s, 'other', '1 minute')", (self.key,)))
        self.assertIs(w.join(), True)
        self.assertEqual(self.lease(), ("b", 2))

    def test_a_release_rolled_back_hands_nothing(self):
        w = self.waiter(self.key, "b")
        releaser = self.connection()
        pid = one(releaser, "SELECT pg_backend_pid()")
        with self.assertRaises(psycopg2.errors.DivisionByZero):
            one(releaser, "SELECT le_release(%s, 'a'), 1 / (SELECT 0)", (self.key,))
        time.sleep(0.3)
        self.assertIsNone(w.returned_at)
        self.assertEqual(self.lease(), ("a", 1))
        # The waiter may be handed the lease again, by the next release.
        self.assertTrue(one(releaser, "SELECT le_release(%s, 'a')", (self.key,)))
        self.assertIs(w.join(), True)
        self.assertEqual(self.lease(), ("b", 2))
        self.assertEqual([e["_pid"] for e in self.events() if e["event"] == "acquired"], [pid])

    def test_a_release_in_an_exception_block_hands_nothing(self):
        """PL/pgSQL runs an exception block in a subtransaction: a release
        there may be rolled back while its transaction commits, so it hands
        nothing over, and here it is rolled back: nothing changed."""
        w = self.waiter(self.key, "b")
        releaser = self.connection()
        one(releaser, "SELECT set_config('leaderlock_test.key', %s, false)", (self.key,))
        with releaser.cursor() as cur:
            cur.execute("DO $$ BEGIN PERFORM le_release(current_setting('leaderlock_test.key'), 'a'); "
                        "RAISE EXCEPTION 'undo'; EXCEPTION WHEN raise_exception THEN NULL; END $$")
        time.sleep(0.3)
        self.assertIsNone(w.returned_at)
        self.assertEqual(self.lease(), ("a", 1))
        pid = one(releaser, "SELECT pg_backend_pid()")
        self.assertTrue(one(releaser, "SELECT le_release(%s, 'a')", (self.key,)))
        self.assertIs(w.join(), True)
        self.assertEqual([e["_pid"] for e in self.events() if e["event"] == "acquired"], [pid])

    def test_a_candidate_cancelled_after_the_hand_over_committed_leaves_it_to_the_worker(self):
        """The release commits while the candidate is frozen; cancelled,
        then thawed, the candidate stops without looking: it tells the
        worker itself, which vacates the tenure."""
        w = self.waiter(self.key, "b")
        with frozen(w.pid):
            self.assertTrue(one(self.connection(), "SELECT le_release(%s, 'a')", (self.key,)))
            self.assertEqual(self.lease(), ("b", 2))
            self.assertTrue(one(self.conn, "SELECT pg_cancel_backend(%s)", (w.pid,)))
        w.join()
        self.assertIsInstance(w.error, psycopg2.errors.QueryCanceled)
        self.assert_abandoned("b", 2)
        self.assertEqual(self.lease(), (None, 2))

    def test_two_hand_overs_in_one_statement_that_fails_are_both_vacated(self):
        other = self.key + "-2"
        self.assertTrue(one(self.conn, "SELECT le_try_acquire(%s, 'a', '1 minute')", (other,)))
        c = self.connection()
        pid = one(c, "SELECT pg_backend_pid()")
        t = self.in_background(
            c, "SELECT x, y, 1 / (SELECT 0) FROM (SELECT le_acquire(%s, 'd', '1 minute', '1 minute') AS x, "
               "le_acquire(%s, 'd', '1 minute', '1 minute') AS y OFFSET 0) s", (self.key, other))
        releaser = self.connection()
        for key in (self.key, other):
            # Waiting for this key (still asleep for the first, it would not
            # be handed the second: it would take it plainly later).
            self.assertTrue(wait_for(lambda: sleeping(self.conn, pid) and one(
                self.conn, "SELECT count(*) FROM le_candidates(%s) WHERE id = 'd'", (key,)) == 1,
                timeout=GENEROUS))
            self.assertTrue(one(releaser, "SELECT le_release(%s, 'a')", (key,)))
        t.join(GENEROUS)
        self.assertIsInstance(t.error, psycopg2.errors.DivisionByZero)
        vacated = set()

        def note(e):
            if e != "marker" and (e["event"], e["holder"], e["term"], e.get("reason")) == \
                    ("expired", "d", 2, "abandoned"):
                vacated.add(e["key"])
            return vacated == {self.key, other}
        self.listener.events(GENEROUS, until=note)
        self.assertEqual(vacated, {self.key, other})
        self.assertEqual(self.lease(), (None, 2))
        self.assertEqual(row(self.conn, "SELECT holder, term FROM le_lease(%s)", (other,)), (None, 2))

    def test_a_wait_that_ends_during_a_hand_over_leaves_it_to_the_worker(self):
        """The release's statement goes on for 2 s after handing the lease
        over; the waiter's wait ends meanwhile and it returns false, as
        `wait` says; at the release's commit the tenure handed to it goes to
        the worker, which vacates it, and the next candidate takes it."""
        first = self.waiter(self.key, "b", wait="1 second")
        second = self.waiter(self.key, "c")
        started = time.monotonic()
        t = self.in_background(self.connection(), "SELECT le_release(%s, 'a'), pg_sleep(2)", (self.key,))
        self.assertIs(first.join(), False)
        self.assertLess(first.returned_at - started, 1.9)
        self.assert_abandoned("b", 2)
        self.assertIs(second.join(), True)
        t.join(GENEROUS)
        self.assertIsNone(t.error)
        self.assertEqual(self.lease(), ("c", 3))

    def assert_abandoned(self, holder, term):
        """The worker vacated the tenure `term` handed to `holder`."""
        def vacated(e):
            return (e["event"], e["holder"], e["term"], e.get("reason")) == ("expired", holder, term, "abandoned")
        got = self.listener.events(GENEROUS, until=lambda e: e != "marker" and e["key"] == self.key and vacated(e))
        self.assertTrue(any(e != "marker" and vacated(e) for e in got), f"not vacated as abandoned: {got}")

    def test_a_candidate_cancelled_during_a_hand_over_leaves_it_to_the_worker(self):
        """Cancelled while the release that hands it the lease is still open:
        the release, at its commit, tells the worker, which vacates that
        tenure; the next candidate takes it long before its minute of ttl."""
        first, second = self.waiter(self.key, "b"), self.waiter(self.key, "c")
        t = self.in_background(self.connection(), "SELECT le_release(%s, 'a'), pg_sleep(1)", (self.key,))
        time.sleep(0.3)
        self.assertTrue(one(self.conn, "SELECT pg_cancel_backend(%s)", (first.pid,)))
        first.join()
        self.assertIsInstance(first.error, psycopg2.errors.QueryCanceled)
        self.assert_abandoned("b", 2)
        self.assertIs(second.join(), True)
        t.join(GENEROUS)
        self.assertIsNone(t.error)
        self.assertEqual(self.lease(), ("c", 3))

    def test_a_candidate_whose_statement_fails_after_true_leaves_it_to_the_worker(self):
        """le_acquire returned true for the tenure handed over, then the rest
        of its statement failed: rolled back, that tenure is the worker's to
        vacate, as a rolled-back le_acquire would have taken nothing."""
        c = self.connection()
        pid = one(c, "SELECT pg_backend_pid()")
        t = self.in_background(
            c, "SELECT x, 1 / (SELECT 0) FROM (SELECT le_acquire(%s, 'd', '1 minute', '1 minute') AS x "
               "OFFSET 0) s", (self.key,))
        self.assertTrue(wait_for(lambda: sleeping(self.conn, pid), timeout=GENEROUS))
        self.assertTrue(one(self.connection(), "SELECT le_release(%s, 'a')", (self.key,)))
        t.join(GENEROUS)
        self.assertIsInstance(t.error, psycopg2.errors.DivisionByZero)
        self.assert_abandoned("d", 2)
        self.assertEqual(self.lease(), (None, 2))


@unittest.skipIf(PORTABLE, "the portable edition has no session-bound leases (0A000; portable/README.md)")
class SessionBoundTest(unittest.TestCase):
    def setUp(self):
        self.cluster = Cluster.main()
        self.conn = connect()
        self.assertTrue(wait_for(lambda: self.cluster.worker_pid() is not None, timeout=GENEROUS))
        self.key = f"bound-{self.id().rsplit('.', 1)[-1]}-{time.time_ns()}"
        self.listener = Listener()

    def tearDown(self):
        self.listener.close()
        self.conn.close()

    def expired(self, timeout=GENEROUS):
        got = self.listener.events(timeout, until=lambda e: e["event"] == "expired" and e["key"] == self.key)
        mine = [e for e in got if e["key"] == self.key and e["event"] == "expired"]
        return mine[-1] if mine else None

    def bind(self, conn, id_="a", ttl="30 seconds"):
        self.assertTrue(one(conn, "SELECT le_try_acquire(%s, %s, %s, session_bound => true)",
                            (self.key, id_, ttl)))
        return row(self.conn, "SELECT session_pid, term FROM leaderlock WHERE key = %s", (self.key,))

    def test_lease_ends_when_the_connection_closes(self):
        holder = connect()
        pid = one(holder, "SELECT pg_backend_pid()")
        session_pid, term = self.bind(holder)
        self.assertEqual(session_pid, pid)
        holder.close()
        e = self.expired()
        self.assertIsNotNone(e, "no expired notification")
        self.assertEqual((e["holder"], e["term"], e["reason"]), ("a", term, "session_ended"))
        self.assertEqual(row(self.conn, "SELECT holder, term, session_pid, value FROM leaderlock "
                                        "WHERE key = %s", (self.key,)), (None, term, None, None))

    def test_kill_9_of_the_client_process(self):
        child = subprocess.Popen(
            [sys.executable, "-c", f"""
import sys, time
sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
from harness import connect, one
c = connect()
assert one(c, "SELECT le_try_acquire(%s, 'child', '30 seconds', session_bound => true)", ({self.key!r},))
print("ready", flush=True)
time.sleep(60)
"""], stdout=subprocess.PIPE, text=True)
        try:
            self.assertEqual(child.stdout.readline().strip(), "ready")
            os.kill(child.pid, signal.SIGKILL)
        finally:
            child.wait()
            child.stdout.close()
        e = self.expired()
        self.assertIsNotNone(e, "no expired notification after kill -9 of the client")
        self.assertEqual((e["holder"], e["reason"]), ("child", "session_ended"))
        self.assertIsNone(one(self.conn, "SELECT le_leader(%s)", (self.key,)))

    def test_renewals_from_elsewhere_keep_the_binding(self):
        holder = connect()
        pid = one(holder, "SELECT pg_backend_pid()")
        self.bind(holder)
        # Another session renews and re-acquires as the same id: allowed,
        # and the lease stays bound to the session that acquired it.
        self.assertTrue(one(self.conn, "SELECT le_renew(%s, 'a', '1 minute')", (self.key,)))
        self.assertTrue(one(self.conn, "SELECT le_try_acquire(%s, 'a', '1 minute', session_bound => true)",
                            (self.key,)))
        self.assertEqual(one(self.conn, "SELECT session_pid FROM leaderlock WHERE key = %s", (self.key,)), pid)
        holder.close()
        self.assertEqual(self.expired()["reason"], "session_ended")

    def test_a_waiter_is_woken_by_the_session_end(self):
        holder = connect()
        self.bind(holder)
        w = Waiter(self.key, "b", wait="30 seconds")
        try:
            self.assertTrue(wait_for(lambda: sleeping(self.conn, w.pid), timeout=GENEROUS))
            holder.close()
            self.assertIs(w.join(), True)
        finally:
            w.close()
        self.assertEqual(one(self.conn, "SELECT holder FROM leaderlock WHERE key = %s", (self.key,)), "b")

    def test_plain_expiry_says_ttl(self):
        self.assertTrue(one(self.conn, "SELECT le_try_acquire(%s, 'a', '200 milliseconds')", (self.key,)))
        e = self.expired()
        self.assertEqual(e["reason"], "ttl")

    def test_a_live_session_keeps_its_lease_through_a_worker_restart(self):
        """A new worker looks for sessions gone without a word (its first
        check): a session that is still there must keep its lease."""
        holder = connect()
        _, term = self.bind(holder)
        old = self.cluster.worker_pid()
        one(self.conn, "SELECT pg_terminate_backend(%s)", (old,))
        self.assertTrue(wait_for(lambda: self.cluster.worker_pid() not in (None, old), timeout=GENEROUS))
        time.sleep(0.5)  # its first check has run
        self.assertEqual(one(self.conn, "SELECT le_leader(%s)", (self.key,)), "a")
        holder.close()
        e = self.expired()
        self.assertEqual((e["term"], e["reason"]), (term, "session_ended"))

    def test_server_crash_ends_session_bound_leases(self):
        """kill -9 of the holder's backend: PostgreSQL restarts every process
        and no exit callback ran; the new worker's first check ends the
        lease, because that session is gone."""
        holder = connect()
        pid = one(holder, "SELECT pg_backend_pid()")
        _, term = self.bind(holder)
        self.listener.close()
        os.kill(pid, signal.SIGKILL)
        self.assertTrue(wait_for(self._reconnect, timeout=30))
        self.assertTrue(wait_for(lambda: one(self.conn, "SELECT holder FROM leaderlock WHERE key = %s",
                                             (self.key,)) is None, timeout=GENEROUS),
                        "the lease of the session that died with the crash was not ended")
        self.assertEqual(one(self.conn, "SELECT term FROM leaderlock WHERE key = %s", (self.key,)), term)

    def _reconnect(self):
        try:
            self.conn.close()
            self.conn = connect()
            self.listener = Listener()
            return self.cluster.worker_pid() is not None
        except psycopg2.OperationalError:
            return False


class ValueTest(unittest.TestCase):
    def setUp(self):
        self.conn = connect()
        self.key = f"value-{time.time_ns()}"
        self.listener = Listener()

    def tearDown(self):
        self.listener.close()
        self.conn.close()

    def test_value_travels_in_acquired_and_proclaimed(self):
        self.assertTrue(one(self.conn, "SELECT le_try_acquire(%s, 'a', '1 minute', "
                                       "value => '{\"addr\": \"10.1.2.3:8080\", \"n\": 12345678901234567890}')",
                            (self.key,)))
        self.assertTrue(one(self.conn, "SELECT le_proclaim(%s, 'a', '[\"moved\", 2]')", (self.key,)))
        self.assertFalse(one(self.conn, "SELECT le_proclaim(%s, 'b', '\"nope\"')", (self.key,)))
        # the holder re-acquiring: without a value nothing to say, with one a proclamation
        self.assertTrue(one(self.conn, "SELECT le_try_acquire(%s, 'a', '1 minute')", (self.key,)))
        self.assertTrue(one(self.conn, "SELECT le_try_acquire(%s, 'a', '1 minute', value => '3')", (self.key,)))
        self.assertTrue(one(self.conn, "SELECT le_release(%s, 'a')", (self.key,)))
        events = [e for e in self.listener.until_marker(self.conn) if e["key"] == self.key]
        self.assertEqual([e["event"] for e in events], ["acquired", "proclaimed", "proclaimed", "released"])
        self.assertEqual(events[0]["value"], {"addr": "10.1.2.3:8080", "n": 12345678901234567890})
        self.assertEqual((events[1]["value"], events[1]["holder"], events[1]["term"]), (["moved", 2], "a", 1))
        self.assertEqual((events[2]["value"], events[2]["term"]), (3, 1))
        self.assertNotIn("value", events[3])


if __name__ == "__main__":
    unittest.main()
