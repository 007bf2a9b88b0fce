"""The command the `leaderlock run` tests run. It records its own tenure
in a shared log (one line per record, appended atomically):

    KIND PID TERM TIME

KIND is start, tick (every 10 ms while it runs), hup/usr1 (signals it got),
term (SIGTERM: it records, then exits 143) or exit (exits by itself).
Usage: cli_child.py LOG [SECONDS [CODE]]: run for SECONDS (default: for
ever), then exit with CODE (default 0).
"""
import os
import signal
import sys
import time

log = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
term = os.environ.get("LEADERLOCK_TERM", "?")


def record(kind):
    os.write(log, f"{kind} {os.getpid()} {term} {time.time():.6f}\n".encode())


def on_term(*_):
    record("term")
    os._exit(143)


signal.signal(signal.SIGTERM, on_term)
signal.signal(signal.SIGHUP, lambda *_: record("hup"))
signal.signal(signal.SIGUSR1, lambda *_: record("usr1"))
record("start")
if os.environ.get("CLI_CHILD_ENV"):
    # (those set: a leader's command has no LEADERLOCK_JOB, a run's no LEADERLOCK_KEY)
    record("env:" + ",".join(f"{k}={os.environ[k]}" for k in
                              ("LEADERLOCK_KEY", "LEADERLOCK_ID", "LEADERLOCK_TERM", "LEADERLOCK_JOB", "LEADERLOCK_DUE")
                              if k in os.environ))
until = time.time() + float(sys.argv[2]) if len(sys.argv) > 2 else None
while until is None or time.time() < until:
    record("tick")
    time.sleep(0.01)
record("exit")
sys.exit(int(sys.argv[3]) if len(sys.argv) > 3 else 0)
