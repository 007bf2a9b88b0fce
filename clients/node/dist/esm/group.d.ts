import type PG from "pg";
import { LeaderlockError } from "./errors.js";
import { type PoolLike, type Queryable } from "./lease.js";
import { type ConnectionConfig } from "./options.js";
export interface MemberOptions {
    /** The group's name. Required. */
    group: string;
    /** This member's name in the group. Default host:pid:random. */
    member?: string;
    /** Seconds the membership lives without a renewal (renewed every ttl/3). Default 10. */
    ttl?: number;
    /** The group's partition count (1 to 100000), for its first join (or its maker's change). Default: as it is. */
    partitions?: number | null;
    /** Seconds a live owner has to give a revoked partition back, for the first join (or its maker's change). Default: as it is (10 s for a new group). */
    drain?: number | null;
    /** `partition` is ours in `term`: start work on it. Its result is not awaited. */
    onAssigned?: (partition: number, term: bigint) => void | Promise<void>;
    /**
     * The server revoked `partition` (ours in `term`): stop work on it and
     * drain; it is given back (le_ack) once the returned promise settles
     * (its next owner gets it then, or at the group's drain budget). Also
     * told for every partition at leave(), and instead of onLost when there
     * is no onLost.
     */
    onRevoked?: (partition: number, term: bigint) => void | Promise<void>;
    /** `partition` is not ours any more (gone from the assignment, or past the local deadline): stop at once. Not awaited. */
    onLost?: (partition: number, term: bigint) => void | Promise<void>;
    /** The server refused for good (a RejectedError): the member has stopped, every partition lost first. Default: a process warning. */
    onError?: (error: LeaderlockError) => void;
    /** Aborting it leaves the group (leave()). */
    signal?: AbortSignal;
    /** The schema that holds leaderlock, as LeadOptions.schema. Default LEADERLOCK_SCHEMA, else found. */
    schema?: string | null;
}
/**
 * A member of a group (member()): its partitions, renewed in the
 * background. owns() and owned() read the clock at each call.
 */
export interface Member {
    readonly group: string;
    /** This member's name in the group. */
    readonly member: string;
    /** Seconds. */
    readonly ttl: number;
    /** The local deadline of every partition owned, on performance.now()'s clock (-Infinity: none); moves at each round. */
    readonly deadline: number;
    /** The error that stopped this member, if one did. */
    readonly failed: LeaderlockError | undefined;
    /** The term `partition` is owned in, or null: not ours, revoked, or past the local deadline (checked now). Ask before each side effect. */
    owns(partition: number): bigint | null;
    /** Every partition owned now (partition -> term, by partition), as owns() says. */
    owned(): Map<number, bigint>;
    /**
     * In the caller's open transaction on `client`: le_assert_partition,
     * which raises (LE001) unless this member owns `partition` now in the
     * term it was assigned, and holds it so until that transaction ends.
     * Resolves with the term; rejects with PartitionNotOwned when the
     * server refuses, or at once, without a call, when owns() says null.
     */
    guard(client: PG.ClientBase | Queryable, partition: number): Promise<bigint>;
    /** Runs `fn` in a transaction fenced by guard(): BEGIN, guard, fn(tx), COMMIT; ROLLBACK on any error. `db` as Lease.guarded's. */
    guarded<T>(db: PG.ClientBase | PG.Pool | Queryable | PoolLike, partition: number, fn: (tx: PG.ClientBase) => Promise<T>): Promise<T>;
    /**
     * Leaves the group: nothing is ours from the call on, every partition
     * goes to onRevoked; once those promises (and any drain) settle,
     * le_leave hands them to the others at once. True when the server knew
     * the member; false (and a process warning) when it could not be
     * reached: its partitions then lapse with its ttl. Later calls get the
     * same answer.
     */
    leave(): Promise<boolean>;
}
/**
 * A partition that is not this member's now (SQLSTATE LE001): owns() said
 * null, or the server refused the guard (the error, in `cause`, aborted the
 * transaction). Stop acting on it.
 */
export declare class PartitionNotOwned extends LeaderlockError {
    readonly group: string;
    readonly partition: number;
    readonly member: string;
    readonly sqlstate = "LE001";
    constructor(group: string, partition: number, member: string, detail: string, cause?: unknown);
}
/**
 * Joins `options.group` as `options.member` (docs/groups.md) and keeps the
 * membership: the server assigns its partitions; onAssigned(partition,
 * term) when one is ours, onRevoked(partition, term) when the server takes
 * it back (drain, then settle: it is given back then), onLost when it is
 * gone without notice. Resolves once the first round (join, assignment) is
 * answered; rejects with a RejectedError (BadArgumentError,
 * NotInstalledError, PrivilegeError) when the server or this client
 * refuses, a ConnectionError when the server cannot be reached. Needs a
 * connection of its own (LISTEN): a configuration, not a pool.
 */
export declare function member(config: ConnectionConfig, options: MemberOptions): Promise<Member>;
