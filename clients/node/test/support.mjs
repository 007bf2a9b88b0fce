// What the client's tests share: the server to test against, fresh keys,
// one-shot SQL on the server, and waiting for a condition.
import { randomBytes } from "node:crypto";
import { performance } from "node:perf_hooks";
import pg from "pg";

export const DSN = process.env.LEADERLOCK_DSN ?? "postgresql://postgres@127.0.0.1/postgres";
export const fresh = (name) => `node-${name}-${randomBytes(4).toString("hex")}`;
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// The first column of the first row of `text`, on a connection of its own.
export async function sql(text, values = [], dsn = DSN) {
  const c = new pg.Client({ connectionString: dsn });
  await c.connect();
  try {
    const rows = (await c.query(text, values)).rows;
    return rows.length ? Object.values(rows[0])[0] : null;
  } finally {
    await c.end();
  }
}

// Whether `predicate` came true within `ms`.
export async function until(predicate, ms = 10000) {
  const end = performance.now() + ms;
  while (performance.now() < end) {
    if (await predicate()) return true;
    await sleep(20);
  }
  return false;
}
