"""The Python client as a replica of a scheduled job, for the cross-client
scenarios (scheduled runs, contract 22):

    run_candidate.py DSN JOB ID PERIOD_MS TTL_SECONDS GRACE_SECONDS RECORDS WORK_SECONDS

Runs JOB every PERIOD_MS milliseconds as replica ID, each claim of
TTL_SECONDS, runs not started within GRACE_SECONDS of their due instant
missed. For each run it appends to RECORDS (opened O_APPEND, one write per
line) "start ID TERM DUE UNIX_SECONDS", then, until WORK_SECONDS have
passed, "tick ID TERM DUE UNIX_SECONDS" every 20 ms while the run is ours
(checked before each), or "lost ID TERM DUE UNIX_SECONDS" once it is not
(and the run ends there); then "end ID TERM DUE UNIX_SECONDS". DUE is the
due instant, UTC, %Y-%m-%dT%H:%M:%S.%fZ. The run's function returns in
both cases: the client records it succeeded if it returned while the run
was ours, else failed. On SIGTERM it exits 143 (the run under way, if any,
is recorded failed first)."""
import os
import sys
import time
from datetime import timedelta, timezone

import leaderlock


def main():
    if len(sys.argv) != 9:
        sys.exit(__doc__)
    dsn, job, me = sys.argv[1], sys.argv[2], sys.argv[3]
    period = timedelta(milliseconds=int(sys.argv[4]))
    ttl, grace = float(sys.argv[5]), float(sys.argv[6])
    records = os.open(sys.argv[7], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    work = float(sys.argv[8])

    # Each record bears the time read before the check that allowed it: a
    # pause between the check and the write (a SIGSTOP) must not date the
    # unit of work after the pause.
    def record(what, run, at):
        due = run.due.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        os.write(records, f"{what} {me} {run.term} {due} {at:.6f}\n".encode())

    def step(run):
        at = time.time()
        if not run.is_ours():                # (paused right after the claim)
            record("lost", run, at)
            return
        record("start", run, at)
        began = time.monotonic()
        while time.monotonic() - began < work:
            at = time.time()
            if not run.is_ours():
                record("lost", run, at)
                return
            record("tick", run, at)
            time.sleep(0.02)
        record("end", run, time.time())

    leaderlock.release_on_sigterm()          # SIGTERM: the run under way ends, exit 143
    leaderlock.run_scheduled(dsn, job, step, every=period, ttl=ttl, misfire_grace=grace, id=me)


if __name__ == "__main__":
    main()
