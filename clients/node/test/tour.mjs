// The Node.js client's tour (tests/clients/hostile.py, tours.py): sends
// every statement of the library through its public API, checks each
// answer, and exits non-zero with a message on any unexpected one.
//
//   node tour.mjs DSN PREFIX [--pooled]
//
// Every key and job starts with PREFIX. --pooled: DSN goes through
// pgbouncer in transaction pooling (the library does the same there; the
// step that terminates the lease's backend is left out, as a client's
// connection to pgbouncer is not a backend). LEADERLOCK_SCHEMA, when set,
// names leaderlock's schema (the portable edition installed by its script,
// next to a look-alike). Every statement sent is recorded (pg.Client's
// query, which the library calls): at the end the tour names the statement
// constants of src/ it did not reach, and why, and fails on any it
// should have reached. Its own statements (a second connection: locks,
// rivals, checks) are written as the library's must be: qualified.
import pg from "pg";
import { performance } from "node:perf_hooks";
import {
  lead, Elector, openSession, schedule, watchHistory, member, NotAcquired, NotInstalledError, BadArgumentError,
} from "../dist/esm/index.js";
import { constants } from "./statements.mjs";

const [DSN, PREFIX] = process.argv.slice(2);
const POOLED = process.argv.includes("--pooled");
if (!DSN || !PREFIX) {
  console.error("usage: node tour.mjs DSN PREFIX [--pooled]");
  process.exit(2);
}
const SCHEMA = process.env.LEADERLOCK_SCHEMA || null;
// tests/clients/hostile.py says which edition the database has (portable: no priorities, no schedules kept in it).
const PORTABLE = process.env.LEADERLOCK_TOUR_EDITION === "portable";
// Whether the server has groups (contract 26: the compiled edition's), asked in main().
let GROUPS = false;

// Every statement text any pg.Client of this process sends (the library's `pg` is this one).
const sent = new Set();
const query = pg.Client.prototype.query;
pg.Client.prototype.query = function (config, ...rest) {
  sent.add(typeof config === "string" ? config : config?.text ?? "");
  return query.call(this, config, ...rest);
};

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const now = () => performance.now();
const warnings = [];
process.removeAllListeners("warning"); // kept, not printed: a step checks them
process.on("warning", (w) => warnings.push(String(w.message)));

class Unexpected extends Error {}
function check(ok, what) {
  if (!ok) throw new Unexpected(what);
}
async function rejects(promise, cls, what) {
  try {
    await promise;
  } catch (e) {
    check(e instanceof cls, `${what}: ${e?.name}: ${e?.message}`);
    return e;
  }
  throw new Unexpected(`${what}: resolved`);
}

// The extension's schema, found as the library finds it (the statement every client shares).
const FIND_SCHEMA = `SELECT pg_catalog.quote_ident(n.nspname::pg_catalog.text)
FROM pg_catalog.pg_namespace n
WHERE ($1::pg_catalog.text IS NULL OR n.nspname OPERATOR(pg_catalog.=) $1::pg_catalog.name)
  AND CASE WHEN EXISTS (SELECT FROM pg_catalog.pg_extension e
                        WHERE e.extname OPERATOR(pg_catalog.=) 'leaderlock'::pg_catalog.name)
      THEN n.oid OPERATOR(pg_catalog.=) ANY (ARRAY(
             SELECT e.extnamespace FROM pg_catalog.pg_extension e
             WHERE e.extname OPERATOR(pg_catalog.=) 'leaderlock'::pg_catalog.name))
      ELSE EXISTS (SELECT FROM pg_catalog.pg_proc p
                   WHERE p.pronamespace OPERATOR(pg_catalog.=) n.oid
                     AND p.proname OPERATOR(pg_catalog.=) 'le_capabilities'::pg_catalog.name
                     AND p.pronargs OPERATOR(pg_catalog.=) 0::pg_catalog.int2)
  END
ORDER BY 1`;

