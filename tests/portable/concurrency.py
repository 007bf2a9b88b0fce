#!/usr/bin/python3
"""Real concurrent sessions against the portable edition.

8 candidate threads race for 3 keys and a key of 3 slots (contract 17)
with short ttls for DURATION seconds: le_try_acquire or le_acquire
(polling), renewals, releases, and leases left to lapse (taken over, or
vacated by le_expire_lapsed, which a ninth thread calls as pg_cron would).
A listener collects every notification.

Checks, per key, from the server's own timestamps:
  - tenures never overlap: each starts (acquired_at) at or after the end of
    the previous one (its release time, or the expires_at of its last
    successful acquire or renew); of the key of 3 slots, never more than 3
    are live at once;
  - terms only grow, by exactly 1 per tenure (timeline 1), and start in
    the order of their terms;
  - every payload is the compiled edition's JSON (key order, no spaces,
    RFC 3339 UTC times with microseconds; "slots":3 last for the key of 3
    slots only), and each tenure is announced "acquired" once with its
    term;
  - every lapsed tenure is announced "expired" with "reason":"ttl" (after
    a final le_expire_lapsed).

Usage: concurrency.py CONNINFO [DURATION]
"""
import json
import random
import re
import select
import sys
import threading
import time

import psycopg2

DSN = sys.argv[1]
DURATION = float(sys.argv[2]) if len(sys.argv) > 2 else 10.0
SEM_KEY = "race-sem"
SLOTS = 3
KEYS = ["race-0", "race-1", "race-2", SEM_KEY]
THREADS = 8

tenures = []          # dicts: key, holder, term, start, end
tenures_lock = threading.Lock()
errors = []
stop = threading.Event()


def connect():
    conn = psycopg2.connect(DSN)
    conn.autocommit = False
    return conn


def one(cur, sql, args=()):
    cur.execute(sql, args)
    return cur.fetchone()


def candidate(n):
    rnd = random.Random(n)
    conn = connect()
    cur = conn.cursor()
    me = f"cand-{n}"
    try:
        while not stop.is_set():
            key = rnd.choice(KEYS)
            ttl_ms = rnd.choice([30, 50, 80])
            via = "try" if rnd.random() < 0.5 else "acquire"
            slots = SLOTS if key == SEM_KEY else 1
            if via == "try":
                won = one(cur, "SELECT le_try_acquire(%s, %s, %s::interval, slots => %s)",
                          (key, me, f"{ttl_ms} milliseconds", slots))[0]
            else:
                won = one(cur, "SELECT le_acquire(%s, %s, %s::interval, %s::interval, slots => %s)",
                          (key, me, f"{ttl_ms} milliseconds", f"{rnd.choice([0, 20, 100])} milliseconds",
                           slots))[0]
            if not won:
                conn.commit()
                time.sleep(rnd.random() * 0.01)
                continue
            if key == SEM_KEY:
                # its tenure: the latest of this id (read in the transaction
                # that took it: its row is locked until the commit)
                term, start, end, holder = one(
                    cur, "SELECT term, acquired_at, expires_at, holder FROM leaderlock_slots "
                         "WHERE key = %s AND holder = %s ORDER BY term DESC LIMIT 1", (key, me))
                end_sql = "SELECT expires_at FROM leaderlock_slots WHERE key = %s AND term = %s"
            else:
                term, start, end, holder = one(
                    cur, "SELECT term, acquired_at, expires_at, holder FROM leaderlock WHERE key = %s", (key,))
                end_sql = "SELECT expires_at FROM leaderlock WHERE key = %s AND term = %s"
            conn.commit()
            if holder != me:
                errors.append(f"{me} won {key} but the row says holder {holder}")
                continue
            tenure = {"key": key, "holder": me, "term": term, "start": start, "end": end, "how": "lapsed",
                      "via": via, "ttl": ttl_ms}
            # hold it: renew a few times, then release or let it lapse
            for _ in range(rnd.randint(0, 3)):
                time.sleep(ttl_ms / 1000 * rnd.uniform(0.2, 0.7))
                ok = one(cur, "SELECT le_renew(%s, %s)", (key, me))[0]
                if ok:
                    tenure["end"] = one(cur, end_sql, (key, term))[0]
                conn.commit()
                if not ok:
                    break
            if rnd.random() < 0.6:
                ok = one(cur, "SELECT le_release(%s, %s)", (key, me))[0]
                if ok:
                    tenure["end"] = one(cur, end_sql, (key, term))[0]
                    tenure["how"] = "released"
                conn.commit()
            with tenures_lock:
                tenures.append(tenure)
            time.sleep(rnd.random() * 0.02)
    except Exception as e:  # noqa: BLE001
        errors.append(f"{me}: {e!r}")
    finally:
        conn.close()


