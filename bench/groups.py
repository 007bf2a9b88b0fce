"""Groups at scale (contract 26), side by side with the recipe they
replaced.

Groups: P partitions (default 100,000) over N members (default 100), each
member a connection of its own running the member's loop (docs/groups.md):
a round every ttl/3 (le_join, then le_assignment, then le_ack of what was
revoked), and a round soon after a notification names the member (at
most one per ttl/30, as the Rust and Node.js members). Members join one by
one: the time from each join to a stable assignment, as the server has it
(every partition owned by a live member, none being revoked, max - min
owned per member at most 1) and as the members know it (every member has
read its assignment since then); then STEADY seconds with no change: the
statements the members send per round, the statements the server runs for
them (pg_stat_statements, track = all), and the WAL, per member per round;
then LEAVES members leave one by one (le_leave), each timed the same way.

The recipe (the README's before groups, examples/sharding.py of 0.4.0):
every member holds each of its partitions as a lease, and each round
takes its membership lease, renews all its leases (le_renew_all), counts
the members and reads its own leases from leaderlock_status, gives up
what is over ceil(P/N) and tries free partitions one by one until it has
its share. The same loop drives it (a round every ttl/3; it listens to
nothing). Stable: every partition held by a live member, none over
ceil(P/N). Sizes of its own (--recipe-partitions, --recipe-members; its
rounds try partitions one statement each, so at large P a member's first
round takes minutes): a join not stable within --recipe-limit seconds is
reported as such.

Usage: groups.py PG_PORT [--partitions P] [--members N] [--ttl S] [--steady S]
       [--leaves L] [--recipe-partitions P] [--recipe-members N] [--recipe-limit S]
       [--threads T] [--json FILE]
"""
import argparse
import heapq
import json
import math
import select
import threading
import time

import psycopg2

DB = "postgres"


def connect(port):
    c = psycopg2.connect(host="127.0.0.1", port=port, user="postgres", dbname=DB)
    c.autocommit = True
    return c


def pct(values, q):
    values = sorted(values)
    if not values:
        return float("nan")
    return values[min(len(values) - 1, int(len(values) * q))]


class Driver:
    """Runs every member's rounds on a few threads: a member's round is due
    every ttl/3, or sooner when `hint` names it."""

    def __init__(self, port, ttl, threads, round_fn):
        self.port, self.ttl, self.round_fn = port, ttl, round_fn
        self.every, self.soonest = ttl / 3, max(ttl / 30, 0.05)
        self.lock = threading.Condition()
        self.queue = []            # (due, seq, name)
        self.members = {}          # name -> {"conn", "last", "busy", "state"}
        self.seq = 0
        self.stopped = False
        self.rounds = 0
        self.sent = 0              # statements the members sent
        self.errors = []
        self.threads = [threading.Thread(target=self.work, daemon=True) for _ in range(threads)]
        for t in self.threads:
            t.start()

    def add(self, name):
        conn = connect(self.port)
        with self.lock:
            self.members[name] = {"conn": conn, "last": 0.0, "busy": False, "state": {}, "hinted": False}
        self.run_round(name)       # the join itself, timed by the caller
        self.schedule(name, time.monotonic() + self.every, "regular")

    def remove(self, name):
        with self.lock:
            m = self.members.pop(name)
            while m["busy"]:
                self.lock.wait()
        return m

    def schedule(self, name, at, kind):
        with self.lock:
            self.seq += 1
            heapq.heappush(self.queue, (at, self.seq, name, kind))
            self.lock.notify()

    def hint(self, name):
        """A round soon, at most one per `soonest` (one hint pending at once)."""
        with self.lock:
            m = self.members.get(name)
            if m is None or m["hinted"]:
                return
            m["hinted"] = True
            at = max(time.monotonic(), m["last"] + self.soonest)
        self.schedule(name, at, "hint")

    def run_round(self, name):
        with self.lock:
            m = self.members.get(name)
            if m is None or m["busy"]:
                return False
            m["busy"] = True
        try:
            started = time.monotonic()
            sent = self.round_fn(m["conn"], name, m["state"])
            with self.lock:
                m["last"] = started
                self.rounds += 1
                self.sent += sent
        except Exception as e:  # noqa: BLE001 (reported at the end)
            self.errors.append(f"{name}: {e!r}")
        finally:
            with self.lock:
                m["busy"] = False
                self.lock.notify_all()
        return True

    def work(self):
        while True:
            with self.lock:
                while not self.stopped and (not self.queue or self.queue[0][0] > time.monotonic()):
                    self.lock.wait(None if not self.queue else max(0.0, self.queue[0][0] - time.monotonic()))
                if self.stopped:
                    return
                _, _, name, kind = heapq.heappop(self.queue)
                m = self.members.get(name)
                if m is None:
                    continue
                if kind == "hint":
                    m["hinted"] = False
            started = time.monotonic()
            ran = self.run_round(name)
            if kind == "regular":
                # the next one a period after this one's start (soon again if another thread had it)
                self.schedule(name, started + (self.every if ran else 0.05), "regular")

    def knows(self, counts):
        """Every member's last round read as many owned partitions as
        `counts` (the server's, by member) says it owns."""
        with self.lock:
            return all(m["state"].get("owned", 0) == counts.get(name, 0) for name, m in self.members.items())

    def stop(self):
        with self.lock:
            self.stopped = True
            self.lock.notify_all()
        for m in list(self.members.values()):
            m["conn"].close()


