"""asyncio: `async with lead(...) as lease:`. A task renews, on a new
connection when the old one is gone; the body calls `lease.check()` before
each step (it compares the monotonic clock with the local deadline at that
moment: after a pause of the process, every timer is due at once, and the
body's own may run before the deadline's). At the local deadline a timer of
the event loop also cancels the body's task, whatever a renewal call is
doing, and the `async with` raises LeaseLost."""
from __future__ import annotations

import asyncio
import secrets
import time
from contextlib import aclosing
from typing import Any, Optional

import psycopg
from psycopg.types.json import Jsonb

from . import _core, _shutdown
from ._core import Lease, LeaseLost, LeaderlockError, NotAcquired, Rejected, Unavailable

# asyncio.TimeoutError is TimeoutError (3.11); Rejected: what a new
# connection's lookup of leaderlock's schema may end with (as _sync's)
CALL_ERRORS = (psycopg.Error, TimeoutError, Rejected)


async def connect(dsn: str, until: float, name: str = _core.APPLICATION_NAME,
                  named: Optional[str] = None) -> psycopg.AsyncConnection:
    """A connection, with leaderlock's schema looked up on it (SCHEMA_OF,
    with `named`: the schema option) within the same bound: NotInstalled
    when no schema holds it, BadArgument when several do and none is
    named. `bounded` names that schema in every statement."""
    left = until - time.monotonic()
    if left <= 0:
        raise TimeoutError("no time left to connect")
    args = _core.connect_args(dsn, left, name)

    async def make() -> psycopg.AsyncConnection:
        conn = await psycopg.AsyncConnection.connect(dsn, **args)
        try:
            return _core.attach_schema(conn, await _core.afind_schema(conn, named))
        except BaseException:
            try:
                await asyncio.wait_for(conn.close(), 1.0)
            except BaseException:
                pass
            raise
    return await asyncio.wait_for(make(), left)


async def bounded(conn: psycopg.AsyncConnection, until: float, sql: str, args: tuple = (), *,
                  row: bool = False, rows: bool = False) -> Any:
    """The first column of `sql`'s first row (None: no row; `row`: the
    whole row; `rows`: every row, a list). At `until`, Abandoned, and the connection is abandoned: a
    cancelled call waits for the server to answer the cancel request, which
    a frozen server never does, so the caller does not wait for it; the
    connection is closed once the call ends."""
    left = until - time.monotonic()
    if left <= 0:
        raise TimeoutError("no time left for the call")

    async def call() -> Any:
        cur = await conn.execute(_core.bind(sql, _core.schema_of(conn)), args, prepare=False)
        if rows:
            return await cur.fetchall()
        r = await cur.fetchone() if cur.description else None
        return r if row else (r[0] if r else None)
    task = asyncio.ensure_future(call())
    try:
        done, _ = await asyncio.wait({task}, timeout=left)
    except BaseException:  # cancelled meanwhile: the call is abandoned too
        abandon(task, conn)
        raise
    if not done:
        abandon(task, conn)
        raise Abandoned("the server did not answer in time")
    return task.result()


def abandon(task: asyncio.Future, conn: psycopg.AsyncConnection) -> None:
    def later(t: asyncio.Future) -> None:
        if not t.cancelled():
            t.exception()  # retrieved: no "never retrieved" warning
        asyncio.ensure_future(conn.close())
    if task.done():
        later(task)
    else:
        task.add_done_callback(later)


class Abandoned(TimeoutError):
    """A call ran past its bound; its connection must not be used again."""


async def call_named(conn: psycopg.AsyncConnection, until: float, sql: str, args: tuple) -> Any:
    """RENEW or RELEASE naming the tenure's term (the last argument); on a
    schema before 0.5.0, which has no such argument, without it."""
    try:
        return await bounded(conn, until, sql, args)
    except psycopg.errors.UndefinedFunction:
        return await bounded(conn, until, _core.LEGACY[sql], args[:-1])


async def release_again(conn: psycopg.AsyncConnection, until: float, dsn: str, key: str, id: str) -> bool:
    """`_sync.release_again`, asynchronously."""
    pending, term = _core.unanswered_release(dsn, key, id)
    if not pending:
        return True
    if not await call_named(conn, until, _core.RELEASE, (key, id, term)):
        try:
            if await bounded(conn, until, _core.HOLDS, (key, id, term, term)):
                return False
        except psycopg.errors.UndefinedFunction:
            pass  # before 0.5.0: nothing to go by
    _core.release_answered(dsn, key, id, term)
    return True


async def worker_serves(conn: psycopg.AsyncConnection, until: float) -> bool:
    try:
        return bool(await bounded(conn, until, _core.WORKER_SERVES))
    except psycopg.errors.UndefinedFunction:  # before 0.5.0
        return bool(await bounded(conn, until, _core.WORKER_RUNNING))


