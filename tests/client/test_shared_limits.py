"""Shared resources one role must not take from others (SECURITY.md, third
attack): the candidates' registry, background worker processes, the
worker's time; and the worker's own settings, which a database's owner
must not be able to change.

Each test is one role trying to exhaust or break the resource, on a
cluster of its own (its settings are the test's), and checks that other
roles and databases keep what they had.
"""
import threading
import time
import unittest

import psycopg2
import psycopg2.errors

from harness import PG_MAJOR, Cluster, connect, one, sqlstate, wait_for

ROLE = "ll_limits_rival"
OTHER = "ll_limits_other"


class Waiters:
    """Sessions that wait in le_acquire in threads; closed at the end."""

    def __init__(self, test, port):
        self.test, self.port, self.results = test, port, {}

    def start(self, name, dbname, user, sql, args):
        c = connect(dbname, user=user, port=self.port)
        self.test.addCleanup(c.close)
        pid = one(c, "SELECT pg_backend_pid()")

        def run():
            try:
                self.results[name] = one(c, sql, args)
            except psycopg2.Error as e:
                self.results[name] = e
        threading.Thread(target=run, daemon=True).start()
        admin = connect(dbname, port=self.port)
        try:
            self.test.assertTrue(wait_for(lambda: one(admin, "SELECT wait_event = 'Extension' FROM "
                                                      "pg_stat_activity WHERE pid = %s", (pid,)),
                                          timeout=10))
        finally:
            admin.close()
        return pid


