"""N workers share M partitions as members of a group (contract 26): the
server assigns the partitions, balanced and sticky, and fences each with a
term; a worker acts on a partition only while the server's last word says
it owns it and its own deadline has not passed, gives back what is
revoked, and leaves on shutdown (its partitions go to the others at once).

Run several copies with different ids:
    python3 examples/sharding.py worker-1 "host=127.0.0.1 user=postgres"
"""
import sys
import time

import psycopg2

GROUP, PARTITIONS, TTL = "sharding", 16, 6.0   # partitions 1..16; membership ttl in seconds


def run(me, dsn, every=TTL / 3, rounds=None, work=lambda conn, me, partition, term: None):
    conn = psycopg2.connect(dsn)
    conn.autocommit = True
    try:
        while rounds is None or (rounds := rounds - 1) >= 0:
            deadline, owned = rebalance(conn, me)
            for partition, term in owned:
                if time.monotonic() >= deadline:
                    break   # this round's answer is too old: act on nothing
                work(conn, me, partition, term)   # guard its writes with le_assert_partition(GROUP, partition, me, term)
            time.sleep(every)
    finally:
        with conn.cursor() as cur:
            cur.execute("SELECT le_leave(%s, %s)", (GROUP, me))  # hand every partition over at once
        conn.close()


def rebalance(conn, me):
    """One round: renew the membership (the first join makes the group),
    read what the server assigns, give back what it revoked (nothing of
    it runs between rounds here). Returns the local deadline and the
    partitions owned, with their terms."""
    with conn.cursor() as cur:
        sent = time.monotonic()
        cur.execute("SELECT le_join(%s, %s, %s * interval '1 second', %s)", (GROUP, me, TTL, PARTITIONS))
        cur.execute("SELECT partition, term, state FROM le_assignment(%s, %s)", (GROUP, me))
        owned = []
        for partition, term, state in cur.fetchall():
            if state == "owned":
                owned.append((partition, term))
            else:
                cur.execute("SELECT le_ack(%s, %s, %s, %s)", (GROUP, me, partition, term))
        return sent + TTL, owned


if __name__ == "__main__":
    run(sys.argv[1], sys.argv[2])
