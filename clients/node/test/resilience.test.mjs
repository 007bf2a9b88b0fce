// The Node.js client when the process or the server misbehaves (issue 36),
// against a real server. LEADERLOCK_DSN: a database with leaderlock whose
// role is a superuser (it makes databases and roles of its own, and drops
// them). LEADERLOCK_PGDATA and PG_BIN (both, or the restart test is
// skipped): the server's data directory and bin directory, for
// `pg_ctl restart -m fast` (run as postgres when we are root).
// - the leader's process paused (SIGSTOP) past its ttl, then resumed: no
//   unit of work after its local deadline, in either README idiom;
// - the local deadline read from the clock, before any timer has run;
// - guarded writes: refused once another leads, nothing of them committed;
// - lead() and Elector waiting through a server restart, then leading;
// - several hosts, target_session_attrs=read-write;
// - typed errors; an Elector stops at a permanent one, reporting it once;
// - releaseOnSignals: SIGTERM releases, the follower leads at once;
// - leaderlock's schema: one that needs quoting (found, quoted by the
//   server), the portable edition in two schemas (the `schema` option or
//   LEADERLOCK_SCHEMA names one; else BadArgumentError), a named schema that
//   does not hold it (NotInstalledError).
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFile } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, readFileSync, existsSync, rmSync } from "node:fs";
import { createServer, createConnection } from "node:net";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { randomBytes } from "node:crypto";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import pg from "pg";
import {
  lead, Elector, LeaseLost, NotInstalledError, PrivilegeError, BadArgumentError, ConnectionError, RejectedError, openSession,
  watchHistory,
} from "../dist/esm/index.js";
import { DSN, fresh, sleep, sql, until } from "./support.mjs";

const PGDATA = process.env.LEADERLOCK_PGDATA;
const PG_BIN = process.env.PG_BIN;
const CANDIDATE = fileURLToPath(new URL("./candidate.mjs", import.meta.url));
const NOEXT_DB = "ll_node_noext";
const PRIV_DB = "ll_node_priv";
const NOEXEC = "ll_node_noexec";
const QUOTED_DB = "ll_node_quoted_schema";
const TWO_DB = "ll_node_two_schemas";
const PORTABLE = fileURLToPath(new URL("../../../portable/leaderlock.sql", import.meta.url));



/** DSN with another database and/or user. */
function dsnWith({ database, user, hosts, params } = {}) {
  const u = new URL(DSN);
  if (database) u.pathname = `/${database}`;
  if (user) {
    u.username = user;
    u.password = "";
  }
  for (const [k, v] of Object.entries(params ?? {})) u.searchParams.set(k, v);
  const s = u.toString();
  return hosts ? s.replace(`//${u.username ? `${u.username}@` : ""}${u.host}`, `//${u.username ? `${u.username}@` : ""}${hosts}`) : s;
}

/** The "tick ID TERM UNIX_SECONDS" lines of `path`. */
function ticks(path) {
  if (!existsSync(path)) return [];
  return readFileSync(path, "utf8").split("\n").filter(Boolean).map((l) => l.split(" "))
    .filter((p) => p.length === 4 && p[0] === "tick").map(([, id, term, at]) => ({ id, term: Number(term), at: Number(at) }));
}

/** The application_name of candidate `id`'s sessions for `key`. */
const appName = (key, id) => `cand-${id}-${key}`.slice(0, 63);

/**
 * candidate.mjs as the scenario suite runs it (its sessions named
 * appName(key, id)); `exited` resolves with its signal or code.
 */
function candidate(key, id, ttl, records, idiom) {
  const dsn = dsnWith({ params: { application_name: appName(key, id) } });
  const proc = spawn(process.execPath, [CANDIDATE, dsn, key, id, String(ttl), records, idiom],
                     { stdio: ["ignore", "inherit", "pipe"] });
  let stderr = "";
  proc.stderr.on("data", (d) => { stderr += d; });
  const exited = once(proc, "exit").then(([code, signal]) => ({ code, signal }));
  return { proc, exited, stderr: () => stderr, kill: () => { try { proc.kill("SIGCONT"); proc.kill("SIGKILL"); } catch {} } };
}

