"""The background worker (contract section 5), on the test cluster started
by scripts/test.sh (leaderlock preloaded, leaderlock.databases = postgres).
Several databases: test_databases.py."""
import os
import signal
import time
import unittest

import psycopg2

from harness import Cluster, Listener, connect, lease_clock_offset, one, parse_time, promotion_paths, row, wait_for, wait_ready

GENEROUS = 5.0  # seconds: a bound on behaviour, not a timing goal (see bench/)


def is_expiry_of(key):
    return lambda e: e != "marker" and e["event"] == "expired" and e["key"] == key


def wait_expired(listener, key, timeout=GENEROUS + 2):
    """The first `expired` event for `key` and its receipt time, or None."""
    got = listener.events(timeout, until=is_expiry_of(key))
    if got and is_expiry_of(key)(got[-1]):
        return got[-1], got[-1]["_received"]
    return None, None


class WorkerTest(unittest.TestCase):
    def setUp(self):
        self.cluster = Cluster.main()
        self.conn = connect()
        # Each test starts with the worker up (an earlier one may restart it).
        self.assertTrue(wait_for(lambda: self.cluster.worker_pid() is not None, timeout=10))
        self.key = f"worker-{self.id()}-{time.time_ns()}"

    def tearDown(self):
        self.conn.close()

    def test_worker_runs_and_reports_it(self):
        # (an earlier test may have just restarted it)
        self.assertTrue(wait_for(lambda: one(self.conn, "SELECT le_worker_running()"), timeout=10))
        self.assertIsNotNone(self.cluster.worker_pid())
        # Only in the database it serves.
        lazy = connect("leaderlock_lazy")
        self.assertFalse(one(lazy, "SELECT le_worker_running()"))
        lazy.close()

    def test_lapsed_lease_is_expired_and_announced(self):
        listener = Listener()
        try:
            self.assertTrue(one(self.conn, "SELECT le_try_acquire(%s, 'dying', '300 milliseconds')",
                                (self.key,)))
            term, expires_at = row(self.conn, "SELECT term, expires_at FROM leaderlock WHERE key = %s",
                                   (self.key,))
            event, received = wait_expired(listener, self.key)
        finally:
            listener.close()
        self.assertIsNotNone(event, "no expired notification")
        self.assertEqual(set(event) - {"_received", "_pid"},
                         {"event", "key", "holder", "term", "at", "expires_at", "reason"})
        self.assertEqual(event["holder"], "dying")
        self.assertEqual(event["reason"], "ttl")
        self.assertEqual(event["term"], term)
        self.assertEqual(parse_time(event["expires_at"]), expires_at)
        self.assertGreaterEqual(parse_time(event["at"]), expires_at)
        lag = received + lease_clock_offset(self.conn) - expires_at.timestamp()
        self.assertLess(lag, GENEROUS)
        # Vacant now, term kept; the next acquire starts term + 1.
        holder, term_after, state = row(
            self.conn, "SELECT holder, term, state FROM leaderlock_status WHERE key = %s", (self.key,))
        self.assertEqual((holder, term_after, state), (None, term, "vacant"))
        self.assertTrue(one(self.conn, "SELECT le_try_acquire(%s, 'next', '10 seconds')", (self.key,)))
        self.assertEqual(one(self.conn, "SELECT term FROM leaderlock WHERE key = %s", (self.key,)), term + 1)

    def test_a_lease_renewed_in_time_is_never_expired(self):
        listener = Listener()
        try:
            # (a ttl ten renewal periods long: a busy host may hold one
            # renewal's commit up for a few of them)
            self.assertTrue(one(self.conn, "SELECT le_try_acquire(%s, 'alive', '1 second')",
                                (self.key,)))
            stop = time.monotonic() + 3.0
            while time.monotonic() < stop:
                time.sleep(0.1)
                self.assertTrue(one(self.conn, "SELECT le_renew(%s, 'alive')", (self.key,)))
            events = listener.until_marker(self.conn)
        finally:
            listener.close()
        mine = [e for e in events if e["key"] == self.key]
        self.assertEqual([e["event"] for e in mine], ["acquired"])
        self.assertEqual(row(self.conn, "SELECT holder, term FROM leaderlock WHERE key = %s", (self.key,)),
                         ("alive", 1))
        one(self.conn, "SELECT le_release(%s, 'alive')", (self.key,))

    def test_shorter_lease_wakes_the_worker_early(self):
        # The worker sleeps until the next expiry (here ~10 minutes away, or
        # its naptime); a shorter lease committed meanwhile must not wait.
        one(self.conn, "SELECT le_try_acquire(%s, 'long', '10 minutes')", (self.key + "-long",))
        listener = Listener()
        try:
            time.sleep(0.3)
            one(self.conn, "SELECT le_try_acquire(%s, 'short', '200 milliseconds')", (self.key,))
            expires_at = one(self.conn, "SELECT expires_at FROM leaderlock WHERE key = %s", (self.key,))
            event, received = wait_expired(listener, self.key)
        finally:
            listener.close()
            one(self.conn, "SELECT le_release(%s, 'long')", (self.key + "-long",))
        self.assertIsNotNone(event)
        late = received + lease_clock_offset(self.conn) - expires_at.timestamp()
        print(f"\n  expired announced {1000 * late:.1f} ms after expires_at")

    def test_locked_lapsed_rows_are_skipped_then_retried(self):
        # A guarded transaction holds the row while the lease lapses: the
        # worker must not block on it nor expire it; after commit it does.
        other = self.key + "-other"
        listener = Listener()
        tx = connect(autocommit=False)
        # (the connections first: the lease must still be live when tx locks it)
        one(self.conn, "SELECT le_try_acquire(%s, 'guarded', '200 milliseconds')", (self.key,))
        try:
            one(tx, "SELECT le_assert_leader(%s, 'guarded')", (self.key,))
            one(self.conn, "SELECT le_try_acquire(%s, 'free', '200 milliseconds')", (other,))
            # The other lapsed lease is expired although the worker met a locked row.
            event, _ = wait_expired(listener, other)
            self.assertIsNotNone(event, "worker blocked behind a locked row")
            time.sleep(0.3)
            self.assertEqual(one(self.conn, "SELECT holder FROM leaderlock WHERE key = %s", (self.key,)),
                             "guarded")
            tx.commit()
            event, _ = wait_expired(listener, self.key)
            self.assertIsNotNone(event, "locked lease not retried after the lock went away")
        finally:
            tx.close()
            listener.close()

    def test_terminated_worker_is_restarted_and_still_expires(self):
        old = self.cluster.worker_pid()
        self.assertTrue(one(self.conn, "SELECT pg_terminate_backend(%s)", (old,)))
        # SIGTERM: it exits promptly ...
        self.assertTrue(wait_for(lambda: not os.path.exists(f"/proc/{old}"), timeout=GENEROUS),
                        "worker did not exit on SIGTERM")
        # ... and the launcher starts it again.
        self.assertTrue(wait_for(lambda: self.cluster.worker_pid() not in (None, old), timeout=10))
        # (it shows in pg_stat_activity once connected, and reports itself
        # running a moment later, once it found the extension)
        self.assertTrue(wait_for(lambda: one(self.conn, "SELECT le_worker_running()"), timeout=10))
        self.assert_expires_a_lease()

    def test_killed_worker_gets_the_server_restarted_with_it(self):
        old = self.cluster.worker_pid()
        os.kill(old, signal.SIGKILL)  # a crash: the postmaster reinitialises
        time.sleep(1)
        wait_ready()
        self.assertTrue(wait_for(lambda: self.cluster.worker_pid() not in (None, old), timeout=15))
        self.conn = connect()
        self.assert_expires_a_lease()

    def assert_expires_a_lease(self):
        key = self.key + "-after"
        listener = Listener()
        try:
            one(self.conn, "SELECT le_try_acquire(%s, 'x', '200 milliseconds')", (key,))
            event, _ = wait_expired(listener, key)
        finally:
            listener.close()
        self.assertIsNotNone(event, "restarted worker does not expire leases")


