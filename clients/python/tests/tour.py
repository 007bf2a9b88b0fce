"""The Python client's tour (tests/clients/tours.py, run by
tests/clients/hostile.py against a database set against its clients):
through the library's public API, every statement the library has, the
sync and the asyncio halves and the Elector, each answer checked.

    python tour.py DSN PREFIX [--pooled]

DSN: a URL; PREFIX: what every key and job starts with; --pooled: the DSN
goes through pgbouncer in transaction pooling (notifications do not come
back there; the library polls). LEADERLOCK_SCHEMA, when set, names the
schema of leaderlock (the portable edition installed by its script).

The tour's own statements (a rival's lease, a row held share-locked, the
checks) are qualified as the library's are. psycopg's Connection.execute
and AsyncConnection.execute are wrapped to record what the library sends
(the tour's own statements go through cursors, not recorded), so the end
says which statement constants of the library no step reached, and why.
Exits 1 at the first unexpected answer, with what was expected.
"""
import asyncio
import logging
import os
import re
import sys
import threading
import time
import traceback

import psycopg

import leaderlock
from leaderlock import _core, _group, _history, _schedule, _session

if len(sys.argv) < 3 or sys.argv[3:] not in ([], ["--pooled"]):
    sys.exit("usage: tour.py DSN PREFIX [--pooled]")
DSN, PREFIX, POOLED = sys.argv[1], sys.argv[2], sys.argv[3:] == ["--pooled"]
NAMED = os.environ.get("LEADERLOCK_SCHEMA") or None
HAS_SCHEMA_OPTION = "schema" in leaderlock.lead.__code__.co_varnames
LIMIT = 90.0  # seconds: the whole tour
# Which edition the database has (tests/clients/tours.py): the portable one
# keeps no schedules in the database.
PORTABLE = os.environ.get("LEADERLOCK_TOUR_EDITION") == "portable"
X = ""  # leaderlock's schema, quoted (the tour's lookup)

# The library's own lookup (docs/clients.md), for the tour's own statements.
SCHEMA_OF = _core.SCHEMA_OF

# What the library sends, recorded.
SENT: list = []
_sent_lock = threading.Lock()


def _record(cls):
    original = cls.execute
    if asyncio.iscoroutinefunction(original):
        async def execute(self, query, *args, **kwargs):
            with _sent_lock:
                SENT.append(str(query))
            return await original(self, query, *args, **kwargs)
    else:
        def execute(self, query, *args, **kwargs):
            with _sent_lock:
                SENT.append(str(query))
            return original(self, query, *args, **kwargs)
    cls.execute = execute


_record(psycopg.Connection)
_record(psycopg.AsyncConnection)


def constants():
    """Every statement constant of the library, by name."""
    found = {}
    for mod in (_core, _session, _schedule, _history, _group):
        short = mod.__name__.rsplit(".", 1)[-1]
        for name, value in vars(mod).items():
            if name.isupper() and isinstance(value, str) and re.match(r"\s*(SELECT|LISTEN|UNLISTEN)\b", value):
                found[f"{short}.{name}"] = value
    for plain, legacy in _core.LEGACY.items():
        name = next(n for n, v in found.items() if v == plain and n.startswith("_core."))
        found[f"_core.LEGACY[{name.split('.')[1]}]"] = legacy
    return found


def sent_count(statement):
    """How many times the library sent `statement` (a constant)."""
    bound = statement.replace("@extschema@", X)
    with _sent_lock:
        return sum(1 for q in SENT if q == statement or q == bound)


class Failed(Exception):
    pass


def check(ok, what):
    if not ok:
        raise Failed(what)


def step(name):
    print(f"- {name}", flush=True)


# The tour's own connection and statements.

def connect(autocommit=True):
    c = psycopg.connect(DSN, autocommit=autocommit)
    c.prepare_threshold = None  # nothing prepared (transaction pooling)
    return c


def own(sql, args=()):
    """The first row of the tour's own statement (None: none)."""
    with connect() as c, c.cursor() as cur:
        cur.execute(sql, args)
        return cur.fetchone() if cur.description else None


