// Sessions (contract 21, docs/sessions.md) in the Node.js client, against a
// real server (LEADERLOCK_DSN, a superuser's URL; the pause test stops a
// child process with SIGSTOP):
// - many keys under one session, ttl 1 s, kept 3 s by its one renewer: the
//   server shows them held, the client sent one le_renew_session per ttl/3
//   and nothing else that renews, and no key's row was written;
// - a process paused past its deadline (test/session_child.mjs): its first
//   `alive` after waking is false, and it takes no step;
// - close: every lease lost here first, every key vacated at once (rivals
//   waiting in le_acquire get them right away);
// - a renewal the server refuses (the session closed from elsewhere) loses
//   the session and every lease at once, for good;
// - bad input is BadArgumentError, from this client or from the server.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, existsSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { openSession, LeaseLost, SessionLost, BadArgumentError, releaseOnSignals } from "../dist/esm/index.js";
import { DSN, fresh, sleep, sql, until } from "./support.mjs";

const CHILD = fileURLToPath(new URL("./session_child.mjs", import.meta.url));
const keysOf = (prefix, n) => Array.from({ length: n }, (_, i) => `${prefix}/${i}`);
const heldBy = async (keys, id) => Number(await sql("SELECT count(*) FROM unnest($1::text[]) k WHERE le_leader(k) = $2", [keys, id]));
const heldAtAll = async (keys) => Number(await sql("SELECT count(*) FROM unnest($1::text[]) k WHERE le_leader(k) IS NOT NULL", [keys]));

/** Counts the statements every pg.Client of this process sends (the client's included: the same pg), while installed. */
function countStatements() {
  const original = pg.Client.prototype.query;
  const sent = [];
  pg.Client.prototype.query = function (config, ...rest) {
    sent.push(typeof config === "string" ? config : config?.text ?? "");
    return original.call(this, config, ...rest);
  };
  return {
    count: (what) => sent.filter((q) => q.includes(what)).length,
    restore: () => { pg.Client.prototype.query = original; },
  };
}

test("many keys are kept by one renewal every ttl/3", async () => {
  const keys = keysOf(fresh("session-many"), 50);
  const statements = countStatements();
  try {
    const s = await openSession(DSN, { ttl: 1 });
    try {
      const leases = [];
      for (const k of keys) leases.push(await s.tryAcquire(k));
      assert.ok(leases.every((l) => l !== null));
      assert.deepEqual(new Set(leases.map((l) => l.term)), new Set([1]));
      const rows = "SELECT array_agg(key || ':' || xmin::text ORDER BY key) FROM leaderlock WHERE key = ANY($1)";
      const before = await sql(rows, [keys]);
      const renewedBefore = await sql("SELECT renewed_at FROM leaderlock_sessions WHERE session = $1", [s.handle]);
      const renewals0 = statements.count("le_renew");
      const sessions0 = statements.count("le_renew_session(");
      await sleep(3000); // three times the ttl
      assert.ok(s.alive);
      for (const l of leases) l.check();
      assert.equal(await heldBy(keys, s.id), 50, "the server does not show every key held");
      assert.equal(Number(await sql("SELECT count(*) FROM leaderlock_status WHERE key = ANY($1) AND state = 'held'", [keys])), 50);
      const renewals = statements.count("le_renew") - renewals0;
      const sessions = statements.count("le_renew_session(") - sessions0;
      // one renewal of the session every ttl/3: 9 in 3 s (timers are late, never early)
      assert.equal(renewals, sessions, "something else than le_renew_session renewed");
      assert.ok(sessions >= 7 && sessions <= 10, `${sessions} renewals in 3 s with ttl 1 s`);
      assert.deepEqual(await sql(rows, [keys]), before, "a renewal wrote the keys' rows");
      assert.ok(await sql("SELECT renewed_at FROM leaderlock_sessions WHERE session = $1", [s.handle]) > renewedBefore);
    } finally {
      await s.close();
    }
    assert.equal(await heldBy(keys, s.id), 0);
  } finally {
    statements.restore();
  }
});

/** Whether process `pid` is stopped (SIGSTOP delivered). */
const stopped = (pid) => readFileSync(`/proc/${pid}/stat`, "utf8").split(")").pop().trim().split(" ")[0] === "T";

