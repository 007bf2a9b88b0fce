// The history of transitions (contract 23) with the Node.js client:
// watchHistory() against a real server (LEADERLOCK_DSN, a superuser: the
// tests terminate the watcher's backend and set leaderlock.history_max_rows).
import { test } from "node:test";
import assert from "node:assert/strict";
import { performance } from "node:perf_hooks";
import pg from "pg";
import { watchHistory, HistoryWatcher, HistoryPrunedError, RejectedError, BadArgumentError } from "../dist/esm/index.js";
import { DSN, fresh, sleep, sql, until } from "./support.mjs";

/** All rows of `text`, on a connection of its own. */
async function rows(text, values = []) {
  const c = new pg.Client({ connectionString: DSN });
  await c.connect();
  try {
    return (await c.query(text, values)).rows;
  } finally {
    await c.end();
  }
}

/** DSN with its own application_name: the backends of one watcher, to find and terminate. */
function named(app) {
  const u = new URL(DSN);
  u.searchParams.set("application_name", app);
  return u.toString();
}

/** The positions the server holds after `after` for keys starting with `prefix`, in order. */
const positions = async (after, prefix) => (await rows(
  "SELECT position::text AS p FROM le_history(after => $1::bigint, key_prefix => $2, max_rows => 100000)",
  [String(after), prefix])).map((r) => BigInt(r.p));

/** Until every transition of keys starting with `prefix` that committed is numbered. */
// Where no worker serves (the portable edition), le_expire_lapsed numbers.
const numbered = (prefix) => until(async () =>
  (await sql("SELECT le_expire_lapsed()")) >= 0 &&
  (await sql("SELECT count(*)::int FROM leaderlock_history_pending WHERE starts_with(key, $1)", [prefix])) === 0, 5000);

const historyHead = async () => BigInt(await sql("SELECT le_history_position()::text"));
const prunedThrough = async () => BigInt(await sql("SELECT pruned_through::text FROM leaderlock_history_head"));

/** `p`, or a rejection after `ms`. */
function within(p, ms) {
  let timer;
  return Promise.race([p, new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  })]).finally(() => clearTimeout(timer));
}

/** Runs `watcher` into `got` until it ends; resolves with the error that ended it, if any. */
function drain(watcher, got) {
  return (async () => {
    for await (const t of watcher) got.push(t);
  })().then(() => undefined, (e) => e);
}

