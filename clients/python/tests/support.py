"""What the client's tests share: the server to test against, one-shot
SQL on it, and waiting for a condition."""
import os
import time

import psycopg

DSN = os.environ.get("LEADERLOCK_DSN", "host=127.0.0.1 dbname=postgres user=postgres")


def sql(query, args=(), dsn=DSN):
    """The first column of the first row of `query`, on a connection of its own."""
    with psycopg.connect(dsn, autocommit=True) as c:
        cur = c.execute(query, args)
        row = cur.fetchone() if cur.description else None
        return row[0] if row else None


def wait(predicate, timeout=10.0):
    """Whether `predicate` came true within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False
