"""Renewals are HOT updates (no index change), so the table and its indexes
stay small under constant renewal (contract 2; benchmark W3 measures more);
and no change of a lease records a MultiXact, which every later reader of
the row's older versions would have to look up."""
import time
import unittest

from harness import connect, one


class StorageTest(unittest.TestCase):
    def settled_counts(self, at_least=0, timeout=15.0):
        """(n_tup_upd, n_tup_hot_upd) of the table once the statistics hold
        at least `at_least` updates and stop changing. A backend reports its
        counts when it exits (on every version; PostgreSQL 14's collector
        takes them a moment later, 15+ has them in shared memory), so the
        sessions measured are closed first."""
        c = connect()
        try:
            deadline = time.monotonic() + timeout
            last = None
            while True:
                one(c, "SELECT pg_stat_clear_snapshot()")
                now = tuple(map(int, one(c, "SELECT n_tup_upd || ',' || n_tup_hot_upd FROM pg_stat_user_tables "
                                            "WHERE relid = 'leaderlock'::regclass").split(",")))
                if now[0] >= at_least and now == last:
                    return now
                if time.monotonic() > deadline:
                    self.fail(f"statistics never settled at >= {at_least} updates: {now}")
                last = now
                time.sleep(0.3)
        finally:
            c.close()

    def test_renewals_are_hot_updates(self):
        key = "storage-hot"
        upd0, hot0 = self.settled_counts()
        c = connect()
        self.assertTrue(one(c, "SELECT le_try_acquire(%s, 'a', '1 hour')", (key,)))
        for _ in range(100):
            self.assertTrue(one(c, "SELECT le_renew(%s, 'a')", (key,)))
        c.close()
        upd1, hot1 = self.settled_counts(at_least=upd0 + 100)
        c = connect()
        one(c, "SELECT le_release(%s, 'a')", (key,))
        c.close()
        self.assertGreaterEqual(upd1 - upd0, 100)
        # Other updates (the worker's) may interleave; ours are all HOT.
        self.assertGreaterEqual(hot1 - hot0, 100, f"{hot1 - hot0} HOT of {upd1 - upd0} updates")

    def test_lease_changes_record_no_multixact(self):
        """Acquisitions (le_try_acquire, and le_acquire's looks), extensions
        with a value, releases (le_release_all too) and values, for keys of
        one slot and of two: each row is locked and written by one
        transaction id, so the server's next MultiXact id does not move."""
        c = connect()
        try:
            def next_multixact():
                one(c, "CHECKPOINT")
                return int(one(c, "SELECT next_multixact_id::text::bigint FROM pg_control_checkpoint()"))

            before = next_multixact()
            for i in range(3):
                for slots in (1, 2):
                    key = f"storage-multi-{slots}-{i}-{time.time_ns()}"
                    self.assertTrue(one(c, "SELECT le_try_acquire(%s, 'a', '1 hour', slots => %s)", (key, slots)))
                    self.assertTrue(one(c, "SELECT le_try_acquire(%s, 'a', '1 hour', value => '2', slots => %s)",
                                        (key, slots)))
                    self.assertTrue(one(c, "SELECT le_proclaim(%s, 'a', '1')", (key,)))
                    self.assertTrue(one(c, "SELECT le_release(%s, 'a')", (key,)))
                    self.assertTrue(one(c, "SELECT le_acquire(%s, 'b', '1 hour', '1 second', slots => %s)",
                                        (key, slots)))
                    self.assertTrue(one(c, "SELECT le_release(%s, 'b')", (key,)))
                    holder = f"all-{key}"
                    self.assertTrue(one(c, "SELECT le_try_acquire(%s, %s, '1 hour', slots => %s)",
                                        (key, holder, slots)))
                    self.assertEqual(one(c, "SELECT le_release_all(%s)", (holder,)), 1)
            self.assertEqual(next_multixact() - before, 0, "MultiXacts were recorded")
        finally:
            c.close()


if __name__ == "__main__":
    unittest.main()
