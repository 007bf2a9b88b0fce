"""What the sync and asyncio halves share: the statements, the timings, the
errors, the lease a body sees, and what a notification means.

Everything here mirrors the Rust client (crates/client): renew every ttl/3,
a local deadline of (start of the last successful call, monotonic clock) +
ttl - ttl/200, every call bounded by that deadline, LISTEN as a hint with
polling as the fallback.
"""
from __future__ import annotations

import json
import logging
import os
import secrets
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Optional

log = logging.getLogger("leaderlock")

# Every statement takes bind parameters and is one round trip, so they work
# through pgbouncer's transaction pooling. Arguments go by name.
TRY_ACQUIRE = "SELECT le_try_acquire(key => %s, id => %s, ttl => make_interval(secs => %s))"
RENEW = "SELECT le_renew(key => %s, id => %s, ttl => make_interval(secs => %s))"
RELEASE = "SELECT le_release(key => %s, id => %s)"
TERM_OF = "SELECT term, value::text FROM le_lease(key => %s) WHERE holder = %s"
STILL_OURS = ("SELECT coalesce(holder = %s AND term = %s AND expires_at > clock_timestamp(), false) "
              "FROM le_lease(key => %s)")
LEADER = "SELECT le_leader(key => %s)"
WORKER_SERVES = "SELECT coalesce((le_capabilities()->>'worker')::boolean, true)"
WORKER_RUNNING = "SELECT le_worker_running()"
EXPIRE_LAPSED = "SELECT le_expire_lapsed()"
LISTEN = "LISTEN leaderlock"
CHANNEL = "leaderlock"
# Whether notifications reach this session at all (not behind transaction
# pooling): it listens on a channel of its own and notifies itself.
PROBE_LISTEN = "LISTEN leaderlock_probe"
PROBE = "SELECT pg_notify('leaderlock_probe', %s)"

# Notifications are hints, and any role may send them (docs/clients.md): a
# hint brings the next try forward, but never to less than HINT_FLOOR
# seconds after the start of the previous one; hints that arrive meanwhile
# make that one try, and the first hint after a quiet period is acted on at
# once. The same rule, and the same name, in every leaderlock client.
HINT_FLOOR = 0.010

# The DETAIL both editions give (SQLSTATE 22023) when a key with live
# holders is asked for with another number of slots than it admits
# (contract 17): the key is not ours now, not a request to give up.
SLOTS_DIFFER_DETAIL = "While a key has live holders, every acquisition must give the same slots."


class LeaderlockError(Exception):
    """Base of this package's errors."""


class NotAcquired(LeaderlockError):
    """`timeout` passed without becoming leader (0: the one try failed)."""

    def __init__(self, key: str, holder: Optional[str]):
        self.key, self.holder = key, holder
        super().__init__(f"not the leader of {key!r}" + (f" (held by {holder!r})" if holder else ""))


class LeaseLost(LeaderlockError):
    """The lease is gone: the server refused a renewal, or no renewal
    succeeded before the local deadline. Stop acting as leader."""

    def __init__(self, key: str, term: int, reason: str):
        self.key, self.term, self.reason = key, term, reason
        super().__init__(f"lost the lease of {key!r} (term {term}): {reason}")


def default_id() -> str:
    """host:pid:random, unique per process and per lease."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


@dataclass(frozen=True)
class Timing:
    ttl: float
    renew_every: float
    margin: float
    call_timeout: float
    retry_every: float
    poll: Optional[float]

    @classmethod
    def of(cls, ttl: float, poll: Optional[float]) -> "Timing":
        if not (isinstance(ttl, (int, float)) and ttl > 0):
            raise ValueError(f"ttl must be a positive number of seconds, not {ttl!r}")
        if poll is not None and not poll > 0:
            raise ValueError(f"poll must be a positive number of seconds, not {poll!r}")
        return cls(ttl=float(ttl), renew_every=ttl / 3, margin=ttl / 200,
                   call_timeout=max(ttl / 3, 0.1), retry_every=min(max(ttl / 10, 0.05), 1.0), poll=poll)

    def poll_every(self, worker: bool, notifications: bool) -> float:
        """How long a candidate waits between tries without a hint."""
        if self.poll is not None:
            return self.poll
        if not worker:
            # nobody announces an expiry: the try itself finds it
            return min(max(self.ttl / 4, 0.1), 1.0)
        return max(self.ttl / 2, 1.0) if notifications else 1.0  # as the Rust client


@dataclass
class Lease:
    """The leadership a body holds. `term` is the fencing token: pass it
    with every write the leader makes (le_assert_leader(key, id, term) in
    the same transaction). `deadline` (time.monotonic()) moves at each
    renewal; past it, or once `lost` is set, the body must stop."""

    key: str
    id: str
    term: int
    value: Any
    deadline: float
    lost: threading.Event = field(default_factory=threading.Event)
    reason: Optional[str] = None

    @property
    def alive(self) -> bool:
        return not self.lost.is_set() and time.monotonic() < self.deadline

    def remaining(self) -> float:
        """Seconds until the local deadline (0 once lost)."""
        return 0.0 if self.lost.is_set() else max(0.0, self.deadline - time.monotonic())

    def check(self) -> None:
        """Raises LeaseLost unless the lease is still ours by the local
        clock: call it before each step a leader takes."""
        if not self.alive:
            raise LeaseLost(self.key, self.term, self.reason or "the local deadline passed")

    def _lose(self, reason: str) -> None:
        if not self.lost.is_set():
            self.reason = reason
            self.lost.set()


def frees(payload: str, key: str) -> bool:
    """Whether a notification says `key` became vacant. A hint only: any
    role may notify on the channel; the next try decides."""
    try:
        a = json.loads(payload)
    except ValueError:
        return False
    return isinstance(a, dict) and a.get("key") == key and a.get("event") in ("released", "expired")


def hint_due(last_try: float, now: float) -> float:
    """When a hint heard at `now` may make the next try: at once, unless
    the last try started less than HINT_FLOOR ago."""
    return max(now, last_try + HINT_FLOOR)


def slots_differ(e: BaseException) -> bool:
    """Whether the server refused a try because the key is held with
    another number of slots (22023 with SLOTS_DIFFER_DETAIL): the key is
    not ours now; keep trying, its holders' tenures will end. (22023 alone
    also means a key or id the server refuses for good.)"""
    diag = getattr(e, "diag", None)
    return (getattr(e, "sqlstate", None) == "22023" and diag is not None
            and (diag.message_detail or "").startswith(SLOTS_DIFFER_DETAIL))


def warn_slots_differ(key: str, e: BaseException) -> None:
    """Logged once per run of tries that meet the key held with another
    number of slots (what the server said is escaped: %r)."""
    log.warning("leaderlock: key %r is held with another number of slots: not ours now; "
                "trying again until those tenures end (server: %r)", key, str(e))


def check_name(what: str, value: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{what} must be a non-empty string")
    return value
