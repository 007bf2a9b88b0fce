// Scheduled runs (contract 22) with the Node.js client: schedule() against a
// real server (LEADERLOCK_DSN, a superuser: the tests backdate claims), the
// due instants of every/cron without one, and test/run_candidate.mjs.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { performance } from "node:perf_hooks";
import pg from "pg";
import { schedule, nextDue, RunLost, LeaseLost, BadArgumentError } from "../dist/esm/index.js";
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

/** The job's runs, oldest first (due as ISO text, term as text). */
const runsOf = (job) => rows(
  "SELECT to_char(due AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"') AS due, holder, term::text AS term, " +
  "outcome, detail, finished_at IS NOT NULL AS finished, attempts, backfilled_at IS NOT NULL AS late " +
  "FROM leaderlock_runs WHERE job = $1 ORDER BY due", [job]);

const HOUR = 3_600_000;

test("three replicas, every 300 ms: each due run once, on one of them, terms growing with due instants", async () => {
  const job = fresh("sched-three");
  const stop = new AbortController();
  const ran = [];
  // a grace of 1.5 s: the run due before the start, looked back at, runs unless the replicas take longer to connect
  const replica = (id) => schedule(DSN, job, { every: 300, ttlMs: 3000, misfireGraceMs: 1500, id, signal: stop.signal }, async (run) => {
    ran.push({ id, due: run.due.toISOString(), term: run.term, ours: run.isOurs(), termType: typeof run.term });
    await sleep(50);
  });
  const started = Date.now();
  const all = Promise.all(["r1", "r2", "r3"].map(replica));
  await sleep(2500);
  stop.abort();
  await all;

  assert.ok(ran.length >= 6, `only ${ran.length} runs in 2.5 s of every 300 ms`);
  const dues = ran.map((r) => r.due);
  assert.equal(new Set(dues).size, dues.length, `a due instant ran twice: ${JSON.stringify(dues)}`);
  for (const r of ran) {
    assert.ok(r.ours && r.termType === "bigint");
    assert.equal(Date.parse(r.due) % 300, 0, "due instants are multiples of the period since the epoch");
  }
  // Terms are the job's, one per claim: unique. They grow in the order
  // claims are made, which is not always the due instants' (a replica
  // refused one run while another claim held the job's row may claim the
  // next one first: docs/scheduled-runs.md).
  assert.equal(new Set(ran.map((r) => r.term)).size, ran.length, "a term was issued twice");
  const table = await runsOf(job);
  const finished = table.filter((r) => r.finished);
  // a run under way when the schedule stopped returned after its loss: failed
  const stopped = (r) => r.outcome === "failed" && /^returned after the run was lost: .*the schedule was stopped/.test(r.detail ?? "");
  // the instant due before the start, looked back at, is missed when no
  // replica claimed it within its grace (a loaded host: connecting took
  // longer); every instant due since the start ran
  const late = (r) => r.outcome === "missed" && Date.parse(r.due) < started;
  assert.deepEqual(finished.map((r) => stopped(r) || late(r) ? "succeeded" : r.outcome), finished.map(() => "succeeded"));
  assert.ok(finished.filter(stopped).length <= 3, "only the runs under way at the stop");
  assert.ok(finished.filter(late).length <= 1, "only the one instant looked back at");
  for (const r of ran) {
    const row = table.find((t) => t.due === r.due);
    assert.ok(row, `no row for ${r.due}`);
    assert.deepEqual([row.holder, row.term, stopped(row) ? "succeeded" : row.outcome, row.attempts],
      [r.id, String(r.term), "succeeded", 1]);
  }
  assert.equal(finished.length - finished.filter(late).length, ran.length,
    "every run that ran is finished, and nothing else is");
});

