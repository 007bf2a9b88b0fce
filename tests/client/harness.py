"""Helpers for the client tests: connections to the test cluster, LISTEN,
and control of the cluster itself (restart, terminate the worker).

The test command (scripts/test.sh) starts a cluster and passes it here via
LEADERLOCK_PORT, LEADERLOCK_PGDATA and LEADERLOCK_DB.
"""
import json
import os
import select
import subprocess
import sys
import time
import unittest
from datetime import datetime, timezone

import psycopg2
import psycopg2.extensions

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from free_port import free_port  # noqa: E402,F401 (for the tests; never an ephemeral port: it says why)

HOST = "127.0.0.1"
PORT = int(os.environ.get("LEADERLOCK_PORT", "55432"))
PGDATA = os.environ.get("LEADERLOCK_PGDATA", "")
DB = os.environ.get("LEADERLOCK_DB", "postgres")
# A database with the extension that the worker does not serve: expiry is lazy there.
LAZY_DB = os.environ.get("LEADERLOCK_LAZY_DB", "leaderlock_lazy")
# Which edition DB and LAZY_DB have: "compiled", or "portable" when
# tests/portable/run.sh runs these tests against portable/leaderlock.sql
# (tests/portable/README.md lists what it skips, and why).
PORTABLE = os.environ.get("LEADERLOCK_EDITION", "compiled") == "portable"
PG_BIN = os.environ.get("PG_BIN", "/usr/lib/postgresql/15/bin")
PG_MAJOR = os.environ.get("PG_MAJOR", "15")
# The command-line tool, the demo and the examples are clients: they do not
# depend on the server's version, so scripts/test.sh runs their tests on 15
# only, with the client libraries' (LEADERLOCK_CLIENT_SIDE=0 on the others),
# which keeps the test command under its hour.
CLIENT_SIDE = os.environ.get("LEADERLOCK_CLIENT_SIDE", "1") != "0"
client_side = unittest.skipUnless(CLIENT_SIDE, "client-side tests run on PostgreSQL 15 (scripts/test.sh)")
# The code that takes over after a promotion or a crash has two paths, 14's
# (ThisTimeLineID) and 15's and later's (GetWALInsertionTimeLine): the
# longest of those tests run on 14, 15 and 18 (both paths and the newest
# server); 16 and 17 run the shorter ones, which take the same paths.
promotion_paths = unittest.skipUnless(PG_MAJOR in ("14", "15", "18"),
                                      "long promotion and crash tests run on PostgreSQL 14, 15 and 18")
# Tests of the extension's SQL alone (no code differs by server version)
# whose chaos runs long: on 15 and 18.
two_versions = unittest.skipUnless(PG_MAJOR in ("15", "18"),
                                   "long chaos of version-independent SQL runs on PostgreSQL 15 and 18")
LIB_SH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "lib.sh")
CHANNEL = "leaderlock"


def connect(dbname=DB, user="postgres", port=PORT, autocommit=True):
    conn = psycopg2.connect(host=HOST, port=port, user=user, dbname=dbname)
    conn.autocommit = autocommit
    return conn


def one(conn, sql, args=()):
    """The first column of the first row, or None when there is no row."""
    with conn.cursor() as cur:
        cur.execute(sql, args)
        first = cur.fetchone() if cur.description else None
        return first[0] if first else None


def numbered(conn):
    """Whether every transition recorded in `conn`'s database has its
    history position (contract 23), after asking for the numbering: where
    no worker serves, le_expire_lapsed numbers; where one does, it wakes it."""
    one(conn, "SELECT le_expire_lapsed()")
    return one(conn, "SELECT count(*) = 0 FROM leaderlock_history_pending")


def sqlstate(conn, sql, args=()):
    """The SQLSTATE `sql` fails with (None when it succeeds)."""
    try:
        one(conn, sql, args)
        return None
    except psycopg2.Error as e:
        return e.pgcode


def row(conn, sql, args=()):
    with conn.cursor() as cur:
        cur.execute(sql, args)
        return cur.fetchone()


def parse_time(text):
    """An RFC 3339 UTC timestamp as sent in payloads, to a datetime."""
    assert text.endswith("Z"), text
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)


