"""Following the history of transitions (contract 23): a `Watcher`
delivers every transition after a position once, in position order, and
when its connection is lost it connects again (with backoff) and goes on
after the last one it delivered, so nothing is missed or repeated.

The server numbers transitions in commit order once they commit, and says
so on channel `leaderlock_history`. Any role may notify there: a
notification only makes the watcher read `le_history` now (at most every
MIN_READ_GAP); what it delivers is what the server returns. It also reads
every `poll` seconds, in case a notification is lost. The same algorithm as
the Rust client's HistoryWatcher (crates/client/src/history.rs).

One state, two drivers: `next()` and `for` (blocking, on a `_sync.Session`,
every call bounded), `anext()` and `async for` (asyncio, `_async.bounded`).
"""
from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import deque
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Iterator, Optional

import psycopg

from . import _async, _core, _shutdown
from ._core import BadArgument, Rejected, log
from ._sync import CALL_ERRORS, Session

# Every statement takes bind parameters, arguments by name, one round trip
# (as the Rust client's, crates/client/src/sql.rs); every object of
# leaderlock in its schema (_core.EXTSCHEMA), PostgreSQL's in pg_catalog:
# none depends on the search_path (_core.py).
# With the last position numbered, read in the same statement (one snapshot:
# both functions are STABLE): after a short page, every transition the filter
# selects up to it has been read. No transition: one row, NULL but that.
HISTORY = ('SELECT h."position", h.at, h.event, h.key, h.holder, h.term, h.role::pg_catalog.text, h.payload, '
           "p.head FROM (SELECT @extschema@.le_history_position() AS head) p "
           "LEFT JOIN @extschema@.le_history(after => %s::bigint, for_key => %s::pg_catalog.text, "
           'key_prefix => %s::pg_catalog.text, max_rows => %s::integer) h ON true ORDER BY h."position"')
HISTORY_POSITION = "SELECT @extschema@.le_history_position()"
LISTEN = "LISTEN leaderlock_history"
# Where no worker numbers the history (the portable edition, a library not
# preloaded): le_expire_lapsed() numbers it before each read (clients there
# call it anyway), and the changes on channel leaderlock are hints too.
LISTEN_CHANGES = "LISTEN leaderlock"
NUMBER = "SELECT @extschema@.le_expire_lapsed()"
CHANNEL = "leaderlock_history"
# After a 42883: whether the history is in leaderlock's schema there
# (extension 0.5.0). The schema as SCHEMA_OF quoted it.
HAS_HISTORY = ("SELECT EXISTS (SELECT FROM pg_catalog.pg_proc "
               "WHERE pronamespace OPERATOR(pg_catalog.=) %s::pg_catalog.regnamespace "
               "AND proname OPERATOR(pg_catalog.=) 'le_history'::pg_catalog.name)")

#: The SQLSTATE of a position the retention no longer keeps.
PRUNED = "LE002"
#: The sessions' name when the connection string (or PGAPPNAME) gives none.
APPLICATION_NAME = "leaderlock watch"
#: Rows read per call; a full page is followed by the next at once.
PAGE = 1000
#: Least time between two reads that notifications ask for, however many arrive.
MIN_READ_GAP = 0.050
#: Reads at least this often without a notification (default).
POLL_EVERY = 1.0
#: Longest a connection attempt or a read may take.
CALL_TIMEOUT = 10.0
#: Wait before connecting again: from the first, doubling to the second
#: (each drawn between half and all of it), back to the first after a read.
BACKOFF = (0.1, 5.0)
# How often a wait looks whether close() was called.
SLICE = 0.1

UTC = timezone.utc


class HistoryPruned(Rejected):
    """The transitions after `position` were deleted by the retention
    (leaderlock.history_retention, leaderlock.history_max_rows) before they
    were read (SQLSTATE LE002): some were missed. The watcher stops; read
    the current state (leaderlock_status), then watch from
    `le_history_position()` (since=None)."""

    def __init__(self, message: str, position: int):
        self.position = position
        super().__init__(message, PRUNED)


@dataclass(frozen=True)
class Transition:
    """One transition, as the history holds it."""

    #: Only grows, in commit order: resume after it (`since=`).
    position: int
    #: When it happened (the server's lease clock), an aware UTC datetime.
    at: datetime
    #: acquired, released, expired, proclaimed, run_claimed, run_finished, run_missed,
    #: schedule_paused, schedule_resumed, leaderless or leaderless_end.
    event: str
    #: The lease's key, or the run's job.
    key: Optional[str]
    holder: Optional[str]
    term: Optional[int]
    #: The role whose call made it; None for the server's worker.
    role: Optional[str]
    #: The notification that announced it (JSON, decoded: a dict).
    payload: Any


