// The Node.js client against other roles' doings (LEADERLOCK_DSN, a URL
// whose role is a superuser: it makes a role of no rights, and the
// followers count their calls with track_functions = all).
// - A flood of forged `released` notifications from a role with no rights:
//   a waiting candidate's tries stay bounded (one per HINT_FLOOR at most,
//   docs/clients.md), and a real release is still taken over at once.
// - A rival holding the key with another number of slots: the candidate
//   waits (a warning, once) and leads once the rival is gone.
import { test, before } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { performance } from "node:perf_hooks";
import { lead, Elector, NotAcquired } from "../dist/esm/index.js";
import { DSN, fresh, sleep, sql, until } from "./support.mjs";

// The followers' sessions count their function calls (pg_stat_user_functions):
// no other session does, so le_try_acquire's count is theirs.
const TRACKED = { connectionString: DSN, options: "-c track_functions=all" };
const MALLORY = "ll_node_mallory";
const FLOOD_SECONDS = 2;
const MAX_RATE = 120; // tries per second; the rule allows one per 10 ms plus a round trip
const TTL = 20; // polling every ttl/2 = 10 s: a take-over within seconds is a hint's doing



const tries = async () =>
  Number(await sql("SELECT coalesce(sum(calls), 0) AS n FROM pg_stat_user_functions WHERE funcname = 'le_try_acquire'"));

/** The tries of the followers whose sessions start from here on (counted once their backends are gone). */
async function counted() {
  const since = await sql("SELECT clock_timestamp()::text");
  const start = await tries();
  return async () => {
    const left = () => sql("SELECT count(*)::int FROM pg_stat_activity " +
                           "WHERE application_name = 'leaderlock node' AND backend_start >= $1::timestamptz", [since]);
    assert.ok(await until(async () => (await left()) === 0, 15000), "the followers' sessions did not end");
    let last = await tries();
    let steady = performance.now();
    while (performance.now() - steady < 500) {
      await sleep(100);
      const now = await tries();
      if (now !== last) [last, steady] = [now, performance.now()];
    }
    return last - start;
  };
}

/** Forged releases of `key` from the role of no rights, for `seconds`, from a process of its own. */
function flood(key, seconds) {
  const url = new URL(DSN);
  url.username = MALLORY;
  url.password = "";
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [new URL("./flood.mjs", import.meta.url).pathname, url.toString(), key, String(seconds)],
      (err, stdout) => (err ? reject(err) : resolve({ sent: Number(stdout), seconds: (performance.now() - t0) / 1000 })));
  });
}

before(async () => {
  assert.ok(await sql("SELECT rolsuper FROM pg_roles WHERE rolname = current_user"), "LEADERLOCK_DSN's role must be a superuser");
  if (!(await sql("SELECT 1 FROM pg_roles WHERE rolname = $1", [MALLORY]))) await sql(`CREATE ROLE ${MALLORY} LOGIN`);
});

/** Floods while `follow` waits for the key the rival holds, then releases it; checks the tries and the take-over. */
async function floodThenRelease(name, key, follow) {
  assert.ok(await sql("SELECT le_try_acquire($1, 'rival', '60 seconds')", [key]));
  const count = await counted();
  let ledAt = 0;
  const following = follow(() => { ledAt = performance.now(); });
  try {
    await sleep(1000); // the follower is waiting, LISTENing
    const f = await flood(key, FLOOD_SECONDS);
    const released = performance.now();
    assert.ok(await sql("SELECT le_release($1, 'rival')", [key]));
    assert.ok(await until(() => ledAt > 0, 5000), "not leading 5 s after the release (it polls every 10 s)");
    await following;
    const n = await count();
    const seconds = f.seconds + (ledAt - released) / 1000;
    console.error(`  ${name}: ${f.sent} forged releases in ${f.seconds.toFixed(1)} s; ${n} tries, ` +
                  `${(n / seconds).toFixed(0)}/s; led ${(ledAt - released).toFixed(0)} ms after the release`);
    assert.ok(n > 10, "the hints brought no try forward");
    assert.ok(n / seconds <= MAX_RATE, `${n} tries in ${seconds.toFixed(1)} s`);
  } finally {
    await sql("SELECT le_release($1, 'rival')", [key]);
  }
}

test("lead(): a flood of forged releases makes tries at a bounded rate; a real release is taken at once", async () => {
  const key = fresh("flood");
  await floodThenRelease("lead()", key, (led) => lead(TRACKED, key, { ttl: TTL }, async () => led()));
});

test("Elector: a flood of forged releases makes tries at a bounded rate; a real release is taken at once", async () => {
  const key = fresh("flood-elector");
  await floodThenRelease("Elector", key, (led) => new Promise((resolve, reject) => {
    const e = new Elector(TRACKED, key, { ttl: TTL });
    e.on("error", reject);
    e.on("elected", () => { led(); e.stop().then(resolve, reject); });
    e.start();
  }));
});

/** A rival's tenure of `key` with 3 slots (these candidates ask for one), released after `ms`. */
async function squat(key, ms) {
  assert.ok(await sql("SELECT le_try_acquire($1, 'squatter', '30 seconds', slots => 3)", [key]));
  const timer = setTimeout(() => sql("SELECT le_release($1, 'squatter')", [key]), ms);
  return {
    ends: performance.now() + ms,
    async done() {
      clearTimeout(timer);
      await sql("SELECT le_release($1, 'squatter')", [key]);
    },
  };
}

/** The process warnings about a key held with another number of slots, while listening. */
function slotWarnings() {
  const got = [];
  const on = (w) => { if (String(w.message).includes("another number of slots")) got.push(w.message); };
  process.on("warning", on);
  return { got, off: () => process.off("warning", on) };
}

test("lead() waits for a rival holding the key with other slots, then leads (one warning)", async () => {
  const key = fresh("slots");
  const s = await squat(key, 1000);
  const warned = slotWarnings();
  try {
    await lead(DSN, key, { ttl: 5, timeout: 10 }, async (lease) => {
      assert.ok(performance.now() >= s.ends, "led while the rival held the key");
      assert.equal(await sql("SELECT le_leader($1)", [key]), lease.id);
    });
    await sleep(50);
    assert.equal(warned.got.length, 1, String(warned.got));
  } finally {
    warned.off();
    await s.done();
  }
});

test("lead()'s timeout still ends it while a rival holds the key with other slots", async () => {
  const key = fresh("slots-timeout");
  const s = await squat(key, 3000);
  const warned = slotWarnings();
  try {
    const t0 = performance.now();
    await assert.rejects(lead(DSN, key, { ttl: 5, timeout: 1 }, async () => assert.fail("led while the rival held the key")),
                         NotAcquired);
    assert.ok(performance.now() - t0 >= 1000, `gave up after ${performance.now() - t0} ms`);
  } finally {
    warned.off();
    await s.done();
  }
});

test("Elector waits for a rival holding the key with other slots, then leads (no error, one warning)", async () => {
  const key = fresh("slots-elector");
  const s = await squat(key, 1000);
  const warned = slotWarnings();
  const errors = [];
  const e = new Elector(DSN, key, { ttl: 5 });
  e.on("error", (err) => errors.push(err));
  let electedAt = 0;
  e.on("elected", () => { electedAt = performance.now(); });
  e.start();
  try {
    assert.ok(await until(() => electedAt > 0, 10000), "never elected");
    assert.ok(electedAt >= s.ends, "led while the rival held the key");
    assert.deepEqual(errors, []);
    await sleep(50);
    assert.equal(warned.got.length, 1, String(warned.got));
  } finally {
    await e.stop();
    warned.off();
    await s.done();
  }
});
