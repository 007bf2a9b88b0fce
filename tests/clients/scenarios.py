"""One scenario suite for every client (Python, Node.js, Go, Java, and the
Rust one through `leaderlock run`), each in every idiom it offers, against
a real server, with the same assertions.

Each client ships a candidate program, started as

    PROGRAM DSN KEY ID TTL_SECONDS RECORDS [IDIOM]

that campaigns for KEY as ID in the given idiom (Python: sync, async,
elector; Node.js: lead, elector; Go: its one, runordie, passed only when
asked for as go:runordie; Java: lead, elector, and shedlock, its ShedLock
provider's task extending its lock; the Rust client is `leaderlock run`, whose
command is ticker.py) and, while it leads, appends "tick ID TERM
UNIX_SECONDS" to RECORDS every 20 ms, checking its lease before each
tick. Without IDIOM a candidate runs its default idiom.

The proof is the candidates' records, set against what the server itself
announced on the `leaderlock` channel (a LISTEN session of this script's,
which also samples `leaderlock_status` every 50 ms for the keys of this
run, and the server's lease clock against the wall clock: announced
times are on the lease clock, which a stall of the whole server puts
behind the wall clock), with these assertions in every scenario, for
every variant:

- ticks of two ids never interleave, and a new leader's term is higher;
- no tick after the local deadline: none after the server's end of that
  term, which is `released`'s `at`, `expired`'s `expires_at` less ttl/200
  (the local deadline is the start of the last successful call + ttl -
  ttl/200, so never later), or the next term's `acquired` `at`;
- a follower leads (its `acquired`) within 100 ms of the lease's end:
  `released`'s `at` after a SIGTERM, `expired`'s `expires_at` after a
  kill -9 or a SIGSTOP (where no worker announces expiries, the portable
  edition: within the candidates' polling period, ttl/4, + 100 ms; through
  pgbouncer's transaction pooling, where LISTEN is not relied on: within
  the polling period, 1 s, + 100 ms). Its first tick is printed too.

Scenarios, every variant side by side, each on a key of its own (a
fault that takes a leader down is dealt to one variant after the other,
0.3 s apart, so that each takeover is measured on its own):
- two candidates: exactly one leads, for 2 ttls, without a pause;
- shutdown (SIGTERM) of the leader: it releases (a lease left to expire
  fails), and the other leads within 100 ms of the release;
- kill -9 of the leader: the other leads within 100 ms of the expiry;
- SIGSTOP of the leader past its ttl: the other leads within 100 ms of the
  expiry, and the paused one, resumed, never ticks again in that term (of
  `leaderlock run`, the CLI is paused and its supervisor stops the command
  at the deadline).
Shared by every variant at once (a pair of candidates on each variant's
key):
- a flood of forged `released` and `expired` notifications of every key
  (each naming the leader and its term) from a role of no rights, for 2 s:
  no new leader, no term change, no announcement by the server, and each
  leader ticks on without a pause of ttl/2; then the followers, flooded,
  still take over a real release within 100 ms;
- with --pgdata: a server restart (pg_ctl restart -m fast) while one
  candidate of each pair leads and the other waits: someone leads again
  after it (the leader's ticks never outlive the deadline), and the one
  that waited through it takes over a release within 100 ms, with a higher
  term;
- with --pgdata: the server down for 1.5 ttl (pg_ctl stop -m fast, then
  start) while one candidate of each pair leads and the other waits: the
  leader's ticks end by its deadline (its calls fail rather than hang:
  none later than ttl after pg_ctl stop returned, the latest a renewal
  can have succeeded), and once the server is up someone leads in a higher term;
- with --pgdata: the whole server frozen (SIGSTOP of every process) for
  1.5 ttl: each leader stops at its local deadline (no tick between it
  and the server's resuming, when a call may succeed again), and after
  the server resumes somebody leads again (the same leader in the same
  term, where the server's lease clock takes the stall out);
- with --pgbouncer: the pairs through pgbouncer in transaction pooling
  mode, one leader each for 2 ttls, then kill -9 of every leader.

Usage: scenarios.py --dsn postgresql://USER@HOST:PORT/DB [--ttl S] [--pgdata DIR] [--pgbouncer]
                    [--clients python:sync,python:async,python:elector,node:lead,node:elector,go,java:lead,
                               java:elector,java:shedlock,rust]
                    [--only one,sigterm,kill,sigstop,flood,restart,down,freeze,pgbouncer]
A client without an idiom (`python`) means each of its idioms; default:
every variant. The DSN's role must be a superuser (it makes a role of no
rights for the flood). --pgdata's restart runs the server's pg_ctl as the
directory's owner (sudo when root). --only runs some scenarios.
Needs: psycopg2 in this Python; LEADERLOCK_CLI (rust), PY_CLIENT_PYTHON
(python; default this Python), GO_CANDIDATE (go: clients/go/test.sh
--candidate FILE builds it), JAVA_CANDIDATE (java: clients/java/test.sh
--candidate FILE builds it), node with clients/node built. Prints each
measured figure, each scenario's time and the total; exits 1 on a failure.
"""
import argparse
import json
import os
import pwd
import select
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid
from collections import defaultdict
from datetime import datetime
from urllib.parse import urlparse

import psycopg2

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(REPO, "scripts"))
from free_port import free_port  # noqa: E402 (never an ephemeral port: it says why)
TICKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ticker.py")

# Every client and its idioms, in the order they run; None: no IDIOM argument.
IDIOMS = {"python": ("sync", "async", "elector"), "node": ("lead", "elector"), "go": (None,),
          "java": ("lead", "elector", "shedlock"), "rust": (None,)}
DEFAULT_CLIENTS = ("python:sync,python:async,python:elector,node:lead,node:elector,go,java:lead,java:elector,"
                   "java:shedlock,rust")
