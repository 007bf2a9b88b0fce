"""Blocking code: `with lead(...) as lease:`. A thread renews, on a new
connection when the old one is gone; the body calls `lease.check()` before
each step, which compares the monotonic clock with the local deadline at
that moment. A timer also sets `lease.lost` at the deadline, whatever the
renewing thread is doing (a call can hang on a frozen server), for code that
waits on it."""
from __future__ import annotations

import secrets
import threading
import time
from typing import Any, Callable, Optional

import psycopg
from psycopg.types.json import Jsonb

from . import _core, _shutdown
from ._core import Lease, LeaseLost, LeaderlockError, NotAcquired, Rejected, Timing, Unavailable

# What a call may end with when the server, or the way to it, misbehaves:
# sorted by _core.rejection into "retry" and "give up". Rejected: what a
# new connection's lookup of leaderlock's schema may end with (give up).
CALL_ERRORS = (psycopg.Error, TimeoutError, Rejected)


class Session:
    """A connection whose calls never keep the caller past their bound.
    Each call runs in a thread of its own; one still running at its bound
    (a frozen server ignores cancel requests) is abandoned with its
    connection, which that thread closes once the server answers. Until
    then nothing else touches the connection (psycopg connections are not
    for two threads at once).

    Connecting includes the lookup of leaderlock's schema (SCHEMA_OF, with
    `named`: the schema option), within the same bound: NotInstalled when
    no schema holds it, BadArgument when several do and none is named.
    Every statement sent names the schema found (`schema`)."""

    def __init__(self, dsn: str, until: float, name: str = _core.APPLICATION_NAME, named: Optional[str] = None):
        self.conn: Optional[psycopg.Connection] = None
        self.abandoned = False
        self._lock = threading.Lock()
        args = _core.connect_args(dsn, until - time.monotonic(), name)

        def connect() -> psycopg.Connection:
            conn = psycopg.connect(dsn, **args)
            try:
                return _core.attach_schema(conn, _core.find_schema(conn, named))
            except BaseException:
                conn.close()
                raise
        self.conn = self._bounded(until, connect)
        self.database = _core.database_of(self.conn)
        self.schema: Optional[str] = _core.schema_of(self.conn)

    def _bounded(self, until: float, work: Callable[[], Any]) -> Any:
        left = until - time.monotonic()
        if left <= 0:
            raise TimeoutError("no time left for the call")
        box: dict = {}
        done = threading.Event()

        def run() -> None:
            try:
                box["value"] = work()
            except BaseException as e:  # handed to the caller
                box["error"] = e
            with self._lock:
                box["done"] = True
                late = self.abandoned
            done.set()
            if late:  # the caller gave up on this call: tidy up after it
                value = box.get("value")
                conn = value if isinstance(value, psycopg.Connection) else self.conn
                if conn is not None:
                    try:
                        conn.close()
                    except Exception:
                        pass
        threading.Thread(target=run, name="leaderlock call", daemon=True).start()
        try:
            # an Event, not Thread.join: a join interrupted by a signal
            # handler's exception marks the thread stopped (CPython 3.11)
            done.wait(left)
        finally:
            # also when the wait was interrupted (SIGTERM's SystemExit)
            with self._lock:
                if not box.get("done"):
                    self.abandoned = True
                late = self.abandoned and not box.get("done")
        if late:
            raise TimeoutError("the server did not answer in time")
        if "error" in box:
            raise box["error"]
        return box["value"]

    def one(self, until: float, sql: str, args: tuple = ()) -> Any:
        """The first column of `sql`'s first row (None: no row)."""
        row = self.row(until, sql, args)
        return row[0] if row else None

    def row(self, until: float, sql: str, args: tuple = ()) -> Any:
        """`sql`'s first row (None: no row)."""
        conn = self.conn

        def work() -> Any:
            cur = conn.execute(_core.bind(sql, self.schema), args, prepare=False)
            return cur.fetchone() if cur.description else None  # LISTEN and the like have no rows
        return self._bounded(until, work)

    def rows(self, until: float, sql: str, args: tuple = ()) -> list:
        """Every row of `sql`."""
        conn = self.conn
        sql = _core.bind(sql, self.schema)
        return self._bounded(until, lambda: conn.execute(sql, args, prepare=False).fetchall())

    def notifies(self, seconds: float) -> list:
        """The notifications that arrive within `seconds` (bounded too)."""
        conn = self.conn
        return self._bounded(time.monotonic() + seconds + 5.0,
                             lambda: list(conn.notifies(timeout=max(seconds, 0.0), stop_after=1)))

    def rejection(self, e: BaseException) -> Optional[Rejected]:
        """_core.rejection, with this connection's database and schema."""
        return _core.rejection(e, self.database, self.schema)

    def close(self) -> None:
        with self._lock:
            if self.abandoned or self.conn is None:
                return  # the call's thread closes it
            conn, self.conn = self.conn, None
        try:
            conn.close()
        except Exception:
            pass


