"""Scheduled runs (contract 22): a job that every replica schedules alike
and that runs once per due instant, on one of them.

Due instants come from a `Schedule` and are read on the server's lease
clock (`le_now()`), never on this host's. The loop (`run_scheduled`, or a
`Scheduled` made by the `scheduled` decorator) waits for each to come,
claims its run (`le_claim_run`), and calls the job's function with a `Run`:
a fencing term and a local deadline (the instant the claim was sent + ttl -
ttl/200, monotonic clock), moved by renewals every ttl/3 in a thread of
their own. A run another replica claimed is watched until it is finished,
and claimed again if its claim lapses unfinished (its runner died: the new
claim has a higher term).

The same algorithm as the Rust client's Scheduler (crates/client/src/
schedule.rs), statement for statement, and the same due instants for the
same schedule: `every` at multiples of the period since the Unix epoch;
`cron` by the Rust client's rules (see `Schedule.cron`), so replicas of one
job in either language agree on its runs.

A schedule kept in the database (contract 24, `le_schedule`;
`Schedule.registered()`, what `every` and `cron` both omitted mean) is
read from the server instead (`le_next_due`, looked at again every poll),
so a change or a pause is followed without a restart; its misfire grace is
the schedule's (claims send none).
"""
from __future__ import annotations

import logging
import threading
import time
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Optional, Union

from . import _core, _shutdown
from ._core import BadArgument, LeaderlockError, LeaseLost, Rejected, Timing, log
from ._sync import CALL_ERRORS, Renewer, Session, wait

UTC = timezone.utc
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MICROSECOND = timedelta(microseconds=1)

# Every statement takes bind parameters, arguments by name, one round trip
# (as the Rust client's, crates/client/src/sql.rs); every object of
# leaderlock in its schema (_core.EXTSCHEMA), PostgreSQL's in pg_catalog:
# none depends on the search_path (_core.py).
LE_NOW = "SELECT @extschema@.le_now()"
# job, due, id, ttl in seconds, misfire grace in seconds (NULL: none): the term, or NULL
CLAIM_RUN = ("SELECT @extschema@.le_claim_run(job => %s, due => %s, id => %s, "
             "ttl => pg_catalog.make_interval(secs => %s), "
             "misfire_grace => pg_catalog.make_interval(secs => %s::double precision))")
# job, due, id, ttl in seconds, the claim's term
RENEW_RUN = ("SELECT @extschema@.le_renew_run(job => %s, due => %s, id => %s, "
             "ttl => pg_catalog.make_interval(secs => %s), term => %s::bigint)")
# job, due, id, term, succeeded, detail
FINISH_RUN = ("SELECT @extschema@.le_finish_run(job => %s, due => %s, id => %s, term => %s::bigint, "
              "succeeded => %s, detail => %s::pg_catalog.text)")
# After a refused claim, what the run is now: finished (or missed), seconds
# until its live claim ends (NULL: none live), its outcome. job, due.
RUN_STATE = ("SELECT r.finished_at IS NOT NULL, "
             "CASE WHEN r.holder IS NOT NULL AND r.expires_at OPERATOR(pg_catalog.>) n.now "
             "THEN extract(epoch FROM r.expires_at OPERATOR(pg_catalog.-) n.now)::double precision END, "
             "r.outcome "
             "FROM @extschema@.leaderlock_runs r, (SELECT @extschema@.le_now() AS now) n "
             "WHERE r.job OPERATOR(pg_catalog.=) %s AND r.due OPERATOR(pg_catalog.=) %s")
# After a refused renewal: who claimed the run last, in which term, and
# whether it is finished (to say why it is lost). job, due.
RUN_HOLDER = ("SELECT holder, term, finished_at IS NOT NULL FROM @extschema@.leaderlock_runs "
              "WHERE job OPERATOR(pg_catalog.=) %s AND due OPERATOR(pg_catalog.=) %s")
# After a 42883: whether the functions of scheduled runs are in leaderlock's
# schema there (extension 0.5.0). The schema as SCHEMA_OF quoted it.
# Contract 24: job's registered schedule's first due instant strictly after
# `after` (NULL: no schedule, or paused), and its misfire grace in seconds.
# job, after, job.
# The next due instant after a moment, the misfire grace, and the missed
# instants the schedule's backfill lets run late (oldest first).
NEXT_DUE = ("SELECT @extschema@.le_next_due(job => %s, after => %s), "
            "(SELECT pg_catalog.date_part('epoch'::pg_catalog.text, s.misfire_grace) "
            "FROM @extschema@.leaderlock_schedules s WHERE s.job OPERATOR(pg_catalog.=) %s), "
            "ARRAY(SELECT @extschema@.le_backfill_due(job => %s))")
HAS_RUNS = ("SELECT EXISTS (SELECT FROM pg_catalog.pg_proc "
            "WHERE pronamespace OPERATOR(pg_catalog.=) %s::pg_catalog.regnamespace "
            "AND proname OPERATOR(pg_catalog.=) 'le_claim_run'::pg_catalog.name)")

