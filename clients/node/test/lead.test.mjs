// The Node.js client against a real server (LEADERLOCK_DSN: a database with
// leaderlock, either edition). Freezes backends with SIGSTOP: run it on the
// server's host as root or as the server's user.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { performance } from "node:perf_hooks";
import pg from "pg";
import * as esm from "../dist/esm/index.js";
import { lead, Elector, NotAcquired, LeaseLost, BadArgumentError } from "../dist/esm/index.js";
import { DSN, fresh, sleep, sql, until } from "./support.mjs";



async function newestClientBackend() {
  return sql("SELECT pid FROM pg_stat_activity WHERE application_name = 'leaderlock node' ORDER BY backend_start DESC LIMIT 1");
}


test("leads, then releases on the way out", async () => {
  const key = fresh("lead");
  const got = await lead(DSN, key, { ttl: 5 }, async (lease) => {
    assert.equal(await sql("SELECT le_leader($1)", [key]), lease.id);
    assert.equal(lease.term, Number(await sql("SELECT term FROM leaderlock WHERE key = $1", [key])));
    assert.equal(Number(lease.id.split(":")[1]), process.pid);
    assert.ok(lease.alive);
    return "done";
  });
  assert.equal(got, "done");
  assert.equal(await sql("SELECT le_leader($1)", [key]), null);
});

test("the value is announced with the leadership", async () => {
  const key = fresh("value");
  await lead(DSN, key, { ttl: 5, value: { at: "host-1:8080" } }, async (lease) => {
    assert.deepEqual(lease.value, { at: "host-1:8080" });
    assert.equal(await sql("SELECT value->>'at' FROM le_lease($1)", [key]), "host-1:8080");
  });
});

test("timeout 0 tries once; a timeout passes with NotAcquired", async () => {
  const key = fresh("once");
  await lead(DSN, key, { ttl: 5, id: "first" }, async () => {
    const t0 = performance.now();
    await assert.rejects(lead(DSN, key, { timeout: 0 }, async () => assert.fail("a second leader")),
      (e) => e instanceof NotAcquired && e.holder === "first");
    assert.ok(performance.now() - t0 < 1000);
    await assert.rejects(lead(DSN, key, { timeout: 0.5 }, async () => assert.fail("a second leader")), NotAcquired);
    assert.ok(performance.now() - t0 >= 500);
  });
});

test("a waiting candidate leads as soon as the holder leaves", async () => {
  const key = fresh("wait");
  let leftAt = 0;
  let second;
  await lead(DSN, key, { ttl: 5 }, async (first) => {
    second = lead(DSN, key, { ttl: 5, timeout: 20 }, async (lease) => ({ at: performance.now(), term: lease.term, first: first.term }));
    await sleep(500);
    leftAt = performance.now();
  });
  const r = await second;
  assert.equal(r.term, r.first + 1);
  assert.ok(r.at - leftAt < 1500, `the release reached the candidate after ${r.at - leftAt} ms`);
});

test("options.signal stops the waiting (its reason), and while leading releases the lease", async () => {
  const key = fresh("signal");
  await lead(DSN, key, { ttl: 5, id: "first" }, async () => {
    const stop = new AbortController();
    const waiting = lead(DSN, key, { ttl: 5, signal: stop.signal }, async () => assert.fail("a second leader"));
    await sleep(300);
    stop.abort(new Error("enough"));
    await assert.rejects(waiting, /enough/);
  });
  const stop = new AbortController();
  const t0 = performance.now();
  const reason = await lead(DSN, key, { ttl: 5, signal: stop.signal }, async (lease) => {
    setTimeout(() => stop.abort(), 100);
    while (lease.valid) await sleep(10);
    return lease.signal.reason.reason;
  });
  assert.equal(reason, "released");
  assert.ok(performance.now() - t0 < 1000);
  assert.equal(await sql("SELECT le_leader($1)", [key]), null);
});

test("renewals keep the lease past its ttl", async () => {
  const key = fresh("renew");
  await lead(DSN, key, { ttl: 1 }, async (lease) => {
    await sleep(2500);
    lease.check();
    assert.equal(await sql("SELECT le_leader($1)", [key]), lease.id);
  });
});