test("a callback that rejects: the run is recorded failed with the error's name and message (at most 1000 bytes of UTF-8); the schedule goes on", async () => {
  const job = fresh("sched-fail");
  class PaymentError extends Error {}
  PaymentError.prototype.name = "PaymentError";
  const stop = new AbortController();
  let calls = 0;
  const done = schedule(DSN, job, { every: 200, ttlMs: 3000, signal: stop.signal }, async () => {
    calls++;
    throw new PaymentError(`card refused ${"é".repeat(700)}`);
  });
  assert.ok(await until(async () => Number(await sql("SELECT count(*) FROM leaderlock_runs WHERE job = $1 AND outcome = 'failed'", [job])) >= 2, 5000));
  stop.abort();
  await done;
  const failed = (await runsOf(job)).filter((r) => r.outcome === "failed");
  assert.ok(failed.length >= 2 && calls >= 2);
  // "PaymentError: card refused " is 27 bytes; then as many 2-byte é as fit in 1000
  const expected = `PaymentError: card refused ${"é".repeat(Math.floor((1000 - 27) / 2))}`;
  for (const r of failed) {
    assert.equal(r.detail, expected);
    assert.ok(Buffer.byteLength(r.detail) <= 1000);
  }
});

test("a run lost while the callback runs (its claim lapsed and was taken): isOurs() turns false, the signal aborts, check() throws", async () => {
  const job = fresh("sched-lost");
  const stop = new AbortController();
  const seen = {};
  const done = schedule(DSN, job, { every: HOUR, misfireGraceMs: HOUR, ttlMs: 1500, id: "victim", signal: stop.signal }, async (run) => {
    try {
      seen.before = run.isOurs() && !run.signal.aborted;
      seen.term = run.term;
      seen.due = run.due.toISOString();
      run.check(); // does not throw
      // Another replica takes the run over: the test's superuser backdates the claim, then claims it as "thief".
      await sql("UPDATE leaderlock_runs SET expires_at = le_now() - interval '1 second' WHERE job = $1", [job]);
      seen.thief = await sql("SELECT le_claim_run(job => $1, due => $2::timestamptz, id => 'thief', ttl => interval '1 hour')::text",
                             [job, seen.due]);
      const taken = performance.now();
      const aborted = await new Promise((resolve) => {
        const timer = setTimeout(() => resolve(false), 3000);
        run.signal.addEventListener("abort", () => { clearTimeout(timer); resolve(true); });
      });
      seen.after = performance.now() - taken;
      seen.aborted = aborted && run.signal.aborted;
      seen.ours = run.isOurs();
      seen.reason = run.signal.reason;
      try {
        run.check();
        seen.checked = "no throw";
      } catch (e) {
        seen.checked = e;
      }
    } catch (e) {
      seen.error = e;
    }
  });
  assert.ok(await until(async () => seen.checked !== undefined || seen.error !== undefined, 6000));
  stop.abort();
  await done;
  assert.equal(seen.error, undefined);
  assert.equal(seen.before, true);
  assert.ok(BigInt(seen.thief) > seen.term, "the thief's claim has a higher term");
  assert.equal(seen.aborted, true, "the signal aborted");
  assert.ok(seen.after < 1500, `lost ${seen.after} ms after the takeover: the next renewal (every 500 ms) is refused`);
  assert.equal(seen.ours, false);
  assert.ok(seen.reason instanceof RunLost && seen.reason instanceof LeaseLost);
  assert.equal(seen.reason.reason, "refused");
  assert.equal(seen.reason.runTerm, seen.term);
  assert.equal(seen.reason.key, job);
  assert.equal(seen.checked, seen.reason, "check() throws the signal's reason");
  // The victim's finish was refused: the run is the thief's, unfinished.
  const [row] = await runsOf(job);
  assert.deepEqual([row.holder, row.term, row.finished], ["thief", seen.thief, false]);
});