#: Watcher._now: nothing to return yet, read (or wait) on.
_READ_ON = object()


class Watcher:
    """Follows the history; what `leaderlock.watch()` returns. See `watch`."""

    def __init__(self, dsn: str, since: Optional[int] = None, *, key: Optional[str] = None,
                 key_prefix: Optional[str] = None, poll: float = POLL_EVERY, schema: Optional[str] = None):
        if not isinstance(dsn, str):
            raise BadArgument("dsn must be a connection string")
        _core.connect_args(dsn, 0)  # BadArgument now rather than at the first read
        self.schema = _core.schema_option(schema)
        if since is not None and (isinstance(since, bool) or not isinstance(since, int) or since < 0):
            raise BadArgument(f"since must be None or a history position (an int, at least 0), not {since!r}")
        if key is not None:
            _core.check_name("key", key)
        if key_prefix is not None and not isinstance(key_prefix, str):
            raise BadArgument(f"key_prefix must be a string, not {key_prefix!r}")
        if key is not None and key_prefix is not None:
            raise BadArgument("give key or key_prefix, not both")
        if isinstance(poll, bool) or not isinstance(poll, (int, float)) or not 0 < poll < float("inf"):
            raise BadArgument(f"poll must be a positive number of seconds, not {poll!r}")
        self.dsn, self.key, self.key_prefix = dsn, key, key_prefix
        self.poll = max(float(poll), MIN_READ_GAP)
        #: How many times the connection was lost and made again.
        self.reconnects = 0
        self._delivered = since  # the last position delivered
        self._read = since  # the last position read: rows up to it wait in _ready
        self._number = False  # no worker numbers the history: le_expire_lapsed() before each read
        self._ready: deque = deque()
        self._last_read = float("-inf")  # when the last read was sent
        self._due = float("-inf")  # when the next read is due
        self._connected = False  # connected at least once
        self._error: Optional[Rejected] = None  # what ended it
        self._closed = threading.Event()
        self._lock = threading.Lock()  # guards _reading, and the connections once closed
        self._reading = False  # next() or anext() runs
        label = key if key is not None else f"{key_prefix}*" if key_prefix is not None else "*"
        self._outage = _core.Outage(label, "history")
        self._outage.backoff = _core.Backoff(*BACKOFF)
        self._s: Optional[Session] = None
        self._aconn: Optional[psycopg.AsyncConnection] = None

    def __repr__(self) -> str:
        return f"<leaderlock.Watcher position={self._delivered} {'closed' if self.closed else 'open'}>"

    @property
    def position(self) -> Optional[int]:
        """The position up to which every transition of this watcher's filter
        was delivered: the last one delivered, or, when nothing more was for
        the filter, the last position numbered (`since` before the first;
        with since=None, None until the first connection reads
        le_history_position()). Keep it to resume later: watch(since=...)."""
        return self._delivered

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    # What both drivers share.

    def _stopped(self) -> bool:
        return self._closed.is_set() or _shutdown.down

    def _started(self, position: Optional[int]) -> None:
        """Connected and listening; `position` is le_history_position() when
        there was no position yet."""
        if self._read is None:
            self._read = self._delivered = int(position or 0)
        if self._connected:
            self.reconnects += 1
        self._connected = True
        self._due = float("-inf")  # read at once: notifications may have been missed meanwhile

    def _query(self) -> tuple:
        return (self._read or 0, self.key, self.key_prefix, PAGE)

    def _took(self, rows: list, sent: float) -> None:
        """A read sent at `sent` returned `rows`."""
        self._last_read = sent
        head = rows[0][8] if rows else None
        rows = [r for r in rows if r[0] is not None]
        for position, at, event, key, holder, term, role, payload, _ in rows:
            if self._read is not None and position <= self._read:
                continue  # never the case: positions only grow; never delivered twice either way
            self._ready.append(Transition(position, at.astimezone(UTC), event, key, holder, term, role, payload))
            self._read = position
        if len(rows) < PAGE and head is not None and head > (self._read or 0):
            # a short page: nothing more up to head is for this filter (a
            # watcher of a quiet key is not passed by the retention)
            self._read = head
            if not self._ready:
                self._delivered = head
        # a full page: the next at once; else at the poll (or a notification)
        self._due = sent if len(rows) >= PAGE else sent + self.poll
        self._outage.ended()

    def _hinted(self, payload: str) -> None:
        """A notification on CHANNEL: read now, but not sooner than
        MIN_READ_GAP after the last read; none when it names a position
        already read (nothing new by its own account)."""
        try:
            if self._read is not None and int(payload) <= self._read:
                return
        except ValueError:
            pass
        self._due = min(self._due, self._last_read + MIN_READ_GAP)

    def _deliver(self) -> Transition:
        t = self._ready.popleft()
        # the last of a short page: everything up to the position read is delivered
        self._delivered = t.position if self._ready else max(t.position, self._read or t.position)
        return t

    def _refusal(self, e: BaseException, database: Optional[str], schema: Optional[str],
                 has_history: Optional[bool]) -> Optional[Rejected]:
        """The typed error when retrying cannot help, else None. `schema`:
        leaderlock's schema on the connection (None: not found);
        `has_history`: whether le_history is there, looked up after a 42883."""
        if getattr(e, "sqlstate", None) == PRUNED:
            first = (str(e).splitlines() or [PRUNED])[0]
            return HistoryPruned(first, self._read or 0)
        if _core.needs_schema(e) and schema is not None and has_history is False:
            return Rejected("leaderlock here has no history of transitions (le_history): it needs version "
                            "0.5.0 or later (ALTER EXTENSION leaderlock UPDATE)", "42883")
        return _core.rejection(e, database, schema)

    def _failed(self, e: BaseException, refusal: Optional[Rejected]) -> float:
        """After a failed call (the connection dropped): raises the typed
        error, which ends the watcher, or returns the delay before trying
        again."""
        if refusal is not None:
            self._error = refusal
            log.error("leaderlock: history: %s", refusal)
            if refusal is e:
                raise refusal
            raise refusal from e
        return self._outage.failed(e)

    def _now(self, until: float, tried: bool) -> Any:
        """What next() and anext() return now (a transition, or None: closed,
        or `until` passed after one try), or _READ_ON; raises what ended the
        watcher."""
        if self._error is not None:
            raise self._error
        if self._stopped():
            return None
        if self._ready:
            return self._deliver()
        if tried and time.monotonic() >= until:
            return None
        return _READ_ON

    def _until(self, timeout: Optional[float]) -> float:
        if timeout is None:
            return float("inf")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout >= 0:
            raise BadArgument(f"timeout must be None or at least 0 seconds, not {timeout!r}")
        return time.monotonic() + timeout

    # Blocking.

    def next(self, timeout: Optional[float] = None) -> Optional[Transition]:
        """The next transition, waiting for it up to `timeout` seconds (None:
        until one comes); None when `timeout` passes first, or once the
        watcher is closed. HistoryPruned, or another Rejected (BadArgument,
        NotInstalled, PrivilegeError), when retrying cannot help: the
        watcher is over, and raises it again at each call."""
        until = self._until(timeout)
        with self._reader():
            tried = False
            while (got := self._now(until, tried)) is _READ_ON:
                tried = True
                try:
                    self._step(until)
                except CALL_ERRORS as e:
                    refusal = self._sync_refusal(e)
                    self._drop()
                    delay = self._failed(e, refusal)
                    self._closed.wait(max(0.0, min(delay, until - time.monotonic())))
            return got

    def __iter__(self) -> Iterator[Transition]:
        return self

    def __next__(self) -> Transition:
        t = self.next()
        if t is None:
            raise StopIteration
        return t

    def _session(self) -> Session:
        if self._s is None:
            self._s = s = Session(self.dsn, time.monotonic() + CALL_TIMEOUT, APPLICATION_NAME, named=self.schema)
            by = time.monotonic() + CALL_TIMEOUT
            self._number = not s.one(by, _core.WORKER_SERVES)
            s.one(by, LISTEN)  # before the position: no notification after it is missed
            if self._number:
                s.one(by, LISTEN_CHANGES)
            self._started(s.one(by, HISTORY_POSITION) if self._read is None else None)
        return self._s

    def _step(self, until: float) -> None:
        """One read when due, else a wait for a notification, the next
        poll, `until` or close()."""
        s = self._session()
        if time.monotonic() >= self._due:
            sent = time.monotonic()
            if self._number:
                s.one(sent + CALL_TIMEOUT, NUMBER)
            self._took(s.rows(sent + CALL_TIMEOUT, HISTORY, self._query()), sent)
            return
        while (left := min(self._due, until) - time.monotonic()) > 0 and not self._stopped():
            for n in s.notifies(min(left, SLICE)):
                if n.channel == CHANNEL or (self._number and n.channel == "leaderlock"):
                    self._hinted(n.payload)

    def _sync_refusal(self, e: BaseException) -> Optional[Rejected]:
        s, has = self._s, None
        schema = s.schema if s is not None else None
        if _core.needs_schema(e) and s is not None and not s.abandoned and s.conn is not None and schema:
            try:
                has = bool(s.one(time.monotonic() + 2.0, HAS_HISTORY, (schema,)))
            except CALL_ERRORS:
                pass
        return self._refusal(e, s.database if s is not None else None, schema, has)

    def _drop(self) -> None:
        s, self._s = self._s, None
        if s is not None:
            s.close()

    @contextlib.contextmanager
    def _reader(self) -> Iterator[None]:
        """For the time of one next() or anext(): the one reader; once
        closed, the connection goes (close() leaves it to the reader)."""
        with self._lock:
            if self._reading:
                raise RuntimeError("leaderlock: a Watcher is read by one caller at a time")
            self._reading = True
        try:
            yield
        finally:
            with self._lock:
                self._reading = False
                if self._closed.is_set():
                    self._drop()

    def close(self) -> None:
        """Stops the watcher, from any thread: a `next()` under way returns
        None (`for` ends) within 0.1 s (a read under way first ends, within
        its bound), and the connection is closed. asyncio: `await aclose()`."""
        with self._lock:
            self._closed.set()
            if not self._reading:
                self._drop()

    def __enter__(self) -> "Watcher":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # asyncio.

    async def anext(self, timeout: Optional[float] = None) -> Optional[Transition]:
        """`next()` for asyncio."""
        until = self._until(timeout)
        with self._reader():
            try:
                tried = False
                while (got := self._now(until, tried)) is _READ_ON:
                    tried = True
                    try:
                        await self._astep(until)
                    except CALL_ERRORS as e:
                        refusal = await self._async_refusal(e)
                        await self._adrop(e)
                        delay = self._failed(e, refusal)
                        await self._asleep(max(0.0, min(delay, until - time.monotonic())))
                return got
            finally:
                if self._closed.is_set():
                    await self._adrop()  # (before _reader's end: aclose() leaves it to this reader)

    def __aiter__(self) -> "Watcher":
        return self

    async def __anext__(self) -> Transition:
        t = await self.anext()
        if t is None:
            raise StopAsyncIteration
        return t

    async def _aconnection(self) -> psycopg.AsyncConnection:
        if self._aconn is None:
            self._aconn = conn = await _async.connect(self.dsn, time.monotonic() + CALL_TIMEOUT, APPLICATION_NAME,
                                                      named=self.schema)
            by = time.monotonic() + CALL_TIMEOUT
            self._number = not await _async.bounded(conn, by, _core.WORKER_SERVES)
            await _async.bounded(conn, by, LISTEN)
            if self._number:
                await _async.bounded(conn, by, LISTEN_CHANGES)
            self._started(await _async.bounded(conn, by, HISTORY_POSITION) if self._read is None else None)
        return self._aconn

    async def _astep(self, until: float) -> None:
        conn = await self._aconnection()
        if time.monotonic() >= self._due:
            sent = time.monotonic()
            if self._number:
                await _async.bounded(conn, sent + CALL_TIMEOUT, NUMBER)
            self._took(await _async.bounded(conn, sent + CALL_TIMEOUT, HISTORY, self._query(), rows=True), sent)
            return
        # psycopg's own timeout ends each wait (see _async.AsyncLeadership.wait_for_hint)
        while (left := min(self._due, until) - time.monotonic()) > 0 and not self._stopped():
            async with contextlib.aclosing(conn.notifies(timeout=min(left, SLICE), stop_after=1)) as notes:
                async for n in notes:
                    if n.channel == CHANNEL or (self._number and n.channel == "leaderlock"):
                        self._hinted(n.payload)

    async def _asleep(self, seconds: float) -> None:
        until = time.monotonic() + seconds
        while (left := until - time.monotonic()) > 0 and not self._stopped():
            await asyncio.sleep(min(left, SLICE))

    async def _async_refusal(self, e: BaseException) -> Optional[Rejected]:
        conn, has = self._aconn, None
        schema = _core.schema_of(conn) if conn is not None else None
        if _core.needs_schema(e) and conn is not None and not isinstance(e, _async.Abandoned) and schema:
            try:
                has = bool(await _async.bounded(conn, time.monotonic() + 2.0, HAS_HISTORY, (schema,)))
            except CALL_ERRORS as e2:
                if isinstance(e2, _async.Abandoned):
                    self._aconn = None  # closed once its call ends
        return self._refusal(e, _core.database_of(conn) if conn is not None else None, schema, has)

    async def _adrop(self, e: Optional[BaseException] = None) -> None:
        conn, self._aconn = self._aconn, None
        if conn is not None and not isinstance(e, _async.Abandoned):  # else closed once its call ends
            try:
                await asyncio.wait_for(conn.close(), 1.0)
            except Exception:
                pass

    async def aclose(self) -> None:
        """`close()` for asyncio: also closes the asyncio connection."""
        with self._lock:
            self._closed.set()
            if self._reading:
                return  # the reader closes it on its way out, within 0.1 s
            self._drop()
            conn, self._aconn = self._aconn, None
        if conn is not None:
            try:
                await asyncio.wait_for(conn.close(), 1.0)
            except Exception:
                pass

    async def __aenter__(self) -> "Watcher":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()
