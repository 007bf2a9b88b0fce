import type PG from "pg";
/**
 * Module `name` as this file finds it, else as the application finds it
 * (from its entry script, then its working directory), else undefined: a
 * folder installed with `npm install /path/to/clients/node` is a link,
 * Node resolves from its real path, outside the application's
 * node_modules, and npm installs none of the folder's dependencies.
 */
export declare function requireHereOrInApp(name: string): any;
export declare const pg: typeof PG;
