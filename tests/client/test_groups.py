"""Contract 26 with real members: concurrent processes join a group, renew
by joining again, act only on the partitions the server says they own
(each write guarded by le_assert_partition in its transaction), drain and
give back what is revoked, and crash (their session left to lapse) or
leave. Checked from the writes themselves: on every partition the guarded
writes of one term all commit before any of the next term's, terms only
grow, one member per term; and once stable every live member owns
floor(P/N) or ceil(P/N).
"""
import os
import random
import threading
import time
import unittest

import psycopg2

from harness import LAZY_DB, PORTABLE, Listener, connect, one, wait_for

SECONDS = float(os.environ.get("LEADERLOCK_GROUPS_CHAOS_SECONDS", "12"))
TTL = 2.0
PARTITIONS = 12


class Member(threading.Thread):
    """One member: join (and renew) every ttl/3; its partitions' deadline is
    the send time of the last join whose assignment it read + ttl (never
    the server's later word); writes to each owned partition under the
    guard; a revoked one it stops writing and gives back."""

    def __init__(self, group, name, table, stop, crash_after=None):
        super().__init__(daemon=True)
        self.group, self.name, self.table, self.stop = group, name, table, stop
        self.crash_after = crash_after
        self.errors = []
        self.writes = 0
        self.ticks = []

    def run(self):
        try:
            self.body()
        except Exception as e:  # noqa: BLE001 (the test reports it)
            self.errors.append(f"{self.name}: {e!r}")

    def body(self):
        conn = connect()
        started = time.monotonic()
        deadline, owned = 0.0, {}
        next_join = 0.0
        try:
            while not self.stop.is_set():
                now = time.monotonic()
                if self.crash_after is not None and now - started > self.crash_after:
                    return  # crashed: no leave, its session lapses
                if now >= next_join:
                    sent = time.monotonic()
                    one(conn, "SELECT le_join(%s, %s, %s::interval)::text",
                        (self.group, self.name, f"{TTL} seconds"))
                    rows = conn.cursor()
                    rows.execute("SELECT partition, term, state FROM le_assignment(%s, %s)",
                                 (self.group, self.name))
                    owned = {}
                    for partition, term, state in rows.fetchall():
                        if state == "owned":
                            owned[partition] = term
                        else:
                            one(conn, "SELECT le_ack(%s, %s, %s, %s)", (self.group, self.name, partition, term))
                    deadline = sent + TTL
                    next_join = sent + TTL / 3
                for partition, term in list(owned.items()):
                    if time.monotonic() >= deadline:
                        break  # the local deadline: act on nothing
                    # an unguarded side effect, as a member may have: when it acted
                    self.ticks.append((time.monotonic(), partition, term, self.name))
                    conn.autocommit = False  # the guard and the write in one transaction
                    try:
                        with conn:
                            with conn.cursor() as c:
                                c.execute("SELECT le_assert_partition(%s, %s, %s, %s)",
                                          (self.group, partition, self.name, term))
                                c.execute(f"INSERT INTO {self.table} (partition, term, member, at) "
                                          "VALUES (%s, %s, %s, clock_timestamp())",
                                          (partition, term, self.name))
                        self.writes += 1
                    except psycopg2.Error as e:
                        conn.rollback()
                        if e.pgcode != "LE001":
                            raise
                        owned.pop(partition, None)  # not ours any more
                    finally:
                        conn.autocommit = True
                time.sleep(0.01)
        finally:
            conn.close()