/** The tour's own connection (not the library's). */
async function connectSide() {
  const c = new pg.Client({ connectionString: DSN, application_name: "leaderlock node tour" });
  c.on("error", () => {});
  await c.connect();
  return c;
}
let side;
let S; // the schema, quoted
const one = async (text, values = []) => {
  const rows = (await side.query(text, values)).rows;
  return rows.length ? Object.values(rows[0])[0] : null;
};
const leaderOf = (key) => one(`SELECT ${S}.le_leader(key => $1)`, [key]);

const key = (name) => `${PREFIX}-${name}`;
const withParam = (url, name, value) => `${url}${url.includes("?") ? "&" : "?"}${name}=${encodeURIComponent(value)}`;

const failures = [];
const skipped = [];
async function step(name, fn, seconds = 20) {
  const t0 = now();
  let timer;
  try {
    const said = await Promise.race([fn(), new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Unexpected(`no answer in ${seconds} s`)), seconds * 1000);
    })]);
    console.log(`ok    ${name} (${Math.round(now() - t0)} ms)${said ? `: ${said}` : ""}`);
  } catch (e) {
    failures.push(name);
    console.log(`FAIL  ${name}: ${e instanceof Unexpected ? e.message : `${e?.name}: ${e?.message}`}`);
  } finally {
    clearTimeout(timer);
  }
}

// ---------------------------------------------------------------- the history, watched throughout

const watched = [];
let watcher;
let watching;

// ---------------------------------------------------------------- the steps

