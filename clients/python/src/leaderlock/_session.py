"""Sessions (contract 21, docs/sessions.md): one renewal for many keys.

    with leaderlock.session(dsn, ttl=10.0) as s:
        lease = s.try_acquire("shard/12")        # a Lease, or None
        lease = s.acquire("shard/13", 5.0)       # waits up to 5 s; NotAcquired
        while lease.alive:
            lease.check()                        # LeaseLost past the session's local deadline
            step(lease)                          # writes fenced by lease.guard(conn)
    # leaving: every lease ends here, then le_close_session vacates every key

A thread renews the session (le_renew_session, one row written however
many keys it holds) every ttl/3 on a connection of its own. The session has
the local deadline a lease has (the instant the last successful open or
renewal was sent + ttl - ttl/200, monotonic clock), read at each question;
a renewal the server refuses, or renewals failing until that deadline,
lose the session and every lease of it for good. Acquisitions and releases
run on connections of their own (a small pool), so a waiting acquire never
holds the renewals back.
"""
from __future__ import annotations

import logging
import math
import threading
import time
import uuid
from contextlib import contextmanager
from typing import Any, Iterator, Optional

from psycopg.types.json import Jsonb

from . import _core, _shutdown
from ._core import BadArgument, Lease, LeaderlockError, LeaseLost, NotAcquired, Timing, Unavailable, log
from ._sync import CALL_ERRORS, Renewer, release_again
from ._sync import Session as Conn

# Every statement takes bind parameters, arguments by name, one round trip.
# Every object of leaderlock in its schema (_core.EXTSCHEMA), PostgreSQL's
# in pg_catalog: none depends on the search_path (_core.py).
OPEN_SESSION = ("SELECT @extschema@.le_open_session(id => %s, ttl => pg_catalog.make_interval(secs => %s), "
                "lock_delay => pg_catalog.make_interval(secs => %s), keep_values => %s)")
RENEW_SESSION = "SELECT @extschema@.le_renew_session(session => %s)"
CLOSE_SESSION = "SELECT @extschema@.le_close_session(session => %s)"
TRY_ACQUIRE_IN = "SELECT @extschema@.le_try_acquire_in(session => %s, key => %s, value => %s)"
ACQUIRE_IN = ("SELECT @extschema@.le_acquire_in(session => %s, key => %s, "
              "wait => pg_catalog.make_interval(secs => %s), value => %s, priority => %s)")
# In the acquisition's transaction: the key's term, held by this session.
TERM_IN = ("SELECT term FROM @extschema@.leaderlock WHERE key OPERATOR(pg_catalog.=) %s "
           "AND holder OPERATOR(pg_catalog.=) %s AND session OPERATOR(pg_catalog.=) %s")
# After le_acquire_in said no: who holds the key, and whether the session
# still has its row on the server (gone: it ended there).
AFTER_REFUSAL = ("SELECT @extschema@.le_leader(key => %s), "
                 "EXISTS (SELECT FROM @extschema@.leaderlock_sessions WHERE session OPERATOR(pg_catalog.=) %s)")
# How many idle connections a session keeps for acquisitions and releases.
IDLE_CONNECTIONS = 4


class SessionLost(LeaseLost):
    """The session is gone (or its local deadline passed): every lease of it
    is lost too. A LeaseLost with `session` (its handle, a uuid) and `id`;
    `key` and `term` are None; `reason` is a LeaseLost constant (EXPIRED,
    CONNECTION_LOST, VACATED: the server refused a renewal, the session
    ended there; REJECTED, RELEASED: closed, SHUTDOWN)."""

    def __init__(self, session: Optional[uuid.UUID], id: str, reason: str, detail: Optional[str] = None):
        self.session, self.id = session, id
        self.key, self.term, self.reason, self.detail = None, None, reason, detail  # type: ignore[assignment]
        LeaderlockError.__init__(self, f"lost the session {session} of {id!r}: {reason}"
                                       + (f": {detail}" if detail else ""))