# -- groups ------------------------------------------------------------------

def group_round(group, partitions, ttl):
    def round_fn(conn, name, state):
        with conn.cursor() as c:
            # (the count only on the maker's first join: a member joining
            # with another would change the group's)
            first = name == "m000" and not state.get("joined")
            c.execute("SELECT le_join(%s, %s, make_interval(secs => %s), %s)::text",
                      (group, name, ttl, partitions if first else None))
            state["joined"] = True
            c.execute("SELECT partition, term, state FROM le_assignment(%s, %s)", (group, name))
            rows = c.fetchall()
            sent = 2
            state["owned"] = sum(1 for _, _, s in rows if s == "owned")
            for p, term, s in rows:
                if s == "revoked":
                    c.execute("SELECT le_ack(%s, %s, %s, %s)", (group, name, p, term))
                    sent += 1
        return sent
    return round_fn


def group_stable(conn, group, partitions):
    with conn.cursor() as c:
        c.execute(
            "SELECT (SELECT count(*) FROM leaderlock_partitions p "
            "         LEFT JOIN leaderlock_members m ON m.grp = p.grp AND m.member = p.member "
            "        WHERE p.grp = %s AND p.partition <= %s "
            "          AND (m.member IS NULL OR p.revoke_until IS NOT NULL)), "
            "       (SELECT json_object_agg(member, n) FROM (SELECT m.member, count(p.partition) n "
            "          FROM leaderlock_members m LEFT JOIN leaderlock_partitions p "
            "            ON p.grp = m.grp AND p.member = m.member AND p.partition <= %s "
            "           AND p.revoke_until IS NULL "
            "         WHERE m.grp = %s GROUP BY m.member) x)",
            (group, partitions, partitions, group))
        unsettled, counts = c.fetchone()
    counts = counts or {}
    spread = max(counts.values()) - min(counts.values()) if counts else 0
    return unsettled == 0 and spread <= 1, counts