async function main() {
  let candidates = [];
  await step("schema: the extension's schema (the tour's own lookup)", async () => {
    side = await connectSide();
    candidates = (await side.query(FIND_SCHEMA, [null])).rows.map((r) => Object.values(r)[0]);
    const named = (await side.query(FIND_SCHEMA, [SCHEMA])).rows.map((r) => Object.values(r)[0]);
    check(named.length === 1, `the schema is ambiguous or missing: ${JSON.stringify(named)}`);
    S = named[0];
    return `${S} (candidates ${candidates.join(", ")})`;
  });
  if (!S) return;

  await step("watchHistory(): from now on, keys of the prefix", async () => {
    watcher = watchHistory(DSN, { keyPrefix: PREFIX, pollMs: 100 });
    const first = watcher.next(); // connects: le_history_position, then le_history
    watching = (async () => {
      let r = await first;
      while (!r.done) {
        watched.push(r.value);
        r = await watcher.next();
      }
    })();
    watching.catch(() => {});
    // the watcher has connected once its start is known
    const t0 = now();
    while (watcher.position === undefined && !watcher.failed && now() - t0 < 5000) await sleep(10);
    check(watcher.position !== undefined, `the watcher did not start: ${watcher.failed?.message}`);
    return `position ${watcher.position}`;
  });

  const k1 = key("lead");
  let firstTerm = 0;
  await step("lead(): acquire (read-write target), value, term, renew, guard, guarded, a refused rival, release", async () => {
    const value = { tour: PREFIX };
    const id = `${PREFIX}:leader`;
    firstTerm = await lead(withParam(DSN, "target_session_attrs", "read-write"), k1, { ttl: 1.5, timeout: 3, id, value },
                           async (lease) => {
      check(lease.term > 0 && lease.id === id && lease.valid, `lease ${lease.term} ${lease.id} ${lease.valid}`);
      check(lease.value === value, "the value");
      check((await leaderOf(k1)) === id, "the server names another leader");
      const proclaimed = await one(`SELECT l.value::pg_catalog.text FROM ${S}.le_lease(key => $1) l`, [k1]);
      check(JSON.parse(proclaimed ?? "null")?.tour === PREFIX, `le_lease's value: ${proclaimed}`);
      // a rival's one try: refused, names the holder
      const refused = await rejects(lead(DSN, k1, { ttl: 1.5, timeout: 0, id: `${PREFIX}:rival` }, async () => {}),
                                    NotAcquired, "a rival's try");
      check(refused.holder === id, `the refusal names ${refused.holder}`);
      // fenced writes
      const term = await lease.guarded(side, async (tx) => Number(Object.values((await tx.query("SELECT 1 AS x")).rows[0])[0]));
      check(term === 1, "guarded's result");
      await side.query("BEGIN");
      try {
        check((await lease.guard(side)) === lease.term, "guard's term");
      } finally {
        await side.query("COMMIT");
      }
      // renewals (every 500 ms)
      await sleep(700);
      check(lease.valid && lease.remaining > 600, `after a renewal: valid ${lease.valid}, ${lease.remaining} ms left`);
      // a renewal that meets the row share-locked: refused, then "still ours?" says retry; the lease goes on
      await side.query("BEGIN");
      try {
        await side.query(`SELECT ${S}.le_assert_leader(key => $1, id => $2, term => $3::bigint)`, [k1, id, String(lease.term)]);
        await sleep(800);
      } finally {
        await side.query("COMMIT");
      }
      await sleep(600);
      check(lease.valid, `lost while the row was locked: ${lease.signal.reason?.message}`);
      return lease.term;
    });
    check((await leaderOf(k1)) === null, "still held after lead() returned");
    return `term ${firstTerm}`;
  });

  await step("Elector: elected, the leader, stop (released)", async () => {
    const k = key("elector");
    const e = new Elector(DSN, k, { ttl: 1.5, id: `${PREFIX}:elector` });
    const events = [];
    const elected = new Promise((resolve, reject) => {
      e.on("elected", resolve);
      e.on("error", reject);
    });
    e.on("leader", (h) => events.push(`leader ${h}`));
    e.on("revoked", (why) => events.push(`revoked ${why}`));
    e.start();
    try {
      const lease = await elected;
      check(lease.term > 0 && (await leaderOf(k)) === e.id, "elected, not leading on the server");
    } finally {
      await e.stop();
    }
    check(events.includes(`leader ${e.id}`) && events.includes("revoked released"), events.join(", "));
    check((await leaderOf(k)) === null, "still held after stop()");
    return events.join(", ");
  });

  await step("lead() waits while a rival holds the key with other slots (one warning), then leads", async () => {
    const k = key("slots");
    check(await one(`SELECT ${S}.le_try_acquire(key => $1, id => 'rival', ttl => pg_catalog.make_interval(secs => 30), slots => 3)`, [k]),
          "the rival's acquire");
    const gone = sleep(500).then(() => one(`SELECT ${S}.le_release(key => $1, id => 'rival')`, [k]));
    const before = warnings.length;
    const t0 = now();
    await lead(DSN, k, { ttl: 1.5, timeout: 5 }, async () => check(now() - t0 >= 450, "led while the rival held the key"));
    await gone;
    const said = warnings.slice(before).filter((w) => w.includes("another number of slots"));
    check(said.length === 1, `${said.length} warnings`);
  });

  if (POOLED) {
    skipped.push("the release that heard no answer (terminates the lease's backend: not one behind pgbouncer)");
  } else {
    await step("a release that hears no answer is sent again before the next try; held meanwhile (its row locked)", async () => {
      const k = key("unanswered");
      const id = `${PREFIX}:unanswered`;
      const config = { connectionString: DSN, application_name: `tour ${PREFIX}` };
      const term = await lead(config, k, { ttl: 3, timeout: 3, id }, async (lease) => {
        const n = await one("SELECT pg_catalog.count(pg_catalog.pg_terminate_backend(a.pid)) FROM pg_catalog.pg_stat_activity a " +
                            "WHERE a.application_name OPERATOR(pg_catalog.=) $1", [config.application_name]);
        check(Number(n) === 1, `terminated ${n} backends`);
        await sleep(100);
        check((await lease.release()) === false, "the release on a terminated connection said released");
        return lease.term;
      });
      check((await leaderOf(k)) === id, "the tenure is not held any more");
      // the row locked by another transaction: the release sent again is refused, and the tenure still held
      await side.query("BEGIN");
      let committed = Infinity;
      let ledAt = 0;
      let again;
      try {
        await side.query(`SELECT ${S}.le_assert_leader(key => $1, id => $2, term => $3::bigint)`, [k, id, String(term)]);
        again = lead(config, k, { ttl: 3, timeout: 5, id }, async (lease) => {
          ledAt = now();
          return lease.term;
        });
        await sleep(400);
      } finally {
        committed = now();
        await side.query("COMMIT");
      }
      const next = await again;
      check(ledAt >= committed, "led again while the release could not end the tenure");
      check(next > term, `the new term ${next} is not above ${term}`);
      return `terms ${term}, ${next}`;
    });
  }

  await step("the schema option: a schema that does not hold leaderlock", async () => {
    const e = await rejects(lead(DSN, key("no-schema"), { timeout: 0, schema: `${PREFIX}_none` }, async () => {}),
                            NotInstalledError, "lead() in a schema without leaderlock");
    return e.message;
  });

  if (candidates.length > 1) {
    await step("several schemas hold leaderlock's functions: refused without the schema option", async () => {
      const saved = process.env.LEADERLOCK_SCHEMA;
      delete process.env.LEADERLOCK_SCHEMA;
      try {
        const e = await rejects(lead(DSN, key("ambiguous"), { timeout: 0 }, async () => {}), BadArgumentError,
                                "lead() with two candidate schemas");
        check(/several schemas/.test(e.message), e.message);
        return e.message;
      } finally {
        if (saved !== undefined) process.env.LEADERLOCK_SCHEMA = saved;
      }
    });
  }

  await step("sessions: open, acquire under it (term), a refused and a ranked waiting acquire, renew, release, close", async () => {
    const k = key("session");
    // priorities: the compiled edition's
    const ranked = await one(`SELECT coalesce((${S}.le_capabilities() OPERATOR(pg_catalog.->>) 'priority')::boolean, false)`);
    const priority = (n) => (ranked ? { priority: n } : {});
    const s1 = await openSession(DSN, { ttl: 1.5, id: `${PREFIX}:s1`, keepValues: true, lockDelay: 0 });
    const s2 = await openSession({ dsn: DSN, ttl: 1.5, id: `${PREFIX}:s2` });
    try {
      const l1 = await s1.tryAcquire(k, { value: { n: 1 } });
      check(l1 && l1.term > 0 && l1.valid, "tryAcquire under a session");
      check((await leaderOf(k)) === s1.id, "the server names another holder");
      check((await s2.tryAcquire(k)) === null, "a second session's tryAcquire of a held key");
      const refused = await rejects(s2.acquire(k, { timeout: 0.2, ...priority(2) }), NotAcquired, "a waiting acquire");
      check(refused.holder === s1.id, `the refusal names ${refused.holder}`);
      check((await l1.guarded(side, async () => "done")) === "done", "guarded under a session");
      await sleep(700); // a renewal every 500 ms
      check(s1.valid && s2.valid && l1.valid, "the sessions lapsed");
      // s2 waits (priority 1), s1 releases: s2 gets it
      const waiting = s2.acquire(k, { timeout: 3, ...priority(1), value: { n: 2 } });
      await sleep(200);
      check((await l1.release()) === true, "the release under a session");
      const l2 = await waiting;
      check(l2.term > l1.term && (await leaderOf(k)) === s2.id, `after the hand-over: term ${l2.term}`);
      return `terms ${l1.term}, ${l2.term}${ranked ? ", with priorities" : " (no priorities in this edition)"}`;
    } finally {
      const closed = [await s1.close(), await s2.close()];
      check(closed[0] && closed[1], `close: ${closed}`);
      check((await leaderOf(k)) === null, "held after the sessions closed");
    }
  });

  await step("schedule(): two replicas every 500 ms, a run claimed, renewed and finished once, a failed one, the refused claim", async () => {
    const job = key("job");
    const stop = new AbortController();
    const runs = [];
    const replica = (id) => schedule(DSN, job, { every: 500, ttlMs: 1500, pollMs: 100, id, signal: stop.signal }, async (run) => {
      const n = runs.push({ id, due: run.due.getTime(), term: run.term });
      await sleep(run.term % 2n === 0n ? 100 : 650); // one renewal (every 500 ms) in the long ones
      run.check();
      if (n === 2) throw new Error("the tour's failed run");
    });
    const both = Promise.all([replica(`${PREFIX}:r1`), replica(`${PREFIX}:r2`)]);
    await sleep(2200);
    stop.abort();
    await both;
    check(runs.length >= 2, `${runs.length} runs`);
    const dues = runs.map((r) => r.due);
    check(new Set(dues).size === dues.length, `a due instant ran twice: ${dues}`);
    const outcomes = (await side.query(
      `SELECT r.outcome::pg_catalog.text AS o FROM ${S}.leaderlock_runs r WHERE r.job OPERATOR(pg_catalog.=) $1 ` +
      "AND r.finished_at IS NOT NULL ORDER BY r.due", [job])).rows.map((r) => r.o);
    check(outcomes.includes("failed") && outcomes.includes("succeeded"), `outcomes ${outcomes}`);
    return `${runs.length} runs, outcomes ${outcomes.join(" ")}`;
  });

  if (!PORTABLE) { // (the portable edition keeps no schedule)
    await step("schedule() by the job's name alone: its schedule kept in the database, every second, then paused", async () => {
      const job = key("registered");
      await one(`SELECT ${S}.le_schedule(job => $1, every => pg_catalog.make_interval(secs => 1))`, [job]);
      const stop = new AbortController();
      const runs = [];
      const done = schedule(DSN, job, { ttlMs: 1500, pollMs: 100, id: `${PREFIX}:registered`, signal: stop.signal }, async (run) => {
        runs.push(run.due.getTime());
        run.check();
      });
      try {
        const t0 = now();
        while (runs.length < 2 && now() - t0 < 4000) await sleep(20);
        check(await one(`SELECT ${S}.le_pause_schedule(job => $1)`, [job]), "le_pause_schedule");
        await sleep(300);
        const paused = runs.length;
        await sleep(1200);
        check(runs.length === paused, `ran while paused: ${runs.length - paused}`);
      } finally {
        stop.abort();
        await done;
        await one(`SELECT ${S}.le_unschedule(job => $1)`, [job]);
      }
      check(runs.length >= 2 && runs.every((d) => d % 1000 === 0) && new Set(runs).size === runs.length, `due ${runs}`);
      return `${runs.length} runs`;
    });
  }

  GROUPS = await one(`SELECT coalesce((${S}.le_capabilities() OPERATOR(pg_catalog.->>) 'groups')::boolean, false)`);
  if (GROUPS) {
    await step("member(): two members share 4 partitions, revoked ones drained and given back, guard, guarded, " +
               "a stale term refused, both leave", async () => {
      const group = key("group");
      const drained = [];
      const a = await member(DSN, { group, member: `${PREFIX}:a`, ttl: 1.5, partitions: 4, drain: 2,
                                    onRevoked: async (p) => { await sleep(50); drained.push(p); } });
      let b;
      let moved;
      try {
        check(a.owned().size === 4, `the first member owns ${[...a.owned().keys()]}`);
        b = await member(DSN, { group, member: `${PREFIX}:b`, ttl: 1.5 });
        const t0 = now();
        while (!(a.owned().size === 2 && b.owned().size === 2) && now() - t0 < 5000) await sleep(10);
        check(a.owned().size === 2 && b.owned().size === 2, `a owns ${[...a.owned().keys()]}, b ${[...b.owned().keys()]}`);
        check(drained.length === 2, `drained ${drained}`);
        const [p, term] = [...b.owned()][0];
        check(term > 1n, `the newcomer's term ${term}`);
        moved = `partition ${p} moved, term ${term}`;
        await side.query("BEGIN");
        try {
          check((await b.guard(side, p)) === term, "the guard's term");
        } finally {
          await side.query("COMMIT");
        }
        check((await b.guarded(side, p, async (tx) => (await tx.query("SELECT 1 AS x")).rows[0].x)) === 1, "guarded's result");
        // the term the first member held it in: refused by the server (the tour's own call)
        await side.query("BEGIN");
        let code;
        try {
          await side.query(`SELECT ${S}.le_assert_partition("group" => $1, partition => $2::pg_catalog.int4, member => $3, ` +
                           "term => $4::bigint)", [group, p, a.member, "1"]);
        } catch (e) {
          code = e.code;
        } finally {
          await side.query("ROLLBACK");
        }
        check(code === "LE001", `a stale term: ${code}`);
      } finally {
        const left = [await b?.leave(), await a.leave()];
        check(left.every((l) => l !== false), `leave: ${left}`);
      }
      const owned = await one(`SELECT pg_catalog.count(*) FROM ${S}.leaderlock_partitions p ` +
                              "WHERE p.grp OPERATOR(pg_catalog.=) $1 AND p.member IS NOT NULL", [group]);
      check(Number(owned) === 0, `${owned} partitions still owned after both left`);
      return moved;
    });
  } else {
    skipped.push("groups (contract 26: this edition has none)");
  }

  await step("the history: the watcher saw the tour's transitions; a second one reads after a position", async () => {
    const t0 = now();
    while (!watched.some((t) => t.key === k1 && t.event === "released") && now() - t0 < 3000) await sleep(20);
    const mine = watched.filter((t) => t.key === k1);
    check(mine.some((t) => t.event === "acquired") && mine.some((t) => t.event === "proclaimed") &&
          mine.some((t) => t.event === "released"), `the watcher saw ${mine.map((t) => t.event)}`);
    check(watched.every((t, i) => i === 0 || t.position > watched[i - 1].position), "positions not increasing");
    check(watched.some((t) => t.event === "run_claimed") && watched.some((t) => t.event === "run_finished"),
          `no runs in ${[...new Set(watched.map((t) => t.event))]}`);
    check(watcher.position >= mine.at(-1).position, `position ${watcher.position}`);
    const w2 = watchHistory(DSN, { since: mine[0].position - 1n, key: k1, pollMs: 100 });
    try {
      const again = [];
      for (const _ of mine) again.push((await w2.next()).value);
      check(again.every((t, i) => t.position === mine[i].position && t.event === mine[i].event),
            "the second watcher read other transitions");
    } finally {
      await w2.close();
    }
    return `${watched.length} transitions, ${mine.length} of ${k1}`;
  });

  await watcher?.close();
  await watching;
}