test("renewals refused until the deadline: the signal aborts there, the body stops", async () => {
  const key = fresh("refused");
  const blocker = new pg.Client({ connectionString: DSN });
  await blocker.connect();
  try {
    await assert.rejects(lead(DSN, key, { ttl: 1.5 }, async (lease) => {
      await blocker.query("BEGIN");
      await blocker.query("SELECT 1 FROM leaderlock WHERE key = $1 FOR UPDATE", [key]); // every renewal refused
      const bound = performance.now() + 1500; // every renewal applied was sent before the block
      await new Promise((resolve) => lease.signal.addEventListener("abort", resolve));
      const abortedAt = performance.now();
      // read once lost, when nothing moves it (a renewal committed just before the block may have
      // been applied after it)
      const deadline = lease.deadline;
      assert.ok(deadline < bound, `the deadline is ${Math.round(deadline - bound)} ms past block + ttl`);
      assert.ok(abortedAt >= deadline, `aborted ${Math.round(deadline - abortedAt)} ms before the deadline`);
      assert.ok(abortedAt - deadline < 250, `aborted ${Math.round(abortedAt - deadline)} ms after the deadline`);
      assert.ok(lease.signal.reason instanceof LeaseLost);
      lease.check();
    }), LeaseLost);
  } finally {
    await blocker.query("ROLLBACK");
    await blocker.end();
  }
});

test("a renewal stuck on a frozen connection is retried on a new one: the lease is kept", async () => {
  const key = fresh("frozen");
  await lead(DSN, key, { ttl: 1.5 }, async (lease) => {
    const pid = await newestClientBackend();
    process.kill(pid, "SIGSTOP");
    try {
      await sleep(3000);
      lease.check();
    } finally {
      process.kill(pid, "SIGCONT");
    }
  });
});

test("leaving while the server hangs takes ttl/3 at most", async () => {
  const key = fresh("leave");
  let pid, t0;
  await lead(DSN, key, { ttl: 1.5 }, async () => {
    pid = await newestClientBackend();
    process.kill(pid, "SIGSTOP");
    t0 = performance.now();
  }).finally(() => {
    try {
      assert.ok(performance.now() - t0 < 500 + 1500, `left after ${performance.now() - t0} ms`);
    } finally {
      process.kill(pid, "SIGCONT");
    }
  });
});

test("a release that heard no answer is sent again before the next campaign under the same id", async () => {
  // The release hangs (its backend stopped) and is given up on: it may
  // still arrive. The next campaign sends it again first, so it takes a new
  // term instead of extending the old one; the late release, served at
  // last, names the old term and ends nothing.
  const key = fresh("unanswered");
  const id = fresh("me");
  let pid, old;
  await lead(DSN, key, { ttl: 1.5, id }, async (lease) => {
    old = lease.term;
    pid = await newestClientBackend();
    process.kill(pid, "SIGSTOP");
  });
  try {
    await lead(DSN, key, { ttl: 1.5, id, timeout: 5 }, async (lease) => {
      assert.ok(lease.term > old, `term ${lease.term} after ${old}`);
      process.kill(pid, "SIGCONT");
      assert.ok(await until(async () => !(await sql(
        "SELECT count(*)::int FROM pg_stat_activity WHERE pid = $1 AND NOT (state = 'idle' AND strpos(query, 'le_release') > 0)",
        [pid]))), "the late release was served");
      lease.check();
      assert.equal(await sql("SELECT le_leader($1)", [key]), id);
    });
  } finally {
    try { process.kill(pid, "SIGCONT"); } catch { /* gone once it served the release */ }
  }
});

