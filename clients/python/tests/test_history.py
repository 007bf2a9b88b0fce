"""The history of transitions (contract 23) in the Python client, against a
real server (LEADERLOCK_DSN, a superuser's, whose database a worker serves):

- chaos: a watcher (filtered by a key prefix of its own) follows about
  200 transitions of a few keys (acquired and released, some expiring)
  made over ~7 s while its backend is terminated 10 times; it delivers
  exactly the positions le_history holds for that prefix, once each, in
  order, each key's terms never going down;
- since=P: a second watcher from a position the first one delivered gets
  exactly the rest; the same from asyncio (async for);
- a position the retention pruned raises HistoryPruned (LE002), and the
  watcher stays ended;
- an argument the server refuses raises BadArgument at once; close()
  from another thread ends a blocking `for`.
"""
import asyncio
import contextlib
import threading
import time
import unittest
import uuid
from unittest import mock

import psycopg
from psycopg.conninfo import make_conninfo

import leaderlock
from leaderlock import _history

from support import DSN, sql, wait


def numbered(prefix):
    """Whether every transition of keys starting with `prefix` has its
    position (where no worker serves, le_expire_lapsed numbers them)."""
    sql("SELECT le_expire_lapsed()")
    return not sql("SELECT EXISTS (SELECT FROM leaderlock_history_pending WHERE starts_with(key, %s))",
                   (prefix,))


def positions(after, prefix):
    """The positions le_history holds after `after` for keys starting with `prefix`."""
    with psycopg.connect(DSN, autocommit=True) as c:
        return [r[0] for r in c.execute("SELECT \"position\" FROM le_history(%s::bigint, key_prefix => %s, "
                                        "max_rows => 100000)", (after, prefix))]


def churn(prefix, cycles, every=0.0):
    """`cycles` acquisitions of the keys prefix0..3 in turn, each released
    at once (two transitions), or every fifth left to expire (ttl 0.2 s);
    then, once those expired, one last release of each key."""
    keys = [f"{prefix}{i}" for i in range(4)]
    with psycopg.connect(DSN, autocommit=True) as c:
        for i in range(cycles):
            k, h = keys[i % 4], f"h{i}"
            if i % 5 == 0:
                c.execute("SELECT le_try_acquire(%s, %s, '200 ms')", (k, h))
            elif c.execute("SELECT le_try_acquire(%s, %s, '10 s')", (k, h)).fetchone()[0]:
                c.execute("SELECT le_release(%s, %s)", (k, h))
            time.sleep(every)
        time.sleep(0.4)  # the short ones lapsed: these take them over (expired, acquired, released)
        for k in keys:
            if c.execute("SELECT le_try_acquire(%s, 'last', '10 s')", (k,)).fetchone()[0]:
                c.execute("SELECT le_release(%s, 'last')", (k,))


def settled(prefix, after):
    """The positions of `prefix`'s transitions after `after`, once all are numbered."""
    assert wait(lambda: numbered(prefix), 5.0), "the worker did not number the transitions"
    return positions(after, prefix)


@contextlib.contextmanager
def unpruned(start):
    """The body, whose transitions are after `start`: when it fails with the
    history pruned past `start` meanwhile (another client's test of the
    retention on a shared server sets leaderlock.history_max_rows), a skip
    that says so rather than a failure of this client."""
    try:
        yield
    except Exception as e:
        pruned = sql("SELECT pruned_through FROM leaderlock_history_head")
        if pruned > start:
            raise unittest.SkipTest(f"the history was pruned through {pruned}, past this test's start "
                                    f"{start}, by another client meanwhile ({type(e).__name__}: {e})") from e
        raise


