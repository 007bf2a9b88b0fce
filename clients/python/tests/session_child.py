"""A process holding keys under a session, for test_session.py:

    session_child.py DSN PREFIX KEYS TTL_SECONDS RECORDS

Opens a session (ttl TTL_SECONDS), acquires PREFIX/0 .. PREFIX/KEYS-1
under it, appends "ready HANDLE" to RECORDS, then every 20 ms:
"alive T0 T1 BOOL" (s.alive, read between time.monotonic() T0 and T1),
then, only if every lease's check() passes, the side effect "effect T0"
(T0 read before the checks). At the first failed check: "lost REASON",
and it leaves the session's `with` block (close) and exits."""
import sys
import time

import leaderlock


def main():
    dsn, prefix, n, ttl, path = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
    records = open(path, "a", buffering=1)
    with leaderlock.session(dsn, ttl=ttl) as s:
        leases = [s.try_acquire(f"{prefix}/{i}") for i in range(n)]
        if not all(leases):
            sys.exit("not every key was free")
        records.write(f"ready {s.handle}\n")
        while True:
            t0 = time.monotonic()
            alive = s.alive
            t1 = time.monotonic()
            records.write(f"alive {t0:.6f} {t1:.6f} {alive}\n")
            t0 = time.monotonic()
            try:
                for lease in leases:
                    lease.check()
            except leaderlock.LeaseLost as e:
                records.write(f"lost {e.reason}\n")
                break
            records.write(f"effect {t0:.6f}\n")  # the side effect, only once every check passed
            time.sleep(0.02)


if __name__ == "__main__":
    main()
