"""A long-running candidate with callbacks, for services that campaign for
as long as they run (the shape of client-go's LeaderCallbacks)."""
from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Optional

from ._core import Lease, NotAcquired

log = logging.getLogger("leaderlock")
from ._sync import Campaign, Leadership, Renewer, Session


class Elector(threading.Thread):
    """Campaigns in a thread of its own until `stop()`; after losing a
    lease it campaigns again.

    on_started(lease): called in the elector's thread when this process
    leads; `lease.lost` (a threading.Event) is set at a loss or at the local
    deadline, and on_started should return soon (start work elsewhere and
    have it watch `lease.lost`). on_stopped(lease, reason): after a tenure
    ends. on_new_leader(holder): when the holder another candidate sees
    changes (None: vacant)."""

    def __init__(self, dsn: str, key: str, ttl: float = 10.0, *, id: Optional[str] = None,
                 value: Any = None, poll: Optional[float] = None,
                 on_started: Optional[Callable[[Lease], None]] = None,
                 on_stopped: Optional[Callable[[Lease, str], None]] = None,
                 on_new_leader: Optional[Callable[[Optional[str]], None]] = None):
        super().__init__(name=f"leaderlock elector {key}", daemon=True)
        self.spec = Leadership(dsn, key, ttl, None, id=id, value=value, poll=poll)
        self.on_started, self.on_stopped, self.on_new_leader = on_started, on_stopped, on_new_leader
        self.stopping = threading.Event()
        self.lease: Optional[Lease] = None
        self.error: Optional[BaseException] = None
        self._seen: Any = object()

    def stop(self, timeout: Optional[float] = None) -> None:
        """Stops campaigning; releases a lease it holds (hands over at once)."""
        self.stopping.set()
        self.join(timeout)

    def call(self, callback: Optional[Callable[..., None]], *args: Any) -> None:
        """A callback's exception is logged, never allowed to stop the
        elector with a lease it would then neither renew to the end nor
        release."""
        if callback is not None:
            try:
                callback(*args)
            except Exception:
                log.exception("leaderlock: a callback of the elector for %r raised", self.spec.key)

    def refused(self, holder: Optional[str]) -> None:
        if holder != self._seen:
            self._seen = holder
            self.call(self.on_new_leader, holder)

    def run(self) -> None:
        s = self.spec
        t = s.timing
        while not self.stopping.is_set():
            session = None
            try:
                session = Session(s.dsn, time.monotonic() + max(t.call_timeout, 2.0))
                lease = Campaign(session, s.key, s.id, t, s.value).run(None, self.stopping, self.refused)
                session.one(time.monotonic() + t.call_timeout, "UNLISTEN *")
            except NotAcquired:
                if session is not None:
                    session.close()
                return
            except Exception as e:  # unreachable, refused by the server: say so, try again
                self.error = e
                if session is not None:
                    session.close()
                self.stopping.wait(t.retry_every)
                continue
            self.lease, self._seen = lease, s.id
            renewer = Renewer(s.dsn, session, lease, t)
            renewer.start()
            released = False
            try:
                self.call(self.on_new_leader, s.id)
                self.call(self.on_started, lease)
                while not lease.lost.wait(0.05) and not self.stopping.is_set():
                    pass
            finally:
                renewer.stop()
                if not renewer.is_alive():  # else its call still holds the connection
                    released = renewer.release()
                renewer.drop()
                self.lease = None
            self.call(self.on_stopped, lease, "released" if released else (lease.reason or "lost"))
