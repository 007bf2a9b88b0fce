"""Following a real HA manager: Patroni (Debian's 3.0.2) with etcd 3.4 as
its store and two PostgreSQL 15 nodes with leaderlock preloaded, all
started here on local ports. Two `leaderlock run --restart` candidates, as
if on two hosts, name both nodes with target_session_attrs=read-write.
Planned switchovers never stop the leader's command; when the primary dies
(Patroni and PostgreSQL killed with SIGKILL), Patroni promotes the replica
and a command leads again. The commands' own records never overlap and
terms only grow. Prints the time from the primary's loss to the next
command's start, next to Patroni's ttl and loop_wait. On PostgreSQL 15
only (Debian's, which Patroni runs here)."""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

from harness import (AS_SERVER_USER, PG_MAJOR, WORK, connect, free_port, give_to_server, live_postmaster, one,
                     wait_for)
from test_cli import CHILD, assert_never_two, records, tenures

CLI = os.environ.get("LEADERLOCK_CLI", "")
PG15_BIN = "/usr/lib/postgresql/15/bin"
# Patroni's own timing (bootstrap.dcs): a dead primary's leader key lapses
# after TTL, the survivors look every LOOP_WAIT.
TTL, LOOP_WAIT = 10, 1
SWITCHOVERS = int(os.environ.get("LEADERLOCK_PATRONI_SWITCHOVERS", "3"))
# One failover by default: a second one needs the killed node back as a
# healthy replica first (rejoin), which is Patroni's work, and time.
FAILOVERS = int(os.environ.get("LEADERLOCK_PATRONI_FAILOVERS", "1"))


def node_config(d, name, api_port, pg_port, etcd_port):
    return f"""scope: leaderlock-test
name: {name}
restapi:
  listen: 127.0.0.1:{api_port}
  connect_address: 127.0.0.1:{api_port}
etcd3:
  hosts: 127.0.0.1:{etcd_port}
bootstrap:
  dcs:
    ttl: {TTL}
    loop_wait: {LOOP_WAIT}
    retry_timeout: 4
    maximum_lag_on_failover: 1048576
    postgresql:
      use_pg_rewind: true
      parameters:
        wal_level: replica
        hot_standby: "on"
        max_wal_senders: 8
        max_replication_slots: 8
        wal_log_hints: "on"
  initdb:
  - encoding: UTF8
  - locale: C
  - auth: trust
  pg_hba:
  - host replication all 127.0.0.1/32 trust
  - host all all 127.0.0.1/32 trust
postgresql:
  listen: 127.0.0.1:{pg_port}
  connect_address: 127.0.0.1:{pg_port}
  data_dir: {d}/{name}
  bin_dir: {PG15_BIN}
  pgpass: {d}/{name}.pgpass
  authentication:
    replication: {{username: postgres}}
    superuser: {{username: postgres}}
    rewind: {{username: postgres}}
  parameters:
    unix_socket_directories: {d}
    shared_preload_libraries: leaderlock
    max_worker_processes: 16
"""


@unittest.skipUnless(PG_MAJOR == "15" and shutil.which("patroni") and shutil.which("etcd"),
                     "Patroni runs PostgreSQL 15 here (scripts/setup.sh installs it)")
class PatroniTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="patroni-", dir=WORK)
        os.chmod(cls.dir, 0o755)
        give_to_server(cls.dir)
        etcd_port, peer_port = free_port(), free_port()
        cls.etcd = subprocess.Popen(
            ["etcd", "--name", "t", "--data-dir", f"{cls.dir}/etcd",
             "--listen-client-urls", f"http://127.0.0.1:{etcd_port}",
             "--advertise-client-urls", f"http://127.0.0.1:{etcd_port}",
             "--listen-peer-urls", f"http://127.0.0.1:{peer_port}",
             "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer_port}",
             "--initial-cluster", f"t=http://127.0.0.1:{peer_port}"],
            stdout=subprocess.DEVNULL, stderr=open(f"{cls.dir}/etcd.log", "w"))
        cls.nodes = {}
        for name in ("node1", "node2"):
            api, pg = free_port(), free_port()
            path = f"{cls.dir}/{name}.yml"
            with open(path, "w") as f:
                f.write(node_config(cls.dir, name, api, pg, etcd_port))
            give_to_server(path)
            cls.nodes[name] = {"api": api, "pg": pg, "yml": path}
        cls.start_node("node1")
        assert wait_for(lambda: cls.role("node1") == "primary", timeout=60), cls.log("node1")
        cls.start_node("node2")
        assert wait_for(lambda: cls.role("node2") == "replica", timeout=60), cls.log("node2")
        with connect(port=cls.nodes["node1"]["pg"]) as c:
            one(c, "CREATE EXTENSION leaderlock")
        assert cls.caught_up("node1", "node2")

    @classmethod
    def caught_up(cls, primary, replica, timeout=30):
        """Whether `replica` replays all `primary` has written, within
        `timeout`. (Asynchronous replication: Patroni promotes a replica up
        to maximum_lag_on_failover behind, so a test that wants no lost
        write waits for this first.)"""
        with connect(port=cls.nodes[primary]["pg"]) as p, connect(port=cls.nodes[replica]["pg"]) as r:
            lsn = one(p, "SELECT pg_current_wal_lsn()::text")
            return wait_for(lambda: one(r, "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (lsn,)),
                            timeout=timeout)

    @classmethod
    def tearDownClass(cls):
        for name in cls.nodes:
            cls.kill_node(name)
        cls.etcd.kill()
        cls.etcd.wait()
        shutil.rmtree(cls.dir, ignore_errors=True)

    @classmethod
    def start_node(cls, name):
        log = open(f"{cls.dir}/{name}.log", "a")
        cls.nodes[name]["proc"] = subprocess.Popen([*AS_SERVER_USER, "patroni", cls.nodes[name]["yml"]],
                                                   stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    @classmethod
    def kill_node(cls, name):
        """SIGKILL to Patroni and to the node's PostgreSQL: a dead host."""
        proc = cls.nodes[name].get("proc")
        if proc and proc.poll() is None:
            subprocess.run(["pkill", "-KILL", "-f", f"patroni {cls.nodes[name]['yml']}"], check=False)
            proc.wait()
        pid = live_postmaster(f"{cls.dir}/{name}")  # (not a stale pid: another process's now)
        if pid:
            subprocess.run(["pkill", "-KILL", "-P", str(pid)], check=False)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    @classmethod
    def role(cls, name):
        """primary, replica, or None, as the node's REST API says."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{cls.nodes[name]['api']}/patroni", timeout=2) as r:
                state = json.load(r)
        except Exception:
            return None
        if state.get("state") != "running":
            return None
        return {"master": "primary", "primary": "primary", "replica": "replica"}.get(state.get("role"))

    @classmethod
    def log(cls, name):
        with open(f"{cls.dir}/{name}.log", errors="replace") as f:
            return f.read()[-3000:]

    def primary(self):
        return next((n for n in self.nodes if self.role(n) == "primary"), None)

    def candidates(self, key):
        dsn = (f"host=127.0.0.1,127.0.0.1 port={self.nodes['node1']['pg']},{self.nodes['node2']['pg']} "
               "user=postgres dbname=postgres target_session_attrs=read-write connect_timeout=2")
        children = os.path.join(self.dir, f"{key}.children")
        runs = []
        for i in range(2):
            log = open(os.path.join(self.dir, f"{key}.cli{i}.log"), "w")
            p = subprocess.Popen([CLI, "--dsn", dsn, "run", "--key", key, "--ttl", "10s", "--restart",
                                  "--log-format", "json", "--", sys.executable, CHILD, children],
                                 stderr=log, stdin=subprocess.DEVNULL)
            self.addCleanup(lambda p=p: (p.poll() is None and p.kill(), p.wait()))
            runs.append((p, log.name))
        return runs, children

    def text(self, log_path):
        with open(log_path) as f:
            return "".join(f"{e['time']} {e['event']}: {e['message']}\n"
                           for e in map(json.loads, filter(lambda l: l.startswith("{"), f)))

    def events(self, log_path, name):
        with open(log_path) as f:
            return [e for e in map(json.loads, filter(lambda l: l.startswith("{"), f)) if e["event"] == name]

    def rejoin(self, dead, primary):
        """Brings a killed node back as a replica that follows `primary`.
        The kill may have left WAL on it that the replica never received;
        Patroni then may start it as a replica that can never follow (seen:
        "requested timeline 5 is not a child of this server's history"), and
        the next failover would find no healthy node. Such a node is
        reinitialized from the primary, as an operator would."""
        self.start_node(dead)
        if wait_for(lambda: self.role(dead) == "replica", timeout=60) and self.caught_up(primary, dead):
            return
        out = subprocess.run(["patronictl", "-c", self.nodes[primary]["yml"], "reinit", "leaderlock-test", dead,
                              "--force", "--wait"], capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr + self.log(dead))
        self.assertTrue(wait_for(lambda: self.role(dead) == "replica", timeout=60) and self.caught_up(primary, dead),
                        self.log(dead))

    def test_switchovers_never_stop_the_leader_and_a_failover_moves_it(self):
        runs, children = self.candidates("patroni")
        self.assertTrue(wait_for(lambda: records(children), timeout=30))
        # Planned switchovers: the leader's command keeps running throughout.
        for _ in range(SWITCHOVERS):
            old = self.primary()
            new = next(n for n in self.nodes if n != old)
            self.assertTrue(self.caught_up(old, new))
            out = subprocess.run(["patronictl", "-c", self.nodes[old]["yml"], "switchover", "--leader", old,
                                  "--candidate", new, "--force"], capture_output=True, text=True, timeout=60)
            self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
            self.assertTrue(wait_for(lambda: self.role(new) == "primary" and self.role(old) == "replica",
                                     timeout=60), self.log(old) + self.log(new))
            time.sleep(2)
        self.assertEqual(len({pid for _, _, pid, _ in tenures(children)}), 1,
                         f"a switchover stopped the command: {tenures(children)}")
        for _, log in runs:
            self.assertEqual(self.events(log, "stopped"), [], self.text(log))
        # The primary's host dies: Patroni promotes the replica once its
        # leader key lapses; a command leads again there. The dead node
        # comes back as a replica for the next round.
        took = []
        for _ in range(FAILOVERS):
            old = self.primary()
            new = next(n for n in self.nodes if n != old)
            before = len(tenures(children))
            lost = time.time()
            self.kill_node(old)
            self.assertTrue(wait_for(lambda: len(tenures(children)) > before, timeout=4 * TTL + 30),
                            self.log(new))
            took.append(tenures(children)[-1][0] - lost)
            self.assertEqual(self.role(new), "primary")
            # (The same candidate may lead again in the same term: its lease
            # outlived the failover, its command was stopped at its local
            # deadline meanwhile. Never two at once; terms never go down.)
            assert_never_two(self, children)
            if len(took) < FAILOVERS:
                self.rejoin(old, new)
        took.sort()
        p99 = took[min(len(took) - 1, round(0.99 * (len(took) - 1)))]
        print(f"\n  Patroni (ttl {TTL} s, loop_wait {LOOP_WAIT} s), leaderlock ttl 10 s: {SWITCHOVERS} "
              f"switchovers, 0 command stops; {FAILOVERS} kill(s) of the primary, next command started after "
              f"p50 {took[(len(took) - 1) // 2]:.2f} s, p99 {p99:.2f} s "
              f"({', '.join(f'{t:.2f}' for t in took)})", file=sys.stderr)
