"""Groups (contract 26, docs/groups.md): a member's share of a group's
partitions, assigned by the server.

    def assigned(partition, term): ...      # start working on it
    def revoked(partition): ...             # stop, drain; return to give it back
    with leaderlock.member(dsn, "orders", ttl=10.0, partitions=64,
                           on_assigned=assigned, on_revoked=revoked) as m:
        while running:
            term = m.owns(7)                # its term, or None: act on it only then
            ...                             # writes fenced by m.guard(conn, 7)

A thread joins (le_join: the first join makes the group, every later one
renews the membership and every partition with it) every ttl/3, then reads
the assignment (le_assignment) on a connection of its own, which LISTENs:
a notification naming this member (a partition granted or revoked) brings
the next round sooner, at most one per max(ttl/30, 50 ms) (a hint: what
counts is the assignment read). Each partition
owned has the local deadline of the last round whose assignment was read:
the instant its join was sent + ttl - ttl/200 (monotonic clock), read at
each question (`owns` answers None past it, whatever a timer did). A
partition the server revoked is handed to `on_revoked` (which drains and
returns), then given back (le_ack); one that is gone from the assignment,
or whose deadline passed, is handed to `on_revoked` too, and not given
back (it is not ours to give). Leaving the block hands every partition to
`on_revoked`, then leaves (le_leave: they go to the others at once).
Callbacks run on the member's thread, one at a time.
"""
from __future__ import annotations

import json
import threading
import time
from typing import Callable, Dict, Optional

from . import _core
from ._core import BadArgument, LeaderlockError, Timing, log
from ._sync import CALL_ERRORS
from ._sync import Session as Conn

# Every statement takes bind parameters, arguments by name ("group" is a
# reserved word), one round trip; leaderlock's objects in its schema.
JOIN = ('SELECT @extschema@.le_join("group" => %s, member => %s, ttl => pg_catalog.make_interval(secs => %s), '
        'partitions => %s::pg_catalog.int4, drain => pg_catalog.make_interval(secs => %s))::pg_catalog.text')
ASSIGNMENT = ('SELECT partition, term, state FROM @extschema@.le_assignment("group" => %s, member => %s) '
              'ORDER BY partition')
ACK = 'SELECT @extschema@.le_ack("group" => %s, member => %s, partition => %s::pg_catalog.int4, term => %s)'
LEAVE = 'SELECT @extschema@.le_leave("group" => %s, member => %s)'
GUARD = ('SELECT @extschema@.le_assert_partition("group" => %s, partition => %s::pg_catalog.int4, '
         'member => %s, term => %s)')


