"""Scheduled runs (contract 22) through `leaderlock run --every/--cron` and
`leaderlock runs`, against real clusters.

The commands are tests/client/cli_child.py, which record their own start,
ticks and end (with LEADERLOCK_TERM), so the checks use what the children
saw. LEADERLOCK_RUNS_SLOTS (default 120) and LEADERLOCK_RUNS_PERIOD_MS
(default 300) set the chaos scenario's length.
"""
import collections
import datetime
import json
import os
import random
import signal
import subprocess
import sys
import time

from harness import free_port, one, wait_for
from test_cli import CHILD, CLI, CliCase, Run, alive, dsn, records, tenures

SLOTS = int(os.environ.get("LEADERLOCK_RUNS_SLOTS", "120"))
PERIOD_MS = int(os.environ.get("LEADERLOCK_RUNS_PERIOD_MS", "300"))


def micros(rfc3339):
    """An instant the CLI logged (2026-11-27T10:00:00.500000Z) in microseconds."""
    d = datetime.datetime.strptime(rfc3339, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc)
    return int(d.timestamp() * 1e6)


def claims(runs):
    """Every claim the replicas logged: (due, term, replica)."""
    out = []
    for name, r in runs:
        for e in r.events("run_claimed"):
            out.append((e["due"], e["term"], name))
    return out