test("a process paused past its deadline takes no step when it wakes", async () => {
  const prefix = fresh("session-paused");
  const dir = mkdtempSync(join(tmpdir(), "leaderlock-session-"));
  const records = join(dir, "records");
  let stderr = "";
  const child = spawn(process.execPath, [CHILD, DSN, prefix, "5", "1", records], { stdio: ["ignore", "ignore", "pipe"] });
  child.stderr.on("data", (d) => { stderr += d; });
  const exited = new Promise((resolve) => child.on("exit", (code) => resolve(code)));
  const lines = () => (existsSync(records) ? readFileSync(records, "utf8").trim().split("\n").map((l) => l.split(" ")) : []);
  try {
    assert.ok(await until(() => lines().some((r) => r[0] === "effect"), 15000), `the child never acted: ${stderr}`);
    child.kill("SIGSTOP");
    assert.ok(await until(() => stopped(child.pid), 2000));
    const paused = process.hrtime.bigint();
    await sleep(2000); // twice the ttl
    const resumed = process.hrtime.bigint(); // before SIGCONT: any call the child starts from now on is after it woke
    child.kill("SIGCONT");
    // it leaves at its first check (the records say what it did)
    const code = await Promise.race([exited, sleep(3000).then(() => "running")]);
    const out = lines();
    const woke = out.filter((r) => r[0] === "alive" && BigInt(r[1]) >= resumed);
    assert.ok(woke.length > 0, "no alive after waking");
    assert.equal(woke[0][3], "false", "its first alive after waking said true");
    assert.deepEqual(woke.filter((r) => r[3] !== "false"), []);
    assert.deepEqual(out.filter((r) => r[0] === "effect" && BigInt(r[1]) >= paused), [], "a side effect after the pause");
    assert.deepEqual(out.at(-1), ["lost", "deadline"]);
    assert.equal(code, 0, stderr);
    // the server ended it too: the keys are free
    assert.ok(await until(async () => (await heldAtAll(keysOf(prefix, 5))) === 0, 5000));
  } finally {
    if (child.exitCode === null) {
      child.kill("SIGCONT");
      child.kill("SIGKILL");
    }
    rmSync(dir, { recursive: true, force: true });
  }
});

test("close loses every lease and vacates every key at once", async () => {
  const keys = keysOf(fresh("session-close"), 10);
  const s = await openSession({ dsn: DSN, ttl: 5 });
  const leases = [];
  for (const k of keys) leases.push(await s.tryAcquire(k));
  assert.ok(leases.every((l) => l !== null));
  const rivals = [];
  const got = {};
  for (const k of keys.slice(0, 3)) {
    const c = new pg.Client({ connectionString: DSN });
    await c.connect();
    rivals.push(c.query("SELECT le_acquire(key => $1, id => 'rival', ttl => '5 s', wait => '8 s') AS ok", [k])
      .then((r) => { got[k] = { won: r.rows[0].ok, at: performance.now() }; })
      .finally(() => c.end()));
  }
  assert.ok(await until(async () => Number(await sql("SELECT count(*) FROM unnest($1::text[]) k, le_candidates(k) c",
                                                       [keys.slice(0, 3)])) === 3, 5000), "the rivals are not waiting");
  const closing = performance.now();
  assert.equal(await s.close(), true);
  for (const l of leases) {
    assert.equal(l.alive, false);
    assert.throws(() => l.check(), (e) => e instanceof LeaseLost && e.reason === "released");
  }
  assert.throws(() => s.check(), SessionLost);
  await Promise.all(rivals);
  for (const k of keys.slice(0, 3)) {
    assert.equal(got[k].won, true, `${k}: the rival did not get it`);
    const took = got[k].at - closing;
    assert.ok(took < 500, `${k}: the rival got it ${took.toFixed(0)} ms after the close began`);
  }
  assert.equal(await heldAtAll(keys.slice(3)), 0);
  assert.equal(await sql("SELECT session FROM leaderlock_sessions WHERE session = $1", [s.handle]), null);
});

