"""Leader election on PostgreSQL with leaderlock (either edition).

    with leaderlock.lead(dsn, "nightly-report", ttl=10.0) as lease:
        while work_left():
            lease.check()               # LeaseLost once the lease is gone
            do_one_step(fencing_term=lease.term)

    async with leaderlock.lead(dsn, "nightly-report") as lease:
        await run()                     # cancelled at the local deadline

`timeout=None` waits for leadership, `timeout=0` tries once; NotAcquired
when it passes.
"""
from typing import Any, Optional

from ._core import Lease, LeaderlockError, LeaseLost, NotAcquired, default_id
from ._elector import Elector
from ._sync import Leadership

__version__ = "0.1.0"


def lead(dsn: str, key: str, ttl: float = 10.0, timeout: Optional[float] = None, *,
         id: Optional[str] = None, value: Any = None, poll: Optional[float] = None) -> Leadership:
    """Leadership of `key` for the body of a `with` or `async with` block.

    ttl: seconds each acquire and renewal asks for (renewed every ttl/3).
    timeout: seconds to wait for leadership; None waits for ever, 0 tries
    once. id: this candidate's id (default host:pid:random). value: a JSON
    value announced with the leadership (le_proclaim). poll: seconds
    between tries without a notification (default: 1 s, ttl/2 once a worker
    announces expiries, ttl/4 where none does)."""
    return Leadership(dsn, key, ttl, timeout, id=id, value=value, poll=poll)


__all__ = ["lead", "Elector", "Lease", "Leadership", "LeaderlockError", "LeaseLost", "NotAcquired", "default_id"]