test("chaos: about 200 transitions while the watcher's backend is terminated 10 times: each delivered once, in order, none missed", async (t) => {
  const prefix = `${fresh("history-chaos")}/`;
  const app = `leaderlock watch ${prefix}`;
  const watcher = watchHistory(named(app), { keyPrefix: prefix });
  const got = [];
  const ended = drain(watcher, got);
  try {
    // since undefined: it starts after le_history_position() at its first connection
    assert.ok(await until(() => watcher.position !== undefined, 5000), "the watcher did not connect");
    const start = watcher.position;
    assert.equal(typeof start, "bigint");

    // Four actors, each on a connection of its own, take and give up three keys for 7 s:
    // mostly released after a moment, one in four left to expire (150 ms: the worker ends it).
    const keys = [0, 1, 2].map((n) => `${prefix}k${n}`);
    const loadUntil = performance.now() + 7000;
    const actor = async (n) => {
      const c = new pg.Client({ connectionString: DSN });
      await c.connect();
      try {
        while (performance.now() < loadUntil) {
          const key = keys[Math.floor(Math.random() * keys.length)];
          const expire = Math.random() < 0.25;
          const won = (await c.query("SELECT le_try_acquire(key => $1, id => $2, ttl => make_interval(secs => $3)) AS ok",
                                     [key, `actor${n}`, expire ? 0.15 : 10])).rows[0].ok;
          await sleep(20 + Math.random() * 40);
          if (won && !expire) await c.query("SELECT le_release(key => $1, id => $2)", [key, `actor${n}`]);
          await sleep(40 + Math.random() * 60);
        }
      } finally {
        await c.end();
      }
    };
    // Ten terminations of the watcher's backend, each of a live one (not one already terminated).
    const killed = new Set();
    const kills = async () => {
      for (let i = 0; i < 10; i++) {
        await sleep(150 + Math.random() * 400);
        if (watcher.failed) return; // reported below
        let pid = null;
        assert.ok(await until(async () => {
          pid = await sql("SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND NOT (pid = ANY ($2::int[]))",
                          [app, [...killed]]);
          return pid !== null;
        }, 6000), `kill ${i + 1}: the watcher did not connect again`);
        const hit = await sql("SELECT pg_terminate_backend($1)", [pid]);
        assert.equal(hit, true, `kill ${i + 1}: backend ${pid} was not live`);
        killed.add(pid);
      }
    };
    await Promise.all([actor(1), actor(2), actor(3), actor(4), kills()]);
    // another test on this server (leaderlock.history_max_rows) may prune past our start: nothing to compare then
    if (await prunedByOthers(t, watcher.failed, start)) return;
    assert.equal(watcher.failed, undefined, `the watcher stopped: ${watcher.failed}`);

    // The end: no live lease of the prefix (those left to expire have expired), every transition numbered.
    assert.ok(await until(async () => (await sql(
      "SELECT count(*)::int FROM leaderlock WHERE starts_with(key, $1) AND holder IS NOT NULL", [prefix])) === 0, 3000),
    "leases of the test still live");
    assert.ok(await numbered(prefix), "transitions of the test still unnumbered");
    let expected;
    try {
      expected = await positions(start, prefix);
    } catch (e) {
      if (await prunedByOthers(t, e, start)) return;
      throw e;
    }
    assert.ok(expected.length >= 100, `only ${expected.length} transitions`);
    const last = expected[expected.length - 1];
    const caughtUp = await until(() => watcher.position >= last || watcher.failed !== undefined, 5000);
    if (await prunedByOthers(t, watcher.failed, start)) return;
    assert.equal(watcher.failed, undefined, `the watcher stopped: ${watcher.failed}`);
    assert.ok(caughtUp, `the watcher is at ${watcher.position}, the history at ${last}`);
    await sleep(200); // a duplicate or a stray row would come now
    await watcher.close();
    assert.equal(await ended, undefined);

    const delivered = got.map((r) => r.position);
    for (let i = 1; i < delivered.length; i++) {
      assert.ok(delivered[i] > delivered[i - 1], `positions not strictly increasing at ${i}: ${delivered[i - 1]}, ${delivered[i]}`);
    }
    assert.deepEqual(delivered, expected, "the watcher delivered exactly the transitions the server holds");
    const terms = new Map();
    for (const r of got) {
      assert.ok(r.key.startsWith(prefix));
      assert.equal(r.payload.event, r.event);
      if (r.term === null) continue;
      assert.ok(r.term >= (terms.get(r.key) ?? 0n), `the term of ${r.key} went down at position ${r.position}`);
      terms.set(r.key, r.term);
    }
    const events = new Set(got.map((r) => r.event));
    for (const e of ["acquired", "released", "expired"]) assert.ok(events.has(e), `no ${e} transition`);
    assert.ok(watcher.reconnects >= 10, `${watcher.reconnects} reconnections for 10 terminations`);
    t.diagnostic(`${delivered.length} transitions, ${watcher.reconnects} reconnections`);
  } finally {
    await watcher.close();
  }
});

/** Skips `t` when `e` is a pruned position and the history was pruned past `start` by another test on this server. */
async function prunedByOthers(t, e, start) {
  if (!(e instanceof HistoryPrunedError || e?.code === "LE002") || (await prunedThrough()) <= start) return false;
  t.skip(`the history was pruned past this test's start meanwhile (leaderlock.history_max_rows): ${e.message}`);
  return true;
}

test("since: a watcher resumes after a position kept from an earlier one", async (t) => {
  const p0 = await historyHead();
  const watchers = [];
  try {
    await resumes(p0, (config, options) => {
      const w = watchHistory(config, options);
      watchers.push(w);
      return w;
    });
  } catch (e) {
    if (!(await prunedByOthers(t, e, p0))) throw e;
  } finally {
    await Promise.all(watchers.map((w) => w.close()));
  }
});