test("the local deadline: after the event loop was blocked past the ttl, isOurs() is false at once, the signal reads aborted, check() throws", async () => {
  const job = fresh("sched-deadline");
  const stop = new AbortController();
  const seen = {};
  const done = schedule(DSN, job, { every: HOUR, misfireGraceMs: HOUR, ttlMs: 600, signal: stop.signal }, async (run) => {
    seen.before = run.isOurs();
    const t0 = performance.now();
    while (performance.now() - t0 < 800) { /* no timer, no renewal can run */ }
    seen.ours = run.isOurs();
    seen.aborted = run.signal.aborted;
    seen.reason = run.signal.reason?.reason;
    seen.remaining = run.remaining;
    assert.throws(() => run.check(), (e) => e instanceof RunLost && e.reason === "deadline");
    seen.checked = true;
  });
  assert.ok(await until(async () => (await runsOf(job)).some((r) => r.finished), 5000));
  stop.abort();
  await done;
  assert.deepEqual(seen, { before: true, ours: false, aborted: true, reason: "deadline", remaining: 0, checked: true });
  // Its outcome is still recorded (the claim lapsed, but nobody took the run
  // since): failed, since the callback returned after the run was lost.
  const rows = await runsOf(job);
  assert.deepEqual(rows.map((r) => r.outcome), ["failed"]);
  assert.match(rows[0].detail, /^returned after the run was lost: /);
});

test("stopping the schedule during a run: the run is told (reason released), recorded, and schedule() resolves", async () => {
  const job = fresh("sched-stop");
  const stop = new AbortController();
  let reason;
  const done = schedule(DSN, job, { every: HOUR, misfireGraceMs: HOUR, ttlMs: 5000, signal: stop.signal }, async (run) => {
    setTimeout(() => stop.abort(), 100);
    await new Promise((resolve) => run.signal.addEventListener("abort", resolve));
    reason = run.signal.reason;
    run.check();
  });
  await done;
  assert.equal(reason.reason, "released");
  const [row] = await runsOf(job);
  assert.equal(row.outcome, "failed");
  assert.match(row.detail, /^RunLost: lost the run of .* the schedule was stopped$/);
});

test("the connection ends (its backend terminated, twice): the schedule reconnects and goes on", async () => {
  const job = fresh("sched-reconnect");
  const stop = new AbortController();
  const app = `leaderlock node ${job}`;
  const ran = [];
  const done = schedule({ connectionString: DSN, application_name: app }, job, { every: 200, ttlMs: 3000, signal: stop.signal },
                        async (run) => { ran.push(run.due.getTime()); });
  const kill = () => sql("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1", [app]);
  assert.ok(await until(async () => ran.length >= 2, 5000));
  assert.equal(Number(await kill()), 1);
  await sleep(300);
  assert.equal(Number(await kill()), 1);
  const after = Date.now();
  assert.ok(await until(async () => ran.filter((d) => d > after).length >= 3, 5000), "no runs after the connection ended");
  stop.abort();
  await done;
  const table = await runsOf(job);
  assert.ok(table.filter((r) => Date.parse(r.due) > after).every((r) => r.outcome === "succeeded"));
});

test("the job's schedule kept in the database (le_schedule), run by the job's name alone: followed, changed, paused", async () => {
  const job = fresh("sched-registered");
  const stop = new AbortController();
  const ran = [];
  const told = [];
  // started before the job has a schedule: told so once, then that it runs
  const done = schedule(DSN, job, { ttlMs: 3000, signal: stop.signal, onScheduleFound: (f) => told.push(f) }, async (run) => {
    ran.push({ due: run.due.getTime(), ours: run.isOurs() });
  });
  const succeeded = async () => (await runsOf(job)).filter((r) => r.outcome === "succeeded");
  try {
    assert.ok(await until(async () => told.length === 1, 3000), "not told that the job has no schedule");
    assert.deepEqual(told, [false]);
    await sql("SELECT le_schedule($1, every => '1 second')", [job]);
    // every second: runs at whole seconds, each once
    assert.ok(await until(async () => (await succeeded()).length >= 2, 4000), "fewer than 2 runs every second");
    // every 2 seconds from now on: the runs due after the change are at even seconds (the first one may be an
    // instant waited for before the change was read)
    const changedAt = Date.parse(await sql("SELECT to_char(le_now() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') " +
                                           "FROM (SELECT le_schedule($1, every => '2 seconds')) s", [job]));
    const after = async () => (await succeeded()).filter((r) => Date.parse(r.due) > changedAt);
    assert.ok(await until(async () => (await after()).length >= 3, 7500), "fewer than 3 runs in the 7.5 s after the change");
    const later = (await after()).map((r) => r.due);
    assert.deepEqual(later.slice(1).filter((d) => Date.parse(d) % 2000 !== 0), [], `due after the change: ${later}`);
    // paused: nothing is claimed
    assert.equal(await sql("SELECT le_pause_schedule($1)", [job]), true);
    const pausedAt = await sql("SELECT le_now()::text");
    const before = ran.length;
    await sleep(2500);
    assert.equal(Number(await sql("SELECT count(*) FROM leaderlock_runs WHERE job = $1 AND claimed_at > $2::timestamptz",
                                  [job, pausedAt])), 0, "claimed while paused");
    assert.equal(ran.length, before, "ran while paused");
    assert.deepEqual(told, [false, true, false], "told: no schedule, found, paused");
    assert.ok(ran.every((r) => r.ours));
    const dues = ran.map((r) => r.due);
    assert.equal(new Set(dues).size, dues.length, "a due instant ran twice");
    assert.ok(dues.every((d) => d % 1000 === 0), `due instants at whole seconds: ${dues}`);
  } finally {
    stop.abort();
    await done;
    await sql("SELECT le_unschedule($1)", [job]);
  }
});

