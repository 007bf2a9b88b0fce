"""asyncio: `async with lead(...) as lease:`. A task renews; at the local
deadline a timer of the event loop cancels the body's task, whatever a
renewal call is doing (on a frozen server it can hang until the server
resumes), and the `async with` raises LeaseLost."""
from __future__ import annotations

import asyncio
import secrets
import time
from contextlib import aclosing
from typing import Any, Optional

import psycopg
from psycopg.types.json import Jsonb

from . import _core
from ._core import Lease, LeaseLost, NotAcquired


async def connect(dsn: str, until: float) -> psycopg.AsyncConnection:
    left = until - time.monotonic()
    return await asyncio.wait_for(psycopg.AsyncConnection.connect(
        dsn, autocommit=True, application_name="leaderlock python", connect_timeout=max(2, int(left + 1))), left)


async def bounded(conn: psycopg.AsyncConnection, until: float, sql: str, args: tuple = ()) -> Any:
    """The first column of `sql`'s first row (None: no row). At `until`,
    TimeoutError, and the connection is abandoned: a cancelled call waits
    for the server to answer the cancel request, which a frozen server
    never does, so the caller does not wait for it; the connection is
    closed once the call ends."""
    left = until - time.monotonic()
    if left <= 0:
        raise TimeoutError("no time left for the call")

    async def call() -> Any:
        cur = await conn.execute(sql, args, prepare=False)
        row = await cur.fetchone() if cur.description else None
        return row[0] if row else None
    task = asyncio.ensure_future(call())
    done, _ = await asyncio.wait({task}, timeout=left)
    if not done:
        def later(t: asyncio.Future) -> None:
            if not t.cancelled():
                t.exception()  # retrieved: no "never retrieved" warning
            asyncio.ensure_future(conn.close())
        task.add_done_callback(later)
        raise Abandoned("the server did not answer in time")
    return task.result()


class Abandoned(TimeoutError):
    """A call ran past its bound; its connection must not be used again."""


async def worker_serves(conn: psycopg.AsyncConnection) -> bool:
    try:
        return bool(await bounded(conn, time.monotonic() + 10, _core.WORKER_SERVES))
    except psycopg.errors.UndefinedFunction:  # before 0.5.0
        return bool(await bounded(conn, time.monotonic() + 10, _core.WORKER_RUNNING))