FORGER = "leaderlock_scenario_forger"  # the role of no rights that forges notifications
LEAD_WITHIN = 0.1  # a follower's `acquired` after the lease's end (release or expiry)
FLOOD_SECONDS = 2.0
SCENARIOS = ("one", "sigterm", "kill", "sigstop", "flood", "restart", "down", "freeze", "pgbouncer")  # --only


def variant_name(v):
    client, idiom = v
    return f"{client}:{idiom}" if idiom else client


def parse_clients(spec):
    out = []
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        client, _, idiom = item.partition(":")
        if client not in IDIOMS:
            raise SystemExit(f"scenarios.py: unknown client {client!r} (known: {', '.join(IDIOMS)})")
        if idiom and client == "rust":
            raise SystemExit("scenarios.py: the Rust client (leaderlock run) has no idioms")
        for v in ([(client, idiom)] if idiom else [(client, i) for i in IDIOMS[client]]):
            if v not in out:
                out.append(v)
    return out


def command(v, dsn, key, me, ttl, records):
    client, idiom = v
    extra = [idiom] if idiom else []
    if client == "python":
        return [os.environ.get("PY_CLIENT_PYTHON", sys.executable),
                os.path.join(REPO, "clients/python/tests/candidate.py"), dsn, key, me, str(ttl), records] + extra
    if client == "node":
        return ["node", os.path.join(REPO, "clients/node/test/candidate.mjs"), dsn, key, me, str(ttl), records] + extra
    if client == "go":
        return [os.environ["GO_CANDIDATE"], dsn, key, me, str(ttl), records] + extra
    if client == "java":
        return [os.environ["JAVA_CANDIDATE"], dsn, key, me, str(ttl), records] + extra
    if client == "rust":  # the Rust client inside `leaderlock run`; the command ticks
        return [os.environ["LEADERLOCK_CLI"], "--dsn", dsn, "run", "--key", key, "--id", me, "--ttl", f"{ttl}s",
                "--restart", "--", sys.executable, TICKER, records]
    raise ValueError(client)


def candidate(holder):
    """The candidate a holder the server names is: the holder itself, or for
    a lock of the ShedLock provider (java:shedlock), whose holder is the
    provider's id and the lock's number (a:17), the id before the number."""
    if isinstance(holder, str):
        me, _, n = holder.rpartition(":")
        if me and n.isdigit():
            return me
    return holder


def ts(text):
    """Seconds since the epoch of a notification's RFC 3339 time."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def ms(seconds):
    return f"{seconds * 1000:+.0f} ms"


class Failure(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failure(what)


def wait_for(predicate, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    return None


def sql(dsn, query, args=(), **connect):
    conn = psycopg2.connect(dsn, connect_timeout=5, **connect)
    try:
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute(query, args)
            return cur.fetchall() if cur.description else None
    finally:
        conn.close()


class Monitor(threading.Thread):
    """LISTENs on `leaderlock` (reconnecting across restarts) and keeps the
    server's announcements of this run's keys; samples every 50 ms the
    expiry of each live tenure of them (the final expires_at of a lease
    taken over before anyone announced its expiry) and the server's lease
    clock against the wall clock. Notifications from the forger's sessions
    are only counted.

    The server's times (`at`, `expires_at`) are on its lease clock
    (le_now(), where the extension has it: the wall clock at the server's
    start, then the monotonic clock, with any stall of the whole server
    taken out), the candidates' ticks on the wall clock: `wall()` turns
    the former into the latter with the offset sampled next after the
    announcement arrived (0 without le_now(): the portable edition's clock
    is the wall clock)."""

    def __init__(self, dsn, prefix):
        super().__init__(daemon=True)
        self.dsn, self.prefix = dsn, prefix
        self.lock = threading.Lock()
        self.events = defaultdict(list)
        self.expiry = {}  # (key, holder, term) -> the latest expires_at seen, on the wall clock
        self.offsets = []  # (wall clock before the sample, wall clock minus lease clock)
        self.ignore = set()
        self.forged = 0
        self.stopping = threading.Event()
        self.up = threading.Event()

    def run(self):
        while not self.stopping.is_set():
            conn = None
            try:
                conn = psycopg2.connect(self.dsn, connect_timeout=2)
                conn.autocommit = True
                cur = conn.cursor()
                cur.execute("LISTEN leaderlock")
                cur.execute("SELECT to_regprocedure('le_now()') IS NOT NULL")
                lease_clock = "le_now()" if cur.fetchone()[0] else "clock_timestamp()"
                self.up.set()
                next_sample = 0.0
                while not self.stopping.is_set():
                    if select.select([conn], [], [], 0.02)[0]:
                        conn.poll()
                    self.drain(conn)
                    if time.monotonic() >= next_sample:
                        next_sample = time.monotonic() + 0.05
                        before = time.time()
                        cur.execute("SELECT key, holder, term, extract(epoch FROM expires_at)::float8, "
                                    "extract(epoch FROM clock_timestamp())::float8 "
                                    f"- extract(epoch FROM {lease_clock})::float8 "
                                    "FROM (SELECT 1) AS one LEFT JOIN leaderlock_status "
                                    "ON key LIKE %s AND holder IS NOT NULL", (self.prefix + "%",))
                        rows = cur.fetchall()
                        if time.time() - before < 0.05 and rows:  # not held up by a stall
                            offset = rows[0][4]
                            with self.lock:
                                self.offsets.append((before, offset))
                                for key, holder, term, expires, _ in rows:
                                    if key is not None:
                                        k = (key, candidate(holder), term)
                                        self.expiry[k] = max(self.expiry.get(k, expires + offset),
                                                             expires + offset)
                        self.drain(conn)
            except Exception:  # psycopg2.Error, OSError: the server restarting; reconnect
                self.up.clear()
                time.sleep(0.05)
            finally:
                if conn is not None:
                    try:
                        conn.close()
                    except psycopg2.Error:
                        pass

    def drain(self, conn):
        now = time.time()
        with self.lock:
            for n in conn.notifies:
                if n.pid in self.ignore:
                    self.forged += 1
                    continue
                try:
                    p = json.loads(n.payload)
                except ValueError:
                    continue
                if isinstance(p, dict) and isinstance(p.get("key"), str) and p["key"].startswith(self.prefix):
                    p["_recv"], p["_pid"] = now, n.pid
                    for field in ("holder", "previous_holder"):
                        p[field] = candidate(p.get(field))
                    self.events[p["key"]].append(p)
        del conn.notifies[:]

    def offset(self, when):
        """Wall clock minus lease clock, as sampled next after `when`."""
        wait_for(lambda: self.offsets and self.offsets[-1][0] >= when, 1)
        with self.lock:
            later = [o for t, o in self.offsets if t >= when]
            return later[0] if later else (self.offsets[-1][1] if self.offsets else 0.0)

    def wall(self, e, field):
        """An announcement's time `field` on the wall clock."""
        return ts(e[field]) + self.offset(e["_recv"])

    def of(self, key):
        with self.lock:
            return list(self.events[key])

    def end_of(self, key, holder, term):
        """(when the server ended the tenure, on the wall clock, how), or
        None while it has not: `released`'s at; `expired`'s expires_at; a
        lapsed tenure taken over unannounced: its last sampled expires_at."""
        for e in self.of(key):
            if e.get("holder") == holder and e.get("term") == term:
                if e.get("event") == "released":
                    return self.wall(e, "at"), "released"
                if e.get("event") == "expired":
                    return self.wall(e, "expires_at"), "expired"
        for e in self.of(key):
            if e.get("event") == "acquired" and isinstance(e.get("term"), int) and e["term"] > term \
                    and e.get("previous_holder") == holder:
                with self.lock:
                    sampled = self.expiry.get((key, holder, term))
                if sampled is not None:
                    return sampled, "lapsed (taken over unannounced; its last sampled expiry)"
                return self.wall(e, "at"), "taken over (no expiry sampled: the next acquired's at)"
        return None

    def acquired_after(self, key, term):
        later = [e for e in self.of(key) if e.get("event") == "acquired" and isinstance(e.get("term"), int)
                 and e["term"] > term]
        return min(later, key=lambda e: e["term"]) if later else None

    def no_tick_after_the_end(self, t, key, ttl):
        """No tick of a tenure after the server ended it: its release, its
        expiry less ttl/200 (the latest the local deadline can be), the
        next term's acquisition."""
        events = self.of(key)
        ends = {}
        for e in events:
            ev, k = e.get("event"), (e.get("holder"), e.get("term"))
            if ev == "released":
                bound, why = self.wall(e, "at"), "released at"
            elif ev == "expired":
                bound, why = self.wall(e, "expires_at") - ttl / 200, "expired: its local deadline at the latest"
            else:
                continue
            if k not in ends or bound < ends[k][0]:
                ends[k] = (bound, why)
        acquired = sorted((e["term"], self.wall(e, "at")) for e in events
                          if e.get("event") == "acquired" and isinstance(e.get("term"), int))
        for at, me, term in t:
            bounds = [ends[(me, term)]] if (me, term) in ends else []
            nxt = [a for tm, a in acquired if tm > term]
            if nxt:
                bounds.append((min(nxt), "the next term acquired at"))
            for bound, why in bounds:
                check(at <= bound, f"{me} ticked in term {term} {at - bound:.3f} s after its lease ended "
                                   f"({why} {bound:.3f})")