def one(sql, args=()):
    row = own(sql, args)
    return row[0] if row else None


def leader(key):
    return one(f"SELECT {X}.le_leader(key => %s)", (key,))


def lease_row(key):
    """(holder, term, value ->> 'at', expires_at) of `key`."""
    return own(f"SELECT holder, term, value OPERATOR(pg_catalog.->>) 'at', expires_at "
               f"FROM {X}.le_lease(key => %s)", (key,))


def hold_row(key, id, term, seconds, ready):
    """The lease's row share-locked (le_assert_leader in a transaction) for
    `seconds`: renewals and releases meet it locked."""
    with connect(autocommit=False) as c:
        with c.cursor() as cur:
            cur.execute(f"SELECT {X}.le_assert_leader(key => %s, id => %s, term => %s::bigint)", (key, id, term))
        ready.set()
        time.sleep(seconds)
        c.rollback()


def holding(key, id, term, seconds):
    """Starts hold_row in a thread; returns it once the row is locked."""
    ready = threading.Event()
    t = threading.Thread(target=hold_row, args=(key, id, term, seconds, ready), daemon=True)
    t.start()
    check(ready.wait(5), "the tour could not lock the lease's row")
    return t


def expect(exc, fn, what):
    """fn() raises `exc`: the exception."""
    try:
        fn()
    except exc as e:
        return e
    raise Failed(f"{what}: {exc.__name__} expected, nothing raised")


def schema_kw(value):
    return {"schema": value} if HAS_SCHEMA_OPTION else {}


# The steps.

def sync_lead():
    step("sync lead: acquire with a value, its term, guard, renew")
    k = f"{PREFIX}/sync"
    with leaderlock.lead(DSN, k, ttl=2, timeout=5, value={"at": "tour"}) as lease:
        holder, term, at, expires = lease_row(k)
        check((holder, term, at) == (lease.id, lease.term, "tour"),
              f"the server's lease {holder!r}, {term}, {at!r} is not the client's {lease.id!r}, {lease.term}")
        with connect() as c:
            with c.transaction():
                check(lease.guard(c) == lease.term, "guard did not return the term")
        time.sleep(0.9)  # a renewal every ttl/3
        check(lease_row(k)[3] > expires, "no renewal moved expires_at")
        lease.check()

        step("sync lead: a renewal meets the row share-locked, asks whether still ours, goes on")
        asked = sent_count(_core.HOLDER_OF)
        t = holding(k, lease.id, lease.term, 0.9)
        locked_at = lease_row(k)[3]
        t.join()
        check(sent_count(_core.HOLDER_OF) > asked, "no renewal was refused while the row was locked")
        lease.check()
        time.sleep(0.8)
        check(lease_row(k)[3] > locked_at, "no renewal after the row was unlocked")
        lease.check()

        step("sync lead: another candidate times out (NotAcquired names the holder)")
        e = expect(leaderlock.NotAcquired, lambda: _enter(leaderlock.lead(DSN, k, ttl=2, timeout=0.3)),
                   "a second candidate")
        check(e.holder == lease.id, f"NotAcquired names {e.holder!r}, not {lease.id!r}")
    step("sync lead: released at the end of the block")
    check(leader(k) is None, "still held after the block")

    step("sync lead: guard after the lease was released elsewhere: LeaseLost not_leader (LE001)")
    k2 = f"{PREFIX}/sync-le001"
    with leaderlock.lead(DSN, k2, ttl=2, timeout=5) as lease:
        check(one(f"SELECT {X}.le_release(key => %s, id => %s, term => %s::bigint)",
                  (k2, lease.id, lease.term)) is True, "the tour could not release the lease")
        with connect() as c:
            with c.transaction():
                e = expect(leaderlock.LeaseLost, lambda: lease.guard(c), "guard of a released lease")
                raise psycopg.Rollback()
        check(e.reason == leaderlock.LeaseLost.NOT_LEADER, f"reason {e.reason!r}")


def _enter(leadership):
    with leadership:
        raise Failed("led while another held the key")


