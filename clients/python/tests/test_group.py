"""Groups (contract 26, docs/groups.md) in the Python client, against a
real server (LEADERLOCK_DSN, a superuser's; the compiled edition):

- two members share 6 partitions 3 and 3: the second gets its share once
  the first has drained what was revoked (on_revoked before the grant)
  and given it back, each in a higher term; a partition is never in both
  members' hands at once, by their own callbacks' record;
- `owns` answers None past the local deadline, whatever the thread did:
  a member whose renewals stop (its thread held) owns nothing once its
  ttl has passed since its last join was sent;
- leaving hands every partition to on_revoked, and the other member gets
  them at once;
- the guard fences a write with the partition's term (LE001 for a
  partition that is not ours);
- bad input is BadArgument.
"""
import threading
import time
import unittest
import uuid

import psycopg

import leaderlock

from support import DSN, sql, wait


def edition():
    return sql("SELECT le_capabilities()->>'groups'")


@unittest.skipIf(edition() != "true", "groups (contract 26) are the compiled edition's")
class GroupTest(unittest.TestCase):
    def setUp(self):
        self.group = f"pyg-{self.id().rsplit('.', 1)[-1]}-{uuid.uuid4().hex[:8]}"
        self.record = []          # (monotonic, member, event, partition)
        self.hands = {}           # partition -> member holding it by the callbacks
        self.overlaps = []
        self.lock = threading.Lock()

    def callbacks(self, me):
        def assigned(partition, term):
            with self.lock:
                if self.hands.get(partition) not in (None, me):
                    self.overlaps.append((partition, self.hands[partition], me))
                self.hands[partition] = me
                self.record.append((time.monotonic(), me, "assigned", partition, term))

        def revoked(partition):
            with self.lock:
                if self.hands.get(partition) == me:
                    del self.hands[partition]
                self.record.append((time.monotonic(), me, "revoked", partition, None))
        return dict(on_assigned=assigned, on_revoked=revoked)

    def test_two_members_share_and_hand_over_without_overlap(self):
        with leaderlock.member(DSN, self.group, "a", ttl=1.5, partitions=6, drain=0.5,
                               **self.callbacks("a")) as a:
            self.assertEqual(sorted(a.owned()), [1, 2, 3, 4, 5, 6])
            self.assertEqual(set(a.owned().values()), {1})
            with leaderlock.member(DSN, self.group, "b", ttl=1.5, **self.callbacks("b")) as b:
                self.assertTrue(wait(lambda: len(b.owned()) == 3 and len(a.owned()) == 3, timeout=10),
                                (a.owned(), b.owned()))
                self.assertEqual(set(a.owned()) & set(b.owned()), set())
                self.assertEqual(set(b.owned().values()), {2})
                with psycopg.connect(DSN) as conn:
                    mine = sorted(b.owned())[0]
                    with conn.transaction():
                        self.assertEqual(b.guard(conn, mine), 2)
                    with self.assertRaises(leaderlock.LeaderlockError):
                        a.guard(conn, mine)
                    # the server refuses a stale term too
                    with self.assertRaises(psycopg.Error) as refused:
                        with conn.transaction():
                            conn.execute("SELECT le_assert_partition(%s, %s, 'a', 1)", (self.group, mine))
                    self.assertEqual(refused.exception.sqlstate, "LE001")
            # b left: a owns everything again, at once
            self.assertTrue(wait(lambda: len(a.owned()) == 6, timeout=5), a.owned())
        self.assertEqual(self.overlaps, [])
        self.assertEqual(self.hands, {})

    def test_a_newcomer_gets_its_share_on_the_hint_not_a_round_later(self):
        """Rounds every 2 s (ttl 6 s): the owner hears the revocation and
        the newcomer the grant, each reading its assignment at once (at
        most one round per ttl/30 sooner), well within a round period."""
        with leaderlock.member(DSN, self.group, "a", ttl=6.0, partitions=4, **self.callbacks("a")) as a:
            deadline = time.monotonic() + 5
            while len(a.owned()) < 4 and time.monotonic() < deadline:
                time.sleep(0.02)
            joined = time.monotonic()
            with leaderlock.member(DSN, self.group, "b", ttl=6.0, **self.callbacks("b")) as b:
                while len(b.owned()) < 2 and time.monotonic() < joined + 5:
                    time.sleep(0.01)
                took = time.monotonic() - joined
                self.assertEqual(len(b.owned()), 2, b.owned())
                self.assertLess(took, 1.5, f"the newcomer owned its share {took:.2f} s after joining")
        self.assertEqual(self.overlaps, [])

    def test_owns_nothing_past_the_local_deadline(self):
        m = leaderlock.Member(DSN, self.group, "slow", ttl=1.0, partitions=2)
        m._round()   # one join, as start() makes, and no thread renewing after it
        try:
            self.assertEqual(sorted(m.owned()), [1, 2])
            self.assertIsNotNone(m.owns(1))
            time.sleep(1.1)
            self.assertIsNone(m.owns(1))
            self.assertEqual(m.owned(), {})
        finally:
            m.close()

    def test_bad_input(self):
        for kw in (dict(group=""), dict(group=None), dict(member=""), dict(partitions="3")):
            args = dict(dsn=DSN, group=self.group, member="m", ttl=1.0)
            args.update(kw)
            with self.assertRaises(leaderlock.BadArgument):
                leaderlock.Member(**args).start()
        with self.assertRaises(leaderlock.BadArgument):
            leaderlock.Member(DSN, self.group, "m", ttl=1.0, partitions=0).start()
        self.assertEqual(sql("SELECT count(*) FROM leaderlock_groups WHERE grp = %s", (self.group,)), 0)


if __name__ == "__main__":
    unittest.main()
