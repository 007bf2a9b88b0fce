import type PG from "pg";
/** Whether a notification this session sends itself comes back (not behind transaction pooling). */
export declare function probe(c: PG.Client, until: number): Promise<boolean>;
export declare function frees(payload: string | undefined, key: string): boolean;
/**
 * Whether `payload` is a group's announcement (contract 26) as the server
 * writes it (the Rust client's Announcement::well_formed_partition) naming
 * `member` of `group`: a hint that its assignment changed.
 */
export declare function namesMember(payload: string | undefined, group: string, member: string): boolean;
/**
 * Until a notification says `key` is free (a hint only; never sooner than
 * HINT_FLOOR after `lastTry`, the start of the last try: hints heard
 * meanwhile make one try), `ms` pass, the connection ends, or `stop` aborts.
 * `heardAt`: when the campaign last heard such a hint; one heard since
 * `lastTry` began (while that try was in flight, when no wait listened)
 * counts too, or a release announced during a try would wait for the poll.
 */
export declare function hint(c: PG.Client, key: string, ms: number, lastTry: number, stop?: AbortSignal, heardAt?: number): Promise<void>;