# A run whose row a refused claim cannot find this many times in a row is
# dropped: older than the retention (a row that races a first claim
# appears within a few tries).
ABSENT_TRIES = 100
# Looks again every RACE_RETRY this many times before backing off.
FAST_TRIES = 10
RACE_RETRY = 0.020
# How often to look at a run another replica has claimed (as the Rust client's).
POLL_EVERY = 1.0
# A cron job's default misfire grace (as `leaderlock run --cron`).
CRON_GRACE = timedelta(minutes=5)
# le_finish_run's limit on `detail`, in bytes (UTF-8).
MAX_DETAIL_BYTES = 1000
# Finishing is tried this many times (on a new connection when need be).
FINISH_TRIES = 3

Seconds = Union[float, int, timedelta]


def _seconds(what: str, value: Seconds, *, zero: bool = False) -> float:
    if isinstance(value, timedelta):
        s = value.total_seconds()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        s = float(value)
    else:
        raise BadArgument(f"{what} must be a number of seconds or a timedelta, not {value!r}")
    if not (s >= 0 if zero else s > 0) or s != s or s == float("inf"):
        raise BadArgument(f"{what} must be {'at least 0' if zero else 'positive'} and finite, not {value!r}")
    return s


def _micros(t: datetime) -> int:
    return (t - EPOCH) // MICROSECOND


def _utc(t: datetime) -> datetime:
    if t.tzinfo is None:
        raise BadArgument("instants must be aware datetimes (with a tzinfo), not naive ones")
    return t.astimezone(UTC)


def format_due(t: datetime) -> str:
    """A due instant as RFC 3339 UTC with microseconds (as the CLI prints it)."""
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# The cron shorthands the Rust client's cron crate knows, as six fields.
_SHORTHANDS = {
    "@yearly": "0 0 0 1 1 *",
    "@monthly": "0 0 0 1 * *",
    "@weekly": "0 0 0 * * SUN",
    "@daily": "0 0 0 * * *",
    "@hourly": "0 0 * * * *",
}


def _cron_fields(expr: str) -> list:
    """The six fields (seconds first) of a cron expression, refused where
    crontab's reading (cronsim's) and the Rust client's (the cron crate's)
    differ, so that replicas in either language agree on the due instants."""
    if not isinstance(expr, str) or not expr.strip():
        raise BadArgument(f"a cron expression must be a non-empty string, not {expr!r}")
    text = expr.strip()
    if text in _SHORTHANDS:
        return _SHORTHANDS[text].split()
    fields = text.split()
    if len(fields) == 5:
        fields.insert(0, "0")
    elif len(fields) == 7:
        raise BadArgument(f"cron expression {expr!r}: a year field (seven fields) is not supported here")
    elif len(fields) != 6:
        raise BadArgument(f"cron expression {expr!r}: five fields (minute hour day-of-month month "
                          "day-of-week), or six with seconds first")
    # "?" (any) is the cron crate's, for the two day fields; crontab's "*"
    fields[3] = fields[3].replace("?", "*")
    fields[5] = fields[5].replace("?", "*")
    dom, dow = fields[3], fields[5]
    for term in dow.split(","):
        if any(c.isdigit() for c in term.split("/", 1)[0]):
            raise BadArgument(f"cron expression {expr!r}: name the days of the week (SUN, MON-FRI): "
                              "their numbers differ between cron dialects (crontab counts Sunday as 0 "
                              "or 7, the Rust client as 1); numbers are refused, and so are L and #")
    if any(c.isalpha() for c in dom):
        raise BadArgument(f"cron expression {expr!r}: L and W are not supported in the day of the month")
    if dom != "*" and dow != "*":
        raise BadArgument(f"cron expression {expr!r}: restrict the day of the month or the day of the "
                          "week, not both: crontab runs on either, the Rust client on both")
    return fields


