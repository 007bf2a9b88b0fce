"""The observability pack (monitoring/) is built only on metrics our
exporters expose: every metric name in the Grafana dashboard and in the
alert rules is in the /metrics output of `leaderlock metrics` (the
database) or `leaderlock run --metrics` (a leader's replica, a scheduled
job's replica), each run here against the test cluster; the dashboard has
at least 8 panels, each with a query. (The rules' behaviour is tested by
`promtool test rules` in the lint suite.)
"""
import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request

from harness import free_port, one, wait_for
from test_cli import CHILD, CLI, CliCase, Run, dsn

MONITORING = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "monitoring")
NAME = re.compile(r"\bleaderlock_[a-z_]+\b")


def scrape(port):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
            return r.read().decode()
    except OSError:
        return ""


def names(text):
    """The metric names with a sample in a /metrics text."""
    return {re.split(r"[{ ]", line, maxsplit=1)[0] for line in text.splitlines() if line and not line.startswith("#")}


def status_of(port, path):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=3) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return None


def keys(text):
    for line in text.splitlines():
        if line.startswith("leaderlock_keys "):
            return int(line.split()[1])
    return None


class MonitoringTest(CliCase):

    def exporter(self, port, dsn_text, every="1s"):
        proc = subprocess.Popen([CLI, "--dsn", dsn_text, "metrics", "--listen", f"127.0.0.1:{port}", "--every", every],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.addCleanup(proc.wait)
        self.addCleanup(proc.kill)
        self.assertTrue(wait_for(lambda: status_of(port, "/nothing") == 404, timeout=10))

    def test_the_database_is_read_when_scraped(self):
        """A scrape sees the database as it is (a new key shows at the next
        scrape past --every); a database that cannot be read is 503 on
        /metrics and /healthz."""
        port = free_port()
        self.exporter(port, dsn(), every="300ms")
        before = keys(scrape(port))
        self.assertIsNotNone(before)
        self.assertTrue(one(self.conn, "SELECT le_try_acquire(%s, 'h', '30 seconds')", (self.key,)))
        time.sleep(0.35)
        self.assertEqual(keys(scrape(port)), before + 1)
        nowhere = free_port()
        self.exporter(nowhere, dsn(port=free_port()))
        self.assertEqual(status_of(nowhere, "/metrics"), 503)
        self.assertEqual(status_of(nowhere, "/healthz"), 503)

    def test_the_dashboard_and_the_rules_use_only_metrics_we_expose(self):
        job, key = self.key + "-job", self.key + "-key"
        one(self.conn, "SELECT le_schedule(%s, every => '1 second')", (job,))
        self.addCleanup(one, self.conn, "SELECT le_unschedule(%s)", (job,))
        one(self.conn, "SELECT le_expect_leader(%s, '1 second')", (key,))
        self.addCleanup(one, self.conn, "SELECT le_unexpect_leader(%s)", (key,))
        ports = [free_port() for _ in range(3)]
        Run(self, "--key", key, "--ttl", "3s", "--metrics", f"127.0.0.1:{ports[0]}",
            command=[sys.executable, CHILD, self.children, "60"])
        Run(self, "--job", job, "--ttl", "3s", "--metrics", f"127.0.0.1:{ports[1]}",
            command=[sys.executable, CHILD, self.children, "0.05"])
        exporter = subprocess.Popen([CLI, "--dsn", dsn(), "metrics", "--listen", f"127.0.0.1:{ports[2]}", "--every", "1s"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.addCleanup(exporter.wait)
        self.addCleanup(exporter.kill)
        # each has something to say: the leader leads, the job ran, the database was read
        self.assertTrue(wait_for(lambda: 'leaderlock_leading{key="%s"} 1' % key in scrape(ports[0]), timeout=10))
        self.assertTrue(wait_for(lambda: "leaderlock_run_claimed_total" in scrape(ports[1]), timeout=10))
        self.assertTrue(wait_for(lambda: "leaderlock_leases{" in scrape(ports[2]), timeout=10))
        self.assertTrue(wait_for(lambda: 'leaderlock_runs{outcome="succeeded"}' in scrape(ports[2]), timeout=10))
        exposed = set().union(*(names(scrape(p)) for p in ports))

        with open(os.path.join(MONITORING, "leaderlock-dashboard.json")) as f:
            dashboard = json.load(f)
        panels = dashboard["panels"]
        self.assertGreaterEqual(len(panels), 8)
        used = set()
        for panel in panels:
            exprs = [t["expr"] for t in panel.get("targets", [])]
            self.assertTrue(exprs, f"panel {panel['title']!r} has no query")
            for expr in exprs:
                used |= set(NAME.findall(expr))
        with open(os.path.join(MONITORING, "leaderlock-alerts.yml")) as f:
            rules = f.read()
        in_rules = set()
        for block in re.findall(r"expr: \|?\n?((?:\s{10,}.*\n)+|.*\n)", rules):
            in_rules |= set(NAME.findall(block))
        self.assertGreaterEqual(len(in_rules), 8, in_rules)
        missing = (used | in_rules) - exposed
        self.assertEqual(missing, set(), f"not exposed by any exporter: {sorted(missing)}; exposed: {sorted(exposed)}")
