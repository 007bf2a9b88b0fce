"""Blocking code: `with lead(...) as lease:`. A thread renews; a timer sets
`lease.lost` at the local deadline whatever the renewing thread is doing
(a call can hang on a frozen server); the body learns of a loss from
`lease.check()`, `lease.alive` or `lease.lost` (a threading.Event)."""
from __future__ import annotations

import secrets
import threading
import time
from typing import Any, Callable, Optional

import psycopg
from psycopg.types.json import Jsonb

from . import _core
from ._core import Lease, NotAcquired, Timing


class Session:
    """A connection whose calls never keep the caller past their bound.
    Each call runs in a thread of its own; one still running at its bound
    (a frozen server ignores cancel requests) is abandoned with its
    connection, which that thread closes once the server answers. Until
    then nothing else touches the connection (psycopg connections are not
    for two threads at once)."""

    def __init__(self, dsn: str, until: float):
        self.conn: Optional[psycopg.Connection] = None
        self.abandoned = False
        self._lock = threading.Lock()
        self.conn = self._bounded(until, lambda: psycopg.connect(
            dsn, autocommit=True, application_name="leaderlock python",
            connect_timeout=max(1, int(until - time.monotonic() + 1))))

    def _bounded(self, until: float, work: Callable[[], Any]) -> Any:
        left = until - time.monotonic()
        if left <= 0:
            raise TimeoutError("no time left for the call")
        box: dict = {}

        def run() -> None:
            try:
                box["value"] = work()
            except BaseException as e:  # handed to the caller
                box["error"] = e
            with self._lock:
                late = self.abandoned
            if late:  # the caller gave up on this call: tidy up after it
                value = box.get("value")
                conn = value if isinstance(value, psycopg.Connection) else self.conn
                if conn is not None:
                    try:
                        conn.close()
                    except Exception:
                        pass
        t = threading.Thread(target=run, name="leaderlock call", daemon=True)
        t.start()
        t.join(left)
        with self._lock:
            if t.is_alive():
                self.abandoned = True
                raise TimeoutError("the server did not answer in time")
        if "error" in box:
            raise box["error"]
        return box["value"]

    def one(self, until: float, sql: str, args: tuple = ()) -> Any:
        """The first column of `sql`'s first row (None: no row)."""
        conn = self.conn

        def work() -> Any:
            cur = conn.execute(sql, args, prepare=False)
            row = cur.fetchone() if cur.description else None  # LISTEN and the like have no rows
            return row[0] if row else None
        return self._bounded(until, work)

    def notifies(self, seconds: float) -> list:
        """The notifications that arrive within `seconds` (bounded too)."""
        conn = self.conn
        return self._bounded(time.monotonic() + seconds + 5.0,
                             lambda: list(conn.notifies(timeout=max(seconds, 0.0), stop_after=1)))

    def close(self) -> None:
        with self._lock:
            if self.abandoned or self.conn is None:
                return  # the call's thread closes it
            conn, self.conn = self.conn, None
        try:
            conn.close()
        except Exception:
            pass


def worker_serves(s: Session, until: float) -> bool:
    try:
        return bool(s.one(until, _core.WORKER_SERVES))
    except psycopg.errors.UndefinedFunction:  # before 0.5.0
        return bool(s.one(until, _core.WORKER_RUNNING))


def probe(s: Session, until: float) -> bool:
    """Whether a notification this session sends itself comes back."""
    token = secrets.token_hex(8)
    s.one(until, _core.PROBE_LISTEN)
    s.one(until, _core.PROBE, (token,))
    return any(n.payload == token for n in s.notifies(0.2))