def expirer():
    conn = psycopg2.connect(DSN)
    conn.autocommit = True
    cur = conn.cursor()
    while not stop.is_set():
        cur.execute("SELECT le_expire_lapsed()")
        time.sleep(0.05)
    conn.close()


payloads = []


def listener(ready):
    conn = psycopg2.connect(DSN)
    conn.autocommit = True
    cur = conn.cursor()
    cur.execute("LISTEN leaderlock")
    ready.set()
    idle_since = None
    while True:
        if select.select([conn], [], [], 0.2) == ([], [], []):
            if stop.is_set():
                idle_since = idle_since or time.time()
                if time.time() - idle_since > 1.0:
                    break
            continue
        conn.poll()
        while conn.notifies:
            payloads.append(conn.notifies.pop(0).payload)
    conn.close()


TS = r'"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z"'
STR = r'"(?:[^"\\]|\\.)*"'
SHAPES = {
    "acquired": re.compile(r'^\{"event":"acquired","key":%s,"holder":%s,"term":\d+,"at":%s,'
                           r'"previous_holder":(?:null|%s),"expires_at":%s,"value":null(,"slots":3)?\}$'
                           % (STR, STR, TS, STR, TS)),
    "released": re.compile(r'^\{"event":"released","key":%s,"holder":%s,"term":\d+,"at":%s,'
                           r'"forced":false(,"slots":3)?\}$' % (STR, STR, TS)),
    "expired": re.compile(r'^\{"event":"expired","key":%s,"holder":%s,"term":\d+,"at":%s,'
                          r'"expires_at":%s,"reason":"ttl"(,"slots":3)?\}$' % (STR, STR, TS, TS)),
}