def unanswered_release():
    """A release that heard no answer is sent again before the next try; met
    locked, the client asks whether the tenure is still held (HOLDS)."""
    if POOLED:
        return "pooled: the tour cannot cut the library's server connection behind pgbouncer"
    step("sync lead: a release that heard no answer, sent again before the next try")
    k, me = f"{PREFIX}/unanswered", f"{PREFIX}-me"
    logging.getLogger("leaderlock").setLevel(logging.ERROR)  # the warning of the release not heard
    try:
        with leaderlock.lead(DSN, k, ttl=3, timeout=5, id=me) as lease:
            term = lease.term
            cut = one("SELECT pg_catalog.count(*) FILTER (WHERE pg_catalog.pg_terminate_backend(pid)) "
                      "FROM pg_catalog.pg_stat_activity "
                      "WHERE application_name OPERATOR(pg_catalog.=) 'leaderlock python' "
                      "AND datname OPERATOR(pg_catalog.=) pg_catalog.current_database() "
                      "AND usename OPERATOR(pg_catalog.=) CURRENT_USER")
            check(cut >= 1, "the tour found no connection of the library to cut")
    finally:
        logging.getLogger("leaderlock").setLevel(logging.WARNING)
    if leader(k) != me:
        return "the release at the end of the block got through (a renewal had reconnected first)"
    t = holding(k, me, term, 1.2)
    holds = sent_count(_core.HOLDS)
    e = expect(leaderlock.NotAcquired, lambda: _enter(leaderlock.lead(DSN, k, ttl=3, timeout=0.5, id=me)),
               "a try while the release sent again met the row locked")
    check(e.holder == me, f"NotAcquired names {e.holder!r}")
    check(sent_count(_core.HOLDS) > holds, "HOLDS was not asked")
    t.join()
    with leaderlock.lead(DSN, k, ttl=3, timeout=5, id=me) as again:
        check(again.term > term, f"term {again.term} after {term}: the old tenure was not released first")
    check(leader(k) is None, "still held")
    return None


def slots_differ():
    step("sync lead: a key held with other slots (a rival with 3): a refusal, NotAcquired at the timeout")
    k = f"{PREFIX}/slots"
    check(one(f"SELECT {X}.le_try_acquire(key => %s, id => 'rival', ttl => pg_catalog.make_interval(secs => 5), "
              "slots => 3)", (k,)) is True, "the rival could not take its slot")
    try:
        logging.getLogger("leaderlock").setLevel(logging.ERROR)
        expect(leaderlock.NotAcquired, lambda: _enter(leaderlock.lead(DSN, k, ttl=2, timeout=0.4)),
               "a candidate for a key held with 3 slots")
    finally:
        logging.getLogger("leaderlock").setLevel(logging.WARNING)
        own(f"SELECT {X}.le_release(key => %s, id => 'rival')", (k,))


async def async_lead():
    step("async lead: acquire with a value, its term, aguard, renew, the row share-locked")
    k = f"{PREFIX}/async"
    async with leaderlock.lead(DSN, k, ttl=2, timeout=5, value={"at": "async"}) as lease:
        holder, term, at, expires = lease_row(k)
        check((holder, term, at) == (lease.id, lease.term, "async"), f"the server's lease {holder!r}, {term}, {at!r}")
        aconn = await psycopg.AsyncConnection.connect(DSN, autocommit=True)
        aconn.prepare_threshold = None
        try:
            async with aconn.transaction():
                check(await lease.aguard(aconn) == lease.term, "aguard did not return the term")
        finally:
            await aconn.close()
        await asyncio.sleep(0.9)
        check(lease_row(k)[3] > expires, "no renewal moved expires_at")
        asked = sent_count(_core.HOLDER_OF)
        t = holding(k, lease.id, lease.term, 0.9)
        await asyncio.to_thread(t.join)
        check(sent_count(_core.HOLDER_OF) > asked, "no renewal was refused while the row was locked")
        lease.check()

        step("async lead: another candidate times out (NotAcquired names the holder)")
        try:
            async with leaderlock.lead(DSN, k, ttl=2, timeout=0.3):
                raise Failed("led while another held the key")
        except leaderlock.NotAcquired as e:
            check(e.holder == lease.id, f"NotAcquired names {e.holder!r}")
        lease.check()
    check(leader(k) is None, "still held after the block")

    step("async lead: aguard after the lease was released elsewhere: LeaseLost not_leader")
    k2 = f"{PREFIX}/async-le001"
    try:
        async with leaderlock.lead(DSN, k2, ttl=2, timeout=5) as lease:
            own(f"SELECT {X}.le_release(key => %s, id => %s, term => %s::bigint)", (k2, lease.id, lease.term))
            aconn = await psycopg.AsyncConnection.connect(DSN, autocommit=True)
            aconn.prepare_threshold = None
            try:
                async with aconn.transaction():
                    await lease.aguard(aconn)
            finally:
                await aconn.close()
        raise Failed("aguard of a released lease raised nothing")
    except leaderlock.LeaseLost as e:
        check(e.reason == leaderlock.LeaseLost.NOT_LEADER, f"reason {e.reason!r}")


