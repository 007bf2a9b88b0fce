"""asyncio: `async with lead(...) as lease:`. A task renews; at the local
deadline a timer of the event loop cancels the body's task, whatever a
renewal call is doing (on a frozen server it can hang until the server
resumes), and the `async with` raises LeaseLost."""
from __future__ import annotations

import asyncio
import secrets
import time
from typing import Any, Optional

import psycopg
from psycopg.types.json import Jsonb

from . import _core
from ._core import Lease, LeaseLost, NotAcquired


async def connect(dsn: str) -> psycopg.AsyncConnection:
    return await psycopg.AsyncConnection.connect(dsn, autocommit=True, application_name="leaderlock python")


async def bounded(conn: psycopg.AsyncConnection, until: float, sql: str, args: tuple = ()) -> Any:
    """The first column of `sql`'s first row; TimeoutError at `until`."""
    left = until - time.monotonic()
    if left <= 0:
        raise TimeoutError("no time left for the call")
    cur = await asyncio.wait_for(conn.execute(sql, args, prepare=False), left)
    row = await cur.fetchone()
    return row[0] if row else None


async def worker_serves(conn: psycopg.AsyncConnection) -> bool:
    try:
        return bool(await bounded(conn, time.monotonic() + 10, _core.WORKER_SERVES))
    except psycopg.errors.UndefinedFunction:  # before 0.4.1
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
        self.conn = await connect(s.dsn)
        try:
            self.lease = await self.campaign()
        except BaseException:
            await self.conn.close()
            raise
        await self.conn.execute("UNLISTEN *")
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
        await conn.execute(_core.LISTEN)
        notifications = await self.probe()
        give_up = None if s.timeout is None else time.monotonic() + s.timeout
        while True:
            if expire_lapsed:
                try:
                    await bounded(conn, time.monotonic() + t.call_timeout, _core.EXPIRE_LAPSED)
                except psycopg.DatabaseError as e:
                    if isinstance(e, psycopg.OperationalError):
                        raise
                    expire_lapsed = False  # refused: the try takes a lapsed lease anyway
            start = time.monotonic()
            if await bounded(conn, start + t.call_timeout, _core.TRY_ACQUIRE, (s.key, s.id, t.ttl)):
                cur = await conn.execute(_core.TERM_OF, (s.key, s.id), prepare=False)
                row = await cur.fetchone()
                if row is not None:
                    if s.value is not None:
                        await conn.execute("SELECT le_proclaim(key => %s, id => %s, value => %s)",
                                           (s.key, s.id, Jsonb(s.value)), prepare=False)
                    return Lease(s.key, s.id, row[0], s.value, start + t.ttl - t.margin)
            now = time.monotonic()
            if give_up is not None and now >= give_up:
                holder = await bounded(conn, now + t.call_timeout, _core.LEADER, (s.key,))
                raise NotAcquired(s.key, holder)
            wait = t.poll_every(worker, notifications)
            if give_up is not None:
                wait = min(wait, give_up - now)
            await self.wait_for_hint(wait)

    async def probe(self) -> bool:
        """Whether a notification this session sends itself comes back."""
        token = secrets.token_hex(8)
        await self.conn.execute(_core.PROBE_LISTEN)
        await self.conn.execute(_core.PROBE, (token,), prepare=False)

        async def back() -> bool:
            async for n in self.conn.notifies():
                if n.payload == token:
                    return True
            return False
        try:
            return await asyncio.wait_for(back(), 0.2)
        except asyncio.TimeoutError:
            return False

    async def wait_for_hint(self, seconds: float) -> None:
        async def hint() -> None:
            async for n in self.conn.notifies():
                if _core.frees(n.payload, self.spec.key):
                    return
        try:
            await asyncio.wait_for(hint(), max(seconds, 0.0))
        except asyncio.TimeoutError:
            pass

    async def renew(self) -> None:
        t, lease = self.spec.timing, self.lease
        next_renewal = lease.deadline + t.margin - t.ttl + t.renew_every
        while True:
            now = time.monotonic()
            await asyncio.sleep(max(0.0, min(next_renewal, lease.deadline) - now))
            if time.monotonic() >= lease.deadline:
                return self.lose("no renewal succeeded before the local deadline")
            start = time.monotonic()
            try:
                if self.conn is None:
                    self.conn = await asyncio.wait_for(connect(self.spec.dsn), lease.deadline - start)
                if await bounded(self.conn, lease.deadline, _core.RENEW, (lease.key, lease.id, t.ttl)):
                    if not lease.alive:
                        return
                    lease.deadline = start + t.ttl - t.margin
                    self.arm()
                    next_renewal = start + t.renew_every
                elif await bounded(self.conn, lease.deadline, _core.STILL_OURS, (lease.id, lease.term, lease.key)):
                    next_renewal = start + t.retry_every  # its row was locked: retry until the deadline
                else:
                    return self.lose("the server refused the renewal (lease lapsed or taken)")
            except (psycopg.OperationalError, asyncio.TimeoutError, TimeoutError):
                await self.drop()
                next_renewal = start + t.retry_every

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
        if self.renewer is not None:
            # a call hung on a frozen server may not end soon: do not wait for it
            self.renewer.cancel()
            await asyncio.wait({self.renewer}, timeout=self.spec.timing.call_timeout)
        lease = self.lease
        if lease is not None and lease.alive:
            lease._lose("released")
            try:
                if self.conn is None:
                    self.conn = await connect(self.spec.dsn)
                await bounded(self.conn, time.monotonic() + self.spec.timing.call_timeout, _core.RELEASE,
                              (lease.key, lease.id))
            except (psycopg.Error, asyncio.TimeoutError, TimeoutError):
                pass
        await self.drop()
        if self.cancelled_body and exc_type is asyncio.CancelledError:
            # our cancellation, not the caller's: report it as the loss it is
            if self.body is not None and hasattr(self.body, "uncancel"):
                self.body.uncancel()
            raise LeaseLost(lease.key, lease.term, lease.reason or "lost") from exc
        return None