def call_named(s: Session, until: float, sql: str, args: tuple) -> Any:
    """RENEW or RELEASE naming the tenure's term (the last argument); on a
    schema before 0.5.0, which has no such argument, without it."""
    try:
        return s.one(until, sql, args)
    except psycopg.errors.UndefinedFunction:
        return s.one(until, _core.LEGACY[sql], args[:-1])


def release_again(s: Session, until: float, dsn: str, key: str, id: str) -> bool:
    """Before a campaign's try: sends again a release under this id that
    heard no answer (it may still arrive). False while the tenure it ends is
    still held (its row was locked): no try yet."""
    pending, term = _core.unanswered_release(dsn, key, id)
    if not pending:
        return True
    if not call_named(s, until, _core.RELEASE, (key, id, term)):
        try:
            if s.one(until, _core.HOLDS, (key, id, term, term)):
                return False
        except psycopg.errors.UndefinedFunction:
            pass  # before 0.5.0: nothing to go by
    _core.release_answered(dsn, key, id, term)
    return True


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


def wait(seconds: float, stop: Optional[threading.Event]) -> None:
    if stop is not None:
        stop.wait(max(seconds, 0.0))
    elif seconds > 0:
        time.sleep(seconds)


class Campaign:
    """Tries until won or `timeout` (None: forever; 0: one try), on a
    connection of its own that it makes again, with backoff, whenever it is
    lost: across server restarts and failovers (libpq's multi-host
    connection strings and target_session_attrs choose the server). Only a
    refusal retrying cannot change ends it early (Rejected: NotInstalled,
    PrivilegeError, BadArgument); when `timeout` passes without the server
    being reachable, Unavailable.

    `stop` set: NotAcquired at the next look. `refused(holder)`: after each
    refused try, with the live holder."""

    def __init__(self, dsn: str, key: str, me: str, timing: Timing, value: Any,
                 stop: Optional[threading.Event] = None,
                 refused: Optional[Callable[[Optional[str]], None]] = None, schema: Optional[str] = None):
        self.dsn, self.key, self.me, self.timing, self.value = dsn, key, me, timing, value
        self.schema = schema  # the schema option (None: found by SCHEMA_OF)
        self.stop, self.refused = stop, refused
        self.s: Optional[Session] = None
        self.last_try = float("-inf")  # when the last try started (HINT_FLOOR)
        self.slots_differ = False  # the last try met the key held with other slots
        self.worker, self.notifications, self.expire_lapsed = True, False, False
        self.outage = _core.Outage(key, "campaign")
        self.give_up: Optional[float] = None

    def session(self) -> Session:
        """This campaign's connection, ready: LISTENing, and knowing whether
        notifications arrive and whether a worker announces expiries."""
        if self.s is None:
            t = self.timing
            now = time.monotonic()
            bound = t.connect_bound
            if self.give_up is not None:  # not much past the timeout
                bound = min(bound, max(self.give_up - now, t.call_timeout, 2.0))
            s = Session(self.dsn, now + bound, named=self.schema)
            self.s = s
            by = time.monotonic() + max(t.call_timeout, 2.0)
            self.worker = worker_serves(s, by)
            self.expire_lapsed = not self.worker
            s.one(by, _core.LISTEN)
            self.notifications = probe(s, by)
        return self.s

    def once(self) -> Optional[Lease]:
        t, s = self.timing, self.session()
        self.last_try = time.monotonic()
        if not release_again(s, time.monotonic() + t.call_timeout, self.dsn, self.key, self.me):
            return None
        if self.expire_lapsed:
            try:
                s.one(time.monotonic() + t.call_timeout, _core.EXPIRE_LAPSED)
            except psycopg.DatabaseError as e:
                if isinstance(e, psycopg.OperationalError):
                    raise
                # refused (or missing before 0.5.0): the try below takes a
                # lapsed lease anyway; it only goes unannounced
                self.expire_lapsed = False
        # the deadline counts from the moment the try is sent
        start = time.monotonic()
        by = start + t.call_timeout
        try:
            won = s.one(by, _core.TRY_ACQUIRE, (self.key, self.me, t.ttl))
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
        term = s.one(by, _core.TERM_OF, (self.key, self.me))
        if term is None:
            return None
        if self.value is not None:
            s.one(by, _core.PROCLAIM, (self.key, self.me, Jsonb(self.value)))
        lease = Lease(self.key, self.me, term, self.value, start + t.ttl - t.margin)
        lease._schema = s.schema
        return lease

    def run(self, timeout: Optional[float]) -> Lease:
        give_up = None if timeout is None else time.monotonic() + timeout
        self.give_up = give_up
        t = self.timing
        while True:
            if (self.stop is not None and self.stop.is_set()) or _shutdown.down:
                raise NotAcquired(self.key, None)
            try:
                lease = self.once()
                self.outage.ended()
                if lease is not None:
                    _core.log.info("leaderlock: %r: leading as %r in term %s", self.key, self.me, lease.term)
                    return lease
                now = time.monotonic()
                out = give_up is not None and now >= give_up
                if self.refused is not None or out:
                    holder = self.s.one(now + t.call_timeout, _core.LEADER, (self.key,))
                    if self.refused is not None:
                        self.refused(holder)
                    if out:
                        raise NotAcquired(self.key, holder)
                # the period counts from the try's start: a slow try does not stretch it
                left = max(t.poll_every(self.worker, self.notifications) - (now - self.last_try), 0.0)
                if give_up is not None:
                    left = min(left, give_up - now)
                self.wait_for_hint(left)
            except CALL_ERRORS as e:
                self.failed(e, give_up)

    def failed(self, e: BaseException, give_up: Optional[float]) -> None:
        """After a failed call: a typed error when retrying cannot help, or
        when `give_up` passed; else the connection is dropped and, after a
        (jittered, growing, bounded) delay, the campaign goes on."""
        s = self.s
        refusal = s.rejection(e) if s is not None else _core.rejection(e)
        self.drop()
        if refusal is not None:
            _core.log.error("leaderlock: %r: %s", self.key, refusal)
            if refusal is e:
                raise refusal
            raise refusal from e
        delay = self.outage.failed(e)
        now = time.monotonic()
        if give_up is not None:
            if now >= give_up:
                raise Unavailable(f"leaderlock: {self.key!r}: the server could not be reached before the "
                                  f"timeout ({_core.describe(e)})") from e
            delay = min(delay, give_up - now)
        wait(delay, self.stop)

    def wait_for_hint(self, seconds: float) -> None:
        """Until a notification says the key is free (but never sooner than
        HINT_FLOOR after the last try started: hints heard meanwhile make
        one try), `seconds` pass, or `stop` is set (looked at every 100 ms)."""
        until = time.monotonic() + max(seconds, 0.0)
        stop = self.stop
        while (left := until - time.monotonic()) > 0 and not (stop is not None and stop.is_set()):
            if any(_core.frees(n.payload, self.key) for n in self.s.notifies(min(left, 0.1))):
                until = min(until, _core.hint_due(self.last_try, time.monotonic()))

    def take(self) -> Optional[Session]:
        """The connection, for the renewals (without the LISTEN), once won;
        None when it failed meanwhile (the renewer makes a new one)."""
        s, self.s = self.s, None
        if s is not None:
            try:
                s.one(time.monotonic() + self.timing.call_timeout, _core.UNLISTEN)
            except CALL_ERRORS:
                s.close()
                return None
        return s

    def drop(self) -> None:
        if self.s is not None:
            self.s.close()
            self.s = None

    def abort(self) -> None:
        """Interrupted by something else than its own outcome (SIGTERM's
        SystemExit, KeyboardInterrupt): a try in flight may have won, so
        release, at most ttl/3 later."""
        self.drop()
        try:
            s = Session(self.dsn, time.monotonic() + self.timing.call_timeout, named=self.schema)
            try:
                call_named(s, time.monotonic() + self.timing.call_timeout, _core.RELEASE, (self.key, self.me, None))
            finally:
                s.close()
        except Exception:
            _core.release_unanswered(self.dsn, self.key, self.me, None)


