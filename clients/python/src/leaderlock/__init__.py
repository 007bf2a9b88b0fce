"""Leader election on PostgreSQL with leaderlock (either edition).

    leaderlock.release_on_sigterm()     # SIGTERM: stop, release, exit 143
    with leaderlock.lead(dsn, "nightly-report", ttl=10.0) as lease:
        while work_left():
            lease.check()               # LeaseLost past the local deadline
            do_one_step(lease)          # writes fenced by lease.guard(conn)

    async with leaderlock.lead(dsn, "nightly-report") as lease:
        while work_left():
            lease.check()
            await do_one_step(lease)    # writes fenced by await lease.aguard(conn)

Many keys under one renewal, a session (contract 21, extension 0.5.0):

    with leaderlock.session(dsn, ttl=10.0) as s:
        lease = s.try_acquire("shard/12")   # a Lease, or None
        lease.check()                       # LeaseLost past the session's local deadline

Scheduled runs: once per due instant of a schedule, on one replica among
all that run the same job (extension 0.5.0):

    @leaderlock.scheduled(dsn, "nightly-report", cron="0 3 * * *", tz="Europe/Paris")
    def nightly(run):
        run.check()                     # RunLost past the local deadline
        send_report(run.term)

    nightly()                           # blocks; nightly.start() runs it in a thread

Every transition (acquired, released, expired, ...), once, in order,
through lost connections (contract 23, extension 0.5.0):

    with leaderlock.watch(dsn, since=saved, key_prefix="shard/") as w:
        for t in w:                     # async for, in asyncio code
            handle(t.position, t.event, t.key, t.holder, t.term)
            saved = w.position          # resume later with since=saved

`timeout=None` waits for leadership (through lost connections and server
restarts), `timeout=0` tries once; NotAcquired when it passes with the key
held, Unavailable when it passes with the server out of reach. Refusals
retrying cannot change: NotInstalled, PrivilegeError, BadArgument (all
Rejected). Logs go to the logger "leaderlock".

No statement depends on the session's search_path: each names leaderlock's
schema, looked up on each connection (the one schema that holds it), or
the one given by `schema=` (wherever a DSN is) or LEADERLOCK_SCHEMA, and
PostgreSQL's own functions, operators and types in pg_catalog.
"""
from typing import Any, Optional

from ._core import (BadArgument, Lease, LeaderlockError, LeaseLost, NotAcquired, NotInstalled, PrivilegeError,
                    Rejected, Unavailable, default_id)
from ._elector import Elector
from ._group import Member, member
from ._history import HistoryPruned, Transition, Watcher
from ._session import Session, SessionLease, SessionLost, session
from ._schedule import Run, RunLost, Schedule, Scheduled, run_scheduled, scheduled
from ._shutdown import release_on_sigterm
from ._sync import Leadership

__version__ = "0.5.0"


def lead(dsn: str, key: str, ttl: float = 10.0, timeout: Optional[float] = None, *,
         id: Optional[str] = None, value: Any = None, poll: Optional[float] = None,
         schema: Optional[str] = None) -> Leadership:
    """Leadership of `key` for the body of a `with` or `async with` block.

    ttl: seconds each acquire and renewal asks for (renewed every ttl/3).
    timeout: seconds to wait for leadership; None waits for ever, 0 tries
    once. id: this candidate's id (default host:pid:random). value: a JSON
    value announced with the leadership (le_proclaim). poll: seconds
    between tries without a notification (default: 1 s, ttl/2 once a worker
    announces expiries, ttl/4 where none does). schema: leaderlock's schema
    (default: LEADERLOCK_SCHEMA, else the one schema that holds it, looked
    up on each connection); every statement names it, whatever the
    search_path."""
    return Leadership(dsn, key, ttl, timeout, id=id, value=value, poll=poll, schema=schema)


def watch(dsn: str, since: Optional[int] = None, *, key: Optional[str] = None,
          key_prefix: Optional[str] = None, poll: float = 1.0, schema: Optional[str] = None) -> Watcher:
    """The transitions of leases and scheduled runs (leaderlock.Transition),
    each once, in position order, as the server numbers them: iterate with
    `for` (or `async for`), or call `next(timeout)` (`anext`).

    since: deliver those after this position; None: only those numbered
    after the first connection (it reads le_history_position()). key: one
    key only; key_prefix: keys starting with it only. poll: seconds
    between reads when no notification comes (notifications on
    leaderlock_history make a read at once, at most every 50 ms).

    A lost connection is made again (backoff from 100 ms doubling to 5 s)
    and reading goes on after `position`, the last transition delivered:
    keep it to resume later. HistoryPruned (SQLSTATE LE002) when the
    retention deleted transitions after that position before they were
    read; BadArgument for an argument the server refuses; either ends the
    watcher. `close()` (`await aclose()`), or leaving its `with` (`async
    with`) block, stops it. schema: as lead()'s."""
    return Watcher(dsn, since, key=key, key_prefix=key_prefix, poll=poll, schema=schema)


__all__ = ["member", "Member", "watch", "Watcher", "Transition", "HistoryPruned", "lead", "session", "Session", "SessionLease", "SessionLost", "Elector", "Lease", "Leadership", "release_on_sigterm", "default_id",
           "run_scheduled", "scheduled", "Schedule", "Scheduled", "Run", "RunLost",
           "LeaderlockError", "LeaseLost", "NotAcquired", "Unavailable",
           "Rejected", "NotInstalled", "PrivilegeError", "BadArgument", "__version__"]