class HistoryTest(unittest.TestCase):
    def setUp(self):
        self.prefix = f"pyh-{self._testMethodName}-{uuid.uuid4().hex[:8]}/"

    def test_chaos_every_transition_once_in_order_through_terminated_backends(self):
        floor = sql("SELECT le_history_position()")
        with unpruned(floor):
            began = time.monotonic()
            name = f"leaderlock watch {uuid.uuid4().hex[:8]}"
            w = leaderlock.watch(make_conninfo(DSN, application_name=name), key_prefix=self.prefix)
            self.addCleanup(w.close)
            got, failure = [], []

            def follow():
                try:
                    for t in w:
                        got.append(t)
                except BaseException as e:  # the test reports it
                    failure.append(e)
            follower = threading.Thread(target=follow, daemon=True)
            follower.start()
            self.assertTrue(wait(lambda: w.position is not None, 5.0), "the watcher did not connect")
            start = w.position

            maker = threading.Thread(target=churn, args=(self.prefix, 100, 0.065), daemon=True)
            maker.start()
            killed = []
            with psycopg.connect(DSN, autocommit=True) as admin:
                for _ in range(10):
                    time.sleep(0.6)
                    pid = None
                    deadline = time.monotonic() + 3.0
                    while pid is None and time.monotonic() < deadline:  # its connection now, a new one each time
                        row = admin.execute("SELECT pid FROM pg_stat_activity WHERE application_name = %s "
                                            "AND NOT (pid = ANY (%s)) ORDER BY backend_start DESC LIMIT 1",
                                            (name, killed)).fetchone()
                        pid = row[0] if row else time.sleep(0.01)
                    self.assertIsNotNone(pid, "the watcher did not connect again")
                    self.assertTrue(admin.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone()[0])
                    killed.append(pid)
            maker.join(10.0)
            self.assertFalse(maker.is_alive())

            expected = settled(self.prefix, start)
            # About 190 where each call answers at once; fewer where the
            # machine is busy (a short lease still held when its key comes
            # round again): enough that the ten terminations fall among them.
            self.assertGreaterEqual(len(expected), 100)
            # (its position may pass the prefix's last: after a short page it
            # moves up to the last numbered, other tests' transitions too)
            self.assertTrue(wait(lambda: (w.position or 0) >= expected[-1] or failure, 5.0),
                            f"the watcher stopped at {w.position}, the last is {expected[-1]}")
            w.close()
            follower.join(2.0)
            self.assertFalse(follower.is_alive(), "close() did not end the `for`")
            self.assertEqual(failure, [])

            delivered = [t.position for t in got]
            self.assertEqual(len(delivered), len(set(delivered)), "a transition was delivered twice")
            self.assertTrue(all(a < b for a, b in zip(delivered, delivered[1:])), "out of order")
            self.assertEqual(delivered, expected)
            self.assertGreaterEqual(w.position, expected[-1])
            terms = {}
            for t in got:
                self.assertTrue(t.key.startswith(self.prefix))
                self.assertGreaterEqual(t.term, terms.get(t.key, 0), f"{t.key}: term went down at {t.position}")
                terms[t.key] = t.term
            events = {t.event for t in got}
            self.assertTrue({"acquired", "released", "expired"} <= events, events)
            self.assertGreaterEqual(w.reconnects, 10)
            self.assertLess(time.monotonic() - began, 15.0)

    def test_since_resumes_after_a_saved_position(self):
        start = sql("SELECT le_history_position()")
        with unpruned(start):
            churn(self.prefix, 12)
            expected = settled(self.prefix, start)
            self.assertGreaterEqual(len(expected), 20)

            with leaderlock.watch(DSN, since=start, key_prefix=self.prefix) as w:
                first = [w.next(5.0) for _ in range(7)]
                saved = w.position
            self.assertEqual([t.position for t in first], expected[:7])
            self.assertEqual(saved, expected[6])
            self.assertIsNone(w.next(0.1), "a closed watcher delivers nothing")

            with leaderlock.watch(DSN, since=saved, key_prefix=self.prefix) as w:
                rest = []
                while (t := w.next(0.5)) is not None:
                    rest.append(t.position)
            self.assertEqual(rest, expected[7:])

            # one key only, from the start
            key = f"{self.prefix}1"
            with leaderlock.watch(DSN, since=start, key=key) as w:
                one = []
                while (t := w.next(0.5)) is not None:
                    one.append((t.position, t.key))
            self.assertEqual(one, [(p, key) for p in positions(start, key) if p in expected])
            self.assertTrue(one)

    def test_asyncio_since_resumes_and_goes_on_through_a_terminated_backend(self):
        start = sql("SELECT le_history_position()")
        with unpruned(start):
            churn(self.prefix, 8)
            before = settled(self.prefix, start)
            name = f"leaderlock watch {uuid.uuid4().hex[:8]}"

            async def main():
                got = []
                async with leaderlock.watch(make_conninfo(DSN, application_name=name), since=before[2],
                                            key_prefix=self.prefix) as w:
                    async for t in w:
                        got.append(t.position)
                        if len(got) == len(before) - 3:
                            break
                    self.assertEqual(got, before[3:])
                    self.assertTrue(sql("SELECT bool_and(pg_terminate_backend(pid)) FROM pg_stat_activity "
                                        "WHERE application_name = %s", (name,)))
                    await asyncio.to_thread(churn, self.prefix, 4)
                    after = await asyncio.to_thread(settled, self.prefix, before[-1])
                    while (t := await w.anext(2.0)) is not None:
                        got.append(t.position)
                        if t.position == after[-1]:
                            break
                    self.assertEqual(got, before[3:] + after)
                    # after a short page the watcher moves up to the last
                    # numbered position, other tests' transitions' too
                    self.assertGreaterEqual(w.position, after[-1])
                    self.assertEqual(w.reconnects, 1)
                self.assertIsNone(await w.anext(0.1))
            asyncio.run(main())

    def test_a_pruned_position_raises_history_pruned(self):
        pruned = sql("SELECT pruned_through FROM leaderlock_history_head")
        if pruned == 0:
            # Prune the oldest transition only: keep all but one (the worker
            # reads the setting on reload), then put the setting back.
            churn(self.prefix, 2)
            self.assertTrue(wait(lambda: numbered(self.prefix), 5.0))
            keep = max(sql("SELECT count(*) FROM leaderlock_history") - 1, 1)
            if sql("SELECT le_capabilities()->>'edition'") == "portable":
                # No worker: the numbering of le_expire_lapsed reads the
                # administrator's setting, the database's (a session's SET
                # is ignored there), at each call.
                try:
                    sql("DO $$ BEGIN EXECUTE 'ALTER DATABASE ' || quote_ident(current_database()) "
                        f"|| ' SET leaderlock.history_max_rows = {int(keep)}'; END $$")
                    sql("SELECT le_expire_lapsed()")
                finally:
                    sql("DO $$ BEGIN EXECUTE 'ALTER DATABASE ' || quote_ident(current_database()) "
                        "|| ' RESET leaderlock.history_max_rows'; END $$")
            else:
                try:
                    sql(f"ALTER SYSTEM SET leaderlock.history_max_rows = {int(keep)}")
                    sql("SELECT pg_reload_conf()")

                    def pruned_now():
                        churn(self.prefix, 1)  # wakes the worker
                        return sql("SELECT pruned_through FROM leaderlock_history_head") > 0
                    self.assertTrue(wait(pruned_now, 5.0), "the worker pruned nothing")
                finally:
                    sql("ALTER SYSTEM RESET leaderlock.history_max_rows")
                    sql("SELECT pg_reload_conf()")
            pruned = sql("SELECT pruned_through FROM leaderlock_history_head")

        w = leaderlock.watch(DSN, since=pruned - 1)
        with self.assertRaises(leaderlock.HistoryPruned) as caught:
            w.next(5.0)
        e = caught.exception
        self.assertIsInstance(e, leaderlock.Rejected)
        self.assertIsInstance(e, leaderlock.LeaderlockError)
        self.assertEqual((e.sqlstate, e.position), ("LE002", pruned - 1))
        self.assertIn("no longer kept", str(e))
        with self.assertRaises(leaderlock.HistoryPruned):  # ended: it stays so
            w.next(0.1)
        w.close()

        async def from_zero():
            async with leaderlock.watch(DSN, since=0) as w:
                async for _ in w:
                    pass
        with self.assertRaises(leaderlock.HistoryPruned):
            asyncio.run(from_zero())

        # from the last pruned position itself: nothing was missed
        with leaderlock.watch(DSN, since=pruned) as w:
            t = w.next(2.0)
            self.assertIsNotNone(t)
            self.assertGreater(t.position, pruned)

    def test_bad_arguments_raise_at_once_and_close_ends_a_blocking_for(self):
        for kwargs in ({"since": -1}, {"since": 1.5}, {"since": True}, {"key": ""},
                       {"key": "a", "key_prefix": "b"}, {"poll": 0}):
            with self.assertRaises(leaderlock.BadArgument, msg=kwargs):
                leaderlock.watch(DSN, **kwargs)
        with self.assertRaises(leaderlock.BadArgument):
            leaderlock.watch("host='unterminated")

        # the server's refusal (22023, here max_rows 0) is not retried
        with mock.patch.object(_history, "PAGE", 0):
            w = leaderlock.watch(DSN, since=0)
            t0 = time.monotonic()
            with self.assertRaises(leaderlock.BadArgument) as caught:
                w.next(5.0)
            self.assertEqual(caught.exception.sqlstate, "22023")
            self.assertLess(time.monotonic() - t0, 1.0)
            w.close()

        w = leaderlock.watch(DSN, key_prefix=self.prefix)
        ended = threading.Event()

        def follow():
            for _ in w:
                pass
            ended.set()
        threading.Thread(target=follow, daemon=True).start()
        self.assertTrue(wait(lambda: w.position is not None, 5.0))
        time.sleep(0.2)
        t0 = time.monotonic()
        w.close()
        self.assertTrue(ended.wait(1.0))
        self.assertLess(time.monotonic() - t0, 0.5)


if __name__ == "__main__":
    unittest.main()