class SessionLease(Lease):
    """A key held under a session: a Lease (`key`, `id`, `term`, `value`,
    `alive`, `check()`, `remaining()`, `guard(conn)`, `aguard(conn)`,
    `lost`) alive exactly while its session is and the key was not
    released. `deadline` is the session's; `term` the key's own (fence
    writes with `guard`, as for any lease). `release()` releases this key
    alone."""

    def __init__(self, session: "Session", key: str, term: int, value: Any):
        super().__init__(key, session.id, term, value, math.inf)  # the session's deadline rules
        self.session = session

    def __repr__(self) -> str:
        state = "alive" if self.reason is None else f"lost: {self.reason}"
        return f"<leaderlock.SessionLease {self.key!r} id={self.id!r} term={self.term} {state}>"

    @property
    def deadline(self) -> float:
        return self.session.deadline

    def _ours(self) -> bool:
        s = self.session
        if not s._ours():
            self._end(s.reason or LeaseLost.EXPIRED, s.detail)
        return super()._ours()

    def remaining(self) -> float:
        return self.session.remaining() if self._ours() else 0.0

    def release(self) -> bool:
        """Releases this key (le_release with its term); the session goes on."""
        return self.session._release(self.key, self)

    def _log_end(self) -> None:
        if self.session.reason is not None:
            # the session ended: it says so once, for all its keys
            log.debug("leaderlock: %r: term %s ended with its session: %s", self.key, self.term, self.reason)
            return
        super()._log_end()


class SessionRenewer(Renewer):
    """Renews the session (le_renew_session) every ttl/3 until stopped, as a
    lease's renewer does: a new connection when the old one is lost or
    hangs, each call bounded by ttl/3 and by the local deadline, a timer
    setting `lost` at the deadline. A refused renewal ends the session, and
    with it every lease, at once: the server says it is not live."""

    def renewed(self, by: float) -> bool:
        return bool(self.s.one(by, RENEW_SESSION, (self.lease.handle,)))

    def refused(self, by: float) -> bool:
        self.lease._end(LeaseLost.VACATED, "the server refused the renewal: the session is not live there "
                                           "(closed, lapsed, or unknown)")
        return False

    def take(self) -> Optional[Conn]:
        """After stop(): the connection (None: gone, or a call still holds it)."""
        if self.busy:
            return None
        s, self.s = self.s, None
        return s