def ticks(path):
    out = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 4 and parts[0] == "tick":
                    try:
                        out.append((float(parts[3]), parts[1], int(parts[2])))
                    except ValueError:
                        pass
    return sorted(out)


def never_two(t):
    """Ticks of two ids never interleave, and each change of leader raises the term."""
    for (t1, id1, term1), (t2, id2, term2) in zip(t, t[1:]):
        if id1 != id2:
            check(term2 > term1, f"{id2} ticked in term {term2} at {t2:.3f} after {id1} in term {term1} at {t1:.3f}")


class Candidate:
    def __init__(self, v, dsn, key, me, ttl, records, work):
        env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "clients/python/src"))
        self.log = open(os.path.join(work, f"{me}.log"), "w")
        self.proc = subprocess.Popen(command(v, dsn, key, me, ttl, records), env=env,
                                     stdout=self.log, stderr=self.log, stdin=subprocess.DEVNULL)
        self.id = me

    def signal(self, signo):
        os.kill(self.proc.pid, signo)

    def state(self):
        """'running', or how it exited and the last line of its output."""
        code = self.proc.poll()
        if code is None:
            return "running"
        self.log.flush()
        with open(self.log.name, errors="replace") as f:
            lines = [line.strip() for line in f if line.strip()]
        return f"exited with {code}" + (f": {lines[-1][:200]}" if lines else "")

    def end(self):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            self.proc.kill()
            self.proc.wait()
        self.log.close()


