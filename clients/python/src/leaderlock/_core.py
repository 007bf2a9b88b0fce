"""What the sync and asyncio halves share: the statements, the timings, the
errors, the lease a body sees, and what a notification means.

Everything here mirrors the Rust client (crates/client): renew every ttl/3,
a local deadline of (the instant the last successful acquire or renewal was
sent, monotonic clock) + ttl - ttl/200, every call bounded by that deadline,
LISTEN as a hint with polling as the fallback.
"""
from __future__ import annotations

import json
import logging
import os
import random
import re
import secrets
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any, Optional

import psycopg
from psycopg import pq
from psycopg.conninfo import conninfo_to_dict

log = logging.getLogger("leaderlock")

# The sessions' name when the connection string (or PGAPPNAME) gives none:
# libpq's fallback_application_name, so the user's own name is kept.
APPLICATION_NAME = "leaderlock python"

# Every statement takes bind parameters and is one round trip, so they work
# through pgbouncer's transaction pooling. Arguments go by name.
#
# No statement depends on the session's search_path (a database owner sets
# it for every role: ALTER DATABASE ... SET search_path): every function,
# aggregate, operator and type of PostgreSQL's is named in pg_catalog
# (pg_catalog.make_interval, OPERATOR(pg_catalog.=), ::pg_catalog.text),
# and every object of leaderlock in its schema, written EXTSCHEMA and
# replaced, when the statement is sent, by the schema SCHEMA_OF found on
# that connection (as the server quoted it). tests/test_statements.py
# checks every statement here and in the other modules.
EXTSCHEMA = "@extschema@"
# Run once on each new connection, before any other statement of
# leaderlock: the extension's schema, quoted by quote_ident. `schema`: the
# one the user named (the schema option, LEADERLOCK_SCHEMA), else NULL.
# Installed by CREATE EXTENSION, pg_extension names the one schema; the
# portable edition installed by its script has no row there: then every
# schema holding a le_capabilities() is a candidate. The same statement in
# every leaderlock client.
SCHEMA_OF = """SELECT pg_catalog.quote_ident(n.nspname::pg_catalog.text)
FROM pg_catalog.pg_namespace n
WHERE (%(schema)s::pg_catalog.text IS NULL OR n.nspname OPERATOR(pg_catalog.=) %(schema)s::pg_catalog.name)
  AND CASE WHEN EXISTS (SELECT FROM pg_catalog.pg_extension e
                        WHERE e.extname OPERATOR(pg_catalog.=) 'leaderlock'::pg_catalog.name)
      THEN n.oid OPERATOR(pg_catalog.=) ANY (ARRAY(
             SELECT e.extnamespace FROM pg_catalog.pg_extension e
             WHERE e.extname OPERATOR(pg_catalog.=) 'leaderlock'::pg_catalog.name))
      ELSE EXISTS (SELECT FROM pg_catalog.pg_proc p
                   WHERE p.pronamespace OPERATOR(pg_catalog.=) n.oid
                     AND p.proname OPERATOR(pg_catalog.=) 'le_capabilities'::pg_catalog.name
                     AND p.pronargs OPERATOR(pg_catalog.=) 0::pg_catalog.int2)
  END
ORDER BY 1"""
# The schema option's default.
SCHEMA_ENV = "LEADERLOCK_SCHEMA"

TRY_ACQUIRE = ("SELECT @extschema@.le_try_acquire(key => %s, id => %s, "
               "ttl => pg_catalog.make_interval(secs => %s))")
# the term: a renewal extends that tenure only, never a later one of the same id
RENEW = ("SELECT @extschema@.le_renew(key => %s, id => %s, ttl => pg_catalog.make_interval(secs => %s), "
         "term => %s::bigint)")