# The same code on every version: tested on 18 only (its bindings differ
# most from 14's; 15 has the most suites), which keeps the test command
# under its hour.
@unittest.skipUnless(PG_MAJOR == "18", "shared limits are tested on PostgreSQL 18")
class SharedLimitsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cluster = Cluster.create("limits", "max_worker_processes = 8",
                                     "leaderlock.max_candidates_per_role = 4",
                                     "leaderlock.max_workers_per_owner = 2")
        cls.admin = cls.cluster.connect()
        for role in (ROLE, OTHER):
            one(cls.admin, f"CREATE ROLE {role} LOGIN CREATEDB")

    @classmethod
    def tearDownClass(cls):
        cls.admin.close()
        cls.cluster.remove()

    def db(self, name, owner="postgres", extension=True):
        one(self.admin, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        one(self.admin, f"CREATE DATABASE {name} OWNER {owner}")
        self.addCleanup(one, self.admin, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        if extension:
            c = connect(name, port=self.cluster.port)
            one(c, "CREATE EXTENSION leaderlock")
            one(c, "GRANT CREATE ON SCHEMA public TO PUBLIC")
            c.close()
        return name

    # --- item 2: the candidates' registry ---

    def test_one_role_lists_at_most_its_share_of_candidates(self):
        """A role that keeps more candidates waiting than its share
        (leaderlock.max_candidates_per_role, 4 here) has only 4 listed; the
        others still wait, unranked. Another role, in another database,
        keeps its priority: its priority-10 candidate is listed and is the
        one a release hands the lease to."""
        a = self.db("ll_limits_a")
        b = self.db("ll_limits_b")
        port = self.cluster.port
        w = Waiters(self, port)
        r = connect(a, user=ROLE, port=port)
        self.addCleanup(r.close)
        for i in range(7):
            one(r, "SELECT le_try_acquire(%s, 'holder', '1 hour')", (f"k{i}",))
        for i in range(7):
            w.start(f"rival{i}", a, ROLE, "SELECT le_acquire(%s, 'rival', '1 hour', '8 seconds')", (f"k{i}",))
        listed = one(r, "SELECT count(*) FROM generate_series(0, 6) i, le_candidates('k' || i)")
        self.assertEqual(listed, 4)
        o = connect(b, user=OTHER, port=port)
        self.addCleanup(o.close)
        self.assertTrue(one(o, "SELECT le_try_acquire('x', 'held', '1 hour')"))
        w.start("low", b, OTHER, "SELECT le_acquire('x', 'low', '1 hour', '8 seconds', priority => 0)", ())
        w.start("high", b, OTHER, "SELECT le_acquire('x', 'high', '1 hour', '8 seconds', priority => 10)", ())
        self.assertEqual(one(o, "SELECT string_agg(id, ',' ORDER BY id) FROM le_candidates('x')"), "high,low")
        self.assertTrue(one(o, "SELECT le_release('x', 'held')"))
        self.assertTrue(wait_for(lambda: "high" in w.results, timeout=10))
        self.assertIs(w.results["high"], True)
        self.assertEqual(one(o, "SELECT holder FROM leaderlock WHERE key = 'x'"), "high")
        # The rival's unlisted candidates still take their keys.
        self.assertTrue(one(r, "SELECT le_release('k6', 'holder')"))
        self.assertTrue(wait_for(lambda: "rival6" in w.results, timeout=10))
        self.assertIs(w.results["rival6"], True)

    def test_entries_a_release_keeps_out_of_use_count_against_the_releasing_role(self):
        """A release hands the lease to another role's waiting candidate, whose
        wait then ends before the release's statement does: that entry stays
        out of use until the statement ends, and it is the releasing role's
        share it takes, not the candidate's."""
        db = self.db("ll_limits_pinned")
        port = self.cluster.port
        w = Waiters(self, port)
        r = connect(db, user=ROLE, port=port)
        self.addCleanup(r.close)
        self.assertTrue(one(r, "SELECT le_try_acquire('handed', 'holder', '1 hour')"))
        for i in range(5):
            one(r, "SELECT le_try_acquire(%s, 'holder', '1 hour')", (f"p{i}",))
        w.start("candidate", db, OTHER, "SELECT le_acquire('handed', 'c', '1 hour', '1 second')", ())
        release = threading.Thread(target=one, args=(r, "SELECT le_release('handed', 'holder'), pg_sleep(4)"))
        release.start()
        self.assertTrue(wait_for(lambda: "candidate" in w.results, timeout=5))
        self.assertIs(w.results["candidate"], False)  # its wait ended before the release's statement
        # Meanwhile: the other role still has its whole share (4), the
        # releasing role one less (3).
        for i in range(4):
            w.start(f"other{i}", db, OTHER, "SELECT le_acquire(%s, 'o', '1 hour', '5 seconds')", (f"p{i}",))
        for i in range(4):
            w.start(f"rival{i}", db, ROLE, "SELECT le_acquire(%s, 'r', '1 hour', '5 seconds')", (f"p{i}",))
        a = self.admin_of(db)
        with a.cursor() as cur:
            cur.execute("SELECT c.id, count(*) FROM generate_series(0, 4) i, le_candidates('p' || i) c "
                        "GROUP BY c.id")
            listed = dict(cur.fetchall())
        self.assertEqual(listed, {"o": 4, "r": 3})
        release.join()

    # --- items 3 and 7: background worker processes ---

    def test_clones_of_a_database_get_at_most_the_owner_s_share_of_workers(self):
        """A role with CREATEDB clones its database with the extension ten
        times: two of its databases are served (max_workers_per_owner), the
        rest keep lazy expiry and refuse session-bound leases with 55000,
        and a superuser's new database still gets its worker."""
        port = self.cluster.port
        self.db("ll_limits_own", owner=ROLE)
        r = connect("postgres", user=ROLE, port=port)
        self.addCleanup(r.close)
        clones = [f"ll_limits_clone{i}" for i in range(10)]
        for name in clones:
            one(r, f"CREATE DATABASE {name} TEMPLATE ll_limits_own")
            self.addCleanup(one, self.admin, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        time.sleep(2)  # the launcher's rounds

        def served():
            return one(self.admin, "SELECT count(*) FROM pg_stat_activity a JOIN pg_database d "
                                   "ON d.oid = a.datid WHERE a.backend_type = 'leaderlock worker' "
                                   "AND d.datdba = %s::regrole", (ROLE,))
        self.assertTrue(wait_for(lambda: served() == 2, timeout=10), served())
        time.sleep(1.5)
        self.assertEqual(served(), 2)
        self.db("ll_limits_admin")
        self.assertTrue(wait_for(lambda: self.cluster.worker_pid("ll_limits_admin") is not None, timeout=10))
        # Parallel queries elsewhere still get their workers.
        with self.cluster.connect() as c:
            for setting in ("max_parallel_workers_per_gather = 2", "parallel_setup_cost = 0",
                            "parallel_tuple_cost = 0", "min_parallel_table_scan_size = 0"):
                one(c, f"SET {setting}")
            one(c, "CREATE TABLE IF NOT EXISTS ll_par AS SELECT generate_series(1, 100000) g")
            with c.cursor() as cur:
                cur.execute("EXPLAIN (ANALYZE, COSTS OFF) SELECT count(*) FROM ll_par")
                plan = "\n".join(r[0] for r in cur.fetchall())
            self.assertIn("Workers Launched: 2", plan)
        unserved = [n for n in clones if self.cluster.worker_pid(n) is None]
        self.assertEqual(len(unserved), 9 if self.cluster.worker_pid("ll_limits_own") else 8)
        u = connect(unserved[-1], user=ROLE, port=port)
        self.addCleanup(u.close)
        self.assertEqual(sqlstate(u, "SELECT le_try_acquire('s', 'me', '1 hour', session_bound => true)"),
                         "55000")
        caps = one(u, "SELECT le_capabilities()")
        self.assertEqual((caps["worker"], caps["session_bound"]), (False, False))
        self.assertTrue(one(u, "SELECT le_try_acquire('s', 'me', '1 hour')"))
        self.assertIn("max_workers_per_owner", self.cluster.log())

    # --- item 8: the worker's settings ---

    def test_a_database_owner_s_defaults_do_not_stop_the_worker(self):
        """The owner of a database sets defaults that would make every
        transaction of its worker read-only, time out or run as her: the
        worker pins its own, so another role's lapsed lease there is still
        vacated and announced."""
        port = self.cluster.port
        own = self.db("ll_limits_defaults", owner=ROLE)
        r = connect(own, user=ROLE, port=port)
        self.addCleanup(r.close)
        for setting in ("default_transaction_read_only = on", "statement_timeout = 1",
                        "lock_timeout = 1", "default_transaction_isolation = 'serializable'",
                        "idle_in_transaction_session_timeout = 1", f"role = {ROLE}"):
            one(r, f"ALTER DATABASE {own} SET {setting}")
        self.assertTrue(wait_for(lambda: self.cluster.worker_pid(own) is not None, timeout=10))
        before = self.cluster.worker_pid(own)
        one(self.admin, "SELECT pg_terminate_backend(%s)", (before,))
        self.assertTrue(wait_for(lambda: self.cluster.worker_pid(own) not in (None, before), timeout=20))
        # Her defaults apply to every session there: another role's own
        # session sets its own.
        o = connect(own, user=OTHER, port=port)
        self.addCleanup(o.close)
        for setting in ("default_transaction_read_only = off", "statement_timeout = 0",
                        "lock_timeout = 0", "idle_in_transaction_session_timeout = 0"):
            one(o, f"SET {setting}")
        self.assertTrue(one(o, "SELECT le_try_acquire('lapses', 'other', '200 milliseconds')"))
        a = self.admin_of(own)
        self.assertTrue(wait_for(lambda: one(a, "SELECT holder IS NULL FROM leaderlock WHERE key = 'lapses'"),
                                 timeout=5))
        self.assertIsNotNone(self.cluster.worker_pid(own))

    def admin_of(self, dbname):
        c = connect(dbname, port=self.cluster.port)
        self.addCleanup(c.close)
        one(c, "SET statement_timeout = 0")
        return c

    # --- item 10: the worker's time ---

    def test_le_expire_lapsed_in_a_loop_does_not_keep_the_worker_busy(self):
        """Four sessions of a role call le_expire_lapsed as fast as they can
        for 3 s: the worker checks at most about ten extra times a second,
        so its CPU time stays small and other roles' leases still expire
        on time."""
        port = self.cluster.port
        db = self.db("ll_limits_busy")
        worker = self.cluster.worker_pid(db)
        self.assertTrue(wait_for(lambda: self.cluster.worker_pid(db) is not None, timeout=10))
        worker = self.cluster.worker_pid(db)

        def cpu_ticks():
            with open(f"/proc/{worker}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return int(fields[11]) + int(fields[12])
        stop = time.monotonic() + 3
        calls = [0]

        def flood():
            c = connect(db, user=ROLE, port=port)
            try:
                while time.monotonic() < stop:
                    one(c, "SELECT le_expire_lapsed()")
                    calls[0] += 1
            finally:
                c.close()
        o = connect(db, user=OTHER, port=port)
        self.addCleanup(o.close)
        ticks, t0 = cpu_ticks(), time.monotonic()
        threads = [threading.Thread(target=flood) for _ in range(4)]
        for t in threads:
            t.start()
        lags = []
        for i in range(5):
            one(o, "SELECT le_try_acquire(%s, 'other', '300 milliseconds')", (f"lag{i}",))
            time.sleep(0.3)
            self.assertTrue(wait_for(lambda: one(o, "SELECT holder IS NULL FROM leaderlock WHERE key = %s",
                                                 (f"lag{i}",)), timeout=5))
            lags.append(one(o, "SELECT extract(epoch FROM changed_at - expires_at) FROM leaderlock "
                               "WHERE key = %s", (f"lag{i}",)))
        for t in threads:
            t.join()
        used = (cpu_ticks() - ticks) / 100 / (time.monotonic() - t0)
        print(f"\n  le_expire_lapsed calls: {calls[0]}, worker CPU {used:.1%}, "
              f"expiry lag max {max(lags) * 1000:.0f} ms", flush=True)
        self.assertGreater(calls[0], 500)
        self.assertLess(used, 0.06)


if __name__ == "__main__":
    unittest.main()
