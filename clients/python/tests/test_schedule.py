"""Scheduled runs (contract 22) in the Python client.

- Due instants (no server): every period at multiples of it since the Unix
  epoch; cron in a time zone by the Rust client's rules (the same vectors
  as crates/client/src/schedule.rs, across daylight saving in Paris); the
  expressions refused because crontab and the Rust client read them
  differently.
- Against a real server (LEADERLOCK_DSN, a superuser's: it backdates
  claims, makes a role, and pauses a runner with SIGSTOP, so it runs on the
  server's host): three replicas of one job run each due instant once, with
  distinct terms growing with the due instants, each recorded succeeded; a
  function that raises is recorded failed with its type and message; a run
  whose renewal is refused (its claim backdated and claimed by another) is
  lost at once; a run whose renewals cannot reach the server is lost at its
  local deadline, not a step later; tests/run_candidate.py, twice, runs
  each due instant once and exits 143 on SIGTERM; paused past its ttl, it
  takes no step after its deadline and another replica runs the run again
  in a higher term; a job run by its name alone follows its schedule kept
  in the database (le_schedule): its runs, a change of period, a pause.
"""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import uuid
from datetime import datetime, timedelta, timezone

import psycopg
from psycopg.conninfo import make_conninfo

import leaderlock
from leaderlock import _schedule

from support import DSN, sql, wait

RUNNER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "run_candidate.py")
CLIENT_PATH = os.path.dirname(os.path.dirname(os.path.abspath(leaderlock.__file__)))
ROLE = "ll_py_sched"  # a role whose connections the deadline test refuses


def at(text):
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def following(schedule, start, n):
    """The n due instants after `start`, as RFC 3339 text."""
    out, t = [], at(start)
    for _ in range(n):
        t = schedule.next_after(t)
        out.append(t.strftime("%Y-%m-%dT%H:%M:%S.%fZ").replace(".000000Z", "Z"))
    return out


def rows(query, args=()):
    with psycopg.connect(DSN, autocommit=True) as c:
        return c.execute(query, args).fetchall()


def runs_of(job):
    """{due: (holder, term, outcome, detail)} of the job's runs."""
    return {r[0]: r[1:] for r in rows("SELECT due, holder, term, outcome, detail FROM leaderlock_runs "
                                      "WHERE job = %s", (job,))}