const GROUP_STATEMENTS = ["JOIN_GROUP", "ASSIGNMENT", "ACK_PARTITION", "LEAVE_GROUP", "ASSERT_PARTITION"];

/** Why a statement constant may not be reached here. */
function excuse(name, worker) {
  if (name === "RENEW_LEGACY" || name === "RELEASE_LEGACY" || name === "WORKER_RUNNING") {
    return "only on a schema before 0.5.0 (its 42883)";
  }
  if (name === "EXPIRE_LAPSED" && worker) return "the worker serves this database (lapsed leases expire without it)";
  if (name === "HOLDS" && POOLED) return skipped[0];
  if (name === "NEXT_DUE" && PORTABLE) return "the portable edition keeps no schedule";
  if (GROUP_STATEMENTS.includes(name) && !GROUPS) return "this edition has no groups";
  return null;
}

try {
  await main();
} catch (e) {
  failures.push(`the tour itself: ${e?.stack ?? e}`);
} finally {
  pg.Client.prototype.query = query;
}
if (S) {
  const worker = await one(`SELECT coalesce((${S}.le_capabilities() OPERATOR(pg_catalog.->>) 'worker')::boolean, true)`)
    .catch(() => true);
  const missed = [];
  for (const [name, text] of constants()) {
    if (sent.has(text.split("@extschema@").join(S)) || sent.has(text)) continue;
    const why = excuse(name, worker);
    if (why) console.log(`not reached: ${name}: ${why}`);
    else missed.push(name);
  }
  if (missed.length) {
    console.log(`FAIL  not reached, and should have been: ${missed.join(", ")}`);
    failures.push("statements not reached");
  }
}
await side?.end().catch(() => {});
if (failures.length) {
  console.log(`FAILED: ${failures.length} step(s): ${failures.join("; ")}`);
  process.exit(1);
}
console.log("tour done: every answer as expected");
process.exit(0);
