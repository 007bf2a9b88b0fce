"""A replica of a job scheduler that runs its jobs only while it leads.

Run several copies with different ids; exactly one runs the jobs at a time,
and another takes over within moments when it stops or dies.
    python3 examples/scheduler.py replica-1 "host=127.0.0.1 user=postgres"
"""
import select
import sys

import psycopg2

KEY, TTL = "nightly-jobs", "10 seconds"


def run(me, dsn, renew_every=3.0, rounds=None):
    lease = psycopg2.connect(dsn)             # leadership calls, autocommit
    lease.autocommit = True
    work = psycopg2.connect(dsn)              # the jobs' own transactions
    with lease.cursor() as cur:
        cur.execute("CREATE TABLE IF NOT EXISTS job_runs (by text, term bigint)")
        cur.execute("LISTEN leaderlock")      # hear at once when the lease frees up
        try:
            while rounds is None or (rounds := rounds - 1) >= 0:
                # One call acquires the lease, or renews it if we already lead.
                cur.execute("SELECT le_try_acquire(%s, %s, %s)", (KEY, me, TTL))
                if cur.fetchone()[0]:
                    run_jobs(work, me)
                # Sleep until the next renewal, or less when a notification comes.
                select.select([lease], [], [], renew_every)
                lease.poll()
                lease.notifies.clear()
        finally:
            cur.execute("SELECT le_release(%s, %s)", (KEY, me))  # hand over at once


def run_jobs(work, me):
    # Fencing: this transaction commits only while we still lead.
    with work, work.cursor() as cur:
        cur.execute("SELECT le_assert_leader(%s, %s)", (KEY, me))
        term = cur.fetchone()[0]
        cur.execute("INSERT INTO job_runs VALUES (%s, %s)", (me, term))
    print(f"{me}: ran the jobs as leader in term {term}")


if __name__ == "__main__":
    run(sys.argv[1], sys.argv[2])