test("backfill: a replica that comes back runs the schedule's latest missed instants late, each once", async () => {
  const job = fresh("sched-backfill");
  await sql("SELECT le_schedule($1, every => '1 second', misfire_grace => '0.3 seconds', backfill => 2)", [job]);
  // no replica for 3.5 s: the worker records the instants missed
  await sleep(3500);
  const missed = async () => (await runsOf(job)).filter((r) => r.outcome === "missed");
  assert.ok(await until(async () => (await missed()).length >= 3, 2000), "fewer than 3 instants missed");
  const stop = new AbortController();
  const ran = [];
  const done = schedule(DSN, job, { ttlMs: 3000, signal: stop.signal }, async (run) => {
    ran.push(run.due.getTime());
  });
  try {
    const late = async () => Number(await sql("SELECT count(*) FROM leaderlock_runs WHERE job = $1 AND backfilled_at IS NOT NULL " +
                                             "AND outcome = 'succeeded'", [job]));
    assert.ok(await until(async () => (await late()) === 2, 3000), "2 missed instants were not run late");
    await sleep(1200);
    assert.equal(await late(), 2, "more than the backfill ran late");
    // the latest missed when the replica looked (one may be missed meanwhile), each run here once
    const table = await runsOf(job);
    const latest = table.filter((r) => r.outcome === "missed" || r.late).map((r) => Date.parse(r.due)).slice(-2);
    assert.deepEqual(table.filter((r) => r.late).map((r) => Date.parse(r.due)), latest);
    for (const d of latest) assert.ok(ran.includes(d), `missed instant ${new Date(d).toISOString()} not run: ${ran}`);
    assert.equal(new Set(ran).size, ran.length, "an instant ran twice");
  } finally {
    stop.abort();
    await done;
    await sql("SELECT le_unschedule($1)", [job]);
  }
});

test("a refusal retrying cannot change rejects: a job name the server refuses, bad options", async () => {
  await assert.rejects(schedule(DSN, "j".repeat(256), { every: 1000, ttlMs: 1000 }, async () => {}),
    (e) => e instanceof BadArgumentError && e.sqlstate === "22023");
  await assert.rejects(schedule(DSN, "j", { every: 1000 }, async () => {}), BadArgumentError);
  await assert.rejects(schedule(DSN, "j", { every: 1000, cron: "* * * * *", ttlMs: 1000 }, async () => {}), BadArgumentError);
  await assert.rejects(schedule(DSN, "j", { every: 1000, ttlMs: 1000, misfireGraceMs: -1 }, async () => {}), BadArgumentError);
  // by the job's name alone (its schedule kept in the database): that schedule's misfire grace, no tz
  await assert.rejects(schedule(DSN, "j", { ttlMs: 1000, misfireGraceMs: 1000 }, async () => {}), BadArgumentError);
  await assert.rejects(schedule(DSN, "j", { ttlMs: 1000, tz: "UTC" }, async () => {}), BadArgumentError);
  await assert.rejects(schedule(DSN, "j", { every: 1000, ttlMs: 1000, onScheduleFound: () => {} }, async () => {}), BadArgumentError);
});