class Scenario:
    """One scenario's run for some variants, each on a key of its own with a
    records file of its own."""
    seq = 0

    def __init__(self, suite, name, variants, dsn):
        Scenario.seq += 1
        self.suite, self.name, self.variants, self.dsn, self.ttl = suite, name, variants, dsn, suite.ttl
        self.monitor = suite.monitor
        self.work = tempfile.mkdtemp(prefix=f"leaderlock-scenario-{Scenario.seq}-")
        os.chmod(self.work, 0o777)
        self.keys, self.records, self.cands = {}, {}, defaultdict(list)
        for v in variants:
            tag = variant_name(v).replace(":", "-")
            # no spaces: other suites parse `status`
            self.keys[v] = f"{suite.prefix}{Scenario.seq}-{tag}"
            self.records[v] = os.path.join(self.work, f"records-{tag}")

    def start(self, v, me, dsn=None):
        tag = variant_name(v).replace(":", "-")
        c = Candidate(v, dsn or self.dsn, self.keys[v], me, self.ttl, self.records[v],
                      self.work if len(self.variants) == 1 else self._dir(tag))
        self.cands[v].append(c)
        return c

    def _dir(self, tag):
        d = os.path.join(self.work, tag)
        os.makedirs(d, exist_ok=True)
        return d

    def pair(self, dsn=None):
        for v in self.variants:
            self.start(v, "a", dsn)
            self.start(v, "b", dsn)

    def ticks(self, v):
        return ticks(self.records[v])

    def leader(self, v):
        """(id, term, last tick) of the latest tick."""
        t = self.ticks(v)
        return (t[-1][1], t[-1][2], t[-1][0]) if t else None

    def wait_leaders(self, within=20.0):
        """Waits until each variant's key has a ticking leader; the variants
        that get none fail."""
        wait_for(lambda: all(self.ticks(v) for v in self.variants), within)
        return {v: Failure(f"nobody led within {within:.0f} s; " + self.states(v))
                for v in self.variants if not self.ticks(v)}

    def states(self, v):
        return "; ".join(f"{c.id} {c.state()}" for c in self.cands[v])

    def cand(self, v, me):
        return next(c for c in self.cands[v] if c.id == me)

    def end(self):
        for cs in self.cands.values():
            for c in cs:
                c.end()

    def lease_end(self, v, holder, term, within):
        got = wait_for(lambda: self.monitor.end_of(self.keys[v], holder, term), within)
        check(got, f"the server did not end {holder}'s term {term} within {within:.0f} s; "
                   f"{holder} {self.cand(v, holder).state()}")
        return got

    def takeover(self, v, holder, term, end, how, bound, within=5.0):
        """The next leader after (holder, term), whose lease ended at `end`:
        its `acquired` within `bound` of it; prints its first tick too."""
        key = self.keys[v]
        acq = wait_for(lambda: self.monitor.acquired_after(key, term), within)
        check(acq, f"nobody acquired within {within:.0f} s after {holder}'s term {term} ended ({how}); "
                   + self.states(v))
        first = wait_for(lambda: [x for x in self.ticks(v) if x[2] >= acq["term"]], 5)
        check(first, f"{acq['holder']} acquired term {acq['term']} but never ticked")
        lead, tick = self.monitor.wall(acq, "at") - end, first[0][0] - end
        figure = (f"{how} ({holder}, term {term}) -> {acq['holder']} acquired term {acq['term']} {ms(lead)}, "
                  f"first tick {ms(tick)}")
        check(lead < bound, f"{figure}: not within {bound * 1000:.0f} ms")
        return figure

    def handover_on_sigterm(self, v):
        """SIGTERM to the leader: the other takes over within 100 ms of the release."""
        holder, term, _ = self.leader(v)
        sent = time.time()
        self.cand(v, holder).signal(signal.SIGTERM)
        end, how = self.lease_end(v, holder, term, 10)
        check(how == "released", f"SIGTERM to {holder}: no release; the lease ended {end - sent:.2f} s after "
                                 f"the signal: {how}; {holder} {self.cand(v, holder).state()}")
        return f"SIGTERM {ms(end - sent)}: " + self.takeover(v, holder, term, end, how, LEAD_WITHIN), term


class Suite:
    def __init__(self, args):
        self.args, self.ttl, self.dsn = args, args.ttl, args.dsn
        self.prefix = f"scenario-{uuid.uuid4().hex[:6]}-"
        self.monitor = Monitor(self.dsn, self.prefix)
        self.results = []  # (scenario, variant name, ok)
        self.timings = []
        self.bindir = None  # the server's, for pg_ctl
        try:
            self.worker = sql(self.dsn, "SELECT (le_capabilities()->>'worker')::boolean")[0][0]
        except psycopg2.Error:  # before 0.5.0
            self.worker = sql(self.dsn, "SELECT le_worker_running()")[0][0]
        # where no worker announces an expiry, the candidates' next poll (ttl/4) finds it
        self.expiry_bound = LEAD_WITHIN if self.worker else min(max(self.ttl / 4, 0.1), 1.0) + LEAD_WITHIN

    def run(self, name, variants, body, dsn=None):
        """body(scenario) -> {variant: figure or Failure}; then every
        variant's records are checked against the server's announcements."""
        started = time.monotonic()
        sc = Scenario(self, name, variants, dsn or self.dsn)
        try:
            try:
                out = body(sc)
            except Failure as e:
                out = {v: e for v in variants}
            except Exception as e:  # the harness's own trouble (a server down, a bug): this scenario fails
                traceback.print_exc()
                out = {v: Failure(f"{type(e).__name__}: {str(e).strip()}") for v in variants}
        finally:
            sc.end()
        time.sleep(0.1)  # the last announcements
        took = time.monotonic() - started
        for v in variants:
            r = out.get(v, Failure("no result"))
            if not isinstance(r, Failure):
                try:
                    t = sc.ticks(v)
                    never_two(t)
                    self.monitor.no_tick_after_the_end(t, sc.keys[v], self.ttl)
                except Failure as e:
                    r = e
            ok = not isinstance(r, Failure)
            where = "" if ok else f" (logs in {sc.work})"
            print(f"  {'ok  ' if ok else 'FAIL'} {variant_name(v):<15} {name}: {r}{where}", flush=True)
            self.results.append((name, variant_name(v), ok))
        print(f"  -- {name}: {took:.1f} s", flush=True)
        if all(ok for n, _, ok in self.results[-len(variants):]):
            shutil.rmtree(sc.work, ignore_errors=True)
        self.timings.append((name, took))


def each(variants, fn):
    """fn(v) for each variant, a Failure kept as its result."""
    out = {}
    for v in variants:
        try:
            out[v] = fn(v)
        except Failure as e:
            out[v] = e
    return out


