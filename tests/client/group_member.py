"""One member of a group, as a process of its own, for test_groups_chaos.py
(so that kill -9 and SIGSTOP are real): the Python client's
leaderlock.member, and a loop that acts on the partitions it owns.

    group_member.py DSN GROUP MEMBER TTL PARTITIONS DRAIN LEDGER DIR

Each act, on the next few owned partitions in turn: ask `owns` (noting the
monotonic clock, system-wide on Linux, just before and just after), append
an unguarded tick "before after partition term" to DIR/MEMBER.ticks, and
for one of them a fenced write: le_assert_partition (m.guard) and an
INSERT into LEDGER in one transaction. DIR/MEMBER.events gets "entering",
"joined", "left" (with the monotonic time) and the write counts at the end.
SIGTERM: leave the group (the `with` block ends) and exit.

LEADERLOCK_CHECK_THE_CHECKER (by hand only: the test must then fail; see
test_groups_chaos.py): a comma list of ways to misbehave:
  no-deadline  act on what the last assignment said, past the local deadline
               (the guard, sent with that term, still refuses the late writes)
  no-guard     write without le_assert_partition
  slow-ack     give the first partition revoked from it back only after
               DRAIN + 1 s (its renewals wait too: the client's callbacks run
               on its thread)
  flap         once, as soon as it owns a partition: leave and join again
"""
import os
import signal
import sys
import threading
import time

import psycopg

import leaderlock

BROKEN = set(filter(None, os.environ.get("LEADERLOCK_CHECK_THE_CHECKER", "").split(",")))
# Acts per loop (one fenced write among them) and the pause between loops:
# about 50 writes and 200 ticks a second per member (two shared cores).
PER_LOOP = 4
PAUSE = 0.02


def main():
    dsn, group, name, ttl, partitions, drain, ledger, out = sys.argv[1:9]
    ttl, partitions, drain = float(ttl), int(partitions), float(drain)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
    # os.write at once: nothing is lost to a buffer at kill -9
    ticks = os.open(os.path.join(out, name + ".ticks"), flags, 0o644)
    events = os.open(os.path.join(out, name + ".events"), flags, 0o644)

    def note(*words):
        os.write(events, (" ".join(str(w) for w in words) + "\n").encode())

    acting = threading.Lock()
    slow = ["slow-ack" in BROKEN]

    def on_revoked(partition):
        # drain: an act under way ends before the partition is given back
        with acting:
            pass
        if slow[0]:
            slow[0] = False
            time.sleep(drain + 1)

    insert = (f"INSERT INTO {ledger} (partition, term, member, at, current_term) "
              "VALUES (%s, %s, %s, clock_timestamp(), "
              "(SELECT term FROM leaderlock_partitions WHERE grp = %s AND partition = %s))")
    counts = {"writes": 0, "refused": 0, "errors": 0}
    conn = None
    cursor = 0
    flapped = "flap" not in BROKEN
    while not stop.is_set():
        note("entering", f"{time.monotonic():.6f}")
        with leaderlock.member(dsn, group, name, ttl, partitions=partitions, drain=drain,
                               on_revoked=on_revoked) as m:
            note("joined", f"{time.monotonic():.6f}")
            while not stop.is_set():
                if conn is None:
                    try:
                        # A process frozen inside a guarded transaction holds
                        # its partition until the transaction ends (the guard's
                        # rule): the server ends that transaction for it.
                        conn = psycopg.connect(dsn, autocommit=True, connect_timeout=2,
                                               options="-c idle_in_transaction_session_timeout=500")
                    except psycopg.Error:
                        time.sleep(0.1)
                        continue
                owned = sorted(m._owned) if "no-deadline" in BROKEN else sorted(m.owned())
                if not flapped and owned:
                    flapped = True
                    break  # leave, then join again
                picked = [p for p in owned if p > cursor][:PER_LOOP]
                picked += [p for p in owned if p <= cursor][:PER_LOOP - len(picked)]
                for i, p in enumerate(picked):
                    cursor = p
                    with acting:
                        conn = act(m, conn, p, i == 0, name, group, insert, counts, ticks)
                    if conn is None:
                        break
                time.sleep(PAUSE)
        note("left", f"{time.monotonic():.6f}")
    note("counts", *(f"{k}={v}" for k, v in counts.items()))


def act(m, conn, p, write, name, group, insert, counts, ticks):
    """One act on partition p: the tick, and the fenced write if `write`.
    The connection, or None when it broke."""
    before = time.monotonic()
    term = m._owned.get(p) if "no-deadline" in BROKEN else m.owns(p)
    after = time.monotonic()
    if term is None:
        return conn
    os.write(ticks, f"{before:.6f} {after:.6f} {p} {term}\n".encode())
    if not write:
        return conn
    try:
        with conn.transaction():
            if "no-guard" in BROKEN:
                pass
            elif "no-deadline" in BROKEN:
                conn.execute("SELECT le_assert_partition(%s, %s, %s, %s)", (group, p, name, term))
            else:
                term = m.guard(conn, p)
            conn.execute(insert, (p, term, name, group, p))
        counts["writes"] += 1
    except leaderlock.LeaderlockError:
        pass  # its deadline passed since `owns`: not ours any more
    except psycopg.Error as e:
        if e.sqlstate == "LE001":
            counts["refused"] += 1
        else:
            counts["errors"] += 1  # the server restarted, or ended an idle transaction
            try:
                conn.close()
            except psycopg.Error:
                pass
            return None
    return conn


if __name__ == "__main__":
    main()
