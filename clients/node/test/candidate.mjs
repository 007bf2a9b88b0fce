// The Node.js client as a candidate of the scenario suite (tests/clients)
// and of test/resilience.test.mjs:
//   candidate.mjs DSN KEY ID TTL_SECONDS RECORDS [IDIOM]
// IDIOM is `lead` (the default) or `elector`, each written as README.md
// shows it. While it leads it appends "tick ID TERM UNIX_SECONDS" to
// RECORDS every 20 ms, checking the lease against the clock before each
// tick; SIGTERM (releaseOnSignals): release, then exit.
import { appendFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { lead, Elector, LeaseLost, releaseOnSignals } from "../dist/esm/index.js";

const [url, key, id, ttl, records, idiom = "lead"] = process.argv.slice(2);

/** One unit of the leader's work. */
async function tick(lease) {
  appendFileSync(records, `tick ${id} ${lease.term} ${(Date.now() / 1000).toFixed(6)}\n`);
  await sleep(20);
}

if (idiom === "lead") {
  // README: "lead(): run while leading"
  for (;;) {                                  // lead whenever it can
    try {
      await lead(url, key, { ttl: Number(ttl), id }, async (lease) => {
        releaseOnSignals(lease);              // SIGTERM, SIGINT: release, then exit
        for (;;) {
          lease.check();                      // throws LeaseLost from the local deadline on
          await tick(lease);
        }
      });
    } catch (e) {
      if (!(e instanceof LeaseLost)) throw e; // lost: campaign again
    }
  }
} else if (idiom === "elector") {
  // README: "Elector: a service that campaigns for as long as it runs"
  const work = async (lease) => {
    while (lease.valid) {                     // the clock, read before each unit
      await tick(lease);
    }
  };
  const elector = new Elector(url, key, { ttl: Number(ttl), id })
    .on("elected", (lease) => { work(lease).catch((e) => console.error("work failed:", e)); })
    .on("revoked", (reason) => console.error("no longer leading:", reason))
    .on("error", (e) => { console.error("stopped:", e); process.exitCode = 1; })  // permanent: it has stopped
    .start();
  releaseOnSignals(elector);                  // SIGTERM, SIGINT: release, then exit
} else {
  console.error(`unknown idiom ${JSON.stringify(idiom)}: lead or elector`);
  process.exit(2);
}