# the term (None after an interrupted try): never ends a later tenure of the same id
RELEASE = "SELECT @extschema@.le_release(key => %s, id => %s, term => %s::bigint)"
# The same on a schema before 0.5.0 (no `term`): a client updated before
# the extension keeps working, without that protection (UPDATING.md).
LEGACY = {
    RENEW: "SELECT @extschema@.le_renew(key => %s, id => %s, ttl => pg_catalog.make_interval(secs => %s))",
    RELEASE: "SELECT @extschema@.le_release(key => %s, id => %s)",
}
# After a release sent again was answered false: whether `id` still holds
# that tenure live (the release met its row locked by another transaction).
HOLDS = ("SELECT EXISTS (SELECT FROM @extschema@.le_holders(key => %s) "
         "WHERE holder OPERATOR(pg_catalog.=) %s "
         "AND (term OPERATOR(pg_catalog.=) %s::bigint OR %s::bigint IS NULL))")

# Releases that heard no answer, by (dsn, key, id): their term (None for an
# interrupted try's). Such a release may still reach the server, so a
# campaign under the same id sends it again, and hears an answer, before
# its first try: a try before that would extend the very tenure the late
# release then ends, while this process leads in it (docs/verification.md).
_unanswered: dict[tuple[str, str, str], Optional[int]] = {}
_unanswered_lock = threading.Lock()


def release_unanswered(dsn: str, key: str, id: str, term: Optional[int]) -> None:
    with _unanswered_lock:
        _unanswered[(dsn, key, id)] = term


def release_answered(dsn: str, key: str, id: str, term: Optional[int]) -> None:
    """The release of `term` sent again was answered, and the tenure is not
    held any more: forget it (not one recorded meanwhile for another term)."""
    with _unanswered_lock:
        k = (dsn, key, id)
        if k in _unanswered and _unanswered[k] == term:
            del _unanswered[k]


def unanswered_release(dsn: str, key: str, id: str) -> tuple[bool, Optional[int]]:
    """(whether a release under this id heard no answer, its term)."""
    with _unanswered_lock:
        k = (dsn, key, id)
        return (k in _unanswered, _unanswered.get(k))


TERM_OF = ("SELECT term, value::pg_catalog.text FROM @extschema@.le_lease(key => %s) "
           "WHERE holder OPERATOR(pg_catalog.=) %s")
# After a refused renewal: who holds the key now, in which term, and whether
# live by the server's own lease clock (`remaining` is NULL unless live; the
# server's clock, le_now() where it has one, need not be clock_timestamp()).
HOLDER_OF = "SELECT holder, term, remaining IS NOT NULL FROM @extschema@.le_lease(key => %s)"
ASSERT_LEADER = "SELECT @extschema@.le_assert_leader(key => %s, id => %s, term => %s::bigint)"
LEADER = "SELECT @extschema@.le_leader(key => %s)"
PROCLAIM = "SELECT @extschema@.le_proclaim(key => %s, id => %s, value => %s)"
WORKER_SERVES = ("SELECT coalesce((@extschema@.le_capabilities() OPERATOR(pg_catalog.->>) 'worker')::boolean, "
                 "true)")
WORKER_RUNNING = "SELECT @extschema@.le_worker_running()"
EXPIRE_LAPSED = "SELECT @extschema@.le_expire_lapsed()"
LISTEN = "LISTEN leaderlock"
# Once won: the campaign's connection renews, without notifications.
UNLISTEN = "UNLISTEN *"
CHANNEL = "leaderlock"
# Whether notifications reach this session at all (not behind transaction
# pooling): it listens on a channel of its own and notifies itself.
PROBE_LISTEN = "LISTEN leaderlock_probe"
PROBE = "SELECT pg_catalog.pg_notify('leaderlock_probe', %s)"

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
    """The lease is gone: stop acting as leader. `reason` is one of the
    constants below; `detail` says more, in words."""

    #: the local deadline passed before a renewal succeeded (the process
    #: was paused, renewals were late or refused while the row was locked)
    EXPIRED = "expired"
    #: the local deadline passed while the server could not be reached
    #: (or did not answer) to renew
    CONNECTION_LOST = "connection_lost"
    #: the server refused the renewal: another holder has the key now
    TAKEN = "taken"
    #: the server refused the renewal: the lease lapsed there, or someone
    #: else vacated it (le_force_release)
    VACATED = "vacated"
    #: the server rejected the renewal for good (no privilege, no extension)
    REJECTED = "rejected"
    #: le_assert_leader (Lease.guard) said this process does not lead in
    #: this term (SQLSTATE LE001)
    NOT_LEADER = "not_leader"
    #: this process released it (the end of the `with` block, Elector.stop)
    RELEASED = "released"
    #: the Elector's work function returned or raised: the lease was released
    RESIGNED = "resigned"
    #: this process is shutting down (SIGTERM, with release_on_sigterm)
    SHUTDOWN = "shutdown"

    def __init__(self, key: str, term: int, reason: str, detail: Optional[str] = None):
        self.key, self.term, self.reason, self.detail = key, term, reason, detail
        super().__init__(f"lost the lease of {key!r} (term {term}): {reason}" + (f": {detail}" if detail else ""))