class RestartTest(unittest.TestCase):
    """Leases, terms and holders are exactly as committed across fast and
    immediate (crash) shutdowns, and terms never go back."""

    def snapshot(self, conn):
        with conn.cursor() as cur:
            cur.execute("SELECT key, holder, term, acquired_at, renewed_at, expires_at, ttl "
                        "FROM leaderlock WHERE key LIKE 'restart-%' ORDER BY key")
            return cur.fetchall()

    def test_state_survives_fast_and_immediate_shutdown(self):
        cluster = Cluster.main()
        c = connect()
        for i in range(20):
            key = f"restart-{i:02}"
            for _ in range(i % 4):  # several tenures: terms 1..3
                one(c, "SELECT le_try_acquire(%s, 'a', '1 hour')", (key,))
                one(c, "SELECT le_release(%s, 'a')", (key,))
            one(c, "SELECT le_try_acquire(%s, %s, '1 hour')", (key, f"holder-{i}"))
            if i % 5 == 0:
                one(c, "SELECT le_release(%s, %s)", (key, f"holder-{i}"))
        before = self.snapshot(c)
        c.close()
        for mode in ("fast", "immediate"):
            cluster.restart(mode)
            c = connect()
            self.assertEqual(self.snapshot(c), before, f"after {mode} shutdown")
            c.close()
        c = connect()
        for key, holder, term, *_ in before:
            if holder is None:
                self.assertTrue(one(c, "SELECT le_try_acquire(%s, 'new', '1 hour')", (key,)))
                self.assertEqual(one(c, "SELECT term FROM leaderlock WHERE key = %s", (key,)), term + 1)
            else:
                self.assertEqual(one(c, "SELECT le_leader(%s)", (key,)), holder)
        c.close()


