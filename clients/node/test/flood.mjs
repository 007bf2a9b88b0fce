// Forged `released` announcements of KEY, as fast as one session sends
// them, for SECONDS: flood.mjs CONNECTION_STRING KEY SECONDS. Prints how
// many it sent. (A process of its own: the flood does not share the event
// loop of the client under test.)
import pg from "pg";

const [dsn, key, seconds] = process.argv.slice(2);
const c = new pg.Client({ connectionString: dsn });
await c.connect();
const end = performance.now() + Number(seconds) * 1000;
let sent = 0;
while (performance.now() < end) {
  sent += 1;
  const payload = JSON.stringify({ event: "released", key, holder: "mallory", term: sent, at: "2026-01-01T00:00:00.000000Z" });
  await c.query("SELECT pg_notify('leaderlock', $1)", [payload]);
}
await c.end();
console.log(sent);