class Campaign:
    """Tries until won or `timeout` (None: forever; 0: one try)."""

    def __init__(self, s: Session, key: str, me: str, timing: Timing, value: Any):
        self.s, self.key, self.me, self.timing, self.value = s, key, me, timing, value
        self.last_try = float("-inf")  # when the last try started (HINT_FLOOR)
        self.slots_differ = False  # the last try met the key held with other slots
        by = time.monotonic() + timing.call_timeout
        self.worker = worker_serves(s, by)
        self.expire_lapsed = not self.worker
        s.one(by, _core.LISTEN)
        self.notifications = probe(s, by)

    def once(self) -> Optional[Lease]:
        t = self.timing
        self.last_try = time.monotonic()
        if self.expire_lapsed:
            try:
                self.s.one(time.monotonic() + t.call_timeout, _core.EXPIRE_LAPSED)
            except psycopg.DatabaseError as e:
                if isinstance(e, psycopg.OperationalError):
                    raise
                # refused (or missing before 0.5.0): the try below takes a
                # lapsed lease anyway; it only goes unannounced
                self.expire_lapsed = False
        start = time.monotonic()
        by = start + t.call_timeout
        try:
            won = self.s.one(by, _core.TRY_ACQUIRE, (self.key, self.me, t.ttl))
        except psycopg.DatabaseError as e:
            if not _core.slots_differ(e):
                raise
            # held with another number of slots: not ours now, a refusal
            if not self.slots_differ:
                self.slots_differ = True
                _core.warn_slots_differ(self.key, e)
            return None
        self.slots_differ = False
        if not won:
            return None
        term = self.s.one(by, _core.TERM_OF, (self.key, self.me))
        if term is None:
            return None
        if self.value is not None:
            self.s.one(by, "SELECT le_proclaim(key => %s, id => %s, value => %s)",
                       (self.key, self.me, Jsonb(self.value)))
        return Lease(self.key, self.me, term, self.value, start + t.ttl - t.margin)

    def run(self, timeout: Optional[float], stop: Optional[threading.Event] = None,
            refused: Optional[Callable[[Optional[str]], None]] = None) -> Lease:
        """`stop` set: NotAcquired at the next look. `refused(holder)`: after
        each refused try, with the live holder."""
        give_up = None if timeout is None else time.monotonic() + timeout
        while True:
            if stop is not None and stop.is_set():
                raise NotAcquired(self.key, None)
            lease = self.once()
            if lease is not None:
                return lease
            now = time.monotonic()
            if refused is not None or (give_up is not None and now >= give_up):
                holder = self.s.one(now + self.timing.call_timeout, _core.LEADER, (self.key,))
                if refused is not None:
                    refused(holder)
                if give_up is not None and now >= give_up:
                    raise NotAcquired(self.key, holder)
            wait = self.timing.poll_every(self.worker, self.notifications)
            if give_up is not None:
                wait = min(wait, give_up - now)
            self.wait_for_hint(wait, stop)

    def wait_for_hint(self, seconds: float, stop: Optional[threading.Event] = None) -> None:
        """Until a notification says the key is free (but never sooner than
        HINT_FLOOR after the last try started: hints heard meanwhile make
        one try), `seconds` pass, or `stop` is set (looked at every 100 ms)."""
        until = time.monotonic() + max(seconds, 0.0)
        while (left := until - time.monotonic()) > 0 and not (stop is not None and stop.is_set()):
            if any(_core.frees(n.payload, self.key) for n in self.s.notifies(min(left, 0.1))):
                until = min(until, _core.hint_due(self.last_try, time.monotonic()))


