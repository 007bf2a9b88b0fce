"""The Python client as a candidate of the scenario suite (tests/clients):

    candidate.py DSN KEY ID TTL_SECONDS RECORDS [IDIOM]

IDIOM is sync (default), async or elector: each is the shape of the same
name in clients/python/README.md, as written there, with the step of work
appending "tick ID TERM UNIX_SECONDS" to RECORDS every 20 ms while it leads
(the lease checked before each), and leaderlock.release_on_sigterm(): on
SIGTERM it stops, releases and exits 143."""
import asyncio
import sys
import time

import leaderlock


def main():
    dsn, key, me, ttl, path = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), sys.argv[5]
    idiom = sys.argv[6] if len(sys.argv) > 6 else "sync"
    records = open(path, "a", buffering=1)

    def tick(lease):
        records.write(f"tick {me} {lease.term} {time.time():.6f}\n")

    if idiom == "sync":
        # README: "Blocking code", with step = tick and a pause of 20 ms
        leaderlock.release_on_sigterm()          # SIGTERM: stop, release, exit 143

        while True:                              # campaign again after a loss
            try:
                with leaderlock.lead(dsn, key, ttl=ttl, id=me) as lease:
                    while True:
                        lease.check()            # LeaseLost past the local deadline
                        tick(lease)              # one unit of work
                        time.sleep(0.02)
            except leaderlock.LeaseLost:
                continue

    elif idiom == "async":
        # README: "asyncio", with step = tick and a pause of 20 ms
        async def step(lease):
            tick(lease)

        async def amain():
            while True:                          # campaign again after a loss
                try:
                    async with leaderlock.lead(dsn, key, ttl=ttl, id=me) as lease:
                        while True:
                            lease.check()        # LeaseLost past the local deadline
                            await step(lease)    # one unit of work
                            await asyncio.sleep(0.02)
                except leaderlock.LeaseLost:
                    continue

        leaderlock.release_on_sigterm()          # SIGTERM: stop, release, exit 143
        asyncio.run(amain())

    elif idiom == "elector":
        # README: "A long-running service", with step = tick and a pause of 20 ms
        def work(lease):
            while True:
                lease.check()                    # LeaseLost past the local deadline: the elector campaigns again
                tick(lease)                      # one unit of work
                time.sleep(0.02)

        leaderlock.release_on_sigterm()          # SIGTERM: stop, release, exit 143
        elector = leaderlock.Elector(dsn, key, ttl=ttl, id=me, work=work)
        elector.start()
        elector.join()

    else:
        sys.exit(f"candidate.py: unknown idiom {idiom!r} (sync, async or elector)")


if __name__ == "__main__":
    main()