class Session(_core.Tenure):
    """A session of this process (`leaderlock.session(...)`): many keys that
    live as long as it does, renewed together.

    `alive` and `check()` compare time.monotonic() with `deadline` at the
    moment they are called (as a Lease's), so a process resumed after its
    deadline sees the session, and every lease of it, lost at its first
    question. `handle` is the server's uuid of the session; `reason` and
    `detail` say why it ended; `lost` (a threading.Event) is set once it
    ended: to wait on, not to guard with."""

    def __init__(self, dsn: str, ttl: float = 10.0, *, id: Optional[str] = None, lock_delay: float = 0.0,
                 keep_values: bool = False, schema: Optional[str] = None):
        if not isinstance(dsn, str):
            raise BadArgument("dsn must be a connection string")
        _core.connect_args(dsn, 0)  # BadArgument now rather than at the open
        self.schema = _core.schema_option(schema)
        self.timing = Timing.of(ttl, None)
        self.id = _core.check_name("id", id) if id is not None else _core.default_id()
        if isinstance(lock_delay, bool) or not (isinstance(lock_delay, (int, float)) and 0 <= lock_delay < math.inf):
            raise BadArgument(f"lock_delay must be a number of seconds, at least 0, not {lock_delay!r}")
        if not isinstance(keep_values, bool):
            raise BadArgument(f"keep_values must be True or False, not {keep_values!r}")
        super().__init__(-math.inf)
        self.dsn, self.lock_delay, self.keep_values = dsn, float(lock_delay), keep_values
        self.key = f"session of {self.id}"  # the name its renewals and their logs give
        self.handle: Optional[uuid.UUID] = None
        self._leases: dict[str, SessionLease] = {}
        self._idle: list[Conn] = []
        self._state = threading.Lock()  # _leases, _idle, _closed (never held while asking a Tenure)
        self._closed = False
        self._renewer: Optional[SessionRenewer] = None

    def __repr__(self) -> str:
        if self.handle is None:
            state = "closed" if self._closed else "not open"
        else:
            state = "alive" if self.reason is None else f"lost: {self.reason}"
        return f"<leaderlock.Session {self.handle} id={self.id!r} {state}>"

    @property
    def ttl(self) -> float:
        return self.timing.ttl

    # The deadline, read at each question.

    def _ours(self) -> bool:
        if self.handle is None:
            return False  # not open: nothing to lose yet
        return super()._ours()

    @property
    def alive(self) -> bool:
        """Whether this process may still act for the session's keys, now."""
        return self._ours()

    def check(self) -> None:
        """Raises SessionLost unless the session is still alive by the local
        clock (LeaderlockError before it is open)."""
        if self.handle is None:
            raise LeaderlockError("the session is not open (use it in a with block, or call open())")
        if not self.alive:
            raise SessionLost(self.handle, self.id, self.reason or LeaseLost.EXPIRED, self.detail)

    @property
    def leases(self) -> list:
        """The leases acquired under the session and not released."""
        with self._state:
            return list(self._leases.values())

    def _log_end(self) -> None:
        level = logging.INFO if self.reason in (LeaseLost.RELEASED, LeaseLost.SHUTDOWN) else logging.WARNING
        log.log(level, "leaderlock: session %s of %r ended: %s%s", self.handle, self.id, self.reason,
                f" ({self.detail})" if self.detail else "")
        # every lease of it ends with it, at once
        for lease in self.leases:
            lease._end(self.reason or LeaseLost.EXPIRED, self.detail)

    # Opening and closing.

    def __enter__(self) -> "Session":
        return self.open()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def open(self) -> "Session":
        """Opens the session on the server (le_open_session) and starts its
        renewals. Once: a session lost or closed is not opened again (open
        a new one). Rejected (NotInstalled, PrivilegeError, BadArgument)
        when the server refuses; Unavailable when it cannot be reached."""
        with self._state:
            if self.handle is not None or self._closed:
                raise LeaderlockError("a session opens once: open a new one")
        t = self.timing
        conn: Optional[Conn] = None
        try:
            conn = Conn(self.dsn, time.monotonic() + t.connect_bound, named=self.schema)
            # the deadline counts from the moment the open is sent
            sent = time.monotonic()
            handle = conn.one(sent + t.call_timeout, OPEN_SESSION, (self.id, t.ttl, self.lock_delay, self.keep_values))
        except CALL_ERRORS as e:
            refusal = conn.rejection(e) if conn is not None else _core.rejection(e)
            if conn is not None:
                conn.close()
            if refusal is not None:
                if refusal is e:
                    raise
                raise refusal from e
            raise Unavailable(f"leaderlock: session of {self.id!r}: the server could not be reached to open it "
                              f"({_core.describe(e)})") from e
        with self._lock:
            self._deadline = sent + t.ttl - t.margin
        self.handle = handle
        self._renewer = SessionRenewer(self.dsn, conn, self, t, schema=self.schema)
        self._renewer.start()
        _shutdown.register(self)
        log.info("leaderlock: session %s of %r opened (ttl %g s)", handle, self.id, t.ttl)
        return self

    def close(self) -> bool:
        """Ends the session: every lease of it first, here (check() raises
        from now on), then on the server (le_close_session: every key
        vacated at once, each announced released), best effort within
        ttl/3; a key the server does not hear of lapses with the session's
        ttl. True when the server closed it. Later calls do nothing."""
        with self._state:
            if self._closed:
                return False
            self._closed = True
        if self.handle is None:
            return False
        closed = False
        with _shutdown.holding_off():  # a SIGTERM meanwhile exits after the close
            self._end(LeaseLost.RELEASED, "the session was closed")  # lost locally first
            _shutdown.unregister(self)
            r = self._renewer
            conn = None
            if r is not None:
                r.stop()
                conn = r.take()
            by = time.monotonic() + self.timing.call_timeout
            try:
                if conn is None:
                    conn = Conn(self.dsn, by, named=self.schema)
                closed = bool(conn.one(by, CLOSE_SESSION, (self.handle,)))
            except CALL_ERRORS as e:
                log.warning("leaderlock: session %s of %r: could not close it (%s); its keys lapse with its ttl",
                            self.handle, self.id, _core.describe(e))
            finally:
                if conn is not None:
                    conn.close()
                if r is not None:
                    r.drop()  # (nothing, unless a call still held it)
            with self._state:
                idle, self._idle = self._idle, []
                self._leases.clear()
            for c in idle:
                c.close()
        if closed:
            log.info("leaderlock: session %s of %r closed", self.handle, self.id)
        return closed

    # Acquiring and releasing.

    def try_acquire(self, key: str, value: Any = None) -> Optional[SessionLease]:
        """Takes `key` under the session if it is free (le_try_acquire_in):
        its lease, or None when another holds it. The key lives as long as
        the session. `value`: a JSON value stored with it."""
        _core.check_name("key", key)
        self.check()
        by = time.monotonic() + self.timing.call_timeout
        won = self._acquire(key, value, by, TRY_ACQUIRE_IN, (self.handle, key, _json(value)))
        if isinstance(won, SessionLease):
            return won
        self._ended_there(won)
        return None

    def acquire(self, key: str, timeout: float, value: Any = None, priority: int = 0) -> SessionLease:
        """Takes `key` under the session, waiting up to `timeout` seconds
        (0: one try) for it to be freed (le_acquire_in; while it waits, no
        candidate of lower `priority` takes the key). NotAcquired (with
        `.holder`) when the timeout passes; SessionLost when the session
        ended meanwhile."""
        _core.check_name("key", key)
        if isinstance(timeout, bool) or not (isinstance(timeout, (int, float)) and 0 <= timeout < math.inf):
            raise BadArgument(f"timeout must be a number of seconds, at least 0, not {timeout!r}")
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise BadArgument(f"priority must be an integer, not {priority!r}")
        self.check()
        t = self.timing
        by = time.monotonic() + timeout + t.call_timeout
        won = self._acquire(key, value, by, ACQUIRE_IN, (self.handle, key, float(timeout), _json(value), priority))
        if isinstance(won, SessionLease):
            return won
        self._ended_there(won)
        raise NotAcquired(key, won[0] if won else None)

    def _ended_there(self, refused: Optional[tuple]) -> None:
        """After a refused acquisition: SessionLost (and the session ends
        here) when the server has no row of the session any more."""
        if refused is not None and not refused[1]:
            self._end(LeaseLost.VACATED, "the server has ended the session (an acquisition under it was refused "
                                         "and its row is gone)")
            self.check()

    def release(self, key: str) -> bool:
        """Releases `key` (le_release(key, id, term)): its lease ends here
        first; the session and its other keys go on. True when the server
        released it."""
        _core.check_name("key", key)
        return self._release(key, None)

    def _release(self, key: str, lease: Optional[SessionLease]) -> bool:
        with self._state:
            held = self._leases.get(key)
            current = lease is None or held is lease
            if current:
                self._leases.pop(key, None)
        if not current:
            lease._end(LeaseLost.RELEASED)  # an older lease of the key: it ends, the key stays held
            return False
        term = held.term if held is not None else None  # None: one this process does not know of (any term)
        if held is not None:
            held._end(LeaseLost.RELEASED)
        if self.handle is None or self._closed:
            return False
        by = time.monotonic() + self.timing.call_timeout
        try:
            with self._conn(by) as c:
                released = bool(c.one(by, _core.RELEASE, (key, self.id, term)))
        except CALL_ERRORS as e:
            refusal = _core.rejection(e)
            if refusal is not None:
                if refusal is e:
                    raise
                raise refusal from e
            # it may still arrive: sent again (and answered) before this key is acquired again
            _core.release_unanswered(self.dsn, key, self.id, term)
            log.warning("leaderlock: %r: could not release term %s (%s); it lapses with the session",
                        key, term, _core.describe(e))
            return False
        if released:
            log.info("leaderlock: %r: released term %s", key, term)
        return released

    def _acquire(self, key: str, value: Any, by: float, sql: str, args: tuple) -> Any:
        """The acquisition `sql` and the key's term, in one transaction: a
        SessionLease, or (holder, whether the session is live there) when
        refused (None: a release of the key that heard no answer is still
        held)."""
        handle, me = self.handle, self.id

        def attempt(conn: Any, schema: Optional[str]) -> tuple:
            with conn.transaction():
                won = conn.execute(_core.bind(sql, schema), args, prepare=False).fetchone()[0]
                row = conn.execute(_core.bind(TERM_IN, schema), (key, me, handle), prepare=False).fetchone() \
                    if won else None
                after = None if row else \
                    conn.execute(_core.bind(AFTER_REFUSAL, schema), (key, handle), prepare=False).fetchone()
            return row, after
        try:
            with self._conn(by) as c:
                if not release_again(c, by, self.dsn, key, me):
                    return None
                schema = c.schema
                row, after = c._bounded(by, lambda: attempt(c.conn, schema))
        except CALL_ERRORS as e:
            refusal = _core.rejection(e)
            if refusal is not None:
                if refusal is e:
                    raise
                raise refusal from e
            raise Unavailable(f"leaderlock: {key!r}: the server could not be reached, or did not answer in time, "
                              f"to acquire it ({_core.describe(e)})") from e
        if row is None:
            return tuple(after) if after else None
        lease = SessionLease(self, key, row[0], value)
        lease._schema = schema
        with self._state:
            self._leases[key] = lease  # (the same id acquiring again keeps the term)
        log.debug("leaderlock: %r: held under session %s in term %s", key, handle, lease.term)
        return lease

    @contextmanager
    def _conn(self, by: float) -> Iterator[Conn]:
        """A connection for one acquisition or release, from the idle ones
        or new; kept for the next when the call went well."""
        with self._state:
            if self._closed:
                raise LeaderlockError("the session is closed")
            c = self._idle.pop() if self._idle else None
        if c is None:
            c = Conn(self.dsn, max(by, time.monotonic() + self.timing.connect_bound), named=self.schema)
        try:
            yield c
        except BaseException:
            c.close()  # a connection that failed, or a call given up on
            raise
        with self._state:
            keep = not self._closed and not c.abandoned and len(self._idle) < IDLE_CONNECTIONS
            if keep:
                self._idle.append(c)
        if not keep:
            c.close()


def _json(value: Any) -> Optional[Jsonb]:
    return None if value is None else Jsonb(value)


def session(dsn: str, ttl: float = 10.0, *, id: Optional[str] = None, lock_delay: float = 0.0,
            keep_values: bool = False, schema: Optional[str] = None) -> Session:
    """A session for the body of a `with` block (or open()/close()): many
    keys held under one ttl, renewed together every ttl/3.

    ttl: seconds the session lives without a renewal. id: the holder's id
    (default host:pid:random). lock_delay: seconds a key of it stays
    unacquirable after the session lapsed (not after a close or release).
    keep_values: a vacated key keeps its last value. schema: leaderlock's
    schema (default: LEADERLOCK_SCHEMA, else the one schema that holds it,
    looked up on each connection). Arguments are checked here
    (BadArgument); the server is reached at the `with`."""
    return Session(dsn, ttl, id=id, lock_delay=lock_delay, keep_values=keep_values, schema=schema)


__all__ = ["session", "Session", "SessionLease", "SessionLost"]
