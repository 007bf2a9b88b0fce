"""The recipe for outgrowing one primary (examples/several_primaries.py):
keys spread over independent primaries by key, each elected on its own
primary only; a move of keys to a new primary never makes two leaders; and
adding a primary moves only the keys it wins. Two databases of the test
cluster stand for two primaries (each has its own lease table, terms and
sessions, as two servers would)."""
import os
import sys
import unittest

from harness import DB, HOST, PORT, client_side, connect, one

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
import several_primaries as sp  # noqa: E402

NAMES = ("ll_primary_a", "ll_primary_b")


def dsn(db):
    return f"host={HOST} port={PORT} user=postgres dbname={db}"


@client_side
class SeveralPrimariesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        admin = connect(DB)
        for db in NAMES:
            one(admin, f"DROP DATABASE IF EXISTS {db}")
            one(admin, f"CREATE DATABASE {db}")
            c = connect(db)
            one(c, "CREATE EXTENSION leaderlock")
            c.close()
        admin.close()

    @classmethod
    def tearDownClass(cls):
        admin = connect(DB)
        for db in NAMES:
            one(admin, f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
        admin.close()

    def holders(self, db):
        c = connect(db)
        try:
            with c.cursor() as cur:
                cur.execute("SELECT key, holder FROM leaderlock_status WHERE state = 'held' AND key LIKE 'shard/%'")
                return dict(cur.fetchall())
        finally:
            c.close()

    def test_each_key_is_elected_on_its_primary_only(self):
        primaries = {"a": dsn(NAMES[0]), "b": dsn(NAMES[1])}
        keys = [f"shard/{n}" for n in range(24)]
        workers = [sp.Worker(f"w{i}", primaries, ttl=30) for i in range(3)]
        try:
            led = {}
            for w in workers:
                for k in keys:
                    if k not in led and w.try_lead(k, primaries) is not None:
                        led[k] = w.me
            self.assertEqual(set(led), set(keys))
            on = {"a": self.holders(NAMES[0]), "b": self.holders(NAMES[1])}
            for k in keys:
                home = sp.primary_for(k, primaries)
                other = "b" if home == "a" else "a"
                self.assertEqual(on[home].get(k), led[k], k)
                self.assertNotIn(k, on[other], k)
            self.assertTrue(on["a"] and on["b"], "every key on one primary")
            # A worker's renewal renews its keys on both primaries.
            self.assertTrue(all(w.renew() and w.alive() for w in workers))
        finally:
            for w in workers:
                w.close()
        self.assertEqual((self.holders(NAMES[0]), self.holders(NAMES[1])), ({}, {}))

    def test_a_move_to_a_new_primary_never_makes_two_leaders(self):
        old = {"a": dsn(NAMES[0])}
        new = {"a": dsn(NAMES[0]), "b": dsn(NAMES[1])}
        key = next(f"shard/{n}" for n in range(1000) if sp.primary_for(f"shard/{n}", new) == "b")
        x = sp.Worker("old-list", old, ttl=30)
        y = sp.Worker("new-list", new, ttl=30)
        try:
            self.assertIsNotNone(x.try_lead(key, old))
            # The client with the new list would elect the key on b alone:
            # during the move it must hold it on a too, which it cannot.
            self.assertIsNone(y.lead_during_move(key, old, new))
            self.assertNotIn(key, self.holders(NAMES[1]))
            x.close()
            x = None
            self.assertIsNotNone(y.lead_during_move(key, old, new))
            self.assertEqual(self.holders(NAMES[0]).get(key), "new-list")
            self.assertEqual(self.holders(NAMES[1]).get(key), "new-list")
        finally:
            for w in (x, y):
                if w is not None:
                    w.close()

    def test_adding_a_primary_moves_only_the_keys_it_wins(self):
        keys = [f"shard/{n}" for n in range(900)]
        two, three = ("a", "b"), ("a", "b", "c")
        moved = [k for k in keys if sp.primary_for(k, two) != sp.primary_for(k, three)]
        self.assertTrue(all(sp.primary_for(k, three) == "c" for k in moved))
        self.assertTrue(0.25 < len(moved) / len(keys) < 0.42, len(moved))
