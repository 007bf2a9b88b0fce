"""Fencing across crashes and failover (contract 8), each test on clusters of
its own (made with initdb and pg_basebackup, killed and promoted here), not
on the shared test cluster."""
import os
import random
import signal
import subprocess
import tempfile
import threading
import time
import unittest
from collections import defaultdict
from datetime import datetime, timedelta, timezone

import test_security
from harness import (PG_BIN, WORK, Cluster, as_postgres, connect, give_to_server, numbered, one, promotion_paths,
                     sqlstate, wait_for)
from test_concurrency import STRESS_KEYS, TenureChecks, stress_client

# Terms one timeline can issue: a new timeline's terms start above (contract 8.1).
TERMS_PER_TIMELINE = 2 ** 32


def acquire(conn, key, who, ttl="10 seconds"):
    return one(conn, "SELECT le_try_acquire(%s, %s, %s)", (key, who, ttl))


def past(t):
    """Whether the wall clock (the servers' clock too: same machine) is past t."""
    return datetime.now(timezone.utc) > t


def term_of(conn, key):
    return one(conn, "SELECT term FROM leaderlock WHERE key = %s", (key,))


def try_start(cluster):
    """Starts a cluster whose postmaster was killed; false while its old
    children still hold its shared memory."""
    try:
        cluster.start()
        return True
    except subprocess.CalledProcessError:
        return False


def make_synchronous(primary):
    """Makes the primary's standbys synchronous, and waits until one is. (Set
    after the cluster is made: with it set, the CREATE EXTENSION of
    Cluster.create would wait for a standby that does not exist yet.)"""
    c = primary.connect()
    one(c, "ALTER SYSTEM SET synchronous_standby_names = '*'")
    one(c, "SELECT pg_reload_conf()")
    assert wait_for(lambda: one(c, "SELECT count(*) FROM pg_stat_replication "
                                   "WHERE sync_state = 'sync'") == 1, timeout=30)
    c.close()