class Unavailable(LeaderlockError, ConnectionError):
    """The server could not be reached, or did not answer, before `timeout`
    (with timeout=None, lead() keeps trying instead). `__cause__` is the
    last connection error."""


class Rejected(LeaderlockError):
    """The server refused the request, and retrying cannot change that.
    `sqlstate` is the server's code when it gave one."""

    def __init__(self, message: str, sqlstate: Optional[str] = None):
        self.sqlstate = sqlstate
        super().__init__(message)


class NotInstalled(Rejected):
    """leaderlock is not installed in the database connected to, or not in
    the schema named by the `schema` option (or LEADERLOCK_SCHEMA), or a
    function this client calls is missing from its schema there (an older
    version). `schema`: the schema named, or the one that lacks it."""

    def __init__(self, database: Optional[str], schema: Optional[str] = None, sqlstate: Optional[str] = "42883",
                 *, missing: Optional[str] = None):
        self.database, self.schema = database, schema
        where = f'database "{database}"' if database else "the database"
        if missing is not None:
            msg = (f"extension leaderlock in schema {schema!r} of {where} lacks a function this client calls "
                   f"({missing}): update it (ALTER EXTENSION leaderlock UPDATE)")
        elif schema:
            msg = (f"extension leaderlock is not installed in schema {schema!r} of {where} (the schema option "
                   f"or {SCHEMA_ENV} named that schema; CREATE EXTENSION leaderlock, or install the portable "
                   "edition)")
        else:
            msg = (f"extension leaderlock is not installed in {where} "
                   "(CREATE EXTENSION leaderlock, or install the portable edition)")
        super().__init__(msg, sqlstate)


class PrivilegeError(Rejected):
    """The role may not connect, or may not call leaderlock's functions
    (EXECUTE revoked), or the password is wrong."""


class BadArgument(Rejected, ValueError):
    """A ttl, key, id, timeout or poll this client or the server refuses;
    or no schema option where leaderlock's functions are in several
    schemas."""


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
        if isinstance(ttl, bool) or not (isinstance(ttl, (int, float)) and ttl > 0):
            raise BadArgument(f"ttl must be a positive number of seconds, not {ttl!r}")
        if poll is not None and not (isinstance(poll, (int, float)) and poll > 0):
            raise BadArgument(f"poll must be a positive number of seconds, not {poll!r}")
        return cls(ttl=float(ttl), renew_every=ttl / 3, margin=ttl / 200,
                   call_timeout=max(ttl / 3, 0.1), retry_every=min(max(ttl / 10, 0.05), 1.0), poll=poll)

    @property
    def connect_bound(self) -> float:
        """How long a campaign's connection attempt may take (libpq's
        connect_timeout is at least 2 s)."""
        return max(self.call_timeout, 5.0)

    def poll_every(self, worker: bool, notifications: bool) -> float:
        """How long a candidate waits between tries without a hint."""
        if self.poll is not None:
            return self.poll
        if not worker:
            # nobody announces an expiry: the try itself finds it
            return min(max(self.ttl / 4, 0.1), 1.0)
        return max(self.ttl / 2, 1.0) if notifications else 1.0  # as the Rust client


