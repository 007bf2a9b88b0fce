// No statement of the library depends on the session's search_path
// (SECURITY.md; tests/clients/hostile.py and test/tour.mjs are the proof
// against a server): every function of PostgreSQL's is pg_catalog.name(...),
// every operator OPERATOR(pg_catalog.op), every type that is not a keyword
// pg_catalog.type, every object of leaderlock @extschema@.name. Reads
// every module of src/; needs no server.
import { test } from "node:test";
import assert from "node:assert/strict";
import { statements, constants, unqualified } from "./statements.mjs";

test("every statement of the library is qualified", () => {
  const all = statements();
  assert.ok(all.length > 30, `found ${all.length} statements: the reader of src/ is broken`);
  const found = all.flatMap((s) => unqualified(s.text).map((p) => `${s.file}:${s.line} (${s.name ?? "inline"}): ${p}`));
  assert.deepEqual(found, []);
});

test("every statement that calls a function is a constant (the tour names those it did not reach)", () => {
  const inline = statements().filter((s) => !s.name && /\(/.test(s.text));
  assert.deepEqual(inline.map((s) => `${s.file}:${s.line}: ${s.text}`), []);
  for (const name of ["FIND_SCHEMA", "TRY_ACQUIRE", "HISTORY", "RUN_STATE", "AFTER_REFUSAL"]) assert.ok(constants().has(name), name);
});

test("the check finds what depends on the search_path", () => {
  const bad = {
    "SELECT le_leader(key => $1)": ["function le_leader( not qualified", "le_leader not in @extschema@"],
    "SELECT @extschema@.le_try_acquire(key => $1, id => $2, ttl => make_interval(secs => $3))": ["function make_interval( not qualified"],
    "SELECT term::text FROM @extschema@.le_lease(key => $1)": ["type ::text not qualified"],
    "SELECT 1 FROM @extschema@.leaderlock WHERE key = $1": ["operator = not OPERATOR(pg_catalog.=)"],
    "SELECT (@extschema@.le_capabilities()->>'worker')": ["operator ->> not OPERATOR(pg_catalog.->>)"],
    "SELECT count(*) FROM leaderlock_runs": ["function count( not qualified", "leaderlock_runs not in @extschema@",
                                              "operator * not OPERATOR(pg_catalog.*)"],
    "SELECT 1 WHERE $1 IN ('a', 'b')": ["function IN( not qualified", "IN hides an operator"],
    "SELECT CASE $1 WHEN 'a' THEN 1 END": ["a simple CASE compares with ="],
    "SELECT $1::pg_catalog.uuid, $2::foo.uuid": ["type ::foo.uuid not qualified"],
  };
  for (const [text, problems] of Object.entries(bad)) assert.deepEqual(unqualified(text), problems, text);
  const good = [
    "SELECT @extschema@.le_try_acquire(key => $1, id => $2, ttl => pg_catalog.make_interval(secs => $3)) AS ok",
    "SELECT coalesce((@extschema@.le_capabilities() OPERATOR(pg_catalog.->>) 'worker')::boolean, true) AS ok",
    "SELECT pg_catalog.floor(extract(epoch FROM h.at) OPERATOR(pg_catalog.*) 1000)::pg_catalog.float8 AS ms",
    "SELECT pg_catalog.pg_notify('leaderlock_probe', $1)",
    "LISTEN leaderlock",
  ];
  for (const text of good) assert.deepEqual(unqualified(text), [], text);
});
