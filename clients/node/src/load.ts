// The packages leaderlock loads: pg (a peer dependency) when the package
// loads, cron-parser when a cron schedule is first asked for; each here, or
// else in the application (a folder installed as a link).
import { createRequire } from "node:module";
import { join } from "node:path";
import type PG from "pg";

/**
 * Module `name` as this file finds it, else as the application finds it
 * (from its entry script, then its working directory), else undefined: a
 * folder installed with `npm install /path/to/clients/node` is a link,
 * Node resolves from its real path, outside the application's
 * node_modules, and npm installs none of the folder's dependencies.
 */
export function requireHereOrInApp(name: string): any {
  try {
    return require(name);
  } catch (e: any) {
    if (e?.code !== "MODULE_NOT_FOUND") throw e;
  }
  for (const from of [process.argv[1], join(process.cwd(), "[leaderlock]")]) {
    if (!from) continue;
    try {
      return createRequire(from)(name);
    } catch {
      // not there either
    }
  }
  return undefined;
}

/** `pg` (a peer dependency), here or in the application. */
function loadPg(): typeof PG {
  const found = requireHereOrInApp("pg");
  if (found) return found;
  throw new Error("leaderlock needs the package pg (8.x): npm install pg in your application. (A folder installed " +
                  "as a link finds it from your application's entry script or working directory; " +
                  "npm install --install-links copies the folder instead.)");
}

export const pg = loadPg();
