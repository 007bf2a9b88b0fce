// A process holding keys under a session, for test/session.test.mjs:
//   session_child.mjs DSN PREFIX KEYS TTL_SECONDS RECORDS
// Opens a session (ttl TTL_SECONDS), acquires PREFIX/0 .. PREFIX/KEYS-1
// under it, appends "ready HANDLE" to RECORDS, then every 20 ms:
// "alive T0 T1 BOOL" (session.alive, read between T0 and T1, nanoseconds of
// process.hrtime: CLOCK_MONOTONIC, the same in every process), then, only
// if every lease's check() passes, the side effect "effect T0" (T0 read
// before the checks). At the first failed check: "lost REASON", then it
// closes the session and exits.
import { appendFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { openSession, LeaseLost } from "../dist/esm/index.js";

const [url, prefix, n, ttl, records] = process.argv.slice(2);
const out = (line) => appendFileSync(records, `${line}\n`);

const s = await openSession(url, { ttl: Number(ttl) });
const leases = [];
for (let i = 0; i < Number(n); i++) leases.push(await s.tryAcquire(`${prefix}/${i}`));
if (leases.some((l) => l === null)) {
  console.error("not every key was free");
  process.exit(2);
}
out(`ready ${s.handle}`);
for (;;) {
  let t0 = process.hrtime.bigint();
  const alive = s.alive;
  const t1 = process.hrtime.bigint();
  out(`alive ${t0} ${t1} ${alive}`);
  t0 = process.hrtime.bigint();
  try {
    for (const l of leases) l.check();
  } catch (e) {
    if (!(e instanceof LeaseLost)) throw e;
    out(`lost ${e.reason}`);
    break;
  }
  out(`effect ${t0}`); // the side effect, only once every check passed
  await sleep(20);
}
await s.close();
