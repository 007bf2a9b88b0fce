package io.github.leaderlock;

import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.util.Collections;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.Consumer;

/**
 * Every statement this library sends, and nothing else: one round trip each, bind parameters only
 * (JDBC's {@code ?}), arguments by name. The text is the other clients' (clients/go's statements,
 * clients/python's constants), placeholder for placeholder.
 *
 * <p>No statement depends on the session's search_path, which a database's owner may set for
 * every role ({@code ALTER DATABASE ... SET search_path = evil, pg_catalog, "$user", public}): a
 * function, aggregate or type of PostgreSQL's is written {@code pg_catalog.name}, an operator
 * {@code OPERATOR(pg_catalog.=)}, and every function, table and view of leaderlock {@code
 * @extschema@.name}, where {@code @extschema@} is replaced by the extension's schema as the server
 * quotes it, found by {@link #FIND_SCHEMA} on each new connection before any other statement. No
 * SET: behind a transaction-pooling pgbouncer it would not stick. StatementsTest checks every
 * constant here.
 */
final class Statements {
    private Statements() {}

    /** In a statement, where the extension's schema goes. */
    static final String EXTSCHEMA = "@extschema@";

    /** The environment variable that names the extension's schema, when no option does. */
    static final String SCHEMA_ENV = "LEADERLOCK_SCHEMA";

    /**
     * The extension's schema, quoted by the server: the one of CREATE EXTENSION; without a
     * pg_extension row (the portable edition, installed by its script), each schema that holds
     * le_capabilities(). Both parameters: the schema the user named, or NULL. The same statement in
     * every leaderlock client.
     */
    static final String FIND_SCHEMA =
            """
            SELECT pg_catalog.quote_ident(n.nspname::pg_catalog.text)
            FROM pg_catalog.pg_namespace n
            WHERE (?::pg_catalog.text IS NULL OR n.nspname OPERATOR(pg_catalog.=) ?::pg_catalog.name)
              AND CASE WHEN EXISTS (SELECT FROM pg_catalog.pg_extension e
                                    WHERE e.extname OPERATOR(pg_catalog.=) 'leaderlock'::pg_catalog.name)
                  THEN n.oid OPERATOR(pg_catalog.=) ANY (ARRAY(
                         SELECT e.extnamespace FROM pg_catalog.pg_extension e
                         WHERE e.extname OPERATOR(pg_catalog.=) 'leaderlock'::pg_catalog.name))
                  ELSE EXISTS (SELECT FROM pg_catalog.pg_proc p
                               WHERE p.pronamespace OPERATOR(pg_catalog.=) n.oid
                                 AND p.proname OPERATOR(pg_catalog.=) 'le_capabilities'::pg_catalog.name
                                 AND p.pronargs OPERATOR(pg_catalog.=) 0::pg_catalog.int2)
              END
            ORDER BY 1""";

    // Leases.
    static final String TRY_ACQUIRE =
            "SELECT @extschema@.le_try_acquire(key => ?, id => ?, ttl => pg_catalog.make_interval(secs => ?))";

    /** The term: a renewal extends that tenure only, never a later one of the same id. */
    static final String RENEW =
            "SELECT @extschema@.le_renew(key => ?, id => ?, ttl => pg_catalog.make_interval(secs => ?), "
                    + "term => ?::bigint)";

    /** The term (NULL after an interrupted try): never ends a later tenure of the same id. */
    static final String RELEASE =
            "SELECT @extschema@.le_release(key => ?, id => ?, term => ?::bigint)";

    /**
     * The same on a schema before 0.5.0 (no term): a client updated before the extension keeps
     * working, without that protection (UPDATING.md).
     */
    static final String RENEW_LEGACY =
            "SELECT @extschema@.le_renew(key => ?, id => ?, ttl => pg_catalog.make_interval(secs => ?))";

    static final String RELEASE_LEGACY = "SELECT @extschema@.le_release(key => ?, id => ?)";

    /**
     * After a release sent again was answered false: whether the id still holds that tenure live
     * (the release met its row locked). Key, id, term, term.
     */
    static final String HOLDS =
            "SELECT EXISTS (SELECT FROM @extschema@.le_holders(key => ?) "
                    + "WHERE holder OPERATOR(pg_catalog.=) ? "
                    + "AND (term OPERATOR(pg_catalog.=) ?::bigint OR ?::bigint IS NULL))";

    static final String TERM_OF =
            "SELECT term FROM @extschema@.le_lease(key => ?) WHERE holder OPERATOR(pg_catalog.=) ?";

    /**
     * In the acquisition's transaction, right after le_try_acquire: the row is locked by it, so
     * this is the tenure's term however short its ttl (le_lease hides a lapsed holder).
     */
    static final String TERM_IN =
            "SELECT term FROM @extschema@.leaderlock WHERE key OPERATOR(pg_catalog.=) ? "
                    + "AND holder OPERATOR(pg_catalog.=) ?";