async function resumes(p0, watchHistory) {
  const prefix = `${fresh("history-since")}/`;
  const key = `${prefix}k`;
  await sql("SELECT le_try_acquire(key => $1, id => 'a', ttl => '10s')", [key]);
  await sql("SELECT le_proclaim(key => $1, id => 'a', value => '{\"n\": 1}'::jsonb)", [key]);
  await sql("SELECT le_release(key => $1, id => 'a')", [key]);
  await sql("SELECT le_try_acquire(key => $1, id => 'b', ttl => '10s')", [key]);
  assert.ok(await numbered(prefix));
  const before = await positions(p0, prefix);
  assert.equal(before.length, 4);

  const first = watchHistory(DSN, { since: p0, keyPrefix: prefix });
  const a = (await within(first.next(), 3000)).value;
  assert.equal(typeof a.position, "bigint");
  assert.deepEqual([a.position, a.event, a.key, a.holder, a.term, a.role], [before[0], "acquired", key, "a", a.term, "postgres"]);
  assert.equal(typeof a.term, "bigint");
  assert.ok(a.at instanceof Date && Math.abs(a.at.getTime() - Date.parse(a.payload.at)) < 1000);
  assert.deepEqual([a.payload.event, a.payload.key, a.payload.holder], ["acquired", key, "a"]);
  const b = (await within(first.next(), 3000)).value;
  assert.deepEqual([b.position, b.event, b.payload.value], [before[1], "proclaimed", { n: 1 }]);
  const saved = first.position;
  assert.equal(saved, before[1], "position: the last delivered");
  await first.close();
  assert.deepEqual(await first.next(), { done: true, value: undefined });

  await sql("SELECT le_release(key => $1, id => 'b')", [key]);
  assert.ok(await numbered(prefix));
  const after = (await positions(p0, prefix)).filter((p) => p > saved);
  assert.equal(after.length, 3);
  // kept as text (JSON has no bigint), given back as text; key instead of keyPrefix
  const second = watchHistory(DSN, { since: String(saved), key });
  const got = [];
  const bound = setTimeout(() => second.close(), 3000); // closing ends the loop
  for await (const t of second) {
    got.push(t);
    if (got.length === after.length) break; // leaving the loop closes it
  }
  clearTimeout(bound);
  assert.ok(second.closed);
  assert.deepEqual(got.map((r) => r.position), after);
  assert.deepEqual(got.map((r) => `${r.event} ${r.holder} ${r.term - a.term}`), ["released a 0", "acquired b 1", "released b 1"]);

  // since undefined: only what is numbered from its first connection on
  const fromNow = watchHistory(DSN, { key });
  const next = fromNow.next();
  next.catch(() => {}); // awaited below
  assert.ok(await until(() => fromNow.position !== undefined, 5000));
  assert.ok(fromNow.position >= after[after.length - 1]);
  await sql("SELECT le_try_acquire(key => $1, id => 'c', ttl => '10s')", [key]);
  const c = (await within(next, 3000)).value;
  assert.deepEqual([c.event, c.holder, c.position > after[after.length - 1]], ["acquired", "c", true]);
  await fromNow.close();
  await sql("SELECT le_release(key => $1, id => 'c')", [key]);
}

test("bad options are BadArgumentError at once", () => {
  for (const options of [{ since: -1 }, { since: 1.5 }, { since: "12a" }, { since: 2n ** 63n }, { key: "" },
                         { key: "a", keyPrefix: "b" }, { pollMs: 0 }, { keyPrefix: 3 }]) {
    assert.throws(() => watchHistory(DSN, options), BadArgumentError, JSON.stringify(options, (_, v) => typeof v === "bigint" ? `${v}n` : v));
  }
  assert.ok(new HistoryWatcher(DSN, { since: 0 }) instanceof HistoryWatcher);
});