def elector():
    step("elector: a follower sees the holder, leads once released, work guards, resigns")
    k = f"{PREFIX}/elector"
    seen, stopped = [], []
    started, resigned = threading.Event(), threading.Event()
    guarded = []

    def work(lease):
        with connect() as c:
            with c.transaction():
                guarded.append(lease.guard(c))
        lease.lost.wait(0.8)  # a renewal meanwhile

    def on_stopped(lease, reason):
        stopped.append(reason)
        resigned.set()
    e = None
    with leaderlock.lead(DSN, k, ttl=3, timeout=5, id="tour-holder"):
        e = leaderlock.Elector(DSN, k, ttl=2, poll=0.2, work=work, on_new_leader=seen.append,
                               on_started=lambda lease: started.set(), on_stopped=on_stopped,
                               on_failed=lambda err: resigned.set())
        e.start()
        deadline = time.monotonic() + 5
        while "tour-holder" not in seen and time.monotonic() < deadline and e.error is None:
            time.sleep(0.05)
        check("tour-holder" in seen, f"the elector did not see the holder (saw {seen}, error {e.error!r})")
    try:
        check(started.wait(5), f"the elector did not lead after the release (error {e.error!r})")
        check(resigned.wait(5), "the elector's tenure did not end after work returned")
        check(e.error is None, f"the elector failed: {e.error!r}")
        check(stopped[0] == leaderlock.LeaseLost.RESIGNED, f"stopped with {stopped}")
        check(len(guarded) == 1, "work did not guard")
    finally:
        e.stop(5)
    check(leader(k) is None, "still held after stop()")


def sessions():
    step("session: open, try_acquire with a value, acquire with a priority, terms, refusals")
    ka, kb, kc = (f"{PREFIX}/s/{c}" for c in "abc")
    with leaderlock.session(DSN, ttl=2) as s:
        la = s.try_acquire(ka, value={"at": "a"})
        check(isinstance(la, leaderlock.SessionLease), f"try_acquire gave {la!r}")
        holder, term, at, _ = lease_row(ka)
        check((holder, term, at) == (s.id, la.term, "a"), f"the server's lease of a: {holder!r}, {term}, {at!r}")
        # priorities: the compiled edition's (the portable one refuses them, 0A000)
        compiled = one(f"SELECT {X}.le_capabilities() OPERATOR(pg_catalog.->>) 'edition'") == "compiled"
        lb = s.acquire(kb, 1.0, priority=5 if compiled else 0)
        check(lease_row(kb)[:2] == (s.id, lb.term), "the server's lease of b is not the session's")
        with leaderlock.lead(DSN, kc, ttl=3, timeout=5) as other:
            check(s.try_acquire(kc) is None, "try_acquire took a held key")
            e = expect(leaderlock.NotAcquired, lambda: s.acquire(kc, 0.3, priority=1 if compiled else 0),
                       "acquire of a held key")
            check(e.holder == other.id, f"NotAcquired names {e.holder!r}")
        step("session: renewed, guard, release one key, close")
        time.sleep(0.9)  # a renewal of the session every ttl/3
        check(sent_count(_session.RENEW_SESSION) >= 1, "the session was not renewed")
        la.check()
        with connect() as c:
            with c.transaction():
                check(la.guard(c) == la.term, "guard did not return the key's term")
        check(la.release() is True, "release of a key was refused")
        check(leader(ka) is None and leader(kb) == s.id, "a released, b held: not so on the server")
        check(s.close() is True, "close was refused")
    check(leader(kb) is None, "b still held after the close")