class StandbyTest(unittest.TestCase):
    """On a hot standby the worker writes nothing and waits; after promotion
    it expires the leases that lapsed meanwhile."""

    @promotion_paths
    def test_standby_waits_then_takes_over_after_promotion(self):
        primary = Cluster.main()
        c = connect()
        # The standby first: the 3-second lease must still be live when it
        # arrives there, however long the base backup took.
        # Its connection and its worker too: what the test checks before the
        # primary stops must fit in the lease's 3 seconds on a busy host.
        standby = primary.standby("standby")
        try:
            s = standby.connect()
            self.assertTrue(wait_for(lambda: standby.worker_pid() is not None, timeout=10))
            worker = standby.worker_pid()
            one(c, "SELECT le_try_acquire('standby-k', 'primary-side', '3 seconds')")
            term = one(c, "SELECT term FROM leaderlock WHERE key = 'standby-k'")
            self.assertTrue(wait_for(lambda: one(s, "SELECT le_leader('standby-k')") == "primary-side"))
            self.assertTrue(one(s, "SELECT pg_is_in_recovery()"))
            # Readers work; a call that would write fails as any write does.
            self.assertFalse(one(s, "SELECT le_try_acquire('standby-k', 'intruder', '1 second')"))
            with self.assertRaises(psycopg2.Error) as caught:
                one(s, "SELECT le_try_acquire('standby-new', 'intruder', '1 second')")
            self.assertEqual(caught.exception.pgcode, "25006")
            # The primary goes away before its worker expires the lease.
            primary.stop("immediate")
            try:
                time.sleep(3.5)
                # Lapsed on the standby, but nothing was written there.
                self.assertEqual(row(s, "SELECT holder, state FROM leaderlock_status "
                                        "WHERE key = 'standby-k'"), ("primary-side", "lapsed"))
                self.assertEqual(standby.worker_pid(), worker, "standby worker crash-looped")
                self.assertIn("in recovery; waiting for promotion", standby.log())
                # (LISTEN is not allowed during recovery, so this checks the
                # outcome: the lease is vacant, its term kept. It first lasts
                # another ttl from the promotion: contract 8.2.)
                standby.ctl("promote")
                self.assertTrue(wait_for(lambda: row(s, "SELECT holder, term FROM leaderlock "
                                                        "WHERE key = 'standby-k'") == (None, term),
                                         timeout=10),
                                "promoted standby's worker did not expire the lease")
                self.assertIn("server promoted; expiring leases", standby.log())
                self.assertEqual(standby.worker_pid(), worker, "worker restarted instead of waiting")
                self.assertTrue(one(s, "SELECT le_try_acquire('standby-k', 'new', '1 second')"))
                # Timeline 2: terms start above all of timeline 1's (contract 8.1).
                self.assertEqual(one(s, "SELECT term FROM leaderlock WHERE key = 'standby-k'"), 2 ** 32 + 1)
                s.close()
            finally:
                primary.start()
        finally:
            standby.stop("immediate")
        c.close()


if __name__ == "__main__":
    unittest.main()
