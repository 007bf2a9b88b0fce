// Groups (contract 26, docs/groups.md) in the Node.js client, against a
// real server (LEADERLOCK_DSN, a superuser's URL, with the compiled
// edition's groups; skipped without either):
// - two members share 4 partitions: the newcomer gets each of its share
//   only once the first member's onRevoked has resolved (then it acks), in
//   a higher term;
// - the guard admits the owner in its term; refuses a partition not ours
//   here without a call, and what the server refuses (LE001), as
//   PartitionNotOwned; the server refuses a superseded term;
// - a member whose renewals cannot succeed (its session's row locked by
//   another transaction) owns nothing from its local deadline on, within
//   the ttl of the lock, and owns its partitions again once it is gone;
// - owns() reads the clock: after the event loop was blocked past the
//   deadline, before any timer has run;
// - a newcomer owns its share well within one renewal period: the
//   notification naming it brings its next round sooner;
// - leave() owns nothing from the call on, tells onRevoked, and the other
//   member gets everything at once;
// - bad input is BadArgumentError, from this client or from the server.
import { test } from "node:test";
import assert from "node:assert/strict";
import { performance } from "node:perf_hooks";
import pg from "pg";
import { member, BadArgumentError, PartitionNotOwned } from "../dist/esm/index.js";
import { DSN, fresh, sleep, sql, until } from "./support.mjs";

let skip = process.env.LEADERLOCK_DSN ? false : "LEADERLOCK_DSN is not set";
if (!skip && (await sql("SELECT coalesce(le_capabilities()->>'groups', 'false')")) !== "true") {
  skip = "groups (contract 26) are the compiled edition's";
}

const now = () => performance.now();

/** What members told, in order: [ms, member, event, partition, term]. */
function journal() {
  const events = [];
  const of = (name, drainMs = 0) => ({
    onAssigned: (p, term) => { events.push([now(), name, "assigned", p, term]); },
    onRevoked: async (p, term) => {
      events.push([now(), name, "revoked", p, term]);
      await sleep(drainMs);
      events.push([now(), name, "drained", p, term]);
    },
    onLost: (p, term) => { events.push([now(), name, "lost", p, term]); },
  });
  const first = (name, event, p) => events.find((e) => e[1] === name && e[2] === event && e[3] === p);
  return { events, of, first };
}

/** Members a and b of a new group of 4 partitions (ttl 6 s: a round every 2 s), each owning 2. */
async function pair(name, j, drainMs = 0) {
  const group = fresh(name);
  const a = await member(DSN, { group, member: "a", ttl: 6, partitions: 4, drain: 5, ...j.of("a", drainMs) });
  const all = a.owned();
  const joined = now();
  const b = await member(DSN, { group, member: "b", ttl: 6, ...j.of("b") });
  assert.ok(await until(() => a.owned().size === 2 && b.owned().size === 2, 5000),
            `a owns ${[...a.owned().keys()]}, b ${[...b.owned().keys()]}`);
  return { group, a, b, all, joined, shared: now() };
}

test("two members share 4 partitions: each moves once the first's onRevoked has resolved, in a higher term",
     { skip }, async () => {
  const j = journal();
  const { a, b, all } = await pair("share", j, 500);
  try {
    assert.deepEqual([...all.keys()], [1, 2, 3, 4]);
    const kept = a.owned();
    const given = b.owned();
    assert.deepEqual([...kept.keys(), ...given.keys()].sort(), [1, 2, 3, 4]);
    assert.ok(await until(() => [...given.keys()].every((p) => j.first("a", "drained", p)), 2000),
              "a was not told to drain what b got, or never drained it");
    for (const [p, term] of given) {
      const drained = j.first("a", "drained", p);
      const assigned = j.first("b", "assigned", p);
      assert.ok(assigned[0] >= drained[0], `b got ${p} ${Math.round(drained[0] - assigned[0])} ms before a had drained it`);
      assert.ok(term > all.get(p), `partition ${p}: term ${term} after ${all.get(p)}`);
    }
    for (const [p, term] of kept) assert.equal(term, all.get(p));
    assert.deepEqual(j.events.filter((e) => e[2] === "lost"), []);
  } finally {
    await b.leave();
    await a.leave();
  }
});

test("the guard admits the owner in its term; refuses another's partition, and what the server refuses", { skip }, async () => {
  const j = journal();
  const { group, a, b, all } = await pair("guard", j);
  const c = new pg.Client({ connectionString: DSN });
  await c.connect();
  try {
    const [mine, term] = [...b.owned()][0];
    await c.query("BEGIN");
    assert.equal(await b.guard(c, mine), term);
    await c.query("COMMIT");
    assert.equal(await b.guarded(c, mine, async (tx) => (await tx.query("SELECT 7 AS n")).rows[0].n), 7);
    // not ours here: refused without a call
    const local = await a.guard(c, mine).then(() => null, (e) => e);
    assert.ok(local instanceof PartitionNotOwned && local.sqlstate === "LE001" && local.cause === undefined, String(local));
    // the server's guard refuses the term a held it in before
    await assert.rejects(sql("SELECT le_assert_partition($1, $2, 'a', $3)", [group, mine, String(all.get(mine))]),
                         (e) => e.code === "LE001");
    // b's session closed behind its back: b still believes (no round yet), the server refuses
    let refused = null;
    for (let tries = 0; tries < 3 && !refused; tries++) {
      await sql("SELECT le_close_session(session) FROM leaderlock_members WHERE grp = $1 AND member = 'b'", [group]);
      const [p] = [...b.owned()][0] ?? [];
      if (p === undefined) continue; // a round came in between
      await c.query("BEGIN");
      refused = await b.guard(c, p).then(() => null, (e) => e);
      await c.query("ROLLBACK");
    }
    assert.ok(refused instanceof PartitionNotOwned && refused.cause?.code === "LE001", String(refused));
  } finally {
    await c.end();
    await b.leave();
    await a.leave();
  }
});

