"""The command the `leaderlock run --group` tests run, once per partition.
It records its own run in a shared log (one line per record, appended
atomically):

    KIND PID PARTITION TERM MEMBER TIME

KIND is start, tick (every 20 ms while it runs), term (SIGTERM: it drains
for GROUP_CHILD_DRAIN seconds, ticking, then records end and exits 143).
Usage: group_child.py LOG.
"""
import os
import signal
import sys
import time

log = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
env = os.environ
tag = f"{os.getpid()} {env.get('LEADERLOCK_PARTITION', '?')} {env.get('LEADERLOCK_TERM', '?')} " \
      f"{env.get('LEADERLOCK_MEMBER', '?')}"
drain = float(env.get("GROUP_CHILD_DRAIN", "0"))


def record(kind):
    os.write(log, f"{kind} {tag} {time.time():.6f}\n".encode())


def on_term(*_):
    record("term")
    until = time.time() + drain
    while time.time() < until:   # the drain: work in hand finishes
        record("tick")
        time.sleep(0.02)
    record("end")
    os._exit(143)


signal.signal(signal.SIGTERM, on_term)
record("start")
while True:
    record("tick")
    time.sleep(0.02)