def live(sc, out):
    return [v for v in sc.variants if not isinstance(out.get(v), Failure)]


# ---- two candidates per variant, every variant side by side ----------------
# Faults that each take a leader down are dealt STAGGER apart, one variant
# after the other, so that each takeover is measured on its own (no two
# followers racing for the two cores at the same instant).

STAGGER = 0.3


def one_leads(sc):
    ttl = sc.ttl
    sc.pair()
    out = sc.wait_leaders(15)
    time.sleep(2 * ttl)
    for v in live(sc, out):
        def verdict(v=v):
            t = sc.ticks(v)
            ids = {i for _, i, _ in t}
            check(len(ids) == 1, f"both ticked: {ids}")
            gap = max((b[0] - a[0] for a, b in zip(t, t[1:])), default=0)
            check(gap < ttl / 2, f"the leader paused {gap:.2f} s while leading")
            return f"one leader for {2 * ttl:.0f} s, its longest pause {gap * 1000:.0f} ms"
        out[v] = each([v], lambda _: verdict())[v]
    return out


def followers_waiting(sc):
    sc.pair()
    out = sc.wait_leaders(15)
    time.sleep(1.0)  # the others are waiting by now
    return out


def shutdown(sc):
    out = followers_waiting(sc)
    for v in live(sc, out):
        def verdict(v=v):
            first = sc.leader(v)[0]
            figure, _ = sc.handover_on_sigterm(v)
            t = sc.ticks(v)
            gap = min(x[0] for x in t if x[1] != first) - max(x[0] for x in t if x[1] == first)
            return f"{figure}; {gap * 1000:.0f} ms from the leader's last tick"
        out[v] = each([v], lambda _: verdict())[v]
        time.sleep(STAGGER)
    return out


def kill_leaders(sc, out):
    """kill -9 of each live variant's leader, STAGGER apart; {v: (holder, term)}."""
    killed = {}
    for v in live(sc, out):
        holder, term, _ = sc.leader(v)
        sc.cand(v, holder).signal(signal.SIGKILL)
        killed[v] = (holder, term)
        time.sleep(STAGGER)
    return killed


def kill_9(sc):
    ttl = sc.ttl
    out = followers_waiting(sc)
    killed = kill_leaders(sc, out)
    for v in killed:
        def verdict(v=v):
            holder, term = killed[v]
            end, how = sc.lease_end(v, holder, term, ttl + 10)
            figure = sc.takeover(v, holder, term, end, how, sc.suite.expiry_bound)
            t = sc.ticks(v)
            gap = min(x[0] for x in t if x[1] != holder) - max(x[0] for x in t if x[1] == holder)
            return f"{figure}; {gap:.2f} s after the dead leader's last tick (ttl {ttl} s)"
        out[v] = each([v], lambda _: verdict())[v]
    return out


def paused(sc):
    ttl = sc.ttl
    out = followers_waiting(sc)
    stopped = {}
    try:
        for v in live(sc, out):
            holder, term, _ = sc.leader(v)
            sc.cand(v, holder).signal(signal.SIGSTOP)
            stopped[v] = (holder, term, time.time())
            time.sleep(STAGGER)
        for v in stopped:
            def taken_over(v=v):
                holder, term, _ = stopped[v]
                end, how = sc.lease_end(v, holder, term, ttl + 10)
                return sc.takeover(v, holder, term, end, how, sc.suite.expiry_bound), end
            out[v] = each([v], lambda _: taken_over())[v]
        time.sleep(0.3)
    finally:
        for v, (holder, _, _) in stopped.items():
            sc.cand(v, holder).signal(signal.SIGCONT)
    time.sleep(1.5)
    for v in stopped:
        if isinstance(out[v], Failure):
            continue
        def verdict(v=v):
            holder, term, stopped_at = stopped[v]
            figure, end = out[v]
            t = sc.ticks(v)
            # Its lease ran out within ttl of the pause (of `leaderlock
            # run` only the CLI is paused: its command goes on until the
            # supervisor stops it at the deadline); nothing after that,
            # resumed or not.
            late = [x for x in t if x[1] == holder and x[0] > stopped_at + ttl]
            check(not late, f"the paused leader ticked past its lease: {late[:3]}")
            last = max(x[0] for x in t if x[1] == holder and x[2] == term)
            return f"{figure}; its last tick {last - end:+.3f} s from its lease's end; nothing once resumed"
        out[v] = each([v], lambda _: verdict())[v]
    return out


# ---- the scenarios every variant shares --------------------------------------

def sigterm_each(sc, out, higher_than=None):
    """After a shared fault: SIGTERM each leader in turn (0.3 s apart, each
    handover measured on its own); the other takes over within 100 ms."""
    for v in live(sc, out):
        try:
            figure, term = sc.handover_on_sigterm(v)
            if higher_than is not None:
                new = sc.monitor.acquired_after(sc.keys[v], term)["term"]
                check(new > higher_than[v], f"{figure}: term {new}, not above {higher_than[v]}")
            out[v] = f"{out[v]}; then SIGTERM: {figure}"
        except Failure as e:
            out[v] = Failure(f"{out[v]}; then SIGTERM: {e}")
        time.sleep(0.3)


