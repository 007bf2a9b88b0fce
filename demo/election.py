"""leaderlock demo: three candidates run for one key on a throwaway cluster.

Watch one lead, hand over on release, and (with the worker) a killed leader
expire and be replaced. A listener prints every payload from
`LISTEN leaderlock` as it arrives.

Usage: election.py PORT   (started by scripts/demo.sh)
"""
import json
import multiprocessing as mp
import os
import select
import signal
import sys
import time

import psycopg2

KEY = "nightly-report"
TTL = "2 seconds"
RENEW_EVERY = 0.5  # seconds between the leader's renewals
FOLLOWER_POLL = 5.0  # a follower's fallback poll; it mostly waits on LISTEN
T0 = time.monotonic()


def stamp():
    return f"{time.monotonic() - T0:6.2f}s"


def out(line):
    # One write per line: several processes share this stdout.
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def say(who, text):
    out(f"{stamp()}  {who:<12} {text}")


def connect(port):
    conn = psycopg2.connect(host="127.0.0.1", port=port, user="postgres", dbname="postgres")
    conn.autocommit = True
    return conn


def candidate(name, port, release_after):
    """Runs for KEY; when leader, renews every RENEW_EVERY seconds and
    releases after `release_after` seconds of leadership (None: never). A
    follower LISTENs, so it retries the moment the lease is released or
    expires; it polls only every FOLLOWER_POLL seconds as a fallback."""
    conn = connect(port)
    cur = conn.cursor()
    cur.execute("LISTEN leaderlock")
    leading_since = None
    while True:
        if leading_since is None:
            cur.execute("SELECT le_try_acquire(%s, %s, %s)", (KEY, name, TTL))
            if cur.fetchone()[0]:
                cur.execute("SELECT le_assert_leader(%s, %s)", (KEY, name))
                term = cur.fetchone()[0]
                say(name, f"won the election: leader in term {term}")
                leading_since = time.monotonic()
        else:
            if release_after is not None and time.monotonic() - leading_since > release_after:
                cur.execute("SELECT le_release(%s, %s, term => %s)", (KEY, name, term))
                say(name, "done: released the lease")
                leading_since = None
                time.sleep(3)  # let someone else win
                conn.notifies.clear()
                continue
            cur.execute("SELECT le_renew(%s, %s, term => %s)", (KEY, name, term))
            if not cur.fetchone()[0]:
                say(name, "lost the lease")
                leading_since = None
        wait_for_vacancy(conn, RENEW_EVERY if leading_since is not None else FOLLOWER_POLL)


def wait_for_vacancy(conn, timeout):
    """Sleeps up to `timeout`, returning early when KEY is released or expires."""
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        select.select([conn], [], [], left)
        conn.poll()
        payloads = [n.payload for n in conn.notifies]
        conn.notifies.clear()
        # A hint only (any role may notify): the next le_try_acquire decides.
        if any(frees_key(p) for p in payloads):
            return


def frees_key(payload):
    """Whether `payload` announces that KEY was released or expired."""
    try:
        e = json.loads(payload)
    except ValueError:
        return False
    return isinstance(e, dict) and e.get("key") == KEY and e.get("event") in ("released", "expired")


def listener(port, ready):
    conn = connect(port)
    conn.cursor().execute("LISTEN leaderlock")
    ready.set()
    while True:
        select.select([conn], [], [])
        conn.poll()
        while conn.notifies:
            payload = conn.notifies.pop(0).payload
            try:
                e = json.loads(payload)
                e["event"]
            except (ValueError, TypeError, KeyError):
                out(f"{stamp()}  {'LISTEN':<12} (not an announcement: {len(payload)} bytes)")
                continue
            extra = ""
            if e["event"] == "expired" and "expires_at" in e:
                lag = (time.time() - iso_epoch(e["expires_at"])) * 1000
                extra = f"   (announced {lag:.0f} ms after the lease ran out)"
            # Re-encoded: any role may notify, and json.dumps escapes every
            # control or non-ASCII character a payload might carry.
            out(f"{stamp()}  {'LISTEN':<12} {json.dumps(e)}{extra}")


def iso_epoch(text):
    from datetime import datetime, timezone
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc).timestamp()


def current_leader(conn):
    with conn.cursor() as cur:
        cur.execute("SELECT le_leader(%s)", (KEY,))
        return cur.fetchone()[0]


def main():
    port = int(sys.argv[1])
    conn = connect(port)
    # The launcher starts the worker within a second of the server (or of
    # CREATE EXTENSION): give it that long before saying whether it runs.
    deadline = time.monotonic() + 5
    while True:
        with conn.cursor() as cur:
            cur.execute("SELECT le_worker_running()")
            worker = cur.fetchone()[0]
        if worker or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    out(f"leaderlock demo on 127.0.0.1:{port}, key '{KEY}', ttl {TTL}, "
        f"background worker running: {worker}\n")

    ready = mp.Event()
    mp.Process(target=listener, args=(port, ready), daemon=True).start()
    ready.wait()

    procs = {}
    # candidate-1 hands over by releasing after 3 s of leadership.
    for i, release_after in [(1, 3.0), (2, None), (3, None)]:
        name = f"candidate-{i}"
        p = mp.Process(target=candidate, args=(name, port, release_after), daemon=True)
        p.start()
        procs[name] = p
        time.sleep(0.2)

    # Let the election run: one leads, then releases, another takes over.
    time.sleep(6)

    # Now kill the current leader outright: no release, its lease runs out.
    victim = current_leader(conn)
    if victim in procs:
        say("demo", f"kill -9 {victim} (the leader): it will not release; its lease must expire")
        t_kill = time.monotonic()
        os.kill(procs[victim].pid, signal.SIGKILL)
        while current_leader(conn) in (victim, None):
            time.sleep(0.01)
        say("demo", f"{current_leader(conn)} leads {time.monotonic() - t_kill:.2f} s after the kill "
                    f"(ttl {TTL}: the lease had up to 2 s left)")
    time.sleep(2)
    for p in procs.values():
        if p.is_alive():
            p.terminate()
    out("\ndemo finished")


if __name__ == "__main__":
    main()
