#!/usr/bin/python3
"""Notification payloads byte for byte, and le_acquire's polling wait.

Each payload must equal what the compiled edition's serde_json writes:
compact JSON, keys in the documented order, strings escaped as serde_json
does (json.dumps with separators=(',', ':') and ensure_ascii=False escapes
the same characters the same way), values embedded as jsonb's text.
le_release_all's payloads too; le_renew_all and le_release_all skip a row
another session holds locked, without waiting, and leave a lapsed lease
unlocked. The payloads of a key of many slots (contract 17): the same, with
"slots":N last, for every event (a takeover of a lapsed tenure, le_expire_lapsed,
le_release_all, le_force_release of every tenure); none once the key admits
one holder again. A schedule's runs (contract 24: a claim replacing
another run's, the instants le_expire_lapsed records missed) and a key
expected to be led (contract 25: leaderless, leaderless_end) and a
group's partitions (contract 26: granted, revoked), byte for byte. Then: a waiter in le_acquire takes a released lease
within one polling period (<= 100 ms + a look), and takes a lapsed one at
its expiry; a waiter for a key of many slots takes a freed slot as soon.

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

# le_renew_all / le_release_all (contract 16): every live lease of one id,
# skipping a row another transaction holds locked (never waiting), each
# release announced as le_release announces one, byte for byte.
many_id = 'id "all" \\ é\x02'
many_keys = ['all-1 "q"', 'all-2\n', 'all-3 雪']
for k in many_keys:
    cur.execute("SELECT le_try_acquire(%s, %s, '1 hour')", (k, many_id))
cur.execute("SELECT le_try_acquire('all-lapsed', %s, '10 milliseconds')", (many_id,))
time.sleep(0.05)
drain(10, 0.2)
other = psycopg2.connect(DSN)
other_cur = other.cursor()           # not autocommit: its transaction stays open
other_cur.execute("SELECT le_renew(%s, %s)", (many_keys[1], many_id))   # locks all-2's row
cur.execute("SET statement_timeout = '5s'")   # a call that waited would fail, not hang
t0 = time.time()
try:
    cur.execute("SELECT le_renew_all(%s), le_release_all(%s)", (many_id, many_id))
    renewed, released = cur.fetchone()
except psycopg2.extensions.QueryCanceledError:
    renewed = released = "waited for the locked row (statement_timeout)"
took = time.time() - t0
other.commit()
cur.execute("SELECT le_release_all(%s), le_release_all(%s)", (many_id, many_id))
released_after, released_none = cur.fetchone()
cur.execute("RESET statement_timeout")
other.close()
print(f"  le_renew_all/le_release_all past a locked row: {renewed}/{released} in {took * 1000:.0f} ms, "
      f"then {released_after}, then {released_none}")
if (renewed, released, released_after, released_none) != (2, 2, 1, 0) or took > 1.0:
    failures.append(f"le_renew_all/le_release_all: renewed {renewed}, released {released} "
                    f"in {took:.3f} s with all-2 locked (want 2, 2 at once), then {released_after} "
                    f"(want 1), then {released_none} (want 0)")
many = drain(3)
if len(many) != 3 or drain(1, 0.3):
    failures.append(f"le_release_all: expected 3 notifications, got {len(many)}: {many}")
else:
    ev = [json.loads(p) for p in many]
    cur.execute("SELECT key, term FROM leaderlock WHERE key = ANY(%s)", (many_keys,))
    terms = dict(cur.fetchall())
    # the first call released all-1 and all-3 (in any order, one clock
    # reading), the second all-2
    if sorted(e["key"] for e in ev[:2]) != sorted([many_keys[0], many_keys[2]]) \
            or ev[2]["key"] != many_keys[1] or ev[0]["at"] != ev[1]["at"]:
        failures.append(f"le_release_all announced {[(e['key'], e['at']) for e in ev]}")
    for got, e in zip(many, ev):
        want = compiled("released", e["key"], many_id, terms.get(e["key"]), e["at"], forced=False)
        if got != want:
            failures.append(f"le_release_all payload\n   got  {got!r}\n   want {want!r}")
cur.execute("SELECT key, holder IS NULL, releases FROM leaderlock WHERE key LIKE 'all-%' ORDER BY key")
rows = cur.fetchall()
want_rows = sorted([(k, True, 1) for k in many_keys] + [("all-lapsed", False, 0)])
if rows != want_rows:
    failures.append(f"after le_release_all: {rows}, want {want_rows}")
# A lapsed lease is neither released nor locked by them: while their
# transaction is still open, a rival takes it over at once.
other = psycopg2.connect(DSN)
other_cur = other.cursor()
other_cur.execute("SELECT le_renew_all(%s), le_release_all(%s)", (many_id, many_id))
found = other_cur.fetchone()
cur.execute("SELECT le_try_acquire('all-lapsed', 'rival', '1 hour')")
taken = cur.fetchone()[0]
other.rollback()
other.close()
if found != (0, 0) or not taken:
    failures.append(f"a lapsed lease: le_renew_all/le_release_all found {found} (want 0, 0), "
                    f"then a rival took it: {taken} (want True)")
drain(2, 0.5)

# Contract 17: the payloads of a key of many slots carry "slots" last, and
# nothing else changes; once the key admits one holder again, none do.
sem = 'sem "q" \\ é\x03'
sem_value = '{"n": 12345678901234567890.25}'
cur.execute("SELECT %s::jsonb::text", (sem_value,))
sem_value_text = cur.fetchone()[0]
drain(10, 0.2)
cur.execute("SELECT le_try_acquire(%s, 'h1', '1 hour', value => %s::jsonb, slots => 3)", (sem, sem_value))
cur.execute("SELECT le_try_acquire(%s, 'h2', '10 milliseconds', slots => 3)", (sem,))
cur.execute("SELECT le_proclaim(%s, 'h1', '[1, 2]')", (sem,))
time.sleep(0.05)
cur.execute("SELECT le_try_acquire(%s, 'h3', '1 hour', slots => 3)", (sem,))      # h2's lapsed slot
cur.execute("SELECT le_try_acquire(%s, 'h4', '10 milliseconds', slots => 3)", (sem,))
time.sleep(0.05)
cur.execute("SELECT le_expire_lapsed()")
cur.execute("SELECT le_release(%s, 'h1')", (sem,))
cur.execute("SELECT le_try_acquire(%s, 'h5', '1 hour', slots => 3)", (sem,))
cur.execute("SELECT le_try_acquire(%s, 'h5', '1 hour', value => '7', slots => 3)", (sem,))  # extends, proclaims
cur.execute("SELECT le_force_release(%s)", (sem,))                                   # h5 (slot 1), h3 (slot 2)
cur.execute("SELECT le_try_acquire(%s, 'solo', '1 hour')", (sem,))                  # one slot again
cur.execute("SELECT le_release(%s, 'solo')", (sem,))
got = [p for p in drain(15) if json.loads(p)["key"] == sem]
want_shape = [("acquired", "h1", 1), ("acquired", "h2", 2), ("proclaimed", "h1", 1), ("expired", "h2", 2),
              ("acquired", "h3", 3), ("acquired", "h4", 4), ("expired", "h4", 4), ("released", "h1", 1),
              ("acquired", "h5", 5), ("proclaimed", "h5", 5), ("released", "h5", 5), ("released", "h3", 3),
              ("acquired", "solo", 6), ("released", "solo", 6)]
ev = [json.loads(p) for p in got]
if [(e["event"], e["holder"], e["term"]) for e in ev] != want_shape:
    failures.append(f"key of many slots announced {[(e['event'], e['holder'], e['term']) for e in ev]}, "
                    f"want {want_shape}")
else:
    def sem_payload(i, event, holder, term, **rest):
        slots = rest.pop("slots", 3)
        d = dict(rest)
        if slots:
            d["slots"] = slots
        return compiled(event, sem, holder, term, ev[i]["at"], **d)
    want = [
        sem_payload(0, "acquired", "h1", 1, previous_holder=None, expires_at=ev[0]["expires_at"], value="@V@")
        .replace('"@V@"', sem_value_text),
        sem_payload(1, "acquired", "h2", 2, previous_holder=None, expires_at=ev[1]["expires_at"], value=None),
        sem_payload(2, "proclaimed", "h1", 1, value="@V@").replace('"@V@"', "[1, 2]"),
        sem_payload(3, "expired", "h2", 2, expires_at=ev[3]["expires_at"], reason="ttl"),
        sem_payload(4, "acquired", "h3", 3, previous_holder="h2", expires_at=ev[4]["expires_at"], value=None),
        sem_payload(5, "acquired", "h4", 4, previous_holder=None, expires_at=ev[5]["expires_at"], value=None),
        sem_payload(6, "expired", "h4", 4, expires_at=ev[6]["expires_at"], reason="ttl"),
        sem_payload(7, "released", "h1", 1, forced=False),
        sem_payload(8, "acquired", "h5", 5, previous_holder=None, expires_at=ev[8]["expires_at"], value=None),
        sem_payload(9, "proclaimed", "h5", 5, value=7),
        sem_payload(10, "released", "h5", 5, forced=True),
        sem_payload(11, "released", "h3", 3, forced=True),
        sem_payload(12, "acquired", "solo", 6, previous_holder=None, expires_at=ev[12]["expires_at"], value=None,
                    slots=None),
        sem_payload(13, "released", "solo", 6, forced=False, slots=None),
    ]
    for g, w in zip(got, want):
        if g != w:
            failures.append(f"key of many slots: payload\n   got  {g!r}\n   want {w!r}")
    # a takeover announces the old tenure's end and the new start at once
    if ev[3]["at"] != ev[4]["at"] or ev[10]["at"] != ev[11]["at"]:
        failures.append("key of many slots: a takeover's or a forced release's payloads at different times")
# le_release_all over keys of many slots and of one: each released
# tenure announced, "slots" only where the key admits more than one.
drain(10, 0.2)
cur.execute("SELECT le_try_acquire('all-sem-3', 'rall', '1 hour', slots => 3), "
            "le_try_acquire('all-sem-2', 'rall', '1 hour', slots => 2), le_try_acquire('all-one', 'rall', '1 hour')")
drain(3)
cur.execute("SELECT le_release_all('rall')")
n_all = cur.fetchone()[0]
got = drain(3)
ev = {json.loads(p)["key"]: (p, json.loads(p)) for p in got}
terms = {k: 1 for k in ("all-sem-3", "all-sem-2", "all-one")}
if n_all != 3 or sorted(ev) != sorted(terms) or drain(1, 0.3):
    failures.append(f"le_release_all over keys of many slots: {n_all}, {got}")
else:
    for k, slots in (("all-sem-3", 3), ("all-sem-2", 2), ("all-one", None)):
        extra = {"slots": slots} if slots else {}
        want = compiled("released", k, "rall", 1, ev[k][1]["at"], forced=False, **extra)
        if ev[k][0] != want:
            failures.append(f"le_release_all payload\n   got  {ev[k][0]!r}\n   want {want!r}")

# Contracts 24 and 25: a schedule's runs (a claim that replaces another
# run's, the instants le_expire_lapsed records missed) and a key expected
# to be led (its leaderless interval's start and end, by le_expire_lapsed
# and by le_unexpect_leader), byte for byte: "job" and "due" for runs
# (notify.rs RunPayload), "since", "until", "within_seconds", "seconds" as
# serde_json writes them for the marks (LeaderlessPayload).
def run_payload(event, job, due, at, **rest):
    d = {"event": event, "job": job, "due": due}
    for k in ("holder", "term"):
        if k in rest:
            d[k] = rest.pop(k)
    d["at"] = at
    d.update(rest)
    return json.dumps(d, separators=(",", ":"), ensure_ascii=False)


def seconds_between(since, until):
    def us(t):
        cur.execute("SELECT extract(epoch FROM %s::timestamptz) * 1000000", (t,))
        return int(cur.fetchone()[0])
    return (us(until) - us(since)) / 1e6


drain(20, 0.2)
sjob = 'sched "q" \\ é\x04'
cur.execute("SELECT le_schedule(%s, every => '1 second', misfire_grace => '1 hour', overlap => 'replace')",
            (sjob,))
time.sleep(2.2)
cur.execute("SELECT date_trunc('second', active_since) + interval '1 second', "
            "date_trunc('second', active_since) + interval '2 seconds' FROM leaderlock_schedules WHERE job = %s",
            (sjob,))
d1, d2 = cur.fetchone()
cur.execute("SELECT le_claim_run(%s, %s, 'r1', '1 minute'), le_claim_run(%s, %s, 'r2', '1 minute')",
            (sjob, d1, sjob, d2))
t1, t2 = cur.fetchone()
cur.execute("SELECT le_schedule(%s, every => '1 second', misfire_grace => '0 seconds', overlap => 'replace')",
            (sjob,))
time.sleep(1.1)
cur.execute("SELECT le_expire_lapsed()")
cur.execute("SELECT to_char(due AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') FROM leaderlock_runs "
            "WHERE job = %s AND outcome = 'missed' ORDER BY due", (sjob,))
missed_dues = [r[0] for r in cur.fetchall()]
got = [p for p in drain(2 + len(missed_dues) * 2 + 2) if json.loads(p).get("job") == sjob]
ev = [json.loads(p) for p in got]
shape = [(e["event"], e.get("holder"), e.get("outcome")) for e in ev]
want_shape = ([("run_claimed", "r1", None), ("run_finished", "r1", "replaced"), ("run_claimed", "r2", None)]
              + [("run_missed", None, None)] * len(missed_dues))
if (t1, t2) != (1, 2) or not missed_dues or shape != want_shape:
    failures.append(f"a schedule's runs: terms {t1}, {t2}, missed {missed_dues}, announced {shape}, "
                    f"want {want_shape}")
else:
    want = [
        run_payload("run_claimed", sjob, ev[0]["due"], ev[0]["at"], holder="r1", term=1,
                    expires_at=ev[0]["expires_at"], attempt=1),
        run_payload("run_finished", sjob, ev[0]["due"], ev[1]["at"], holder="r1", term=1, outcome="replaced"),
        run_payload("run_claimed", sjob, ev[2]["due"], ev[1]["at"], holder="r2", term=2,
                    expires_at=ev[2]["expires_at"], attempt=1),
    ] + [run_payload("run_missed", sjob, d, ev[3]["at"]) for d in missed_dues]
    for g, w in zip(got, want):
        if g != w:
            failures.append(f"a schedule's runs: payload\n   got  {g!r}\n   want {w!r}")
# a pause and a resume (notify.rs SchedulePayload: "event", "job", "at")
cur.execute("SELECT le_pause_schedule(%s), le_resume_schedule(%s)", (sjob, sjob))
got = [p for p in drain(8) if json.loads(p).get("event", "").startswith("schedule_")]
ev = [json.loads(p) for p in got]
want = [json.dumps({"event": e, "job": sjob, "at": ev[i]["at"] if i < len(ev) else None},
                   separators=(",", ":"), ensure_ascii=False)
        for i, e in enumerate(("schedule_paused", "schedule_resumed"))]
if got != want:
    failures.append(f"a schedule paused and resumed: payloads\n   got  {got!r}\n   want {want!r}")
cur.execute("SELECT le_unschedule(%s)", (sjob,))

mkey = 'mark "q" \\ é\x05'
cur.execute("SELECT le_expect_leader(%s, '1 second')", (mkey,))
cur.execute("SELECT to_char(marked_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') "
            "FROM leaderlock_expected WHERE key = %s", (mkey,))
marked = cur.fetchone()[0]
time.sleep(1.2)
cur.execute("SELECT le_expire_lapsed()")
cur.execute("SELECT le_try_acquire(%s, 'h', '1 hour')", (mkey,))
cur.execute("SELECT to_char(acquired_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') "
            "FROM leaderlock WHERE key = %s", (mkey,))
began = cur.fetchone()[0]
time.sleep(1.1)
cur.execute("SELECT le_expire_lapsed()")
cur.execute("SELECT le_release(%s, 'h')", (mkey,))
cur.execute("SELECT to_char(expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') "
            "FROM leaderlock WHERE key = %s", (mkey,))
released = cur.fetchone()[0]
time.sleep(1.2)
cur.execute("SELECT le_expire_lapsed()")
cur.execute("SELECT le_unexpect_leader(%s)", (mkey,))
got = [p for p in drain(8) if json.loads(p).get("key") == mkey and "leaderless" in json.loads(p)["event"]]
ev = [json.loads(p) for p in got]
if [e["event"] for e in ev] != ["leaderless", "leaderless_end", "leaderless", "leaderless_end"]:
    failures.append(f"a key expected to be led announced {got}")
else:
    def mark_payload(event, since, at, **rest):
        d = {"event": event, "key": mkey, "since": since}
        d.update(rest)
        d["at"] = at
        return json.dumps(d, separators=(",", ":"), ensure_ascii=False)
    want = [
        mark_payload("leaderless", marked, ev[0]["at"], within_seconds=1.0),
        mark_payload("leaderless_end", marked, ev[1]["at"], until=began, seconds=seconds_between(marked, began)),
        mark_payload("leaderless", released, ev[2]["at"], within_seconds=1.0),
        mark_payload("leaderless_end", released, ev[3]["at"], until=ev[3]["at"],
                     seconds=seconds_between(released, ev[3]["at"])),
    ]
    for g, w in zip(got, want):
        if g != w:
            failures.append(f"a key expected to be led: payload\n   got  {g!r}\n   want {w!r}")

# Contract 26: a group's partitions (announce/groups.rs Payload: "event",
# "group", "partition", "member", "term", "until" for a revocation, "at"),
# byte for byte: a grant, a revocation, its ack's grant to the next owner,
# and a leave's grants.
grp = 'grp "q" \\ é\x06'
drain(20, 0.2)
cur.execute("SELECT le_join(%s, 'm\"1', '1 hour', 2, '0') IS NOT NULL", (grp,))
cur.execute("SELECT le_join(%s, 'm2', '1 hour') IS NOT NULL", (grp,))
cur.execute("SELECT le_ack(%s, 'm\"1', 2, 1), le_leave(%s, 'm\"1')", (grp, grp))
got = [p for p in drain(6) if json.loads(p).get("group") == grp]
ev = [json.loads(p) for p in got]


def part_payload(i, event, partition, member, term, **rest):
    d = {"event": event, "group": grp, "partition": partition, "member": member, "term": term}
    d.update(rest)
    d["at"] = ev[i]["at"] if i < len(ev) else None
    return json.dumps(d, separators=(",", ":"), ensure_ascii=False)


want = [
    part_payload(0, "partition_granted", 1, 'm"1', 1),
    part_payload(1, "partition_granted", 2, 'm"1', 1),
    part_payload(2, "partition_revoked", 2, 'm"1', 1, until=ev[2].get("until") if len(ev) > 2 else None),
    part_payload(3, "partition_granted", 2, "m2", 2),
    part_payload(4, "partition_granted", 1, "m2", 2),
]
if got != want:
    failures.append(f"a group's partitions: payloads\n   got  {got!r}\n   want {want!r}")
cur.execute("SELECT le_leave(%s, 'm2')", (grp,))

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

# ... and, for a key of many slots, the first slot that frees (contract 17).
cur.execute("SELECT le_try_acquire('wake-sem', 'h1', '1 hour', slots => 2), "
            "le_try_acquire('wake-sem', 'h2', '1 hour', slots => 2)")
result.clear()


def slot_waiter():
    c = psycopg2.connect(DSN)
    c.autocommit = True
    k = c.cursor()
    k.execute("SELECT le_acquire('wake-sem', 'waiter', '1 hour', '5 seconds', slots => 2), clock_timestamp()")
    result["won"], result["at"] = k.fetchone()
    c.close()


t = threading.Thread(target=slot_waiter)
t.start()
time.sleep(0.5)
released_at = rfc(cur, "SELECT clock_timestamp() FROM (SELECT le_release('wake-sem', 'h2')) r")[0]
t.join()
lag = (result["at"] - released_at).total_seconds()
cur.execute("SELECT array_agg(holder ORDER BY term) FROM le_holders('wake-sem')")
holders = cur.fetchone()[0]
print(f"  le_acquire, slots => 2: a tenure released -> waiter returned in {lag * 1000:.0f} ms")
if not result["won"] or lag > 0.15 or holders != ["h1", "waiter"]:
    failures.append(f"slot waiter won={result['won']} after {lag:.3f} s (want <= 0.15 s), holders {holders}")

if failures:
    for f in failures:
        print("  FAIL:", f)
    sys.exit(1)
print("  ok: 7 payloads, le_release_all's, 14 of a key of many slots, a schedule's (replaced, missed) and a "
      "key expected to be led's (leaderless, leaderless_end) and a group's (partition_granted, _revoked) byte-identical to the compiled edition's; "
      "le_renew_all and le_release_all skip a locked row at once; le_acquire wakes by polling in time, for "
      "a lease and for a slot")