def main():
    setup = psycopg2.connect(DSN)
    setup.autocommit = True
    ready = threading.Event()
    lt = threading.Thread(target=listener, args=(ready,))
    lt.start()
    ready.wait()
    threads = [threading.Thread(target=candidate, args=(n,)) for n in range(THREADS)]
    threads.append(threading.Thread(target=expirer))
    for t in threads:
        t.start()
    time.sleep(DURATION)
    stop.set()
    for t in threads:
        t.join()
    time.sleep(0.2)
    cur = setup.cursor()
    cur.execute("SELECT le_expire_lapsed()")   # whatever lapsed since
    lt.join()

    failures = list(errors)
    # A candidate that wins a key it still holds extends its tenure (same
    # term, contract 3.1): one tenure, from its first start to its last end.
    raw = list(tenures)
    merged = {}
    for t in tenures:           # in the order each candidate recorded them
        m = merged.get((t["key"], t["term"]))
        if m is None:
            merged[(t["key"], t["term"])] = dict(t)
            continue
        if m["holder"] != t["holder"]:
            failures.append(f"{t['key']}: term {t['term']} held by {m['holder']} and {t['holder']}")
        m["start"] = min(m["start"], t["start"])
        m["end"], m["how"] = t["end"], t["how"]
    tenures[:] = merged.values()
    by_key = {}
    sem_peak = None
    for t in tenures:
        by_key.setdefault(t["key"], []).append(t)
    for key, ts in sorted(by_key.items()):
        ts.sort(key=lambda t: t["term"])
        for prev, cur_t in zip(ts, ts[1:]):
            if cur_t["term"] != prev["term"] + 1:
                failures.append(f"{key}: term {prev['term']} followed by {cur_t['term']}")
            if key != SEM_KEY and cur_t["start"] < prev["end"]:
                failures.append(f"{key}: term {cur_t['term']} ({cur_t['holder']}) started {cur_t['start']} "
                                f"before term {prev['term']} ({prev['holder']}) ended {prev['end']}")
            if cur_t["start"] <= prev["start"]:
                failures.append(f"{key}: term {cur_t['term']} started before term {prev['term']}")
        if key == SEM_KEY:
            # never more than SLOTS live at once: ends (-1) before starts
            # (+1) at the same instant
            live = peak = 0
            for _, step in sorted([(t["start"], 1) for t in ts] + [(t["end"], -1) for t in ts]):
                live += step
                peak = max(peak, live)
            if peak > SLOTS:
                failures.append(f"{key}: {peak} tenures live at once (slots {SLOTS})")
            sem_peak = peak
    cur.execute("SELECT key, term FROM leaderlock ORDER BY key")
    final = dict(cur.fetchall())
    for key, ts in by_key.items():
        if final.get(key) != ts[-1]["term"]:
            failures.append(f"{key}: table term {final.get(key)}, last recorded tenure {ts[-1]['term']}")

    events = {"acquired": 0, "released": 0, "expired": 0}
    acquired_terms = set()
    expired_terms = set()
    for p in payloads:
        ev = json.loads(p)
        shape = SHAPES.get(ev["event"])
        if shape is None or not shape.match(p) or ("slots" in ev) != (ev["key"] == SEM_KEY):
            failures.append(f"payload not of the compiled edition's shape: {p}")
            continue
        events[ev["event"]] += 1
        if ev["event"] == "acquired":
            acquired_terms.add((ev["key"], ev["term"]))
        if ev["event"] == "expired":
            expired_terms.add((ev["key"], ev["term"]))
    recorded = {(t["key"], t["term"]) for t in tenures}
    if recorded != acquired_terms:
        failures.append(f"tenures {len(recorded)} vs acquired announcements {len(acquired_terms)}: "
                        f"{sorted(recorded ^ acquired_terms)[:5]}")
    lapsed = {(t["key"], t["term"]) for t in tenures if t["how"] == "lapsed"}
    if not lapsed <= expired_terms:
        failures.append(f"lapsed tenures never announced expired: {sorted(lapsed - expired_terms)[:5]}")
    cur.execute("SELECT (SELECT count(*) FROM leaderlock WHERE holder IS NOT NULL)"
                " + (SELECT count(*) FROM leaderlock_slots WHERE holder IS NOT NULL)")
    still_held = cur.fetchone()[0]
    if SEM_KEY not in by_key or len(by_key[SEM_KEY]) <= SLOTS:
        failures.append(f"{SEM_KEY}: too few tenures to tell ({len(by_key.get(SEM_KEY, []))})")

    print(f"  {len(tenures)} tenures on {len(by_key)} keys in {DURATION:.0f} s; "
          f"terms up to {max(final.values()) if final else 0}; "
          f"notifications: {events}; held at the end: {still_held}; "
          f"{SEM_KEY}: {len(by_key.get(SEM_KEY, []))} tenures, at most {sem_peak} live at once")
    if failures:
        for f in failures[:20]:
            print("  FAIL:", f)
        if "--debug" in sys.argv:
            bad = failures[0].split(":")[0], int(re.search(r"term (\d+)", failures[0]).group(1))
            for t in sorted(raw, key=lambda t: t["end"]):
                if t["key"] == bad[0] and abs(t["term"] - bad[1]) <= 1:
                    print("  record", t)
            for p in payloads:
                ev = json.loads(p)
                if ev["key"] == bad[0] and abs(ev["term"] - bad[1]) <= 1:
                    print("  payload", p)
        sys.exit(1)
    print(f"  ok: no overlap (at most {SLOTS} on {SEM_KEY}), terms +1 each tenure, payloads of the compiled "
          "shape, every lapse announced")


if __name__ == "__main__":
    main()