class Backoff:
    """Delays between reconnection attempts: from `first`, doubling up to
    `cap`, each drawn at random between half and all of it (so candidates
    cut off together do not come back together)."""

    def __init__(self, first: float = 0.1, cap: float = 2.0):
        self.first, self.cap, self.n = first, cap, 0

    def next(self) -> float:
        d = min(self.cap, self.first * (2 ** min(self.n, 16)))
        self.n += 1
        return random.uniform(d / 2, d)

    def reset(self) -> None:
        self.n = 0


def connect_args(dsn: str, bound: float, name: str = APPLICATION_NAME) -> dict:
    """psycopg.connect's keyword arguments besides the DSN: autocommit; the
    user's application_name (DSN or PGAPPNAME) kept, else `name`; the
    user's connect_timeout kept, else one that fits `bound`. A DSN libpq
    cannot parse is a BadArgument."""
    try:
        given = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as e:
        raise BadArgument(f"the connection string cannot be used: {e}") from e
    args: dict = {"autocommit": True, "fallback_application_name": name}
    if "connect_timeout" not in given and not os.environ.get("PGCONNECT_TIMEOUT"):
        args["connect_timeout"] = max(2, int(bound + 1))
    return args


def database_of(conn: Any) -> Optional[str]:
    try:
        return conn.info.dbname
    except Exception:
        return None


def schema_option(schema: Optional[str]) -> Optional[str]:
    """The schema a user named: `schema`, else LEADERLOCK_SCHEMA (when set
    and not empty), else None (found by SCHEMA_OF). BadArgument for one
    that is not a non-empty string."""
    if schema is None:
        return os.environ.get(SCHEMA_ENV) or None
    if not isinstance(schema, str) or not schema:
        raise BadArgument(f"schema must be None or a schema's name, not {schema!r}")
    return schema


def found_schema(rows: list, database: Optional[str], named: Optional[str]) -> str:
    """What SCHEMA_OF answered (its rows), as the schema to use: NotInstalled
    when none, BadArgument when several."""
    if len(rows) == 1:
        return rows[0][0]
    if not rows:
        raise NotInstalled(database, named, "42883")
    where = f'database "{database}"' if database else "the database"
    raise BadArgument(f"leaderlock's functions are in several schemas of {where}: "
                      f"{', '.join(repr(r[0]) for r in rows)}; name the one to use with the schema option "
                      f"(schema=...) or {SCHEMA_ENV}")


def find_schema(conn: Any, named: Optional[str]) -> str:
    """SCHEMA_OF on a new connection (sync): leaderlock's schema, quoted."""
    rows = conn.execute(SCHEMA_OF, {"schema": named}, prepare=False).fetchall()
    return found_schema(rows, database_of(conn), named)


async def afind_schema(conn: Any, named: Optional[str]) -> str:
    """`find_schema` on an asyncio connection."""
    cur = await conn.execute(SCHEMA_OF, {"schema": named}, prepare=False)
    return found_schema(await cur.fetchall(), database_of(conn), named)


def attach_schema(conn: Any, schema: str) -> Any:
    """Marks a connection of the library with leaderlock's schema there."""
    conn._leaderlock_schema = schema
    return conn


def schema_of(conn: Any) -> Optional[str]:
    """leaderlock's schema on a connection of the library (None: not looked up)."""
    return getattr(conn, "_leaderlock_schema", None)


def bind(sql: str, schema: Optional[str]) -> str:
    """A statement with EXTSCHEMA replaced by leaderlock's schema (as
    SCHEMA_OF quoted it)."""
    if EXTSCHEMA not in sql:
        return sql
    if schema is None:
        raise LeaderlockError("leaderlock: a statement was to be sent before leaderlock's schema was looked up")
    return sql.replace(EXTSCHEMA, schema)