def scheduled_runs():
    step("scheduled runs: two replicas claim, renew, finish; the other reads the run's state; "
         "a run finished elsewhere is lost")
    job = f"{PREFIX}/job"
    lock, runs, done = threading.Lock(), [], threading.Event()

    def fn(run):
        with lock:
            runs.append(run)
            n = len(runs)
        if n == 1:
            time.sleep(0.7)  # a renewal every ttl/3
            run.check()
        elif n == 2:
            # finished elsewhere: its next renewal is refused, the client asks the run's holder
            own(f"SELECT {X}.le_finish_run(job => %s, due => %s, id => %s, term => %s::bigint, succeeded => true, "
                "detail => NULL::pg_catalog.text)", (run.job, run.due, run.id, run.term))
            run.lost.wait(2)
            done.set()
    replicas = [leaderlock.scheduled(DSN, job, every=1, ttl=1.5, id=f"{PREFIX}-{r}")(fn) for r in "ab"]
    for r in replicas:
        r.start()
    try:
        check(done.wait(8), f"two runs did not happen in 8 s ({len(runs)}; errors "
                            f"{[r.error for r in replicas]})")
    finally:
        for r in replicas:
            r.stop(5)
    check(all(r.error is None for r in replicas), f"a loop ended: {[r.error for r in replicas]}")
    first, second = runs[0], runs[1]
    check(sent_count(_schedule.RENEW_RUN) >= 1, "the first run was not renewed")
    outcome = one(f"SELECT outcome FROM {X}.leaderlock_runs WHERE job OPERATOR(pg_catalog.=) %s "
                  "AND due OPERATOR(pg_catalog.=) %s", (job, first.due))
    check(outcome == "succeeded", f"the first run's outcome: {outcome!r}")
    check(second.reason == leaderlock.LeaseLost.VACATED and "finished" in (second.detail or ""),
          f"the run finished elsewhere: {second.reason!r} ({second.detail!r})")
    check(sent_count(_schedule.RUN_STATE) >= 1, "no replica read the state of a run the other claimed")


def group():
    """A group's two members (contract 26): the second gets its share once
    the first gives back what was revoked; the guard; both leave (both
    editions)."""
    step("groups: two members share a group's partitions, the guard, both leave")
    name = f"{PREFIX}/group"
    a = leaderlock.member(DSN, name, f"{PREFIX}-a", ttl=1.5, partitions=4, drain=0.5, schema=NAMED)
    b = leaderlock.member(DSN, name, f"{PREFIX}-b", ttl=1.5, schema=NAMED)
    with a:
        check(sorted(a.owned()) == [1, 2, 3, 4], f"the first member owns {a.owned()}")
        with b:
            deadline = time.monotonic() + 8
            while time.monotonic() < deadline and len(b.owned()) < 2:
                time.sleep(0.05)
            check(len(b.owned()) == 2 and len(a.owned()) == 2, f"shares {a.owned()} and {b.owned()}")
            partition = sorted(b.owned())[0]
            with connect() as c, c.transaction():
                check(b.guard(c, partition) == b.owns(partition), "the guard's term")
    check(sent_count(_group.ACK) >= 2, "no revoked partition was given back")
    return None


