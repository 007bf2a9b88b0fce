// Installing the package from a clone: `npm install <clone>/clients/node pg`
// in an empty directory gives a package that imports, as ES module and as
// CommonJS, and leads (LEADERLOCK_DSN). npm links such a folder and runs
// none of its scripts' builds for it (npm 12 gates them), so dist/ is
// committed: these tests also check that it is what src/ builds to (run
// after `npm run build`, as `npm test` does) and that no install script is
// needed. Needs npm and the npm registry (for pg, and the package's
// dependency cron-parser); nothing else.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { randomBytes } from "node:crypto";
import { fileURLToPath } from "node:url";

const DSN = process.env.LEADERLOCK_DSN ?? "postgresql://postgres@127.0.0.1/postgres";
const HERE = fileURLToPath(new URL("..", import.meta.url)); // clients/node
const pkg = JSON.parse(readFileSync(join(HERE, "package.json"), "utf8"));
// What a user's shell has: none of the settings `npm test` passes its scripts.
const ENV = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_/i.test(k)));

function run(cmd, args, cwd) {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { cwd, env: ENV, maxBuffer: 1 << 24 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${cmd} ${args.join(" ")} (in ${cwd}): ${err.message}\n${stdout}\n${stderr}`));
      else resolve(stdout);
    });
  });
}

/** The folder's files as a clone of this work tree would have them (not ignored by git), else everything but node_modules. */
async function cloneFiles() {
  try {
    return (await run("git", ["ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", "."], HERE))
      .split("\0").filter((f) => f && existsSync(join(HERE, f)));
  } catch {
    return null;
  }
}

let work;
let clone;
before(async () => {
  work = mkdtempSync(join(tmpdir(), "leaderlock-node-install-"));
  clone = join(work, "clone", "clients", "node");
  mkdirSync(clone, { recursive: true });
  const files = await cloneFiles();
  if (files) {
    for (const f of files) {
      mkdirSync(dirname(join(clone, f)), { recursive: true });
      cpSync(join(HERE, f), join(clone, f));
    }
  } else {
    cpSync(HERE, clone, { recursive: true, filter: (src) => !src.startsWith(join(HERE, "node_modules")) });
  }
});
after(() => rmSync(work, { recursive: true, force: true }));

test("the committed dist/ is what src/ builds to", async (t) => {
  let status;
  try {
    status = await run("git", ["status", "--porcelain", "--", "dist"], HERE);
  } catch {
    return t.skip("not a git work tree");
  }
  assert.equal(status, "", "dist/ differs from a build of src/: commit the rebuilt dist/ (npm run build)");
});

test("no install script is needed: npm runs none for a linked folder", () => {
  for (const script of ["preinstall", "install", "postinstall", "prepare"]) {
    assert.equal(pkg.scripts?.[script], undefined, `package.json has a ${script} script`);
  }
  const cargo = readFileSync(join(HERE, "..", "..", "Cargo.toml"), "utf8").match(/^version = "(.*)"/m)?.[1];
  assert.equal(pkg.version, cargo, "the package's version is the release's (Cargo.toml)");
});

// Run in the application: imports both ways, and leads once.
const CHECK_ESM = `
import * as ll from "leaderlock";
import { createRequire } from "node:module";
const cjs = createRequire(import.meta.url)("leaderlock");
if (cjs.lead !== ll.lead || cjs.Elector !== ll.Elector) throw new Error("import and require gave two implementations");
const term = await ll.lead(process.argv[2], process.argv[3], { ttl: 5, timeout: 5 }, async (lease) => {
  lease.check();
  return lease.term;
});
// every needs no other package; cron needs cron-parser (the package's dependency), or says how to get it
const every = ll.nextDue({ every: 60000 }, new Date("2026-03-28T12:00:30Z")).toISOString();
let due;
try {
  due = ll.nextDue({ cron: "30 2 * * *", tz: "Europe/Paris" }, new Date("2026-03-28T12:00:00Z")).toISOString();
} catch (e) {
  due = e.message;
}
console.log(JSON.stringify({ names: Object.keys(ll).sort(), term, every, due }));
`;
const CHECK_CJS = `
const ll = require("leaderlock");
new ll.Elector("postgresql://nowhere/db", "k", { ttl: 5 });
console.log(JSON.stringify({ names: Object.keys(ll).filter((k) => k !== "__esModule").sort() }));
`;

async function checkApp(app, cwd, cron = true) {
  writeFileSync(join(app, "check.mjs"), CHECK_ESM);
  writeFileSync(join(app, "check.cjs"), CHECK_CJS);
  const key = `node-install-${randomBytes(4).toString("hex")}`;
  const esm = JSON.parse(await run(process.execPath, [join(app, "check.mjs"), DSN, key], cwd));
  const cjs = JSON.parse(await run(process.execPath, [join(app, "check.cjs")], cwd));
  for (const name of ["lead", "Elector", "releaseOnSignals", "LeaseLost", "NotInstalledError", "ConnectionError", "schedule", "nextDue", "RunLost"]) {
    assert.ok(esm.names.includes(name), `import lacks ${name}`);
  }
  assert.deepEqual(cjs.names, esm.names);
  assert.ok(esm.term > 0);
  assert.equal(esm.every, "2026-03-28T12:01:00.000Z");
  if (cron) assert.equal(esm.due, "2026-03-30T00:30:00.000Z");
  else assert.match(esm.due, /needs the package cron-parser .*npm install cron-parser@5\.10\.6/);
  const installed = JSON.parse(readFileSync(join(app, "node_modules", "leaderlock", "package.json"), "utf8"));
  assert.equal(installed.version, pkg.version);
}

test("npm install <clone>/clients/node pg, in an empty directory: imports (ESM, CommonJS) and leads; cron after npm install cron-parser", async () => {
  const app = join(work, "app");
  mkdirSync(app);
  await run("npm", ["install", "--no-audit", "--no-fund", clone, "pg"], app);
  // npm installs none of a linked folder's dependencies: cron says what to install
  await checkApp(app, app, false);
  await run("npm", ["install", "--no-audit", "--no-fund", `cron-parser@${pkg.dependencies["cron-parser"]}`], app);
  await checkApp(app, app);
});

test("npm install --install-links <clone>/clients/node pg: a copy, usable from any directory", async () => {
  const app = join(work, "app-copy");
  mkdirSync(app);
  await run("npm", ["install", "--no-audit", "--no-fund", "--install-links", clone, "pg"], app);
  await checkApp(app, work);
});
