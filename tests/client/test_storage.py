"""Renewals are HOT updates (no index change), so the table and its indexes
stay small under constant renewal (contract 2; benchmark W3 measures more)."""
import unittest

from harness import connect, one


class StorageTest(unittest.TestCase):
    def stats(self, c):
        one(c, "SELECT pg_stat_force_next_flush()")
        return one(c, "SELECT n_tup_upd || ',' || n_tup_hot_upd FROM pg_stat_user_tables "
                      "WHERE relid = 'leaderlock'::regclass")

    def test_renewals_are_hot_updates(self):
        c = connect()
        key = "storage-hot"
        self.assertTrue(one(c, "SELECT le_try_acquire(%s, 'a', '1 hour')", (key,)))
        upd0, hot0 = map(int, self.stats(c).split(","))
        for _ in range(100):
            self.assertTrue(one(c, "SELECT le_renew(%s, 'a')", (key,)))
        upd1, hot1 = map(int, self.stats(c).split(","))
        one(c, "SELECT le_release(%s, 'a')", (key,))
        c.close()
        self.assertGreaterEqual(upd1 - upd0, 100)
        # Other tests' updates may interleave; ours are all HOT.
        self.assertGreaterEqual(hot1 - hot0, 100, f"{hot1 - hot0} HOT of {upd1 - upd0} updates")


if __name__ == "__main__":
    unittest.main()