def registered_runs():
    """A job run by its name alone: its schedule kept in the database (NEXT_DUE)."""
    if PORTABLE:
        return "the portable edition keeps no schedules in the database"
    step("scheduled runs: a job run by its name alone follows its schedule kept in the database")
    job = f"{PREFIX}/registered"
    one(f"SELECT {X}.le_schedule(job => %s, every => pg_catalog.make_interval(secs => 1))", (job,))
    runs, done = [], threading.Event()

    def fn(run):
        run.check()
        runs.append(run)
        done.set()
    replica = leaderlock.scheduled(DSN, job, ttl=1.5, id=f"{PREFIX}-reg")(fn)
    replica.start()
    try:
        check(done.wait(5), f"no run of the registered schedule in 5 s (error {replica.error!r})")
    finally:
        replica.stop(5)
        one(f"SELECT {X}.le_unschedule(job => %s)", (job,))
    check(replica.error is None, f"the loop ended: {replica.error!r}")
    check(runs[0].due.microsecond == 0, f"a run due {runs[0].due}, not at a whole second")
    outcome = one(f"SELECT outcome FROM {X}.leaderlock_runs WHERE job OPERATOR(pg_catalog.=) %s "
                  "AND due OPERATOR(pg_catalog.=) %s", (job, runs[0].due))
    check(outcome == "succeeded", f"the registered run's outcome: {outcome!r}")
    check(sent_count(_schedule.NEXT_DUE) >= 2, "NEXT_DUE was not asked")
    return None


def history():
    step("history: watch from the position, a lease's transitions in order, resume after a position")
    prefix = f"{PREFIX}/h/"
    k = f"{prefix}1"
    w = leaderlock.watch(DSN, key_prefix=prefix, poll=0.2)
    try:
        check(w.next(0.3) is None, "a transition before any")
        start = w.position
        check(isinstance(start, int), f"no position after the first read: {start!r}")
        with leaderlock.lead(DSN, k, ttl=2, timeout=5):
            pass
        got = []
        deadline = time.monotonic() + 5
        while len(got) < 2 and time.monotonic() < deadline:
            t = w.next(max(0.0, deadline - time.monotonic()))
            if t is not None:
                got.append(t)
        check([(t.event, t.key) for t in got] == [("acquired", k), ("released", k)],
              f"transitions: {[(t.event, t.key) for t in got]}")
        check(got[0].position < got[1].position <= w.position, "positions out of order")
    finally:
        w.close()
    with leaderlock.watch(DSN, since=start, key=k, poll=0.2) as again:
        resumed = [again.next(3), again.next(3)]
    check([t and t.position for t in resumed] == [t.position for t in got],
          f"resumed after {start}: {resumed}")

    step("history: the same with async for")

    async def follow():
        seen = []
        async with leaderlock.watch(DSN, since=start, key_prefix=prefix, poll=0.2) as aw:
            async for t in aw:
                seen.append(t)
                if len(seen) == 2:
                    break
        return seen
    seen = asyncio.run(asyncio.wait_for(follow(), 5))
    check([t.position for t in seen] == [t.position for t in got], f"async: {seen}")


def errors():
    if not HAS_SCHEMA_OPTION:
        return "the library has no schema option"
    step("errors: a schema that does not hold leaderlock: NotInstalled naming it, in every shape")
    nowhere = "ll_tour_no_such_schema"
    k = f"{PREFIX}/err"
    e = expect(leaderlock.NotInstalled, lambda: _enter(leaderlock.lead(DSN, k, timeout=1, schema=nowhere)), "lead")
    check(nowhere in str(e), f"the message does not name the schema: {e}")

    async def alead():
        async with leaderlock.lead(DSN, k, timeout=1, schema=nowhere):
            raise Failed("led")
    expect(leaderlock.NotInstalled, lambda: asyncio.run(alead()), "async lead")
    expect(leaderlock.NotInstalled, lambda: leaderlock.session(DSN, schema=nowhere).open(), "session")
    with leaderlock.watch(DSN, schema=nowhere) as w:
        expect(leaderlock.NotInstalled, lambda: w.next(1), "watch")
    if NAMED is not None:
        step(f"errors: without LEADERLOCK_SCHEMA (={NAMED}), several schemas hold leaderlock's functions")
        os.environ.pop("LEADERLOCK_SCHEMA")
        try:
            rows = own_all(SCHEMA_OF, {"schema": None})
            spec = leaderlock.lead(DSN, k, timeout=1)
        finally:
            os.environ["LEADERLOCK_SCHEMA"] = NAMED
        if len(rows) > 1:
            e = expect(leaderlock.BadArgument, lambda: _enter(spec), "lead without the schema named")
            check("several schemas" in str(e), f"not the several-schemas error: {e}")
            print(f"  ({e})")
        else:
            print(f"  (only {rows} holds it: nothing to refuse)")
    return None