test("due instants without a server: every (multiples of the period since the epoch) and cron in a time zone across daylight saving", () => {
  const at = (s) => new Date(s);
  const iso = (d) => d?.toISOString();
  const seq = (rule, from, n) => {
    const out = [];
    let t = at(from);
    for (let i = 0; i < n; i++) out.push(iso((t = nextDue(rule, t))));
    return out;
  };
  // every: strictly after, aligned to the epoch
  assert.equal(iso(nextDue({ every: 300_000 }, at("2026-11-27T10:02:03Z"))), "2026-11-27T10:05:00.000Z");
  assert.equal(iso(nextDue({ every: 300_000 }, at("2026-11-27T10:05:00Z"))), "2026-11-27T10:10:00.000Z");
  assert.equal(iso(nextDue({ every: 300 }, at("2026-11-27T10:05:00.299Z"))), "2026-11-27T10:05:00.300Z");
  for (const every of [0, 1.5, -5, "5", NaN]) assert.throws(() => nextDue({ every }, new Date()), BadArgumentError);
  // cron: five fields are minutes first; days of the week by name (2026-11-27 is a Friday)
  assert.equal(iso(nextDue({ cron: "0 3 * * *" }, at("2026-11-27T10:00:00Z"))), "2026-11-28T03:00:00.000Z");
  assert.equal(iso(nextDue({ cron: "0 3 * * MON" }, at("2026-11-27T10:00:00Z"))), "2026-11-30T03:00:00.000Z");
  assert.equal(iso(nextDue({ cron: "0 3 * * MON-FRI" }, at("2026-11-27T10:00:00Z"))), "2026-11-30T03:00:00.000Z");
  assert.equal(iso(nextDue({ cron: "30 0 3 * * *" }, at("2026-11-27T10:00:00Z"))), "2026-11-28T03:00:30.000Z");
  // 02:30 every day in Paris: on 2026-03-29 that local time does not exist (02:00 -> 03:00) and is skipped;
  // on 2026-10-25 it occurs twice (03:00 -> 02:00) and is due once, at the first (the Rust client's rule)
  const paris = { cron: "30 2 * * *", tz: "Europe/Paris" };
  assert.deepEqual(seq(paris, "2026-03-27T12:00:00Z", 3),
    ["2026-03-28T01:30:00.000Z", "2026-03-30T00:30:00.000Z", "2026-03-31T00:30:00.000Z"]);
  assert.deepEqual(seq(paris, "2026-10-24T12:00:00Z", 3),
    ["2026-10-25T00:30:00.000Z", "2026-10-26T01:30:00.000Z", "2026-10-27T01:30:00.000Z"]);
  // every quarter of an hour across the autumn change: the repeated hour's quarters are due once
  assert.deepEqual(seq({ cron: "*/15 * * * *", tz: "Europe/Paris" }, "2026-10-25T00:20:00Z", 4),
    ["2026-10-25T00:30:00.000Z", "2026-10-25T00:45:00.000Z", "2026-10-25T02:00:00.000Z", "2026-10-25T02:15:00.000Z"]);
  // from inside the repeated hour: never an instant before `after`
  assert.equal(iso(nextDue({ cron: "*/15 * * * *", tz: "Europe/Paris" }, at("2026-10-25T01:20:00Z"))), "2026-10-25T02:00:00.000Z");
  // refused: bad fields, zones; what cron implementations read differently (days of the week by number, both
  // days restricted) or not all have (descriptors, a year field, H, L, W, #); every with cron
  for (const rule of [{ cron: "61 * * * *" }, { cron: "0 3 * * *", tz: "Mars/Olympus" }, { cron: "0 3 * * 1" },
                      { cron: "0 3 * * 0,6" }, { cron: "0 3 * * 1-5/2" }, { cron: "0 3 1 * MON" }, { cron: "@daily" },
                      { cron: "0 0 0 1 1 * 2027" }, { cron: "H 3 * * *" }, { cron: "0 3 L * *" }, { cron: "0 3 * * 5L" },
                      { cron: "0 3 * * MON#2" }, { cron: "0 3 15W * *" }, { every: 5, cron: "* * * * *" }, {},
                      { every: 5, tz: "UTC" }]) {
    assert.throws(() => nextDue(rule, new Date()), BadArgumentError, JSON.stringify(rule));
  }
  assert.equal(iso(nextDue({ cron: "0 3 ? * THU" }, at("2026-11-27T10:00:00Z"))), "2026-12-03T03:00:00.000Z");
});