test("a refused renewal loses the session and every lease for good", async () => {
  const prefix = fresh("session-refused");
  const keys = keysOf(prefix, 3);
  const s = await openSession(DSN, { ttl: 3 });
  try {
    const leases = [];
    for (const k of keys) leases.push(await s.tryAcquire(k));
    assert.ok(leases.every((l) => l !== null));
    // the same role closes it from another connection: the next renewal is refused
    assert.equal(await sql("SELECT le_close_session($1)", [s.handle]), true);
    const closed = performance.now();
    const deadline = s.deadline;
    const lost = await new Promise((resolve) => {
      const t = setTimeout(() => resolve(null), 3000);
      s.signal.addEventListener("abort", () => { clearTimeout(t); resolve(performance.now()); });
    });
    assert.ok(lost !== null, "not lost");
    assert.ok(lost - closed < 1500, `lost ${(lost - closed).toFixed(0)} ms after the close, not at the next renewal (ttl/3)`);
    assert.ok(lost < deadline, "lost at the deadline, not by the refusal");
    assert.equal(s.signal.reason.reason, "refused");
    assert.equal(s.alive, false);
    for (const l of leases) {
      assert.equal(l.alive, false);
      assert.equal(l.signal.aborted, true);
      assert.throws(() => l.check(), (e) => e instanceof LeaseLost && e.reason === "refused");
    }
    // for good: no acquisition under it, and it stays lost
    await assert.rejects(s.tryAcquire(`${prefix}/again`), SessionLost);
    await sleep(1200);
    assert.equal(s.alive, false);
    assert.equal(leases[0].alive, false);
  } finally {
    await s.close();
  }
  assert.equal(await heldBy(keys, s.id), 0);
});

test("bad input is a BadArgumentError", async () => {
  for (const options of [{ ttl: 0 }, { ttl: -1 }, { ttl: "10" }, { lockDelay: -1 }, { id: "" }, { keepValues: "yes" }]) {
    await assert.rejects(openSession(DSN, options), (e) => e instanceof BadArgumentError && e.sqlstate === undefined,
                         JSON.stringify(options));
  }
  const s = await openSession(DSN, { ttl: 5 });
  try {
    for (const call of [() => s.tryAcquire(""), () => s.acquire("", { timeout: 1 }), () => s.acquire("k", { timeout: -1 }),
                        () => s.acquire("k", {}), () => s.release("")]) {
      await assert.rejects(call(), (e) => e instanceof BadArgumentError && e.sqlstate === undefined, String(call));
    }
    assert.ok(s.alive);
  } finally {
    await s.close();
  }
  // what only the server knows: a ttl above leaderlock.max_ttl (one day by default)
  await assert.rejects(openSession(DSN, { ttl: 10 ** 6 }), (e) => e instanceof BadArgumentError && e.sqlstate === "22023");
});

test("acquire waits, gives the key's own term, fences writes; release frees one key", async () => {
  const prefix = fresh("session-acquire");
  const [a, b] = keysOf(prefix, 2);
  const rival = await openSession(DSN, { ttl: 5, id: "rival" });
  const s = await openSession(DSN, { ttl: 5 });
  const c = new pg.Client({ connectionString: DSN });
  await c.connect();
  try {
    assert.ok(await rival.tryAcquire(a));
    assert.equal(await s.tryAcquire(a), null);
    const waiting = s.acquire(a, { timeout: 5, value: { at: "here" } });
    await sleep(200);
    assert.equal(await rival.release(a), true);
    const lease = await waiting;
    assert.equal(lease.term, 2);
    assert.equal(lease.term, Number(await sql("SELECT term FROM leaderlock WHERE key = $1", [a])));
    assert.deepEqual(lease.value, { at: "here" });
    assert.equal(await sql("SELECT value->>'at' FROM le_lease($1)", [a]), "here");
    await assert.rejects(rival.acquire(a, { timeout: 0.2 }), (e) => e.name === "NotAcquired" && e.holder === s.id);
    assert.equal(await lease.guarded(c, async (tx) => (await tx.query("SELECT 1 AS one")).rows[0].one), 1);
    const other = await s.tryAcquire(b);
    assert.equal(await other.release(), true);
    assert.equal(other.alive, false);
    assert.ok(lease.alive && s.alive);
    assert.equal(await sql("SELECT le_leader($1)", [b]), null);
    assert.equal(await sql("SELECT le_leader($1)", [a]), s.id);
    assert.deepEqual(s.leases, [lease]);
    assert.equal(typeof releaseOnSignals(s, { exit: false }), "function");
  } finally {
    await c.end();
    await s.close();
    await rival.close();
  }
});
