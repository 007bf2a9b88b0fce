"""Issue 37: the leases against the server's wall clock. A step of the wall
clock (forward or back, while the server runs or while it is down) and a
stall of the whole server (every process frozen) change no lease's
remaining time: no rival leads while a holder's window is open, a lapsed
lease is taken over within half a second of its window closing, a holder
that keeps renewing keeps its lease and its term, and a blocking
le_acquire waits its `wait` in real time.

Every window is measured on this process's monotonic clock: a holder may
act until the send time of its last successful call plus the ttl (the
server granted the lease after that, so no earlier); it closes no later
than that call's answer plus the ttl.

The cluster is this class's own, started under libfaketime (Debian
package faketime) with FAKETIME_TIMESTAMP_FILE, FAKETIME_NO_CACHE=1 and
FAKETIME_DONT_FAKE_MONOTONIC=1: the file holds the wall clock's offset from
the real time ("+6", "-6": seconds), re-read at every reading of the wall
clock (gettimeofday, clock_gettime(CLOCK_REALTIME)), while CLOCK_MONOTONIC
stays real. Every server process inherits it from the postmaster, but
libfaketime (0.9.10 to 0.9.12) turns faking off, in a thread-local flag,
while a process waits in select, poll, epoll_wait or nanosleep: a signal
handler running meanwhile reads the real clock, and a process forked in
one keeps the flag for good. PostgreSQL 15's postmaster waits in select
and starts background workers (the leaderlock launcher and workers,
parallel workers) in its signal handlers: without help they would all run
on the real clock while backends run on the faked one, and the postmaster
would time restarts of workers by both (PostgreSQL 16 and later start them
from the postmaster's main loop, clear of the flag). A small library preloaded before
libfaketime (SHIM_C, compiled here) makes those waits plain system calls,
which libfaketime does not see. setUpClass checks that every server
process, background workers included, reads the faked clock (by its
backend_start, with the clock 10 minutes back from the start), and each
step is checked to have reached the server (its clock_timestamp() moved by
the step), so that no test passes for want of a step.
"""
import glob
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import unittest

import psycopg2

from harness import (PG_BIN, PG_MAJOR, WORK, Cluster, Listener, as_postgres, lease_clock_offset, one, wait_for,
                     wait_ready)


def find_libfaketime():
    """The path of libfaketime.so.1 (LEADERLOCK_LIBFAKETIME overrides), or None."""
    given = os.environ.get("LEADERLOCK_LIBFAKETIME")
    if given:
        return given if os.path.exists(given) else None
    for pattern in ("/usr/lib/*/faketime/libfaketime.so.1", "/usr/lib/faketime/libfaketime.so.1",
                    "/usr/local/lib/faketime/libfaketime.so.1"):
        found = sorted(glob.glob(pattern))
        if found:
            return found[0]
    return None


LIBFAKETIME = find_libfaketime()
CC = shutil.which("cc")

# Preloaded before libfaketime: the waits as system calls of their own, so
# that libfaketime's wrappers of them never turn its faking off (module
# docstring). Only the *64 system calls every Linux architecture has.
SHIM_C = r"""
#define _GNU_SOURCE
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int select(int n, fd_set *r, fd_set *w, fd_set *e, struct timeval *tv)
{
    struct timespec ts, *t = NULL;
    if (tv) { ts.tv_sec = tv->tv_sec; ts.tv_nsec = tv->tv_usec * 1000; t = &ts; }
    int rc = syscall(SYS_pselect6, n, r, w, e, t, NULL);
    if (tv) { tv->tv_sec = ts.tv_sec; tv->tv_usec = ts.tv_nsec / 1000; }
    return rc;
}

int poll(struct pollfd *fds, nfds_t n, int ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    return syscall(SYS_ppoll, fds, n, ms < 0 ? NULL : &ts, NULL, _NSIG / 8);
}

int epoll_pwait(int ep, struct epoll_event *ev, int max, int ms, const sigset_t *mask)
{
    return syscall(SYS_epoll_pwait, ep, ev, max, ms, mask, _NSIG / 8);
}

int epoll_wait(int ep, struct epoll_event *ev, int max, int ms)
{
    return epoll_pwait(ep, ev, max, ms, NULL);
}

int nanosleep(const struct timespec *req, struct timespec *rem)
{
    return syscall(SYS_nanosleep, req, rem);
}
"""

BASELINE = -600      # the wall clock's offset at the start, seconds: processes off it are seen
POLL = 0.05          # a rival's le_try_acquire period
LIVENESS = 0.5       # a lapsed lease is taken over within this of its window closing (issue 37)


