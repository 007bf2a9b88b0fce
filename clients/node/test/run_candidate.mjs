// The Node.js client as a runner of scheduled runs (contract 22), for a
// cross-client scenario and test/schedule.test.mjs:
//   run_candidate.mjs DSN JOB ID PERIOD_MS TTL_SECONDS GRACE_SECONDS RECORDS WORK_SECONDS
// Schedules JOB every PERIOD_MS as ID (that ttl and misfire grace), as
// README.md shows it. For each run it appends to RECORDS, one write per
// line: "start ID TERM DUE UNIX_SECONDS"; then, until WORK_SECONDS have
// passed, "tick ..." every 20 ms, checking the run against the clock before
// each ("lost ..." and it stops when it is no longer ours); then "end ...".
// DUE is RFC 3339 UTC with 6 fractional digits. SIGTERM: the schedule
// stops (a run in progress is told and recorded), then exit 143.
import { appendFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { schedule } from "../dist/esm/index.js";

const [url, job, id, period, ttl, grace, records, work] = process.argv.slice(2);
if (work === undefined) {
  console.error("usage: run_candidate.mjs DSN JOB ID PERIOD_MS TTL_SECONDS GRACE_SECONDS RECORDS WORK_SECONDS");
  process.exit(2);
}

const dueText = (d) => d.toISOString().replace(/\.(\d{3})Z$/, ".$1000Z");
// Each record bears the time read before the check that allowed it: a pause between the check and
// the write (a SIGSTOP) must not date the unit of work after the pause.
const record = (what, run, at) =>
  appendFileSync(records, `${what} ${id} ${run.term} ${dueText(run.due)} ${(at / 1000).toFixed(6)}\n`);

const stop = new AbortController();
process.on("SIGTERM", () => stop.abort());

await schedule(url, job, {
  every: Number(period), ttlMs: Number(ttl) * 1000, misfireGraceMs: Number(grace) * 1000, id, signal: stop.signal,
}, async (run) => {
  let at = Date.now();
  if (!run.isOurs()) {                        // (paused right after the claim)
    record("lost", run, at);
    return;
  }
  record("start", run, at);
  const until = performance.now() + Number(work) * 1000;
  while (performance.now() < until) {
    at = Date.now();
    if (!run.isOurs()) {                      // the clock, read before each unit
      record("lost", run, at);
      return;
    }
    record("tick", run, at);
    await sleep(20);
  }
  record("end", run, Date.now());
});
process.exit(stop.signal.aborted ? 143 : 0);
