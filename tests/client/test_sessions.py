"""Contract 21 with real sessions: a session's keys live as long as it
does, a renewal writes one row however many keys, and its end (closed,
expired, its connection gone) vacates every key in one transaction, each
announced, waking waiters. The chaos test checks the promise that matters
with concurrent processes: a holder that keeps its local deadline (send
time of its last renewal + ttl) never holds a key while another does.

Bounds here are liveness bounds, never timing goals.
"""
import random
import threading
import time
import unittest

import psycopg2

from harness import PORTABLE, Cluster, Listener, connect, one, two_versions, wait_for
from test_acquire import GENEROUS, Waiter, sleeping


def open_session(conn, id_, ttl, **kw):
    args = "".join(f", {k} => %({k})s" for k in kw)
    return one(conn, f"SELECT le_open_session(%(id)s, %(ttl)s{args})::text",
               dict(id=id_, ttl=ttl, **kw))


class SessionsTest(unittest.TestCase):
    def setUp(self):
        self.conn = connect()
        self.prefix = f"ses-{self.id().rsplit('.', 1)[-1]}-{time.time_ns()}-"
        self.closers = []

    def tearDown(self):
        for c in self.closers:
            c.close()
        self.conn.close()

    def acquire_in(self, session, keys, conn=None):
        for k in keys:
            self.assertTrue(one(conn or self.conn, "SELECT le_try_acquire_in(%s, %s)", (session, k)))

    def held(self, keys):
        return one(self.conn, "SELECT count(*) FROM leaderlock_status WHERE key = ANY(%s) "
                              "AND state = 'held'", (keys,))

    def test_a_renewal_writes_the_session_row_alone(self):
        """However many keys: one row of leaderlock_sessions, none of
        leaderlock (counted by the statistics of the renewing transaction)."""
        s = open_session(self.conn, "renewer", "1 minute")
        keys = [self.prefix + str(i) for i in range(200)]
        self.acquire_in(s, keys)
        tx = connect(autocommit=False)
        self.closers.append(tx)
        self.assertIs(one(tx, "SELECT le_renew_session(%s)", (s,)), True)
        written = one(tx, "SELECT ARRAY[pg_stat_get_xact_tuples_updated('leaderlock'::regclass) "
                          "+ pg_stat_get_xact_tuples_inserted('leaderlock'::regclass), "
                          "pg_stat_get_xact_tuples_updated('leaderlock_sessions'::regclass)]")
        tx.commit()
        self.assertEqual(written, [0, 1])
        self.assertEqual(self.held(keys), len(keys))
        self.assertIs(one(self.conn, "SELECT le_close_session(%s)", (s,)), True)
        self.assertEqual(self.held(keys), 0)

    def test_close_announces_each_key_at_commit_and_wakes_each_waiter(self):
        s = open_session(self.conn, "closer", "1 minute")
        keys = [self.prefix + str(i) for i in range(30)]
        self.acquire_in(s, keys)
        waiters = []
        for k in (keys[0], keys[-1]):
            w = Waiter(k, "candidate")
            self.closers.append(w)
            self.assertTrue(wait_for(lambda: sleeping(self.conn, w.pid) or w.returned_at, GENEROUS),
                            "the waiter never slept")
            waiters.append(w)
        listener = Listener()
        self.closers.append(listener)
        tx = connect(autocommit=False)
        self.closers.append(tx)
        self.assertIs(one(tx, "SELECT le_close_session(%s)", (s,)), True)
        time.sleep(0.3)
        self.assertEqual([e for e in listener.until_marker(self.conn) if e["key"] in keys], [])
        self.assertTrue(all(w.returned_at is None for w in waiters))
        tx.commit()
        # The session had a minute left: only its close can have woken them.
        for w in waiters:
            self.assertIs(w.join(), True)
        events = [e for e in listener.until_marker(self.conn) if e["key"] in keys]
        released = {e["key"] for e in events if e["event"] == "released"}
        self.assertEqual(released, set(keys))

    def test_concurrent_renewals_of_a_live_session_are_never_refused(self):
        """The owner's own renewals meet each other on the session's row (a
        key's le_renew renews its session too, le_renew_all too: those two
        never wait, contracts 3.2 and 16, and may skip it): le_renew_session
        waits its turn, and a live session is never answered false, which
        the clients take as lost for good."""
        s = open_session(self.conn, "busy", "30 seconds")
        keys = [self.prefix + str(i) for i in range(3)]
        self.acquire_in(s, keys)
        refused, stop = [], time.monotonic() + 3.0

        def renew(sql, args):
            conn = connect()
            try:
                while time.monotonic() < stop:
                    if one(conn, sql, args) is not True and "le_renew_session" in sql:
                        refused.append(sql)
            finally:
                conn.close()

        threads = [threading.Thread(target=renew, args=a, daemon=True) for a in (
            ("SELECT le_renew_session(%s)", (s,)),
            ("SELECT le_renew_session(%s)", (s,)),
            ("SELECT le_renew(%s, 'busy')", (keys[0],)),
            ("SELECT le_renew_all('busy') = 3", ()),
        )]
        for t in threads:
            t.start()
        for t in threads:
            t.join(GENEROUS)
        self.assertEqual(refused, [])
        self.assertIs(one(self.conn, "SELECT le_close_session(%s)", (s,)), True)

    @unittest.skipIf(PORTABLE, "session-bound leases need the worker")
    def test_a_bound_lease_moved_into_a_session_is_no_longer_bound(self):
        key = self.prefix + "k"
        bound = connect()
        self.assertTrue(one(bound, "SELECT le_try_acquire(%s, 'mover', '1 hour', session_bound => true)",
                            (key,)))
        s = open_session(self.conn, "mover", "1 hour")
        self.acquire_in(s, [key])
        bound.close()
        time.sleep(1.0)  # the worker has ended what the connection bound
        self.assertEqual(self.held([key]), 1)
        self.assertIs(one(self.conn, "SELECT le_close_session(%s)", (s,)), True)

    @unittest.skipIf(PORTABLE, "the worker ends lapsed sessions")
    def test_the_worker_ends_a_lapsed_session_with_every_key(self):
        listener = Listener()
        self.closers.append(listener)
        s = open_session(self.conn, "lapser", "1 second")
        keys = [self.prefix + str(i) for i in range(100)]
        self.acquire_in(s, keys)
        expires_at = one(self.conn, "SELECT extract(epoch FROM expires_at) FROM leaderlock_sessions "
                                    "WHERE session = %s", (s,))
        expired = {}
        deadline = time.monotonic() + GENEROUS
        while len(expired) < len(keys) and time.monotonic() < deadline:
            for e in listener.events(0.5):
                if e.get("event") == "expired" and e["key"] in keys:
                    expired[e["key"]] = e
        self.assertEqual(set(expired), set(keys))
        self.assertEqual({e["reason"] for e in expired.values()}, {"session_expired"})
        self.assertEqual({e["holder"] for e in expired.values()}, {"lapser"})
        # One transaction: one commit, so one sending backend and one instant.
        self.assertEqual(len({e["at"] for e in expired.values()}), 1)
        self.assertEqual(len({e["_pid"] for e in expired.values()}), 1)
        first = min(e["_received"] for e in expired.values())
        self.assertGreaterEqual(first, float(expires_at) - 0.05)
        self.assertEqual(self.held(keys), 0)
        self.assertEqual(one(self.conn, "SELECT count(*) FROM leaderlock_sessions WHERE session = %s",
                             (s,)), 0)

    @unittest.skipIf(PORTABLE, "the worker's rounds")
    def test_sessions_that_cannot_end_keep_no_other_from_ending(self):
        """A thousand lapsed sessions that cannot end (a transaction left
        open acquired under each: their rows stay until it ends) fill the
        worker's batch of sessions every round; another session that lapses
        after them still ends in the next rounds, its key announced."""
        stuck = connect(autocommit=False)
        self.closers.append(stuck)
        names = self.prefix + "stuck-"
        due = time.time() + 8   # (each lapses then, however long the opens take)
        sessions = one(self.conn, "SELECT array_agg(le_open_session(%s || i, make_interval(secs => "
                                  "%s - extract(epoch FROM clock_timestamp())::float8))::text) "
                                  "FROM generate_series(1, 1000) i", (names, due))
        acquired = one(stuck, "SELECT count(*) FILTER (WHERE le_try_acquire_in(s::uuid, %s || s)) "
                              "FROM unnest(%s::text[]) s", (names, sessions))
        self.assertEqual(acquired, 1000)
        listener = Listener()
        self.closers.append(listener)
        self.assertGreater(due, time.time(), "the setup took too long")
        s = open_session(self.conn, "after-them", f"{due + 0.5 - time.time()} seconds")
        key = self.prefix + "victim"
        self.acquire_in(s, [key])

        def ended():
            return one(self.conn, "SELECT count(*) FROM leaderlock_sessions WHERE session = %s", (s,)) == 0
        self.assertTrue(wait_for(ended, timeout=30, interval=0.2),
                        "the session that lapsed after them was never ended")
        self.assertEqual(one(self.conn, "SELECT count(*) FROM leaderlock_sessions WHERE session = "
                                        "ANY(%s::uuid[])", (sessions,)), 1000, "the stuck ones ended")
        expired = [e for e in listener.events(2) if e.get("event") == "expired" and e.get("key") == key]
        self.assertEqual(len(expired), 1)
        stuck.rollback()

    @unittest.skipIf(PORTABLE, "sessions bound to their connection need the worker")
    def test_a_bound_session_ends_with_its_connection(self):
        listener = Listener()
        self.closers.append(listener)
        owner = connect()
        s = open_session(owner, "bound", "1 hour", session_bound=True)
        keys = [self.prefix + str(i) for i in range(5)]
        self.acquire_in(s, keys, conn=owner)
        self.assertEqual(one(self.conn, "SELECT session_pid FROM leaderlock_sessions WHERE session = %s",
                             (s,)), one(owner, "SELECT pg_backend_pid()"))
        owner.close()
        self.assertTrue(wait_for(lambda: self.held(keys) == 0, GENEROUS))
        events = [e for e in listener.until_marker(self.conn) if e["key"] in keys]
        self.assertEqual({e["key"] for e in events if e["event"] == "expired"}, set(keys))
        self.assertEqual({e["reason"] for e in events if e["event"] == "expired"}, {"session_ended"})
        # Terminated by an administrator: the same.
        owner = connect()
        s = open_session(owner, "bound", "1 hour", session_bound=True)
        self.acquire_in(s, keys, conn=owner)
        one(self.conn, "SELECT pg_terminate_backend(%s)", (one(owner, "SELECT pg_backend_pid()"),))
        self.assertTrue(wait_for(lambda: self.held(keys) == 0, GENEROUS))
        self.assertEqual(one(self.conn, "SELECT count(*) FROM leaderlock_sessions WHERE session = %s",
                             (s,)), 0)

    @unittest.skipIf(PORTABLE, "the worker wakes the waiters of a lapsed session's keys")
    def test_a_waiter_gets_the_key_when_the_session_lapses(self):
        s = open_session(self.conn, "lapser", "1 second")
        key = self.prefix + "k"
        self.acquire_in(s, [key])
        w = Waiter(key, "candidate", wait="30 seconds")
        self.closers.append(w)
        self.assertIs(w.join(), True)
        self.assertEqual(one(self.conn, "SELECT holder FROM leaderlock WHERE key = %s", (key,)),
                         "candidate")

    @unittest.skipIf(PORTABLE, "the worker ends lapsed sessions")
    def test_slots_of_a_lapsed_session_are_announced_and_go_to_waiters(self):
        """Keys of many slots under a session (contracts 17 and 21): a
        renewal writes no slot; the worker ends the lapsed session with its
        slots and its keys of one slot in one transaction, each `expired`
        with the key's slots, and a waiter for a full key gets the slot."""
        listener = Listener()
        self.closers.append(listener)
        s = open_session(self.conn, "slotter", "2 seconds")
        pools = [self.prefix + "pool" + str(i) for i in range(20)]
        single = self.prefix + "one"
        for k in pools:
            self.assertIs(one(self.conn, "SELECT le_try_acquire_in(%s, %s, slots => 2)", (s, k)), True)
            self.assertIs(one(self.conn, "SELECT le_try_acquire(%s, 'other', '1 hour', slots => 2)",
                              (k,)), True)
        self.acquire_in(s, [single])
        tx = connect(autocommit=False)
        self.closers.append(tx)
        self.assertIs(one(tx, "SELECT le_renew_session(%s)", (s,)), True)
        written = one(tx, "SELECT pg_stat_get_xact_tuples_updated('leaderlock_slots'::regclass) "
                          "+ pg_stat_get_xact_tuples_updated('leaderlock'::regclass)")
        tx.commit()
        self.assertEqual(written, 0)
        w = Waiter(pools[0], "candidate", wait="30 seconds", slots=2)
        self.closers.append(w)
        self.assertIs(w.join(), True)
        self.assertEqual(one(self.conn, "SELECT array_agg(holder ORDER BY holder) FROM le_holders(%s)",
                             (pools[0],)), ["candidate", "other"])
        keys = set(pools) | {single}
        expired = {}
        deadline = time.monotonic() + GENEROUS
        while set(expired) != keys and time.monotonic() < deadline:
            for e in listener.events(0.5):
                if e.get("event") == "expired" and e["key"] in keys:
                    expired[e["key"]] = e
        self.assertEqual(set(expired), keys)
        self.assertEqual({e["reason"] for e in expired.values()}, {"session_expired"})
        self.assertEqual({e.get("slots") for k, e in expired.items() if k != single}, {2})
        self.assertNotIn("slots", expired[single])
        self.assertEqual(len({e["at"] for e in expired.values()}), 1)
        self.assertEqual(len({e["_pid"] for e in expired.values()}), 1)
        self.assertEqual(one(self.conn, "SELECT count(*) FROM leaderlock_status WHERE key = ANY(%s) "
                                        "AND holder = 'slotter'", (list(keys),)), 0)
        self.assertEqual(one(self.conn, "SELECT count(*) FROM leaderlock_sessions WHERE session = %s",
                             (s,)), 0)

    @unittest.skipIf(PORTABLE, "restarts the cluster the compiled suites run on")
    def test_a_session_and_its_keys_survive_a_restart(self):
        s = open_session(self.conn, "restarted", "30 seconds")
        keys = [self.prefix + str(i) for i in range(3)]
        self.acquire_in(s, keys)
        terms = one(self.conn, "SELECT array_agg(term ORDER BY key) FROM leaderlock WHERE key = ANY(%s)",
                    (keys,))
        self.conn.close()
        Cluster.main().restart()
        self.conn = connect()
        self.assertEqual(self.held(keys), len(keys))
        self.assertIs(one(self.conn, "SELECT le_renew_session(%s)", (s,)), True)
        self.assertEqual(one(self.conn, "SELECT array_agg(term ORDER BY key) FROM leaderlock "
                                        "WHERE key = ANY(%s)", (keys,)), terms)
        self.assertIs(one(self.conn, "SELECT le_close_session(%s)", (s,)), True)

    @two_versions
    def test_holders_that_keep_their_deadline_never_overlap(self):
        """Five processes, each with a session of 0.6 s renewed every 0.15 s,
        compete for eight keys for 8 s, and now and then stop renewing for a
        while (a pause). Each keeps a local deadline: the send time of its
        last successful renewal (or acquisition) + ttl; it counts a key as
        its own from the acquisition's answer to that deadline. No two
        holders' intervals on a key overlap, and keys change hands."""
        keys = [self.prefix + str(i) for i in range(8)]
        ttl = 0.6
        intervals = {k: [] for k in keys}
        lock = threading.Lock()
        stop = time.monotonic() + 8.0
        errors = []

        def replica(n):
            try:
                conn = connect()
                name = f"replica-{n}"
                rng = random.Random(n)
                while time.monotonic() < stop:
                    sent = time.monotonic()
                    s = open_session(conn, name, f"{ttl} seconds")
                    deadline = sent + ttl
                    mine = {}  # key -> start of its interval
                    pause_at = time.monotonic() + rng.uniform(1.0, 3.0)
                    while time.monotonic() < min(stop, pause_at):
                        for k in rng.sample(keys, 3):
                            if k in mine:
                                continue
                            sent = time.monotonic()
                            if one(conn, "SELECT le_try_acquire_in(%s, %s)", (s, k)):
                                if time.monotonic() < deadline:
                                    mine[k] = time.monotonic()
                        time.sleep(0.05)
                        sent = time.monotonic()
                        if one(conn, "SELECT le_renew_session(%s)", (s,)):
                            deadline = sent + ttl
                        else:
                            break
                        time.sleep(0.1)
                    # Paused (or lost it): every key is ours until the deadline at most.
                    with lock:
                        for k, start in mine.items():
                            intervals[k].append((start, deadline, name))
                    time.sleep(max(0.0, deadline - time.monotonic()) + rng.uniform(0.0, 0.5))
                conn.close()
            except (psycopg2.Error, AssertionError) as e:  # pragma: no cover - reported below
                errors.append(repr(e))

        threads = [threading.Thread(target=replica, args=(n,), daemon=True) for n in range(5)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        self.assertEqual(errors, [])
        handovers = 0
        for k, spans in intervals.items():
            spans.sort()
            for (s1, e1, h1), (s2, e2, h2) in zip(spans, spans[1:]):
                self.assertLessEqual(e1, s2, f"{k}: {h1} held it until {e1:.3f}, {h2} from {s2:.3f}")
                handovers += h1 != h2
        self.assertGreater(handovers, 5, intervals)


if __name__ == "__main__":
    unittest.main()