class DueInstantsTest(unittest.TestCase):
    def test_every_period_is_aligned_to_the_epoch(self):
        s = leaderlock.Schedule.every(300)
        self.assertEqual(following(s, "2026-11-27T10:02:03Z", 2), ["2026-11-27T10:05:00Z", "2026-11-27T10:10:00Z"])
        self.assertEqual(s.at_or_after(at("2026-11-27T10:05:00Z")), at("2026-11-27T10:05:00Z"))
        self.assertEqual(s.next_after(at("2026-11-27T10:05:00Z")), at("2026-11-27T10:10:00Z"))
        ms = leaderlock.Schedule.every(timedelta(milliseconds=300))
        self.assertEqual(following(ms, "2026-11-27T10:00:00.250001Z", 2),
                         ["2026-11-27T10:00:00.300000Z", "2026-11-27T10:00:00.600000Z"])
        # in another time zone, the same instants
        paris = at("2026-11-27T11:02:03+01:00")
        self.assertEqual(s.next_after(paris), at("2026-11-27T10:05:00Z"))
        self.assertEqual(leaderlock.Schedule.every(0.3).period, timedelta(milliseconds=300))
        self.assertEqual(s.default_grace, timedelta(seconds=300))

    def test_a_period_is_whole_milliseconds(self):
        for bad in (0, -1, 0.0005, 0.0015, timedelta(microseconds=1500), "5m", True, float("nan")):
            with self.assertRaises(ValueError, msg=repr(bad)):
                leaderlock.Schedule.every(bad)
        leaderlock.Schedule.every(0.001)
        with self.assertRaises(ValueError):
            leaderlock.Schedule.every(1).next_after(datetime(2026, 1, 1))  # naive: refused

    def test_cron_in_a_time_zone_across_daylight_saving(self):
        """The Rust client's vectors: 02:30 every day in Paris; on
        2026-03-29 that local time does not exist and is skipped, on
        2026-10-25 it occurs twice and is due once, at the first."""
        s = leaderlock.Schedule.cron("30 2 * * *", "Europe/Paris")
        self.assertEqual(following(s, "2026-03-27T12:00:00Z", 3),
                         ["2026-03-28T01:30:00Z", "2026-03-30T00:30:00Z", "2026-03-31T00:30:00Z"])
        self.assertEqual(following(s, "2026-10-24T12:00:00Z", 3),
                         ["2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z", "2026-10-27T01:30:00Z"])
        # Every half hour: the hour that does not exist is skipped (no gap in
        # UTC); the hour that occurs twice runs once, the first time.
        half = leaderlock.Schedule.cron("*/30 * * * *", "Europe/Paris")
        self.assertEqual(following(half, "2026-03-29T00:00:00Z", 3),
                         ["2026-03-29T00:30:00Z", "2026-03-29T01:00:00Z", "2026-03-29T01:30:00Z"])
        self.assertEqual(following(half, "2026-10-24T23:30:00Z", 4),
                         ["2026-10-25T00:00:00Z", "2026-10-25T00:30:00Z", "2026-10-25T02:00:00Z",
                          "2026-10-25T02:30:00Z"])
        self.assertEqual(s.default_grace, timedelta(minutes=5))
        self.assertIsNone(s.period)

    def test_five_fields_mean_minutes_six_seconds_first(self):
        self.assertEqual(following(leaderlock.Schedule.cron("0 3 * * *", "UTC"), "2026-11-27T10:00:00Z", 1),
                         ["2026-11-28T03:00:00Z"])
        self.assertEqual(following(leaderlock.Schedule.cron("*/20 * * * * *"), "2026-11-27T10:00:05Z", 2),
                         ["2026-11-27T10:00:20Z", "2026-11-27T10:00:40Z"])
        # days by name, with a step: Monday, Wednesday, Friday (2026-11-27 is a Friday)
        self.assertEqual(following(leaderlock.Schedule.cron("0 0 * * mon-FRI/2"), "2026-11-27T10:00:00Z", 3),
                         ["2026-11-30T00:00:00Z", "2026-12-02T00:00:00Z", "2026-12-04T00:00:00Z"])
        self.assertEqual(following(leaderlock.Schedule.cron("@weekly"), "2026-11-27T10:00:00Z", 1),
                         ["2026-11-29T00:00:00Z"])
        self.assertEqual(following(leaderlock.Schedule.cron("0 0 12 1 * ?"), "2026-11-27T10:00:00Z", 1),
                         ["2026-12-01T12:00:00Z"])
        self.assertEqual(following(leaderlock.Schedule.cron("0 6 */10 * *"), "2026-11-27T10:00:00Z", 2),
                         ["2026-12-01T06:00:00Z", "2026-12-11T06:00:00Z"])

    def test_expressions_read_differently_elsewhere_are_refused(self):
        for bad, why in (("61 * * * *", "minute"),
                         ("0 3 * * 1", "name the days"),          # Monday in crontab, Sunday in Rust
                         ("0 3 * * 1-5", "name the days"),
                         ("0 3 * * MON#1", "name the days"),
                         ("0 3 1 * MON", "not both"),             # either in crontab, both in Rust
                         ("0 3 */2 * MON", "not both"),
                         ("0 0 L * *", "L and W"),
                         ("0 0 0 * * * 2026", "year"),
                         ("0 0 30 2 *", "day-of-month"),
                         ("* * *", "five fields"),
                         ("", "non-empty")):
            with self.assertRaises(ValueError, msg=bad) as caught:
                leaderlock.Schedule.cron(bad)
            self.assertIn(why, str(caught.exception), bad)
        with self.assertRaises(ValueError):
            leaderlock.Schedule.cron("0 3 * * *", "Mars/Olympus")

    def test_at_most_one_schedule(self):
        for kw in ({"every": 1, "cron": "* * * * *"}, {"every": 1, "tz": "UTC"}, {"tz": "UTC"},
                   {"every": 1, "schedule": leaderlock.Schedule.every(1)}):
            with self.assertRaises(ValueError, msg=kw):
                leaderlock.scheduled(DSN, "j", **kw)
        # none: the job's schedule kept in the database, whose misfire grace counts
        job = leaderlock.scheduled(DSN, "j")(print)
        self.assertTrue(job.schedule.is_registered)
        self.assertEqual(repr(job.schedule), "Schedule.registered()")
        self.assertIsNone(job.schedule.next_after(datetime.now(timezone.utc)))
        with self.assertRaises(ValueError):
            leaderlock.scheduled(DSN, "j", misfire_grace=5)(print)
        with self.assertRaises(ValueError):
            leaderlock.scheduled(DSN, "", every=1)(print)
        with self.assertRaises(ValueError):
            leaderlock.scheduled(DSN, "j", every=1, ttl=0)(print)

    def test_a_detail_is_cut_at_a_character_within_1000_bytes(self):
        d = _schedule.detail_of(ValueError("x" + "é" * 700))
        self.assertTrue(d.startswith("ValueError: xéé"))
        self.assertEqual(len(d.encode()), 999)  # 13 bytes, 493 two-byte characters, not half of one more
        self.assertEqual(_schedule.detail_of(KeyError()), "KeyError")
        self.assertEqual(_schedule.detail_of(ValueError("a\x00b\udc80")), "ValueError: a\\x00b\\udc80")