/** Until candidate `id` waits for `key`: its session idle after a refused try (lead) or the holder's name (Elector). */
function waiting(key, id) {
  return until(async () => Boolean(await sql(
    "SELECT 1 FROM pg_stat_activity WHERE application_name = $1 AND state = 'idle' " +
    "AND (query LIKE 'SELECT %.le_try_acquire(%' OR query LIKE 'SELECT %.le_leader(%')", [appName(key, id)])), 10000);
}

/** A session that LISTENs for the key's announcements. */
async function listener(key) {
  const c = new pg.Client({ connectionString: DSN });
  await c.connect();
  const events = [];
  c.on("notification", (n) => {
    const a = JSON.parse(n.payload);
    if (a.key === key) events.push(a);
  });
  await c.query("LISTEN leaderlock");
  return { events, end: () => c.end() };
}

before(async () => {
  assert.ok(await sql("SELECT rolsuper FROM pg_roles WHERE rolname = current_user"), "LEADERLOCK_DSN's role must be a superuser");
});

describe("the leader's process paused past its ttl, then resumed", { concurrency: true }, () => {
  for (const idiom of ["lead", "elector"]) {
    test(`${idiom}: no tick after its local deadline; the follower takes over`, async () => {
      const ttl = 2;
      const key = fresh(`paused-${idiom}`);
      const dir = mkdtempSync(join(tmpdir(), "leaderlock-node-"));
      const records = join(dir, "records");
      const a = candidate(key, "a", ttl, records, idiom);
      let b;
      try {
        assert.ok(await until(() => ticks(records).length > 0, 15000), `a never led: ${a.stderr()}`);
        b = candidate(key, "b", ttl, records, idiom);
        assert.ok(await waiting(key, "b"), `b is not waiting: ${b.stderr()}`);
        const stoppedAt = Date.now() / 1000;
        a.proc.kill("SIGSTOP");
        await sleep(2 * ttl * 1000);
        a.proc.kill("SIGCONT");
        await sleep(1000);
        const t = ticks(records);
        const termA = t.find((x) => x.id === "a").term;
        // its lease was last renewed before the pause: its deadline is before stoppedAt + ttl
        const late = t.filter((x) => x.id === "a" && x.at > stoppedAt + ttl);
        assert.deepEqual(late, [], `a ticked past its local deadline (paused at ${stoppedAt})`);
        const firstB = t.find((x) => x.id === "b");
        assert.ok(firstB, `b never led: ${b.stderr()}`);
        assert.ok(firstB.term > termA);
        assert.ok(t.filter((x) => x.id === "a").every((x) => x.at < firstB.at), "a ticked after b took over");
      } finally {
        a.kill();
        b?.kill();
        rmSync(dir, { recursive: true, force: true });
      }
    });
  }
});

test("the local deadline is read from the clock: a blocked event loop sees it at once", async () => {
  const key = fresh("clock");
  const c = new pg.Client({ connectionString: DSN });
  await c.connect();
  try {
    await assert.rejects(lead(DSN, key, { ttl: 1 }, async (lease) => {
      assert.ok(lease.valid && !lease.signal.aborted);
      const end = performance.now() + 1100; // no timer can run meanwhile, as in a paused process
      while (performance.now() < end);
      assert.equal(lease.valid, false);
      assert.equal(lease.signal.aborted, true);
      assert.equal(lease.signal.reason.reason, "deadline");
      assert.throws(() => lease.check(), (e) => e instanceof LeaseLost && e.reason === "deadline");
      await lease.guard(c); // refused here, before any statement
    }), (e) => e instanceof LeaseLost && e.reason === "deadline");
  } finally {
    await c.end();
  }
});