class Listener:
    """A connection LISTENing on the leaderlock channel."""

    def __init__(self, dbname=DB, port=PORT):
        self.conn = connect(dbname, port=port)
        with self.conn.cursor() as cur:
            cur.execute("LISTEN " + CHANNEL)

    def events(self, timeout=2.0, until=None):
        """Payloads (parsed) received within `timeout` seconds, stopping
        early once one satisfies `until`. Each JSON payload gets the
        client's receipt time as `_received` (epoch seconds) and the
        sending backend's pid as `_pid`."""
        got = []
        deadline = time.monotonic() + timeout
        while True:
            self.conn.poll()
            received = time.time()
            while self.conn.notifies:
                n = self.conn.notifies.pop(0)
                assert n.channel == CHANNEL
                payload = n.payload if n.payload == "marker" else json.loads(n.payload)
                if payload != "marker":
                    payload["_received"] = received
                    payload["_pid"] = n.pid  # the sending backend
                got.append(payload)
                if until is not None and until(payload):
                    return got
            left = deadline - time.monotonic()
            if left <= 0:
                return got
            select.select([self.conn], [], [], left)

    def until_marker(self, sender, timeout=5.0):
        """Everything received before a marker notification sent now by
        `sender` (an autocommit connection): notifications of transactions
        committed earlier are delivered before it, in commit order."""
        with sender.cursor() as cur:
            cur.execute("SELECT pg_notify(%s, 'marker')", (CHANNEL,))
        got = self.events(timeout, until=lambda p: p == "marker")
        assert got and got[-1] == "marker", f"marker not received: {got}"
        return got[:-1]

    def close(self):
        self.conn.close()


def lease_clock_offset(conn):
    """The server's lease clock (le_now()) minus this process's wall clock,
    in seconds: a credited stall or a step of the wall clock sets the two
    apart (contract 2.2), so a time the server stamped is compared with one
    taken here only through this."""
    before = time.time()
    at = float(one(conn, "SELECT extract(epoch FROM le_now())::float8"))
    return at - (before + time.time()) / 2


def wait_ready(port=PORT, timeout=30.0):
    deadline = time.monotonic() + timeout
    while True:
        try:
            connect("postgres", port=port).close()
            return
        except psycopg2.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def wait_for(predicate, timeout=10.0, interval=0.05):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(interval)
    return True


WORK = os.environ.get("LEADERLOCK_WORK", "/tmp")


# Root runs the servers as postgres (PostgreSQL refuses root); anyone else
# runs them as themselves (see as_postgres in scripts/lib.sh).
AS_SERVER_USER = ["sudo", "-u", "postgres", "-H", "--"] if os.geteuid() == 0 else []


def give_to_server(path, recursive=False):
    """The servers' user owns `path` (only root needs to hand it over)."""
    if os.geteuid() == 0:
        subprocess.run(["chown", *(["-R"] if recursive else []), "postgres:postgres", path], check=True)


def as_postgres(*cmd, check=True, capture=False):
    """Runs cmd as the servers' user, with the PostgreSQL tree's own lib/
    first on the library path (see as_postgres in scripts/lib.sh)."""
    libdir = os.path.join(os.path.dirname(PG_BIN), "lib")
    return subprocess.run([*AS_SERVER_USER, "env", f"LD_LIBRARY_PATH={libdir}", *cmd],
                          check=check,
                          stdout=subprocess.PIPE if capture else subprocess.DEVNULL,
                          stderr=subprocess.STDOUT if capture else None, text=True)


def live_postmaster(pgdata):
    """The pid in `pgdata`'s postmaster.pid if that process is the
    postmaster of `pgdata` (its working directory), else None. A postmaster
    killed with SIGKILL leaves its postmaster.pid behind, and pids are
    reused (pid_max is 32768 here): a signal sent to that pid later, by
    pg_ctl stop or by a test, would kill whatever process has it now."""
    try:
        with open(os.path.join(pgdata, "postmaster.pid")) as f:
            pid = int(f.readline())
        if os.path.realpath(os.readlink(f"/proc/{pid}/cwd")) == os.path.realpath(pgdata):
            return pid
    except (OSError, ValueError):
        pass
    return None