test("test/run_candidate.mjs: two runners for 1.5 s, each due run started once, worked only while ours, ended; SIGTERM exits 143", async () => {
  const job = fresh("sched-runner");
  const dir = mkdtempSync(join(tmpdir(), "leaderlock-runs-"));
  const records = join(dir, "records");
  const script = fileURLToPath(new URL("./run_candidate.mjs", import.meta.url));
  try {
    const runners = ["n1", "n2"].map((id) => {
      const child = spawn(process.execPath, [script, DSN, job, id, "300", "2", "1", records, "0.1"], { stdio: ["ignore", "inherit", "inherit"] });
      return { child, exit: new Promise((resolve) => child.on("exit", (code, signal) => resolve(code ?? signal))) };
    });
    await sleep(1500);
    for (const r of runners) r.child.kill("SIGTERM");
    assert.deepEqual(await Promise.all(runners.map((r) => r.exit)), [143, 143]);

    const lines = readFileSync(records, "utf8").trimEnd().split("\n").map((l) => l.split(" "));
    const runs = new Map(); // due -> its lines
    for (const l of lines) {
      assert.equal(l.length, 5, `a record of 5 fields: ${l.join(" ")}`);
      const [kind, id, term, due, unix] = l;
      assert.ok(["start", "tick", "lost", "end"].includes(kind), kind);
      assert.match(due, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
      assert.match(unix, /^\d+\.\d{6}$/);
      assert.match(term, /^\d+$/);
      if (!runs.has(due)) runs.set(due, []);
      runs.get(due).push({ kind, id, term, unix: Number(unix) });
    }
    assert.ok(runs.size >= 3, `only ${runs.size} runs`);
    const terms = [];
    for (const [due, ls] of [...runs].sort(([a], [b]) => a.localeCompare(b))) {
      assert.equal(Date.parse(due) % 300, 0);
      assert.equal(ls[0].kind, "start", `${due}: starts with start`);
      assert.equal(ls.filter((l) => l.kind === "start").length, 1, `${due}: started once`);
      assert.equal(new Set(ls.map((l) => `${l.id} ${l.term}`)).size, 1, `${due}: one runner and term`);
      assert.ok(["end", "lost"].includes(ls.at(-1).kind), `${due}: ends with end or lost`);
      assert.ok(ls.slice(1, -1).every((l) => l.kind === "tick"));
      terms.push(BigInt(ls[0].term));
    }
    assert.equal(new Set(terms).size, terms.length, "a term was issued twice"); // (claim order, not due order)
    // no runner worked for two runs at a time
    for (const id of ["n1", "n2"]) {
      const own = lines.filter((l) => l[1] === id).map((l) => l[3]);
      const order = own.filter((d, i) => i === 0 || own[i - 1] !== d);
      assert.equal(new Set(order).size, order.length, `${id} interleaved runs`);
    }
    const table = await runsOf(job);
    for (const [due, ls] of runs) {
      const row = table.find((t) => `${t.due.slice(0, -1)}000Z` === due);
      assert.ok(row, `no row for ${due}`);
      // a run its runner saw lost (SIGTERM at the end), or one whose return
      // the SIGTERM beat, returned after the loss: recorded failed
      const lostAtReturn = row.outcome === "failed" && /^returned after the run was lost: /.test(row.detail ?? "");
      const want = ls.at(-1).kind === "lost" || lostAtReturn ? "failed" : "succeeded";
      assert.deepEqual([row.holder, row.term, row.outcome], [ls[0].id, ls[0].term, want]);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