def flood(sc):
    """Forged `released` and `expired` of every key, naming its leader and
    term, from a role of no rights, as fast as its session sends them."""
    ttl, suite = sc.ttl, sc.suite
    sc.pair()
    out = sc.wait_leaders()
    time.sleep(1.0)
    before = {v: sc.leader(v) for v in live(sc, out)}
    sql(suite.dsn, f"DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{FORGER}') "
                   f"THEN CREATE ROLE {FORGER} LOGIN; END IF; END $$")
    keys = [sc.keys[v] for v in before]
    holders = [before[v][0] for v in before]
    terms = [before[v][1] for v in before]
    conn = psycopg2.connect(suite.dsn, user=FORGER, connect_timeout=5)
    sent = 0
    try:
        conn.autocommit = True
        cur = conn.cursor()
        cur.execute("SELECT pg_backend_pid(), (SELECT rolsuper FROM pg_roles WHERE rolname = current_user)")
        pid, superuser = cur.fetchone()
        check(not superuser, f"{FORGER} is a superuser")
        with sc.monitor.lock:
            sc.monitor.ignore.add(pid)
        started = time.time()
        end = time.monotonic() + FLOOD_SECONDS
        while time.monotonic() < end:
            cur.execute(
                "SELECT count(pg_notify('leaderlock', json_build_object("
                "'event', e, 'key', k, 'holder', h, 'term', t, 'at', n, 'forced', false, "
                "'expires_at', n, 'reason', 'ttl')::text)) "
                "FROM unnest(%s::text[], %s::text[], %s::bigint[]) AS x(k, h, t), "
                "(VALUES ('released'), ('expired')) AS ev(e), "
                "to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') AS n",
                (keys, holders, terms))
            sent += cur.fetchone()[0]
        ended = time.time()
    finally:
        conn.close()
    time.sleep(0.5)
    lease = {key: f"{candidate(holder)} {term}" for key, holder, term in
             sql(suite.dsn, "SELECT key, holder, term FROM leaderlock_status WHERE key = ANY(%s)", (keys,))}
    rate = sent / (ended - started)
    for v in before:
        def verdict(v=v):
            holder, term, _ = before[v]
            news = [e for e in sc.monitor.of(sc.keys[v]) if e["_recv"] >= started]
            check(not news, f"the server announced {[(e['event'], e.get('holder'), e.get('term')) for e in news][:3]}")
            check(lease.get(sc.keys[v]) == f"{holder} {term}",
                  f"the lease is {lease.get(sc.keys[v])!r}, was {holder} in term {term}")
            t = [x for x in sc.ticks(v) if x[0] >= started - 0.1]
            check({(i, tm) for _, i, tm in t} == {(holder, term)},
                  f"ticks of {sorted({(i, tm) for _, i, tm in t})}, not only {holder}'s in term {term}")
            stamps = [started] + [x[0] for x in t] + [time.time()]
            gap = max(b - a for a, b in zip(stamps, stamps[1:]))
            check(gap < ttl / 2, f"the leader paused {gap:.2f} s under the flood")
            return (f"{holder} led on in term {term} through {sent} forged notifications ({rate:.0f}/s, "
                    f"{len(keys)} keys), its longest pause {gap * 1000:.0f} ms; the server announced nothing")
        out[v] = each([v], lambda _: verdict())[v]
    sigterm_each(sc, out)
    return out


def postmaster(pgdata):
    with open(os.path.join(pgdata, "postmaster.pid")) as f:
        return int(f.readline())


def pg_ctl(suite, *args):
    """pg_ctl of the running server (beside its executable), as the owner of
    its data directory."""
    pgdata = suite.args.pgdata
    if suite.bindir is None:  # asked while the server runs, before it is stopped
        try:
            suite.bindir = os.path.dirname(os.readlink(f"/proc/{postmaster(pgdata)}/exe"))
        except OSError:
            suite.bindir = sql(suite.dsn, "SELECT setting FROM pg_config WHERE name = 'BINDIR'")[0][0]
    bindir = suite.bindir
    owner = pwd.getpwuid(os.stat(pgdata).st_uid).pw_name
    as_owner = ["sudo", "-u", owner] if os.geteuid() == 0 and owner != "root" else []
    lib = os.path.normpath(os.path.join(bindir, "..", "lib"))
    if os.path.exists(os.path.join(lib, "libpq.so.5")):  # a relocatable tree (scripts/lib.sh's as_postgres)
        as_owner += ["env", f"LD_LIBRARY_PATH={lib}"]
    r = subprocess.run(as_owner + [os.path.join(bindir, "pg_ctl"), "-D", pgdata, *args],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True)
    check(r.returncode == 0, f"pg_ctl {' '.join(args)}: {r.stdout.strip()} {r.stderr.strip()}")


def server_log(pgdata):
    """The file the server writes its log to (pg_ctl -l), to go on with."""
    try:
        path = os.readlink(f"/proc/{postmaster(pgdata)}/fd/2")
        if os.path.isfile(path):
            return path
    except OSError:
        pass
    return os.path.join(pgdata, "server.log")


def server_options(pgdata):
    """The server's command-line options but -D (pg_ctl start -o), from
    postmaster.opts, as pg_ctl restart would reuse them."""
    with open(os.path.join(pgdata, "postmaster.opts")) as f:
        args = shlex.split(f.read())[1:]
    out = []
    while args:
        a = args.pop(0)
        if a == "-D" and args:
            args.pop(0)
        elif not a.startswith("-D"):
            out.append(a)
    return " ".join(shlex.quote(a) for a in out)


def restart(sc):
    """pg_ctl restart -m fast while one candidate of each pair leads and the
    other waits."""
    ttl, suite = sc.ttl, sc.suite
    sc.pair()
    out = sc.wait_leaders()
    time.sleep(1.0)
    before = {v: sc.leader(v) for v in live(sc, out)}
    log = server_log(suite.args.pgdata)
    down = time.time()
    pg_ctl(suite, "-m", "fast", "-w", "-t", "60", "-l", log, "restart")
    up = time.time()
    print(f"  .. the server restarted in {up - down:.2f} s", flush=True)
    # someone leads past the old leader's deadline: it renewed on a new
    # connection, or the other one leads
    wait_for(lambda: all(any(x[0] > max(up, down + ttl) for x in sc.ticks(v)) for v in before), 20)
    for v in before:
        def verdict(v=v):
            holder, term, _ = before[v]
            t = sc.ticks(v)
            after = [x for x in t if x[0] > up]
            check([x for x in after if x[0] > down + ttl],
                  f"nobody led within 20 s of the restart (before it: {holder} in term {term})")
            late = [x for x in t if x[1] == holder and x[2] == term and down + ttl < x[0] <= up]
            check(not late, f"{holder} ticked in term {term} past its deadline, the server down: {late[:3]}")
            _, who, tm = after[0]
            kept = "kept its lease" if (who, tm) == (holder, term) else f"{who} leads in term {tm}"
            return (f"{holder} led in term {term}; after the restart {kept}, "
                    f"ticking {after[0][0] - up:.2f} s after it")
        out[v] = each([v], lambda _: verdict())[v]
    # the one that waited through the restart takes over a release at once, in a higher term
    sigterm_each(sc, out, higher_than={v: before[v][1] for v in before})
    return out


