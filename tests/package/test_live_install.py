"""Installing a new build under a running, busy server, by every install
path the README names: the tarball's install.sh, scripts/install.sh (from
source) and apt-get with the Debian package. tests/package/run.sh runs it
on PostgreSQL 15 as root, after the other suites.

Each path must put a new file in place of the old (a new inode: rename),
never write into the file the server has mapped; the server stays up, no
process dies by a signal, the worker keeps running, and the clients hammering
it get their answers throughout. Afterwards: the running server goes on with
the library it started with (in every process, new sessions included, since
they are forked from the postmaster that preloaded it), and takes the new
one at its restart.
"""
import os
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "client"))
from harness import Cluster, connect, one, wait_for  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
PG_CONFIG = os.environ["PG_CONFIG"]
TARBALL = os.environ["LEADERLOCK_TARBALL"]
DEB = os.environ.get("LEADERLOCK_DEB")


def library():
    libdir = subprocess.run([PG_CONFIG, "--pkglibdir"], capture_output=True, text=True, check=True).stdout.strip()
    return os.path.join(libdir, "leaderlock.so")


def mapped(pid):
    """The leaderlock.so lines of a process's memory map."""
    with open(f"/proc/{pid}/maps") as f:
        return [line.split(None, 5)[-1].strip() for line in f if "leaderlock.so" in line]


def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


class Load:
    """Clients hammering the server: each holds its own key, renews it over
    and over, and opens a new connection (a new backend) every 10 calls.
    Every answer is checked: the lease stays theirs, the term never moves."""

    def __init__(self, port, clients=6):
        self.port, self.stopping, self.calls, self.errors = port, False, 0, []
        self.threads = [threading.Thread(target=self.client, args=(i,), daemon=True) for i in range(clients)]
        for t in self.threads:
            t.start()

    def client(self, i):
        key, holder, term = f"live-install-{i}", f"client-{i}", None
        while not self.stopping:
            try:
                conn = connect(port=self.port)
                for _ in range(10):
                    if not one(conn, "SELECT le_try_acquire(%s, %s, '1 minute')", (key, holder)):
                        self.errors.append(f"{key}: le_try_acquire refused its own holder")
                    t = one(conn, "SELECT term FROM le_lease(%s)", (key,))
                    if term is not None and t != term:
                        self.errors.append(f"{key}: term {term} became {t}")
                    term = t
                    self.calls += 1
                conn.close()
            except Exception as e:  # any error at all is a failure here
                self.errors.append(f"{key}: {e}")
                time.sleep(0.05)

    def stop(self):
        self.stopping = True
        for t in self.threads:
            t.join(10)


class LiveInstall(unittest.TestCase):
    def test_every_install_path_under_a_busy_server(self):
        cluster = Cluster.create("live-install")
        self.addCleanup(cluster.remove)
        postmaster = cluster.postmaster_pid()
        self.assertTrue(wait_for(lambda: cluster.worker_pid() is not None))
        worker = cluster.worker_pid()
        started_with = os.stat(library()).st_ino
        load = Load(cluster.port)
        self.addCleanup(load.stop)
        self.assertTrue(wait_for(lambda: load.calls > 50))
        paths = [("the tarball's install.sh", [os.path.join(TARBALL, "install.sh"), PG_CONFIG], 5),
                 ("scripts/install.sh", [os.path.join(REPO, "scripts", "install.sh"), PG_CONFIG], 1)]
        if DEB:
            paths.append(("apt-get install", ["apt-get", "install", "-y", "-q", "--reinstall", DEB], 3))
        for name, command, times in paths:
            for _ in range(times):
                before, calls, t = os.stat(library()).st_ino, load.calls, time.monotonic()
                out = subprocess.run(command, capture_output=True, text=True)
                print(f"{name}: {time.monotonic() - t:.1f} s, {load.calls - calls} client calls meanwhile",
                      file=sys.stderr)
                self.assertEqual(out.returncode, 0, f"{name}: {out.stdout}{out.stderr}")
                self.assertNotEqual(os.stat(library()).st_ino, before,
                                    f"{name} wrote into the file the server has mapped")
                self.assertTrue(wait_for(lambda: load.calls > calls + 20), f"after {name}: the clients stalled")
                self.assertTrue(alive(postmaster), f"after {name}: the postmaster is gone")
                self.assertTrue(alive(worker), f"after {name}: the worker is gone")
                self.assertEqual(load.errors, [], f"after {name}")
        load.stop()
        self.assertEqual(load.errors, [])
        log = cluster.log()
        for bad in ("terminated by signal", "was terminated", "database system was interrupted"):
            self.assertNotIn(bad, log)
        # The running server keeps the library it started with, in every
        # process, new sessions included (forked from the postmaster).
        with cluster.connect() as c:
            backend = one(c, "SELECT pg_backend_pid()")
            self.assertTrue(mapped(backend) and all(m.endswith("(deleted)") for m in mapped(backend)),
                            mapped(backend))
            self.assertEqual(cluster.worker_pid(), worker)
        self.assertNotEqual(os.stat(library()).st_ino, started_with)
        # A restart takes the new one.
        cluster.restart()
        with cluster.connect() as c:
            backend = one(c, "SELECT pg_backend_pid()")
            self.assertEqual(set(mapped(backend)), {library()})
            self.assertTrue(one(c, "SELECT le_try_acquire('live-install-0', 'client-0', '1 minute')"))
        self.assertTrue(wait_for(lambda: cluster.worker_pid() is not None))
        self.assertEqual(set(mapped(cluster.worker_pid())), {library()})


if __name__ == "__main__":
    unittest.main()