class Renewer(threading.Thread):
    """Renews every ttl/3 until stopped, on a new connection when the old
    one is lost or hangs; each call is bounded by ttl/3 and by the local
    deadline. At the deadline a timer marks the lease lost even if a call
    hangs (`lease.alive` would say so by itself; the timer wakes waiters)."""

    def __init__(self, dsn: str, s: Optional[Session], lease: _core.Tenure, timing: Timing,
                 schema: Optional[str] = None):
        super().__init__(name=f"leaderlock renewer {lease.key}", daemon=True)
        self.dsn, self.s, self.lease, self.timing = dsn, s, lease, timing
        self.schema = schema  # the schema option, for new connections
        self.stopping = threading.Event()
        self.finished = threading.Event()  # run() returned
        self.watchdog: Optional[threading.Timer] = None
        self.outage = _core.Outage(lease.key, "renewals")
        self.arm()

    def arm(self) -> None:
        if self.watchdog:
            self.watchdog.cancel()
        self.watchdog = threading.Timer(max(0.0, self.lease.deadline - time.monotonic()), self.expire)
        self.watchdog.daemon = True
        self.watchdog.start()

    def expire(self) -> None:
        if self.lease.alive and not self.stopping.is_set():  # early, or moved meanwhile
            self.arm()

    def run(self) -> None:
        try:
            self.renew()
        finally:
            self.finished.set()

    @property
    def busy(self) -> bool:
        """Whether a renewal still holds the connection (stop() gave up)."""
        return self.is_alive() and not self.finished.is_set()

    def renew(self) -> None:
        t, lease = self.timing, self.lease
        next_renewal = self.first_renewal()
        while not self.stopping.wait(max(0.0, next_renewal - time.monotonic())):
            if not lease.alive:
                return
            # the new deadline counts from the moment the renewal is sent
            start = time.monotonic()
            # one call may take ttl/3 at most (then reconnect and retry), never past the deadline
            by = min(start + t.call_timeout, lease.deadline)
            try:
                if self.s is None:
                    self.s = Session(self.dsn, by, named=self.schema)
                if self.renewed(by):
                    if not lease._extend(start + t.ttl - t.margin):
                        return  # the deadline passed meanwhile: a loss is final
                    self.outage.ended()
                    self.arm()
                    next_renewal = start + t.renew_every
                    continue
                if not self.refused(by):
                    return
                next_renewal = start + t.retry_every  # its row was locked: retry until the deadline
            except CALL_ERRORS as e:
                refusal = self.s.rejection(e) if self.s is not None else _core.rejection(e)
                if refusal is not None:
                    lease._end(LeaseLost.REJECTED, f"the server rejected the renewal: {refusal}")
                    return
                lease._failing(LeaseLost.CONNECTION_LOST, "no renewal reached the server before the local "
                                                          f"deadline (last: {_core.describe(e)})")
                self.outage.failed(e)
                self.drop()
                next_renewal = start + t.retry_every

    # What a renewal is (a scheduled run's renewer says otherwise).

    def first_renewal(self) -> float:
        t = self.timing
        return self.lease.deadline + t.margin - t.ttl + t.renew_every

    def renewed(self, by: float) -> bool:
        lease = self.lease
        return bool(call_named(self.s, by, _core.RENEW, (lease.key, lease.id, self.timing.ttl, lease.term)))

    def refused(self, by: float) -> bool:
        """After a refused renewal: whether to retry (its row was locked)."""
        return _core.still_ours(self.lease, self.s.row(by, _core.HOLDER_OF, (self.lease.key,)))

    def drop(self) -> None:
        if self.s is not None:
            self.s.close()
            self.s = None

    def stop(self) -> None:
        self.stopping.set()
        # a call hung on a frozen server ends at its bound (ttl/3 at most)
        if self.is_alive():
            self.finished.wait(self.timing.call_timeout + 1.0)
        if self.watchdog:
            self.watchdog.cancel()

    def release(self) -> bool:
        """Hands over at once (once the body stopped acting), unless the
        server said the lease is not ours anyway; on a new connection if
        need be. Takes ttl/3 at most."""
        self.lease._end(LeaseLost.RELEASED)
        if not self.lease._server_has_it_maybe():
            return False
        by = time.monotonic() + self.timing.call_timeout
        try:
            if self.s is None:
                self.s = Session(self.dsn, by, named=self.schema)
            released = bool(call_named(self.s, by, _core.RELEASE, (self.lease.key, self.lease.id, self.lease.term)))
        except CALL_ERRORS as e:
            _core.release_unanswered(self.dsn, self.lease.key, self.lease.id, self.lease.term)
            _core.log.warning("leaderlock: %r: could not release term %s (%s); it lapses at its ttl",
                              self.lease.key, self.lease.term, _core.describe(e))
            return False
        if released:
            _core.log.info("leaderlock: %r: released term %s", self.lease.key, self.lease.term)
        return released