class Schedule:
    """When a job is due: `Schedule.every(period)`, `Schedule.cron(expr,
    tz)`, or `Schedule.registered()` (the job's schedule kept in the
    database). `next_after(t)` and `at_or_after(t)` give due instants as
    aware UTC datetimes (None: there is none, or the server says)."""

    def __init__(self, *, period_us: Optional[int] = None, cron: Optional[str] = None,
                 fields: Optional[list] = None, tz: Any = None, tz_name: Optional[str] = None,
                 registered: bool = False):
        self._period_us, self._cron, self._fields, self._tz = period_us, cron, fields, tz
        self.tz_name = tz_name
        self._registered = registered

    @classmethod
    def registered(cls) -> "Schedule":
        """The job's schedule kept in the database (contract 24: made or
        changed by `le_schedule`, paused by `le_pause_schedule`): each due
        instant is read from the server (`le_next_due`) every poll, so a
        change or a pause is followed without a restart; its misfire grace
        is the schedule's. What `every` and `cron` both omitted mean."""
        return cls(registered=True)

    @property
    def is_registered(self) -> bool:
        """Whether the due instants come from the database."""
        return self._registered

    @classmethod
    def every(cls, period: Seconds) -> "Schedule":
        """Every `period` (a timedelta, or seconds): whole milliseconds, at
        least one. Due at the multiples of the period since the Unix epoch,
        so every replica computes the same instants."""
        if isinstance(period, timedelta):
            us = period // MICROSECOND
        else:
            us = round(_seconds("every", period) * 1_000_000)
        if us < 1000 or us % 1000:
            raise BadArgument(f"a period must be whole milliseconds, at least 1 ms (got {period!r})")
        return cls(period_us=us)

    @classmethod
    def cron(cls, expr: str, tz: str = "UTC") -> "Schedule":
        """A cron expression in time zone `tz` (an IANA name: "Europe/Paris",
        "UTC"): five fields (minute hour day-of-month month day-of-week), or
        six with seconds first, or @hourly, @daily, @weekly, @monthly,
        @yearly. Lists, ranges, steps, month and day names (JAN, MON-FRI).

        The Rust client's rules, so that replicas in either language agree:
        across daylight saving changes, a local time that does not exist is
        skipped and one that occurs twice is due once, at the first; days
        of the week by name only (numbers differ between dialects); the day
        of the month or the day of the week restricted, not both (anything
        but * or ?); no L, W or #, no year field. Parsed and iterated by cronsim (wall-clock time),
        mapped to instants here."""
        fields = _cron_fields(expr)
        try:
            from zoneinfo import ZoneInfo, ZoneInfoNotFoundError
        except ImportError as e:  # pragma: no cover (3.9 and later have it)
            raise BadArgument("cron schedules need zoneinfo") from e
        if not isinstance(tz, str) or not tz:
            raise BadArgument(f"tz must be an IANA time zone name, not {tz!r}")
        try:
            zone = ZoneInfo(tz)
        except (ZoneInfoNotFoundError, ValueError, OSError) as e:
            raise BadArgument(f"time zone {tz!r}: not found ({e})") from e
        schedule = cls(cron=expr, fields=fields, tz=zone, tz_name=tz)
        try:
            schedule._cronsim(datetime(2000, 1, 1))
        except Exception as e:
            if isinstance(e, LeaderlockError):
                raise
            raise BadArgument(f"cron expression {expr!r}: {e}") from e
        return schedule

    @property
    def period(self) -> Optional[timedelta]:
        """The period of an `every` schedule (None for cron)."""
        return None if self._period_us is None else timedelta(microseconds=self._period_us)

    @property
    def default_grace(self) -> Optional[timedelta]:
        """The misfire grace when none is given: the period, or 5 minutes
        for cron (as `leaderlock run`); None for a registered schedule (the
        database's)."""
        if self._registered:
            return None
        return self.period if self.period is not None else CRON_GRACE

    def __repr__(self) -> str:
        if self._registered:
            return "Schedule.registered()"
        if self._period_us is not None:
            return f"Schedule.every({self.period!r})"
        return f"Schedule.cron({self._cron!r}, {self.tz_name!r})"

    def _cronsim(self, start: datetime) -> Any:
        try:
            from cronsim import CronSim
        except ImportError as e:
            raise LeaderlockError("cron schedules need the cronsim package (pip install cronsim==2.8)") from e
        return CronSim(" ".join(self._fields), start)

    def next_after(self, t: datetime) -> Optional[datetime]:
        """The first due instant strictly after `t` (an aware datetime);
        None for a registered schedule (the server says)."""
        t = _utc(t)
        if self._registered:
            return None
        if self._period_us is not None:
            p = self._period_us
            return EPOCH + timedelta(microseconds=(_micros(t) // p + 1) * p)
        # As the cron crate: the first matching local time at or after the
        # wall-clock reading of t + 1 s (whole seconds), skipping local times
        # that do not exist; one that occurs twice is its first instant.
        try:
            lower = (t + timedelta(seconds=1)).astimezone(self._tz).replace(tzinfo=None, microsecond=0)
        except OverflowError:
            return None
        it = self._cronsim(lower - timedelta(seconds=1))
        while True:
            try:
                local = next(it)
            except (StopIteration, OverflowError):
                return None
            aware = local.replace(tzinfo=self._tz, fold=0)
            instant = aware.astimezone(UTC)
            if instant.astimezone(self._tz).replace(tzinfo=None) == local:
                return instant
            # a local time that does not exist (a daylight saving gap): skipped

    def at_or_after(self, t: datetime) -> Optional[datetime]:
        """The first due instant at or after `t`."""
        return self.next_after(_utc(t) - MICROSECOND)


class RunLost(LeaseLost):
    """The claim of a run is gone (or its local deadline passed): stop
    acting for it. A LeaseLost, with `job` and `due` besides `term`,
    `reason` (a LeaseLost constant: EXPIRED, CONNECTION_LOST, TAKEN,
    VACATED, REJECTED, SHUTDOWN) and `detail`."""

    def __init__(self, job: str, due: datetime, term: int, reason: str, detail: Optional[str] = None):
        self.key, self.job, self.due, self.term, self.reason, self.detail = job, job, due, term, reason, detail
        LeaderlockError.__init__(self, f"lost the run of {job!r} due {format_due(due)} (term {term}): {reason}"
                                       + (f": {detail}" if detail else ""))


class Run(_core.Tenure):
    """A due run this replica claimed, handed to the job's function.

    `job`, `id`, `due` (an aware UTC datetime on the server's lease clock),
    `term` (the claim's fencing term: above every earlier claim of the job;
    pass it with each write to systems that can refuse an older one),
    `deadline` (time.monotonic(): the claim may have lapsed on the server
    from then; renewals every ttl/3 move it).

    Call `check()` (or `is_ours()`) right before each side effect: both
    compare time.monotonic() with the deadline at that moment, so a process
    resumed after a pause, or whose renewals failed or were refused, takes
    no further step. `lost` (a threading.Event) is set once the run is lost
    or its deadline passed: to wait on, not to guard with."""

    def __init__(self, job: str, id: str, due: datetime, term: int, deadline: float):
        super().__init__(deadline)
        self.job, self.id, self.due, self.term = job, id, due, term
        self.key = job  # (the name renewals and their logs give)
        self._sent = deadline  # when the claim was sent (set by the Scheduler)

    def __repr__(self) -> str:
        state = "ours" if self.reason is None and time.monotonic() < self._deadline else \
            f"lost: {self.reason or LeaseLost.EXPIRED}"
        return f"<leaderlock.Run {self.job!r} due {format_due(self.due)} term={self.term} {state}>"

    def is_ours(self) -> bool:
        """Whether this replica may still act for the run, now."""
        return self._ours()

    alive = property(is_ours, doc="The same as is_ours() (as Lease.alive).")

    def check(self) -> None:
        """Raises RunLost unless the run is still ours by the local clock:
        call it right before each side effect."""
        if not self.is_ours():
            raise RunLost(self.job, self.due, self.term, self.reason or LeaseLost.EXPIRED, self.detail)

    def _log_end(self) -> None:
        if self.reason == LeaseLost.RELEASED:
            return  # the function returned: nothing to say
        log.log(logging.INFO if self.reason == LeaseLost.SHUTDOWN else logging.WARNING,
                "leaderlock: job %r: the run due %s (term %s) is lost: %s%s", self.job,
                format_due(self.due), self.term, self.reason, f" ({self.detail})" if self.detail else "")


class Settled:
    """A due run another replica finished, or that was recorded missed
    (`outcome`: succeeded, failed, missed; None: its row is gone)."""

    def __init__(self, due: datetime, outcome: Optional[str]):
        self.due, self.outcome = due, outcome

    def __repr__(self) -> str:
        return f"<leaderlock.Settled due {format_due(self.due)} {self.outcome}>"


def detail_of(e: BaseException) -> str:
    """`Type: message` of an exception, as le_finish_run's detail: no NUL,
    valid UTF-8, at most MAX_DETAIL_BYTES bytes (cut at a character)."""
    text = str(e)
    text = f"{type(e).__name__}: {text}" if text else type(e).__name__
    return truncate_utf8(text)


def truncate_utf8(text: str, limit: int = MAX_DETAIL_BYTES) -> str:
    raw = text.replace("\x00", "\\x00").encode("utf-8", "backslashreplace")
    return raw[:limit].decode("utf-8", "ignore")


class RunRenewer(Renewer):
    """Renews a run's claim every ttl/3 until stopped, as a lease's
    renewer does (a new connection when the old one is lost or hangs, each
    call bounded by ttl/3 and by the local deadline, a timer setting
    `run.lost` at the deadline), except that a refused renewal ends the run
    at once: another replica claimed it, or it lapsed there."""

    def __init__(self, dsn: str, s: Optional[Session], run: Run, timing: Timing, sent: float,
                 schema: Optional[str] = None):
        self.sent = sent
        super().__init__(dsn, s, run, timing, schema=schema)

    def first_renewal(self) -> float:
        return self.sent + self.timing.renew_every

    def renewed(self, by: float) -> bool:
        r = self.lease
        return bool(self.s.one(by, RENEW_RUN, (r.job, r.due, r.id, self.timing.ttl, r.term)))

    def refused(self, by: float) -> bool:
        self.lease._end(*self.why_refused(by))
        return False

    def why_refused(self, by: float) -> tuple:
        r = self.lease
        try:
            row = self.s.row(max(by, time.monotonic() + 0.5), RUN_HOLDER, (r.job, r.due)) if self.s else None
        except CALL_ERRORS:
            row = None
        holder, term, finished = row or (None, None, False)
        if holder is not None and term != r.term:
            return LeaseLost.TAKEN, f"the server refused the renewal: {holder!r} claimed the run in term {term}"
        if finished:
            return LeaseLost.VACATED, "the server refused the renewal: the run is finished"
        return LeaseLost.VACATED, "the server refused the renewal: the claim lapsed there"

    def stop(self) -> Optional[Session]:  # type: ignore[override]
        """Stops renewing; the connection back (None: gone, or still busy)."""
        super().stop()
        if self.busy:
            return None
        s, self.s = self.s, None
        return s


class Scheduler:
    """Claims the runs of one job as they come due (the Rust client's
    Scheduler): `next()` waits until a run is due and either claimed by
    this replica (a Run) or settled elsewhere (a Settled). A registered
    schedule is read from the server every `poll` at most, and takes no
    `misfire_grace` (the schedule's counts)."""

    def __init__(self, dsn: str, job: str, schedule: Schedule, *, ttl: Seconds = 10.0,
                 misfire_grace: Optional[Seconds] = None, id: Optional[str] = None,
                 poll: Seconds = POLL_EVERY, stop: Optional[threading.Event] = None,
                 schema: Optional[str] = None):
        if not isinstance(dsn, str):
            raise BadArgument("dsn must be a connection string")
        _core.connect_args(dsn, 0)  # BadArgument now rather than at the first call
        self.schema = _core.schema_option(schema)
        if not isinstance(schedule, Schedule):
            raise BadArgument(f"schedule must be a leaderlock.Schedule, not {schedule!r}")
        self.dsn, self.schedule = dsn, schedule
        self.job = _core.check_name("job", job)
        self.id = _core.check_name("id", id) if id is not None else _core.default_id()
        self.timing = Timing.of(_seconds("ttl", ttl), None)
        self.registered = schedule.is_registered
        # the grace sent with each claim; None for a registered schedule:
        # the server counts the schedule's
        self.misfire_grace: Optional[float] = None
        if self.registered:
            if misfire_grace is not None:
                raise BadArgument("misfire_grace goes with every= or cron=: a job run by its name alone "
                                  "has its schedule's (le_schedule)")
        else:
            grace = schedule.default_grace if misfire_grace is None else misfire_grace
            self.misfire_grace = _seconds("misfire_grace", grace, zero=True)
        self.poll = _seconds("poll", poll)
        self.stop = stop
        self.s: Optional[Session] = None
        self.started = False
        # the next due instant not yet looked at (a registered schedule: the
        # last one made pending)
        self.cursor: Optional[datetime] = None
        self.unscheduled = False  # (a registered schedule) absent or paused at the last look
        # due runs not settled yet: when to look at each again, and how often
        # it was found without a row
        self.pending: dict = {}
        self.outage = _core.Outage(self.job, "scheduled runs")

    # The connection.

    def session(self) -> Session:
        if self.s is None:
            self.s = Session(self.dsn, time.monotonic() + self.timing.connect_bound, named=self.schema)
        return self.s

    def one(self, sql: str, args: tuple = ()) -> Any:
        """The first column of the first row; each call bounded by ttl/3."""
        s = self.session()
        return s.one(time.monotonic() + self.timing.call_timeout, sql, args)

    def row(self, sql: str, args: tuple = ()) -> Any:
        s = self.session()
        return s.row(time.monotonic() + self.timing.call_timeout, sql, args)

    def drop(self) -> None:
        if self.s is not None:
            self.s.close()
            self.s = None

    def stopped(self) -> bool:
        return (self.stop is not None and self.stop.is_set()) or _shutdown.down

    def failed(self, e: BaseException) -> None:
        """After a failed call: a typed error when retrying cannot help;
        else the connection is dropped and, after a (jittered, growing,
        bounded) delay, the caller goes on."""
        refusal = self.refusal(e)
        self.drop()
        if refusal is not None:
            log.error("leaderlock: job %r: %s", self.job, refusal)
            if refusal is e:
                raise refusal
            raise refusal from e
        wait(self.outage.failed(e), self.stop)

    def refusal(self, e: BaseException) -> Optional[Rejected]:
        s = self.s
        if self.registered and getattr(e, "sqlstate", None) in ("42883", "42P01") and \
                ("le_next_due" in str(e) or "leaderlock_schedules" in str(e)):
            return Rejected("neither every= nor cron= was given, and leaderlock here keeps no schedules in "
                            "the database (le_next_due): that needs the compiled edition, version 0.5.0 or "
                            "later", getattr(e, "sqlstate", None))
        if _core.needs_schema(e) and s is not None and not s.abandoned and s.schema is not None:
            try:  # leaderlock there, but before 0.5.0: say so
                if not s.one(time.monotonic() + 2.0, HAS_RUNS, (s.schema,)):
                    return Rejected("leaderlock here has no scheduled runs (le_claim_run): they need "
                                    "version 0.5.0 or later (ALTER EXTENSION leaderlock UPDATE)", "42883")
            except CALL_ERRORS:
                pass
        return s.rejection(e) if s is not None else _core.rejection(e)

    # The algorithm.

    def server_now(self) -> datetime:
        return self.one(LE_NOW).astimezone(UTC)

    def next(self) -> Union[Run, Settled, None]:
        """Waits until a run is due and claimed by this replica (a Run) or
        settled elsewhere (a Settled); None once `stop` is set (or SIGTERM
        came, with release_on_sigterm). Lost connections are made again;
        Rejected when retrying cannot help."""
        while not self.stopped():
            try:
                turn = self.step()
                self.outage.ended()
            except CALL_ERRORS as e:
                self.failed(e)
                continue
            if turn is not None:
                return turn
        return None

    def step(self) -> Union[Run, Settled, None]:
        now = self.server_now()
        here = time.monotonic()
        if self.registered:
            cursor = self.make_registered_pending(now, here)
            # read again every poll: a change or a pause is followed without a restart
            most = self.poll
        else:
            cursor = self.make_pending(now, here)
            most = 10.0
        ready = next((due for due in sorted(self.pending) if self.pending[due][0] <= here), None)
        if ready is None:
            until_cursor = (cursor - now).total_seconds() if cursor is not None else most
            until_pending = min((at - here for at, _ in self.pending.values()), default=until_cursor)
            # wake at the earlier, and read the server's clock again then
            wait(min(until_cursor, until_pending, most), self.stop)
            return None
        return self.look_at(ready)

    def make_pending(self, now: datetime, here: float) -> Optional[datetime]:
        """Makes every due instant up to `now` pending (looking back one
        misfire grace at the start); the next one after `now`."""
        if not self.started:
            self.cursor = self.schedule.at_or_after(now - timedelta(seconds=self.misfire_grace or 0.0))
            self.started = True
            if self.cursor is None:
                raise BadArgument(f"the schedule of job {self.job!r} has no due instant")
        while self.cursor is not None and self.cursor <= now:
            self.pending.setdefault(self.cursor, [here, 0])
            self.cursor = self.schedule.next_after(self.cursor)
        return self.cursor

    def make_registered_pending(self, now: datetime, here: float) -> Optional[datetime]:
        """make_pending for a registered schedule: the instants come from
        the server, after the last one made pending (`self.cursor` here),
        or after now less the schedule's misfire grace at the start; the
        next one after `now`. None while the job has no schedule or it is
        paused (then looked at from the start again: no instant of the
        pause is ever claimed past its grace)."""
        start = self.cursor
        while True:
            nxt, grace, late = self.row(
                NEXT_DUE, (self.job, start if start is not None else now, self.job, self.job))
            # Missed instants the backfill lets run late: claimed as any due
            # run (the server decides, each once).
            for due in late or ():
                self.pending.setdefault(due.astimezone(UTC), [here, 0])
            if nxt is None:
                self.cursor = None
                if not self.unscheduled:
                    self.unscheduled = True
                    log.info("leaderlock: job %r has no schedule in the database, or it is paused: "
                             "looking again every %s s", self.job, self.poll)
                return None
            if self.unscheduled:
                self.unscheduled = False
                log.info("leaderlock: job %r: its schedule in the database is running", self.job)
            # Back one misfire grace at the first look, and never further:
            # after a change to a shorter period, the instants since the last
            # one made pending are past their grace (the server refuses them).
            back = now - timedelta(seconds=max(grace or 0.0, 0.0)) - MICROSECOND
            nxt = nxt.astimezone(UTC)
            if start is None or (nxt <= back and start < back):
                start = back
                continue
            if nxt > now:
                return nxt
            self.pending.setdefault(nxt, [here, 0])
            start = self.cursor = nxt

    def look_at(self, due: datetime) -> Union[Run, Settled, None]:
        """Tries to claim the run due at `due`: a turn, or None when it is
        to be looked at again later."""
        t = self.timing
        sent = time.monotonic()  # the deadline counts from the moment the claim is sent
        term = self.one(CLAIM_RUN, (self.job, due, self.id, t.ttl, self.misfire_grace))
        if term is not None:
            self.pending.pop(due, None)
            run = Run(self.job, self.id, due, term, sent + t.ttl - t.margin)
            run._sent = sent
            return run
        state = self.row(RUN_STATE, (self.job, due))
        here = time.monotonic()
        if state is None:
            tries = self.pending.get(due, [here, 0])[1] + 1
            if tries >= ABSENT_TRIES:
                self.pending.pop(due, None)
                return Settled(due, None)
            # refused before its row was made (its job's row taken, the
            # failover step not taken yet, or due before the retention):
            # every 20 ms FAST_TRIES times, then backing off, doubling up to
            # the poll, given up after ABSENT_TRIES (about a minute and a half)
            back = 0 if tries <= FAST_TRIES else min(tries - FAST_TRIES, 10)
            self.pending[due] = [here + min(RACE_RETRY * 2 ** back, max(self.poll, RACE_RETRY)), tries]
            return None
        finished, remaining, outcome = state
        if finished:
            self.pending.pop(due, None)
            return Settled(due, outcome)
        # claimed live by another: look again when it may have finished or
        # lapsed; no live claim: a claim raced this one
        pause = RACE_RETRY if remaining is None else min(max(remaining, 0.0), self.poll) + RACE_RETRY
        self.pending[due] = [here + pause, 0]
        return None

    def execute(self, run: Run, fn: Callable[[Run], Any]) -> None:
        """Runs `fn(run)` with renewals in a thread of their own, then
        records the outcome: succeeded when it returned while the run was
        still ours; failed when it raised (its type and message as the
        detail), or returned after the run was lost. An exception other
        than Exception's (SystemExit, KeyboardInterrupt) is recorded as a
        failure and raised again."""
        t = self.timing
        s, self.s = self.s, None
        renewer = RunRenewer(self.dsn, s, run, t, run._sent, schema=self.schema)
        renewer.start()
        _shutdown.register(run)
        log.info("leaderlock: job %r: running the run due %s, term %s", self.job, format_due(run.due), run.term)
        interrupted: Optional[BaseException] = None
        try:
            fn(run)
        except RunLost as e:
            succeeded, detail = False, detail_of(e)
            log.warning("leaderlock: job %r: the run due %s (term %s) ended with %s", self.job,
                        format_due(run.due), run.term, e)
        except Exception as e:
            succeeded, detail = False, detail_of(e)
            log.exception("leaderlock: job %r: the run due %s (term %s) raised", self.job,
                          format_due(run.due), run.term)
        except BaseException as e:
            succeeded, detail = False, truncate_utf8(f"interrupted: {detail_of(e)}")
            interrupted = e
        else:
            if run.is_ours():
                succeeded, detail = True, None
            else:
                succeeded, detail = False, truncate_utf8(
                    f"returned after the run was lost: {run.reason}" + (f" ({run.detail})" if run.detail else ""))
        finally:
            _shutdown.unregister(run)
            # over for whatever still holds the run object (threads fn started)
            run._end(LeaseLost.RELEASED, "the job's function returned")
        with _shutdown.holding_off():  # a SIGTERM meanwhile exits once this is recorded
            self.s = renewer.stop()
            self.finish(run, succeeded, detail)
        if interrupted is not None:
            raise interrupted

    def finish(self, run: Run, succeeded: bool, detail: Optional[str]) -> Optional[bool]:
        """Records the outcome (tried FINISH_TRIES times); True: recorded,
        False: refused (claimed again since), None: no answer."""
        outcome = "succeeded" if succeeded else "failed"
        recorded: Optional[bool] = None
        last: Optional[BaseException] = None
        for attempt in range(FINISH_TRIES):
            try:
                recorded = bool(self.one(FINISH_RUN, (self.job, run.due, self.id, run.term, succeeded, detail)))
                break
            except CALL_ERRORS as e:
                last = e
                refusal = self.refusal(e)
                self.drop()
                if refusal is not None:
                    if refusal is e:
                        raise
                    raise refusal from e
                if attempt + 1 < FINISH_TRIES:
                    time.sleep(self.timing.retry_every)
        due = format_due(run.due)
        extra = f" ({detail})" if detail else ""
        if recorded:
            log.log(logging.INFO if succeeded else logging.WARNING,
                    "leaderlock: job %r: the run due %s (term %s) %s%s", self.job, due, run.term, outcome, extra)
        elif recorded is False:
            log.warning("leaderlock: job %r: the run due %s (term %s) %s%s; not recorded: it was claimed "
                        "again since", self.job, due, run.term, outcome, extra)
        else:
            log.warning("leaderlock: job %r: the run due %s (term %s) %s%s; not recorded: the database did "
                        "not answer (%s)", self.job, due, run.term, outcome, extra,
                        _core.describe(last) if last else "")
        return recorded

    def loop(self, fn: Callable[[Run], Any]) -> None:
        """Runs `fn` for each run this replica claims, until `stop`."""
        try:
            while True:
                turn = self.next()
                if turn is None:
                    return
                if isinstance(turn, Run):
                    self.execute(turn, fn)
                else:  # a missed run is worth a line (each replica that sees it says so)
                    log.log(logging.INFO if turn.outcome == "missed" else logging.DEBUG,
                            "leaderlock: job %r: the run due %s was settled elsewhere: %s", self.job,
                            format_due(turn.due), turn.outcome or "gone")
        finally:
            self.drop()


def schedule_of(every: Optional[Seconds], cron: Optional[str], tz: Optional[str],
                schedule: Optional[Schedule]) -> Schedule:
    """The schedule the arguments give; none of them: the job's schedule
    kept in the database (Schedule.registered())."""
    given = [x is not None for x in (every, cron, schedule)]
    if sum(given) > 1:
        raise BadArgument("give at most one of every=, cron= and schedule= (none: the job's schedule "
                          "kept in the database)")
    if tz is not None and cron is None:
        raise BadArgument("tz= applies to cron= only")
    if not any(given):
        return Schedule.registered()
    if every is not None:
        return Schedule.every(every)
    if cron is not None:
        return Schedule.cron(cron, tz or "UTC")
    if not isinstance(schedule, Schedule):
        raise BadArgument(f"schedule must be a leaderlock.Schedule, not {schedule!r}")
    return schedule


class Scheduled:
    """A job's function with its schedule, made by `leaderlock.scheduled`
    (a registered one: the job's schedule kept in the database).
    Calling it (`job()`, or `job.run()`) runs the loop in the calling
    thread until `stop` (a threading.Event, default this object's own, set
    by `job.stop()`) is set; `job.start()` runs it in a daemon thread of
    its own. `fn` is the function. `error`: what ended a loop started with
    start() (a Rejected: retrying cannot help), else None."""

    def __init__(self, dsn: str, job: str, fn: Callable[[Run], Any], schedule: Schedule, *,
                 ttl: Seconds = 10.0, misfire_grace: Optional[Seconds] = None, id: Optional[str] = None,
                 schema: Optional[str] = None):
        if not callable(fn):
            raise BadArgument(f"the job's function must be callable, not {fn!r}")
        self.fn, self.schedule = fn, schedule
        self.dsn, self.job, self.ttl, self.misfire_grace = dsn, job, ttl, misfire_grace
        self.id = _core.check_name("id", id) if id is not None else _core.default_id()
        self.schema = _core.schema_option(schema)
        Scheduler(dsn, job, schedule, ttl=ttl, misfire_grace=misfire_grace, id=self.id,
                  schema=self.schema)  # BadArgument now
        self.stopping = threading.Event()
        self.error: Optional[BaseException] = None
        self._thread: Optional[threading.Thread] = None

    def __repr__(self) -> str:
        return f"<leaderlock.Scheduled {self.job!r} {self.schedule!r} id={self.id!r}>"

    def run(self, stop: Optional[threading.Event] = None) -> None:
        """Runs each due run this replica claims, in this thread, until
        `stop` (default: this object's, see stop()) is set; a run under
        way goes on to its end and its outcome is recorded first."""
        Scheduler(self.dsn, self.job, self.schedule, ttl=self.ttl, misfire_grace=self.misfire_grace,
                  id=self.id, stop=stop if stop is not None else self.stopping, schema=self.schema).loop(self.fn)

    __call__ = run

    def start(self) -> threading.Thread:
        """Runs the loop in a daemon thread; stop() ends it."""
        def body() -> None:
            try:
                self.run()
            except Exception as e:
                self.error = e
                log.error("leaderlock: job %r: the scheduled loop ended: %s", self.job, _core.describe(e))
        self._thread = threading.Thread(target=body, name=f"leaderlock scheduled {self.job}", daemon=True)
        self._thread.start()
        return self._thread

    def stop(self, timeout: Optional[float] = None) -> None:
        """No run is claimed any more; waits (up to `timeout`) for the run
        under way, if any, to end and its outcome to be recorded."""
        self.stopping.set()
        self.join(timeout)

    def join(self, timeout: Optional[float] = None) -> None:
        th = self._thread
        if th is not None and th is not threading.current_thread():
            th.join(timeout)


def run_scheduled(dsn: str, job: str, fn: Callable[[Run], Any], *, every: Optional[Seconds] = None,
                  cron: Optional[str] = None, tz: Optional[str] = None, schedule: Optional[Schedule] = None,
                  ttl: Seconds = 10.0, misfire_grace: Optional[Seconds] = None, id: Optional[str] = None,
                  stop: Optional[threading.Event] = None, schema: Optional[str] = None) -> None:
    """Calls `fn(run)` once per due instant of the schedule, on one replica
    among all that run the same job; blocks until `stop` is set. Neither
    `every` nor `cron` (nor `schedule`): the job's schedule kept in the
    database (`le_schedule`), read every poll (1 s), so a change or a pause
    is followed without a restart; its misfire grace counts (misfire_grace
    is refused then). schema: leaderlock's schema (default:
    LEADERLOCK_SCHEMA, else the one schema that holds it, looked up on each
    connection)."""
    Scheduled(dsn, job, fn, schedule_of(every, cron, tz, schedule), ttl=ttl, misfire_grace=misfire_grace,
              id=id, schema=schema).run(stop if stop is not None else threading.Event())


def scheduled(dsn: str, job: str, *, every: Optional[Seconds] = None, cron: Optional[str] = None,
              tz: Optional[str] = None, schedule: Optional[Schedule] = None, ttl: Seconds = 10.0,
              misfire_grace: Optional[Seconds] = None, id: Optional[str] = None,
              schema: Optional[str] = None) -> Callable[[Callable[[Run], Any]], Scheduled]:
    """Decorator: `@leaderlock.scheduled(dsn, "nightly", cron="0 3 * * *")`
    over `def nightly(run): ...` makes `nightly` a Scheduled: `nightly()`
    runs the loop (blocking), `nightly.start()` in a thread. Neither
    `every` nor `cron`: `@leaderlock.scheduled(dsn, "nightly")` runs the
    job's schedule kept in the database (as run_scheduled). schema: as
    run_scheduled's."""
    sched = schedule_of(every, cron, tz, schedule)

    def decorate(fn: Callable[[Run], Any]) -> Scheduled:
        return Scheduled(dsn, job, fn, sched, ttl=ttl, misfire_grace=misfire_grace, id=id, schema=schema)
    return decorate