test("a release sent again that meets its row locked holds the campaign back until it is gone", async () => {
  // A guarded transaction of the old tenure still open: the release sent
  // again is answered false while the tenure is live; the campaign waits,
  // and leads in a new term once the lock is gone, never in the old one.
  const key = fresh("locked");
  const id = fresh("me");
  const blocker = new pg.Client({ connectionString: DSN });
  await blocker.connect();
  let pid, old;
  try {
    await lead(DSN, key, { ttl: 6, id }, async (lease) => { // still live when the lock goes
      old = lease.term;
      pid = await newestClientBackend();
      process.kill(pid, "SIGSTOP");
      await blocker.query("BEGIN");
      await blocker.query("SELECT le_assert_leader($1, $2)", [key, id]); // share-locks the row
    });
    let term;
    const again = lead(DSN, key, { ttl: 6, id, timeout: 10 }, async (lease) => { term = lease.term; });
    await sleep(1000);
    assert.equal(term, undefined, "led while the old tenure's row was locked");
    await blocker.query("COMMIT");
    await again;
    assert.ok(term > old, `term ${term} after ${old}`);
  } finally {
    await blocker.end();
    try { process.kill(pid, "SIGCONT"); } catch { /* gone */ }
  }
});

test("on the schema 0.4.0 (library updated, ALTER EXTENSION not yet run): leads, renews and releases without terms",
     async (t) => {
  const db = "ll_node_old_schema";
  await sql(`DROP DATABASE IF EXISTS ${db} WITH (FORCE)`);
  await sql(`CREATE DATABASE ${db}`);
  const url = new URL(DSN);
  url.pathname = `/${db}`;
  const dsn = url.toString();
  try {
    try {
      await sql("CREATE EXTENSION leaderlock VERSION '0.4.0'", [], dsn);
    } catch (e) {
      t.skip(`no compiled edition 0.4.0 here: ${e.message}`);
      return;
    }
    const key = fresh("old");
    await lead(dsn, key, { ttl: 1 }, async (lease) => {
      await sleep(2500); // renewals every ttl/3
      lease.check();
      assert.equal(await sql("SELECT le_leader($1)", [key], dsn), lease.id);
    });
    assert.equal(await sql("SELECT le_leader($1)", [key], dsn), null);
  } finally {
    await sql(`DROP DATABASE IF EXISTS ${db} WITH (FORCE)`);
  }
});

test("two electors: one leader, a handover on stop", async () => {
  const key = fresh("elector");
  const seen = { a: [], b: [] };
  const elector = (id) => {
    const e = new Elector(DSN, key, { ttl: 2, id });
    e.on("elected", (lease) => seen[id].push(["elected", lease.term]));
    e.on("revoked", (why) => seen[id].push(["revoked", why]));
    e.on("leader", (holder) => seen[id].push(["leader", holder]));
    return e.start();
  };
  const a = elector("a");
  assert.ok(await until(() => seen.a.some((x) => x[0] === "elected")));
  const b = elector("b");
  assert.ok(await until(() => seen.b.some((x) => x[0] === "leader" && x[1] === "a")));
  await sleep(1500);
  assert.ok(!seen.b.some((x) => x[0] === "elected"));
  await a.stop();
  assert.deepEqual(seen.a.at(-1), ["revoked", "released"]);
  assert.ok(await until(() => seen.b.some((x) => x[0] === "elected"), 3000));
  assert.equal(await sql("SELECT le_leader($1)", [key]), "b");
  await b.stop();
  assert.equal(await sql("SELECT le_leader($1)", [key]), null);
});

test("CommonJS: require() gives the same API, the same classes", () => {
  const cjs = createRequire(import.meta.url)("../dist/cjs/index.js");
  assert.deepEqual(Object.keys(cjs).filter((k) => k !== "__esModule").sort(), Object.keys(esm).sort());
  assert.equal(cjs.lead, lead);
  assert.equal(cjs.Elector, Elector);
  assert.ok(new cjs.NotAcquired("k", null) instanceof NotAcquired);
});

test("bad arguments", async () => {
  for (const options of [{ ttl: 0 }, { ttl: -1 }, { timeout: -1 }, { poll: 0 }]) {
    await assert.rejects(lead(DSN, "k", options, async () => {}), BadArgumentError);
    assert.throws(() => new Elector(DSN, "k", options), BadArgumentError);
  }
  await assert.rejects(lead(DSN, "", {}, async () => {}), BadArgumentError);
});