class AsyncLeadership:
    def __init__(self, spec: Any):
        self.spec = spec
        self.conn: Optional[psycopg.AsyncConnection] = None
        self.lease: Optional[Lease] = None
        self.body: Optional[asyncio.Task] = None
        self.renewer: Optional[asyncio.Task] = None
        self.watchdog: Optional[asyncio.TimerHandle] = None
        self.cancelled_body = False
        self.exiting = False
        self.worker, self.notifications, self.expire_lapsed = True, False, False

    async def enter(self) -> Lease:
        s = self.spec
        try:
            self.lease = await self.campaign()
        except BaseException as e:
            await self.drop()
            if not isinstance(e, LeaderlockError):
                await self.abort()
            raise
        try:
            await bounded(self.conn, time.monotonic() + s.timing.call_timeout, _core.UNLISTEN)
        except CALL_ERRORS as e:
            await self.drop(e)  # the renewals make a new one
        self.body = asyncio.current_task()
        self.arm()
        self.renewer = asyncio.create_task(self.renew())
        _shutdown.register(self.lease)
        return self.lease

    def arm(self) -> None:
        """The local deadline, enforced by the event loop itself."""
        if self.watchdog is not None:
            self.watchdog.cancel()
        loop = asyncio.get_running_loop()
        self.watchdog = loop.call_later(max(0.0, self.lease.deadline - time.monotonic()), self.expire)

    def expire(self) -> None:
        if self.lease.alive:  # early, or moved meanwhile
            self.arm()
        else:
            self.lose()

    async def setup(self, give_up: Optional[float]) -> psycopg.AsyncConnection:
        """This campaign's connection, ready: LISTENing, and knowing whether
        notifications arrive and whether a worker announces expiries."""
        t = self.spec.timing
        now = time.monotonic()
        bound = t.connect_bound
        if give_up is not None:
            bound = min(bound, max(give_up - now, t.call_timeout, 2.0))
        self.conn = conn = await connect(self.spec.dsn, now + bound, named=self.spec.schema)
        by = time.monotonic() + max(t.call_timeout, 2.0)
        self.worker = await worker_serves(conn, by)
        self.expire_lapsed = not self.worker
        await bounded(conn, by, _core.LISTEN)
        self.notifications = await self.probe(by)
        return conn

    async def campaign(self) -> Lease:
        """Tries until won or the timeout, reconnecting (with backoff) when
        the connection is lost; only a refusal retrying cannot change ends
        it early (Rejected); a timeout while the server cannot be reached:
        Unavailable."""
        s, t = self.spec, self.spec.timing
        give_up = None if s.timeout is None else time.monotonic() + s.timeout
        outage = _core.Outage(s.key, "campaign")
        slots_differ = False  # the last try met the key held with other slots
        while True:
            if _shutdown.down:
                raise NotAcquired(s.key, None)
            try:
                conn = self.conn or await self.setup(give_up)
                last_try = time.monotonic()
                if not await release_again(conn, time.monotonic() + t.call_timeout, s.dsn, s.key, s.id):
                    start, won = time.monotonic(), False  # the tenure it ends is still held: no try yet
                else:
                    if self.expire_lapsed:
                        try:
                            await bounded(conn, time.monotonic() + t.call_timeout, _core.EXPIRE_LAPSED)
                        except psycopg.DatabaseError as e:
                            if isinstance(e, psycopg.OperationalError):
                                raise
                            self.expire_lapsed = False  # refused: the try takes a lapsed lease anyway
                    # the deadline counts from the moment the try is sent
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
                            await bounded(conn, start + t.call_timeout, _core.PROCLAIM,
                                          (s.key, s.id, Jsonb(s.value)))
                        outage.ended()
                        _core.log.info("leaderlock: %r: leading as %r in term %s", s.key, s.id, term)
                        lease = Lease(s.key, s.id, term, s.value, start + t.ttl - t.margin)
                        lease._schema = _core.schema_of(conn)
                        return lease
                outage.ended()
                now = time.monotonic()
                if give_up is not None and now >= give_up:
                    holder = await bounded(conn, now + t.call_timeout, _core.LEADER, (s.key,))
                    raise NotAcquired(s.key, holder)
                # the period counts from the try's start: a slow try does not stretch it
                wait = max(t.poll_every(self.worker, self.notifications) - (now - last_try), 0.0)
                if give_up is not None:
                    wait = min(wait, give_up - now)
                await self.wait_for_hint(wait, last_try)
            except CALL_ERRORS as e:
                refusal = await self.rejection(e)
                await self.drop(e)
                if refusal is not None:
                    _core.log.error("leaderlock: %r: %s", s.key, refusal)
                    if refusal is e:
                        raise
                    raise refusal from e
                delay = outage.failed(e)
                now = time.monotonic()
                if give_up is not None:
                    if now >= give_up:
                        raise Unavailable(f"leaderlock: {s.key!r}: the server could not be reached before "
                                          f"the timeout ({_core.describe(e)})") from e
                    delay = min(delay, give_up - now)
                await asyncio.sleep(delay)

    async def rejection(self, e: BaseException) -> Optional[Rejected]:
        conn = self.conn
        if conn is None:
            return _core.rejection(e)
        return _core.rejection(e, _core.database_of(conn), _core.schema_of(conn))

    async def probe(self, by: float) -> bool:
        """Whether a notification this session sends itself comes back."""
        token = secrets.token_hex(8)
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
        outage = _core.Outage(lease.key, "renewals")
        next_renewal = lease.deadline + t.margin - t.ttl + t.renew_every
        while True:
            now = time.monotonic()
            await asyncio.sleep(max(0.0, min(next_renewal, lease.deadline) - now))
            if not lease.alive:
                return self.lose()
            # the new deadline counts from the moment the renewal is sent
            start = time.monotonic()
            # one call may take ttl/3 at most (then reconnect and retry), never past the deadline
            by = min(start + t.call_timeout, lease.deadline)
            try:
                if self.conn is None:
                    self.conn = await connect(self.spec.dsn, by, named=self.spec.schema)
                if await call_named(self.conn, by, _core.RENEW, (lease.key, lease.id, t.ttl, lease.term)):
                    if not lease._extend(start + t.ttl - t.margin):
                        return self.lose()  # the deadline passed meanwhile: a loss is final
                    outage.ended()
                    self.arm()
                    next_renewal = start + t.renew_every
                    continue
                row = await bounded(self.conn, by, _core.HOLDER_OF, (lease.key,), row=True)
                if not _core.still_ours(lease, row):
                    return self.lose()
                next_renewal = start + t.retry_every  # its row was locked: retry until the deadline
            except CALL_ERRORS as e:
                refusal = await self.rejection(e)
                if refusal is not None:
                    lease._end(LeaseLost.REJECTED, f"the server rejected the renewal: {refusal}")
                    return self.lose()
                lease._failing(LeaseLost.CONNECTION_LOST, "no renewal reached the server before the local "
                                                          f"deadline (last: {_core.describe(e)})")
                outage.failed(e)
                await self.drop(e)
                next_renewal = start + t.retry_every

    def lose(self) -> None:
        """The lease ended (its reason is set): the body's task is cancelled."""
        lease = self.lease
        lease._end(LeaseLost.EXPIRED)  # keeps the reason it ended with; sets `lost`
        if self.body is not None and not self.body.done() and not self.cancelled_body and not self.exiting:
            self.cancelled_body = True
            self.body.cancel()

    async def drop(self, e: Optional[BaseException] = None) -> None:
        conn, self.conn = self.conn, None
        if conn is not None and not isinstance(e, Abandoned):  # else closed once its call ends
            try:
                await asyncio.wait_for(conn.close(), 1.0)
            except Exception:
                pass

    async def abort(self) -> None:
        """Interrupted by something else than its own outcome (cancelled,
        SIGTERM's SystemExit): a try in flight may have won, so release, at
        most ttl/3 later."""
        s = self.spec
        by = time.monotonic() + s.timing.call_timeout
        try:
            conn = await connect(s.dsn, by, named=s.schema)
            try:
                await call_named(conn, by, _core.RELEASE, (s.key, s.id, None))
            finally:
                await conn.close()
        except BaseException:
            _core.release_unanswered(s.dsn, s.key, s.id, None)

    async def exit(self, exc_type: Any, exc: Any, tb: Any) -> Optional[bool]:
        lease = self.lease
        self.exiting = True
        with _shutdown.holding_off():  # a SIGTERM meanwhile exits after the release
            if self.watchdog is not None:
                self.watchdog.cancel()
            lease._end(LeaseLost.RELEASED)  # whatever the body does next, check() raises
            _shutdown.unregister(lease)
            quiet = True
            if self.renewer is not None:
                # its calls end at their bound (ttl/3 at most)
                self.renewer.cancel()
                done, _ = await asyncio.wait({self.renewer}, timeout=self.spec.timing.call_timeout + 1.0)
                quiet = bool(done)
            if quiet and lease._server_has_it_maybe():
                by = time.monotonic() + self.spec.timing.call_timeout
                try:
                    if self.conn is None:
                        self.conn = await connect(self.spec.dsn, by, named=self.spec.schema)
                    if await call_named(self.conn, by, _core.RELEASE, (lease.key, lease.id, lease.term)):
                        _core.log.info("leaderlock: %r: released term %s", lease.key, lease.term)
                except CALL_ERRORS as e:
                    _core.release_unanswered(self.spec.dsn, lease.key, lease.id, lease.term)
                    if isinstance(e, Abandoned):
                        self.conn = None
                    _core.log.warning("leaderlock: %r: could not release term %s (%s); it lapses at its ttl",
                                      lease.key, lease.term, _core.describe(e))
            await self.drop()
        if self.cancelled_body and exc_type is asyncio.CancelledError:
            # our cancellation, not the caller's: report it as the loss it is
            if self.body is not None and hasattr(self.body, "uncancel"):
                self.body.uncancel()
            raise LeaseLost(lease.key, lease.term, lease.reason or LeaseLost.EXPIRED, lease.detail) from exc
        return None
