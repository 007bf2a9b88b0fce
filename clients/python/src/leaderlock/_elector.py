"""A long-running candidate with callbacks, for services that campaign for
as long as they run (the shape of client-go's LeaderCallbacks)."""
from __future__ import annotations

import threading
import time
from typing import Any, Callable, Optional

from . import _core, _shutdown
from ._core import Lease, LeaseLost, NotAcquired, Rejected, log
from ._sync import Campaign, Leadership, Renewer


class Elector(threading.Thread):
    """Campaigns in a thread of its own until `stop()`, through lost
    connections and server restarts; after a tenure ends it campaigns again.

    work(lease): the leader's work, called in a thread of its own each time
    this process starts to lead. It must call `lease.check()` before each
    step (LeaseLost past the local deadline, or once the lease is lost or
    the elector stops) and fence its writes with `lease.guard(conn)`.
    LeaseLost out of it ends the tenure; the elector campaigns again. If it
    returns (or raises anything else, which is logged), the elector
    releases the lease and campaigns again after a pause. The elector never
    starts a tenure's work before the previous tenure's work returned, and
    releases only once it did.

    on_started(lease): called in the elector's thread when this process
    leads, before `work`; should return soon. on_stopped(lease, reason):
    after a tenure ends (reason: a LeaseLost constant). on_new_leader(holder):
    when the holder a follower sees changes (None: vacant). on_failed(error):
    the server refused for good (NotInstalled, PrivilegeError, BadArgument),
    after which the elector ends; `error` keeps it.

    schema: leaderlock's schema (default LEADERLOCK_SCHEMA; None: the one
    that holds it, found on each connection), named in every statement."""

    def __init__(self, dsn: str, key: str, ttl: float = 10.0, *, id: Optional[str] = None,
                 value: Any = None, poll: Optional[float] = None,
                 work: Optional[Callable[[Lease], Any]] = None,
                 on_started: Optional[Callable[[Lease], None]] = None,
                 on_stopped: Optional[Callable[[Lease, str], None]] = None,
                 on_new_leader: Optional[Callable[[Optional[str]], None]] = None,
                 on_failed: Optional[Callable[[BaseException], None]] = None, schema: Optional[str] = None):
        super().__init__(name=f"leaderlock elector {key}", daemon=True)
        self.spec = Leadership(dsn, key, ttl, None, id=id, value=value, poll=poll, schema=schema)
        self.work = work
        self.on_started, self.on_stopped, self.on_new_leader = on_started, on_stopped, on_new_leader
        self.on_failed = on_failed
        self.stopping = threading.Event()
        self.lease: Optional[Lease] = None
        self.error: Optional[BaseException] = None
        self._seen: Any = object()
        self._work_thread: Optional[threading.Thread] = None
        self.finished = threading.Event()  # run() returned

    def join(self, timeout: Optional[float] = None) -> None:
        """Waits for the elector to end (after stop(), or a refusal). Unlike
        Thread.join, a signal handler's exception (SIGTERM's SystemExit,
        KeyboardInterrupt) interrupting it leaves the elector known to be
        running (CPython 3.11 would mark the thread stopped)."""
        if self.ident is not None and self.finished.wait(timeout):
            super().join(1.0)

    def is_alive(self) -> bool:
        return self.ident is not None and not self.finished.is_set()

    def start(self) -> None:
        _shutdown.register_elector(self)  # released at interpreter exit too
        super().start()

    def stop(self, timeout: Optional[float] = None) -> None:
        """Stops campaigning: the lease (if any) ends at once for `work`
        (check() raises), and once `work` returned it is released (hands
        over at once)."""
        self.stopping.set()
        lease = self.lease
        if lease is not None:
            lease._end(LeaseLost.RELEASED, "the elector stops")
        if self.ident is not None and threading.current_thread() is not self:
            self.finished.wait(timeout)

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
        try:
            while not self.stopping.is_set():
                if not self.previous_work_done():
                    return
                campaign = Campaign(s.dsn, s.key, s.id, s.timing, s.value, self.stopping, self.refused,
                                    schema=s.schema)
                try:
                    lease = campaign.run(None)
                except NotAcquired:  # stopped
                    campaign.drop()
                    return
                except Rejected as e:  # retrying cannot help: say so, and end
                    campaign.drop()
                    self.error = e
                    self.call(self.on_failed, e)
                    return
                except Exception as e:  # not expected: say so, try again
                    log.exception("leaderlock: the elector for %r", s.key)
                    campaign.drop()
                    self.error = e
                    self.stopping.wait(s.timing.retry_every)
                    continue
                except BaseException:
                    campaign.abort()
                    raise
                self.lead(lease, campaign)
        finally:
            _shutdown.unregister_elector(self)
            self.finished.set()

    def previous_work_done(self) -> bool:
        """A work function still running (past its tenure's deadline: it
        did not check) delays the next campaign until it returns."""
        w = self._work_thread
        if w is None or not w.is_alive():
            return True
        log.warning("leaderlock: %r: the work function of the last tenure is still running past its "
                    "deadline; campaigning again once it returns", self.spec.key)
        while w.is_alive():
            if self.stopping.is_set():
                return False
            w.join(0.1)
        return True

    def lead(self, lease: Lease, campaign: Campaign) -> None:
        s, t = self.spec, self.spec.timing
        renewer = Renewer(s.dsn, campaign.take(), lease, t, schema=s.schema)
        renewer.start()
        _shutdown.register(lease)
        self.lease, self._seen = lease, s.id
        outcome: dict = {}
        worker = None
        try:
            self.call(self.on_new_leader, s.id)
            self.call(self.on_started, lease)
            if self.work is not None and lease.alive:
                worker = threading.Thread(target=self.run_work, args=(lease, outcome),
                                          name=f"leaderlock work {s.key}", daemon=True)
                self._work_thread = worker
                worker.start()
            while lease.alive and not self.stopping.is_set() and (worker is None or worker.is_alive()):
                lease.lost.wait(0.05)
        finally:
            # Nothing may start a step any more: then wait for the step under
            # way (until the deadline at most), stop renewing, release.
            if self.stopping.is_set():
                lease._end(LeaseLost.RELEASED, "the elector stops")
            elif worker is not None and not worker.is_alive() and "lost" not in outcome:
                lease._end(LeaseLost.RESIGNED, outcome.get("why", "the work function returned"))
            else:  # lost (the reason it ended with stays), or work raised LeaseLost
                lease._end(LeaseLost.RESIGNED, "the work function ended with LeaseLost")
            if worker is not None:
                worker.join(max(0.0, lease.deadline - time.monotonic()))
            renewer.stop()
            if (worker is None or not worker.is_alive()) and not renewer.busy:
                renewer.release()
            renewer.drop()
            _shutdown.unregister(lease)
            self.lease = None
        if lease.reason == LeaseLost.SHUTDOWN or _shutdown.down:
            self.stopping.set()  # SIGTERM (release_on_sigterm): no new campaign
        self.call(self.on_stopped, lease, lease.reason)
        if "lost" not in outcome and worker is not None and not self.stopping.is_set():
            self.stopping.wait(t.retry_every)  # resigned: give the others a chance first

    def run_work(self, lease: Lease, outcome: dict) -> None:
        try:
            self.work(lease)
        except LeaseLost:
            outcome["lost"] = True
        except Exception as e:
            log.exception("leaderlock: %r: the work function raised; releasing", self.spec.key)
            outcome["why"] = f"the work function raised {_core.describe(e)}"