def recipe_round(prefix, partitions, ttl):
    share_sql = (f"SELECT count(*) FROM leaderlock_status WHERE key LIKE '{prefix}member/%%' AND state = 'held'")
    mine_sql = (f"SELECT key, term FROM leaderlock_status WHERE holder = %s AND key LIKE '{prefix}part/%%' "
                "AND state = 'held' ORDER BY key")

    def round_fn(conn, name, state):
        sent = 0
        with conn.cursor() as c:
            c.execute("SELECT le_try_acquire(%s, %s, make_interval(secs => %s))", (f"{prefix}member/{name}", name, ttl))
            c.execute("SELECT le_renew_all(%s)", (name,))
            c.execute(share_sql)
            share = -(-partitions // max(c.fetchone()[0], 1))
            c.execute(mine_sql, (name,))
            mine = dict(c.fetchall())
            sent += 4
            for key in sorted(mine)[share:]:
                c.execute("SELECT le_release(%s, %s)", (key, name))
                del mine[key]
                sent += 1
            for p in range(partitions):
                if len(mine) >= share:
                    break
                key = f"{prefix}part/{p:06d}"
                if key not in mine:
                    c.execute("SELECT le_try_acquire(%s, %s, make_interval(secs => %s))", (key, name, ttl))
                    sent += 1
                    if c.fetchone()[0]:
                        mine[key] = True
        state["owned"] = len(mine)
        return sent
    return round_fn


def recipe_stable(conn, prefix, partitions, members):
    with conn.cursor() as c:
        c.execute(f"SELECT json_object_agg(holder, n) FROM (SELECT holder, count(*) n FROM leaderlock_status "
                  f"WHERE key LIKE '{prefix}part/%%' AND state = 'held' GROUP BY holder) x")
        counts = c.fetchone()[0] or {}
    ok = (sum(counts.values()) == partitions and len(counts) == members
          and max(counts.values()) <= -(-partitions // members))
    return ok, counts


# -- measuring ---------------------------------------------------------------

def until_stable(driver, stable, limit, poll=0.1):
    """From now: (seconds until the server's assignment is stable, until
    every member has read its part of it), None for either not reached in
    `limit`. `stable()` answers (stable, owned count by member)."""
    t0 = time.monotonic()
    server = known = None
    while time.monotonic() - t0 < limit:
        ok, counts = stable()
        if ok and server is None:
            server = time.monotonic() - t0
        if ok and driver.knows(counts):
            known = time.monotonic() - t0
            break
        time.sleep(poll)
    return server, known


def listen_hints(port, group, driver, stop):
    conn = connect(port)
    with conn.cursor() as c:
        c.execute("LISTEN leaderlock")
    while not stop.is_set():
        if select.select([conn], [], [], 0.2) == ([], [], []):
            continue
        conn.poll()
        while conn.notifies:
            n = conn.notifies.pop(0)
            try:
                v = json.loads(n.payload)
            except ValueError:
                continue
            if v.get("group") == group and v.get("event") in ("partition_granted", "partition_revoked"):
                driver.hint(v.get("member"))
    conn.close()


def server_counters(conn):
    """Statements run (pg_stat_statements), WAL bytes written, and how
    many of the WAL's records were full-page images (a page's first change
    after a checkpoint: they depend on when checkpoints fall)."""
    with conn.cursor() as c:
        c.execute("SELECT coalesce(sum(calls), 0) FROM pg_stat_statements")
        calls = c.fetchone()[0]
        c.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0'), wal_fpi FROM pg_stat_wal")
        wal, fpi = c.fetchone()
        return int(calls), int(wal), int(fpi)


def steady(driver, admin, seconds):
    """Rounds, statements sent, server statements and WAL over `seconds`
    with no change."""
    # Not counted: the history's numbering of what the changes before
    # recorded (a pending row per move), and vacuuming after them.
    until = time.monotonic() + 120
    with admin.cursor() as c:
        while time.monotonic() < until:
            c.execute("SELECT count(*) FROM leaderlock_history_pending")
            if c.fetchone()[0] == 0:
                break
            time.sleep(0.2)
        c.execute("VACUUM ANALYZE")
    r0, s0 = driver.rounds, driver.sent
    calls0, wal0, fpi0 = server_counters(admin)
    time.sleep(seconds)
    calls1, wal1, fpi1 = server_counters(admin)
    rounds = max(driver.rounds - r0, 1)
    return {"rounds": rounds, "sent_per_round": (driver.sent - s0) / rounds,
            "server_statements_per_round": (calls1 - calls0 - 4) / rounds,  # (less the two readings')
            "wal_bytes_per_round": (wal1 - wal0) / rounds, "full_page_images_per_round": (fpi1 - fpi0) / rounds}


def run_design(name, args, round_fn, stable, partitions, members, limit, hints=None, grow=None):
    """Members join one by one (or, with `grow`, join a group of
    `members` partitions, which then grows to `partitions` in one step:
    one by one, the first joins of a large group would move half, a
    third, ... of everything); STEADY seconds; then LEAVES members leave
    one by one and as many join again, each change timed."""
    admin = connect(args.port)
    driver = Driver(args.port, args.ttl, args.threads, round_fn)
    stop = threading.Event()
    if hints:
        threading.Thread(target=hints, args=(driver, stop), daemon=True).start()
    joins, leaves = [], []
    first = grown = None

    def timed(what, n, into, change):
        t = time.monotonic()
        change()
        server, known = until_stable(driver, lambda: stable(admin, n), limit)
        into.append({"n": n, "server": server, "known": known})
        print(f"  {name}: {what} ({n:3d} members): stable {fmt(server)} (known by all {fmt(known)}) "
              f"[{time.monotonic() - t:.2f} s]", flush=True)
        return server is not None

    try:
        for i in range(members):
            t = time.monotonic()
            driver.add(f"m{i:03d}")
            if i == 0:
                first = time.monotonic() - t
            if grow is None:
                if not timed(f"join m{i:03d}", i + 1, joins, lambda: None):
                    break
        if grow is not None:
            setup = []
            t = time.monotonic()
            timed(f"grown to {partitions} partitions", members, setup, grow)
            grown = time.monotonic() - t
        quiet = steady(driver, admin, args.steady)
        print(f"  {name}: steady: {quiet}", flush=True)
        gone = []
        for j in range(min(args.leaves, len(driver.members) - 1)):
            who = sorted(driver.members)[-1]
            m = driver.remove(who)
            gone.append(who)
            timed(f"leave {who}", len(driver.members), leaves, lambda: leave(name, m["conn"], who, args))
            m["conn"].close()
        if grow is not None:  # and back: joins at scale
            joins = []
            for who in reversed(gone):
                timed(f"join {who}", len(driver.members) + 1, joins, lambda: driver.add(who))
        for who in sorted(driver.members):  # gone, so that nothing of it is left to step later
            m = driver.remove(who)
            leave(name, m["conn"], who, args)
            m["conn"].close()
    finally:
        stop.set()
        driver.stop()
    if driver.errors:
        raise SystemExit(f"{name}: members failed: {driver.errors[:5]}")
    return {"first_join_s": first, "grown_s": grown, "joins": joins, "steady": quiet, "leaves": leaves}


def leave(design, conn, who, args):
    with conn.cursor() as c:
        if design == "groups":
            c.execute("SELECT le_leave(%s, %s)", (args.group, who))
        else:
            c.execute("SELECT le_release_all(%s)", (who,))


def fmt(s):
    return "-" if s is None else f"{s:.2f} s"


def summary(result):
    def times(rows, key):
        xs = [r[key] for r in rows if r[key] is not None]
        return {"p50": pct(xs, 0.5), "p99": pct(xs, 0.99), "max": max(xs) if xs else None,
                "unstable": sum(1 for r in rows if r[key] is None)}
    joins = result["joins"] if result.get("grown_s") is not None else result["joins"][1:]
    return {"joins_server": times(joins, "server"), "joins_known": times(joins, "known"),
            "leaves_server": times(result["leaves"], "server"), "leaves_known": times(result["leaves"], "known")}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("port", type=int)
    ap.add_argument("--partitions", type=int, default=100_000)
    ap.add_argument("--members", type=int, default=100)
    ap.add_argument("--ttl", type=float, default=10.0)
    ap.add_argument("--steady", type=float, default=10.0)
    ap.add_argument("--leaves", type=int, default=20)
    ap.add_argument("--recipe-partitions", type=int, default=10_000)
    ap.add_argument("--recipe-members", type=int, default=20)
    ap.add_argument("--recipe-limit", type=float, default=60.0)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--json")
    args = ap.parse_args()
    args.group = f"bench-{int(time.time())}"
    admin = connect(args.port)
    with admin.cursor() as c:
        c.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        c.execute("SHOW shared_preload_libraries")
        print(f"PostgreSQL: {c.connection.server_version}, preloaded {c.fetchone()[0]}", flush=True)
    out = {"args": {k: v for k, v in vars(args).items() if k != "json"}}
    limit = max(30.0, 3 * args.ttl)

    print(f"groups: {args.partitions} partitions, {args.members} members, ttl {args.ttl} s", flush=True)
    def grow():
        with admin.cursor() as c:  # the maker's join changes the count (its member renews meanwhile)
            c.execute("SELECT le_join(%s, 'm000', make_interval(secs => %s), %s)::text",
                      (args.group, args.ttl, args.partitions))
    g = run_design("groups", args, group_round(args.group, args.members, args.ttl),
                   lambda conn, n: group_stable(conn, args.group, args.partitions),
                   args.partitions, args.members, limit,
                   hints=lambda driver, stop: listen_hints(args.port, args.group, driver, stop), grow=grow)
    out["groups"] = {**g, "summary": summary(g)}
    # the same sizes as the recipe's, side by side
    small = f"{args.group}-small"
    gs = run_design("groups (recipe's sizes)", args, group_round(small, args.recipe_partitions, args.ttl),
                    lambda conn, n: group_stable(conn, small, args.recipe_partitions),
                    args.recipe_partitions, args.recipe_members, limit,
                    hints=lambda driver, stop: listen_hints(args.port, small, driver, stop))
    out["groups_small"] = {**gs, "summary": summary(gs)}
    prefix = f"{args.group}/"
    print(f"recipe: {args.recipe_partitions} partitions, {args.recipe_members} members", flush=True)
    r = run_design("recipe", args, recipe_round(prefix, args.recipe_partitions, args.ttl),
                   lambda conn, n: recipe_stable(conn, prefix, args.recipe_partitions, n),
                   args.recipe_partitions, args.recipe_members, args.recipe_limit)
    out["recipe"] = {**r, "summary": summary(r)}

    print("\nsummary (seconds; per member per round)")
    for key, label in (("groups", f"groups {args.partitions}/{args.members}"),
                       ("groups_small", f"groups {args.recipe_partitions}/{args.recipe_members}"),
                       ("recipe", f"recipe {args.recipe_partitions}/{args.recipe_members}")):
        s, q = out[key]["summary"], out[key]["steady"]
        grown = out[key].get("grown_s")
        print(f"  {label:22} first join {out[key]['first_join_s']:.2f}"
              f"{'' if grown is None else f', grown to size {grown:.1f}'}; join->stable p50 "
              f"{s['joins_server']['p50']:.2f} p99 {s['joins_server']['p99']:.2f} (known p50 "
              f"{s['joins_known']['p50']:.2f} p99 {s['joins_known']['p99']:.2f}, unstable "
              f"{s['joins_server']['unstable']}); leave->stable p50 {s['leaves_server']['p50']:.2f} "
              f"(known {s['leaves_known']['p50']:.2f}); statements sent {q['sent_per_round']:.1f}, run "
              f"{q['server_statements_per_round']:.1f}, WAL {q['wal_bytes_per_round']:.0f} B "
              f"({q['full_page_images_per_round']:.2f} full pages)", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1, default=str)
    if math.isnan(out["groups"]["summary"]["joins_server"]["p50"]) and args.members > 1:
        raise SystemExit("groups: no join became stable")


if __name__ == "__main__":
    main()
