"""A publication of every table (CDC, Debezium, a migration by logical
replication: FOR ALL TABLES publishes the extension's tables too), on a
cluster of its own with wal_level = logical.

- The history's numbering deletes from leaderlock_history_pending, which has
  no primary key: its REPLICA IDENTITY FULL lets a publication of deletes
  take it. Transitions are numbered, the worker stays up (same pid),
  session-bound leases are taken, lapsed leases expire.
- A numbering that fails all the same (here: the table's replica identity
  set back to DEFAULT by a superuser) takes nothing down with it: the
  worker keeps its pid and keeps expiring leases, and logs why once;
  le_expire_lapsed() (where no worker serves) vacates and answers, with a
  WARNING. Once the cause is gone, the waiting transitions are numbered.
"""
import time
import unittest

import psycopg2

from harness import Cluster, one, wait_for


class PublicationTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cluster = Cluster.create("publication", "wal_level = logical", "leaderlock.databases = 'postgres'")
        c = cls.cluster.connect()
        one(c, "CREATE DATABASE lazy")
        c.close()
        lazy = cls.cluster.connect("lazy")
        one(lazy, "CREATE EXTENSION leaderlock")
        one(lazy, "CREATE PUBLICATION everything FOR ALL TABLES")
        lazy.close()

    @classmethod
    def tearDownClass(cls):
        cls.cluster.remove()

    def connect(self, dbname="postgres"):
        c = self.cluster.connect(dbname)
        self.addCleanup(c.close)
        return c

    def pending(self, c):
        return one(c, "SELECT count(*) FROM leaderlock_history_pending")

    def test_a_publication_of_every_table_stops_nothing(self):
        c = self.connect()
        one(c, "CREATE PUBLICATION everything FOR ALL TABLES")
        self.addCleanup(one, self.connect(), "DROP PUBLICATION everything")
        self.assertTrue(wait_for(lambda: self.cluster.worker_pid() is not None, timeout=10))
        worker = self.cluster.worker_pid()
        start = one(c, "SELECT le_history_position()")
        for i in range(5):
            self.assertTrue(one(c, "SELECT le_try_acquire(%s, 'me', '1 minute')", (f"pub-{i}",)))
            self.assertTrue(one(c, "SELECT le_release(%s, 'me')", (f"pub-{i}",)))
        self.assertTrue(wait_for(lambda: self.pending(c) == 0, timeout=5), "never numbered")
        self.assertEqual(one(c, "SELECT count(*) FROM le_history(%s, key_prefix => 'pub-')", (start,)), 10)
        # Session-bound leases need the worker (55000 where none serves).
        s = self.connect()
        self.assertTrue(one(s, "SELECT le_try_acquire('pub-bound', 'me', '1 minute', true)"))
        s.close()
        # The worker expires a lapsed lease.
        self.assertTrue(one(c, "SELECT le_try_acquire('pub-lapse', 'me', '300 milliseconds')"))
        self.assertTrue(wait_for(lambda: one(c, "SELECT holder IS NULL FROM leaderlock WHERE key = 'pub-lapse'"),
                                 timeout=5))
        self.assertTrue(wait_for(lambda: one(c, "SELECT holder IS NULL FROM leaderlock WHERE key = 'pub-bound'"),
                                 timeout=5), "the connection's end did not end its session-bound lease")
        self.assertEqual(self.cluster.worker_pid(), worker, "the worker was restarted")

        # A numbering that fails all the same: the worker and its expiries
        # go on; it says why in the log.
        one(c, "ALTER TABLE leaderlock_history_pending REPLICA IDENTITY DEFAULT")
        try:
            self.assertTrue(one(c, "SELECT le_try_acquire('pub-broken', 'me', '300 milliseconds')"))
            self.assertTrue(wait_for(lambda: "the history was not numbered" in self.cluster.log(), timeout=5),
                            "the failing numbering was not logged")
            self.assertTrue(wait_for(lambda: one(c, "SELECT holder IS NULL FROM leaderlock "
                                                    "WHERE key = 'pub-broken'"), timeout=5),
                            "no expiry while the numbering fails")
            time.sleep(1.5)  # another round or two of failing numberings
            self.assertEqual(self.cluster.worker_pid(), worker, "a failing numbering restarted the worker")
            self.assertGreater(self.pending(c), 0)
        finally:
            one(c, "ALTER TABLE leaderlock_history_pending REPLICA IDENTITY FULL")
        self.assertTrue(wait_for(lambda: self.pending(c) == 0, timeout=5), "not numbered once repaired")
        self.assertEqual(self.cluster.worker_pid(), worker)

    def test_le_expire_lapsed_keeps_its_expiries_when_the_numbering_fails(self):
        """Where no worker serves (database lazy, with a publication of
        every table): le_expire_lapsed numbers; when the numbering fails it
        still vacates and answers, with a WARNING saying why."""
        c = self.connect("lazy")
        self.assertTrue(one(c, "SELECT le_try_acquire('lazy-a', 'me', '1 minute')"))
        self.assertTrue(one(c, "SELECT le_release('lazy-a', 'me')"))
        one(c, "SELECT le_expire_lapsed()")
        self.assertEqual(self.pending(c), 0, "le_expire_lapsed did not number under the publication")
        one(c, "ALTER TABLE leaderlock_history_pending REPLICA IDENTITY DEFAULT")
        try:
            self.assertTrue(one(c, "SELECT le_try_acquire('lazy-b', 'me', '200 milliseconds')"))
            time.sleep(0.3)
            del c.notices[:]
            try:
                vacated = one(c, "SELECT le_expire_lapsed()")
            except psycopg2.Error as e:
                self.fail(f"le_expire_lapsed failed with the numbering: {e}")
            self.assertEqual(vacated, 1)
            self.assertIsNone(one(c, "SELECT holder FROM leaderlock WHERE key = 'lazy-b'"))
            self.assertTrue(any("the history was not numbered" in n for n in c.notices), c.notices)
            self.assertGreater(self.pending(c), 0)
        finally:
            one(c, "ALTER TABLE leaderlock_history_pending REPLICA IDENTITY FULL")
        one(c, "SELECT le_expire_lapsed()")
        self.assertEqual(self.pending(c), 0)


if __name__ == "__main__":
    unittest.main()