class GroupsTest(unittest.TestCase):
    def setUp(self):
        self.conn = connect()
        suffix = f"{os.getpid()}_{time.time_ns()}"
        self.group = f"grp-{suffix}"
        self.table = f"groups_ledger_{suffix}"
        one(self.conn, f"CREATE TABLE {self.table} (partition int, term bigint, member text, "
                       "at timestamptz, id bigserial)")
        # the first join makes the group: P partitions, a drain of 0.3 s
        one(self.conn, "SELECT le_join(%s, 'maker', '1 second', %s, '0.3 seconds')::text",
            (self.group, PARTITIONS))
        one(self.conn, "SELECT le_leave(%s, 'maker')", (self.group,))

    def tearDown(self):
        one(self.conn, f"DROP TABLE {self.table}")
        self.conn.close()

    def test_members_coming_and_going_never_write_in_each_others_terms(self):
        stop = threading.Event()
        rng = random.Random(7)
        members = []

        def start(name, crash_after=None):
            m = Member(self.group, name, self.table, stop, crash_after)
            m.start()
            members.append(m)

        for i in range(3):
            start(f"m{i}")
        ends = time.monotonic() + SECONDS
        n = 3
        while time.monotonic() < ends:
            time.sleep(rng.uniform(0.5, 1.5))
            # a newcomer that crashes after a while, or one that stays
            start(f"m{n}", crash_after=rng.uniform(0.5, 2.5) if rng.random() < 0.6 else None)
            n += 1
        # settle: the crashed ones lapse, the survivors share everything
        time.sleep(TTL * 3)
        alive = [m for m in members if m.crash_after is None]
        counts = {}
        for m in alive:
            counts[m.name] = one(self.conn, "SELECT count(*) FROM le_assignment(%s, %s) WHERE state = 'owned'",
                                 (self.group, m.name))
        stop.set()
        for m in members:
            m.join(10)
        errors = [e for m in members for e in m.errors]
        self.assertEqual(errors, [])
        self.assertGreater(sum(m.writes for m in members), 100)
        # balanced once stable: floor or ceil of P/N each, all of P owned
        low, high = PARTITIONS // len(alive), -(-PARTITIONS // len(alive))
        self.assertEqual(sum(counts.values()), PARTITIONS, counts)
        self.assertTrue(all(low <= c <= high for c in counts.values()), counts)
        # every partition: terms in commit order never go back, one member
        # per term, and no write of a term after a later term's first
        rows = self.conn.cursor()
        rows.execute(f"SELECT partition, term, member FROM {self.table} ORDER BY partition, at, id")
        last = {}
        member_of = {}
        terms_seen = {}
        for partition, term, member in rows.fetchall():
            self.assertGreaterEqual(term, last.get(partition, 0),
                                    f"partition {partition}: a write in term {term} after term {last.get(partition)}")
            last[partition] = term
            self.assertEqual(member_of.setdefault((partition, term), member), member,
                             f"partition {partition} term {term}: two members")
            terms_seen.setdefault(partition, set()).add(term)
        self.assertEqual(len(last), PARTITIONS)
        # the members' own windows (unguarded side effects, by their local
        # deadline and what they last read): on a partition, once another
        # member acted, an earlier owner never acts again
        ticks = sorted(t for m in members for t in m.ticks)
        done = {}
        current = {}
        for at, partition, term, member in ticks:
            owner = current.get(partition)
            if owner is not None and owner[0] != member:
                done.setdefault(partition, set()).add(owner)
            self.assertNotIn((member, term), done.get(partition, set()),
                             f"partition {partition}: {member} acted in term {term} after another member did")
            current[partition] = (member, term)
        self.assertGreater(sum(len(t) for t in terms_seen.values()), PARTITIONS,
                           "no partition ever moved: the chaos did nothing")
        print(f"\n  groups chaos: {len(members)} members ({len(alive)} stayed), "
              f"{sum(m.writes for m in members)} guarded writes, "
              f"{sum(len(t) for t in terms_seen.values())} tenures over {PARTITIONS} partitions; "
              f"owned at the end: {sorted(counts.values())}")

    def test_a_guarded_transaction_delays_neither_a_join_nor_a_renewal(self):
        """A member holding a partition's guard in an open transaction: another
        member's join (whose step would revoke that partition) and the
        holder's own renewal both answer at once; the step of the guarded
        partition follows once the transaction ends."""
        one(self.conn, "SELECT le_join(%s, 'a', '10 seconds')::text", (self.group,))
        guarded = connect(autocommit=False)
        other = connect()
        try:
            with guarded.cursor() as c:
                # (a keeps its lowest partitions: the highest is one it gives up)
                c.execute("SELECT le_assert_partition(%s, %s, 'a')", (self.group, PARTITIONS))
            for conn in (other, self.conn):
                one(conn, "SET statement_timeout = '2s'")
            t = time.monotonic()
            one(other, "SELECT le_join(%s, 'b', '10 seconds')::text", (self.group,))
            joined = time.monotonic() - t
            t = time.monotonic()
            one(self.conn, "SELECT le_join(%s, 'a', '10 seconds')::text", (self.group,))
            renewed = time.monotonic() - t
            self.assertLess(joined, 1.0)
            self.assertLess(renewed, 1.0)
            states = dict(row[::2] for row in self.rows("SELECT partition, term, state FROM le_assignment(%s, 'a')"))
            self.assertEqual(states[PARTITIONS], "owned", "the guarded partition was stepped under its guard")
            self.assertEqual(sum(1 for v in states.values() if v == "revoked"), PARTITIONS // 2 - 1, states)
            guarded.commit()
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and dict(
                    row[::2] for row in self.rows("SELECT partition, term, state FROM le_assignment(%s, 'a')")
            ).get(PARTITIONS) == "owned":
                if PORTABLE:
                    one(self.conn, "SELECT le_expire_lapsed()")  # no worker: the step due 100 ms on
                time.sleep(0.05)
            states = dict(row[::2] for row in self.rows("SELECT partition, term, state FROM le_assignment(%s, 'a')"))
            revoked = sum(1 for v in states.values() if v == "revoked")
            self.assertEqual(revoked, PARTITIONS // 2, states)
        finally:
            for conn in (guarded, other):
                conn.close()
            one(self.conn, "RESET statement_timeout")

    def test_without_a_worker_the_members_renewals_step_the_group(self):
        """In a database no worker serves, a revocation's end and a lapsed
        member still move partitions: a member's renewal steps its group
        when a step is due (skipping it if another transaction is at it)."""
        conn = connect(LAZY_DB)
        group = self.group + "-lazy"
        try:
            owned = ("SELECT count(*) FROM le_assignment(%s, %s) WHERE state = 'owned'")
            one(conn, "SELECT le_join(%s, 'a', '1 second', 4, '0.3 seconds')::text", (group,))
            one(conn, "SELECT le_join(%s, 'b', '5 seconds')::text", (group,))
            # a never gives its 2 back; their revocation ends with a's
            # session as it was (1 s); a's renewals go on
            self.assertEqual(one(conn, owned, (group, "b")), 0)
            until = time.monotonic() + 1.5
            while time.monotonic() < until:
                one(conn, "SELECT le_join(%s, 'a', '1 second')::text", (group,))
                time.sleep(0.2)
            self.assertEqual(one(conn, owned, (group, "b")), 2, "the revocation's end moved nothing")
            # a stops renewing: b's renewals take a's once its session lapsed
            until = time.monotonic() + 1.5
            while time.monotonic() < until:
                one(conn, "SELECT le_join(%s, 'b', '5 seconds')::text", (group,))
                time.sleep(0.2)
            self.assertEqual(one(conn, owned, (group, "b")), 4, "the lapsed member's partitions stayed")
        finally:
            one(conn, "SELECT le_leave(%s, 'b')", (group,))
            conn.close()

    @unittest.skipIf(PORTABLE, "the worker's rounds (the portable edition has none)")
    def test_one_roles_many_due_groups_keep_no_other_roles_group_waiting(self):
        """The worker's time is shared out per role: another role's 20
        groups of 2,000 partitions, all due at once (their one member
        lapsed: every partition freed, a long step each), do not keep a
        group of this role, due a moment later, waiting until they are all
        stepped: the round steps groups for a budget, their owners taking
        turns from round to round."""
        hog = "ll_groups_hog"
        admin = connect()
        self.addCleanup(admin.close)   # (after the cleanup below: cleanups run last first)
        if one(admin, "SELECT 1 FROM pg_roles WHERE rolname = %s", (hog,)):
            one(admin, f"DROP ROLE {hog}")
        one(admin, f"CREATE ROLE {hog} LOGIN")
        hogs = [f"{self.group}-hog{i}" for i in range(20)]
        mine = self.group + "-mine"

        def cleanup():
            for g in hogs + [mine]:
                for t in ("leaderlock_partitions", "leaderlock_members", "leaderlock_groups"):
                    one(admin, f"DELETE FROM {t} WHERE grp = %s", (g,))
            one(admin, f"DROP ROLE {hog}")
        self.addCleanup(cleanup)
        conn = connect(user=hog)
        self.addCleanup(conn.close)
        # every member lapses at `due` (after the setup, however long the
        # first join says it takes), this role's first member 20 ms later:
        # due after them, in a later round than the first
        join = "SELECT le_join(%s, %s, make_interval(secs => %s), %s)::text"
        began = time.time()
        one(conn, join, (hogs[0], "m", 600, 2000))
        due = time.time() + 3 * 20 * (time.time() - began) + 1
        one(conn, "SELECT le_leave(%s, 'm')", (hogs[0],))
        for g in hogs:
            one(conn, join, (g, "m", due - time.time(), 2000))
        one(admin, join, (mine, "b1", due + 0.02 - time.time(), 4))
        one(admin, join, (mine, "b2", 60, None))
        owned = "SELECT count(*) FROM le_assignment(%s, %s) WHERE state = 'owned'"
        self.assertEqual(one(admin, owned, (mine, "b1")), 2)
        self.assertGreater(due, time.time(), "the setup took too long")

        def all_stepped():
            return one(admin, "SELECT count(*) FROM leaderlock_partitions WHERE grp = ANY(%s) "
                              "AND member IS NOT NULL", (hogs,)) == 0 \
                and one(admin, owned, (mine, "b2")) == 4
        self.assertTrue(wait_for(all_stepped, timeout=60, interval=0.2))
        # the rounds' times (each round writes its own)
        hogs_last = one(admin, "SELECT max(changed_at) FROM leaderlock_partitions WHERE grp = ANY(%s)", (hogs,))
        mine_at = one(admin, "SELECT max(changed_at) FROM leaderlock_partitions WHERE grp = %s", (mine,))
        rounds = one(admin, "SELECT count(DISTINCT changed_at) FROM leaderlock_partitions WHERE grp = ANY(%s)",
                     (hogs,))
        print(f"\n  the hog's 20 groups stepped in {rounds} rounds; this role's group "
              f"{(hogs_last - mine_at).total_seconds():.2f} s before the hog's last")
        # (each round writes its own time: an earlier round than the last)
        self.assertLess(mine_at, hogs_last, "this role's group waited behind all of another role's")

    @unittest.skipIf(PORTABLE, "the worker's rounds (the portable edition has none)")
    def test_a_flood_of_lapsed_leases_keeps_no_group_waiting(self):
        """4,000 leases that lapse at once take the worker four rounds of
        expiries (a thousand a round); a group due with them is stepped in
        those rounds, not after the last of them: a round whose
        batch of expiries was full still takes the schedules, the marks and
        the groups before it goes again."""
        listener = Listener()
        self.addCleanup(listener.close)
        prefix = self.group + "-flood-"
        mine = self.group + "-flood"
        due = time.time() + 8   # (4,000 acquisitions take about a second in a debug build)
        # (each lease's ttl from the instant it is taken: all lapse at `due`)
        flooded = one(self.conn, "SELECT count(*) FILTER (WHERE le_try_acquire(%s || i, 'x', make_interval("
                                 "secs => %s - extract(epoch FROM clock_timestamp())::float8))) "
                                 "FROM generate_series(1, 4000) i", (prefix, due))
        self.assertEqual(flooded, 4000)
        join = "SELECT le_join(%s, %s, make_interval(secs => %s), %s)::text"
        one(self.conn, join, (mine, "b1", due - time.time(), 2))   # (due with the flood)
        one(self.conn, join, (mine, "b2", 60, None))
        self.assertGreater(due, time.time(), "the setup took too long")
        order = []

        def seen_all():
            order.extend(e for e in listener.events(0.5)
                         if (e.get("event") == "expired" and e.get("key", "").startswith(prefix))
                         or (e.get("event") == "partition_granted" and e.get("group") == mine
                             and e.get("member") == "b2"))
            return sum(e["event"] == "expired" for e in order) == 4000 \
                and any(e["event"] == "partition_granted" for e in order)
        self.assertTrue(wait_for(seen_all, timeout=60, interval=0))
        granted = next(i for i, e in enumerate(order) if e["event"] == "partition_granted")
        last_expired = max(i for i, e in enumerate(order) if e["event"] == "expired")
        print(f"\n  the group's grant came after {granted} of the 4000 expiries")
        self.assertLess(granted, last_expired, "the group waited until the flood of expiries was over")
        one(self.conn, "SELECT le_leave(%s, 'b2')", (mine,))

    def test_a_join_that_waited_past_its_sessions_expiry_joins_again(self):
        """A member's join that waits for its session's row (another
        transaction holds it) until the session has lapsed joins again in a
        new session: it is the caller's own member, not another role's
        (42501 before)."""
        one(self.conn, "SELECT le_join(%s, 'w', '1 second')::text", (self.group,))
        session = one(self.conn, "SELECT session::text FROM leaderlock_members WHERE grp = %s AND member = 'w'",
                      (self.group,))
        holder = connect(autocommit=False)
        waiting = connect()
        answer = []
        try:
            with holder.cursor() as c:
                # (an update that changes nothing: the waiting renewal reads
                # the row again once it commits, at the time it then is)
                c.execute("UPDATE leaderlock_sessions SET renewed_at = renewed_at WHERE session = %s", (session,))

            def join():
                try:
                    answer.append(one(waiting, "SELECT le_join(%s, 'w', '1 second')::text", (self.group,)))
                except psycopg2.Error as e:
                    answer.append(e.pgcode)
            t = threading.Thread(target=join)
            t.start()
            time.sleep(1.3)  # past the session's expiry, the join waiting
            holder.commit()
            t.join(10)
        finally:
            holder.close()
            waiting.close()
        self.assertEqual(len(answer), 1)
        self.assertNotEqual(answer[0], "42501", "the member's own join was refused as another role's")
        self.assertNotEqual(answer[0], session, "a session that lapsed was renewed")
        one(self.conn, "SELECT le_leave(%s, 'w')", (self.group,))

    def rows(self, sql):
        with self.conn.cursor() as c:
            c.execute(sql, (self.group,))
            return c.fetchall()


if __name__ == "__main__":
    unittest.main()
