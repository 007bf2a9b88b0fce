/**
 * Module `name` as this file finds it, else as the application finds it
 * (from its entry script, then its working directory), else undefined: a
 * folder installed with `npm install /path/to/clients/node` is a link,
 * Node resolves from its real path, outside the application's
 * node_modules, and npm installs none of the folder's dependencies.
 */
export declare function requireHereOrInApp(name: string): any;
export declare const pg: {
    defaults: typeof import("pg").defaults;
    Client: typeof import("pg").Client;
    ClientBase: typeof import("pg").ClientBase;
    Events: typeof import("pg").Events;
    Query: typeof import("pg").Query;
    Pool: typeof import("pg").Pool;
    Connection: typeof import("pg").Connection;
    types: typeof import("pg").types;
    DatabaseError: typeof import("pg").DatabaseError;
    TypeOverrides: typeof import("pg").TypeOverrides;
    escapeIdentifier: typeof import("pg").escapeIdentifier;
    escapeLiteral: typeof import("pg").escapeLiteral;
    Result: typeof import("pg").Result;
    native: typeof import("pg").native;
};