class ScheduledRunsTest(CliCase):

    def job(self, *args, command=None, **kw):
        return Run(self, "--job", self.key, *args, command=command, **kw)

    def rows(self, conn=None):
        with (conn or self.conn).cursor() as cur:
            cur.execute("SELECT due, holder, term, attempts, outcome, detail, finished_at IS NOT NULL "
                        "FROM leaderlock_runs WHERE job = %s ORDER BY due", (self.key,))
            return cur.fetchall()

    def test_each_due_run_runs_once_with_its_term_and_due_instant(self):
        env = {"CLI_CHILD_ENV": "1"}
        runs = [self.job("--every", "1s", "--ttl", "2s", "--id", f"r{i}", env=env,
                         command=[sys.executable, CHILD, self.children, "0.05"]) for i in range(3)]
        self.assertTrue(wait_for(lambda: len([r for r in self.rows() if r[6]]) >= 4, timeout=15))
        for r in runs:
            r.signal(signal.SIGTERM)
        for r in runs:
            self.assertEqual(r.wait(), 128 + signal.SIGTERM)
        rows = self.rows()
        finished = [r for r in rows if r[6]]
        self.assertTrue(all(r[4] == "succeeded" and r[3] == 1 for r in finished), rows)
        # one child per run, each with that run's term, in due order
        starts = [(pid, term) for kind, pid, term, _ in records(self.children) if kind == "start"]
        terms = [int(t) for _, t in starts]
        self.assertEqual(len(terms), len(set(terms)), "a term ran twice")
        self.assertEqual(sorted(terms), terms)
        by_term = {r[2]: r for r in rows}
        for t in terms:
            self.assertIn(t, by_term)
        envs = [k for k, *_ in records(self.children) if k.startswith("env:")]
        self.assertTrue(all("LEADERLOCK_ID=r" in e for e in envs), envs)
        # the due instant in the environment (cli_child records LEADERLOCK_DUE too)
        dues = [e.split("LEADERLOCK_DUE=")[1] for e in envs if "LEADERLOCK_DUE=" in e]
        self.assertTrue(dues and all(d.endswith("Z") for d in dues), envs)

    def test_the_exit_status_is_the_outcome(self):
        r = self.job("--every", "1s", "--ttl", "2s", command=[sys.executable, CHILD, self.children, "0", "3"])
        self.assertTrue(wait_for(lambda: any(x[6] for x in self.rows()), timeout=10))
        r.signal(signal.SIGTERM)
        r.wait()
        failed = [x for x in self.rows() if x[6]][0]
        self.assertEqual((failed[4], failed[5]), ("failed", "exit status 3"))
        finished = r.events("run_finished")
        self.assertEqual(finished[0]["outcome"], "failed")
        self.assertEqual(finished[0]["exit"], 3)

    def test_a_command_past_its_deadline_is_stopped_and_failed(self):
        """A runner that cannot renew (its replica stopped with SIGSTOP) has
        its command stopped at the claim's local deadline by the supervisor;
        its run is recorded failed, or claimed again by another."""
        r = self.job("--every", "60s", "--misfire-grace", "60s", "--ttl", "1.5s", "--grace", "0.3s",
                     command=[sys.executable, CHILD, self.children])
        self.assertTrue(wait_for(lambda: records(self.children), timeout=10))
        r.signal(signal.SIGSTOP)
        time.sleep(2.5)
        last = records(self.children)[-1]
        self.assertEqual(last[0], "term", "the command outlived the claim")
        r.signal(signal.SIGCONT)
        self.assertTrue(wait_for(lambda: any(x[6] for x in self.rows()), timeout=10))
        row = [x for x in self.rows() if x[6]][0]
        self.assertEqual(row[4], "failed")
        self.assertIn("local deadline", row[5])
        r.signal(signal.SIGTERM)
        r.wait()

    def test_a_run_nobody_could_start_in_its_grace_is_recorded_missed(self):
        # One replica, stopped across several due instants: when it resumes
        # it claims each too late, and each is recorded missed (once).
        r = self.job("--every", "1s", "--misfire-grace", "0.2s", "--ttl", "2s",
                     command=[sys.executable, CHILD, self.children, "0"])
        self.assertTrue(wait_for(lambda: any(x[6] for x in self.rows()), timeout=10))
        r.signal(signal.SIGSTOP)
        time.sleep(3.2)
        r.signal(signal.SIGCONT)
        self.assertTrue(wait_for(lambda: sum(x[4] == "missed" for x in self.rows()) >= 2, timeout=10))
        r.signal(signal.SIGTERM)
        r.wait()
        missed = [x for x in self.rows() if x[4] == "missed"]
        self.assertTrue(all(x[3] == 0 and x[5] == "not claimed within its misfire grace" for x in missed), missed)

    def test_metrics_count_the_job_s_runs(self):
        """--metrics with a schedule: runs seen settled by outcome (this
        replica's and the other's), runs claimed here, the last success's
        due instant; /healthz 200 while the database answers, 503 once it
        has not for 30 s (not waited for here: a stopped server fails it
        only after that)."""
        import urllib.request
        port = free_port()
        command = [sys.executable, CHILD, self.children, "0.05"]
        runs = [self.job("--every", "1s", "--ttl", "2s", "--id", "me", "--metrics", f"127.0.0.1:{port}",
                         command=command),
                self.job("--every", "1s", "--ttl", "2s", "--id", "other", command=command)]

        def get(path):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
                return response.status, response.read().decode()

        def value(name, labels=""):
            try:
                text = get("/metrics")[1]
            except OSError:   # not listening yet
                return None
            for line in text.splitlines():
                if line.startswith(f'leaderlock_run_{name}{{job="{self.key}"{labels}}}'):
                    return float(line.rsplit(" ", 1)[1])
            return None
        self.assertTrue(wait_for(lambda: (value("settled_total", ',outcome="succeeded"') or 0) >= 4, timeout=15))
        settled = value("settled_total", ',outcome="succeeded"')
        self.assertLessEqual(value("claimed_total"), settled)
        self.assertGreater(value("last_success_due_seconds"), time.time() - 10)
        self.assertEqual(value("settled_total", ',outcome="missed"'), 0)
        self.assertEqual(get("/healthz"), (200, "ok\n"))
        for r in runs:
            r.signal(signal.SIGTERM)
        for r in runs:
            r.wait()
        # every run the table has as succeeded, this replica saw settled
        succeeded = sum(1 for x in self.rows() if x[4] == "succeeded")
        self.assertGreaterEqual(succeeded, settled)

    def test_flags_for_leading_are_refused_with_a_schedule(self):
        for extra in (["--restart"], ["--slots", "2"], ["--timeout", "1s"]):
            out = subprocess.run([CLI, "--dsn", dsn(), "run", "--every", "1s", *extra, "--", "true"],
                                 capture_output=True, text=True, timeout=10)
            self.assertEqual(out.returncode, 2, out.stderr)
            self.assertIn("scheduled runs", out.stderr)
        out = subprocess.run([CLI, "--dsn", dsn(), "run", "--cron", "61 * * * *", "--", "true"],
                             capture_output=True, text=True, timeout=10)
        self.assertEqual(out.returncode, 2, out.stderr)
        self.assertIn("cron expression", out.stderr)

    def test_runs_lists_the_history_escaped(self):
        job = self.key + "-\x1b]0;evil\x07"
        due = one(self.conn, "SELECT date_trunc('second', le_now()) - interval '5 seconds'")
        term = one(self.conn, "SELECT le_claim_run(%s, %s, %s, '1 minute')", (job, due, "holder\x1b[31m"))
        self.assertTrue(one(self.conn, "SELECT le_finish_run(%s, %s, %s, %s, false, %s)",
                            (job, due, "holder\x1b[31m", term, "boom\nforged line")))
        out = subprocess.run([CLI, "--dsn", dsn(), "runs", "--job", job], capture_output=True, text=True,
                             timeout=10)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertNotIn("\x1b", out.stdout)
        self.assertIn("1 runs: 0 succeeded, 1 failed, 0 missed, 0 running", out.stdout)
        self.assertIn("boom\\nforged line", out.stdout)
        self.assertEqual(len(out.stdout.strip().splitlines()), 4)
        js = subprocess.run([CLI, "--dsn", dsn(), "runs", "--job", job, "--json"], capture_output=True,
                            text=True, timeout=10)
        line = json.loads(js.stdout)
        self.assertEqual((line["job"], line["state"], line["term"], line["detail"]),
                         (job, "failed", term, "boom\nforged line"))
        self.assertNotIn("\x1b", js.stdout)
        none = subprocess.run([CLI, "--dsn", dsn(), "runs", "--job", job + "-none"], capture_output=True,
                              text=True, timeout=10)
        self.assertEqual(none.returncode, 1)

    def test_five_replicas_under_chaos(self):
        """Five replicas of `run --every` for LEADERLOCK_RUNS_SLOTS due
        instants, with kill -9 of a replica (restarted under a new id), kill
        -9 of the running command, SIGSTOP of a replica and a restart of the
        server. Every due run is settled once (succeeded, failed or missed),
        no two commands of one run ever overlap, terms only grow (per run and
        across the job), and no run is claimed after it finished."""
        c = self.cluster()
        period = PERIOD_MS / 1000
        # A claim lasts 1 s, a run may start up to 3 s late: a lost runner's
        # run is claimed again by another replica.
        args = ("--every", f"{PERIOD_MS}ms", "--misfire-grace", "3s", "--ttl", "1s", "--grace", "0.25s")
        command = [sys.executable, CHILD, self.children, str(period * 0.3)]
        gen = collections.Counter()
        runs = {}
        logs = []

        def start(name):
            gen[name] += 1
            runs[name] = self.job(*args, "--id", f"{name}-{gen[name]}", port=c.port, dbname="postgres",
                                  command=command)
            logs.append((f"{name}-{gen[name]}", runs[name]))

        for name in "ABCDE":
            start(name)
        with c.connect() as conn:
            t0 = one(conn, "SELECT le_now()")
        actions = collections.Counter()
        end = time.monotonic() + SLOTS * period
        restart_at = time.monotonic() + SLOTS * period / 2
        while time.monotonic() < end:
            time.sleep(random.uniform(0.5, 1.5))
            if restart_at and time.monotonic() >= restart_at:
                restart_at = None
                c.restart("immediate")
                actions["server_restart"] += 1
                continue
            # Mostly at the replica running a run now (else any).
            try:
                with c.connect() as conn:
                    runner = one(conn, "SELECT holder FROM leaderlock_runs WHERE job = %s "
                                       "AND finished_at IS NULL AND expires_at > le_now() "
                                       "ORDER BY due DESC LIMIT 1", (self.key,))
            except Exception:   # the server is restarting
                runner = None
            names = [n for n in runs if runner == f"{n}-{gen[n]}"]
            name = names[0] if names and random.random() < 0.8 else random.choice("ABCDE")
            action = random.choice(["kill_cli", "kill_child", "stop_cli"])
            actions[action] += 1
            actions["at_the_runner"] += bool(names) and name == names[0]
            if action == "kill_cli":
                runs[name].proc.kill()
                runs[name].wait()
                start(name)
            elif action == "kill_child":
                starts = [pid for kind, pid, *_ in records(self.children) if kind == "start"]
                if starts and alive(starts[-1]):
                    os.kill(starts[-1], signal.SIGKILL)
            else:
                runs[name].signal(signal.SIGSTOP)
                time.sleep(random.uniform(1.2, 2.0))
                runs[name].signal(signal.SIGCONT)
        time.sleep(2)   # the last runs finish
        for r in runs.values():
            r.signal(signal.SIGTERM)
        for r in runs.values():
            r.wait()
        with c.connect() as conn:
            t1 = one(conn, "SELECT le_now()")
            rows = self.rows(conn)
            job_term = one(conn, "SELECT term FROM leaderlock_jobs WHERE job = %s", (self.key,))
        by_due = {r[0]: r for r in rows}
        # Every due instant from the first replica's start (within its grace)
        # to the end has its run, settled once.
        step = PERIOD_MS * 1000
        first = (int(t0.timestamp() * 1e6) // step + 1) * step
        last = (int(t1.timestamp() * 1e6) // step - 4) * step
        expected = range(first, last + 1, step)
        dues = {int(d.timestamp() * 1e6) for d in by_due}
        missing = [d for d in expected if d not in dues]
        self.assertEqual(missing, [], "due instants without a run")
        unsettled = [r for r in rows if not r[6] and int(r[0].timestamp() * 1e6) in expected]
        self.assertEqual(unsettled, [], "runs never settled")
        # Claims: unique terms, growing in claim order per run, the run's
        # last claim is its row's term (no claim after it finished).
        all_claims = claims(logs)
        terms = [t for _, t, _ in all_claims]
        self.assertEqual(len(terms), len(set(terms)), "a term was issued twice")
        self.assertLessEqual(max(terms), job_term)
        per_run = collections.defaultdict(list)
        for due, term, name in all_claims:
            per_run[due].append(term)
        row_of = {int(r[0].timestamp() * 1e6): r for r in rows}
        for due, ts in per_run.items():
            row = row_of[micros(due)]
            self.assertEqual(max(ts), row[2], f"run {due}: claims {ts}, row {row}")
            self.assertEqual(len(ts), row[3], f"run {due}: claims {ts}, attempts {row[3]}")
        # The children of one run never overlap; a later claim's child
        # starts after the earlier claim's child ended.
        due_of = {term: due for due, term, _ in all_claims}
        spans = collections.defaultdict(list)
        for first_t, last_t, pid, term in tenures(self.children):
            self.assertIn(int(term), due_of, f"child {pid} ran with term {term}, never claimed")
            spans[due_of[int(term)]].append((first_t, last_t, int(term)))
        for due, ss in spans.items():
            ss.sort()
            for (s1, e1, t1), (s2, e2, t2) in zip(ss, ss[1:]):
                self.assertLess(e1, s2, f"run {due}: term {t1} still ran when term {t2} started")
                self.assertLess(t1, t2)
        outcomes = collections.Counter(r[4] for r in rows)
        again = sum(1 for r in rows if r[3] > 1)
        replicas = len({name.split("-")[0] for _, _, name in all_claims})
        print(f"\n  runs chaos: {len(expected)} due instants every {PERIOD_MS} ms, {dict(actions)}; "
              f"outcomes {dict(outcomes)}, {again} claimed again, {len(terms)} claims, "
              f"{replicas} replicas ran some", file=sys.stderr)
        self.assertGreaterEqual(outcomes["succeeded"], len(expected) // 2, "most runs must succeed")
        self.assertGreaterEqual(replicas, 3, "the runs never moved between replicas")
        if actions["at_the_runner"] >= 5:
            self.assertGreater(again, 0, "no run was ever claimed again: the chaos missed every runner")
