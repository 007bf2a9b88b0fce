"""Contract 16 with real sessions: le_renew_all and le_release_all for a
holder of many keys (a sharded worker), against LISTENing clients, waiting
candidates and rivals trying all the while.

Bounds here are liveness bounds, never timing goals: bench/renew_all.sh
measures the cost.
"""
import random
import threading
import time
import unittest

from harness import Listener, connect, one, wait_for
from test_acquire import GENEROUS, Waiter, sleeping

NASTY_KEY = 'shard "7" \\ é 雪 🦀 \t\n {"json": true}'


class ManyKeysTest(unittest.TestCase):
    def setUp(self):
        self.conn = connect()
        self.prefix = f"many-{self.id().rsplit('.', 1)[-1]}-{time.time_ns()}-"
        self.closers = []

    def tearDown(self):
        for c in self.closers:
            c.close()
        self.conn.close()

    def acquire_all(self, keys, holder, ttl):
        for k in keys:
            self.assertTrue(one(self.conn, "SELECT le_try_acquire(%s, %s, %s)", (k, holder, ttl)))

    def test_release_all_announces_each_at_commit_and_wakes_each_waiter(self):
        keys = [self.prefix + str(i) for i in range(40)] + [self.prefix + NASTY_KEY]
        self.acquire_all(keys, "sharder", "1 minute")
        terms = dict(zip(keys, (one(self.conn, "SELECT term FROM leaderlock WHERE key = %s", (k,))
                                for k in keys)))
        waiters = []
        for k in (keys[0], keys[17], keys[-1]):
            w = Waiter(k, "candidate")
            self.closers.append(w)
            self.assertTrue(wait_for(lambda: sleeping(self.conn, w.pid) or w.returned_at, GENEROUS),
                            "the waiter never slept")
            waiters.append(w)
        listener = Listener()
        self.closers.append(listener)
        holder = connect(autocommit=False)
        self.closers.append(holder)
        self.assertEqual(one(holder, "SELECT le_release_all('sharder')"), len(keys))
        time.sleep(0.3)
        # Not committed: nothing announced, nobody woken.
        self.assertEqual([e for e in listener.until_marker(self.conn) if e["key"] in terms], [])
        self.assertTrue(all(w.returned_at is None for w in waiters))
        holder.commit()
        # Each waiter gets its key: the lease had a minute left, so only the
        # release can have woken it.
        for w in waiters:
            self.assertIs(w.join(), True)
        events = [e for e in listener.until_marker(self.conn) if e["key"] in terms]
        released = {e["key"]: e for e in events if e["event"] == "released"}
        self.assertEqual(set(released), set(keys))
        for k, e in released.items():
            self.assertEqual((e["holder"], e["term"], e["forced"]), ("sharder", terms[k], False))
        acquired = sorted(e["key"] for e in events if e["event"] == "acquired")
        self.assertEqual(acquired, sorted(w_key for w_key in (keys[0], keys[17], keys[-1])))
        self.assertEqual(one(self.conn, "SELECT count(*) FROM leaderlock WHERE key LIKE %s "
                                        "AND holder IS NULL", (self.prefix + "%",)), len(keys) - 3)

    def test_renew_all_keeps_a_holder_of_many_keys_while_rivals_try(self):
        """Rivals that try every key all the time never take one, and never
        make the holder's one-statement renewal skip a row (they do not lock
        it): every le_renew_all renews every key, terms unchanged. (ttl 3 s,
        renewed every 0.4 s for 6 s: a holder that stopped renewing would
        lose its keys within the run.)"""
        keys = [self.prefix + str(i) for i in range(300)]
        self.acquire_all(keys, "sharder", "3 seconds")
        acquired = time.monotonic()
        terms = "SELECT sum(term) FROM leaderlock WHERE key LIKE %s AND holder = 'sharder'"
        terms_before = one(self.conn, terms, (self.prefix + "%",))
        stop = threading.Event()
        taken, errors, tries = [], [], [0]

        def rival(n):
            conn = connect()
            try:
                rng = random.Random(n)
                while not stop.is_set():
                    k = rng.choice(keys)
                    if one(conn, "SELECT le_try_acquire(%s, %s, '3 seconds')", (k, f"rival-{n}")):
                        taken.append(k)
                    tries[0] += 1
            except Exception as e:  # noqa: BLE001 - reported by the test
                errors.append(e)
            finally:
                conn.close()

        threads = [threading.Thread(target=rival, args=(n,), daemon=True) for n in range(3)]
        for t in threads:
            t.start()
        counts, renewed = [], [acquired]
        try:
            deadline = time.monotonic() + 6.0
            while time.monotonic() < deadline:
                counts.append(one(self.conn, "SELECT le_renew_all('sharder')"))
                renewed.append(time.monotonic())
                time.sleep(0.4)
        finally:
            stop.set()
            for t in threads:
                t.join(GENEROUS)
        self.assertEqual(errors, [])
        self.assertGreater(tries[0], 100, "the rivals hardly tried")
        # (A machine that stalls the holder for the whole ttl would lapse
        # its leases: the longest gap between renewals says so.)
        gap = max(b - a for a, b in zip(renewed, renewed[1:]))
        self.assertEqual((len(taken), counts), (0, [len(keys)] * len(counts)),
                         f"longest gap between renewals {gap:.2f} s; taken: {sorted(set(taken))[:5]}")
        self.assertEqual(one(self.conn, "SELECT count(*) FROM leaderlock WHERE key LIKE %s "
                                        "AND holder = 'sharder' AND expires_at > le_now()",
                             (self.prefix + "%",)), len(keys))
        self.assertEqual(one(self.conn, terms, (self.prefix + "%",)), terms_before)
        self.assertEqual(one(self.conn, "SELECT le_release_all('sharder')"), len(keys))


if __name__ == "__main__":
    unittest.main()