class FailoverTest(unittest.TestCase):
    def setUp(self):
        self.clusters = []

    def tearDown(self):
        for c in self.clusters:
            c.remove()

    def own(self, cluster):
        self.clusters.append(cluster)
        return cluster

    def test_promoted_standby_that_was_behind_never_reissues_a_term(self):
        """The scenario: A holds k (term 1) and the standby has it;
        on the primary A releases and B acquires (term 2); the primary dies
        before the standby gets that; the standby is promoted; C acquires."""
        primary = self.own(Cluster.create("behind-primary"))
        standby = self.own(primary.standby("behind-standby"))
        p = primary.connect()
        # (5 s: A releases it on the primary after the standby has it and
        # stops, however slowly a busy host does that)
        self.assertTrue(acquire(p, "k", "A", "5 seconds"))
        self.assertTrue(wait_for(lambda: numbered(p), timeout=10))
        s = standby.connect()
        self.assertTrue(wait_for(lambda: term_of(s, "k") == 1 and one(
            s, "SELECT count(*) FROM leaderlock_history") == 1, timeout=30))
        s.close()
        standby.stop("immediate")  # from here on it receives nothing

        self.assertTrue(one(p, "SELECT le_release('k', 'A')"))
        self.assertTrue(acquire(p, "k", "B"))
        issued = term_of(p, "k")
        self.assertEqual(issued, 2)
        p.close()
        primary.stop("immediate")  # dies; the standby never saw term 2

        standby.start()
        standby.promote()
        s = standby.connect()
        self.assertEqual(term_of(s, "k"), 1, "the standby was not behind")
        # A's lease, as the standby knows it, lasts until promotion + 5 s
        # (contract 8.2); then C wins.
        self.assertTrue(wait_for(lambda: acquire(s, "k", "C"), timeout=15))
        term = term_of(s, "k")
        self.assertGreater(term, issued, "a term the old primary issued was issued again")
        self.assertEqual(term, TERMS_PER_TIMELINE + 1, "the rule of contract 8.1 on timeline 2")
        # The payload and le_assert_leader carry the same term.
        self.assertEqual(one(s, "SELECT le_assert_leader('k', 'C')"), term)
        # A key first used on the new timeline starts at its floor too: the
        # old primary may have used it after the standby's last replay.
        self.assertTrue(acquire(s, "fresh", "D"))
        self.assertEqual(term_of(s, "fresh"), TERMS_PER_TIMELINE + 1)
        # Within a timeline, terms go on growing by one.
        self.assertTrue(one(s, "SELECT le_release('k', 'C')"))
        self.assertTrue(acquire(s, "k", "E"))
        self.assertEqual(term_of(s, "k"), TERMS_PER_TIMELINE + 2)
        # The history (contract 23): the old timeline's rows are kept (the
        # count bound counts rows, not the positions' span, which the new
        # timeline's floor widened by 2^32), and positions go on above them.
        self.assertTrue(wait_for(lambda: numbered(s), timeout=10))
        with s.cursor() as cur:
            cur.execute("SELECT \"position\", event, holder, term FROM le_history(0, for_key => 'k')")
            history = cur.fetchall()
        self.assertEqual(history[0][1:], ("acquired", "A", 1), history)
        self.assertLess(history[0][0], TERMS_PER_TIMELINE)
        self.assertTrue(all(h[0] >= TERMS_PER_TIMELINE for h in history[1:]), history)
        self.assertEqual(history[-1][1:], ("acquired", "E", TERMS_PER_TIMELINE + 2), history)
        s.close()

    @promotion_paths
    def test_an_open_transaction_across_a_promotion_holds_nobody_up(self):
        """The first write on a new timeline makes held leases outlast the
        promotion in a transaction of its own: a caller that made that
        first write and keeps its transaction open holds up no renewal and
        no new tenure. And on the standby, workers run only in databases
        with the extension (parallel queries get their workers), and a CLI
        pointed at it says why it cannot lead there. Traps an ordinary role
        planted before do not run in the step."""
        primary = self.own(Cluster.create("open-primary"))
        p = primary.connect()
        # As many databases without the extension as max_worker_processes
        # (8): had each a worker on the standby, no parallel query could run.
        for i in range(8):
            one(p, f"CREATE DATABASE without_extension_{i}")
        one(p, "CREATE TABLE big AS SELECT i FROM generate_series(1, 200000) i")
        # Traps an ordinary role planted: the failover step must not run them.
        one(p, "CREATE ROLE trapper LOGIN")
        one(p, "GRANT CREATE ON SCHEMA public TO trapper")
        trapper = connect(user="trapper", port=primary.port)
        test_security.plant_traps(trapper, temp_views=False)
        trapper.close()
        # Held well past the standby's making (a base backup of nine
        # databases, slow on a busy host): had the lease lapsed first, the
        # old primary's worker would have ended it, and a promotion revives
        # no ended tenure.
        self.assertTrue(acquire(p, "held", "A", "2 minutes"))
        p.close()
        standby = self.own(primary.standby("open-standby"))
        s = standby.connect()
        self.assertTrue(wait_for(lambda: term_of(s, "held") == 1, timeout=30))
        self.assertEqual(one(s, "SELECT le_leader('held')"), "A", "the lease lapsed before the promotion")
        self.assertTrue(wait_for(lambda: standby.worker_pid("postgres") is not None, timeout=10))
        # (a standby's launcher cannot see which databases have the
        # extension: a worker looks, finds none and leaves, not to come
        # back before the launcher's reprobe; seen running for a moment on 18)
        self.assertTrue(wait_for(lambda: all(standby.worker_pid(f"without_extension_{i}") is None
                                             for i in range(8)), timeout=10))
        for _ in range(20):
            for i in range(8):
                self.assertIsNone(standby.worker_pid(f"without_extension_{i}"))
            time.sleep(0.05)
        one(s, "SET max_parallel_workers_per_gather = 2")
        for setting in ("parallel_setup_cost", "parallel_tuple_cost", "min_parallel_table_scan_size"):
            one(s, f"SET {setting} = 0")
        with s.cursor() as cur:
            cur.execute("EXPLAIN (ANALYZE, COSTS OFF) SELECT count(*) FROM big")
            plan = "\n".join(r[0] for r in cur.fetchall())
        self.assertIn("Workers Launched: 2", plan)
        # A CLI pointed at the standby says why it cannot lead there.
        cli = subprocess.run([os.environ["LEADERLOCK_CLI"], "--dsn",
                              f"host=127.0.0.1 port={standby.port} user=postgres dbname=postgres",
                              "run", "--key", "k", "--timeout", "1s", "--", "true"],
                             capture_output=True, text=True, timeout=30)
        self.assertEqual(cli.returncode, 122, cli.stderr)
        self.assertIn("standby", cli.stderr)
        standby.promote()
        x = standby.connect()
        x.autocommit = False
        # The first write on the new timeline (refused until the step is
        # done, in a transaction that is not the caller's); left open.
        self.assertTrue(wait_for(lambda: acquire(x, "other", "X"), timeout=10))
        a, y = standby.connect(), standby.connect()
        for _ in range(10):
            self.assertTrue(one(a, "SELECT le_renew('held', 'A')"), "a renewal was refused")
            time.sleep(0.2)
        self.assertTrue(acquire(y, "new", "Y"))
        x.commit()
        self.assertGreaterEqual(one(a, "SELECT count(*) FROM leaderlock_failover WHERE timeline = 2"), 1)
        self.assertEqual(one(a, "SELECT count(*) FROM public.ll_trap_hits"), 0)
        self.assertFalse(one(a, "SELECT rolsuper FROM pg_roles WHERE rolname = 'trapper'"))
        for c in (s, x, a, y):
            c.close()

    def test_no_worker_slot_for_the_step_holds_nobody_up(self):
        """When no background worker can be started for the failover step
        (every max_worker_processes slot taken, here by a parallel query
        any role may run), a caller never takes the step in its own
        transaction: its new tenure is refused, a holder's renewals go on
        while that caller's transaction stays open, the log says why, and
        the step is taken as soon as a slot is free."""
        c = self.own(Cluster.create("noslot", "max_worker_processes = 4",
                                    "leaderlock.databases = 'no_such_database'"))
        a = c.connect()
        self.assertTrue(acquire(a, "held", "A", "60 seconds"))
        # As on a new timeline whose step is still to be taken (a promotion
        # is tested above; the slots are what this test is about).
        one(a, "UPDATE leaderlock_failover SET timeline = 0")
        # 100 pages: every parallel worker keeps scanning (and its slot) until cancelled.
        one(a, "CREATE TABLE slow AS SELECT i, repeat('x', 2000) AS pad FROM generate_series(1, 400) i")
        one(a, "ALTER TABLE slow SET (parallel_workers = 4)")
        self.assertTrue(wait_for(lambda: one(a, "SELECT count(*) FROM pg_stat_activity "
                                                "WHERE backend_type = 'leaderlock launcher'") == 1))
        # Our launcher and the logical replication launcher take two slots;
        # a parallel query asking for four workers gets the other two.
        filler = c.connect()
        for setting in ("parallel_setup_cost", "parallel_tuple_cost", "min_parallel_table_scan_size"):
            one(filler, f"SET {setting} = 0")
        one(filler, "SET max_parallel_workers_per_gather = 4")
        filler_pid = one(filler, "SELECT pg_backend_pid()")
        done = threading.Event()

        def fill():
            try:
                one(filler, "SELECT count(*) FROM slow WHERE pg_sleep(0.3) IS NULL")
            except Exception:
                pass  # cancelled below
            done.set()
        threading.Thread(target=fill, daemon=True).start()
        self.assertTrue(wait_for(lambda: one(a, "SELECT count(*) FROM pg_stat_activity "
                                                "WHERE backend_type = 'parallel worker'") > 0))
        x = c.connect()
        x.autocommit = False
        self.assertFalse(acquire(x, "other", "X"), "a tenure started before the step")
        # x's transaction stays open: the holder's renewals are not held up.
        for _ in range(5):
            self.assertTrue(one(a, "SELECT le_renew('held', 'A')"), "a renewal was refused")
            time.sleep(0.1)
        self.assertEqual(one(a, "SELECT timeline FROM leaderlock_failover"), 0)
        self.assertIn("no background worker slot free for the failover step", c.log())
        x.rollback()
        one(a, "SELECT pg_cancel_backend(%s)", (filler_pid,))
        self.assertTrue(done.wait(30))
        y = c.connect()
        self.assertTrue(wait_for(lambda: acquire(y, "new", "Y"), timeout=10))
        self.assertEqual(one(a, "SELECT timeline FROM leaderlock_failover"), 1)
        for conn in (a, filler, x, y):
            conn.close()

    def test_a_holder_refused_before_the_step_waits_for_it(self):
        """Until the failover step is taken, a lease may only look lapsed
        (its stored expiry from the old primary's clock, or from before a
        start on another boot of the host): the step gives it its ttl
        again. Its holder's renewal, release and le_assert_leader then wait
        for the step and succeed. Here the step is still to be taken as
        just after a promotion (the recorded timeline behind), no worker
        serves the database (the lapsed leases stay held), and each call is
        a new session's (a session remembers the step it saw taken)."""
        c = self.own(Cluster.create("pending", "leaderlock.databases = 'no_such_database'"))
        admin = c.connect()
        for key in ("renewed", "released", "asserted"):
            self.assertTrue(acquire(admin, key, "A", "1 second"))
        for key, sql in (("renewed", "SELECT le_renew('renewed', 'A')"),
                         ("released", "SELECT le_release('released', 'A')"),
                         ("asserted", "SELECT le_assert_leader('asserted', 'A') > 0")):
            one(admin, "UPDATE leaderlock_failover SET timeline = 0")
            time.sleep(1.2)  # every lease lapsed by its stored expiry
            self.assertIsNone(one(admin, "SELECT le_leader(%s)", (key,)))
            holder = c.connect()
            self.assertTrue(one(holder, sql), f"{sql} was refused before the step")
            holder.close()
            self.assertEqual(one(admin, "SELECT timeline FROM leaderlock_failover"), 1)
        # (no worker serves the database: only the release vacated its row)
        self.assertEqual(one(admin, "SELECT holder FROM leaderlock WHERE key = 'renewed'"), "A")
        self.assertIsNone(one(admin, "SELECT holder FROM leaderlock WHERE key = 'released'"))
        admin.close()

    def test_several_hosts_and_target_session_attrs(self):
        """The CLI with a primary and its standby in one connection string
        (the standby first), as libpq reads target_session_attrs: any
        settles on the standby (where leading is refused, exit 122), primary
        and read-write on the primary (a command runs), standby and
        prefer-standby on the standby, and with the standby gone, standby
        fails while prefer-standby settles on the primary. PGHOST and
        PGPORT lists do the same."""
        cli = os.environ["LEADERLOCK_CLI"]
        primary = self.own(Cluster.create("attrs-primary"))
        standby = self.own(primary.standby("attrs-standby"))
        hosts = f"host=127.0.0.1,127.0.0.1 port={standby.port},{primary.port} user=postgres dbname=postgres"

        def run(attrs, *args, env=None, dsn=None):
            dsn = dsn if dsn is not None else f"{hosts} target_session_attrs={attrs}"
            return subprocess.run([cli, *(["--dsn", dsn] if dsn else []), *args], capture_output=True,
                                  text=True, timeout=60, env={**os.environ, **(env or {})})

        def lead(attrs, **kw):
            return run(attrs, "run", "--key", f"attrs-{attrs}", "--timeout", "2s", "--", "sh", "-c", "exit 7",
                       **kw)
        self.assertEqual(lead("any").returncode, 122)
        for attrs in ("primary", "read-write"):
            self.assertEqual(lead(attrs).returncode, 7, attrs)
        env = {"PGHOST": "127.0.0.1,127.0.0.1", "PGPORT": f"{standby.port},{primary.port}", "PGUSER": "postgres",
               "PGDATABASE": "postgres", "PGTARGETSESSIONATTRS": "primary"}
        self.assertEqual(lead("env", env=env, dsn="").returncode, 7)
        for attrs in ("standby", "prefer-standby", "read-only", "any"):
            self.assertEqual(run(attrs, "status").returncode, 0, attrs)
        standby.stop()
        self.assertEqual(run("standby", "status").returncode, 122)
        self.assertEqual(run("prefer-standby", "status").returncode, 0)
        self.assertEqual(lead("prefer-standby").returncode, 7)

    def test_an_extension_that_came_by_wal_is_served_after_promotion(self):
        """CREATE EXTENSION on the primary in a database the standby's
        launcher had already found without it: the standby learns of it only
        by WAL (no hook runs there), and once promoted it starts a worker
        there at once, not after the 5-minute look again."""
        # (debug1: the standby's worker logs it found no extension there)
        primary = self.own(Cluster.create("walext-primary", "log_min_messages = debug1"))
        standby = self.own(primary.standby("walext-standby"))
        p = primary.connect()
        one(p, "CREATE DATABASE walext")
        s = standby.connect()
        self.assertTrue(wait_for(lambda: one(s, "SELECT count(*) FROM pg_database WHERE datname = 'walext'") == 1,
                                 timeout=30))
        # The standby's launcher looks there and finds no extension.
        self.assertTrue(wait_for(lambda: 'not installed in database "walext"' in standby.log(), timeout=30))
        pw = primary.connect("walext")
        one(pw, "CREATE EXTENSION leaderlock")
        sw = standby.connect("walext")
        self.assertTrue(wait_for(lambda: one(sw, "SELECT count(*) FROM pg_extension "
                                                 "WHERE extname = 'leaderlock'") == 1, timeout=30))
        self.assertIsNone(standby.worker_pid("walext"))
        standby.promote()
        x = standby.connect("walext")
        self.assertTrue(wait_for(lambda: one(x, "SELECT le_worker_running()"), timeout=10),
                        "no worker in walext after the promotion")
        for c in (p, s, pw, sw, x):
            c.close()

    def test_a_member_revived_by_a_promotion_gets_its_share(self):
        """A promotion gives every session its ttl from the promotion
        (contract 8.2), those of members a step had already given up on
        too: a group whose members had all lapsed (its partitions free, no
        step due) is stepped again, and the revived member, renewing, owns
        its share. (In a database no worker serves, so that nothing ends the
        lapsed session before the standby has the step.)"""
        primary = self.own(Cluster.create("revive-primary", "leaderlock.databases = 'postgres'"))
        p0 = primary.connect()
        one(p0, "CREATE DATABASE noworker")
        p0.close()
        p = primary.connect("noworker")
        one(p, "CREATE EXTENSION leaderlock")
        standby = self.own(primary.standby("revive-standby"))

        def owned(conn, member):
            return one(conn, "SELECT count(*) FROM le_assignment('g', %s) WHERE state = 'owned'", (member,))

        one(p, "SELECT le_join('g', 'm', '2 seconds', 2)::text")
        self.assertEqual(owned(p, "m"), 2)
        time.sleep(2.2)  # m lapses; no worker ends its session
        one(p, "SELECT le_join('g', 'b', '30 seconds')::text")   # steps: m's partitions go to b
        self.assertEqual(owned(p, "b"), 2)
        one(p, "SELECT le_leave('g', 'b')")                        # steps: nobody live is left
        self.assertEqual(one(p, "SELECT count(*) FROM leaderlock_partitions WHERE grp = 'g' "
                                "AND member IS NOT NULL"), 0)
        self.assertEqual(one(p, "SELECT count(*) FROM leaderlock_sessions"), 1, "m's session was ended")
        lsn = one(p, "SELECT pg_current_wal_lsn()::text")
        s = standby.connect("noworker")
        self.assertTrue(wait_for(lambda: one(s, "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (lsn,)),
                                 timeout=30))
        s.close()
        p.close()
        primary.stop("immediate")
        standby.promote()
        x = standby.connect("noworker")
        # the failover step taken (a new tenure waits for it): m's session lives again
        self.assertTrue(wait_for(lambda: one(x, "SELECT le_try_acquire('step', 'x', '1 second')"), timeout=15))

        def renewed_and_owns():
            one(x, "SELECT le_join('g', 'm', '2 seconds')::text")
            return owned(x, "m") == 2
        self.assertTrue(wait_for(renewed_and_owns, timeout=6, interval=0.3),
                        "the revived member owns nothing: nothing stepped the group")
        x.close()

    @promotion_paths
    def test_failover_never_shortens_a_lease(self):
        """Contract 8.2: A renews on the primary; the renewal never reaches
        the standby; the primary dies; by the time the standby is promoted
        A's lease has run out as far as the standby knows, yet A was told it
        leads for longer. Nobody may take the lease before promotion + ttl."""
        primary = self.own(Cluster.create("extend-primary"))
        standby = self.own(primary.standby("extend-standby"))
        p = primary.connect()
        self.assertTrue(acquire(p, "k", "A", "4 seconds"))
        acquired = time.monotonic()
        standby_knows = one(p, "SELECT expires_at FROM leaderlock WHERE key = 'k'")
        s = standby.connect()
        self.assertTrue(wait_for(lambda: term_of(s, "k") == 1, timeout=30))
        s.close()
        standby.stop("immediate")
        # So that A is told of a later expiry than the promotion below: 2 s
        # after the acquisition (not after the stop: the renewal must come
        # within the 4 s).
        time.sleep(max(0.0, acquired + 2 - time.monotonic()))
        self.assertTrue(one(p, "SELECT le_renew('k', 'A')"))
        a_told = one(p, "SELECT expires_at FROM leaderlock WHERE key = 'k'")
        p.close()
        primary.stop("immediate")
        # Promote only once the lease has lapsed by the standby's data.
        while not past(standby_knows):
            time.sleep(0.05)
        standby.start()
        standby.promote()
        s = standby.connect()
        self.assertFalse(acquire(s, "k", "C"), "a lease was taken before promotion + ttl")
        # The worker's step (its own transaction, asked for by that call)
        # makes the lease live again; until then no tenure can start.
        self.assertTrue(wait_for(lambda: one(s, "SELECT le_leader('k')") == "A", timeout=10))
        self.assertFalse(acquire(s, "k", "C"), "a lease was taken before promotion + ttl")
        # It lasts ttl past the moment its timeline was made safe (>= promotion).
        self.assertGreaterEqual(one(s, "SELECT l.expires_at - f.changed_at FROM leaderlock l, "
                                       "leaderlock_failover f WHERE key = 'k'"), timedelta(seconds=4))
        self.assertEqual(one(s, "SELECT timeline FROM leaderlock_failover"), 2)
        # The holder's own renewal goes on working, same term.
        self.assertTrue(one(s, "SELECT le_renew('k', 'A')"))
        self.assertEqual(term_of(s, "k"), 1)
        # Once A stops renewing, C gets it: never before what A was told.
        self.assertTrue(wait_for(lambda: acquire(s, "k", "C"), timeout=15))
        self.assertGreaterEqual(one(s, "SELECT acquired_at FROM leaderlock WHERE key = 'k'"), a_told)
        s.close()

    def test_synchronous_standby_has_every_true_answer(self):
        """Contract 8.3 with synchronous replication: a session with
        synchronous_commit = off is still answered only once its change is
        on the synchronous standby, so a failover loses none."""
        primary = self.own(Cluster.create("syncrep-primary"))
        standby = self.own(primary.standby("syncrep-standby"))
        make_synchronous(primary)
        p = primary.connect()
        one(p, "SET synchronous_commit = off")
        keys = [f"sync-{i}" for i in range(100)]
        for key in keys:
            self.assertTrue(acquire(p, key, "me", "1 hour"))
        p.close()
        primary.stop("immediate")
        standby.promote()
        s = standby.connect()
        self.assertEqual(one(s, "SELECT count(*) FROM leaderlock WHERE holder = 'me'"), len(keys),
                         "the standby lacks acquisitions answered true")
        s.close()

    def test_dump_and_restore_then_the_documented_term_bump(self):
        """A dump cannot know the terms issued after it. Restored as is, the
        database issues them again; after the documented step
        (docs/failure-behaviour.md: raise every term by 2^32) it cannot."""
        c = self.own(Cluster.create("dump"))
        conn = c.connect()
        for db in ("source", "restored_as_is", "restored_and_bumped"):
            one(conn, f"CREATE DATABASE {db}")
        src = c.connect("source")
        one(src, "CREATE EXTENSION leaderlock")
        for who in ("A", "B"):
            self.assertTrue(acquire(src, "k", who))
            self.assertTrue(one(src, "SELECT le_release('k', %s)", (who,)))
        self.assertTrue(wait_for(lambda: numbered(src), timeout=10))
        # A transition not numbered yet at the dump (the numbering held off
        # by the head row's lock): restored, it is numbered before any
        # transition made after the restore (its order of recording, the
        # sequence, is part of the dump too).
        holder = c.connect("source")
        one(holder, "BEGIN")
        one(holder, "SELECT 1 FROM leaderlock_history_head FOR NO KEY UPDATE")
        self.assertTrue(acquire(src, "p", "Z"))
        self.assertEqual(one(src, "SELECT count(*) FROM leaderlock_history_pending"), 1)
        dump = os.path.join(c.pgdata, "source.dump")
        as_postgres(f"{PG_BIN}/pg_dump", "-h", "127.0.0.1", "-p", str(c.port), "-U", "postgres", "-Fc",
                    "-f", dump, "source")
        one(holder, "COMMIT")
        holder.close()
        for who in ("C", "D"):
            self.assertTrue(acquire(src, "k", who))
            self.assertTrue(one(src, "SELECT le_release('k', %s)", (who,)))
        issued = term_of(src, "k")
        # The history's positions (contract 23) have the same hazard: a
        # reader that followed the source past the dump holds `read`.
        self.assertTrue(wait_for(lambda: numbered(src), timeout=10))
        read = one(src, "SELECT le_history_position()")
        self.assertEqual(one(src, "SELECT count(*) FROM le_history(0, 'k')"), 8)
        src.close()
        for db in ("restored_as_is", "restored_and_bumped"):
            as_postgres(f"{PG_BIN}/pg_restore", "-h", "127.0.0.1", "-p", str(c.port), "-U", "postgres",
                        "-d", db, dump)
        as_is = c.connect("restored_as_is")
        self.assertTrue(acquire(as_is, "k", "E"))
        self.assertLessEqual(term_of(as_is, "k"), issued, "the hazard docs/failure-behaviour.md describes")
        self.assertTrue(wait_for(lambda: numbered(as_is), timeout=10))
        self.assertLessEqual(one(as_is, "SELECT le_history_position()"), read, "the same for positions")
        self.assertEqual(one(as_is, "SELECT string_agg(key, ',' ORDER BY position) FROM le_history(4)"), "p,k",
                         "the transition pending at the dump is numbered first")
        self.assertEqual(one(as_is, "SELECT count(*) FROM le_history(%s)", (read,)), 0,
                         "the reader skips E's tenure")
        as_is.close()
        bumped = c.connect("restored_and_bumped")
        # the documented steps
        one(bumped, "UPDATE leaderlock SET term = term + 4294967296")
        one(bumped, "UPDATE leaderlock_history_head SET pruned_through = le_history_position() + 4294967296")
        self.assertTrue(acquire(bumped, "k", "E"))
        self.assertGreater(term_of(bumped, "k"), issued)
        self.assertTrue(wait_for(lambda: numbered(bumped), timeout=10))
        self.assertGreater(one(bumped, "SELECT le_history_position()"), read)
        for after in (0, read):  # a reader from before the dump, one that followed the source past it
            self.assertEqual(sqlstate(bumped, "SELECT count(*) FROM le_history(%s)", (after,)), "LE002")
        self.assertEqual(one(bumped, "SELECT event FROM le_history(le_history_position() - 1)"), "acquired")
        # The restored rows stay until the retention deletes them, the head
        # not going back (the worker prunes: its settings).
        self.assertEqual(one(bumped, "SELECT count(*) FROM leaderlock_history WHERE key = 'k' AND term <= 2"), 4)
        head = one(bumped, "SELECT pruned_through FROM leaderlock_history_head")
        time.sleep(1.1)
        one(bumped, "ALTER SYSTEM SET leaderlock.history_retention = 1")
        one(bumped, "SELECT pg_reload_conf()")
        self.assertTrue(wait_for(lambda: one(bumped, "SELECT le_expire_lapsed() IS NOT NULL AND NOT EXISTS "
                                                     "(SELECT FROM leaderlock_history)"), timeout=10))
        self.assertGreaterEqual(one(bumped, "SELECT pruned_through FROM leaderlock_history_head"), head)
        bumped.close()
        conn.close()

    def test_point_in_time_recovery_never_reissues_a_term(self):
        """PITR to a restore point before the last acquisitions: the
        recovered server must not issue the terms issued after that point."""
        archive = tempfile.mkdtemp(prefix="pitr-archive-", dir=WORK)
        give_to_server(archive)
        self.addCleanup(subprocess.run, ["rm", "-rf", archive])
        primary = self.own(Cluster.create("pitr-primary", "archive_mode = on",
                                          f"archive_command = 'cp %p {archive}/%f'"))
        backup = self.own(primary.base_backup("pitr-restored"))
        p = primary.connect()

        def tenures(*holders):
            for who in holders:
                self.assertTrue(acquire(p, "k", who))
                self.assertTrue(one(p, "SELECT le_release('k', %s)", (who,)))

        tenures("A", "B", "C")
        one(p, "SELECT pg_create_restore_point('before')")
        tenures("D", "E", "F")
        issued = term_of(p, "k")
        self.assertEqual(issued, 6)
        last_wal = one(p, "SELECT pg_walfile_name(pg_switch_wal())")
        self.assertTrue(wait_for(
            lambda: one(p, "SELECT last_archived_wal FROM pg_stat_archiver") == last_wal, timeout=30),
            "WAL not archived")
        p.close()
        primary.stop("immediate")

        with open(os.path.join(backup.pgdata, "postgresql.auto.conf"), "a") as f:
            f.write(f"archive_mode = off\nrestore_command = 'cp {archive}/%f %p'\n"
                    "recovery_target_name = 'before'\nrecovery_target_action = 'promote'\n")
        as_postgres("touch", os.path.join(backup.pgdata, "recovery.signal"))
        backup.start()
        r = backup.connect()
        self.assertTrue(wait_for(lambda: not one(r, "SELECT pg_is_in_recovery()"), timeout=30))
        self.assertEqual(term_of(r, "k"), 3, "not recovered to the restore point")
        # (the first tenure waits for the worker's failover step: a moment)
        self.assertTrue(wait_for(lambda: acquire(r, "k", "G"), timeout=10))
        self.assertGreater(term_of(r, "k"), issued, "a term issued after the restore point was issued again")
        r.close()

    def test_true_survives_a_crash_under_synchronous_commit_off(self):
        """Contract 8.3: acquire, renew and release answered true are on
        disk before the caller hears it, even when the session asked for
        asynchronous commits. The WAL writer is made slow, so only a forced
        flush can save them from an immediate shutdown (no flush at exit)."""
        c = self.own(Cluster.create("durable", "wal_writer_delay = '10s'"))
        conn = c.connect()
        one(conn, "SET synchronous_commit = off")
        keys = [f"durable-{i}" for i in range(200)]
        for key in keys:
            self.assertTrue(acquire(conn, key, "me", "1 hour"))
        self.assertTrue(one(conn, "SELECT le_renew('durable-0', 'me', '2 hours')"))
        renewed_until = one(conn, "SELECT expires_at FROM leaderlock WHERE key = 'durable-0'")
        self.assertTrue(one(conn, "SELECT le_release('durable-1', 'me')"))
        self.assertTrue(acquire(conn, "durable-last", "me", "1 hour"))
        conn.close()
        c.stop("immediate")
        c.start()
        conn = c.connect()
        held = one(conn, "SELECT count(*) FROM leaderlock WHERE holder = 'me' AND term = 1")
        # all but the released one, plus durable-last
        self.assertEqual(held, len(keys) - 1 + 1, "acquisitions answered true were lost")
        self.assertEqual(one(conn, "SELECT expires_at FROM leaderlock WHERE key = 'durable-0'"),
                         renewed_until, "a renewal answered true was lost")
        self.assertIsNone(one(conn, "SELECT holder FROM leaderlock WHERE key = 'durable-1'"),
                          "a release answered true was lost")
        conn.close()


@promotion_paths
class CrashStressTest(TenureChecks, unittest.TestCase):
    """8 clients acquire, renew and release a few keys with asynchronous
    commits while the postmaster is killed with SIGKILL, twice; the server
    restarts and they go on. Every answer a client saw is checked: no term
    issued twice, no two ids holding a key at once."""

    CLIENTS = 8
    SECONDS = float(os.environ.get("LEADERLOCK_CRASH_SECONDS", "12"))
    CRASHES = 2

    def test_no_term_issued_twice_across_postmaster_kills(self):
        c = Cluster.create("crash", "wal_writer_delay = '10s'")
        self.addCleanup(c.remove)
        records, counts = [], defaultdict(int)
        stop_at = time.monotonic() + self.SECONDS
        threads = [threading.Thread(target=stress_client, args=(i, [c.port], stop_at, records, counts))
                   for i in range(self.CLIENTS)]
        for t in threads:
            t.start()
        for n in range(self.CRASHES):
            time.sleep(self.SECONDS / (self.CRASHES + 1))
            os.kill(c.postmaster_pid(), signal.SIGKILL)
            # Its children notice and exit; then it can start again.
            self.assertTrue(wait_for(lambda: try_start(c), timeout=30, interval=0.2))
        for t in threads:
            t.join()
        summary = ", ".join(f"{k}: {v}" for k, v in sorted(counts.items(), key=str))
        print(f"\n  crash stress: {self.CLIENTS} clients, {self.SECONDS:.0f} s, {self.CRASHES} postmaster "
              f"kills, {len(records)} answers seen ({summary})")
        self.assertGreater(counts["errors"], 0, "the kills interrupted nobody")
        for key in STRESS_KEYS:
            self.check_key(key, [r for r in records if r[1] == key], 0, contiguous=False)


@promotion_paths
class ChaosTest(TenureChecks, unittest.TestCase):
    """At least a minute of: 8 clients acquiring, renewing and releasing with
    asynchronous commits on a primary with a synchronous standby; every few
    seconds the primary's postmaster is killed, and either it restarts
    (crash) or the standby is promoted and a new standby made (failover).
    Then every answer the clients saw is checked: no term issued twice, no
    two ids holding a key at once."""

    SECONDS = float(os.environ.get("LEADERLOCK_CHAOS_SECONDS", "60"))
    CONF = ("wal_retrieve_retry_interval = '100ms'", "wal_writer_delay = '10s'")

    def test_stress_crash_or_promote_check(self):
        primary = Cluster.create("chaos-0", *self.CONF)
        standby = primary.standby("chaos-standby-0")
        make_synchronous(primary)  # and so are the primaries after it (the setting is copied)
        clusters = [primary, standby]
        self.addCleanup(lambda: [c.remove() for c in clusters])
        target = [primary.port]  # where the clients connect
        records, counts = [], defaultdict(int)
        stop_at = time.monotonic() + self.SECONDS
        threads = [threading.Thread(target=stress_client, args=(i, target, stop_at, records, counts))
                   for i in range(8)]
        for t in threads:
            t.start()
        rnd = random.Random(7)
        events = []
        # (a crash and a failover at least, however slow the restarts)
        while time.monotonic() < stop_at - 3 or len(events) < 2:
            time.sleep(rnd.uniform(2, 4))
            os.kill(primary.postmaster_pid(), signal.SIGKILL)
            if len(events) % 2 == 0:
                events.append("crash")
                self.assertTrue(wait_for(lambda: try_start(primary), timeout=30, interval=0.2))
            else:
                events.append("failover")
                standby.promote()
                primary.remove()
                clusters.remove(primary)
                primary = standby
                target[0] = primary.port
                standby = primary.standby(f"chaos-standby-{len(events)}")
                clusters.append(standby)
        for t in threads:
            t.join()
        print(f"\n  chaos: {self.SECONDS:.0f} s, {', '.join(events)}; {len(records)} answers seen "
              f"({counts['errors']} errors)")
        self.assertIn("failover", events)
        self.assertIn("crash", events)
        for key in STRESS_KEYS:
            self.check_key(key, [r for r in records if r[1] == key], 0, contiguous=False, failovers=True)


if __name__ == "__main__":
    unittest.main()
