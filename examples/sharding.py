"""N workers share M partitions: each partition is a lease, held by one
worker at a time; every worker holds about M/N of them, renews them all
with one statement, and gives them up on shutdown.

Run several copies with different ids:
    python3 examples/sharding.py worker-1 "host=127.0.0.1 user=postgres"
"""
import sys
import time

import psycopg2

PARTITIONS, TTL = 16, 6.0   # keys partition/0 .. partition/15; lease ttl in seconds


def run(me, dsn, every=TTL / 3, rounds=None, work=lambda conn, me, key, term: None):
    conn = psycopg2.connect(dsn)
    conn.autocommit = True
    try:
        while rounds is None or (rounds := rounds - 1) >= 0:
            for key, term in rebalance(conn, me):
                work(conn, me, key, term)   # guard its writes with le_assert_leader(key, me, term)
            time.sleep(every)
    finally:
        with conn.cursor() as cur:
            cur.execute("SELECT le_release_all(%s)", (me,))  # hand every partition over at once
        conn.close()


def rebalance(conn, me):
    """One round: stay a member, renew everything held, then give up or
    take partitions until this worker holds its share. Returns the
    partitions held, with their terms."""
    with conn.cursor() as cur:
        # Membership is a lease too: a worker that dies drops out by itself.
        cur.execute("SELECT le_try_acquire(%s, %s, %s * interval '1 second')", (f"member/{me}", me, TTL))
        cur.execute("SELECT le_renew_all(%s)", (me,))          # every lease of mine, one statement
        cur.execute("SELECT count(*) FROM leaderlock_status WHERE key LIKE 'member/%%' AND state = 'held'")
        share = -(-PARTITIONS // max(cur.fetchone()[0], 1))     # ceil(M / workers)
        cur.execute("SELECT key, term FROM leaderlock_status "
                    "WHERE holder = %s AND key LIKE 'partition/%%' AND state = 'held' ORDER BY key", (me,))
        mine = dict(cur.fetchall())
        for key in sorted(mine)[share:]:                       # more than my share: give some up
            cur.execute("SELECT le_release(%s, %s)", (key, me))
            del mine[key]
        for p in range(PARTITIONS):                             # fewer: take free ones
            key = f"partition/{p}"
            if len(mine) >= share:
                break
            if key not in mine:
                cur.execute("SELECT le_try_acquire(%s, %s, %s * interval '1 second')", (key, me, TTL))
                if cur.fetchone()[0]:
                    cur.execute("SELECT term FROM leaderlock WHERE key = %s", (key,))
                    mine[key] = cur.fetchone()[0]
        return sorted(mine.items())


if __name__ == "__main__":
    run(sys.argv[1], sys.argv[2])
