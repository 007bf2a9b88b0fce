"""The command `leaderlock run` runs in the scenario suite (tests/clients):
appends "tick ID TERM UNIX_SECONDS" to argv[1] every 20 ms, with the id and
term the CLI passes in LEADERLOCK_ID and LEADERLOCK_TERM. The CLI's
supervisor stops it at the local deadline."""
import os
import sys
import time

me, term = os.environ["LEADERLOCK_ID"], os.environ["LEADERLOCK_TERM"]
with open(sys.argv[1], "a", buffering=1) as records:
    while True:
        records.write(f"tick {me} {term} {time.time():.6f}\n")
        time.sleep(0.02)
