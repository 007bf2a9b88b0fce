"""Every database (contract 12): a launcher starts a worker per served
database where the extension is installed, on the test cluster switched to
leaderlock.databases = '*' (the default) for these tests and back."""
import os
import signal
import subprocess
import threading
import time
import unittest

from harness import PG_BIN, Cluster, Listener, connect, one, wait_for

GENEROUS = 10.0  # seconds: a bound on behaviour, not a timing goal (see bench/)


def worker_pids(conn):
    """{database: pid} of every leaderlock worker."""
    with conn.cursor() as cur:
        cur.execute("SELECT datname, pid FROM pg_stat_activity WHERE backend_type = 'leaderlock worker'")
        return dict(cur.fetchall())


def serving(name):
    """Whether a worker serves database `name` (le_worker_running() there):
    it has its slot, so a command that needs the database alone can ask it
    to leave. (A worker listed in pg_stat_activity may still be starting.)"""
    conn = connect(name)
    try:
        return one(conn, "SELECT le_worker_running()")
    finally:
        conn.close()


def set_served(conn, databases, alias=None):
    """ALTER SYSTEM leaderlock.databases (None: reset) and the deprecated
    leaderlock.database, then reload."""
    if databases is None:
        one(conn, "ALTER SYSTEM RESET leaderlock.databases")
    else:
        # ALTER SYSTEM takes no parameters: the values are test constants.
        one(conn, f"ALTER SYSTEM SET leaderlock.databases = '{databases}'")
    if alias is None:
        one(conn, "ALTER SYSTEM RESET leaderlock.database")
    else:
        one(conn, f"ALTER SYSTEM SET leaderlock.database = '{alias}'")
    one(conn, "SELECT pg_reload_conf()")


def recreate(conn, name, extension=True):
    one(conn, f'DROP DATABASE IF EXISTS "{name}"')
    one(conn, f'CREATE DATABASE "{name}"')
    if extension:
        c = connect(name)
        one(c, "CREATE EXTENSION leaderlock")
        c.close()


def expired_event(listener, key, timeout=GENEROUS):
    got = listener.events(timeout, until=lambda e: e != "marker" and e["event"] == "expired"
                          and e["key"] == key)
    return got[-1] if got and got[-1] != "marker" and got[-1]["key"] == key else None


class EveryDatabaseTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cluster = Cluster.main()
        cls.admin = connect()
        set_served(cls.admin, "*")

    @classmethod
    def tearDownClass(cls):
        set_served(cls.admin, None)  # back to postgresql.conf: postgres only
        # The other databases' workers leave (the tests after these expect
        # leaderlock_lazy unserved).
        assert wait_for(lambda: set(worker_pids(cls.admin)) == {"postgres"}, timeout=GENEROUS), \
            worker_pids(cls.admin)
        cls.admin.close()

    def setUp(self):
        self.made = []

    def tearDown(self):
        for name in self.made:
            one(self.admin, f'DROP DATABASE IF EXISTS "{name}"')

    def make(self, name, extension=True):
        recreate(self.admin, name, extension)
        self.made.append(name)
        return name

    def test_ten_databases_each_get_a_worker_that_expires_and_announces_there(self):
        names = [f"ll_many_{i}" for i in range(10)]
        started = {}
        for name in names:
            self.make(name, extension=False)
        for name in names:
            c = connect(name)
            one(c, "CREATE EXTENSION leaderlock")
            committed = time.monotonic()
            self.assertTrue(wait_for(lambda: name in worker_pids(self.admin), timeout=GENEROUS),
                            f"no worker for {name}")
            started[name] = time.monotonic() - committed
            # (the process shows before it has claimed the database's slot)
            self.assertTrue(wait_for(lambda: one(c, "SELECT le_worker_running()"), timeout=GENEROUS))
            c.close()
        print(f"\n  worker after CREATE EXTENSION: max {1000 * max(started.values()):.0f} ms "
              f"over {len(names)} databases")
        pids = worker_pids(self.admin)
        self.assertEqual(len({pids[n] for n in names}), len(names), "one worker per database")

        # A lapsing lease in each database is expired and announced there,
        # and only there.
        listeners = {n: Listener(n) for n in names}
        conns = {n: connect(n) for n in names}
        try:
            for n in names:
                self.assertTrue(one(conns[n], "SELECT le_try_acquire('same-key', %s, '300 milliseconds')",
                                    (n,)))
            for n in names:
                event = expired_event(listeners[n], "same-key")
                self.assertIsNotNone(event, f"no expiry announced in {n}")
                self.assertEqual(event["holder"], n)
                self.assertIsNone(one(conns[n], "SELECT holder FROM leaderlock WHERE key = 'same-key'"))
        finally:
            for n in names:
                listeners[n].close()
                conns[n].close()

        # DROP EXTENSION stops that database's worker; the others go on.
        c = connect(names[0])
        one(c, "DROP EXTENSION leaderlock")
        self.assertTrue(wait_for(lambda: names[0] not in worker_pids(self.admin), timeout=GENEROUS))
        self.assertEqual(worker_pids(self.admin).get(names[1]), pids[names[1]])
        one(c, "CREATE EXTENSION leaderlock")
        self.assertTrue(wait_for(lambda: names[0] in worker_pids(self.admin), timeout=GENEROUS))
        c.close()

        # DROP DATABASE succeeds although a worker served it.
        for n in names:
            one(self.admin, f'DROP DATABASE "{n}"')
        self.made = []
        self.assertTrue(wait_for(lambda: not set(names) & set(worker_pids(self.admin)), timeout=GENEROUS))

    def test_create_extension_by_cascade_starts_a_worker(self):
        # An extension that requires leaderlock, created WITH CASCADE: the
        # hook must see leaderlock created as a dependency too.
        probe = "leaderlock_cascade_probe"
        share = subprocess.run([f"{PG_BIN}/pg_config", "--sharedir"], capture_output=True, text=True,
                               check=True).stdout.strip()
        files = {
            f"{share}/extension/{probe}.control":
                "default_version = '1.0'\nrequires = 'leaderlock'\nsuperuser = true\nrelocatable = true\n",
            f"{share}/extension/{probe}--1.0.sql": "-- requires leaderlock; creates nothing itself\n",
        }
        for path, text in files.items():
            with open(path, "w") as f:
                f.write(text)
        try:
            name = self.make("ll_cascade", extension=False)
            # Let the launcher find the database without the extension
            # first (it looks every second): from then on only the hook's
            # call at commit brings a worker before the 5-minute re-probe.
            time.sleep(3)
            self.assertNotIn(name, worker_pids(self.admin))
            c = connect(name)
            one(c, f"CREATE EXTENSION {probe} CASCADE")
            self.assertTrue(wait_for(lambda: name in worker_pids(self.admin), timeout=GENEROUS),
                            "no worker after CREATE EXTENSION ... CASCADE")
            # Listed in pg_stat_activity before it has its slot: wait for it.
            self.assertTrue(wait_for(lambda: one(c, "SELECT le_worker_running()"), timeout=GENEROUS))
            c.close()
        finally:
            for path in files:
                os.remove(path)

    def test_session_bound_lease_in_another_database(self):
        name = self.make("ll_bound")
        self.assertTrue(wait_for(lambda: name in worker_pids(self.admin), timeout=GENEROUS))
        listener = Listener(name)
        try:
            holder = connect(name)
            self.assertTrue(one(holder, "SELECT le_try_acquire('bound', 'h', '1 hour', session_bound => true)"))
            holder.close()
            event = expired_event(listener, "bound")
        finally:
            listener.close()
        self.assertIsNotNone(event, "the session's end was not announced")
        self.assertEqual(event["reason"], "session_ended")

    def test_commands_that_need_the_database_alone_succeed(self):
        # A worker connected to a database would make these fail ("being
        # accessed by other users"); it steps aside, and comes back.
        tpl = self.make("ll_tpl")
        self.assertTrue(wait_for(lambda: serving(tpl), timeout=GENEROUS))
        one(self.admin, 'CREATE DATABASE "ll_copy" TEMPLATE "ll_tpl"')
        self.made.append("ll_copy")
        # The copy has the extension: it gets a worker without CREATE EXTENSION.
        self.assertTrue(wait_for(lambda: serving("ll_copy"), timeout=GENEROUS))
        self.assertTrue(wait_for(lambda: serving(tpl), timeout=GENEROUS))
        one(self.admin, 'ALTER DATABASE "ll_copy" RENAME TO "ll_renamed"')
        self.made.append("ll_renamed")
        self.assertTrue(wait_for(lambda: serving("ll_renamed"), timeout=GENEROUS))
        one(self.admin, 'DROP DATABASE "ll_renamed"')
        self.assertFalse(one(self.admin, "SELECT count(*) FROM pg_database WHERE datname LIKE 'll_renamed'"))
        # TEMPLATE DEFAULT (template1, never served) is left alone.
        one(self.admin, 'CREATE DATABASE "ll_default" TEMPLATE DEFAULT')
        self.made.append("ll_default")

    def test_such_a_command_sends_away_a_worker_still_connecting(self):
        # A copy made from a template has no slot until its first worker
        # has found the extension there: a command that begins while that
        # worker is connecting must still keep it out. The worker is held
        # at its first look (pg_extension locked by a session in the copy)
        # until the command waits for the database to empty. The DROP is
        # the copy's owner's (not a superuser: a share of the marks).
        # The template gets no worker: one starting just as a reload
        # changes leaderlock.databases would serve it until it catches up
        # with the launcher's reloads (a SIGHUP sent before a background
        # worker's handlers are set is lost), a moment the rounds below
        # need not wait out.
        self.addCleanup(set_served, self.admin, "*")  # (whatever fails below)
        set_served(self.admin, "postgres")
        self.assertTrue(wait_for(lambda: set(worker_pids(self.admin)) == {"postgres"}, timeout=GENEROUS))
        tpl = self.make("ll_tpl_held")
        for name in ("ll_copy_held_1", "ll_moved_held", "ll_copy_held_2"):  # (left by an interrupted run)
            one(self.admin, f'DROP DATABASE IF EXISTS "{name}"')
        one(self.admin, "DROP ROLE IF EXISTS ll_held_owner")
        one(self.admin, "CREATE ROLE ll_held_owner LOGIN")
        self.addCleanup(one, self.admin, "DROP ROLE ll_held_owner")  # (after tearDown's drops)
        rounds = (("ll_copy_held_1", 'ALTER DATABASE "ll_copy_held_1" RENAME TO "ll_moved_held"', "ll_moved_held",
                   "postgres"),
                  ("ll_copy_held_2", 'DROP DATABASE "ll_copy_held_2"', None, "ll_held_owner"))
        for copy, command, renamed, user in rounds:
            set_served(self.admin, "postgres")
            self.assertTrue(wait_for(lambda: set(worker_pids(self.admin)) == {"postgres"}, timeout=GENEROUS))
            self.made += [name for name in (copy, renamed) if name]
            one(self.admin, f'CREATE DATABASE "{copy}" TEMPLATE "{tpl}" OWNER "{user}"')
            holder = connect(copy, autocommit=False)
            one(holder, "LOCK TABLE pg_catalog.pg_extension IN ACCESS EXCLUSIVE MODE")
            set_served(self.admin, "*")
            held = wait_for(lambda: one(self.admin, (
                "SELECT count(*) FROM pg_catalog.pg_stat_activity WHERE backend_type = 'leaderlock worker'"
                " AND datname = %s AND wait_event_type = 'Lock'"), (copy,)) == 1, timeout=GENEROUS)
            done = {}

            def run(command=command, user=user):
                try:
                    other = connect(user=user)
                    try:
                        one(other, command)
                    finally:
                        other.close()
                except Exception as e:  # noqa: BLE001 (reported below)
                    done["error"] = e

            thread = threading.Thread(target=run)
            thread.start()
            # Once the command holds the database (after the hook, it waits
            # for the database to empty), the worker goes on: it finds the
            # extension.
            running = wait_for(lambda: "error" in done or one(self.admin, (
                "SELECT count(*) FROM pg_catalog.pg_locks l JOIN pg_catalog.pg_database d ON d.oid = l.objid"
                " WHERE l.locktype = 'object' AND l.classid = 'pg_catalog.pg_database'::pg_catalog.regclass"
                " AND d.datname = %s AND l.mode = 'AccessExclusiveLock' AND l.granted"), (copy,)) == 1,
                timeout=GENEROUS)
            holder.close()
            thread.join()
            self.assertTrue(held, "the worker was not held at its first look")
            self.assertTrue(running, "the command was not seen holding the database")
            self.assertNotIn("error", done, f"{command}: {done.get('error')}")
            if renamed:
                self.assertTrue(wait_for(lambda: serving(renamed), timeout=GENEROUS))
        self.assertFalse(one(self.admin, "SELECT count(*) FROM pg_database WHERE datname = 'll_copy_held_2'"))

    def test_a_role_that_may_not_drop_a_database_cannot_send_its_worker_away(self):
        victim = self.make("ll_victim")
        self.assertTrue(wait_for(lambda: victim in worker_pids(self.admin), timeout=GENEROUS))
        pid = worker_pids(self.admin)[victim]
        one(self.admin, "DROP ROLE IF EXISTS ll_nobody")
        one(self.admin, "CREATE ROLE ll_nobody LOGIN CREATEDB")
        try:
            nobody = connect(user="ll_nobody")
            for sql in (f'DROP DATABASE "{victim}"', f'ALTER DATABASE "{victim}" RENAME TO "ll_stolen"',
                        f'CREATE DATABASE "ll_stolen" TEMPLATE "{victim}"'):
                with self.assertRaises(Exception) as caught:
                    one(nobody, sql)
                self.assertEqual(caught.exception.pgcode, "42501", sql)
            nobody.close()
            time.sleep(1)
            self.assertEqual(worker_pids(self.admin).get(victim), pid, "the worker was sent away")
        finally:
            one(self.admin, "DROP ROLE ll_nobody")

    def test_templates_are_not_served(self):
        # A connection to a template would make CREATE DATABASE from it fail.
        name = self.make("ll_is_template")
        self.assertTrue(wait_for(lambda: name in worker_pids(self.admin), timeout=GENEROUS))
        one(self.admin, f'ALTER DATABASE "{name}" IS_TEMPLATE true')
        try:
            self.assertTrue(wait_for(lambda: name not in worker_pids(self.admin), timeout=GENEROUS))
            one(self.admin, 'CREATE DATABASE "ll_from_template" TEMPLATE "ll_is_template"')
            self.made.append("ll_from_template")
            self.assertTrue(wait_for(lambda: "ll_from_template" in worker_pids(self.admin), timeout=GENEROUS))
        finally:
            one(self.admin, f'ALTER DATABASE "{name}" IS_TEMPLATE false')

    def test_a_list_of_databases(self):
        a, b = self.make("ll_list_a"), self.make("ll_list_b")
        c = self.make("ll_list_c", extension=False)
        self.assertTrue(wait_for(lambda: {a, b} <= set(worker_pids(self.admin)), timeout=GENEROUS))
        # (a launcher round or two: c, served by '*' and found without the
        # extension, is not named yet, so nothing was said of it)
        time.sleep(2.5)
        log_before = len(self.cluster.log())
        try:
            set_served(self.admin, f'postgres, {a}, "{c}"')
            # b is no longer listed: its worker leaves; a's stays.
            self.assertTrue(wait_for(lambda: b not in worker_pids(self.admin), timeout=GENEROUS))
            self.assertIn(a, worker_pids(self.admin))
            # c is named but has no extension: said once, no crash loop.
            needle = f'is not installed in database "{c}", which leaderlock.databases names'
            self.assertTrue(wait_for(lambda: needle in self.cluster.log()[log_before:], timeout=GENEROUS))
            time.sleep(2)
            self.assertEqual(self.cluster.log()[log_before:].count(needle), 1)
            # ... until CREATE EXTENSION there.
            conn = connect(c)
            one(conn, "CREATE EXTENSION leaderlock")
            conn.close()
            self.assertTrue(wait_for(lambda: c in worker_pids(self.admin), timeout=GENEROUS))
            # Session-bound leases are refused where no worker serves.
            conn = connect(b)
            with self.assertRaises(Exception) as caught:
                one(conn, "SELECT le_try_acquire('k', 'x', '1 hour', session_bound => true)")
            self.assertEqual(caught.exception.pgcode, "55000")
            conn.close()
        finally:
            set_served(self.admin, "*")
        self.assertTrue(wait_for(lambda: b in worker_pids(self.admin), timeout=GENEROUS))

    def test_deprecated_single_database_setting(self):
        alias = self.make("ll_alias")
        try:
            set_served(self.admin, "*", alias="ll_alias")
            self.assertTrue(wait_for(lambda: set(worker_pids(self.admin)) == {alias}, timeout=GENEROUS),
                            worker_pids(self.admin))
        finally:
            set_served(self.admin, "*")
        self.assertTrue(wait_for(lambda: "postgres" in worker_pids(self.admin), timeout=GENEROUS))

    def test_a_worker_that_missed_a_reload_reads_it_after_the_launcher(self):
        """A SIGHUP that comes before a worker sets its handlers is dropped
        (PostgreSQL ignores it until then): the worker reads the settings
        again once the launcher has read them. Here the launcher alone gets
        the reload's SIGHUP, after ALTER SYSTEM: the worker of a database
        the setting no longer names leaves all the same."""
        name = self.make("ll_missed_reload")
        self.assertTrue(wait_for(lambda: serving(name), timeout=GENEROUS))
        launcher = one(self.admin, "SELECT pid FROM pg_stat_activity WHERE backend_type = 'leaderlock launcher'")
        log_before = len(self.cluster.log())
        try:
            one(self.admin, "ALTER SYSTEM SET leaderlock.databases = 'postgres'")
            os.kill(launcher, signal.SIGHUP)
            self.assertTrue(wait_for(lambda: name not in worker_pids(self.admin), timeout=GENEROUS),
                            worker_pids(self.admin))
            self.assertIn(f'leaderlock worker for database "{name}": no longer included',
                          self.cluster.log()[log_before:])
            self.assertIn("postgres", worker_pids(self.admin))
        finally:
            set_served(self.admin, "*")

    def test_terminated_worker_of_another_database_is_restarted(self):
        name = self.make("ll_restart")
        self.assertTrue(wait_for(lambda: name in worker_pids(self.admin), timeout=GENEROUS))
        old = worker_pids(self.admin)[name]
        self.assertTrue(one(self.admin, "SELECT pg_terminate_backend(%s)", (old,)))
        self.assertTrue(wait_for(lambda: worker_pids(self.admin).get(name) not in (None, old),
                                 timeout=GENEROUS))


