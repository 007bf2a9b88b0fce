"""Concurrency with real sessions: many clients racing for one key, and a
multi-client stress test checked for overlapping leaders and shrinking terms
(contract 2.1, 3.1 to 3.3)."""
import os
import subprocess
import random
import threading
import time
import unittest
from collections import Counter, defaultdict

import psycopg2

from harness import DB, PORT, connect, one


class RaceTest(unittest.TestCase):
    CLIENTS = 8
    ROUNDS = 40

    def race(self, key):
        """CLIENTS sessions call le_try_acquire on `key` at the same moment;
        returns the ids that got true."""
        conns = [connect() for _ in range(self.CLIENTS)]
        barrier = threading.Barrier(self.CLIENTS)
        winners, errors = [], []

        def run(i):
            try:
                barrier.wait()
                if one(conns[i], "SELECT le_try_acquire(%s, %s, '10 seconds')", (key, f"c{i}")):
                    winners.append(f"c{i}")
            except Exception as e:  # reported below, not swallowed
                errors.append(e)

        threads = [threading.Thread(target=run, args=(i,)) for i in range(self.CLIENTS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for c in conns:
            c.close()
        self.assertEqual(errors, [])
        return winners

    def test_exactly_one_wins_a_new_key(self):
        for r in range(self.ROUNDS):
            key = f"race-new-{r}-{time.time_ns()}"
            winners = self.race(key)
            self.assertEqual(len(winners), 1, (key, winners))
            c = connect()
            self.assertEqual(one(c, "SELECT le_leader(%s)", (key,)), winners[0])
            c.close()

    def test_exactly_one_wins_a_vacant_or_lapsed_key(self):
        c = connect()
        for r in range(self.ROUNDS):
            key = f"race-old-{r}-{time.time_ns()}"
            one(c, "SELECT le_try_acquire(%s, 'setup', '1 millisecond')", (key,))
            if r % 2:
                one(c, "SELECT le_release(%s, 'setup')", (key,))
            else:
                one(c, "SELECT pg_sleep(0.002)")
            winners = self.race(key)
            self.assertEqual(len(winners), 1, (key, winners))
            self.assertEqual(one(c, "SELECT term FROM leaderlock WHERE key = %s", (key,)), 2)
        c.close()


class TakeoverLosersLockNothingTest(unittest.TestCase):
    """Rivals racing to take over a lapsed key, each in a transaction it
    keeps open when it loses, while the winner commits at once: no loser
    keeps the winner's row locked (a row taken by a transaction that
    committed after a loser's snapshot is locked in its latest version
    before the loser's check fails; the loser must release that lock), so
    the winner renews, and another session locks the row with NOWAIT."""
    CLIENTS = 6
    ROUNDS = 60

    def test_losers_of_a_takeover_keep_no_lock(self):
        setup = connect()
        self.addCleanup(setup.close)
        conns = [connect(autocommit=False) for _ in range(self.CLIENTS)]
        for c in conns:
            self.addCleanup(c.close)
        for r in range(self.ROUNDS):
            key = f"takeover-losers-{r}-{time.time_ns()}"
            one(setup, "SELECT le_try_acquire(%s, 'setup', '1 millisecond')", (key,))
            one(setup, "SELECT pg_sleep(0.002)")
            barrier = threading.Barrier(self.CLIENTS)
            won, errors = [], []

            def run(i):
                try:
                    barrier.wait()
                    if one(conns[i], "SELECT le_try_acquire(%s, %s, '1 minute')", (key, f"c{i}")):
                        conns[i].commit()  # the winner commits at once
                        won.append(i)
                except Exception as e:  # reported below
                    errors.append(e)

            # Every rival may be refused at once while the worker holds the
            # lapsed row to expire it (a refusal locks nothing; on a busy
            # host for a while): raced again then, the losers' transactions
            # ended first, for a few seconds at most.
            deadline = time.monotonic() + 5
            while True:
                threads = [threading.Thread(target=run, args=(i,)) for i in range(self.CLIENTS)]
                for th in threads:
                    th.start()
                for th in threads:
                    th.join()
                self.assertEqual(errors, [])
                self.assertLessEqual(len(won), 1, key)
                if won or time.monotonic() > deadline:
                    break
                for c in conns:
                    c.rollback()
                barrier.reset()
                time.sleep(0.01)
            self.assertEqual(len(won), 1, key)
            # The losers' transactions are still open.
            other = connect(autocommit=False)
            try:
                one(other, "SELECT 1 FROM leaderlock WHERE key = %s FOR NO KEY UPDATE NOWAIT", (key,))
            except psycopg2.errors.LockNotAvailable:
                self.fail(f"round {r}: a loser kept the winner's row of {key} locked")
            finally:
                other.rollback()
                other.close()
            w = conns[won[0]]
            self.assertTrue(one(w, "SELECT le_renew(%s, %s)", (key, f"c{won[0]}")))
            for c in conns:
                c.rollback()


class HolderNeverRefusedForARivalTest(unittest.TestCase):
    """Rivals trying one key every millisecond, each that wins making one call
    as its holder at once (a renewal, a renewal through le_try_acquire, a
    new value, or a release), then releasing it, as short critical
    sections do. A rival that lost the race for the vacant row locks the
    winner's latest version for a moment (until its subtransaction rolls
    back): the holder's call tries again past that moment, never refused."""
    CLIENTS = 6
    SECONDS = 4
    # (on a slow or loaded host, it goes on until this many tenures, for
    # up to LIMIT seconds)
    TENURES = 400
    LIMIT = 12
    CALLS = (("renewal", "SELECT le_renew(%s, %s)"),
             ("renewal by le_try_acquire", "SELECT le_try_acquire(%s, %s, '1 minute')"),
             ("le_proclaim", "SELECT le_proclaim(%s, %s, '{\"n\": 1}'::jsonb)"),
             ("release", "SELECT le_release(%s, %s)"))

    def test_a_holders_calls_are_never_refused_for_a_losing_rival(self):
        key = f"holder-and-rivals-{time.time_ns()}"
        start = time.monotonic()
        made, refused, errors = defaultdict(int), [], []
        lock = threading.Lock()

        def going():
            t = time.monotonic() - start
            return t < self.SECONDS or (t < self.LIMIT and made["release"] < self.TENURES)

        def run(i):
            me = f"rival-{i}"
            rng = random.Random(i)
            try:
                c = connect()
            except Exception as e:  # reported below
                errors.append(e)
                return
            try:
                while going():
                    if not one(c, "SELECT le_try_acquire(%s, %s, '1 minute')", (key, me)):
                        time.sleep(0.001)  # (rivals that spin would starve the host's cores)
                        continue
                    what, sql = rng.choice(self.CALLS)
                    calls = [(what, sql)] + ([] if what == "release" else [self.CALLS[-1]])
                    for what, sql in calls:
                        ok = one(c, sql, (key, me))
                        with lock:
                            made[what] += 1
                            if not ok:
                                refused.append(what)
            except Exception as e:  # reported below
                errors.append(e)
            finally:
                c.close()

        threads = [threading.Thread(target=run, args=(i,)) for i in range(self.CLIENTS)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        print(f"\n  holders' calls among {self.CLIENTS} rivals in {time.monotonic() - start:.1f} s: {dict(made)}; "
              f"refused: {len(refused)}", flush=True)
        self.assertEqual(errors, [])
        self.assertGreater(made["release"], 200, "too few tenures to tell")
        self.assertEqual(len(refused), 0, f"a holder's calls refused while it held the key: "
                                          f"{dict(Counter(refused))}")


class RefusedCallsLockNothingTest(unittest.TestCase):
    """A rival's refused calls, in a transaction it keeps open, leave the
    holder's rows unlocked (contract 3: a refused call changes nothing and
    locks nothing): another session locks them at once with NOWAIT, and
    the holder renews."""

    def test_refused_calls_in_an_open_transaction_lock_no_row(self):
        key, sem = f"refused-{time.time_ns()}", f"refused-sem-{time.time_ns()}"
        holder = connect()
        self.addCleanup(holder.close)
        self.assertTrue(one(holder, "SELECT le_try_acquire(%s, 'h', '1 hour')", (key,)))
        self.assertTrue(one(holder, "SELECT le_try_acquire(%s, 'h', '1 hour', slots => 2)", (sem,)))
        rival = connect(autocommit=False)
        self.addCleanup(rival.close)
        r = f"r-{time.time_ns()}"
        for sql, args in (("SELECT le_release(%s, %s)", (key, r)), ("SELECT le_proclaim(%s, %s, '1')", (key, r)),
                          ("SELECT le_renew(%s, %s)", (key, r)), ("SELECT le_release(%s, %s)", (sem, r)),
                          ("SELECT le_proclaim(%s, %s, '1')", (sem, r)), ("SELECT le_renew(%s, %s)", (sem, r)),
                          ("SELECT le_try_acquire(%s, %s, '1 hour')", (key, r)),
                          ("SELECT le_release_all(%s)", (r,)), ("SELECT le_renew_all(%s)", (r,))):
            self.assertIn(one(rival, sql, args), (False, 0), sql)
        # the rival's transaction is still open
        other = connect(autocommit=False)
        self.addCleanup(other.close)
        try:
            rows = one(other, "SELECT count(*) FROM (SELECT 1 FROM leaderlock WHERE key IN (%s, %s) "
                              "FOR NO KEY UPDATE NOWAIT) x", (key, sem))
            tenures = one(other, "SELECT count(*) FROM (SELECT 1 FROM leaderlock_slots WHERE key = %s "
                                 "FOR NO KEY UPDATE NOWAIT) x", (sem,))
        except psycopg2.errors.LockNotAvailable:
            self.fail("a refused call kept a row locked")
        self.assertEqual((rows, tenures), (2, 1))
        other.rollback()
        self.assertTrue(one(holder, "SELECT le_renew(%s, 'h')", (key,)))
        self.assertTrue(one(holder, "SELECT le_renew(%s, 'h')", (sem,)))
        rival.rollback()


class TenureChecks:
    """Checks a record of successful calls, by server clock: every term was
    one tenure of one id, tenures never overlapped, terms only grew."""

    def check_key(self, key, recs, start_term, contiguous=True, failovers=False):
        """recs: (op, key, id, term, acquired_at, renewed_at, expires_at) of
        each successful call. With `contiguous`, terms must also follow each
        other with no gap (false when a crash may have lost an answer whose
        change committed). With `failovers`, a renewal may come after the
        expiry its holder last heard of: a promotion extended the lease
        (contract 8.2) without telling anyone."""
        self.assertTrue(any(r[0] == "acquire" for r in recs), f"{key}: nothing acquired")
        tenures = {}  # term -> holder, start, writes [(renewed_at, expires_at)], released
        for op, _, who, term, acquired, renewed, expires in recs:
            t = tenures.setdefault(term, {"holder": who, "start": acquired, "writes": [],
                                          "released": None})
            self.assertEqual(t["holder"], who, f"{key}: term {term} held by two ids")
            self.assertEqual(t["start"], acquired, f"{key}: term {term} has two start times")
            if op == "release":
                t["released"] = expires  # a release sets expires_at to the release time
            else:
                self.assertLessEqual(acquired, renewed)
                t["writes"].append((renewed, expires))
        terms = sorted(tenures)
        self.assertGreater(terms[0], start_term, f"{key}: term {terms[0]} issued again")
        if contiguous:
            # Terms grew by exactly one per tenure, none skipped or reused.
            self.assertEqual(terms, list(range(start_term + 1, start_term + 1 + len(terms))), key)
        for term in terms:
            t = tenures[term]
            writes = sorted(t["writes"])
            self.assertEqual(writes[0][0], t["start"], f"{key}: term {term} not started by an acquire")
            # Each renewal (or re-acquire) happened while the lease was live.
            for (r0, e0), (r1, _) in zip(writes, writes[1:]):
                if not failovers:
                    self.assertLess(r1, e0, f"{key}: term {term} renewed at {r1} after lapsing at {e0}")
            # The tenure ends at its last write's expiry (a shorter ttl may
            # shorten it), or earlier at its release.
            t["end"] = writes[-1][1]
            if t["released"] is not None:
                if not failovers:
                    self.assertLess(t["released"], t["end"], f"{key}: term {term} released after lapsing")
                t["end"] = t["released"]
        # No overlap by server clock: each tenure ends before the next starts.
        for prev, nxt in zip(terms, terms[1:]):
            a, b = tenures[prev], tenures[nxt]
            self.assertLessEqual(a["end"], b["start"],
                                 f"{key}: term {prev} ({a['holder']}) held until {a['end']}, "
                                 f"term {nxt} ({b['holder']}) started at {b['start']}")
        # Terms only grew with time: in server-clock order of the calls.
        by_time = sorted(recs, key=lambda r: r[5])
        for earlier, later in zip(by_time, by_time[1:]):
            self.assertLessEqual(earlier[3], later[3], f"{key}: term went back")
        print(f"  {key}: {len(terms)} tenures, terms {terms[0]}..{terms[-1]}, no overlap")
        self.replay_through_the_rules(key, recs, failovers)

    def replay_through_the_rules(self, key, recs, failovers):
        """The same history, replayed through the lease rules the extension
        decides with (crates/protocol: leaderlock-check-history), so that a
        real run the rules forbid fails. The test command builds the checker
        and names it in LEADERLOCK_HISTORY_CHECKER."""
        checker = os.environ.get("LEADERLOCK_HISTORY_CHECKER")
        if not checker:
            print("  (LEADERLOCK_HISTORY_CHECKER not set: the history is not replayed through the rules)")
            return
        lines = "".join(f"{op} {k} {who} {term} {int(a * 1000000)} {int(r * 1000000)} {int(e * 1000000)}\n"
                        for op, k, who, term, a, r, e in recs)
        out = subprocess.run([checker] + (["--failovers"] if failovers else []), input=lines, text=True,
                             capture_output=True)
        print(out.stdout.rstrip())
        self.assertEqual(out.returncode, 0, f"{key}: the rules forbid a step of this history: {out.stdout}{out.stderr}")


STRESS_KEYS = ["stress-a", "stress-b", "stress-c"]
READ_BACK = ("SELECT term, extract(epoch FROM acquired_at)::numeric, "
             "extract(epoch FROM renewed_at)::numeric, extract(epoch FROM expires_at)::numeric "
             "FROM leaderlock WHERE key = %s")


def stress_client(i, target, stop_at, records, counts):
    """Client i of a stress run until stop_at: random acquire, renew and
    release of STRESS_KEYS with short ttls and asynchronous commits (which
    leaderlock must override), reconnecting to target[0] (a port) after any
    error, counted as counts["errors"]. Appends to records what it was
    told, (op, key, id, term, acquired_at, renewed_at, expires_at), read back
    in the call's own transaction (the row is its own and locked until
    commit), and only once the commit returned."""
    me = f"client-{i}"
    rnd = random.Random(i)
    conn = None
    while time.monotonic() < stop_at:
        try:
            if conn is None:
                conn = psycopg2.connect(host="127.0.0.1", port=target[0], user="postgres",
                                        dbname=DB, connect_timeout=2)
                with conn.cursor() as cur:
                    cur.execute("SET synchronous_commit = off")
                conn.commit()
            key = rnd.choice(STRESS_KEYS)
            op = rnd.choices(["acquire", "renew", "release"], weights=[5, 3, 2])[0]
            ttl = f"{rnd.randint(20, 200)} milliseconds"
            with conn.cursor() as cur:
                if op == "acquire":
                    cur.execute("SELECT le_try_acquire(%s, %s, %s)", (key, me, ttl))
                elif op == "renew":
                    cur.execute("SELECT le_renew(%s, %s, %s)", (key, me, ttl))
                else:
                    cur.execute("SELECT le_release(%s, %s)", (key, me))
                ok = cur.fetchone()[0]
                got = None
                if ok:
                    cur.execute(READ_BACK, (key,))
                    got = (op, key, me) + tuple(cur.fetchone())
            conn.commit()
            # Only an answer whose commit returned counts as seen.
            counts[(op, ok)] += 1
            if got:
                records.append(got)
        except psycopg2.Error:
            counts["errors"] += 1
            try:
                conn.close()
            except Exception:
                pass
            conn = None
            time.sleep(0.05)
        time.sleep(rnd.random() * 0.02)
    if conn is not None:
        conn.close()


class StressTest(TenureChecks, unittest.TestCase):
    """At least 8 clients for at least 10 s doing random acquire, renew and
    release on a few keys with short ttls; then, from a record of every
    successful call, check by server clock that no two ids held a key at
    overlapping times and that terms only grew."""

    CLIENTS = int(os.environ.get("LEADERLOCK_STRESS_CLIENTS", "8"))
    SECONDS = float(os.environ.get("LEADERLOCK_STRESS_SECONDS", "12"))
    def test_no_overlapping_leaders_and_growing_terms(self):
        c = connect()
        start_terms = {k: one(c, "SELECT coalesce(max(term), 0) FROM leaderlock WHERE key = %s", (k,))
                       for k in STRESS_KEYS}
        c.close()
        records = []
        counts = defaultdict(int)
        stop_at = time.monotonic() + self.SECONDS
        threads = [threading.Thread(target=stress_client, args=(i, [PORT], stop_at, records, counts))
                   for i in range(self.CLIENTS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(counts.pop("errors", 0), 0, "a call failed")
        summary = ", ".join(f"{op} {'ok' if ok else 'refused'}: {n}" for (op, ok), n in sorted(counts.items()))
        print(f"\n  stress: {self.CLIENTS} clients, {self.SECONDS:.0f} s, {len(records)} successful calls ({summary})")

        for key in STRESS_KEYS:
            recs = [r for r in records if r[1] == key]
            self.check_key(key, recs, start_terms[key])
        # The worker's cue never lies past the real expiry of a held lease.
        c = connect()
        self.assertEqual(one(c, "SELECT count(*) FROM leaderlock WHERE holder IS NOT NULL "
                                "AND NOT recheck_at <= expires_at"), 0)
        c.close()


if __name__ == "__main__":
    unittest.main()
