"""Schedules kept in the database (contract 24), against the test cluster's
served database: the worker records every due instant nobody claimed
within its grace as missed, once, announced, within a second of the grace
ending, with no replica alive, across a worker kill and a server restart;
never for a paused schedule. `leaderlock run --job J` runs J's registered
schedule and follows changes to it without a restart; overlap forbid keeps
five replicas' commands from ever running at once (from the commands' own
start and end records); with replace the earlier runner's fenced write is
refused.

Times: instants come from the server's lease clock; the commands record
the host's wall clock (the same host).
"""
import datetime
import os
import random
import signal
import subprocess
import sys
import time

from harness import Cluster, Listener, connect, one, wait_for
from test_cli import CHILD, CliCase, Run, records

PERIOD = 1.0
GRACE = 0.5


def seconds(t):
    return t.timestamp()


class SchedulesTest(CliCase):

    def schedule(self, job, **kw):
        args = ", ".join(f"{k} => %s" for k in kw)
        return one(self.conn, f"SELECT le_schedule(%s, {args})", (job, *kw.values()))

    def missed(self, job):
        """(due, finished_at) of the job's missed runs, in due order."""
        with self.conn.cursor() as cur:
            cur.execute("SELECT due, finished_at FROM leaderlock_runs WHERE job = %s AND outcome = 'missed' "
                        "ORDER BY due", (job,))
            return cur.fetchall()

    def history_missed(self, job):
        """The due instants of the job's run_missed transitions in the history
        (numbered or not yet)."""
        with self.conn.cursor() as cur:
            cur.execute("SELECT payload->>'due' FROM leaderlock_history WHERE event = 'run_missed' AND key = %s "
                        "UNION ALL SELECT payload::jsonb->>'due' FROM leaderlock_history_pending "
                        "WHERE event = 'run_missed' AND key = %s", (job, job))
            return sorted(r[0] for r in cur.fetchall())

    def tearDown(self):
        with self.conn.cursor() as cur:
            cur.execute("SELECT le_unschedule(job) FROM leaderlock_schedules WHERE job LIKE %s", (self.key + "%",))

    def test_with_every_replica_killed_each_instant_is_recorded_missed_once_within_a_second(self):
        job = self.key
        listener = Listener()
        self.addCleanup(listener.close)
        self.schedule(job, every="1 second", misfire_grace=f"{GRACE} seconds")
        # Two replicas run the job by its name (the runs take 0.2 s), then
        # both are killed (SIGKILL, their commands with them) for 10 s.
        replicas = [Run(self, "--job", job, "--ttl", "3s", "--id", f"r{i}",
                        command=[sys.executable, CHILD, self.children, "0.2"]) for i in range(2)]
        self.assertTrue(wait_for(lambda: self.succeeded(job) >= 2, timeout=15))
        for r in replicas:
            r.kill()
        for kind, pid, *_ in records(self.children):
            if kind == "start":
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        start = one(self.conn, "SELECT le_now()")
        heard = listener.events(timeout=10.6)
        end = one(self.conn, "SELECT le_now()")
        # Every instant after the kill whose grace (plus the second the
        # worker has) ended before now: each exactly once, and none is
        # missing. At the edges: the instant whose grace ends in the last
        # second may or may not be recorded yet, and a run claimed just
        # before the kill lapses unfinished and is recorded missed once its
        # claim (3 s) and grace are over, as any other.
        rows = [(d, f) for d, f in self.missed(job) if d > start]
        first = int(seconds(start)) + 1
        settled = [d for d in range(first, int(seconds(end)) + 1) if d + GRACE + 1.0 <= seconds(end)]
        dues = [int(seconds(d)) for d, _ in rows]
        claimed_before = {int(seconds(d)) for (d,) in self.query(
            "SELECT due FROM leaderlock_runs WHERE job = %s AND claimed_at IS NOT NULL", (job,))}
        expected = [d for d in settled if d not in claimed_before]
        self.assertEqual([d for d in dues if d in set(expected)], expected, (dues, settled))
        self.assertLessEqual(len(dues) - len(expected), 1, (dues, expected))
        self.assertGreaterEqual(len(dues), 9, dues)
        rows = [(d, f) for d, f in rows if int(seconds(d)) not in claimed_before]
        # Every instant after the schedule was made whose grace (plus the
        # second the worker has) ended before now: each exactly once, and
        # none is missing (the instant whose grace ends in the last second
        # may or may not be recorded yet: the edge).
        # Written at most a second after its grace ended (on the lease clock).
        lags = sorted(seconds(f) - (seconds(d) + GRACE) for d, f in rows)
        p99 = lags[min(len(lags) - 1, int(0.99 * len(lags)))]
        print(f"\n  missed runs recorded: {len(rows)} in {seconds(end) - seconds(start):.1f} s; after the grace "
              f"ended: median {lags[len(lags) // 2] * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms, "
              f"max {lags[-1] * 1000:.0f} ms")
        self.assertTrue(all(0 < x <= 1.0 for x in lags), lags)
        # Each announced: one run_missed notification per recorded instant.
        fmt = "%Y-%m-%dT%H:%M:%S.%fZ"
        told = {e["due"] for e in heard if e.get("event") == "run_missed" and e.get("job") == job}
        recorded = {d.astimezone(datetime.timezone.utc).strftime(fmt) for d, _ in self.missed(job) if d > start}
        self.assertLessEqual(len(recorded - told), 1, (recorded - told))   # (the last may come after we stopped)
        self.assertEqual(told - {d.astimezone(datetime.timezone.utc).strftime(fmt) for d, _ in self.missed(job)},
                         set())

    def test_one_roles_many_schedules_keep_no_other_roles_miss_waiting(self):
        """The worker's time is shared out per role: another role's 300
        schedules whose instant is missed at once (the worker settles 100
        schedules a round) do not keep this role's schedule, missed 20 ms
        after them, waiting until all of theirs are recorded: the roles
        take turns from round to round."""
        hog = "ll_schedules_hog"
        admin = connect()
        self.addCleanup(admin.close)   # (after the cleanup below)
        if one(admin, "SELECT 1 FROM pg_roles WHERE rolname = %s", (hog,)):
            one(admin, f"DROP ROLE {hog}")
        one(admin, f"CREATE ROLE {hog} LOGIN")
        prefix = f"hogjob-{os.getpid()}-{time.time_ns()}-"
        mine = prefix + "mine"

        def cleanup():
            # (the schedules first: a round could record misses after the runs went)
            for t in ("leaderlock_schedules", "leaderlock_runs", "leaderlock_jobs"):
                one(admin, f"DELETE FROM {t} WHERE job LIKE %s", (prefix + "%",))
            one(admin, f"DROP ROLE {hog}")
        self.addCleanup(cleanup)
        conn = connect(user=hog)
        self.addCleanup(conn.close)
        made = one(conn, "SELECT count(le_schedule(%s || i, every => '2 seconds', misfire_grace => '0 seconds')) "
                         "FROM generate_series(1, 300) i", (prefix,))
        self.assertEqual(made, 300)
        self.schedule(mine, every="2 seconds", misfire_grace="0.02 seconds")
        # an instant this role's schedule judges (the first, unless one
        # passed since it was made); the others judge it too
        due = one(admin, "SELECT next_due FROM le_schedule_times(%s)", (mine,))
        hogs_missed = ("SELECT ARRAY[count(*)::text, max(finished_at)::text] FROM leaderlock_runs "
                       "WHERE job LIKE %s AND job <> %s AND due = %s AND outcome = 'missed'")

        def recorded():
            return one(admin, hogs_missed, (prefix + "%", mine, due))[0] == "300" \
                and any(d == due for d, _ in self.missed(mine))
        self.assertTrue(wait_for(recorded, timeout=30, interval=0.2),
                        (due, one(admin, hogs_missed, (prefix + "%", mine, due)), self.missed(mine)))
        hogs_last = one(admin, "SELECT max(finished_at) FROM leaderlock_runs WHERE job LIKE %s "
                               "AND job <> %s AND due = %s AND outcome = 'missed'", (prefix + "%", mine, due))
        mine_at = next(at for d, at in self.missed(mine) if d == due)
        print(f"\n  this role's miss recorded {(hogs_last - mine_at).total_seconds():.3f} s before "
              "the other role's last")
        # (each round records with its own time: an earlier round than the last)
        self.assertLess(mine_at, hogs_last, "this role's miss waited behind all of another role's")

    def test_other_roles_many_marks_keep_no_other_roles_alarm_waiting(self):
        """The same for keys expected to be led: two other roles' 1,000
        marks each whose bound ends at once (more than a round takes: the
        worker checks 1,000 marks a round at most) do not keep this role's
        mark, whose bound ends 20 ms after, from its leaderless alarm until
        all of theirs are told."""
        hogs = ["ll_marks_hog1", "ll_marks_hog2"]
        admin = connect()
        self.addCleanup(admin.close)   # (after the cleanup below)
        prefix = f"hogmark-{os.getpid()}-{time.time_ns()}-"
        mine = prefix + "mine"

        def cleanup():
            one(admin, "DELETE FROM leaderlock_expected WHERE key LIKE %s", (prefix + "%",))
            for hog in hogs:
                one(admin, f"DROP ROLE IF EXISTS {hog}")
        cleanup()
        self.addCleanup(cleanup)
        listener = Listener()
        self.addCleanup(listener.close)
        due = time.time() + 6   # (every bound ends then, however long the marking takes)
        within = "make_interval(secs => %s - extract(epoch FROM clock_timestamp())::float8)"
        for n, hog in enumerate(hogs):
            one(admin, f"CREATE ROLE {hog} LOGIN")
            conn = connect(user=hog)
            self.addCleanup(conn.close)
            marked = one(conn, f"SELECT count(le_expect_leader(%s || i, {within})) "
                               "FROM generate_series(1, 1000) i", (f"{prefix}{n}-", due))
            self.assertEqual(marked, 1000)
        self.assertTrue(one(admin, f"SELECT le_expect_leader(%s, {within})", (mine, due + 0.02)))
        self.assertGreater(due, time.time(), "the setup took too long")
        order = []

        def told():
            order.extend(e["key"] for e in listener.events(0.5)
                         if e.get("event") == "leaderless" and e.get("key", "").startswith(prefix))
            return len(order) == 2001
        self.assertTrue(wait_for(told, timeout=60, interval=0), len(order))
        print(f"\n  this role's alarm came after {order.index(mine)} of the other roles' 2000")
        self.assertLess(order.index(mine), 2000, "this role's alarm waited behind all of the others'")

    def test_a_paused_schedule_is_never_missed_and_resumes_from_then(self):
        job = self.key
        self.schedule(job, every="1 second", misfire_grace="0 seconds")
        self.assertTrue(one(self.conn, "SELECT le_pause_schedule(%s)", (job,)))
        time.sleep(3)
        self.assertEqual(self.missed(job), [])
        self.assertIsNone(one(self.conn, "SELECT le_next_due(%s)", (job,)))
        resumed = one(self.conn, "SELECT le_now()")
        self.assertTrue(one(self.conn, "SELECT le_resume_schedule(%s)", (job,)))
        self.assertTrue(wait_for(lambda: len(self.missed(job)) >= 2, timeout=5))
        self.assertTrue(all(d > resumed for d, _ in self.missed(job)), (resumed, self.missed(job)))

    def test_no_instant_twice_nor_lost_across_a_worker_kill_and_a_server_restart(self):
        job = self.key
        cluster = Cluster.main()
        self.schedule(job, every="1 second", misfire_grace=f"{GRACE} seconds")
        start = one(self.conn, "SELECT settled_to FROM leaderlock_schedules WHERE job = %s", (job,))
        time.sleep(2.5)
        pid = cluster.worker_pid()
        self.assertIsNotNone(pid)
        os.kill(pid, signal.SIGKILL)        # the postmaster restarts every backend: a crash
        time.sleep(2.5)
        type(self).conn = None
        cluster.restart("immediate")
        type(self).conn = connect()
        time.sleep(3)
        end = one(self.conn, "SELECT le_now()")
        dues = [int(seconds(d)) for d, _ in self.missed(job)]
        settled = [d for d in range(int(seconds(start)) + 1, int(seconds(end)) + 1)
                   if d + GRACE + 1.0 <= seconds(end)]
        self.assertEqual(dues[:len(settled)], settled, (dues, settled))
        self.assertLessEqual(len(dues) - len(settled), 1, (dues, settled))
        # announced once each: the history has one run_missed per instant
        self.assertTrue(wait_for(lambda: len(self.history_missed(job)) == len(self.missed(job)), timeout=5))
        told = self.history_missed(job)
        self.assertEqual(len(told), len(set(told)), told)

    def test_a_replica_runs_the_registered_schedule_and_follows_its_changes(self):
        job = self.key
        self.schedule(job, every="1 second", misfire_grace="10 seconds")
        from harness import free_port
        port = free_port()
        r = Run(self, "--job", job, "--ttl", "3s", "--metrics", f"127.0.0.1:{port}",
                command=[sys.executable, CHILD, self.children, "0.05"], env={"CLI_CHILD_ENV": "1"})
        self.assertTrue(wait_for(lambda: self.succeeded(job) >= 3, timeout=15))
        changed = one(self.conn, "SELECT le_now()")
        self.schedule(job, every="2 seconds", misfire_grace="10 seconds")
        self.assertTrue(wait_for(lambda: len(self.succeeded_after(job, changed)) >= 3, timeout=15))
        # after the change, the instants are the new schedule's (the first
        # may be the old one's instant already waited for)
        later = self.succeeded_after(job, changed)[1:]
        self.assertTrue(all(int(seconds(d)) % 2 == 0 for d in later), later)
        one(self.conn, "SELECT le_pause_schedule(%s)", (job,))
        time.sleep(1.5)
        paused = one(self.conn, "SELECT le_now()")
        time.sleep(3)
        self.assertEqual(self.succeeded_after(job, paused), [])
        self.assertEqual(self.missed(job), [])
        # its /metrics has the schedule as the database knows it
        import urllib.request
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as resp:
            text = resp.read().decode()
        self.assertIn(f'leaderlock_run_missed_runs{{job="{job}"}} 0\n', text)
        self.assertIn(f'leaderlock_run_last_missed_timestamp_seconds{{job="{job}"}} NaN\n', text)
        self.assertIn(f'leaderlock_run_misfire_grace_seconds{{job="{job}"}} 10.000\n', text)
        r.signal(signal.SIGTERM)
        self.assertEqual(r.wait(), 128 + signal.SIGTERM)

    def query(self, sql, args):
        with self.conn.cursor() as cur:
            cur.execute(sql, args)
            return cur.fetchall()

    def succeeded(self, job):
        return one(self.conn, "SELECT count(*) FROM leaderlock_runs WHERE job = %s AND outcome = 'succeeded'", (job,))

    def succeeded_after(self, job, t):
        with self.conn.cursor() as cur:
            cur.execute("SELECT due FROM leaderlock_runs WHERE job = %s AND outcome = 'succeeded' AND claimed_at > %s "
                        "ORDER BY due", (job, t))
            return [r[0] for r in cur.fetchall()]

    def test_overlap_forbid_never_runs_two_commands_of_a_job_at_once(self):
        job = self.key
        self.schedule(job, every="1 second", overlap="forbid", misfire_grace="3 seconds")
        runs = [Run(self, "--job", job, "--ttl", "3s", "--id", f"r{i}",
                    command=[sys.executable, CHILD, self.children, "1.5"]) for i in range(5)]
        time.sleep(10)
        for r in runs:
            r.signal(signal.SIGTERM)
        for r in runs:
            r.wait()
        spans = {}
        for kind, pid, _term, t in records(self.children):
            if kind == "start":
                spans[pid] = [t, None]
            elif kind in ("exit", "term") and pid in spans:
                spans[pid][1] = t
        spans = sorted((s, e if e is not None else s) for s, e in spans.values())
        self.assertGreaterEqual(len(spans), 4, spans)
        for (s1, e1), (s2, e2) in zip(spans, spans[1:]):
            self.assertGreaterEqual(s2, e1, f"two commands of the job at once: {spans}")

    def test_overlap_replace_fences_off_the_earlier_runner(self):
        job = self.key
        self.schedule(job, every="1 second", misfire_grace="1 hour", overlap="replace")
        made = one(self.conn, "SELECT date_trunc('second', active_since) FROM leaderlock_schedules WHERE job = %s",
                   (job,))
        d1, d2 = made + datetime.timedelta(seconds=1), made + datetime.timedelta(seconds=2)
        self.assertTrue(wait_for(lambda: one(self.conn, "SELECT le_now() >= %s", (d2,)), timeout=5))
        with self.conn.cursor() as cur:
            cur.execute("CREATE TEMP TABLE fenced (job text PRIMARY KEY, term bigint, by text)")
            cur.execute("INSERT INTO fenced VALUES (%s, 0, NULL)", (job,))
        fenced_write = ("UPDATE fenced SET term = %s, by = %s WHERE job = %s AND term < %s")
        t1 = one(self.conn, "SELECT le_claim_run(%s, %s, 'a', '1 minute')", (job, d1))
        with self.conn.cursor() as cur:
            cur.execute(fenced_write, (t1, "a", job, t1))   # the first runner writes
            self.assertEqual(cur.rowcount, 1)
        t2 = one(self.conn, "SELECT le_claim_run(%s, %s, 'b', '1 minute')", (job, d2))
        self.assertGreater(t2, t1)
        # the first claim was ended by the second: its runner's renewal and
        # finish are refused, and its next fenced write too, once b wrote
        self.assertFalse(one(self.conn, "SELECT le_renew_run(%s, %s, 'a')", (job, d1)))
        with self.conn.cursor() as cur:
            cur.execute(fenced_write, (t2, "b", job, t2))
            self.assertEqual(cur.rowcount, 1)
            cur.execute(fenced_write, (t1, "a", job, t1))   # the replaced runner, late
            self.assertEqual(cur.rowcount, 0)
        self.assertFalse(one(self.conn, "SELECT le_finish_run(%s, %s, 'a', %s, true)", (job, d1, t1)))
        self.assertEqual(one(self.conn, "SELECT outcome FROM leaderlock_runs WHERE job = %s AND term = %s", (job, t1)),
                         "replaced")

    def test_an_expected_key_left_without_a_holder_gets_one_leaderless_interval(self):
        key = self.key
        listener = Listener()
        self.addCleanup(listener.close)
        self.assertTrue(one(self.conn, "SELECT le_try_acquire(%s, 'a', '1.5 seconds')", (key,)))
        self.assertTrue(one(self.conn, "SELECT le_expect_leader(%s, '1 second')", (key,)))
        lapsed = one(self.conn, "SELECT expires_at FROM leaderlock WHERE key = %s", (key,))
        # its holder dies: the lease lapses, and 1 s later the key is leaderless
        heard = listener.events(timeout=5, until=lambda e: e.get("event") == "leaderless")
        self.assertTrue(one(self.conn, "SELECT le_try_acquire(%s, 'b', '1 minute')", (key,)))
        began = one(self.conn, "SELECT acquired_at FROM leaderlock WHERE key = %s", (key,))
        heard += listener.events(timeout=3, until=lambda e: e.get("event") == "leaderless_end")
        told = [e for e in heard if e.get("key") == key and e.get("event", "").startswith("leaderless")]
        self.assertEqual([e["event"] for e in told], ["leaderless", "leaderless_end"], told)
        fmt = "%Y-%m-%dT%H:%M:%S.%fZ"
        self.assertEqual(told[0]["since"], lapsed.astimezone(datetime.timezone.utc).strftime(fmt))
        self.assertEqual(told[1]["until"], began.astimezone(datetime.timezone.utc).strftime(fmt))
        # in the history once each, and counted
        with self.conn.cursor() as cur:
            cur.execute("SELECT event FROM leaderlock_history WHERE key = %s AND event LIKE 'leaderless%%' "
                        "UNION ALL SELECT event FROM leaderlock_history_pending "
                        "WHERE key = %s AND event LIKE 'leaderless%%' ORDER BY 1", (key, key))
            self.assertEqual([r[0] for r in cur.fetchall()], ["leaderless", "leaderless_end"])
        self.assertEqual(one(self.conn, "SELECT intervals FROM leaderlock_expected WHERE key = %s", (key,)), 1)
        self.assertTrue(one(self.conn, "SELECT le_unexpect_leader(%s)", (key,)))
        one(self.conn, "SELECT le_release(%s, 'b')", (key,))

    def test_the_database_reports_a_job_whose_replicas_all_died(self):
        # `leaderlock metrics`, run beside the database: the job overdue past
        # its grace, its misses counted; names written by other roles escaped
        import urllib.request
        from harness import free_port
        from test_cli import CLI, dsn
        short = f"j{random.randrange(1 << 30)}"
        job = short + '-"odd"\nname'
        self.schedule(job, every="1 second", misfire_grace="0 seconds")
        self.addCleanup(lambda: one(self.conn, "SELECT le_unschedule(%s)", (job,)))
        self.assertTrue(one(self.conn, "SELECT le_expect_leader(%s, '1 second')", (self.key,)))
        self.addCleanup(lambda: one(self.conn, "SELECT le_unexpect_leader(%s)", (self.key,)))
        port = free_port()
        proc = subprocess.Popen([CLI, "--dsn", dsn(), "metrics", "--listen", f"127.0.0.1:{port}", "--every", "200ms"],
                                stderr=subprocess.DEVNULL)
        self.addCleanup(proc.kill)

        def scrape():
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                    return r.read().decode()
            except OSError:
                return ""
        label = short + '-\\"odd\\"\\\\nname'   # (text logs' \\n, then Prometheus' escapes)
        samples = {}

        def overdue_past_grace():
            samples.clear()
            for line in scrape().splitlines():
                if not line.startswith("#") and "{" in line:
                    name_labels, value = line.rsplit(" ", 1)
                    samples[name_labels] = float(value)
            return samples.get(f'leaderlock_run_overdue_seconds{{job="{label}"}}', 0) > 1.5 \
                and samples.get(f'leaderlock_run_missed_runs{{job="{label}"}}', 0) >= 1 \
                and samples.get(f'leaderlock_key_leaderless_seconds{{key="{self.key}"}}', 0) > 0
        self.assertTrue(wait_for(overdue_past_grace, timeout=10), samples)
        self.assertEqual(samples[f'leaderlock_run_misfire_grace_seconds{{job="{label}"}}'], 0)
        # when the newest missed run was recorded: the server's clock, a moment ago
        recorded = samples[f'leaderlock_run_last_missed_timestamp_seconds{{job="{label}"}}']
        newest = one(self.conn, "SELECT extract(epoch FROM max(finished_at))::float8 FROM leaderlock_runs "
                                "WHERE job = %s AND outcome = 'missed'", (job,))
        self.assertLessEqual(recorded, newest + 0.0005)   # printed to the millisecond, rounded
        self.assertLess(newest - recorded, 5, "not the newest missed run's")
        self.assertEqual(samples[f'leaderlock_schedule_paused{{job="{label}"}}'], 0)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as r:
            self.assertEqual(r.status, 200)
        # and `leaderlock runs` shows the schedule, its name escaped
        out = subprocess.run([CLI, "--dsn", dsn(), "runs", "--job", job], capture_output=True, text=True, timeout=30)
        self.assertEqual(out.returncode, 0, out.stderr)
        line = out.stdout.splitlines()[0]
        self.assertIn('schedule "' + short + '-\\"odd\\"\\nname": every 1s, misfire grace 0s', line)
        self.assertRegex(line, r"overdue [0-9.]+s; [0-9]+ missed kept$")

    def test_a_replica_registers_its_flags_and_another_runs_the_job_by_name(self):
        job = self.key
        first = Run(self, "--job", job, "--every", "1s", "--register", "--overlap", "forbid", "--ttl", "3s",
                    "--id", "flags", command=[sys.executable, CHILD, self.children, "0.05"])
        self.assertTrue(wait_for(lambda: one(self.conn, "SELECT overlap FROM leaderlock_schedules WHERE job = %s",
                                             (job,)) == "forbid", timeout=10))
        self.assertEqual(one(self.conn, "SELECT extract(epoch FROM every) FROM leaderlock_schedules WHERE job = %s",
                             (job,)), 1)
        first.signal(signal.SIGTERM)
        self.assertEqual(first.wait(), 128 + signal.SIGTERM)
        since = one(self.conn, "SELECT le_now()")
        by_name = Run(self, "--job", job, "--ttl", "3s", "--id", "by-name",
                      command=[sys.executable, CHILD, self.children, "0.05"])
        self.assertTrue(wait_for(lambda: one(self.conn, "SELECT count(*) FROM leaderlock_runs WHERE job = %s "
                                                        "AND holder = 'by-name' AND outcome = 'succeeded' "
                                                        "AND claimed_at > %s", (job, since)) >= 2, timeout=10))
        by_name.signal(signal.SIGTERM)
        self.assertEqual(by_name.wait(), 128 + signal.SIGTERM)
        # --register goes with --every/--cron; a registered job's grace is its schedule's
        for extra in (["--register"], ["--misfire-grace", "1s"]):
            r = Run(self, "--job", job, *extra, "--ttl", "3s")
            self.assertEqual(r.wait(), 2, extra)
        # a period the database refuses (under a second): refused for good
        r = Run(self, "--job", job + "-fast", "--every", "500ms", "--register", "--ttl", "3s")
        self.assertEqual(r.wait(), 123)

    def test_a_replica_that_comes_back_runs_the_latest_missed_instants_late(self):
        """Backfill 2 (kept by a replica that registers its flags), no
        replica for 3.5 s: a replica run by the job's name runs the 2 latest
        missed instants late, each once, and no more (the latest when it
        looked: an instant may be missed meanwhile)."""
        job = self.key
        self.schedule(job, every="1 second", misfire_grace="0.3 seconds", backfill=2)
        flags = Run(self, "--job", job, "--every", "1s", "--register", "--ttl", "3s",
                    command=[sys.executable, CHILD, self.children, "0.05"])
        self.assertTrue(wait_for(lambda: one(self.conn, "SELECT extract(epoch FROM misfire_grace) "
                                                        "FROM leaderlock_schedules WHERE job = %s", (job,)) == 1,
                                 timeout=10))
        self.assertEqual(one(self.conn, "SELECT backfill FROM leaderlock_schedules WHERE job = %s", (job,)), 2,
                         "--register reset the backfill")
        flags.signal(signal.SIGKILL)
        flags.wait()
        time.sleep(3.5)
        self.assertTrue(wait_for(lambda: len(self.missed(job)) >= 3, timeout=2))
        r = Run(self, "--job", job, "--ttl", "3s", "--id", "late",
                command=[sys.executable, CHILD, self.children, "0.05"])

        def run_late():
            return [row[0] for row in self.query(
                "SELECT due FROM leaderlock_runs WHERE job = %s AND outcome = 'succeeded' "
                "AND backfilled_at IS NOT NULL ORDER BY due", (job,))]

        def latest_missed():
            return [row[0] for row in self.query(
                "SELECT due FROM leaderlock_runs WHERE job = %s "
                "AND (outcome = 'missed' OR backfilled_at IS NOT NULL) ORDER BY due", (job,))][-2:]

        self.assertTrue(wait_for(lambda: len(run_late()) == 2, timeout=5), run_late())
        time.sleep(1.2)
        self.assertEqual(run_late(), latest_missed(), "not the latest missed, or more than the backfill")
        r.signal(signal.SIGTERM)
        self.assertEqual(r.wait(), 128 + signal.SIGTERM)

    def test_a_change_to_a_shorter_period_neither_floods_nor_misses_the_past(self):
        # A replica that waited for an hourly instant when the schedule became
        # every second: it looks back one grace, never to the last hour, and
        # nothing before the change is run or recorded missed.
        job = self.key
        self.schedule(job, every="1 hour")
        r = Run(self, "--job", job, "--ttl", "3s", command=[sys.executable, CHILD, self.children, "0.02"])
        time.sleep(2)
        changed = one(self.conn, "SELECT le_now()")
        self.schedule(job, every="1 second", misfire_grace="5 seconds")
        self.assertTrue(wait_for(lambda: self.succeeded(job) >= 3, timeout=10))
        r.signal(signal.SIGTERM)
        r.wait()
        with self.conn.cursor() as cur:
            cur.execute("SELECT due, outcome FROM leaderlock_runs WHERE job = %s AND due < %s - interval '1 second' "
                        "AND due > %s - interval '1 hour'", (job, changed, changed))
            before = cur.fetchall()
        # at most the hourly instant the replica claimed within its grace
        self.assertLessEqual(len(before), 1, before)
        self.assertTrue(all(o == "succeeded" for _, o in before), before)
        self.assertEqual(self.missed(job), [])

    def test_a_replica_says_when_its_job_has_no_schedule_and_when_it_has_one(self):
        job = self.key
        r = Run(self, "--job", job, "--ttl", "3s", command=[sys.executable, CHILD, self.children, "0.02"])
        self.assertTrue(wait_for(lambda: r.events("no_schedule"), timeout=10))
        self.schedule(job, every="1 second", misfire_grace="5 seconds")
        self.assertTrue(wait_for(lambda: r.events("schedule_found") and self.succeeded(job) >= 1, timeout=10))
        one(self.conn, "SELECT le_pause_schedule(%s)", (job,))
        self.assertTrue(wait_for(lambda: len(r.events("no_schedule")) == 2, timeout=10))
        self.assertEqual(len(r.events("schedule_found")), 1)
        r.signal(signal.SIGTERM)
        self.assertEqual(r.wait(), 128 + signal.SIGTERM)