test("a position the retention pruned: HistoryPrunedError (LE002), and the watcher stops; a quiet watcher is not passed", async () => {
  const prefix = `${fresh("history-pruned")}/`;
  const app = `leaderlock watch ${prefix}`;
  // a watcher of a quiet prefix, while the history moves on
  const quiet = watchHistory(named(app), { keyPrefix: `${prefix}quiet/`, pollMs: 100 });
  try {
    await pruned(quiet, prefix, app);
  } finally {
    await quiet.close();
  }
});

async function pruned(quiet, prefix, app) {
  const pending = quiet.next();
  pending.catch(() => {}); // closed at the end
  assert.ok(await until(() => quiet.position !== undefined, 5000));
  const start = quiet.position;
  // Keep 5 rows, unless another test on this server keeps fewer now (then it resets the setting; if it
  // does so before the retention has passed our start, we set it ourselves).
  let ours = false;
  // The portable edition has no worker: the numbering of le_expire_lapsed
  // reads the administrator's setting, the database's (a session's SET is
  // ignored there), at each call.
  const portable = (await sql("SELECT le_capabilities()->>'edition'")) === "portable";
  const database = (what) =>
    sql(`DO $$ BEGIN EXECUTE 'ALTER DATABASE ' || quote_ident(current_database()) || ' ${what}'; END $$`);
  try {
    if (portable) await database("SET leaderlock.history_max_rows = 5");
    const busy = `${prefix}busy`;
    assert.ok(await until(async () => {
      if (!portable && !ours && Number(await sql("SELECT current_setting('leaderlock.history_max_rows')")) > 5) {
        ours = true;
        await sql("ALTER SYSTEM SET leaderlock.history_max_rows = 5");
        await sql("SELECT pg_reload_conf()");
      }
      const before = BigInt(await sql("SELECT le_history_position()"));
      await sql("SELECT le_try_acquire(key => $1, id => 'a', ttl => '10s')", [busy]);
      await sql("SELECT le_release(key => $1, id => 'a')", [busy]);
      // where no worker serves, it numbers and prunes
      await sql("SELECT le_expire_lapsed()");
      // One pair a numbering (the worker's come at most four a second): a
      // round that numbered more rows than the 5 kept would prune past any
      // reader that had not read since the round before, the quiet one too.
      await until(async () => BigInt(await sql("SELECT le_history_position()")) > before, 2000);
      return (await prunedThrough()) > start;
    }, 10000), "the retention did not prune past the quiet watcher's start");
  } finally {
    if (portable) await database("RESET leaderlock.history_max_rows");
    if (ours) {
      await sql("ALTER SYSTEM RESET leaderlock.history_max_rows");
      await sql("SELECT pg_reload_conf()");
    }
  }
  // The quiet watcher is not passed: with nothing for its filter, its
  // position follows the last one numbered (read in the same statement).
  assert.ok(await until(async () => quiet.position >= (await prunedThrough()), 5000),
            "the quiet watcher's position stayed behind the retention");
  assert.ok(!quiet.closed && !quiet.failed);

  // since a pruned position: the first read refuses it, and the watcher stops
  const through = await prunedThrough();
  const lateApp = `${app} late`;
  const late = watchHistory(named(lateApp), { since: through - 1n });
  const isPruned = (e) => e instanceof HistoryPrunedError && e instanceof RejectedError && e.sqlstate === "LE002" &&
    e.position === through - 1n && /no longer kept/.test(e.message);
  try {
    await assert.rejects(within(late.next(), 3000), isPruned);
    // stopped, never skipping on: the same error again, and its connection closed
    assert.ok(late.closed);
    assert.ok(isPruned(late.failed));
    await assert.rejects(within(late.next(), 1000), isPruned);
    assert.equal(late.position, through - 1n);
    assert.ok(await until(async () => (await sql("SELECT count(*)::int FROM pg_stat_activity WHERE application_name = $1", [lateApp])) === 0, 3000),
              "the watcher's connection is still open");
  } finally {
    await late.close();
  }
}