def down_past_ttl(sc):
    """The server stopped (pg_ctl stop -m fast) for 1.5 ttl while one
    candidate of each pair leads and the other waits: the leader stops at
    its deadline (its calls fail, they do not hang), the lease runs out
    while the server is down, and after it starts someone leads in a
    higher term."""
    ttl, suite = sc.ttl, sc.suite
    pgdata = suite.args.pgdata
    sc.pair()
    out = sc.wait_leaders()
    time.sleep(1.0)
    before = {v: sc.leader(v) for v in live(sc, out)}
    log, options = server_log(pgdata), server_options(pgdata)
    down = time.time()
    pg_ctl(suite, "-m", "fast", "-w", "-t", "60", "stop")
    # a renewal sent after `down` may still have succeeded, up to the moment
    # its backend was terminated: no later than pg_ctl's return
    gone = time.time()
    time.sleep(max(0.0, down + 1.5 * ttl - time.time()))
    pg_ctl(suite, "-w", "-t", "60", "-l", log, "-o", options, "start")
    up = time.time()
    print(f"  .. the server was down for {up - down:.2f} s", flush=True)
    wait_for(lambda: all(any(x[2] > before[v][1] for x in sc.ticks(v)) for v in before), 20)
    for v in before:
        def verdict(v=v):
            holder, term, _ = before[v]
            t = sc.ticks(v)
            late = [x for x in t if (x[1], x[2]) == (holder, term) and x[0] > gone + ttl]
            check(not late, f"{holder} ticked in term {term} past its deadline, the server down: {late[:3]}")
            stopped = max(x[0] for x in t if (x[1], x[2]) == (holder, term)) - down
            after = [x for x in t if x[2] > term]
            check(after, f"nobody led in a term above {term} within 20 s of the server's start; " + sc.states(v))
            acq = sc.monitor.acquired_after(sc.keys[v], term)
            acquired = f"acquired {acq['_recv'] - up:.2f} s" if acq else "acquired (not heard)"
            return (f"{holder} (term {term}) stopped {stopped:.2f} s into the outage; {after[0][1]} "
                    f"{acquired} and ticked {after[0][0] - up:.2f} s after the server was up, in term {after[0][2]}")
        out[v] = each([v], lambda _: verdict())[v]
    return out


def frozen_server(sc):
    ttl, suite = sc.ttl, sc.suite
    sc.pair()
    out = sc.wait_leaders()
    time.sleep(1.0)
    last = {v: sc.leader(v) for v in live(sc, out)}
    pm = postmaster(suite.args.pgdata)
    children = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pm)], capture_output=True, text=True)
    pids = [pm] + [int(p) for p in children.stdout.split()]
    for p in pids:
        os.kill(p, signal.SIGSTOP)
    frozen_at = time.time()
    try:
        time.sleep(1.5 * ttl)
    finally:
        for p in pids:
            os.kill(p, signal.SIGCONT)
    resumed = time.time()
    wait_for(lambda: all(any(x[0] > resumed for x in sc.ticks(v)) for v in last), 15)
    for v in last:
        def verdict(v=v):
            holder, term, _ = last[v]
            t = sc.ticks(v)
            # its deadline came within ttl of the freeze; no call of its
            # could succeed before the server resumed
            late = [x for x in t if (x[1], x[2]) == (holder, term) and frozen_at + ttl < x[0] < resumed]
            check(not late, f"the leader ticked past its deadline while the server was frozen: {late[:3]}")
            stopped = max(x[0] for x in t if (x[1], x[2]) == (holder, term) and x[0] < resumed) - frozen_at
            after = [x for x in t if x[0] > resumed]
            check(after, "nobody led within 15 s of the server's resuming")
            who = "it led on" if (after[0][1], after[0][2]) == (holder, term) else f"{after[0][1]} led"
            return (f"{holder} stopped {stopped:.2f} s into the freeze of {resumed - frozen_at:.1f} s "
                    f"(ttl {ttl} s); {who} in term {after[0][2]} {after[0][0] - resumed:.2f} s after it")
        out[v] = each([v], lambda _: verdict())[v]
    return out