class AsyncLeadership:
    def __init__(self, spec: Any):
        self.spec = spec
        self.conn: Optional[psycopg.AsyncConnection] = None
        self.lease: Optional[Lease] = None
        self.body: Optional[asyncio.Task] = None
        self.renewer: Optional[asyncio.Task] = None
        self.watchdog: Optional[asyncio.TimerHandle] = None
        self.cancelled_body = False

    async def enter(self) -> Lease:
        s = self.spec
        self.conn = await connect(s.dsn, time.monotonic() + max(s.timing.call_timeout, 2.0))
        try:
            self.lease = await self.campaign()
            await bounded(self.conn, time.monotonic() + s.timing.call_timeout, "UNLISTEN *")
        except BaseException as e:
            if not isinstance(e, Abandoned):
                await self.conn.close()
            raise
        self.body = asyncio.current_task()
        self.arm()
        self.renewer = asyncio.create_task(self.renew())
        return self.lease

    def arm(self) -> None:
        """The local deadline, enforced by the event loop itself."""
        if self.watchdog is not None:
            self.watchdog.cancel()
        loop = asyncio.get_running_loop()
        self.watchdog = loop.call_later(max(0.0, self.lease.deadline - time.monotonic()), self.lose,
                                        "no renewal succeeded before the local deadline")

    async def campaign(self) -> Lease:
        s, t, conn = self.spec, self.spec.timing, self.conn
        worker = await worker_serves(conn)
        expire_lapsed = not worker
        await bounded(conn, time.monotonic() + t.call_timeout, _core.LISTEN)
        notifications = await self.probe()
        give_up = None if s.timeout is None else time.monotonic() + s.timeout
        slots_differ = False  # the last try met the key held with other slots
        while True:
            last_try = time.monotonic()
            if expire_lapsed:
                try:
                    await bounded(conn, time.monotonic() + t.call_timeout, _core.EXPIRE_LAPSED)
                except psycopg.DatabaseError as e:
                    if isinstance(e, psycopg.OperationalError):
                        raise
                    expire_lapsed = False  # refused: the try takes a lapsed lease anyway
            start = time.monotonic()
            try:
                won = await bounded(conn, start + t.call_timeout, _core.TRY_ACQUIRE, (s.key, s.id, t.ttl))
            except psycopg.DatabaseError as e:
                if not _core.slots_differ(e):
                    raise
                # held with another number of slots: not ours now, a refusal
                if not slots_differ:
                    _core.warn_slots_differ(s.key, e)
                slots_differ, won = True, False
            else:
                slots_differ = False
            if won:
                term = await bounded(conn, start + t.call_timeout, _core.TERM_OF, (s.key, s.id))
                if term is not None:
                    if s.value is not None:
                        await bounded(conn, start + t.call_timeout,
                                      "SELECT le_proclaim(key => %s, id => %s, value => %s)",
                                      (s.key, s.id, Jsonb(s.value)))
                    return Lease(s.key, s.id, term, s.value, start + t.ttl - t.margin)
            now = time.monotonic()
            if give_up is not None and now >= give_up:
                holder = await bounded(conn, now + t.call_timeout, _core.LEADER, (s.key,))
                raise NotAcquired(s.key, holder)
            wait = t.poll_every(worker, notifications)
            if give_up is not None:
                wait = min(wait, give_up - now)
            await self.wait_for_hint(wait, last_try)

    async def probe(self) -> bool:
        """Whether a notification this session sends itself comes back."""
        token = secrets.token_hex(8)
        by = time.monotonic() + self.spec.timing.call_timeout
        await bounded(self.conn, by, _core.PROBE_LISTEN)
        await bounded(self.conn, by, _core.PROBE, (token,))

        until = time.monotonic() + 0.2
        while (left := until - time.monotonic()) > 0:
            async with aclosing(self.conn.notifies(timeout=left, stop_after=1)) as notes:
                async for n in notes:
                    if n.payload == token:
                        return True
        return False

    async def wait_for_hint(self, seconds: float, last_try: float) -> None:
        """Until a notification says the key is free (but never sooner than
        HINT_FLOOR after the last try started: hints heard meanwhile make
        one try), or `seconds` pass. psycopg's own timeout ends each wait:
        asyncio.wait_for's cancellation of a wait on notifications can be
        lost when one arrives at that instant (Python 3.11), which would
        leave the wait running for ever."""
        until = time.monotonic() + max(seconds, 0.0)
        while (left := until - time.monotonic()) > 0:
            async with aclosing(self.conn.notifies(timeout=left, stop_after=1)) as notes:
                async for n in notes:
                    if _core.frees(n.payload, self.spec.key):
                        until = min(until, _core.hint_due(last_try, time.monotonic()))

    async def renew(self) -> None:
        t, lease = self.spec.timing, self.lease
        next_renewal = lease.deadline + t.margin - t.ttl + t.renew_every
        while True:
            now = time.monotonic()
            await asyncio.sleep(max(0.0, min(next_renewal, lease.deadline) - now))
            if time.monotonic() >= lease.deadline:
                return self.lose("no renewal succeeded before the local deadline")
            start = time.monotonic()
            # one call may take ttl/3 at most (then reconnect and retry), never past the deadline
            by = min(start + t.call_timeout, lease.deadline)
            try:
                if self.conn is None:
                    self.conn = await connect(self.spec.dsn, by)
                if await bounded(self.conn, by, _core.RENEW, (lease.key, lease.id, t.ttl)):
                    if not lease.alive:
                        return
                    lease.deadline = start + t.ttl - t.margin
                    self.arm()
                    next_renewal = start + t.renew_every
                elif await bounded(self.conn, by, _core.STILL_OURS, (lease.id, lease.term, lease.key)):
                    next_renewal = start + t.retry_every  # its row was locked: retry until the deadline
                else:
                    return self.lose("the server refused the renewal (lease lapsed or taken)")
            except Abandoned:
                self.conn = None  # closed once its call ends
                next_renewal = start + t.retry_every
            except (psycopg.OperationalError, asyncio.TimeoutError, TimeoutError):
                await self.drop()
                next_renewal = start + t.retry_every
            except psycopg.Error as e:  # rejected: retrying cannot help
                return self.lose(f"the server rejected the renewal: {e}")

    def lose(self, reason: str) -> None:
        if self.lease.lost.is_set():
            return
        self.lease._lose(reason)
        if self.body is not None and not self.body.done():
            self.cancelled_body = True
            self.body.cancel()

    async def drop(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None:
            try:
                await asyncio.wait_for(conn.close(), 1.0)
            except Exception:
                pass

    async def exit(self, exc_type: Any, exc: Any, tb: Any) -> Optional[bool]:
        if self.watchdog is not None:
            self.watchdog.cancel()
        quiet = True
        if self.renewer is not None:
            # its calls end at their bound (ttl/3 at most)
            self.renewer.cancel()
            done, _ = await asyncio.wait({self.renewer}, timeout=self.spec.timing.call_timeout + 1.0)
            quiet = bool(done)
        lease = self.lease
        if lease is not None and lease.alive and quiet:
            lease._lose("released")
            by = time.monotonic() + self.spec.timing.call_timeout
            try:
                if self.conn is None:
                    self.conn = await connect(self.spec.dsn, by)
                await bounded(self.conn, by, _core.RELEASE, (lease.key, lease.id))
            except Abandoned:
                self.conn = None
            except (psycopg.Error, asyncio.TimeoutError, TimeoutError):
                pass
        if lease is not None:
            lease._lose("released")
        await self.drop()
        if self.cancelled_body and exc_type is asyncio.CancelledError:
            # our cancellation, not the caller's: report it as the loss it is
            if self.body is not None and hasattr(self.body, "uncancel"):
                self.body.uncancel()
            raise LeaseLost(lease.key, lease.term, lease.reason or "lost") from exc
        return None
