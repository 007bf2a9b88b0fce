"""The command `leaderlock run --every` runs in the runs scenario
(tests/clients/runs_scenario.py): appends "start", then "tick" every 20 ms
for argv[2] seconds, then "end" to argv[1], each as "KIND ID TERM DUE
UNIX_SECONDS" with the id, term and due instant the CLI passes in its
environment. The CLI's supervisor stops it (SIGTERM) when the claim is lost
or at the local deadline: it records "lost" and exits 143."""
import os
import signal
import sys
import time

me, term, due = os.environ["LEADERLOCK_ID"], os.environ["LEADERLOCK_TERM"], os.environ["LEADERLOCK_DUE"]
out = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)


def record(kind):
    os.write(out, f"{kind} {me} {term} {due} {time.time():.6f}\n".encode())


def lost(*_):
    record("lost")
    os._exit(143)


signal.signal(signal.SIGTERM, lost)
record("start")
until = time.time() + float(sys.argv[2])
while time.time() < until:
    record("tick")
    time.sleep(0.02)
record("end")