# What a server says, at connection time, when retrying cannot help (English
# messages: libpq gives no SQLSTATE for a failed connection). Anything else
# (refused, timed out, starting up, shutting down, not the primary) is
# retried.
_CONNECT_REFUSALS = (
    (re.compile(r'database ".*" does not exist'), Rejected, "3D000"),
    (re.compile(r"password authentication failed|authentication failed for user"), PrivilegeError, "28P01"),
    (re.compile(r"no pg_hba\.conf entry|pg_hba\.conf rejects connection"), PrivilegeError, "28000"),
    (re.compile(r'role ".*" does not exist|role ".*" is not permitted to log in'), PrivilegeError, "28000"),
    (re.compile(r"permission denied for database"), PrivilegeError, "42501"),
)


def _connect_refusal(message: str) -> Optional[Rejected]:
    if "All failures were:" in message:
        attempts = [line for line in message.split("\n") if line.startswith("- host:")]
    else:
        attempts = [message]
    found: list = []
    for attempt in attempts:
        match = next(((cls, code) for pattern, cls, code in _CONNECT_REFUSALS if pattern.search(attempt)), None)
        if match is None:
            return None  # one host may still come round: retry
        found.append(match)
    if not found:
        return None
    cls, code = found[0]
    return cls(f"the server refused the connection: {message.splitlines()[0]}", code)


def rejection(e: BaseException, database: Optional[str] = None, schema: Optional[str] = None) -> Optional[Rejected]:
    """The typed error for a refusal that retrying cannot change (extension
    missing, privilege, a bad argument), or None: retry (a connection lost,
    a server starting up or shutting down, a standby, a call cancelled).
    `schema`: leaderlock's schema on the connection that failed, when it
    was found (a function missing there: an older version)."""
    if isinstance(e, Rejected):
        return e
    if not isinstance(e, psycopg.Error):
        return None
    code = getattr(e, "sqlstate", None)
    if code is None:
        if isinstance(e, psycopg.ProgrammingError):  # a DSN libpq cannot parse
            return BadArgument(f"the connection string cannot be used: {e}")
        if isinstance(e, psycopg.OperationalError):
            return _connect_refusal(str(e))
        return None
    first = str(e).splitlines()[0] if str(e) else code
    if code == "42883":
        if schema is not None:
            return NotInstalled(database, schema, code, missing=first)
        return NotInstalled(database, None, code)
    if code == "42501":
        where = f' in database "{database}"' if database else ""
        return PrivilegeError(f"the role may not use leaderlock{where}: {first}", code)
    if code in ("22023", "22004") and not slots_differ(e):
        return BadArgument(f"the server refused an argument: {first}", code)
    return None


def needs_schema(e: BaseException) -> bool:
    """Whether `rejection` would call it NotInstalled (42883: a function not
    found in leaderlock's schema): then a look at which functions are there
    (HAS_RUNS, HAS_HISTORY) may say it is an older version."""
    return isinstance(e, psycopg.Error) and getattr(e, "sqlstate", None) == "42883"


