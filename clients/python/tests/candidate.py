"""The Python client as a candidate of the scenario suite (tests/clients):
candidate.py DSN KEY ID TTL_SECONDS RECORDS. While it leads it appends
"tick ID TERM UNIX_SECONDS" to RECORDS every 20 ms, checking the lease
before each; SIGTERM: stop and release."""
import signal
import sys
import time

import leaderlock


def main():
    dsn, key, me, ttl, path = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), sys.argv[5]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # unwinds the `with`: releases
    with open(path, "a", buffering=1) as records:
        while True:
            try:
                with leaderlock.lead(dsn, key, ttl=ttl, id=me) as lease:
                    while True:
                        lease.check()
                        records.write(f"tick {me} {lease.term} {time.time():.6f}\n")
                        time.sleep(0.02)
            except leaderlock.LeaseLost:
                continue


if __name__ == "__main__":
    main()