def start_pgbouncer(dsn, work, pool, users=None):
    """pgbouncer in transaction pooling mode in front of `dsn`'s database,
    for `users` (default: the DSN's); returns (the DSN through it for the
    first user, its process)."""
    u = urlparse(dsn)
    db = u.path.lstrip("/")
    users = users or [u.username or "postgres"]
    user = users[0]
    port = free_port()
    d = tempfile.mkdtemp(prefix="pgbouncer-", dir=work)
    with open(os.path.join(d, "users.txt"), "w") as f:
        f.write("".join(f'"{name}" ""\n' for name in users))
    with open(os.path.join(d, "pgbouncer.ini"), "w") as f:
        f.write(f"[databases]\n{db} = host={u.hostname} port={u.port} dbname={db}\n[pgbouncer]\n"
                f"listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\nauth_type = trust\n"
                f"auth_file = {d}/users.txt\npool_mode = transaction\ndefault_pool_size = {pool}\n")
    as_user = ["sudo", "-u", "postgres"] if os.geteuid() == 0 else []
    if as_user:
        subprocess.run(["chown", "-R", "postgres", d], check=False)
    proc = subprocess.Popen(as_user + ["pgbouncer", os.path.join(d, "pgbouncer.ini")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if not wait_for(lambda: socket.socket().connect_ex(("127.0.0.1", port)) == 0, 10):
        raise RuntimeError("pgbouncer did not start")
    return f"postgresql://{user}@127.0.0.1:{port}/{db}", proc


class PoolNeighbours:
    """Other applications sharing the pooler: `n` sessions through it that
    each run short transactions without pause, so that the server session a
    client's next call gets is seldom the one its last call had (what a
    shared pooler does under load; with an idle pool, pgbouncer tends to
    hand a client the same server session, hiding session state that does
    not survive transaction pooling, such as named prepared statements)."""

    def __init__(self, dsn, n):
        self.dsn, self.n, self.stop, self.threads, self.calls = dsn, n, threading.Event(), [], 0

    def run(self):
        conn = psycopg2.connect(self.dsn)
        conn.autocommit = True
        try:
            with conn.cursor() as cur:
                while not self.stop.is_set():
                    cur.execute("SELECT pg_sleep(0.003)")
                    self.calls += 1
        finally:
            conn.close()

    def __enter__(self):
        self.threads = [threading.Thread(target=self.run, daemon=True) for _ in range(self.n)]
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads:
            t.join(5)


def through_pgbouncer(sc):
    """The pairs through pgbouncer (transaction pooling): one leader each
    for 2 ttls, then kill -9 of every leader; LISTEN is not relied on
    there, so the followers find the expiry by polling (every second)."""
    ttl = sc.ttl
    out = one_leads(sc)
    killed = kill_leaders(sc, out)
    poll = max(ttl / 2, 1.0)
    for v in killed:
        def taken_over(v=v):
            holder, term = killed[v]
            end, how = sc.lease_end(v, holder, term, ttl + 10)
            return f"{out[v]}; then kill -9: " + sc.takeover(v, holder, term, end, how, poll + LEAD_WITHIN)
        out[v] = each([v], lambda _: taken_over())[v]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dsn", required=True)
    ap.add_argument("--clients", default=DEFAULT_CLIENTS,
                    help="CLIENT or CLIENT:IDIOM, comma-separated; a CLIENT alone: each of its idioms")
    ap.add_argument("--ttl", type=float, default=2.0)
    ap.add_argument("--pgdata", help="the server's data directory: also restart it, and freeze it")
    ap.add_argument("--pgbouncer", action="store_true", help="also run candidates through pgbouncer")
    ap.add_argument("--only", help=f"some of the scenarios, comma-separated: {','.join(SCENARIOS)}")
    args = ap.parse_args()
    variants = parse_clients(args.clients)
    suite = Suite(args)
    suite.monitor.start()
    if not suite.monitor.up.wait(10):
        raise SystemExit("scenarios.py: could not LISTEN")
    t0 = time.monotonic()
    print(f"client scenarios: {', '.join(variant_name(v) for v in variants)}; ttl {args.ttl} s; "
          f"{'a worker announces expiries' if suite.worker else 'no worker: expiries found by polling'}",
          flush=True)
    only = set(args.only.split(",")) if args.only else set(SCENARIOS)
    unknown = only - set(SCENARIOS)
    if unknown:
        raise SystemExit(f"scenarios.py: --only: unknown {', '.join(sorted(unknown))} (known: {', '.join(SCENARIOS)})")
    for word, name, body in (("one", "two candidates, one leader", one_leads),
                             ("sigterm", "shutdown hands over", shutdown),
                             ("kill", "kill -9 of the leader", kill_9),
                             ("sigstop", "SIGSTOP of the leader past its ttl", paused)):
        if word in only:
            suite.run(name, variants, body)
    if "flood" in only:
        suite.run("a flood of forged notifications from a role of no rights", variants, flood)
    if args.pgdata and "restart" in only:
        suite.run("a server restart (pg_ctl restart -m fast) while leading and waiting", variants, restart)
    if args.pgdata and "down" in only:
        suite.run("the server down past the ttl (pg_ctl stop -m fast, start 1.5 ttl later)", variants, down_past_ttl)
    if args.pgdata and "freeze" in only:
        suite.run("the server frozen past the ttl", variants, frozen_server)
    if args.pgbouncer and "pgbouncer" in only:
        work = tempfile.mkdtemp(prefix="leaderlock-scenario-pgbouncer-")
        os.chmod(work, 0o777)
        # A small pool that other applications keep busy: calls hop between
        # server sessions, as they do behind a shared pooler under load.
        bouncer_dsn, bouncer = start_pgbouncer(args.dsn, work, 4)
        try:
            with PoolNeighbours(bouncer_dsn, 3) as neighbours:
                suite.run("two candidates, then kill -9 of the leader, through a shared pgbouncer"
                          " (transaction pooling)", variants, through_pgbouncer, dsn=bouncer_dsn)
            print(f"  .. the pool's neighbours ran {neighbours.calls} transactions meanwhile", flush=True)
        finally:
            bouncer.terminate()
            bouncer.wait()
    suite.monitor.stopping.set()
    try:
        sql(args.dsn, f"DROP ROLE IF EXISTS {FORGER}")
    except psycopg2.Error:
        pass
    took = defaultdict(float)
    for name, seconds in suite.timings:
        took[name] += seconds
    print("client scenarios' times: " + "; ".join(f"{name}: {seconds:.0f} s" for name, seconds in took.items()),
          flush=True)
    failed = [(n, v) for n, v, ok in suite.results if not ok]
    print(f"client scenarios: {len(suite.results) - len(failed)} passed, {len(failed)} failed in "
          f"{time.monotonic() - t0:.0f} s", flush=True)
    for n, v in failed:
        print(f"  failed: {v}: {n}", flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