class Tenure:
    """What a lease and a scheduled run share: a local deadline on the
    monotonic clock (the instant the last successful call was sent + ttl -
    ttl/200), read at each question, and why it ended. `lost` (a
    threading.Event) is set once it ends: to wait on, not to guard with."""

    def __init__(self, deadline: float):
        self._deadline = deadline
        self.lost = threading.Event()
        self.reason: Optional[str] = None
        self.detail: Optional[str] = None
        self._late: Optional[tuple] = None  # why the deadline would pass (renewals failing)
        self._lock = threading.Lock()

    @property
    def deadline(self) -> float:
        return self._deadline

    def _ours(self) -> bool:
        """Whether this process may still act, now (reads the clock)."""
        with self._lock:
            ended = self._expire_locked()
            ours = self.reason is None
        if ended:
            self._log_end()
        return ours

    def remaining(self) -> float:
        """Seconds until the local deadline (0 once lost)."""
        return max(0.0, self._deadline - time.monotonic()) if self._ours() else 0.0

    # What the renewing side does to it.

    def _extend(self, deadline: float) -> bool:
        """A renewal sent at deadline - ttl + margin succeeded. False (and
        nothing moves) once it ended or its deadline passed: a loss is
        final."""
        with self._lock:
            ended = self._expire_locked()
            extended = self.reason is None
            if extended:
                self._deadline = max(self._deadline, deadline)
                self._late = None
        if ended:
            self._log_end()
        return extended

    def _failing(self, reason: str, detail: str) -> None:
        """Renewals fail (`reason`): what the deadline will be put down to."""
        with self._lock:
            self._late = (reason, detail)

    def _end(self, reason: str, detail: Optional[str] = None) -> bool:
        """Ends it (the first reason stays). True if it was alive."""
        with self._lock:
            was_alive = self.reason is None
            if was_alive:
                self.reason, self.detail = reason, detail
            ended = not self.lost.is_set()  # (ended by _end_now: not yet set)
            self.lost.set()
        if ended:
            self._log_end()
        return was_alive

    def _end_now(self, reason: str, detail: str) -> None:
        """Ends it from a signal handler: no lock (the interrupted thread
        may hold it), no Event; the questions read `reason` at once and the
        next `_end` sets `lost`."""
        if self.reason is None:
            self.detail = detail
            self.reason = reason

    def _expire_locked(self) -> bool:
        """Under the lock: ends it if its deadline passed. Whether it did."""
        if self.reason is None and time.monotonic() >= self._deadline:
            self.reason, self.detail = self._late or (LeaseLost.EXPIRED,
                                                      "no renewal succeeded before the local deadline")
            self.lost.set()
            return True
        return False

    def _log_end(self) -> None:
        raise NotImplementedError


class Lease(Tenure):
    """The leadership a body holds.

    Before each step a leader takes, call `check()` (or read `alive`): both
    compare time.monotonic() with `deadline` at the moment they are called,
    so a process resumed after a pause, or whose renewals failed, stops at
    the local deadline whatever any timer or thread has done yet.
    `deadline` is the instant the last successful acquire or renewal was
    sent + ttl - ttl/200, on the monotonic clock: the server's expires_at
    is later.

    `term` is the fencing token; `guard(conn)` (`aguard` for asyncio) runs
    le_assert_leader(key, id, term) in the caller's transaction, so the
    writes made in that transaction commit only while this process leads
    (in leaderlock's schema where the lease was acquired, whatever the
    search_path of `conn`).

    `lost` (a threading.Event) is set once the lease ends: something to
    wait on (lease.lost.wait(5) instead of time.sleep(5)), not a guard."""

    def __init__(self, key: str, id: str, term: int, value: Any, deadline: float):
        super().__init__(deadline)
        self.key, self.id, self.term, self.value = key, id, term, value
        # leaderlock's schema where it was acquired (guard's statement names it)
        self._schema: Optional[str] = None

    def __repr__(self) -> str:
        state = "alive" if self.reason is None else f"lost: {self.reason}"
        return f"<leaderlock.Lease {self.key!r} id={self.id!r} term={self.term} {state}>"

    @property
    def alive(self) -> bool:
        """Whether this process may still act as leader, now."""
        return self._ours()

    def check(self) -> None:
        """Raises LeaseLost unless the lease is still ours by the local
        clock: call it before each step a leader takes."""
        if not self.alive:
            raise LeaseLost(self.key, self.term, self.reason or LeaseLost.EXPIRED, self.detail)

    def guard(self, conn: "psycopg.Connection") -> int:
        """Fences a write: runs le_assert_leader(key, id, term) on `conn`,
        inside the transaction of the write it guards (`with
        conn.transaction(): lease.guard(conn); conn.execute(...)`). The row
        of the lease stays share-locked until that transaction ends, so no
        other holder can take over before it commits: the write commits
        only while this process leads. LeaseLost (reason NOT_LEADER) when
        the server says otherwise, after which the transaction can only be
        rolled back. Returns the term."""
        self.check()
        schema = self._schema or schema_of(conn)
        try:
            if schema is None:  # a Lease this library did not make
                schema = find_schema(conn, schema_option(None))
            conn.execute(bind(ASSERT_LEADER, schema), (self.key, self.id, self.term), prepare=False)
        except psycopg.Error as e:
            raise self._guard_error(e, conn, schema) from e
        self._in_transaction(conn)
        return self.term

    async def aguard(self, conn: "psycopg.AsyncConnection") -> int:
        """`guard` for an asyncio connection: `async with
        conn.transaction(): await lease.aguard(conn); await conn.execute(...)`."""
        self.check()
        schema = self._schema or schema_of(conn)
        try:
            if schema is None:  # a Lease this library did not make
                schema = await afind_schema(conn, schema_option(None))
            await conn.execute(bind(ASSERT_LEADER, schema), (self.key, self.id, self.term), prepare=False)
        except psycopg.Error as e:
            raise self._guard_error(e, conn, schema) from e
        self._in_transaction(conn)
        return self.term

    def _guard_error(self, e: psycopg.Error, conn: Any, schema: Optional[str]) -> BaseException:
        if getattr(e, "sqlstate", None) == "LE001":
            self._end(LeaseLost.NOT_LEADER, (str(e).splitlines() or [""])[0])
            return LeaseLost(self.key, self.term, LeaseLost.NOT_LEADER, self.detail)
        return rejection(e, database_of(conn), schema) or e

    def _in_transaction(self, conn: Any) -> None:
        if conn.info.transaction_status == pq.TransactionStatus.IDLE:
            raise LeaderlockError("Lease.guard must run inside the transaction of the write it fences "
                                  "(with conn.transaction(): ...); in autocommit it fenced nothing")

    def _log_end(self) -> None:
        level = logging.INFO if self.reason in (LeaseLost.RELEASED, LeaseLost.RESIGNED, LeaseLost.SHUTDOWN) \
            else logging.WARNING
        log.log(level, "leaderlock: %r: term %s ended: %s%s", self.key, self.term, self.reason,
                f" ({self.detail})" if self.detail else "")

    def _server_has_it_maybe(self) -> bool:
        """Whether a release could still hand anything over: not when the
        server said the lease is not ours."""
        return self.reason not in (LeaseLost.TAKEN, LeaseLost.VACATED, LeaseLost.NOT_LEADER, LeaseLost.REJECTED)