class Renewer(threading.Thread):
    """Renews every ttl/3 until stopped; at the local deadline a timer
    marks the lease lost even if a call hangs."""

    def __init__(self, dsn: str, s: Session, lease: Lease, timing: Timing):
        super().__init__(name=f"leaderlock renewer {lease.key}", daemon=True)
        self.dsn, self.s, self.lease, self.timing = dsn, s, lease, timing
        self.stopping = threading.Event()
        self.watchdog: Optional[threading.Timer] = None
        self.arm()

    def arm(self) -> None:
        if self.watchdog:
            self.watchdog.cancel()
        self.watchdog = threading.Timer(max(0.0, self.lease.deadline - time.monotonic()),
                                        self.lease._lose, ("no renewal succeeded before the local deadline",))
        self.watchdog.daemon = True
        self.watchdog.start()

    def run(self) -> None:
        t, lease = self.timing, self.lease
        next_renewal = lease.deadline + t.margin - t.ttl + t.renew_every
        while not self.stopping.wait(max(0.0, next_renewal - time.monotonic())):
            if not lease.alive:
                return
            start = time.monotonic()
            # one call may take ttl/3 at most (then reconnect and retry), never past the deadline
            by = min(start + t.call_timeout, lease.deadline)
            try:
                if self.s is None:
                    self.s = Session(self.dsn, by)
                ok = self.s.one(by, _core.RENEW, (lease.key, lease.id, t.ttl))
                if ok:
                    if not lease.alive:  # the deadline passed meanwhile: lost is final
                        return
                    lease.deadline = start + t.ttl - t.margin
                    self.arm()
                    next_renewal = start + t.renew_every
                elif self.s.one(by, _core.STILL_OURS, (lease.id, lease.term, lease.key)):
                    next_renewal = start + t.retry_every  # its row was locked: retry until the deadline
                else:
                    lease._lose("the server refused the renewal (lease lapsed or taken)")
                    return
            except (psycopg.OperationalError, TimeoutError, psycopg.errors.QueryCanceled):
                self.drop()
                next_renewal = start + t.retry_every
            except psycopg.Error as e:  # rejected: retrying cannot help
                lease._lose(f"the server rejected the renewal: {e}")
                return

    def drop(self) -> None:
        if self.s is not None:
            self.s.close()
            self.s = None

    def stop(self) -> None:
        self.stopping.set()
        # a call hung on a frozen server ends at its bound (ttl/3 at most)
        self.join(self.timing.call_timeout + 1.0)
        if self.watchdog:
            self.watchdog.cancel()

    def release(self) -> bool:
        """Hands over at once when the lease is still ours (by the local
        clock); otherwise leaves it to lapse. Takes ttl/3 at most."""
        if not self.lease.alive:
            return False
        self.lease._lose("released")
        by = time.monotonic() + self.timing.call_timeout
        try:
            if self.s is None:
                self.s = Session(self.dsn, by)
            return bool(self.s.one(by, _core.RELEASE, (self.lease.key, self.lease.id)))
        except (psycopg.Error, TimeoutError):
            return False


class Leadership:
    """What `lead()` returns: a context manager for `with` (here) and for
    `async with` (_async.py)."""

    def __init__(self, dsn: str, key: str, ttl: float = 10.0, timeout: Optional[float] = None, *,
                 id: Optional[str] = None, value: Any = None, poll: Optional[float] = None):
        self.dsn = dsn
        self.key = _core.check_name("key", key)
        self.id = _core.check_name("id", id) if id is not None else _core.default_id()
        self.timing = Timing.of(ttl, poll)
        if timeout is not None and timeout < 0:
            raise ValueError(f"timeout must be None or at least 0, not {timeout!r}")
        self.timeout, self.value = timeout, value
        self._renewer: Optional[Renewer] = None
        self._async: Any = None

    def __enter__(self) -> Lease:
        t = self.timing
        s = Session(self.dsn, time.monotonic() + max(t.call_timeout, 2.0))
        try:
            lease = Campaign(s, self.key, self.id, t, self.value).run(self.timeout)
            # the renewals' connection: the campaign's, without its LISTEN
            s.one(time.monotonic() + t.call_timeout, "UNLISTEN *")
        except BaseException:
            s.close()
            raise
        self._renewer = Renewer(self.dsn, s, lease, t)
        self._renewer.start()
        return lease

    def __exit__(self, *exc: Any) -> None:
        r = self._renewer
        if r is None:
            return
        r.stop()
        if not r.is_alive():  # else its call still holds the connection
            r.release()
        r.drop()

    async def __aenter__(self) -> Lease:
        from ._async import AsyncLeadership
        self._async = AsyncLeadership(self)
        return await self._async.enter()

    async def __aexit__(self, *exc: Any) -> Optional[bool]:
        return await self._async.exit(*exc)

