//! Statements on the history (contract 23), and the commit setting every
//! writing transaction takes (8.3).

statements! {
    /// Contract 8.3: this transaction commits as `synchronous_commit = on` does
    /// (WAL flushed, and on synchronous standbys when there are any), until it
    /// ends; set when the session asked for less.
    SYNC_COMMIT_ON = "SELECT pg_catalog.set_config('synchronous_commit', 'on', true)";
    /// Contract 23: records a transition, to be numbered, where
    /// `history::record` cannot write the row directly (the table changed
    /// behind the extension). `$1` at, `$2` event, `$3` key (or job), `$4`
    /// holder, `$5` term, `$6` the acting role (NULL: the worker), `$7` the
    /// notification's payload, kept as the text sent.
    RECORD_HISTORY = "INSERT INTO @extschema@.leaderlock_history_pending \
        (at, event, key, holder, term, role, payload) VALUES ($1, $2, $3, $4, $5, $6, $7)";
    /// The history's head row, locked for numbering and pruning, never
    /// waiting (a transaction doing so already numbers what is committed):
    /// its pruned_through.
    LOCK_HISTORY_HEAD = "SELECT pruned_through FROM @extschema@.leaderlock_history_head \
        FOR NO KEY UPDATE SKIP LOCKED";
    /// Moves the first `$3` committed pending rows into the history, with
    /// the next positions in recording order: after the highest given or
    /// pruned (`$1`), and at least the term floor `$2`, so positions never
    /// go back after a failover either (a new timeline's floor is above any
    /// position an older one could give). Under the head row's lock. How
    /// many, and the last, announced on channel `leaderlock_history` (a
    /// hint: readers then read the history, which they trust).
    NUMBER_HISTORY = "WITH p AS (\
            SELECT x.ctid AS row_id FROM @extschema@.leaderlock_history_pending x \
             ORDER BY x.seq LIMIT $3), \
          d AS (\
            DELETE FROM @extschema@.leaderlock_history_pending x \
             WHERE x.ctid = ANY (ARRAY(SELECT p.row_id FROM p)) \
            RETURNING x.seq, x.at, x.event, x.key, x.holder, x.term, x.role, x.payload), \
          base AS (\
            SELECT greatest(\
                       coalesce((SELECT max(position) FROM @extschema@.leaderlock_history), 0::bigint), \
                       $1, $2 - 1::bigint) AS b), \
          u AS (\
            INSERT INTO @extschema@.leaderlock_history \
                   (position, at, event, key, holder, term, role, payload) \
            SELECT base.b + pg_catalog.row_number() OVER (ORDER BY d.seq), d.at, d.event, d.key, \
                   d.holder, d.term, d.role, d.payload::pg_catalog.jsonb \
              FROM d, base \
            RETURNING position), \
          k AS (\
            UPDATE @extschema@.leaderlock_history_head SET kept = kept + (SELECT count(*) FROM u) \
             WHERE EXISTS (SELECT FROM u)) \
        SELECT count(*), max(position), \
               CASE WHEN count(*) > 0 \
                    THEN pg_catalog.pg_notify('leaderlock_history', max(position)::text) END \
          FROM u";
    /// Deletes the oldest numbered rows older than `$2` or beyond the
    /// newest `$3` (by the head's count of rows kept: positions jump at a
    /// failover), at most `$4`, as a prefix of positions only (so "pruned
    /// through" stays true of every position up to it), and moves the head
    /// (`$1`, its pruned_through) past them. Reads only the rows that go
    /// and two more (it runs at every numbering): `c` is the first row
    /// within the count, `k` the first from there young enough to stay.
    /// Rows at or below `$1` exist only
    /// after the documented step that follows a restore (pruned_through set
    /// above them, docs/history.md): the retention deletes them too, and the
    /// head never goes back. Under the head row's lock. How many went.
    PRUNE_HISTORY = "WITH c AS (\
            SELECT h.position FROM @extschema@.leaderlock_history h ORDER BY h.position \
            OFFSET least(greatest((SELECT d.kept FROM @extschema@.leaderlock_history_head d) - $3, \
                                  0::bigint), $4) \
             LIMIT 1), \
          k AS (\
            SELECT h.position FROM @extschema@.leaderlock_history h \
             WHERE h.position >= (SELECT c.position FROM c) AND h.at >= $2 \
             ORDER BY h.position LIMIT 1), \
          cut AS (\
            SELECT max(f.position) AS through FROM (\
              SELECT h.position FROM @extschema@.leaderlock_history h \
               WHERE h.position < coalesce((SELECT k.position FROM k), 9223372036854775807::bigint) \
               ORDER BY h.position LIMIT $4) f), \
          gone AS (\
            DELETE FROM @extschema@.leaderlock_history h USING cut \
             WHERE h.position <= cut.through RETURNING 1), \
          head AS (\
            UPDATE @extschema@.leaderlock_history_head \
               SET pruned_through = greatest($1, cut.through), \
                   kept = greatest(kept - (SELECT count(*) FROM gone), 0::bigint) \
              FROM cut WHERE cut.through IS NOT NULL) \
        SELECT count(*) FROM gone";
}