test("guarded writes commit while leading; refused and rolled back once another leads", async () => {
  const key = fresh("guard");
  const table = `node_guarded_${randomBytes(3).toString("hex")}`;
  await sql(`CREATE TABLE ${table} (n int)`);
  const c = new pg.Client({ connectionString: DSN });
  const pool = new pg.Pool({ connectionString: DSN, max: 2 });
  await c.connect();
  try {
    await lead(DSN, key, { ttl: 10 }, async (lease) => {
      assert.equal(await lease.guarded(pool, async (tx) => (await tx.query(`INSERT INTO ${table} VALUES (1) RETURNING n`)).rows[0].n), 1);
      assert.equal(await lease.guarded(c, (tx) => tx.query(`INSERT INTO ${table} VALUES (2)`)).then(() => "ok"), "ok");
      await c.query("BEGIN");
      assert.equal(await lease.guard(c), lease.term);
      await c.query(`INSERT INTO ${table} VALUES (3)`);
      await c.query("COMMIT");
      // another leads now; this process's clock does not know it
      assert.ok(await sql("SELECT le_force_release($1)", [key]));
      assert.ok(await sql("SELECT le_try_acquire($1, 'rival', '60 seconds')", [key]));
      assert.ok(lease.valid);
      // in the caller's transaction: the write before the guard does not commit
      await c.query("BEGIN");
      await c.query(`INSERT INTO ${table} VALUES (4)`);
      await assert.rejects(lease.guard(c), (e) => e instanceof LeaseLost && e.reason === "fenced" && /rival/.test(e.message));
      assert.equal((await c.query("COMMIT")).command, "ROLLBACK");
      assert.equal(lease.valid, false, "the lease ends when the server says another leads");
      assert.ok(lease.signal.aborted);
      let ran = false;
      await assert.rejects(lease.guarded(pool, async (tx) => { ran = true; await tx.query(`INSERT INTO ${table} VALUES (5)`); }),
                           LeaseLost);
      assert.equal(ran, false);
    });
    assert.deepEqual((await c.query(`SELECT n FROM ${table} ORDER BY n`)).rows.map((r) => r.n), [1, 2, 3]);
    assert.equal(pool.totalCount, pool.idleCount, "a pooled client was not returned");
    // a fn that swallowed an error leaves an aborted transaction: COMMIT rolled back, and guarded() says so
    await lead(DSN, fresh("guard-aborted"), { ttl: 10 }, async (lease) => {
      await assert.rejects(lease.guarded(c, async (tx) => {
        await tx.query(`INSERT INTO ${table} VALUES (6)`);
        await tx.query("SELECT 1/0").catch(() => {});
      }), /rolled back/);
    });
    assert.equal(await sql(`SELECT count(*)::int FROM ${table} WHERE n = 6`), 0);
  } finally {
    await c.end();
    await pool.end();
    await sql(`DROP TABLE ${table}`);
    await sql("SELECT le_release($1, 'rival')", [key]);
  }
});

async function restartServer() {
  const pgCtl = [join(PG_BIN, "pg_ctl"), "-D", PGDATA, "-l", join(PGDATA, "server.log"), "-w", "-t", "60", "restart", "-m", "fast"];
  const [cmd, args] = process.getuid?.() === 0 ? ["sudo", ["-u", "postgres", "--", "env", `LD_LIBRARY_PATH=${join(dirname(PG_BIN), "lib")}`, ...pgCtl]]
    : [pgCtl[0], pgCtl.slice(1)];
  const t0 = performance.now();
  await new Promise((resolve, reject) => execFile(cmd, args, (err, out, errOut) => (err ? reject(new Error(`${err}: ${errOut}`)) : resolve())));
  return performance.now() - t0;
}