class Member:
    """A member of `group` (see the module's text); start it with `with`."""

    def __init__(self, dsn: str, group: str, member: Optional[str] = None, ttl: float = 10.0, *,
                 partitions: Optional[int] = None, drain: Optional[float] = None,
                 on_assigned: Optional[Callable[[int, int], None]] = None,
                 on_revoked: Optional[Callable[[int], None]] = None, schema: Optional[str] = None):
        for name, value in (("group", group), ("member", member)):
            if value is not None and (not isinstance(value, str) or not value):
                raise BadArgument(f"{name} must be a non-empty string, not {value!r}")
        if partitions is not None and (isinstance(partitions, bool) or not isinstance(partitions, int)):
            raise BadArgument(f"partitions must be an integer, not {partitions!r}")
        self.timing = Timing.of(ttl, None)
        self.dsn, self.group, self.schema = dsn, group, schema
        self.me = member or _core.default_id()
        self.partitions, self.drain = partitions, drain
        self.on_assigned = on_assigned or (lambda partition, term: None)
        self.on_revoked = on_revoked or (lambda partition: None)
        self._owned: Dict[int, int] = {}     # partition -> term
        self._deadline = float("-inf")
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._conn: Optional[Conn] = None
        self._found_schema: Optional[str] = None   # leaderlock's schema, as the first join found it
        self._last_round = float("-inf")
        self.error: Optional[BaseException] = None

    # -- what the application asks -------------------------------------------

    def owns(self, partition: int) -> Optional[int]:
        """The term `partition` is owned in, or None: not ours, or the local
        deadline has passed (checked now, at each call)."""
        with self._lock:
            if time.monotonic() >= self._deadline:
                return None
            return self._owned.get(partition)

    def owned(self) -> Dict[int, int]:
        """Every partition owned now (partition -> term), as `owns` says."""
        with self._lock:
            return {} if time.monotonic() >= self._deadline else dict(self._owned)

    def guard(self, conn, partition: int) -> int:
        """In `conn`'s open transaction: raises (SQLSTATE LE001) unless this
        member owns `partition` in the term it was assigned, and holds it
        so until that transaction ends; LeaderlockError when it is not ours
        here. Its term."""
        term = self.owns(partition)
        if term is None:
            raise LeaderlockError(f"leaderlock: partition {partition} of {self.group!r} is not ours now")
        sql = _core.bind(GUARD, _core.schema_of(conn) or self._found_schema)
        conn.execute(sql, (self.group, partition, self.me, term), prepare=False)
        return term

    # -- the member's thread -------------------------------------------------

    def __enter__(self) -> "Member":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self) -> None:
        """Joins once here (errors the server raises come out now), then
        goes on in a thread."""
        self._round()
        self._thread = threading.Thread(target=self._run, name=f"leaderlock member {self.me}", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Hands every partition to on_revoked, then leaves the group."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._lose(set(self._owned))
        t = self.timing
        try:
            conn = self._session()
            conn.one(time.monotonic() + t.call_timeout, LEAVE, (self.group, self.me))
        except CALL_ERRORS as e:
            log.warning("leaderlock: group %r: %s could not leave (%s); its membership lapses at its ttl",
                        self.group, self.me, _core.describe(e))
        finally:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def _run(self) -> None:
        while self._wait_for_round():
            try:
                self._round()
            except BadArgument as e:     # refused for good (another role's member, ...)
                self.error = e
                log.error("leaderlock: group %r: %s", self.group, e)
                self._lose(set(self._owned))
                return
            except CALL_ERRORS as e:
                log.warning("leaderlock: group %r: the server cannot be reached (%s)", self.group,
                            _core.describe(e))
                if self._conn is not None:
                    self._conn.close()
                    self._conn = None
            if time.monotonic() >= self._deadline:
                self._lose(set(self._owned))   # the local deadline passed: nothing is ours

    def _wait_for_round(self) -> bool:
        """Until the next round is due (ttl/3 after the last one's start, or
        sooner after a hint naming this member, never sooner than
        `soonest` after it): False once the member is closed."""
        t = self.timing
        soonest = max(t.ttl / 30, 0.05)
        due = self._last_round + t.ttl / 3
        while not self._stop.is_set():
            left = due - time.monotonic()
            if left <= 0:
                return True
            conn = self._conn
            if conn is None:
                self._stop.wait(min(left, 0.2))
                continue
            try:
                heard = conn.notifies(min(left, 0.2))
            except CALL_ERRORS:
                heard = []   # (the round finds the connection gone)
                self._stop.wait(min(left, 0.2))
            if any(self._names_me(n.payload) for n in heard):
                due = min(due, max(time.monotonic(), self._last_round + soonest))
        return False

    def _names_me(self, payload: str) -> bool:
        """A well-formed announcement of this group's naming this member."""
        try:
            a = json.loads(payload)
        except ValueError:
            return False
        return (isinstance(a, dict) and a.get("event") in ("partition_granted", "partition_revoked")
                and a.get("group") == self.group and a.get("member") == self.me
                and isinstance(a.get("partition"), int) and isinstance(a.get("term"), int))

    def _session(self) -> Conn:
        if self._conn is None:
            conn = Conn(self.dsn, time.monotonic() + self.timing.connect_bound, named=self.schema)
            try:
                conn.one(time.monotonic() + self.timing.call_timeout, _core.LISTEN)
            except BaseException:
                conn.close()
                raise
            self._conn = conn
            self._found_schema = conn.schema
        return self._conn

    def _round(self) -> None:
        """Join (renew), read the assignment, act on what changed."""
        t = self.timing
        conn = self._session()
        sent = self._last_round = time.monotonic()
        try:
            conn.one(sent + t.call_timeout, JOIN, (self.group, self.me, t.ttl, self.partitions, self.drain))
            rows = conn.rows(time.monotonic() + t.call_timeout, ASSIGNMENT, (self.group, self.me))
        except CALL_ERRORS as e:
            refusal = conn.rejection(e)
            if refusal is not None:
                raise BadArgument(str(refusal)) from e
            raise
        owned = {p: term for p, term, state in rows if state == "owned"}
        revoked = {p: term for p, term, state in rows if state == "revoked"}
        gone = {p for p in self._owned if p not in owned and p not in revoked}
        self._lose(gone)
        for p, term in revoked.items():
            if p in self._owned:
                self._lose({p})
            conn.one(time.monotonic() + t.call_timeout, ACK, (self.group, self.me, p, term))
        with self._lock:
            new = {p: term for p, term in owned.items() if self._owned.get(p) != term}
            self._owned = {p: term for p, term in self._owned.items() if p in owned}
            self._deadline = sent + t.ttl - t.margin
        for p, term in sorted(new.items()):
            if p in self._owned and self._owned[p] != term:
                self._lose({p})
            with self._lock:
                self._owned[p] = term
            self.on_assigned(p, term)

    def _lose(self, partitions) -> None:
        for p in sorted(partitions):
            with self._lock:
                had = self._owned.pop(p, None)
            if had is not None:
                self.on_revoked(p)


def member(dsn: str, group: str, member: Optional[str] = None, ttl: float = 10.0, *,
           partitions: Optional[int] = None, drain: Optional[float] = None,
           on_assigned: Optional[Callable[[int, int], None]] = None,
           on_revoked: Optional[Callable[[int], None]] = None, schema: Optional[str] = None) -> Member:
    """A member of `group` for the body of a `with` block (docs/groups.md):
    the server assigns its partitions; `on_assigned(partition, term)` when
    one is ours, `on_revoked(partition)` when it no longer is (drain, then
    return: a revoked one is given back then); `owns(partition)` its term
    or None, checked at each call. partitions, drain: the group's, for the
    first join (or its owner's change). schema: as lead()'s."""
    return Member(dsn, group, member, ttl, partitions=partitions, drain=drain, on_assigned=on_assigned,
                  on_revoked=on_revoked, schema=schema)