def still_ours(lease: Lease, row: Optional[tuple]) -> bool:
    """After a refused renewal, what the server's answer to `HOLDER_OF`
    says: True when the lease is still ours and live (its row was locked:
    retry until the deadline); else the lease ends, with the reason, and
    False."""
    holder, term, live = row or (None, None, False)
    if holder == lease.id and term == lease.term and live:
        lease._failing(LeaseLost.EXPIRED, "renewals were refused while the lease's row was locked")
        return True
    if holder is not None and holder != lease.id and live:
        lease._end(LeaseLost.TAKEN, f"the server refused the renewal: {holder!r} holds it in term {term}")
    else:
        lease._end(LeaseLost.VACATED, "the server refused the renewal: the lease lapsed there, "
                                      "or someone vacated it")
    return False


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


class Outage:
    """One warning when the server cannot be reached, one line when it can
    again, and the delays between attempts."""

    def __init__(self, key: str, what: str):
        self.key, self.what = key, what
        self.error: Optional[BaseException] = None
        self.since = 0.0
        self.backoff = Backoff()

    def failed(self, e: BaseException) -> float:
        """Logs the failure (a warning for the first of a run); the delay
        before the next attempt."""
        if self.error is None:
            self.since = time.monotonic()
            log.warning("leaderlock: %r: %s: the server cannot be reached (%s); reconnecting",
                        self.key, self.what, describe(e))
        else:
            log.debug("leaderlock: %r: %s: still unreachable (%s)", self.key, self.what, describe(e))
        self.error = e
        return self.backoff.next()

    def ended(self) -> None:
        if self.error is not None:
            log.info("leaderlock: %r: %s: connected again after %.1f s", self.key, self.what,
                     time.monotonic() - self.since)
            self.error = None
            self.backoff.reset()


def describe(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0]}" if text else type(e).__name__


def check_name(what: str, value: str) -> str:
    if not isinstance(value, str) or not value:
        raise BadArgument(f"{what} must be a non-empty string")
    return value