class ScheduledRunsTest(unittest.TestCase):
    def setUp(self):
        self.job = f"py-{self._testMethodName[5:40]}-{uuid.uuid4().hex[:8]}"

    def test_three_replicas_run_each_due_instant_once(self):
        ran, lock = [], threading.Lock()

        def replica(me):
            def fn(run):
                run.check()
                with lock:
                    ran.append((run.due, run.term, me))
                time.sleep(0.03)
            return fn

        jobs = [leaderlock.scheduled(DSN, self.job, every=timedelta(milliseconds=300), ttl=2.0,
                                     misfire_grace=2.0, id=f"r{i}")(replica(f"r{i}")) for i in range(3)]
        began = sql("SELECT le_now()")
        for j in jobs:
            j.start()
        time.sleep(2.5)
        for j in jobs:
            j.stop(10)
        for j in jobs:
            self.assertIsNone(j.error)
            self.assertFalse(j._thread.is_alive())
        dues = sorted(d for d, _, _ in ran)
        self.assertEqual(len(dues), len(set(dues)), f"a due instant ran twice: {ran}")
        self.assertGreaterEqual(len(dues), 8, ran)  # 2 s of grace looked back, and 2.5 s
        gaps = {b - a for a, b in zip(dues, dues[1:])}
        self.assertEqual(gaps, {timedelta(milliseconds=300)}, f"a due instant did not run: {dues}")
        terms = [term for _, term, _ in ran]
        self.assertEqual(len(terms), len(set(terms)), f"a term given twice: {ran}")
        # Terms grow with the due instants, once the runs due before the
        # replicas started (2 s looked back: several due at once, claimed
        # in whatever order their claims race) are behind them.
        later = [term for due, term, _ in sorted(ran) if due >= began]
        self.assertGreaterEqual(len(later), 6, ran)
        self.assertEqual(later, sorted(later), f"terms not growing with the due instants: {sorted(ran)}")
        table = runs_of(self.job)
        # An instant due before the start, looked back at, is missed when no
        # replica claimed it within its grace (a loaded host: connecting took
        # longer); every instant due since the start ran.
        late = {due for due, row in table.items() if row[2] == "missed" and due < began}
        self.assertEqual(set(table) - late, set(dues))
        for due, term, me in ran:
            self.assertEqual(table[due], (me, term, "succeeded", None), due)

    def test_a_function_that_raises_is_recorded_failed(self):
        stop = threading.Event()

        def fn(run):
            stop.set()  # the loop returns once this run is recorded
            raise ValueError("no mail server: " + "é" * 600)

        with self.assertLogs("leaderlock", "ERROR") as logged:
            leaderlock.run_scheduled(DSN, self.job, fn, every=timedelta(milliseconds=200), ttl=2.0,
                                     misfire_grace=1.0, id="r1", stop=stop)
        self.assertIn("raised", "\n".join(logged.output))
        (row,) = runs_of(self.job).values()
        holder, term, outcome, detail = row
        self.assertEqual((holder, outcome), ("r1", "failed"))
        self.assertTrue(detail.startswith("ValueError: no mail server: éé"), detail)
        self.assertLessEqual(len(detail.encode()), 1000)
        self.assertTrue(("ValueError: no mail server: " + "é" * 600).startswith(detail))

    def test_a_job_run_by_its_name_alone_follows_its_schedule_in_the_database(self):
        """Registered every second, run by name alone: runs; changed to
        every 2 seconds: the runs after the change are at even seconds;
        paused: no claim; resumed: runs again. le_unschedule at the end."""
        job = self.job
        sql("SELECT le_schedule(job => %s, every => interval '1 second')", (job,))
        self.addCleanup(sql, "SELECT le_unschedule(job => %s)", (job,))
        ran, lock = [], threading.Lock()

        def fn(run):
            run.check()
            with lock:
                ran.append(run.due)

        replica = leaderlock.scheduled(DSN, job, ttl=2.0, id="reg")(fn)
        self.assertTrue(replica.schedule.is_registered)
        replica.start()
        self.addCleanup(replica.stop, 10)

        def succeeded(after=None):
            return [r[0] for r in rows("SELECT due FROM leaderlock_runs WHERE job = %s AND holder = 'reg' "
                                       "AND outcome = 'succeeded' AND (%s::timestamptz IS NULL OR due > %s) "
                                       "ORDER BY due", (job, after, after))]

        self.assertTrue(wait(lambda: len(succeeded()) >= 2, 4), f"{succeeded()}; error {replica.error!r}")
        self.assertTrue(all(d.microsecond == 0 for d in succeeded()), succeeded())

        changed = sql("SELECT le_now()")
        sql("SELECT le_schedule(job => %s, every => interval '2 seconds')", (job,))
        # the first run after the change may be an instant already waited for
        # (made pending before the change), due within a second of it
        later = changed + timedelta(seconds=1)
        self.assertTrue(wait(lambda: len(succeeded(later)) >= 1, 4), f"{succeeded(changed)}; {replica.error!r}")
        time.sleep(0.5)
        after = succeeded(later)
        self.assertTrue(all(d.second % 2 == 0 and d.microsecond == 0 for d in after),
                        f"not every 2 seconds after the change at {changed}: {after}")

        self.assertTrue(sql("SELECT le_pause_schedule(job => %s)", (job,)))
        paused = sql("SELECT le_now()")
        time.sleep(2.5)
        claimed = rows("SELECT due, claimed_at FROM leaderlock_runs WHERE job = %s AND claimed_at > %s",
                       (job, paused))
        self.assertEqual(claimed, [], "claimed while paused")
        self.assertIsNone(replica.error)
        self.assertTrue(replica._thread.is_alive())

        self.assertTrue(sql("SELECT le_resume_schedule(job => %s)", (job,)))
        resumed = sql("SELECT le_now()")
        self.assertTrue(wait(lambda: len(succeeded(resumed)) >= 1, 3.5), f"no run after the resume: {ran}")
        replica.stop(10)
        self.assertIsNone(replica.error)
        self.assertEqual(len(ran), len(set(ran)), f"a due instant ran twice: {ran}")

    def test_a_replica_that_comes_back_runs_the_latest_missed_instants_late(self):
        """Backfill 2, no replica for 3.5 s (the worker records the instants
        missed): a replica run by the job's name runs the 2 latest of them
        late, each once, and no more."""
        job = self.job
        sql("SELECT le_schedule(job => %s, every => interval '1 second', "
            "misfire_grace => interval '0.3 seconds', backfill => 2)", (job,))
        self.addCleanup(sql, "SELECT le_unschedule(job => %s)", (job,))
        time.sleep(3.5)

        def missed():
            return [r[0] for r in rows("SELECT due FROM leaderlock_runs WHERE job = %s AND outcome = 'missed' "
                                       "ORDER BY due", (job,))]

        self.assertTrue(wait(lambda: len(missed()) >= 3, 2), missed())
        ran, lock = [], threading.Lock()

        def fn(run):
            run.check()
            with lock:
                ran.append(run.due)

        replica = leaderlock.scheduled(DSN, job, ttl=3.0, id="late")(fn)
        replica.start()
        self.addCleanup(replica.stop, 10)

        def run_late():
            return [r[0] for r in rows("SELECT due FROM leaderlock_runs WHERE job = %s AND outcome = 'succeeded' "
                                       "AND backfilled_at IS NOT NULL ORDER BY due", (job,))]

        def latest_missed():  # (the latest when the replica looked: one may be missed meanwhile)
            return [r[0] for r in rows("SELECT due FROM leaderlock_runs WHERE job = %s "
                                       "AND (outcome = 'missed' OR backfilled_at IS NOT NULL) ORDER BY due",
                                       (job,))][-2:]

        self.assertTrue(wait(lambda: len(run_late()) == 2, 3), f"{run_late()}; {replica.error!r}")
        time.sleep(1.2)
        latest = latest_missed()
        self.assertEqual(run_late(), latest, "not the latest missed, or more than the backfill")
        replica.stop(10)
        self.assertIsNone(replica.error)
        self.assertTrue(set(latest) <= set(ran), f"{latest} not all in {ran}")
        self.assertEqual(len(ran), len(set(ran)), f"a due instant ran twice: {ran}")

    def run_in_thread(self, dsn, fn, ttl, stop):
        th = threading.Thread(target=leaderlock.run_scheduled, args=(dsn, self.job, fn),
                              kwargs=dict(every=timedelta(hours=1), ttl=ttl, misfire_grace=3600.0, id="me",
                                          stop=stop), daemon=True)
        th.start()
        self.addCleanup(th.join, 10)
        self.addCleanup(stop.set)
        return th

    def test_a_refused_renewal_loses_the_run_at_once(self):
        """Its claim backdated by the superuser and the run claimed by
        another: the next renewal is refused, and from then is_ours() is
        false and check() raises; the lost replica cannot finish it."""
        claimed, stop, seen, effects = threading.Event(), threading.Event(), {}, []

        def fn(run):
            seen["run"] = run
            claimed.set()
            give_up = time.monotonic() + 10
            while time.monotonic() < give_up:
                t = time.monotonic()
                if not run.is_ours():
                    seen["lost_at"] = t  # read before the look
                    seen["after"] = time.monotonic()  # after it: it read the clock before this
                    break
                effects.append(t)
                time.sleep(0.005)
            try:
                run.check()
            except leaderlock.RunLost as e:
                seen["raised"] = e

        ttl = 1.5
        th = self.run_in_thread(DSN, fn, ttl, stop)
        self.assertTrue(claimed.wait(10))
        run = seen["run"]
        with self.assertLogs("leaderlock", "WARNING") as logged:
            sql("UPDATE leaderlock_runs SET expires_at = le_now() - interval '1 second' "
                "WHERE job = %s AND due = %s", (self.job, run.due))
            rival = sql("SELECT le_claim_run(job => %s, due => %s, id => 'rival', ttl => interval '1 hour')",
                        (self.job, run.due))
            taken = time.monotonic()
            self.assertGreater(rival, run.term)
            self.assertTrue(wait(lambda: "raised" in seen, 5), "the run was never lost")
            stop.set()
            th.join(10)
        self.assertIn("is lost: taken", "\n".join(logged.output))
        # lost at the next renewal (every ttl/3), long before its deadline
        self.assertLess(seen["lost_at"] - taken, ttl / 3 + 0.25)
        self.assertLess(seen["lost_at"], run.deadline - 0.3)
        self.assertFalse([t for t in effects if t > seen["lost_at"]])
        e = seen["raised"]
        self.assertEqual((e.reason, e.job, e.due, e.term), (leaderlock.LeaseLost.TAKEN, self.job, run.due, run.term))
        self.assertIsInstance(e, leaderlock.LeaseLost)
        self.assertIn("'rival'", e.detail)
        # the lost replica's finish was refused: the rival's claim stands
        self.assertEqual(runs_of(self.job)[run.due], ("rival", rival, None, None))
        self.assertTrue(sql("SELECT le_finish_run(job => %s, due => %s, id => 'rival', term => %s, "
                            "succeeded => true)", (self.job, run.due, rival)))

    def test_renewals_that_cannot_reach_the_server_lose_the_run_at_its_deadline(self):
        """The replica's role may connect no more and its connection is
        ended: every renewal fails. is_ours() turns false at the local
        deadline (checked 10 ms apart: no side effect at or past it), and
        check() raises after the function blocked past it (2 x ttl)."""
        if not sql("SELECT 1 FROM pg_roles WHERE rolname = %s", (ROLE,)):
            sql(f"CREATE ROLE {ROLE} LOGIN")
        self.addCleanup(sql, f"DROP ROLE IF EXISTS {ROLE}")
        sql(f"ALTER ROLE {ROLE} CONNECTION LIMIT -1")
        self.addCleanup(sql, f"ALTER ROLE {ROLE} CONNECTION LIMIT -1")
        claimed, stop, seen, effects = threading.Event(), threading.Event(), {}, []
        ttl = 1.0

        def fn(run):
            seen["run"] = run
            claimed.set()
            give_up = time.monotonic() + 10
            while time.monotonic() < give_up:
                t = time.monotonic()
                if not run.is_ours():
                    seen["lost_at"] = t  # read before the look
                    seen["after"] = time.monotonic()  # after it: it read the clock before this
                    break
                effects.append(t)
                time.sleep(0.01)
            time.sleep(2 * ttl)  # blocks past the deadline
            try:
                run.check()
                seen["checked"] = True
            except leaderlock.RunLost as e:
                seen["raised"] = e

        th = self.run_in_thread(make_conninfo(DSN, user=ROLE), fn, ttl, stop)
        self.assertTrue(claimed.wait(10))
        run = seen["run"]
        time.sleep(0.5)  # a renewal or so succeeds
        with self.assertLogs("leaderlock", "WARNING") as logged:
            sql(f"ALTER ROLE {ROLE} CONNECTION LIMIT 0")
            sql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (ROLE,))
            cut = time.monotonic()
            self.assertTrue(wait(lambda: "raised" in seen or "checked" in seen, 10), "the function did not end")
            sql(f"ALTER ROLE {ROLE} CONNECTION LIMIT -1")
            stop.set()
            th.join(15)
        self.assertFalse(th.is_alive())
        self.assertIn("is lost: connection_lost", "\n".join(logged.output))
        self.assertNotIn("checked", seen, "check() let a step through past the deadline")
        self.assertIn("lost_at", seen, "is_ours() stayed true")
        self.assertEqual(seen["raised"].reason, leaderlock.LeaseLost.CONNECTION_LOST)
        self.assertLessEqual(run.deadline - cut, ttl)  # the deadline is the last renewal's, not later
        self.assertGreaterEqual(seen["after"], run.deadline)
        self.assertLess(seen["lost_at"] - run.deadline, 0.25)  # a look every 10 ms: a scheduling allowance
        self.assertFalse([t for t in effects if t >= run.deadline], "a side effect at or past the deadline")


