"""When one primary is not enough: keys spread over several independent
PostgreSQL primaries, by key, on the client side.

Every client computes a key's primary from the same named list of primaries
(rendezvous hashing: adding a primary moves only the keys it now wins,
about 1/N of them), and elects on that primary alone, so each key has one
term sequence and one leader. A worker holds its keys of each primary
under one session there (one renewal per primary, however many keys).

Changing the list moves keys. While clients may disagree on the list (a
rolling deploy), a key is led only by a holder of it on both its old and
its new primary: `lead_during_move` acquires on the old one first, then on
the new one, and gives up both if it cannot have both. When every client
has the new list and every lease taken under the old one has lapsed,
`leader_of` alone is enough again.

Run several copies with different ids:
    python3 examples/several_primaries.py worker-1 "host=a user=postgres" "host=b user=postgres"
"""
import hashlib
import sys
import time

import psycopg2

TTL = 6.0


def primary_for(key, primaries):
    """The name of the primary that elects `key`: the highest hash of
    (name, key). Every client with the same names computes the same one."""
    return max(primaries, key=lambda name: hashlib.sha256(f"{name}\0{key}".encode()).digest())


class Worker:
    """One session per primary, for all the keys this worker holds there."""

    def __init__(self, me, primaries, ttl=TTL):
        self.me, self.ttl = me, ttl
        first = time.monotonic()                  # the deadline counts from the first open's send
        self.conns = {name: psycopg2.connect(dsn) for name, dsn in primaries.items()}
        self.sessions = {}
        for name, conn in self.conns.items():
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute("SELECT le_open_session(%s, %s * interval '1 second')::text", (me, ttl))
                self.sessions[name] = cur.fetchone()[0]
        self.deadline = first + ttl

    def renew(self):
        """One renewal per primary; the local deadline moves only if every
        one succeeded (a refusal: every key there is lost)."""
        sent = time.monotonic()
        ok = True
        for name, conn in self.conns.items():
            with conn.cursor() as cur:
                cur.execute("SELECT le_renew_session(%s)", (self.sessions[name],))
                ok = cur.fetchone()[0] and ok
        if ok:
            self.deadline = sent + self.ttl
        return ok

    def alive(self):
        return time.monotonic() < self.deadline

    def try_lead(self, key, primaries):
        """The key's term on its primary, or None."""
        return self._take(primary_for(key, primaries), key)

    def lead_during_move(self, key, old, new):
        """While clients may disagree on the list: the key's term on its new
        primary, held only together with the key on its old primary (taken
        first); neither when both cannot be had."""
        before, after = primary_for(key, old), primary_for(key, new)
        if before == after:
            return self._take(after, key)
        if self._take(before, key) is None:
            return None
        term = self._take(after, key)
        if term is None:
            self._release(before, key)
        return term

    def _take(self, name, key):
        with self.conns[name].cursor() as cur:
            cur.execute("SELECT le_try_acquire_in(%s, %s)", (self.sessions[name], key))
            if not cur.fetchone()[0]:
                return None
            cur.execute("SELECT term FROM leaderlock WHERE key = %s AND session = %s",
                        (key, self.sessions[name]))
            return cur.fetchone()[0]

    def _release(self, name, key):
        with self.conns[name].cursor() as cur:
            cur.execute("SELECT le_release(%s, %s)", (key, self.me))

    def close(self):
        for name, conn in self.conns.items():
            with conn.cursor() as cur:
                cur.execute("SELECT le_close_session(%s)", (self.sessions[name],))
            conn.close()


def run(me, primaries, keys, every=TTL / 3, rounds=None, work=lambda primary, key, term: None):
    """Lead what keys it can, every ttl/3, on each key's primary."""
    w = Worker(me, primaries)
    try:
        mine = {}
        while rounds is None or (rounds := rounds - 1) >= 0:
            if not w.renew():
                break                                   # a session lost: start afresh
            for key in keys:
                if key not in mine:
                    term = w.try_lead(key, primaries)
                    if term is not None:
                        mine[key] = term
            for key, term in mine.items():
                if w.alive():                           # checked before every side effect
                    work(primary_for(key, primaries), key, term)
            time.sleep(every)
    finally:
        w.close()


if __name__ == "__main__":
    names = {f"primary-{i}": dsn for i, dsn in enumerate(sys.argv[2:])}
    run(sys.argv[1], names, [f"shard/{n}" for n in range(64)])