class Cluster:
    """A PostgreSQL cluster run as the postgres user, with leaderlock
    preloaded; the main test cluster, or one a test makes (a standby)."""

    def __init__(self, pgdata, port):
        self.pgdata, self.port = pgdata, port

    @classmethod
    def main(cls):
        return cls(PGDATA, PORT)

    @classmethod
    def create(cls, name, *conf):
        """A new cluster of its own (initdb), set up as scripts/lib.sh sets up
        every test cluster (leaderlock preloaded, replication allowed), plus
        `conf` lines; started, with the extension in database postgres."""
        import tempfile
        port = free_port()
        pgdata = tempfile.mkdtemp(prefix=name + "-", dir=WORK)
        give_to_server(pgdata)
        subprocess.run(["bash", "-c", 'source "$0"; start_cluster "$@"', LIB_SH, pgdata, str(port), *conf],
                       check=True, env={**os.environ, "LEADERLOCK_PG": PG_MAJOR})
        c = cls(pgdata, port)
        wait_ready(port)
        with c.connect() as conn:
            one(conn, "CREATE EXTENSION leaderlock")
        return c

    def postmaster_pid(self):
        with open(os.path.join(self.pgdata, "postmaster.pid")) as f:
            return int(f.readline())

    def promote(self):
        """Promotes this standby and waits until it accepts writes."""
        self.ctl("promote")
        with self.connect() as c:
            assert wait_for(lambda: not one(c, "SELECT pg_is_in_recovery()"), timeout=30)

    def remove(self):
        """Stops this cluster (immediately) and deletes its directory."""
        import shutil
        if live_postmaster(self.pgdata):
            # (none when its postmaster was killed and never restarted: its
            # stale pid may be another process's now)
            as_postgres(f"{PG_BIN}/pg_ctl", "-D", self.pgdata, "-m", "immediate", "-w", "stop", check=False)
        shutil.rmtree(self.pgdata, ignore_errors=True)

    @property
    def log_path(self):
        return os.path.join(self.pgdata, "server.log")

    def log(self):
        with open(self.log_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def ctl(self, *args):
        as_postgres(f"{PG_BIN}/pg_ctl", "-D", self.pgdata, "-l", self.log_path, "-w", "-t", "60", *args)

    def start(self):
        self.ctl("start")
        wait_ready(self.port)

    def stop(self, mode="fast"):
        self.ctl("-m", mode, "stop")

    def restart(self, mode="fast"):
        self.stop(mode)
        self.start()

    def connect(self, dbname="postgres"):
        return connect(dbname, port=self.port)

    def standby(self, name):
        """A streaming standby of this cluster, made with pg_basebackup,
        on its own port; started."""
        s = self.base_backup(name, "-R")
        s.start()
        return s

    def base_backup(self, name, *args):
        """A copy of this cluster made with pg_basebackup (plus `args`), on
        its own port; not started."""
        import tempfile
        port = free_port()
        pgdata = tempfile.mkdtemp(prefix=name + "-", dir=WORK)
        os.chmod(pgdata, 0o700)
        give_to_server(pgdata)
        out = as_postgres(f"{PG_BIN}/pg_basebackup", "-h", HOST, "-p", str(self.port), "-U", "postgres",
                          "-D", pgdata, "-X", "stream", "-c", "fast", *args, check=False, capture=True)
        assert out.returncode == 0, out.stdout
        with open(os.path.join(pgdata, "postgresql.auto.conf"), "a") as f:
            f.write(f"port = {port}\nunix_socket_directories = '{pgdata}'\n")
        return Cluster(pgdata, port)

    def worker_pid(self, dbname="postgres"):
        """The pid of the worker serving `dbname`, or None."""
        with self.connect("postgres") as c:
            return one(c, "SELECT pid FROM pg_stat_activity "
                          "WHERE backend_type = 'leaderlock worker' AND datname = %s", (dbname,))


def pgbouncer(test, pool_size):
    """Starts pgbouncer in transaction pooling mode in front of the test
    cluster's database DB (named DB and postgres by pgbouncer), with `pool_size` server connections;
    stopped when `test` ends. Returns its port."""
    import tempfile
    port = free_port()
    d = tempfile.mkdtemp(prefix="pgbouncer-", dir=WORK)
    ini = os.path.join(d, "pgbouncer.ini")
    users = os.path.join(d, "users.txt")
    with open(users, "w") as f:
        f.write('"postgres" ""\n')
    with open(ini, "w") as f:
        aliases = "".join(f"{name} = host={HOST} port={PORT} dbname={DB}\n" for name in sorted({"postgres", DB}))
        f.write(f"""[databases]
{aliases}[pgbouncer]
listen_addr = {HOST}
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {users}
pool_mode = transaction
default_pool_size = {pool_size}
logfile = {d}/pgbouncer.log
pidfile = {d}/pgbouncer.pid
""")
    give_to_server(d, recursive=True)
    subprocess.run([*AS_SERVER_USER, "/usr/sbin/pgbouncer", "-d", ini], check=True)
    test.addCleanup(subprocess.run, ["pkill", "-F", f"{d}/pgbouncer.pid"])
    assert wait_for(lambda: os.path.exists(f"{d}/pgbouncer.pid")), "pgbouncer did not start"
    return port