class OutOfSlotsTest(unittest.TestCase):
    def test_too_few_worker_processes_is_said_clearly(self):
        # Three background worker processes: the launcher, PostgreSQL's
        # logical replication launcher, and one worker (for postgres).
        cluster = Cluster.create("slots", "max_worker_processes = 3")
        try:
            admin = cluster.connect()
            # postgres first (a database's worker starts 500 ms at the
            # soonest after the last one the launcher started there).
            self.assertTrue(wait_for(lambda: set(worker_pids(admin)) == {"postgres"}, timeout=GENEROUS))
            one(admin, "CREATE DATABASE ll_no_slot")
            c = cluster.connect("ll_no_slot")
            one(c, "CREATE EXTENSION leaderlock")
            c.close()
            needle = 'no background worker slot free to serve database "ll_no_slot" (max_worker_processes = 3)'
            self.assertTrue(wait_for(lambda: needle in cluster.log(), timeout=GENEROUS), cluster.log()[-3000:])
            self.assertEqual(set(worker_pids(admin)), {"postgres"})
            # A slot freed (postgres's worker leaves with its extension): served.
            one(admin, "DROP EXTENSION leaderlock")
            self.assertTrue(wait_for(lambda: set(worker_pids(admin)) == {"ll_no_slot"}, timeout=GENEROUS))
            admin.close()
        finally:
            cluster.remove()


if __name__ == "__main__":
    unittest.main()