test("waiting survives a server restart: lead() and an Elector lead once the key is free",
     { skip: PGDATA && PG_BIN ? false : "LEADERLOCK_PGDATA and PG_BIN not set" }, async () => {
  const key = fresh("restart");
  const keyE = fresh("restart-elector");
  assert.ok(await sql("SELECT le_try_acquire($1, 'rival', '60 seconds')", [key]));
  assert.ok(await sql("SELECT le_try_acquire($1, 'rival', '60 seconds')", [keyE]));
  const errors = [];
  const retries = [];
  let elected = null;
  const e = new Elector(DSN, keyE, { ttl: 5 })
    .on("error", (err) => errors.push(err))
    .on("retrying", (err) => retries.push(err))
    .on("elected", (lease) => { elected = lease.term; })
    .start();
  try {
    const waiting = lead(DSN, key, { ttl: 5, timeout: 30 }, async (lease) => lease.term);
    waiting.catch(() => {}); // awaited below; not unhandled should an assertion fail first
    await sleep(500);
    const took = await restartServer();
    assert.ok(await sql("SELECT le_release($1, 'rival')", [key]), "the rival's lease did not outlast the restart");
    assert.ok(await sql("SELECT le_release($1, 'rival')", [keyE]));
    const t0 = performance.now();
    const term = await waiting;
    assert.equal(term, Number(await sql("SELECT term FROM leaderlock WHERE key = $1", [key])));
    assert.ok(await until(() => elected !== null, 5000), "the Elector did not lead after the restart");
    console.error(`  restart took ${took.toFixed(0)} ms; lead() led ${(performance.now() - t0).toFixed(0)} ms after the release; ` +
                  `the Elector retried ${retries.length} times`);
    assert.deepEqual(errors, []);
    assert.ok(retries.length > 0 && retries.every((r) => r instanceof ConnectionError));
  } finally {
    await e.stop();
    await sql("SELECT le_release($1, 'rival')", [key]).catch(() => {});
    await sql("SELECT le_release($1, 'rival')", [keyE]).catch(() => {});
  }
});

/**
 * A proxy to the server that adds `-c default_transaction_read_only=on` to
 * each session's startup options: to the client, a read-only host (as a
 * standby is).
 */