    /**
     * After a refused renewal: who holds the key now, in which term, and whether live by the
     * server's own lease clock (remaining is NULL unless live).
     */
    static final String HOLDER_OF =
            "SELECT holder, term, remaining IS NOT NULL FROM @extschema@.le_lease(key => ?)";

    /** In the caller's transaction: the term, or SQLSTATE LE001. */
    static final String ASSERT_LEADER =
            "SELECT @extschema@.le_assert_leader(key => ?, id => ?, term => ?::bigint)";

    static final String LEADER = "SELECT @extschema@.le_leader(key => ?)";

    static final String PROCLAIM =
            "SELECT @extschema@.le_proclaim(key => ?, id => ?, value => ?::pg_catalog.jsonb)";

    static final String WORKER_SERVES =
            "SELECT coalesce((@extschema@.le_capabilities() OPERATOR(pg_catalog.->>) 'worker')::boolean, true)";

    /** Before 0.5.0 (no le_capabilities()). */
    static final String WORKER_RUNS = "SELECT @extschema@.le_worker_running()";

    static final String EXPIRE_LAPSED = "SELECT @extschema@.le_expire_lapsed()";
    static final String LISTEN = "LISTEN leaderlock";

    /** Once won: the campaign's connection renews, without notifications. */
    static final String UNLISTEN = "UNLISTEN *";

    /**
     * Whether notifications reach this session at all (not behind transaction pooling): it listens
     * on a channel of its own and notifies itself.
     */
    static final String LISTEN_PROBE = "LISTEN leaderlock_probe";

    static final String NOTIFY_PROBE = "SELECT pg_catalog.pg_notify('leaderlock_probe', ?)";

    /**
     * Whether a lease is live now, by the server's clock (the ShedLock provider's tests, tools).
     */
    static final String IS_HELD =
            "SELECT coalesce(holder IS NOT NULL AND remaining IS NOT NULL, false) "
                    + "FROM @extschema@.le_lease(key => ?)";

    // Sessions (contract 21).
    static final String OPEN_SESSION =
            "SELECT @extschema@.le_open_session(id => ?, ttl => pg_catalog.make_interval(secs => ?), "
                    + "lock_delay => pg_catalog.make_interval(secs => ?), keep_values => ?)::pg_catalog.text";

    static final String RENEW_SESSION =
            "SELECT @extschema@.le_renew_session(session => ?::pg_catalog.uuid, "
                    + "ttl => pg_catalog.make_interval(secs => ?))";

    static final String CLOSE_SESSION =
            "SELECT @extschema@.le_close_session(session => ?::pg_catalog.uuid)";

    static final String TRY_ACQUIRE_IN =
            "SELECT @extschema@.le_try_acquire_in(session => ?::pg_catalog.uuid, key => ?)";

    static final String ACQUIRE_IN =
            "SELECT @extschema@.le_acquire_in(session => ?::pg_catalog.uuid, key => ?, "
                    + "wait => pg_catalog.make_interval(secs => ?))";

    /**
     * In the acquisition's transaction, right after it: the row is locked by it, so the term is the
     * tenure's.
     */
    /**
     * The first statement of an acquisition's transaction: le_acquire_in waits in READ COMMITTED
     * only (the transaction's own level: a session's would stick to a pooled server session).
     */
    static final String READ_COMMITTED = "SET TRANSACTION ISOLATION LEVEL READ COMMITTED";

    static final String SESSION_TERM =
            "SELECT term FROM @extschema@.leaderlock WHERE key OPERATOR(pg_catalog.=) ? "
                    + "AND holder OPERATOR(pg_catalog.=) ? AND session OPERATOR(pg_catalog.=) ?::pg_catalog.uuid";

    // Scheduled runs (contract 22) and schedules kept in the database (contract 24).
    static final String LE_NOW = "SELECT @extschema@.le_now()";

    /** Job, due, id, ttl in seconds, misfire grace in seconds (NULL: none): the term, or NULL. */
    static final String CLAIM_RUN =
            "SELECT @extschema@.le_claim_run(job => ?, due => ?, id => ?, "
                    + "ttl => pg_catalog.make_interval(secs => ?), "
                    + "misfire_grace => pg_catalog.make_interval(secs => ?::double precision))";

    static final String RENEW_RUN =
            "SELECT @extschema@.le_renew_run(job => ?, due => ?, id => ?, "
                    + "ttl => pg_catalog.make_interval(secs => ?), term => ?::bigint)";

    static final String FINISH_RUN =
            "SELECT @extschema@.le_finish_run(job => ?, due => ?, id => ?, term => ?::bigint, "
                    + "succeeded => ?, detail => ?::pg_catalog.text)";