def own_all(sql, args):
    with connect() as c, c.cursor() as cur:
        cur.execute(sql, args)
        return [r[0] for r in cur.fetchall()]


# Why a statement may go unreached here.
WHY = {
    "_core.LEGACY[RENEW]": "only on a schema before 0.5.0 (le_renew without term)",
    "_core.LEGACY[RELEASE]": "only on a schema before 0.5.0 (le_release without term)",
    "_core.WORKER_RUNNING": "only on a schema before 0.5.0 (no le_capabilities)",
    "_schedule.HAS_RUNS": "only after a 42883 on le_claim_run (a schema before 0.5.0)",
    "_history.HAS_HISTORY": "only after a 42883 on le_history (a schema before 0.5.0)",
}
NO_WORKER = ("_core.EXPIRE_LAPSED", "_history.NUMBER", "_history.LISTEN_CHANGES")


def main():
    global X
    logging.basicConfig(level=logging.WARNING, stream=sys.stdout, format="  log: %(levelname)s %(message)s")
    threading.Timer(LIMIT, lambda: (print(f"FAILED: the tour took more than {LIMIT} s", flush=True),
                                    os._exit(1))).start()
    rows = own_all(SCHEMA_OF, {"schema": NAMED})
    check(len(rows) == 1, f"the tour's lookup of leaderlock's schema found {rows}")
    X = rows[0]
    print(f"python tour: {DSN} prefix {PREFIX}{' (pooled)' if POOLED else ''}, leaderlock in {X}"
          f"{'' if HAS_SCHEMA_OPTION else ' (the library has no schema option)'}", flush=True)
    t0 = time.monotonic()
    skipped = {}
    sync_lead()
    why = unanswered_release()
    if why:
        skipped["_core.HOLDS"] = why
    slots_differ()
    asyncio.run(async_lead())
    elector()
    sessions()
    scheduled_runs()
    why = registered_runs()
    if why:
        skipped["_schedule.NEXT_DUE"] = why
        print(f"- scheduled runs by name alone: skipped ({why})")
    history()
    why = group()
    if why:
        for name in ("JOIN", "ASSIGNMENT", "ACK", "LEAVE", "GUARD"):
            skipped[f"_group.{name}"] = why
        print(f"- groups: skipped ({why})")
    why = errors()
    if why:
        print(f"- errors: skipped ({why})")
    worker = one(f"SELECT coalesce(({X}.le_capabilities() OPERATOR(pg_catalog.->>) 'worker')::boolean, true)")
    print(f"done in {time.monotonic() - t0:.1f} s; {len(SENT)} statements sent by the library", flush=True)
    unexpected = []
    for name, statement in constants().items():
        if sent_count(statement):
            continue
        why = skipped.get(name) or WHY.get(name)
        if why is None and name in NO_WORKER and worker:
            why = "only where no worker numbers the history and expires leases (portable edition)"
        if why is None:
            unexpected.append(name)
            why = "NOT REACHED, unexpectedly"
        print(f"not reached: {name}: {why}")
    check(not unexpected, f"statements not reached: {unexpected}")


if __name__ == "__main__":
    try:
        main()
    except Failed as e:
        print(f"FAILED: {e}", flush=True)
        traceback.print_exc(file=sys.stdout)
        os._exit(1)
    except BaseException:
        print("FAILED: an unexpected error", flush=True)
        traceback.print_exc(file=sys.stdout)
        os._exit(1)
    print("ok", flush=True)
    os._exit(0)
