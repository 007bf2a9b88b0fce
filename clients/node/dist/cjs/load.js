"use strict";
Object.defineProperty(exports, "__esModule", { value: true });
exports.pg = void 0;
exports.requireHereOrInApp = requireHereOrInApp;
// The packages leaderlock loads: pg (a peer dependency) when the package
// loads, cron-parser when a cron schedule is first asked for; each here, or
// else in the application (a folder installed as a link).
const node_module_1 = require("node:module");
const node_path_1 = require("node:path");
/**
 * Module `name` as this file finds it, else as the application finds it
 * (from its entry script, then its working directory), else undefined: a
 * folder installed with `npm install /path/to/clients/node` is a link,
 * Node resolves from its real path, outside the application's
 * node_modules, and npm installs none of the folder's dependencies.
 */
function requireHereOrInApp(name) {
    try {
        return require(name);
    }
    catch (e) {
        if (e?.code !== "MODULE_NOT_FOUND")
            throw e;
    }
    for (const from of [process.argv[1], (0, node_path_1.join)(process.cwd(), "[leaderlock]")]) {
        if (!from)
            continue;
        try {
            return (0, node_module_1.createRequire)(from)(name);
        }
        catch {
            // not there either
        }
    }
    return undefined;
}
/** `pg` (a peer dependency), here or in the application. */
function loadPg() {
    const found = requireHereOrInApp("pg");
    if (found)
        return found;
    throw new Error("leaderlock needs the package pg (8.x): npm install pg in your application. (A folder installed " +
        "as a link finds it from your application's entry script or working directory; " +
        "npm install --install-links copies the folder instead.)");
}
exports.pg = loadPg();
