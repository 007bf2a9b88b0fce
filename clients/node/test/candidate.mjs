// The Node.js client as a candidate of the scenario suite (tests/clients):
// candidate.mjs DSN KEY ID TTL_SECONDS RECORDS. While it leads it appends
// "tick ID TERM UNIX_SECONDS" to RECORDS every 20 ms, checking the lease
// before each; SIGTERM: stop and release.
import { appendFileSync } from "node:fs";
import { lead, LeaseLost } from "../dist/esm/index.js";

const [dsn, key, id, ttl, path] = process.argv.slice(2);
let stopping = false;
process.on("SIGTERM", () => { stopping = true; });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

while (!stopping) {
  try {
    await lead(dsn, key, { ttl: Number(ttl), id }, async (lease) => {
      while (!stopping) {
        lease.check();
        appendFileSync(path, `tick ${id} ${lease.term} ${(Date.now() / 1000).toFixed(6)}\n`);
        await sleep(20);
      }
    });
  } catch (e) {
    if (!(e instanceof LeaseLost)) throw e;
  }
}
process.exit(0);