    /**
     * After a refused claim, what the run is now: finished (or missed), seconds until its live
     * claim ends (NULL: none live), its outcome. Job, due.
     */
    static final String RUN_STATE =
            "SELECT r.finished_at IS NOT NULL, "
                    + "CASE WHEN r.holder IS NOT NULL AND r.expires_at OPERATOR(pg_catalog.>) n.now "
                    + "THEN extract(epoch FROM r.expires_at OPERATOR(pg_catalog.-) n.now)::double precision END, "
                    + "r.outcome "
                    + "FROM @extschema@.leaderlock_runs r, (SELECT @extschema@.le_now() AS now) n "
                    + "WHERE r.job OPERATOR(pg_catalog.=) ? AND r.due OPERATOR(pg_catalog.=) ?";

    /**
     * A schedule kept in the database: its first due instant strictly after a moment (NULL: no
     * schedule, or paused), its misfire grace in seconds, and the missed instants its backfill lets
     * run late (oldest first). Job, after, job, job.
     */
    static final String NEXT_DUE =
            "SELECT @extschema@.le_next_due(job => ?, after => ?), "
                    + "(SELECT pg_catalog.date_part('epoch'::pg_catalog.text, s.misfire_grace) "
                    + "FROM @extschema@.leaderlock_schedules s WHERE s.job OPERATOR(pg_catalog.=) ?), "
                    + "ARRAY(SELECT @extschema@.le_backfill_due(job => ?))";

    // Groups (contract 26): "group" is a reserved word, so every argument is named.
    /**
     * A member's round: join (or renew) the group as a member for ttl seconds; partitions and drain
     * (seconds) for the group's first join or its maker's change, NULL otherwise. Group, member,
     * ttl, partitions, drain.
     */
    static final String GROUP_JOIN =
            "SELECT @extschema@.le_join(\"group\" => ?, member => ?, "
                    + "ttl => pg_catalog.make_interval(secs => ?), partitions => ?::pg_catalog.int4, "
                    + "drain => pg_catalog.make_interval(secs => ?::double precision))::pg_catalog.text";

    /** The member's partitions: partition, term, state (owned, revoked). Group, member. */
    static final String GROUP_ASSIGNMENT =
            "SELECT partition, term, state FROM @extschema@.le_assignment(\"group\" => ?, member => ?) "
                    + "ORDER BY partition";

    /** Gives back a partition revoked in a term. Group, member, partition, term. */
    static final String GROUP_ACK =
            "SELECT @extschema@.le_ack(\"group\" => ?, member => ?, "
                    + "partition => ?::pg_catalog.int4, term => ?::bigint)";

    static final String GROUP_LEAVE = "SELECT @extschema@.le_leave(\"group\" => ?, member => ?)";

    /** In the caller's transaction: the term, or SQLSTATE LE001. Group, partition, member, term. */
    static final String ASSERT_PARTITION =
            "SELECT @extschema@.le_assert_partition(\"group\" => ?, partition => ?::pg_catalog.int4, "
                    + "member => ?, term => ?::bigint)";

    // The history (contract 23).
    /**
     * One page of transitions after a position, with the last position numbered in the same
     * snapshot (one statement; both functions are STABLE): when the page is short, every transition
     * the filter selects up to it has been read. No transition: one row, of NULLs but head. After,
     * key, prefix, rows.
     */
    static final String HISTORY =
            "SELECT h.\"position\", h.at, h.event, h.key, h.holder, h.term, "
                    + "h.role::pg_catalog.text, h.payload::pg_catalog.text, p.head "
                    + "FROM (SELECT @extschema@.le_history_position() AS head) p "
                    + "LEFT JOIN @extschema@.le_history(after => ?, for_key => ?, key_prefix => ?, "
                    + "max_rows => ?) h ON true "
                    + "ORDER BY h.\"position\"";

    static final String HISTORY_POSITION = "SELECT @extschema@.le_history_position()";
    static final String LISTEN_HISTORY = "LISTEN leaderlock_history";

    /** Every statement constant, by name (the tour and StatementsTest read it). */
    static final Map<String, String> ALL = byName();

    private static Map<String, String> byName() {
        Map<String, String> all = new TreeMap<>();
        for (Field f : Statements.class.getDeclaredFields()) {
            int m = f.getModifiers();
            if (Modifier.isStatic(m)
                    && Modifier.isFinal(m)
                    && f.getType() == String.class
                    && !f.getName().equals("EXTSCHEMA")
                    && !f.getName().equals("SCHEMA_ENV")) {
                try {
                    all.put(f.getName(), (String) f.get(null));
                } catch (IllegalAccessException e) {
                    throw new AssertionError(e);
                }
            }
        }
        return Collections.unmodifiableMap(all);
    }

    /** Sees every statement sent, as written (before the schema is put in): the tour's. */
    static volatile Consumer<String> trace;

    /** A statement as sent: {@code @extschema@} replaced by the schema found on the connection. */
    static String bind(String sql, String schema) {
        Consumer<String> t = trace;
        if (t != null) {
            t.accept(sql);
        }
        if (!sql.contains(EXTSCHEMA)) {
            return sql;
        }
        if (schema == null) {
            throw new IllegalStateException(
                    "leaderlock: a statement was to be sent before leaderlock's schema was looked up");
        }
        return sql.replace(EXTSCHEMA, schema);
    }
}
