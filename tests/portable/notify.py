#!/usr/bin/python3
"""Notification payloads byte for byte, and le_acquire's polling wait.

Each payload must equal what the compiled edition's serde_json writes:
compact JSON, keys in the documented order, strings escaped as serde_json
does (json.dumps with separators=(',', ':') and ensure_ascii=False escapes
the same characters the same way), values embedded as jsonb's text.
Then: a waiter in le_acquire takes a released lease within one polling
period (<= 100 ms + a look), and takes a lapsed one at its expiry.

Usage: notify.py CONNINFO
"""
import json
import select
import sys
import threading
import time

import psycopg2

DSN = sys.argv[1]
conn = psycopg2.connect(DSN)
conn.autocommit = True
cur = conn.cursor()
listener = psycopg2.connect(DSN)
listener.autocommit = True
listener.cursor().execute("LISTEN leaderlock")


def drain(expect, timeout=2.0):
    got = []
    end = time.time() + timeout
    while len(got) < expect and time.time() < end:
        select.select([listener], [], [], 0.1)
        listener.poll()
        while listener.notifies:
            got.append(listener.notifies.pop(0).payload)
    return got


def compiled(event, key, holder, term, at, **rest):
    d = {"event": event, "key": key, "holder": holder, "term": term, "at": at}
    d.update(rest)
    return json.dumps(d, separators=(",", ":"), ensure_ascii=False)


def rfc(cur, sql, args=()):
    cur.execute(sql, args)
    return cur.fetchone()


failures = []
# le_force_release: members of leaderlock_admin (the admin role may create it)
cur.execute("SELECT 1 FROM pg_roles WHERE rolname = 'leaderlock_admin'")
if cur.fetchone() is None:
    cur.execute("CREATE ROLE leaderlock_admin NOLOGIN")
cur.execute("GRANT leaderlock_admin TO current_user")
key = 'we"ird\\key\n\t\x01é雪/'
holder = "id 'x' \x1f"
value = '{"addr": "10.0.0.1:5432", "big": 123456789012345678901234567890.5, "s": "é\\n"}'

cur.execute("SELECT le_try_acquire(%s, %s, '1 hour', value => %s::jsonb)", (key, holder, value))
cur.execute("SELECT le_proclaim(%s, %s, '[1, 2]')", (key, holder))
cur.execute("SELECT le_release(%s, %s)", (key, holder))
cur.execute("SELECT le_try_acquire(%s, 'b', '10 milliseconds')", (key,))
time.sleep(0.05)
cur.execute("SELECT le_expire_lapsed()")
cur.execute("SELECT le_try_acquire(%s, 'c', '1 hour')", (key,))
cur.execute("SELECT le_force_release(%s)", (key,))
payloads = drain(7)
if len(payloads) != 7:
    failures.append(f"expected 7 notifications, got {len(payloads)}")
else:
    ev = [json.loads(p) for p in payloads]
    cur.execute("SELECT %s::jsonb::text", (value,))
    value_text = cur.fetchone()[0]
    expect = [
        compiled("acquired", key, holder, 1, ev[0]["at"], previous_holder=None,
                 expires_at=ev[0]["expires_at"], value=None),
        compiled("proclaimed", key, holder, 1, ev[1]["at"], value="@V@").replace('"@V@"', "[1, 2]"),
        compiled("released", key, holder, 1, ev[2]["at"], forced=False),
        compiled("acquired", key, "b", 2, ev[3]["at"], previous_holder=None,
                 expires_at=ev[3]["expires_at"], value=None),
        compiled("expired", key, "b", 2, ev[4]["at"], expires_at=ev[4]["expires_at"], reason="ttl"),
        compiled("acquired", key, "c", 3, ev[5]["at"], previous_holder=None,
                 expires_at=ev[5]["expires_at"], value=None),
        compiled("released", key, "c", 3, ev[6]["at"], forced=True),
    ]
    # the value is embedded as jsonb's own text, exactly (no float rounding)
    expect[0] = expect[0][: -len('"value":null}')] + '"value":' + value_text + "}"
    for got, want in zip(payloads, expect):
        if got != want:
            failures.append(f"payload\n   got  {got!r}\n   want {want!r}")
    if "123456789012345678901234567890.5" not in payloads[0]:
        failures.append("the value's number was not kept exactly")

# le_acquire: a waiter takes a released lease within a polling period.
cur.execute("SELECT le_try_acquire('wake', 'holder', '1 hour')")
result = {}


def waiter():
    c = psycopg2.connect(DSN)
    c.autocommit = True
    k = c.cursor()
    k.execute("SELECT le_acquire('wake', 'waiter', '1 hour', '5 seconds'), clock_timestamp()")
    result["won"], result["at"] = k.fetchone()
    c.close()


t = threading.Thread(target=waiter)
t.start()
time.sleep(0.5)                     # the waiter is at its longest period now
released_at = rfc(cur, "SELECT clock_timestamp() FROM (SELECT le_release('wake', 'holder')) r")[0]
t.join()
lag = (result["at"] - released_at).total_seconds()
print(f"  le_acquire: release committed -> waiter returned in {lag * 1000:.0f} ms")
if not result["won"] or lag > 0.15:
    failures.append(f"waiter won={result['won']} after {lag:.3f} s (want <= 0.15 s)")

# ... and a lapsed one at its expiry, announcing the end of the old tenure.
cur.execute("SELECT le_try_acquire('wake2', 'holder', '300 milliseconds')")
cur.execute("SELECT expires_at FROM leaderlock WHERE key = 'wake2'")
expires = cur.fetchone()[0]
drain(10, 0.2)
cur.execute("SELECT le_acquire('wake2', 'waiter', '1 hour', '2 seconds'), clock_timestamp()")
won, at = cur.fetchone()
lag = (at - expires).total_seconds()
print(f"  le_acquire: lease expired -> waiter returned in {lag * 1000:.0f} ms")
if not won or lag < 0 or lag > 0.05:
    failures.append(f"lapsed: won={won} {lag:.3f} s after expiry (want 0..0.05 s)")
events = [json.loads(p)["event"] for p in drain(2)]
if events != ["expired", "acquired"]:
    failures.append(f"takeover of a lapsed lease announced {events}, want expired then acquired")

if failures:
    for f in failures:
        print("  FAIL:", f)
    sys.exit(1)
print("  ok: 7 payloads byte-identical to the compiled edition's; le_acquire wakes by polling in time")