class Leadership:
    """What `lead()` returns: a context manager for `with` (here) and for
    `async with` (_async.py)."""

    def __init__(self, dsn: str, key: str, ttl: float = 10.0, timeout: Optional[float] = None, *,
                 id: Optional[str] = None, value: Any = None, poll: Optional[float] = None,
                 schema: Optional[str] = None):
        if not isinstance(dsn, str):
            raise _core.BadArgument("dsn must be a connection string")
        _core.connect_args(dsn, 0)  # BadArgument now rather than at the first try
        self.dsn = dsn
        self.schema = _core.schema_option(schema)
        self.key = _core.check_name("key", key)
        self.id = _core.check_name("id", id) if id is not None else _core.default_id()
        self.timing = Timing.of(ttl, poll)
        if timeout is not None and not (isinstance(timeout, (int, float)) and timeout >= 0):
            raise _core.BadArgument(f"timeout must be None or at least 0, not {timeout!r}")
        self.timeout, self.value = timeout, value
        self._renewer: Optional[Renewer] = None
        self._async: Any = None

    def __enter__(self) -> Lease:
        t = self.timing
        campaign = Campaign(self.dsn, self.key, self.id, t, self.value, schema=self.schema)
        try:
            lease = campaign.run(self.timeout)
        except BaseException as e:
            if isinstance(e, LeaderlockError):
                campaign.drop()
            else:
                campaign.abort()
            raise
        self._renewer = Renewer(self.dsn, campaign.take(), lease, t, schema=self.schema)
        self._renewer.start()
        _shutdown.register(lease)
        return lease

    def __exit__(self, *exc: Any) -> None:
        r = self._renewer
        if r is None:
            return
        self._renewer = None
        with _shutdown.holding_off():  # a SIGTERM meanwhile exits after the release
            r.lease._end(LeaseLost.RELEASED)  # whatever the body does next, check() raises
            _shutdown.unregister(r.lease)
            r.stop()
            if not r.busy:  # else its call still holds the connection
                r.release()
            r.drop()

    async def __aenter__(self) -> Lease:
        from ._async import AsyncLeadership
        self._async = AsyncLeadership(self)
        return await self._async.enter()

    async def __aexit__(self, *exc: Any) -> Optional[bool]:
        return await self._async.exit(*exc)
