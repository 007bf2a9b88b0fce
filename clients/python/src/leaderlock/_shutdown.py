"""Release on the way out, SIGTERM included.

`release_on_sigterm()` (opt-in: it replaces the process's SIGTERM handler)
makes a SIGTERM end every lease this process holds at once (`check()`
raises LeaseLost with reason SHUTDOWN, so no further step starts), stop
every Elector, and exit with status 143 (128 + SIGTERM) through SystemExit:
`with` and `async with lead(...)` blocks unwind and release on their way
out, and Electors release at interpreter exit (atexit), after their work
function returned. A SIGTERM that comes while the main thread is releasing
waits for that release to end.
"""
from __future__ import annotations

import atexit
import signal
import threading
import weakref
from contextlib import contextmanager
from typing import Any, Iterator, Optional

from ._core import LeaseLost

# Leases held now, by id (a dict: copying its values is one step, safe in a
# signal handler while other threads add and remove).
_leases: dict = {}
_electors: "weakref.WeakSet[Any]" = weakref.WeakSet()
_lock = threading.Lock()
_hold = 0  # releases under way in the main thread
_pending: Optional[int] = None  # the status of a SIGTERM held off meanwhile
_status: Optional[int] = None  # set once release_on_sigterm() installed the handler
_atexit = False
# Set by the SIGTERM handler: campaigns end (NotAcquired) instead of winning.
down = False


def register(lease: Any) -> None:
    _leases[id(lease)] = lease


def unregister(lease: Any) -> None:
    _leases.pop(id(lease), None)


def register_elector(elector: Any) -> None:
    global _atexit
    with _lock:
        _electors.add(elector)
        if not _atexit:
            _atexit = True
            atexit.register(stop_electors)


def unregister_elector(elector: Any) -> None:
    with _lock:
        _electors.discard(elector)


def stop_electors() -> None:
    """At interpreter exit (atexit runs before daemon threads are stopped):
    each Elector still running stops its work, releases, and ends."""
    with _lock:
        electors = list(_electors)
    for e in electors:
        e.stopping.set()
    for e in electors:
        e.stop(e.spec.timing.ttl + 2.0)


def release_on_sigterm(status: int = 128 + signal.SIGTERM) -> None:
    """Opt-in, once, from the main thread, before leading: on SIGTERM every
    lease of this process ends at once (LeaseLost, reason SHUTDOWN, from the
    next check()), `with`/`async with lead()` blocks unwind through
    SystemExit(status) and release, Electors stop, wait for their work
    function and release (at interpreter exit), and the process exits with
    `status` (143 by default). The follower takes over as soon as the
    release reaches the server. A session (leaderlock.session) ends the
    same way: every lease of it at once, then its `with` block closes it."""
    global _status
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError("release_on_sigterm() must be called from the main thread")
    _status = status
    signal.signal(signal.SIGTERM, _on_sigterm)


def _on_sigterm(signo: int, frame: Any) -> None:
    """Runs in the main thread between two of its steps, whatever it holds:
    so it takes no lock (it could be the main thread's own) and sets no
    Event; it only marks each lease ended, which check() reads at once,
    and raises. Electors stop at exit (atexit)."""
    global _pending, down
    down = True
    for lease in list(_leases.values()):
        lease._end_now(LeaseLost.SHUTDOWN, f"signal {signo}: the process is shutting down")
    status = _status if _status is not None else 128 + signo
    if _hold:
        _pending = status  # raised once the release under way is done
        return
    raise SystemExit(status)


@contextmanager
def holding_off() -> Iterator[None]:
    """A release under way in the main thread is not interrupted by the
    SystemExit of a SIGTERM: that comes right after it."""
    global _hold, _pending
    main = threading.current_thread() is threading.main_thread()
    if main:
        _hold += 1
    try:
        yield
    finally:
        if main:
            _hold -= 1
            if _hold == 0 and _pending is not None:
                status, _pending = _pending, None
                raise SystemExit(status)
