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


def connect(dsn: str) -> psycopg.Connection:
    return psycopg.connect(dsn, autocommit=True, application_name="leaderlock python")


def bounded(conn: psycopg.Connection, until: float, sql: str, args: tuple = ()) -> Any:
    """The first column of `sql`'s first row, the query cancelled if it is
    still running at `until` (time.monotonic())."""
    left = until - time.monotonic()
    if left <= 0:
        raise TimeoutError("no time left for the call")
    timer = threading.Timer(left, conn.cancel_safe)
    timer.daemon = True
    timer.start()
    try:
        row = conn.execute(sql, args, prepare=False).fetchone()
    finally:
        timer.cancel()
    return row[0] if row else None


def worker_serves(conn: psycopg.Connection) -> bool:
    try:
        return bool(conn.execute(_core.WORKER_SERVES, prepare=False).fetchone()[0])
    except psycopg.errors.UndefinedFunction:  # before 0.4.1
        return bool(conn.execute(_core.WORKER_RUNNING, prepare=False).fetchone()[0])


def probe(conn: psycopg.Connection) -> bool:
    """Whether a notification this session sends itself comes back."""
    token = secrets.token_hex(8)
    conn.execute(_core.PROBE_LISTEN)
    conn.execute(_core.PROBE, (token,), prepare=False)
    return any(n.payload == token for n in conn.notifies(timeout=0.2, stop_after=1))


class Campaign:
    """Tries until won or `timeout` (None: forever; 0: one try)."""

    def __init__(self, conn: psycopg.Connection, key: str, me: str, timing: Timing, value: Any):
        self.conn, self.key, self.me, self.timing, self.value = conn, key, me, timing, value
        self.worker = worker_serves(conn)
        self.expire_lapsed = not self.worker
        conn.execute(_core.LISTEN)
        self.notifications = probe(conn)

    def once(self) -> Optional[Lease]:
        t = self.timing
        if self.expire_lapsed:
            try:
                bounded(self.conn, time.monotonic() + t.call_timeout, _core.EXPIRE_LAPSED)
            except psycopg.DatabaseError as e:
                if isinstance(e, psycopg.OperationalError):
                    raise
                # refused (or missing before 0.4.1): the try below takes a
                # lapsed lease anyway; it only goes unannounced
                self.expire_lapsed = False
        start = time.monotonic()
        by = start + t.call_timeout
        if not bounded(self.conn, by, _core.TRY_ACQUIRE, (self.key, self.me, t.ttl)):
            return None
        row = self.conn.execute(_core.TERM_OF, (self.key, self.me), prepare=False).fetchone()
        if row is None:
            return None
        lease = Lease(self.key, self.me, row[0], self.value, start + t.ttl - t.margin)
        if self.value is not None:
            self.conn.execute("SELECT le_proclaim(key => %s, id => %s, value => %s)",
                              (self.key, self.me, Jsonb(self.value)), prepare=False)
        return lease

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
                holder = self.conn.execute(_core.LEADER, (self.key,), prepare=False).fetchone()[0]
                if refused is not None:
                    refused(holder)
                if give_up is not None and now >= give_up:
                    raise NotAcquired(self.key, holder)
            wait = self.timing.poll_every(self.worker, self.notifications)
            if give_up is not None:
                wait = min(wait, give_up - now)
            self.wait_for_hint(wait, stop)

    def wait_for_hint(self, seconds: float, stop: Optional[threading.Event] = None) -> None:
        """Until a notification says the key is free, `seconds` pass, or
        `stop` is set (looked at every 100 ms)."""
        until = time.monotonic() + max(seconds, 0.0)
        while (left := until - time.monotonic()) > 0 and not (stop is not None and stop.is_set()):
            for n in self.conn.notifies(timeout=min(left, 0.1)):
                if _core.frees(n.payload, self.key):
                    return


class Renewer(threading.Thread):
    """Renews every ttl/3 until stopped; at the local deadline a timer
    marks the lease lost even if a call hangs."""

    def __init__(self, dsn: str, conn: psycopg.Connection, lease: Lease, timing: Timing):
        super().__init__(name=f"leaderlock renewer {lease.key}", daemon=True)
        self.dsn, self.conn, self.lease, self.timing = dsn, conn, lease, timing
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
            try:
                if self.conn is None:
                    self.conn = connect(self.dsn)
                ok = bounded(self.conn, lease.deadline, _core.RENEW, (lease.key, lease.id, t.ttl))
                if ok:
                    lease.deadline = start + t.ttl - t.margin
                    self.arm()
                    next_renewal = start + t.renew_every
                elif bounded(self.conn, lease.deadline, _core.STILL_OURS, (lease.id, lease.term, lease.key)):
                    next_renewal = start + t.retry_every  # its row was locked: retry until the deadline
                else:
                    lease._lose("the server refused the renewal (lease lapsed or taken)")
                    return
            except (psycopg.OperationalError, TimeoutError, psycopg.errors.QueryCanceled):
                self.drop()
                next_renewal = start + t.retry_every

    def drop(self) -> None:
        if self.conn is not None:
            try:
                self.conn.close()
            except Exception:
                pass
            self.conn = None

    def stop(self) -> None:
        self.stopping.set()
        # a call hung on a frozen server may not end soon: do not wait for it
        self.join(self.timing.call_timeout)
        if self.watchdog:
            self.watchdog.cancel()

    def release(self) -> bool:
        """Hands over at once when the lease is still ours (by the local
        clock); otherwise leaves it to lapse."""
        if not self.lease.alive:
            return False
        self.lease._lose("released")
        try:
            if self.conn is None:
                self.conn = connect(self.dsn)
            return bool(bounded(self.conn, time.monotonic() + self.timing.call_timeout, _core.RELEASE,
                                (self.lease.key, self.lease.id)))
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
        conn = connect(self.dsn)
        try:
            lease = Campaign(conn, self.key, self.id, self.timing, self.value).run(self.timeout)
        except BaseException:
            conn.close()
            raise
        # a connection of its own for renewals: the campaign's has LISTEN state
        conn.execute("UNLISTEN *")
        self._renewer = Renewer(self.dsn, conn, lease, self.timing)
        self._renewer.start()
        return lease

    def __exit__(self, *exc: Any) -> None:
        r = self._renewer
        if r is None:
            return
        r.stop()
        if r.is_alive():  # still in a call: its connection is not ours to use
            r.lease._lose("left while a renewal hung")
            return
        r.release()
        r.drop()

    async def __aenter__(self) -> Lease:
        from ._async import AsyncLeadership
        self._async = AsyncLeadership(self)
        return await self._async.enter()

    async def __aexit__(self, *exc: Any) -> Optional[bool]:
        return await self._async.exit(*exc)