def records(path):
    """[(what, id, term, due, unix)] of a runner's records file."""
    out = []
    with open(path) as f:
        for line in f:
            what, me, term, due, unix = line.split()
            out.append((what, me, int(term), due, float(unix)))
    return out


class RunnerTest(unittest.TestCase):
    """tests/run_candidate.py, the runner of the cross-client scenarios."""

    def setUp(self):
        self.job = f"py-runner-{uuid.uuid4().hex[:8]}"
        self.work = tempfile.mkdtemp(prefix="leaderlock-py-sched-")  # removed when the test passes
        self.records = os.path.join(self.work, "records")
        self.procs = {}

    def start(self, me, period_ms, ttl, grace, work):
        log = open(os.path.join(self.work, f"{me}.log"), "w")
        self.procs[me] = subprocess.Popen(
            [sys.executable, RUNNER, DSN, self.job, me, str(period_ms), str(ttl), str(grace), self.records, str(work)],
            env=dict(os.environ, PYTHONPATH=CLIENT_PATH), stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        log.close()
        self.addCleanup(self.end, self.procs[me])

    def end(self, p):
        if p.poll() is None:
            os.kill(p.pid, signal.SIGCONT)
            p.kill()
            p.wait()

    def log(self, me):
        with open(os.path.join(self.work, f"{me}.log")) as f:
            return f.read()

    def test_two_runners_run_each_due_instant_once_and_exit_143_on_sigterm(self):
        for me in ("a", "b"):
            self.start(me, 200, 2.0, 1.0, 0.05)
        time.sleep(1.5)
        for p in self.procs.values():
            p.send_signal(signal.SIGTERM)
        for me, p in self.procs.items():
            self.assertEqual(p.wait(10), 143, self.log(me))
        recs = records(self.records)
        starts = [(due, term, me) for what, me, term, due, _ in recs if what == "start"]
        self.assertGreaterEqual(len(starts), 3, self.log("a") + self.log("b"))
        dues = [d for d, _, _ in starts]
        self.assertEqual(len(dues), len(set(dues)), f"a due instant ran twice: {starts}")
        # every claim its own term (terms follow the claims' order, which is
        # almost always the due instants': docs/scheduled-runs.md)
        terms = [t for _, t, _ in starts]
        self.assertEqual(len(terms), len(set(terms)), f"a term issued twice: {starts}")
        ends = {(me, term) for what, me, term, _, _ in recs if what == "end"}
        table = {due.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ"): v
                 for due, v in runs_of(self.job).items()}
        for due, term, me in starts:
            ticks = [r for r in recs if r[0] == "tick" and r[2] == term]
            self.assertTrue(ticks and all(r[1] == me and r[3] == due for r in ticks), (due, term))
            holder, t, outcome, detail = table[due]
            self.assertEqual((holder, t), (me, term))
            if (me, term) in ends:
                self.assertEqual(outcome, "succeeded", due)
            else:  # the run under way at SIGTERM
                self.assertEqual(outcome, "failed", due)
                self.assertIn("interrupted", detail)
        self.assertFalse([r for r in recs if r[0] == "lost"])
        self.addCleanup(shutil.rmtree, self.work, True)

    def test_a_runner_paused_past_its_ttl_takes_no_step_after_its_deadline(self):
        """Runner a is stopped (SIGSTOP) past its ttl while it runs; b runs
        the run again when a's claim lapses, in a higher term. Resumed, a
        writes "lost" and no tick: its deadline passed while it was
        stopped."""
        ttl = 1.0
        self.start("a", 3_600_000, ttl, 3600, 4.0)  # the hour's run, due before it started
        self.assertTrue(wait(lambda: os.path.exists(self.records) and
                             any(r[0] == "tick" for r in records(self.records)), 15), self.log("a"))
        self.start("b", 3_600_000, ttl, 3600, 4.0)
        time.sleep(0.3)
        os.kill(self.procs["a"].pid, signal.SIGSTOP)
        stopped = time.time()
        time.sleep(2.5 * ttl)
        os.kill(self.procs["a"].pid, signal.SIGCONT)
        self.assertTrue(wait(lambda: any(r[0] == "lost" for r in records(self.records)), 5), self.log("a"))
        self.assertTrue(wait(lambda: any(r[0] == "end" for r in records(self.records)), 10), self.log("b"))
        recs = records(self.records)
        (a_start,) = [r for r in recs if r[0] == "start" and r[1] == "a"]
        (b_start,) = [r for r in recs if r[0] == "start" and r[1] == "b"]
        self.assertEqual(a_start[3], b_start[3])  # the same run
        self.assertGreater(b_start[2], a_start[2])
        # a's deadline is at most ttl after its last renewal, sent before it was stopped
        late = [r for r in recs if r[1] == "a" and r[0] == "tick" and r[4] > stopped + ttl]
        self.assertFalse(late, f"a took steps after its deadline: {late}")
        self.assertEqual([r[0] for r in recs if r[1] == "a"][-1], "lost")
        self.assertGreater(b_start[4], stopped)
        self.assertTrue(wait(lambda: next(iter(runs_of(self.job).values()))[2] is not None, 5))
        (row,) = runs_of(self.job).values()
        self.assertEqual(row[:3], ("b", b_start[2], "succeeded"))
        self.addCleanup(shutil.rmtree, self.work, True)
