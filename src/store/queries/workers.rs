//! Statements of the background processes about themselves: the
//! extension's schema, their session's settings.

statements! {
    /// Workers: the schema of the extension `$1` (a catalog read, run before
    /// the schema is known, so not through `plans.rs`).
    EXTENSION_NAMESPACE =
        "SELECT extnamespace FROM pg_catalog.pg_extension WHERE oid = $1";
    /// Workers: their session settings, whatever a database's or role's
    /// defaults say (ALTER DATABASE ... SET is open to the database's owner,
    /// who is trusted with nothing of other roles' leases): the search path
    /// and index plans the functions pin (see above and `api/`);
    /// transactions that may write, at READ COMMITTED, never cut short; the
    /// worker's own role; no JIT, no parallel workers (the server's other
    /// users need those processes). Settings this server lacks (of another
    /// version) are skipped. synchronous_commit is left as configured.
    PIN_SESSION = "SELECT pg_catalog.count(pg_catalog.set_config(s.name, s.value, false)) \
         FROM (VALUES ('role', 'none'), ('search_path', 'pg_catalog, pg_temp'), \
                      ('enable_seqscan', 'off'), ('enable_indexscan', 'on'), \
                      ('enable_indexonlyscan', 'on'), ('enable_bitmapscan', 'on'), \
                      ('default_transaction_read_only', 'off'), \
                      ('default_transaction_isolation', 'read committed'), \
                      ('default_transaction_deferrable', 'off'), \
                      ('statement_timeout', '0'), ('lock_timeout', '0'), \
                      ('idle_in_transaction_session_timeout', '0'), \
                      ('transaction_timeout', '0'), ('jit', 'off'), \
                      ('max_parallel_workers_per_gather', '0'), \
                      ('debug_parallel_query', 'off'), ('force_parallel_mode', 'off')) \
              AS s(name, value) \
        WHERE pg_catalog.current_setting(s.name, true) IS NOT NULL";
}