async function readOnlyProxy() {
  const up = new URL(DSN);
  const server = createServer((client) => {
    const upstream = createConnection({ host: up.hostname, port: Number(up.port || 5432) });
    client.once("data", (first) => {
      // StartupMessage: int32 length, int32 protocol, (name \0 value \0)*, \0
      const extra = Buffer.from("options\0-c default_transaction_read_only=on\0");
      const body = Buffer.concat([first.subarray(8, first.length - 1), extra, Buffer.from([0])]);
      const head = Buffer.alloc(8);
      head.writeInt32BE(8 + body.length, 0);
      first.copy(head, 4, 4, 8);
      upstream.write(Buffer.concat([head, body]));
      client.pipe(upstream);
      upstream.pipe(client);
    });
    const end = () => { client.destroy(); upstream.destroy(); };
    client.on("error", end);
    upstream.on("error", end);
    client.on("close", end);
    upstream.on("close", end);
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return { port: server.address().port, close: () => server.close() };
}

test("several hosts: a dead one is skipped; target_session_attrs=read-write passes a read-only one by", async () => {
  const real = new URL(DSN).host;
  const ro = await readOnlyProxy();
  const dead = createServer().listen(0, "127.0.0.1");
  await once(dead, "listening");
  const deadPort = dead.address().port;
  dead.close(); // nothing listens there now
  try {
    const both = dsnWith({ hosts: `127.0.0.1:${deadPort},${real}` });
    await lead(both, fresh("hosts"), { ttl: 5, timeout: 5 }, async (lease) => assert.ok(lease.valid));
    const rw = dsnWith({ hosts: `127.0.0.1:${ro.port},${real}`, params: { target_session_attrs: "read-write" } });
    await lead(rw, fresh("read-write"), { ttl: 5, timeout: 5 }, async (lease) => assert.ok(lease.valid));
    // only the read-only host: a standby is waited out (until the timeout), not a refusal
    const t0 = performance.now();
    await assert.rejects(lead(dsnWith({ hosts: `127.0.0.1:${ro.port}` }), fresh("read-only"), { ttl: 5, timeout: 0.5 }, async () => {}),
                         (e) => e instanceof ConnectionError && e.sqlstate === "25006");
    assert.ok(performance.now() - t0 >= 500);
    await assert.rejects(lead(dsnWith({ hosts: `127.0.0.1:${ro.port}`, params: { target_session_attrs: "read-write" } }),
                              fresh("read-write-none"), { ttl: 5, timeout: 0.3 }, async () => {}),
                         (e) => e instanceof ConnectionError && /read-only/.test(e.message));
  } finally {
    ro.close();
  }
});

describe("typed errors", () => {
  before(async () => {
    for (const db of [NOEXT_DB, PRIV_DB]) {
      if (!(await sql("SELECT 1 FROM pg_database WHERE datname = $1", [db]))) await sql(`CREATE DATABASE ${db}`);
    }
    if (!(await sql("SELECT 1 FROM pg_roles WHERE rolname = $1", [NOEXEC]))) await sql(`CREATE ROLE ${NOEXEC} LOGIN`);
    const priv = dsnWith({ database: PRIV_DB });
    await sql("CREATE EXTENSION IF NOT EXISTS leaderlock", [], priv);
    // in that database alone: nobody but superusers may call leaderlock's functions
    await sql("REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA public FROM PUBLIC", [], priv);
  });
  after(async () => {
    for (const db of [NOEXT_DB, PRIV_DB]) await sql(`DROP DATABASE IF EXISTS ${db} WITH (FORCE)`);
    await sql(`DROP ROLE IF EXISTS ${NOEXEC}`);
  });

  test("no extension: NotInstalledError naming the database, at once", async () => {
    const t0 = performance.now();
    await assert.rejects(lead(dsnWith({ database: NOEXT_DB }), fresh("noext"), { ttl: 5, timeout: 10 }, async () => {}),
      (e) => e instanceof NotInstalledError && e instanceof RejectedError && e.database === NOEXT_DB &&
             e.message.startsWith(`extension leaderlock is not installed in database ${NOEXT_DB}`));
    assert.ok(performance.now() - t0 < 2000);
  });

  test("a role without EXECUTE: PrivilegeError", async () => {
    await assert.rejects(lead(dsnWith({ database: PRIV_DB, user: NOEXEC }), fresh("priv"), { ttl: 5, timeout: 10 }, async () => {}),
      (e) => e instanceof PrivilegeError && e.sqlstate === "42501");
  });

  test("a bad ttl: BadArgumentError, from the server (above leaderlock.max_ttl) or from the client", async () => {
    await assert.rejects(lead(DSN, fresh("ttl"), { ttl: 1e7, timeout: 10 }, async () => {}),
      (e) => e instanceof BadArgumentError && e.sqlstate === "22023" && /max_ttl/.test(e.message));
    await assert.rejects(lead(DSN, fresh("ttl"), { ttl: 0 }, async () => {}), (e) => e instanceof BadArgumentError && e.sqlstate === undefined);
  });

  test("no server: ConnectionError once the timeout has passed (retrying until then)", async () => {
    const dead = createServer().listen(0, "127.0.0.1");
    await once(dead, "listening");
    const port = dead.address().port;
    dead.close();
    const t0 = performance.now();
    await assert.rejects(lead(dsnWith({ hosts: `127.0.0.1:${port}` }), fresh("down"), { ttl: 5, timeout: 0.5 }, async () => {}),
                         (e) => e instanceof ConnectionError && /ECONNREFUSED/.test(e.message));
    assert.ok(performance.now() - t0 >= 500);
  });

  for (const [what, config, options, type] of [
    ["no extension", () => dsnWith({ database: NOEXT_DB }), { ttl: 5 }, NotInstalledError],
    ["a ttl above max_ttl", () => DSN, { ttl: 1e7 }, BadArgumentError],
  ]) {
    test(`Elector: ${what} is reported once ("error"), and it stops`, async () => {
      const errors = [];
      const e = new Elector(config(), fresh("elector-stops"), options).on("error", (err) => errors.push(err)).start();
      assert.ok(await until(() => errors.length > 0, 5000));
      await sleep(1500);
      assert.equal(errors.length, 1, errors.join("; "));
      assert.ok(errors[0] instanceof type);
      assert.equal(e.failed, errors[0]);
      assert.equal(e.running, false);
      await e.stop();
    });
  }
});

describe("releaseOnSignals: SIGTERM releases, then the process exits", { concurrency: true }, () => {
  for (const idiom of ["lead", "elector"]) {
    test(`${idiom}: the follower leads within 100 ms of the release`, async () => {
      const key = fresh(`sigterm-${idiom}`);
      const dir = mkdtempSync(join(tmpdir(), "leaderlock-node-"));
      const records = join(dir, "records");
      const heard = await listener(key);
      const a = candidate(key, "a", 10, records, idiom);
      let b;
      try {
        assert.ok(await until(() => ticks(records).length > 0, 15000), `a never led: ${a.stderr()}`);
        b = candidate(key, "b", 10, records, idiom);
        assert.ok(await waiting(key, "b"), `b is not waiting: ${b.stderr()}`);
        a.proc.kill("SIGTERM");
        const { signal } = await a.exited;
        assert.equal(signal, "SIGTERM", `a did not end by the signal: ${a.stderr()}`);
        assert.ok(await until(() => heard.events.some((x) => x.event === "acquired" && x.holder === "b"), 5000), "b did not lead");
        const released = heard.events.find((x) => x.event === "released" && x.holder === "a");
        assert.ok(released, `a did not release: ${JSON.stringify(heard.events)}`);
        assert.equal(released.forced, false);
        const acquired = heard.events.find((x) => x.event === "acquired" && x.holder === "b");
        const ms = Date.parse(acquired.at) - Date.parse(released.at);
        console.error(`  ${idiom}: b led ${ms} ms after a released`);
        assert.ok(ms < 100, `b led ${ms} ms after the release`);
        const t = ticks(records);
        assert.ok(await until(() => ticks(records).some((x) => x.id === "b"), 2000));
        const firstB = ticks(records).find((x) => x.id === "b");
        assert.ok(t.filter((x) => x.id === "a").every((x) => x.at < firstB.at));
      } finally {
        a.kill();
        b?.kill();
        await heard.end();
        rmSync(dir, { recursive: true, force: true });
      }
    });
  }
});

describe("leaderlock's schema, found on each connection, never the search_path", () => {
  const quoted = dsnWith({ database: QUOTED_DB });
  const two = dsnWith({ database: TWO_DB });
  before(async () => {
    for (const db of [QUOTED_DB, TWO_DB]) {
      await sql(`DROP DATABASE IF EXISTS ${db} WITH (FORCE)`);
      await sql(`CREATE DATABASE ${db}`);
    }
    // the compiled edition in a schema whose name needs quoting, not on the search_path
    await sql('CREATE SCHEMA "ll Node"', [], quoted);
    await sql('CREATE EXTENSION leaderlock SCHEMA "ll Node"', [], quoted);
    // the portable edition in two schemas
    const script = readFileSync(PORTABLE, "utf8");
    for (const schema of ["ll_one", "ll_two"]) {
      const c = new pg.Client({ connectionString: two });
      await c.connect();
      try {
        await c.query(`CREATE SCHEMA ${schema}`);
        await c.query(`SET search_path = ${schema}`);
        await c.query(script);
      } finally {
        await c.end();
      }
    }
  });
  after(async () => {
    for (const db of [QUOTED_DB, TWO_DB]) await sql(`DROP DATABASE IF EXISTS ${db} WITH (FORCE)`);
  });

  test("a schema whose name needs quoting: leads, guards, sessions and the history name it", async () => {
    const key = fresh("quoted");
    const term = await lead(quoted, key, { ttl: 2, timeout: 5 }, async (lease) => {
      const c = new pg.Client({ connectionString: quoted });
      await c.connect();
      try {
        assert.equal(await lease.guarded(c, async () => "written"), "written");
      } finally {
        await c.end();
      }
      return lease.term;
    });
    assert.ok(term > 0);
    const s = await openSession(quoted, { ttl: 2 });
    try {
      assert.ok((await s.tryAcquire(`${key}-s`)) !== null);
    } finally {
      assert.equal(await s.close(), true);
    }
    const w = watchHistory(quoted, { since: 0, key });
    try {
      assert.equal((await w.next()).value.event, "acquired");
    } finally {
      await w.close();
    }
    assert.equal(Number(await sql('SELECT count(*) FROM "ll Node".leaderlock WHERE key = $1', [key], quoted)), 1);
  });

  test("two schemas: BadArgumentError naming both, unless the option or LEADERLOCK_SCHEMA names one", async () => {
    const saved = process.env.LEADERLOCK_SCHEMA;
    delete process.env.LEADERLOCK_SCHEMA;
    try {
      await assert.rejects(lead(two, fresh("two"), { ttl: 2, timeout: 5 }, async () => {}),
        (e) => e instanceof BadArgumentError && e.sqlstate === undefined &&
               e.message.includes(`several schemas of database ${TWO_DB}: "ll_one", "ll_two"`) &&
               e.message.includes("LEADERLOCK_SCHEMA"));
      const errors = [];
      const e = new Elector(two, fresh("two-elector"), { ttl: 2 }).on("error", (err) => errors.push(err)).start();
      assert.ok(await until(() => errors.length > 0, 5000));
      assert.ok(errors[0] instanceof BadArgumentError);
      await e.stop();
      const key = fresh("two-named");
      await lead(two, key, { ttl: 2, timeout: 5, schema: "ll_two" }, async () => {
        assert.equal(await sql("SELECT ll_two.le_leader($1)", [key], two) !== null, true);
        assert.equal(await sql("SELECT ll_one.le_leader($1)", [key], two), null);
      });
      process.env.LEADERLOCK_SCHEMA = "ll_one";
      await lead(two, key, { ttl: 2, timeout: 5 }, async (lease) => {
        assert.equal(await sql("SELECT ll_one.le_leader($1)", [key], two), lease.id);
      });
      // the option wins over the environment
      await lead(two, key, { ttl: 2, timeout: 5, schema: "ll_two" }, async (lease) => {
        assert.equal(await sql("SELECT ll_two.le_leader($1)", [key], two), lease.id);
      });
    } finally {
      if (saved === undefined) delete process.env.LEADERLOCK_SCHEMA;
      else process.env.LEADERLOCK_SCHEMA = saved;
    }
  });

  test("a named schema that does not hold leaderlock: NotInstalledError; an empty one: BadArgumentError", async () => {
    await assert.rejects(lead(DSN, fresh("not-here"), { ttl: 2, timeout: 5, schema: "pg_catalog" }, async () => {}),
      (e) => e instanceof NotInstalledError && e.schema === "pg_catalog" &&
             /not installed in database .* \(schema "pg_catalog" does not hold leaderlock's functions\)/.test(e.message));
    await assert.rejects(openSession(DSN, { schema: "" }), BadArgumentError);
    assert.throws(() => new Elector(DSN, "k", { schema: 7 }), BadArgumentError);
  });
});