test("a member whose renewals cannot succeed owns nothing from its local deadline on, within the ttl", { skip }, async () => {
  const j = journal();
  const group = fresh("stall");
  const ttl = 1.5;
  const m = await member(DSN, { group, member: "stalled", ttl, partitions: 4, ...j.of("stalled") });
  const c = new pg.Client({ connectionString: DSN });
  await c.connect();
  try {
    assert.equal(m.owned().size, 4);
    await c.query("BEGIN");
    await c.query("SELECT 1 FROM leaderlock_sessions s JOIN leaderlock_members m USING (session) " +
                  "WHERE m.grp = $1 AND m.member = $2 FOR UPDATE OF s", [group, "stalled"]);
    const locked = now();
    // The deadline is at most ttl - ttl/200 after the lock (the last join was sent before it). The time
    // is read before each look, so an owner seen at ttl or later is owned past the deadline, however
    // late the event loop turned.
    let after;
    for (;;) {
      const looked = now() - locked;
      if (m.owns(1) === null) { after = now() - locked; break; }
      assert.ok(looked < ttl * 1000, `owned ${Math.round(looked)} ms after the lock, ttl ${ttl * 1000} ms`);
      await new Promise((r) => setImmediate(r));
    }
    assert.equal(m.owned().size, 0);
    assert.ok(await until(() => j.events.filter((e) => e[2] === "lost").length === 4, 500), "not told lost");
    console.error(`  stalled: owns nothing ${Math.round(after)} ms after its session's row was locked (ttl ${ttl * 1000} ms)`);
    await c.query("ROLLBACK");
    assert.ok(await until(() => m.owned().size === 4, 5000), "not owned again once the lock was gone");
  } finally {
    await c.end();
    await m.leave();
  }
});

test("owns() reads the clock: the event loop blocked past the local deadline, the first look says null", { skip }, async () => {
  const m = await member(DSN, { group: fresh("blocked"), member: "m", ttl: 1, partitions: 2 });
  try {
    assert.equal(m.owns(1), 1n);
    const end = now() + 1100;
    while (now() < end); // no timer runs meanwhile
    assert.equal(m.owns(1), null);
    assert.equal(m.owned().size, 0);
    assert.ok(await until(() => m.owned().size === 2, 3000), "not owned again");
  } finally {
    await m.leave();
  }
});

test("a newcomer owns its share well within one renewal period: the notification naming it", { skip }, async () => {
  const j = journal();
  const { a, b, joined, shared } = await pair("newcomer", j);
  try {
    const took = shared - joined;
    console.error(`  newcomer: owned its share ${Math.round(took)} ms after it joined (a round every 2000 ms)`);
    assert.ok(took < 1500, `the newcomer owned its share ${Math.round(took)} ms after joining`);
  } finally {
    await b.leave();
    await a.leave();
  }
});

test("leave(): owns nothing from the call on, tells onRevoked, and the other member gets everything at once", { skip }, async () => {
  const j = journal();
  const { a, b } = await pair("leave", j);
  try {
    const had = [...a.owned().keys()];
    const called = now();
    const leaving = a.leave();
    assert.equal(a.owns(had[0]), null);
    assert.equal(a.owned().size, 0);
    assert.equal(await leaving, true);
    for (const p of had) assert.ok(j.first("a", "revoked", p), `a was not told to give back ${p}`);
    assert.ok(await until(() => b.owned().size === 4, 1500), `b owns ${[...b.owned().keys()]} 1.5 s after a left`);
    const took = now() - called;
    console.error(`  leave: the other member owned all 4 ${Math.round(took)} ms after leave() (a round every 2000 ms)`);
    assert.ok(took < 1000, `${Math.round(took)} ms`);
    assert.equal(await a.leave(), true); // the same answer
  } finally {
    await b.leave();
  }
});

// A member the options should not make: its error checked; one made
// anyway leaves at once (a running member would keep this file alive).
async function refused(options, check, what) {
  let m;
  try {
    m = await member(DSN, options);
  } catch (e) {
    assert.ok(check(e), `${what}: ${e}`);
    return;
  }
  await m.leave();
  assert.fail(`${what}: not refused`);
}

test("bad input is BadArgumentError, from this client or from the server", { skip }, async () => {
  const group = fresh("bad");
  for (const options of [{ group: "" }, { group, member: "" }, { group, partitions: 2.5 }, { group, drain: -1 },
                         { group, ttl: 0 }, { group, onRevoked: "no" }]) {
    await refused({ partitions: 4, ...options }, (e) => e instanceof BadArgumentError && e.sqlstate === undefined,
                  JSON.stringify(options));
  }
  // the server's: a new group needs its partitions, 1 to 100000
  for (const partitions of [undefined, 0, 100001]) {
    await refused({ group, ttl: 2, partitions }, (e) => e instanceof BadArgumentError && e.sqlstate === "22023",
                  String(partitions));
  }
  assert.equal(Number(await sql("SELECT count(*) FROM leaderlock_groups WHERE grp = $1", [group])), 0);
});