def mono():
    return time.monotonic()


def sleep_until(t):
    left = t - mono()
    if left > 0:
        time.sleep(left)


class Heard(threading.Thread):
    """Notifications on the leaderlock channel as they arrive (a thread of
    its own), each with `_at`: its receipt on the monotonic clock."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.listener = Listener("postgres", port=port)
        self.got = []
        self.done = threading.Event()

    def run(self):
        while not self.done.is_set():
            for e in self.listener.events(timeout=0.05, until=lambda e: True):
                if isinstance(e, dict):
                    e["_at"] = mono()
                    self.got.append(e)

    def stop(self):
        self.done.set()
        self.join(timeout=5)
        self.listener.close()


class Rival(threading.Thread):
    """Calls le_try_acquire(key, id, ttl) every POLL seconds on a connection
    of its own until one returns true (`won`: that call's send and answer
    times) or `until` (monotonic) passes."""

    def __init__(self, cluster, key, until, who="rival", ttl="3 seconds"):
        super().__init__(daemon=True)
        self.conn = cluster.connect()
        self.key, self.until, self.who, self.ttl = key, until, who, ttl
        self.won = None
        self.error = None
        self.calls = 0
        self.first_sent = None

    def run(self):
        try:
            while mono() < self.until:
                sent = mono()
                got = one(self.conn, "SELECT le_try_acquire(%s, %s, %s::interval)", (self.key, self.who, self.ttl))
                received = mono()
                self.calls += 1
                if self.first_sent is None:
                    self.first_sent = sent
                if got:
                    self.won = (sent, received)
                    return
                sleep_until(sent + POLL)
        except psycopg2.Error as e:
            self.error = e
        finally:
            self.conn.close()


# The same code on every version: tested on 15 and 18 only, which keeps the
# test command under its hour.
@unittest.skipUnless(PG_MAJOR in ("15", "18"), "the lease clock is tested on PostgreSQL 15 and 18")
@unittest.skipUnless(LIBFAKETIME, "libfaketime is not installed (Debian package faketime)")
@unittest.skipUnless(CC, "no C compiler (Debian package build-essential) for the library preloaded with libfaketime")
class ClockTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.faked = tempfile.mkdtemp(prefix="faketime-", dir=WORK)
        os.chmod(cls.faked, 0o755)  # the servers' user reads the files in it
        source, cls.shim = os.path.join(cls.faked, "waits.c"), os.path.join(cls.faked, "waits.so")
        with open(source, "w") as f:
            f.write(SHIM_C)
        subprocess.run([CC, "-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-o", cls.shim, source], check=True)
        os.chmod(cls.shim, 0o755)
        cls.timestamp_file = os.path.join(cls.faked, "offset")
        cls.offset = BASELINE
        cls.write_offset()
        cls.cluster = Cluster.create("clock")
        try:
            # Created and started as every test cluster is; from now on it
            # runs under libfaketime, its clock 10 minutes back.
            cls.cluster.stop()
            started = time.time()
            cls.start_faked()
            c = cls.cluster.connect()
            try:
                assert wait_for(lambda: one(c, "SELECT le_worker_running()"), timeout=15), \
                    "no leaderlock worker serves database postgres"
                cls.check_every_process_is_faked(c, started)
            finally:
                c.close()
        except BaseException:
            cls.cluster.remove()
            shutil.rmtree(cls.faked, ignore_errors=True)
            raise

    @classmethod
    def tearDownClass(cls):
        cls.cluster.remove()
        shutil.rmtree(cls.faked, ignore_errors=True)

    # --- the faked clock ---

    @classmethod
    def write_offset(cls):
        """Replaces the timestamp file in one rename: a server process never
        reads it half written."""
        tmp = cls.timestamp_file + ".new"
        with open(tmp, "w") as f:
            f.write(f"{cls.offset:+d}\n")
        os.chmod(tmp, 0o644)
        os.replace(tmp, cls.timestamp_file)

    @classmethod
    def start_faked(cls, cluster=None, timestamp_file=None):
        """Starts the cluster (or `cluster`) with libfaketime preloaded into
        the postmaster (and so into every process it forks); only the wall
        clock is faked, not file times (NO_FAKE_STAT). as_postgres runs the
        command through sudo with an explicit environment: `env` puts these
        in it."""
        c = cluster or cls.cluster
        as_postgres("env", f"LD_PRELOAD={cls.shim}:{LIBFAKETIME}",
                    f"FAKETIME_TIMESTAMP_FILE={timestamp_file or cls.timestamp_file}",
                    "FAKETIME_NO_CACHE=1", "FAKETIME_DONT_FAKE_MONOTONIC=1", "NO_FAKE_STAT=1",
                    f"{PG_BIN}/pg_ctl", "-D", c.pgdata, "-l", c.log_path, "-w", "-t", "60", "start")
        wait_ready(c.port)

    @classmethod
    def check_every_process_is_faked(cls, conn, since):
        """Every server process started since `since` (this process's wall
        clock), background workers included, started by the faked clock."""
        with conn.cursor() as cur:
            cur.execute("SELECT backend_type, extract(epoch FROM backend_start)::float8 FROM pg_stat_activity "
                        "WHERE backend_start IS NOT NULL")
            started = cur.fetchall()
        now = time.time()
        off = [(kind, round(at - since - cls.offset, 1)) for kind, at in started
               if not since + cls.offset - 1 <= at <= now + cls.offset + 1]
        assert not off, f"server processes not on the faked clock ({cls.offset:+d} s): {off}"
        kinds = {kind for kind, _ in started}
        assert {"leaderlock launcher", "leaderlock worker"} <= kinds, kinds

    def server_skew(self):
        """The server's clock_timestamp() minus this process's wall clock, in seconds."""
        c = self.cluster.connect()
        try:
            before = time.time()
            server = float(one(c, "SELECT extract(epoch FROM clock_timestamp())::float8"))
            after = time.time()
        finally:
            c.close()
        return server - (before + after) / 2

    def step(self, delta, check=True):
        """Steps the server's wall clock by `delta` seconds; returns when
        (monotonic). With `check`, makes sure the server's clock moved."""
        type(self).offset += delta
        self.write_offset()
        at = mono()
        if check:
            self.assert_server_offset()
        return at

    def assert_server_offset(self):
        skew = self.server_skew()
        self.assertLess(abs(skew - self.offset), 0.25,
                        f"the server's clock is {skew:+.3f} s off, not {self.offset:+d} s: libfaketime not in effect")

    def connect(self):
        c = self.cluster.connect()
        self.addCleanup(c.close)
        return c

    def listener(self):
        listener = Listener("postgres", port=self.cluster.port)
        self.addCleanup(listener.close)
        return listener

    # --- 1. a holder that stopped renewing, and a step ---

    TTL = 3.0

    def step_while_the_holder_is_silent(self, delta, key):
        """The holder takes `key` (ttl 3 s) and says nothing more; the wall
        clock is stepped by `delta` 1.2 s later; a rival polls every 50 ms.
        Safety: the rival's true comes back no earlier than the holder's
        window closes (send time of the holder's call + ttl: the lease was
        granted after it). A rival's call sent just before that may be
        served just after, legitimately; its answer cannot come before.
        Liveness: the rival's true comes back within 0.5 s of the latest
        the window can close (the holder's answer + ttl)."""
        heard = Heard(self.cluster.port)
        heard.start()
        self.addCleanup(heard.stop)
        holder = self.connect()
        sent = mono()
        self.assertTrue(one(holder, "SELECT le_try_acquire(%s, 'holder', '3 seconds')", (key,)))
        received = mono()
        opens_earliest, closes_latest = sent + self.TTL, received + self.TTL
        # Polls until well past the liveness bound, so that a late takeover
        # is measured (only a failing build waits that long).
        rival = Rival(self.cluster, key, until=closes_latest + 8.0)
        rival.start()
        sleep_until(sent + 1.2)
        stepped = self.step(delta)
        rival.join(timeout=closes_latest + 10.0 - mono())
        self.assertFalse(rival.is_alive())
        self.assertIsNone(rival.error)
        time.sleep(0.1)
        heard.stop()
        worker = self.cluster.worker_pid()
        announced = [f"{e['event']} {e['holder']} by {'the worker' if e['_pid'] == worker else 'a backend'} "
                     f"{e['_at'] - opens_earliest:+.3f} s" for e in heard.got if e["key"] == key]
        self.assertIsNotNone(rival.won, f"step {delta:+d} s: the rival never acquired "
                                        f"({rival.calls} calls, up to {closes_latest + 8.0 - opens_earliest:.1f} s "
                                        f"after the window closed)")
        won_sent, won_received = rival.won
        print(f"\n  step {delta:+d} s {stepped - sent:.2f} s into a {self.TTL:.0f} s lease: the rival's true call "
              f"sent {won_sent - opens_earliest:+.3f} s, answered {won_received - opens_earliest:+.3f} s from the "
              f"window's close ({rival.calls} calls); announced: {', '.join(announced)}", flush=True)
        self.assertGreaterEqual(won_received, opens_earliest,
                                f"step {delta:+d} s: the rival acquired {opens_earliest - won_received:.3f} s "
                                f"before the holder's window closed: two leaders")
        self.assertLessEqual(won_received - closes_latest, LIVENESS,
                             f"step {delta:+d} s: the rival acquired {won_received - closes_latest:.3f} s after "
                             f"the holder's window closed (at most {LIVENESS} s)")

    def test_a_forward_step_lets_no_rival_in_early(self):
        """+6 s (decided by the wall clock, the lease lapsed 6 s early: two leaders)."""
        self.step_while_the_holder_is_silent(+6, "clock-forward")

    def test_a_backward_step_delays_no_takeover(self):
        """-6 s (decided by the wall clock, the lease lasted 6 s too long: nobody led)."""
        self.step_while_the_holder_is_silent(-6, "clock-back")

    # --- 2. a holder that keeps renewing, and steps ---

    def test_steps_cost_a_renewing_holder_nothing(self):
        """The holder (ttl 3 s) renews every ttl/3 while the wall clock is
        stepped +6, -6, -6, +6 s between its renewals, and a rival polls
        every 50 ms: every renewal is true, the rival never acquires, the
        term never changes, nothing is announced for the key but its
        first acquisition."""
        key = "clock-renewing"
        listener = self.listener()
        holder = self.connect()
        self.assertTrue(one(holder, "SELECT le_try_acquire(%s, 'holder', '3 seconds')", (key,)))
        term = one(holder, "SELECT term FROM leaderlock WHERE key = %s", (key,))
        t0 = mono()
        rival = Rival(self.cluster, key, until=t0 + 5.2)
        rival.start()
        renewals = []
        for i, delta in enumerate((+6, -6, -6, +6)):
            sleep_until(t0 + i + 0.5)
            self.step(delta)
            sleep_until(t0 + i + 1.0)
            sent = mono()
            ok = one(holder, "SELECT le_renew(%s, 'holder')", (key,))
            renewals.append(ok)
            self.assertTrue(ok, f"renewal {i + 1} ({sent - t0:.2f} s), {1000 * (sent - t0 - i - 0.5):.0f} ms after "
                                f"a {delta:+d} s step, returned false: the holder lost its lease")
        rival.join(timeout=10)
        self.assertIsNone(rival.error)
        if rival.won:
            self.fail(f"the rival acquired {rival.won[1] - t0:.3f} s in, while the holder renewed every "
                      f"{self.TTL / 3:.0f} s")
        self.assertEqual(one(holder, "SELECT term FROM leaderlock WHERE key = %s", (key,)), term)
        events = [(e["event"], e["holder"]) for e in listener.until_marker(self.connect()) if e["key"] == key]
        self.assertEqual(events, [("acquired", "holder")])
        print(f"\n  4 steps of 6 s, {len(renewals)} renewals all true, term {term} kept; the rival refused "
              f"{rival.calls} times", flush=True)

    # --- 3. a step during a blocking acquire ---

    def test_a_step_during_a_blocking_acquire_keeps_its_wait(self):
        """le_acquire(key, id, ttl, wait => 2 s) on a lease held for a
        minute, the wall clock stepped 0.7 s into the wait: it returns
        false 2 s after it was sent in real time (+- 0.5 s), for a step
        forward and for one back."""
        wait = 2.0
        holder = self.connect()
        admin = self.connect()
        for delta in (+6, -6):
            with self.subTest(step=delta):
                key = f"clock-wait{delta:+d}"
                self.assertTrue(one(holder, "SELECT le_try_acquire(%s, 'holder', '1 minute')", (key,)))
                waiter = self.connect()
                pid = one(waiter, "SELECT pg_backend_pid()")
                result = {}

                def run():
                    result["sent"] = mono()
                    try:
                        result["got"] = one(waiter, "SELECT le_acquire(%s, 'waiter', '10 seconds', %s::interval)",
                                            (key, f"{wait} seconds"))
                    except psycopg2.Error as e:
                        result["got"] = e
                    result["received"] = mono()
                thread = threading.Thread(target=run, daemon=True)
                thread.start()
                self.assertTrue(wait_for(lambda: "sent" in result, timeout=5))
                sleep_until(result["sent"] + 0.7)
                self.step(delta)
                thread.join(timeout=result["sent"] + wait + 2.0 - mono())
                if thread.is_alive():
                    one(admin, "SELECT pg_cancel_backend(%s)", (pid,))
                    thread.join(timeout=10)
                    self.fail(f"step {delta:+d} s: le_acquire with wait {wait} s had not returned "
                              f"{wait + 2.0:.1f} s after it was sent (cancelled)")
                took = result["received"] - result["sent"]
                print(f"\n  step {delta:+d} s during le_acquire(wait {wait} s): returned {result['got']} "
                      f"after {took:.3f} s", flush=True)
                self.assertIs(result["got"], False)
                self.assertLessEqual(abs(took - wait), 0.5,
                                     f"step {delta:+d} s: le_acquire(wait {wait} s) returned after {took:.3f} s")

    # --- 4. a step while the server is down ---

    def test_a_step_across_a_restart_shortens_no_lease(self):
        """Leases of ttl 10 s, the server stopped (fast), the wall clock
        stepped +30 s while it is down, started again on the same boot of
        the host: the lease clock goes on from where it was (contract 2.2),
        so the step changes nothing. The holder of one renews right away:
        true, same term. A rival polls the other from the restart: refused
        until that holder's window closes (strictly), and it takes the lease
        within 0.5 s of the later of that close and the server being ready."""
        self.restart_with_a_step(another_boot=False)

    def test_after_a_reboot_held_leases_get_their_ttl_from_the_start(self):
        """The same, but the lease clock's file says the last run was on
        another boot of the host (as after a reboot: nothing tells how long
        the host was down, and the wall clock may have stepped meanwhile):
        the lease clock starts from the wall clock, and held leases are
        honoured for their ttl from the server's start. The rival is refused
        until the ttl has passed from pg_ctl start, and takes the lease
        within 0.5 s of the server being ready plus the ttl."""
        self.restart_with_a_step(another_boot=True)

    def restart_with_a_step(self, another_boot):
        # (long enough for a stop and a start on a busy host: the holder's
        # renewal after them must come within it)
        ttl = 10.0
        keys = ("clock-restart-renewed-%d" % another_boot, "clock-restart-silent-%d" % another_boot)
        holder = self.cluster.connect()
        sent = mono()
        for key in keys:
            self.assertTrue(one(holder, "SELECT le_try_acquire(%s, 'holder', %s * interval '1 second')",
                                (key, ttl)))
        received = mono()
        term = one(holder, "SELECT term FROM leaderlock WHERE key = %s", (keys[0],))
        holder.close()
        opens_earliest, closes_latest = sent + ttl, received + ttl
        self.cluster.stop("fast")
        if another_boot:
            path = os.path.join(self.cluster.pgdata, "leaderlock.clock")
            with open(path) as f:
                _, lease, monotonic = f.read().split()
            with open(path, "w") as f:
                f.write(f"00000000-0000-0000-0000-000000000000 {lease} {monotonic}\n")
        self.step(+30, check=False)
        since = time.time()
        starting = mono()
        self.start_faked()
        ready = mono()
        ends_latest = max(closes_latest, ready + ttl) if another_boot else max(closes_latest, ready)
        rival = Rival(self.cluster, keys[1], until=ends_latest + 8.0)
        rival.start()
        holder = self.connect()
        renew_sent = mono()
        renewed = one(holder, "SELECT le_renew(%s, 'holder')", (keys[0],))
        now_term = one(holder, "SELECT term FROM leaderlock WHERE key = %s", (keys[0],))
        other = one(holder, "SELECT le_try_acquire(%s, 'rival', '5 seconds')", (keys[0],))
        self.assert_server_offset()
        rival.join(timeout=ends_latest + 10.0 - mono())
        self.assertFalse(rival.is_alive())
        self.assertIsNone(rival.error)
        won = rival.won[1] if rival.won else float("nan")
        print(f"\n  restart with a +30 s step{' (another boot)' if another_boot else ''}: stopped and ready again "
              f"{ready - received:.2f} s after the leases were taken (started in {ready - starting:.2f} s); "
              f"renewal sent {renew_sent - ready:.3f} s after: {renewed} (term {term} -> {now_term}); the rival's "
              f"true answered {won - opens_earliest:+.3f} s from the window's close, "
              f"{won - starting - ttl:+.3f} s from pg_ctl start + ttl, {won - ready - ttl:+.3f} s from ready + ttl "
              f"({rival.calls} calls)", flush=True)
        self.assertTrue(renewed, "the holder's renewal right after the restart returned false")
        self.assertEqual(now_term, term)
        self.assertIs(other, False)
        self.assertIsNotNone(rival.won, "the rival never acquired the lease that was not renewed")
        with self.subTest("the holder's window"):
            self.assertGreaterEqual(won, opens_earliest, f"the rival acquired {opens_earliest - won:.3f} s before "
                                                         f"the holder's window closed: two leaders")
        if another_boot:
            with self.subTest("the ttl from the start"):
                self.assertGreaterEqual(won, starting + ttl, f"the rival acquired {starting + ttl - won:.3f} s "
                                                             f"before the ttl had passed from the server's start")
        with self.subTest("liveness"):
            self.assertLessEqual(won - ends_latest, LIVENESS,
                                 f"the rival acquired {won - ends_latest:.3f} s after the lease should have ended")
        self.check_every_process_is_faked(holder, since)

    # --- 5. a stall of the whole server ---

    def server_pids(self):
        """The postmaster and its children (every server process)."""
        pm = self.cluster.postmaster_pid()
        pids = [pm]
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pm:
                pids.append(int(entry))
        return pids

    def freeze(self, stopped):
        """SIGSTOPs the postmaster (it forks nothing after that), then every
        child; adds the pids stopped to `stopped` as it goes."""
        for _ in range(2):  # a child forked as the postmaster stopped
            for pid in self.server_pids():
                if pid not in stopped:
                    try:
                        os.kill(pid, signal.SIGSTOP)
                    except ProcessLookupError:  # it exited meanwhile
                        continue
                    stopped.append(pid)

    @staticmethod
    def thaw(pids):
        for pid in pids:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass

    def test_a_stall_of_the_whole_server_costs_no_lease(self):
        """20 holders (ttl 2 s: eight periods, for a busy host, and less
        than the stall) renew every 250 ms; every server process is stopped
        for 3 s (the calls sent meanwhile wait) and continued: every
        renewal is true, no term changes, nothing is announced."""
        n, period = 20, 0.25
        keys = [f"clock-stall-{i}" for i in range(n)]
        listener = self.listener()
        conns = [self.connect() for _ in keys]
        for c, key in zip(conns, keys):
            self.assertTrue(one(c, "SELECT le_try_acquire(%s, 'holder', '2 seconds')", (key,)))
        admin = self.connect()
        terms = one(admin, "SELECT json_object_agg(key, term) FROM leaderlock WHERE key = ANY(%s)", (keys,))
        done = threading.Event()
        calls = {key: [] for key in keys}  # (sent, received, result)

        def renew(c, key):
            try:
                while not done.is_set():
                    sent = mono()
                    ok = one(c, "SELECT le_renew(%s, 'holder')", (key,))
                    calls[key].append((sent, mono(), ok))
                    if not ok:
                        return
                    sleep_until(sent + period)
            except psycopg2.Error as e:
                calls[key].append((sent, mono(), e))
        threads = [threading.Thread(target=renew, args=(c, key), daemon=True) for c, key in zip(conns, keys)]
        for t in threads:
            t.start()
        time.sleep(1.0)
        stopped = []
        try:
            self.freeze(stopped)
            frozen = mono()
            time.sleep(3.0)
        finally:
            self.thaw(stopped)
        thawed = mono()
        time.sleep(1.5)
        done.set()
        for t in threads:
            t.join(timeout=10)
        failed = {key: [(round(s - thawed, 3), r) for s, _, r in got if r is not True] for key, got in calls.items()}
        failed = {key: bad for key, bad in failed.items() if bad}
        blocked = max(r - s for got in calls.values() for s, r, _ in got)
        after = min(sum(1 for s, _, _ in got if s > thawed) for got in calls.values())
        print(f"\n  stall of {len(stopped)} processes for {thawed - frozen:.2f} s: {sum(map(len, calls.values()))} "
              f"renewals, the longest call {blocked:.2f} s, at least {after} per holder after it; "
              f"{len(failed)} holders refused", flush=True)
        self.assertGreater(blocked, 2.5, "no renewal waited for the stalled server")
        self.assertEqual(failed, {}, "renewals that were not true (sent, in s from the thaw)")
        self.assertGreaterEqual(after, 3)
        now = one(admin, "SELECT json_object_agg(key, term) FROM leaderlock WHERE key = ANY(%s) "
                         "AND holder = 'holder'", (keys,))
        self.assertEqual(now, terms)
        events = [(e["event"], e["key"]) for e in listener.until_marker(self.connect())
                  if e["key"] in calls and e["event"] != "acquired"]
        self.assertEqual(events, [])

    def back_after_crash(self, worker):
        """Waits until the server takes connections again after a crash and
        a new worker (not `worker`) serves postgres."""
        def up():
            try:
                return self.cluster.worker_pid() not in (None, worker)
            except psycopg2.Error:
                return False
        self.assertTrue(wait_for(up, timeout=30), "the server did not come back from the crash")

    def test_a_crash_right_after_a_stall_shortens_no_lease(self):
        """Five holders (ttl 5 s); every server process stopped for 4 s and
        continued; each renews at once (ttl 5 s); 0.3 s later the worker is
        killed (-9), and the postmaster restarts every process (a crash
        restart: shared memory made again, the lease clock read back from
        its file). A rival then polls each key: refused while the holder's
        window, from its renewal's send, is open. (When the credit of the
        stall reached the file only at its next write, up to a second later,
        the restart put the lease clock ahead by the stall: the rival led
        about 4 s early, beside the holder.)"""
        n, ttl = 5, 5.0
        keys = [f"clock-stall-crash-{i}" for i in range(n)]
        holder = self.connect()
        for key in keys:
            self.assertTrue(one(holder, "SELECT le_try_acquire(%s, 'holder', '5 seconds')", (key,)))
        stopped = []
        try:
            self.freeze(stopped)
            time.sleep(4.0)
        finally:
            self.thaw(stopped)
        windows = {}
        for key in keys:
            sent = mono()
            self.assertTrue(one(holder, "SELECT le_renew(%s, 'holder', '5 seconds')", (key,)))
            windows[key] = sent + ttl
        worker = self.cluster.worker_pid()
        self.assertIsNotNone(worker)
        time.sleep(0.3)
        crashed = mono()
        as_postgres("kill", "-9", str(worker))
        self.back_after_crash(worker)
        ready = mono()
        rivals = [Rival(self.cluster, key, until=windows[key] + 8.0) for key in keys]
        for r in rivals:
            r.start()
        for r in rivals:
            r.join(timeout=windows[r.key] + 10.0 - mono())
        early = {r.key: round(windows[r.key] - r.won[1], 3) for r in rivals if r.won and r.won[1] < windows[r.key]}
        print(f"\n  stall of {len(stopped)} processes for 4 s, renewals, a crash 0.3 s later (ready again "
              f"{ready - crashed:.2f} s after): the rivals led "
              f"{', '.join(f'{r.won[1] - windows[r.key]:+.3f}' for r in rivals if r.won)} s from the holders' "
              f"windows' close", flush=True)
        self.assertEqual(early, {}, "rivals that led before the holder's window closed (s before): two leaders")
        self.assertTrue(all(r.won for r in rivals), "a rival never led")
        for r in rivals:
            self.assertIsNone(r.error)
            self.assertLessEqual(r.won[1] - max(windows[r.key], ready), LIVENESS + ttl / 200 + 0.5)

    def test_crash_recovery_counts_as_time_the_server_was_down(self):
        """After a crash, the lease clock goes on from its file counting the
        time the server was down (contract 2.2), crash recovery included:
        with the startup process stopped for 3 s during the recovery, the
        lease clock keeps its offset from the wall clock (it is not taken
        for a stall and credited)."""
        c = self.connect()
        before = lease_clock_offset(c)
        one(c, "CREATE TABLE IF NOT EXISTS clock_wal (x int, pad text)")
        one(c, "INSERT INTO clock_wal SELECT g, repeat('x', 200) FROM generate_series(1, 200000) g")
        c.close()
        pm = self.cluster.postmaster_pid()
        worker = self.cluster.worker_pid()
        as_postgres("kill", "-9", str(worker))
        startup, deadline = None, mono() + 20
        while startup is None and mono() < deadline:
            for pid in self.server_pids():
                if pid == pm:
                    continue
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        if b"startup" in f.read():
                            startup = pid
                            break
                except OSError:
                    continue
            else:
                time.sleep(0.001)
        self.assertIsNotNone(startup, "no startup process seen after the crash")
        try:
            os.kill(startup, signal.SIGSTOP)
            time.sleep(3.0)
        finally:
            self.thaw([startup])
        self.back_after_crash(worker)
        c = self.connect()
        one(c, "DROP TABLE clock_wal")
        after = lease_clock_offset(c)
        print(f"\n  a crash recovery held 3 s: the lease clock's offset from the wall clock moved "
              f"{after - before:+.3f} s", flush=True)
        self.assertLess(abs(after - before), 0.5, "the recovery was credited as a stall (or the clock jumped)")

    # --- 6. a promotion on a host whose clock is behind ---

    @staticmethod
    def lease_clock_offset(cluster):
        """The cluster's lease clock (le_now()) minus this process's wall clock, in seconds."""
        c = cluster.connect()
        try:
            return lease_clock_offset(c)
        finally:
            c.close()

    def test_a_promotion_where_the_lease_clock_is_behind_delays_no_takeover(self):
        """A standby on "another host": its lease clock 30 s behind the
        primary's (it started without the primary's clock file, on a wall
        clock 30 s behind the primary's lease clock). The holder takes a key
        (ttl 3 s) on the primary and says nothing more; the row reaches the
        standby, which is promoted at once; a rival polls the new primary.
        The stored expiry, from the primary's clock, is 33 s ahead of the
        standby's: honoured as stored, nobody would lead for 30 s. Safety:
        the rival's true comes back no earlier than the holder's window
        closes. Liveness: within 0.5 s of the later of that close and the
        promotion + ttl (the failover step gives every held lease exactly its
        ttl from then, contract 8.2: from the step, which follows the
        promotion within a beat)."""
        key, ttl, behind = "clock-promotion", 3.0, 30
        standby = self.cluster.base_backup("clock-standby", "-R")
        self.addCleanup(standby.remove)
        os.remove(os.path.join(standby.pgdata, "leaderlock.clock"))  # another host's data directory
        primary_offset = self.lease_clock_offset(self.cluster)
        standby_file = os.path.join(self.faked, "standby-offset")
        with open(standby_file, "w") as f:
            f.write(f"{round(primary_offset) - behind:+d}\n")
        os.chmod(standby_file, 0o644)
        self.start_faked(standby, standby_file)
        skew = self.lease_clock_offset(self.cluster) - self.lease_clock_offset(standby)
        self.assertAlmostEqual(skew, behind, delta=1.5, msg="the standby's lease clock is not 30 s behind")
        holder = self.connect()
        sent = mono()
        self.assertTrue(one(holder, "SELECT le_try_acquire(%s, 'holder', '3 seconds')", (key,)))
        received = mono()
        term = one(holder, "SELECT term FROM leaderlock WHERE key = %s", (key,))
        s = standby.connect()
        self.assertTrue(wait_for(lambda: one(s, "SELECT term FROM leaderlock WHERE key = %s", (key,)) == term,
                                 timeout=30))
        s.close()
        standby.promote()
        promoted = mono()
        opens_earliest = sent + ttl
        ends_latest = max(received + ttl, promoted + ttl)
        rival = Rival(standby, key, until=ends_latest + 8.0)
        rival.start()
        rival.join(timeout=ends_latest + 10.0 - mono())
        self.assertFalse(rival.is_alive())
        self.assertIsNone(rival.error)
        self.assertIsNotNone(rival.won, f"the rival never acquired, up to {ends_latest + 8.0 - promoted:.1f} s "
                                        f"after the promotion ({rival.calls} calls)")
        won = rival.won[1]
        s = standby.connect()
        step = mono() - float(one(s, "SELECT extract(epoch FROM le_now() - changed_at)::float8 FROM leaderlock_failover"))
        s.close()
        print(f"\n  promotion where the lease clock is {skew:.1f} s behind, {promoted - received:.2f} s after the "
              f"lease was taken: the failover step {step - promoted:+.3f} s from it; the rival's true answered {won - opens_earliest:+.3f} s from the holder's window's "
              f"close, {won - promoted - ttl:+.3f} s from the promotion + ttl ({rival.calls} calls)", flush=True)
        self.assertGreaterEqual(won, opens_earliest, f"the rival acquired {opens_earliest - won:.3f} s before "
                                                     f"the holder's window closed: two leaders")
        # (the lease lasts its ttl from the step, which a busy host may take
        # a moment after pg_ctl promote returned)
        ends_latest = max(received + ttl, max(promoted, step) + ttl)
        self.assertLessEqual(won - ends_latest, LIVENESS,
                             f"the rival acquired {won - ends_latest:.3f} s after the failover step + ttl")

    # --- 7. what the server says it uses ---

    def test_the_lease_clock_is_monotonic(self):
        """le_capabilities() says the compiled, preloaded edition decides
        on the monotonic lease clock."""
        self.assertEqual(one(self.connect(), "SELECT le_capabilities()->>'clock'"), "monotonic")


if __name__ == "__main__":
    unittest.main()
