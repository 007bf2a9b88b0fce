//! Every statement the client runs, in one place. All take bind parameters
//! (sent with their types in one round trip, so they also work through
//! pgbouncer's transaction pooling, which has no named prepared statements).
//!
//! None depends on the session's search_path, which a database's owner may
//! set for everyone (`ALTER DATABASE ... SET search_path`), nor on a
//! schema named like the role (`"$user"`): PostgreSQL's functions,
//! aggregates and types are written `pg_catalog.name`, its operators
//! `OPERATOR(pg_catalog.=)` (no simple CASE, IN, LIKE: they hide an
//! operator), and leaderlock's objects `@extschema@.name`, which `Db`
//! replaces by the schema `FIND_SCHEMA` found (SECURITY.md).

/// Stands for the extension's schema in the statements below.
pub const EXTSCHEMA: &str = "@extschema@";

/// Where leaderlock is: the schema of the extension (pg_extension names
/// it), or, for the portable edition installed by its script (no
/// extension), every schema holding a `@extschema@.le_capabilities()`; only the one
/// named by $1 when given. Quoted by the server. The same statement in
/// every client (docs/clients.md).
pub const FIND_SCHEMA: &str = "SELECT pg_catalog.quote_ident(n.nspname::pg_catalog.text) \
     FROM pg_catalog.pg_namespace n \
     WHERE ($1::pg_catalog.text IS NULL OR n.nspname OPERATOR(pg_catalog.=) $1::pg_catalog.name) \
       AND CASE WHEN EXISTS (SELECT FROM pg_catalog.pg_extension e \
                             WHERE e.extname OPERATOR(pg_catalog.=) 'leaderlock'::pg_catalog.name) \
           THEN n.oid OPERATOR(pg_catalog.=) ANY (ARRAY( \
                  SELECT e.extnamespace FROM pg_catalog.pg_extension e \
                  WHERE e.extname OPERATOR(pg_catalog.=) 'leaderlock'::pg_catalog.name)) \
           ELSE EXISTS (SELECT FROM pg_catalog.pg_proc p \
                        WHERE p.pronamespace OPERATOR(pg_catalog.=) n.oid \
                          AND p.proname OPERATOR(pg_catalog.=) 'le_capabilities'::pg_catalog.name \
                          AND p.pronargs OPERATOR(pg_catalog.=) 0::pg_catalog.int2) \
       END \
     ORDER BY 1";

/// $1 key, $2 id, $3 ttl in seconds. Arguments are passed by name, so a
/// later signature can never bind one to the wrong parameter.
pub const TRY_ACQUIRE: &str =
    "SELECT @extschema@.le_try_acquire(key => $1, id => $2, ttl => pg_catalog.make_interval(secs => $3))";
/// The same for a key of many slots (extension 0.5.0): $4 slots.
pub const TRY_ACQUIRE_SLOTS: &str = "SELECT @extschema@.le_try_acquire(key => $1, id => $2, \
     ttl => pg_catalog.make_interval(secs => $3), slots => $4)";
/// A candidate with a priority waits inside le_acquire, where the server
/// ranks it (extension 0.5.0): $1 key, $2 id, $3 ttl and $4 wait in
/// seconds, $5 slots, $6 priority.
pub const ACQUIRE_RANKED: &str = "SELECT @extschema@.le_acquire(key => $1, id => $2, \
     ttl => pg_catalog.make_interval(secs => $3), wait => pg_catalog.make_interval(secs => $4), \
     slots => $5, priority => $6)";
/// $1 key, $2 id, $3 ttl in seconds, $4 the tenure's term: a renewal
/// extends that tenure only, never a later one of the same id.
pub const RENEW: &str = "SELECT @extschema@.le_renew(key => $1, id => $2, \
     ttl => pg_catalog.make_interval(secs => $3), term => $4)";
/// After a refused renewal: whether the lease is still ours ($2 id, $3
/// term) and live by the server's own lease clock (le_lease names only a
/// live holder and gives `remaining` only then: never compare expires_at
/// with clock_timestamp(), which a step of the wall clock or a credited
/// stall sets apart from it), so that the refusal only met a row locked by
/// another transaction. $1 key.
pub const STILL_OURS: &str =
    "SELECT coalesce(holder OPERATOR(pg_catalog.=) $2 AND term OPERATOR(pg_catalog.=) $3 \
     AND remaining IS NOT NULL, false) FROM @extschema@.le_lease(key => $1)";
/// `STILL_OURS` for a key of many slots: our tenure among its live ones.
pub const STILL_OURS_SLOT: &str = "SELECT coalesce(pg_catalog.bool_or(holder OPERATOR(pg_catalog.=) $2 AND term OPERATOR(pg_catalog.=) $3), false) \
     FROM @extschema@.le_holders(key => $1)";
/// $1 key, $2 id, $3 the tenure's term (NULL: whichever tenure `id` holds,
/// after an interrupted try): a release sent in one tenure never ends a
/// later one of the same id.
pub const RELEASE: &str = "SELECT @extschema@.le_release(key => $1, id => $2, term => $3)";
/// `RENEW` and `RELEASE` on a schema before 0.5.0 (no `term`): a client
/// updated before the extension keeps working, without that protection.
pub const RENEW_0_4: &str =
    "SELECT @extschema@.le_renew(key => $1, id => $2, ttl => pg_catalog.make_interval(secs => $3))";
pub const RELEASE_0_4: &str = "SELECT @extschema@.le_release(key => $1, id => $2)";
/// After a release sent again was answered false: whether `id` ($2) still
/// holds the tenure of term $3 of key $1 live (the release met its row
/// locked by another transaction).
pub const HOLDS: &str = "SELECT EXISTS (SELECT FROM @extschema@.le_holders(key => $1) \
     WHERE holder OPERATOR(pg_catalog.=) $2 AND term OPERATOR(pg_catalog.=) $3)";
/// The term of the tenure just won: $1 key, $2 id. A lease holding our id
/// can only be our own tenure (ids are unique per elector). le_lease
/// (extension 0.3.0 and later), not the table: the function is the API.
pub const TERM_OF: &str =
    "SELECT term FROM @extschema@.le_lease(key => $1) WHERE holder OPERATOR(pg_catalog.=) $2";
/// `TERM_OF` for a key of many slots: our tenure among its live ones.
pub const TERM_OF_SLOT: &str = "SELECT term FROM @extschema@.le_holders(key => $1) \
     WHERE holder OPERATOR(pg_catalog.=) $2";
/// $1 key: the live holder, if any.
pub const LEADER: &str = "SELECT @extschema@.le_leader(key => $1)";
/// Whether a background worker expires lapsed leases and announces them
/// (le_capabilities: extension 0.5.0 and the portable edition).
pub const WORKER_SERVES: &str = "SELECT coalesce((@extschema@.le_capabilities() \
     OPERATOR(pg_catalog.->>) 'worker')::boolean, true)";
/// The same question before 0.5.0, which has no le_capabilities.
pub const WORKER_RUNNING: &str = "SELECT @extschema@.le_worker_running()";
/// Where no worker serves the database: vacate and announce every lapsed
/// lease. The server takes it only as a query of its own, in a
/// transaction of its own (it locks what it vacates until then).
pub const EXPIRE_LAPSED: &str = "SELECT @extschema@.le_expire_lapsed()";
/// Channel names cannot be bound, so these two are fixed texts.
pub const LISTEN: &str = "LISTEN leaderlock; LISTEN leaderlock_probe";
/// $1 the elector's probe token: a notification this session should hear
/// if notifications reach it at all.
pub const PROBE: &str = "SELECT pg_catalog.pg_notify('leaderlock_probe', $1)";
/// The announcements' channel.
pub const CHANNEL: &str = "leaderlock";
pub const PROBE_CHANNEL: &str = "leaderlock_probe";
/// For `leaderlock status`: $1 key or NULL for every key, $2 held leases
/// only. Held leases first, then lapsed, then vacant; by key within each.
pub const STATUS: &str = "SELECT key, state, holder, term, \
     pg_catalog.to_char(remaining, 'HH24:MI:SS.MS'), \
     pg_catalog.to_char(expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), \
     extract(epoch FROM remaining)::double precision \
     FROM @extschema@.leaderlock_status \
     WHERE ($1::pg_catalog.text IS NULL OR key OPERATOR(pg_catalog.=) $1) AND (NOT $2 OR state OPERATOR(pg_catalog.=) 'held') \
     ORDER BY CASE WHEN state OPERATOR(pg_catalog.=) 'held' THEN 0 WHEN state OPERATOR(pg_catalog.=) 'lapsed' THEN 1 ELSE 2 END, key";
/// Contract 26, `leaderlock status --group G`: the partitions of group
/// `$1` (those above its count only while someone still owns them):
/// partition, member, term, state (owned, revoked, free), whether the
/// owner's session is live, and a revocation's end.
pub const GROUP_STATUS: &str = "SELECT p.partition, p.member, p.term, \
     CASE WHEN p.member IS NULL THEN 'free' WHEN p.revoke_until IS NULL THEN 'owned' ELSE 'revoked' END, \
     s.expires_at OPERATOR(pg_catalog.>) @extschema@.le_now(), \
     pg_catalog.to_char(p.revoke_until AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"') \
     FROM @extschema@.leaderlock_partitions p \
     JOIN @extschema@.leaderlock_groups g ON g.grp OPERATOR(pg_catalog.=) p.grp \
     LEFT JOIN @extschema@.leaderlock_sessions s ON s.session OPERATOR(pg_catalog.=) p.session \
     WHERE p.grp OPERATOR(pg_catalog.=) $1 \
       AND (p.partition OPERATOR(pg_catalog.<=) g.partitions OR p.member IS NOT NULL) \
     ORDER BY p.partition";
/// Contract 26, a member's round: join (or renew) `$1` as `$2` for `$3`
/// seconds; `$4` partitions and `$5` seconds of drain for the first join
/// (or its maker's change), NULL otherwise. ("group" is a reserved word:
/// every group statement names its arguments.)
pub const JOIN: &str = "SELECT @extschema@.le_join(\"group\" => $1, member => $2, \
     ttl => pg_catalog.make_interval(secs => $3), partitions => $4, \
     drain => pg_catalog.make_interval(secs => $5))::pg_catalog.text";
/// The member's partitions: partition, term, state (owned, revoked).
pub const ASSIGNMENT: &str = "SELECT partition, term, state \
     FROM @extschema@.le_assignment(\"group\" => $1, member => $2) ORDER BY partition";
/// Gives back partition `$3`, revoked from member `$2` in term `$4`.
pub const ACK: &str = "SELECT @extschema@.le_ack(\"group\" => $1, member => $2, \
     partition => $3, term => $4)";
pub const LEAVE: &str = "SELECT @extschema@.le_leave(\"group\" => $1, member => $2)";
/// The guard, in the caller's transaction: group `$1`, partition `$2`,
/// member `$3`, term `$4`.
pub const ASSERT_PARTITION: &str = "SELECT @extschema@.le_assert_partition(\"group\" => $1, \
     partition => $2, member => $3, term => $4)";
/// For `leaderlock watch`.
pub const LISTEN_ANNOUNCEMENTS: &str = "LISTEN leaderlock";

/// The database connected to, and whether the extension is installed there
/// (to tell a missing extension from other errors, `error::explain`).
pub const EXTENSION_HERE: &str = "SELECT pg_catalog.current_database()::pg_catalog.text, \
     EXISTS (SELECT 1 FROM pg_catalog.pg_extension \
              WHERE extname OPERATOR(pg_catalog.=) 'leaderlock'::pg_catalog.name)";

/// Contract 22, scheduled runs. The server's lease clock, which due
/// instants are on (never this host's clock).
pub const LE_NOW: &str = "SELECT @extschema@.le_now()";
/// $1 job, $2 due, $3 id, $4 ttl in seconds, $5 misfire grace in seconds
/// (NULL: none): the claim's term, or NULL.
pub const CLAIM_RUN: &str = "SELECT @extschema@.le_claim_run(job => $1, due => $2, id => $3, \
     ttl => pg_catalog.make_interval(secs => $4), misfire_grace => pg_catalog.make_interval(secs => $5))";
/// Contract 24: registers job $1's schedule: every $2 seconds or cron $3 in
/// tz $4, misfire grace $5 seconds (NULL: the server's default), overlap
/// $6; its backfill as the database has it (an operator's setting: a
/// replica's start never resets it). Its next due instant.
pub const REGISTER_SCHEDULE: &str = "SELECT @extschema@.le_schedule(job => $1, \
     every => pg_catalog.make_interval(secs => $2), cron => $3, tz => $4, \
     misfire_grace => pg_catalog.make_interval(secs => $5), overlap => $6, \
     backfill => coalesce((SELECT s.backfill FROM @extschema@.leaderlock_schedules s \
                            WHERE s.job OPERATOR(pg_catalog.=) $1), 0))";
/// Contract 24: job $1's registered schedule's first due instant after $2
/// (NULL: no schedule, or paused), its misfire grace in seconds, and the
/// missed instants it may still run late (its backfill, oldest first).
pub const NEXT_DUE: &str = "SELECT @extschema@.le_next_due(job => $1, after => $2), \
     (SELECT pg_catalog.date_part('epoch'::pg_catalog.text, s.misfire_grace) \
        FROM @extschema@.leaderlock_schedules s WHERE s.job OPERATOR(pg_catalog.=) $1), \
     ARRAY(SELECT @extschema@.le_backfill_due(job => $1))";
/// $1 job, $2 due, $3 id, $4 ttl in seconds, $5 the claim's term.
pub const RENEW_RUN: &str = "SELECT @extschema@.le_renew_run(job => $1, due => $2, id => $3, \
     ttl => pg_catalog.make_interval(secs => $4), term => $5)";
/// $1 job, $2 due, $3 id, $4 term, $5 succeeded, $6 detail.
pub const FINISH_RUN: &str = "SELECT @extschema@.le_finish_run(job => $1, due => $2, id => $3, \
     term => $4, succeeded => $5, detail => $6)";
/// After a refused claim, what the run is now: finished (or missed), how
/// long until its live claim ends (NULL: none live), its outcome. $1 job,
/// $2 due.
pub const RUN_STATE: &str = "SELECT r.finished_at IS NOT NULL, \
     CASE WHEN r.holder IS NOT NULL AND r.expires_at OPERATOR(pg_catalog.>) n.now \
          THEN extract(epoch FROM r.expires_at OPERATOR(pg_catalog.-) n.now)::double precision END, \
     r.outcome \
     FROM @extschema@.leaderlock_runs r, (SELECT @extschema@.le_now() AS now) n \
     WHERE r.job OPERATOR(pg_catalog.=) $1 AND r.due OPERATOR(pg_catalog.=) $2";
/// `leaderlock runs`: per job (all, or $1), how its runs went. Instants as
/// RFC 3339 UTC text.
pub const RUNS_SUMMARY: &str = "SELECT r.job, pg_catalog.count(*), \
     pg_catalog.count(*) FILTER (WHERE r.outcome OPERATOR(pg_catalog.=) 'succeeded'), \
     pg_catalog.count(*) FILTER (WHERE r.outcome OPERATOR(pg_catalog.=) 'failed'), \
     pg_catalog.count(*) FILTER (WHERE r.outcome OPERATOR(pg_catalog.=) 'missed'), \
     pg_catalog.count(*) FILTER (WHERE r.finished_at IS NULL AND r.holder IS NOT NULL \
                      AND r.expires_at OPERATOR(pg_catalog.>) n.now), \
     pg_catalog.to_char(pg_catalog.max(r.due) FILTER (WHERE r.outcome OPERATOR(pg_catalog.=) 'succeeded') \
             AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'), \
     pg_catalog.to_char(pg_catalog.max(r.due) FILTER (WHERE r.outcome OPERATOR(pg_catalog.=) 'failed') \
             AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') \
     FROM @extschema@.leaderlock_runs r, (SELECT @extschema@.le_now() AS now) n \
     WHERE $1::pg_catalog.text IS NULL OR r.job OPERATOR(pg_catalog.=) $1 GROUP BY r.job ORDER BY r.job";
/// Contract 24: the schedules (of job $1, or all), as `leaderlock runs`
/// and the metrics show them: job, every and misfire grace in seconds, cron,
/// tz, overlap, paused, next due, how overdue in seconds, missed runs kept,
/// the latest outcome, and when the newest run kept as missed was recorded
/// (Unix seconds; NULL: none kept).
pub const SCHEDULES: &str = "SELECT s.job, pg_catalog.date_part('epoch'::pg_catalog.text, s.every), \
     s.cron, s.tz, pg_catalog.date_part('epoch'::pg_catalog.text, s.misfire_grace), s.overlap, s.paused, \
     pg_catalog.to_char(s.next_due AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'), \
     pg_catalog.date_part('epoch'::pg_catalog.text, s.overdue), s.missed, s.last_outcome, \
     (SELECT pg_catalog.date_part('epoch'::pg_catalog.text, pg_catalog.max(r.finished_at)) \
        FROM @extschema@.leaderlock_runs r WHERE r.job OPERATOR(pg_catalog.=) s.job \
         AND r.outcome OPERATOR(pg_catalog.=) 'missed'::pg_catalog.text) \
     FROM @extschema@.leaderlock_schedule_status s \
     WHERE $1::pg_catalog.text IS NULL OR s.job OPERATOR(pg_catalog.=) $1 ORDER BY s.job";
/// Contract 25: the keys expected to be led: key, seconds of the open
/// leaderless interval (0: none), intervals recorded, the key's tenures.
pub const EXPECTED_KEYS: &str = "SELECT e.key, \
     COALESCE(pg_catalog.date_part('epoch'::pg_catalog.text, n.now OPERATOR(pg_catalog.-) e.leaderless_since), 0), \
     e.intervals, COALESCE((SELECT l.tenures FROM @extschema@.leaderlock l \
                            WHERE l.key OPERATOR(pg_catalog.=) e.key), 0) \
     FROM @extschema@.leaderlock_expected e, (SELECT @extschema@.le_now() AS now) n ORDER BY e.key";
/// `leaderlock runs`: the latest $2 runs (of job $1, or all), newest
/// first: job, due, state (an outcome, or running, lapsed, unclaimed),
/// holder, term, attempts, finished at, detail.
pub const RUNS_HISTORY: &str = "SELECT r.job, \
     pg_catalog.to_char(r.due AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'), \
     CASE WHEN r.finished_at IS NOT NULL THEN r.outcome \
          WHEN r.holder IS NOT NULL AND r.expires_at OPERATOR(pg_catalog.>) n.now THEN 'running' \
          WHEN r.holder IS NOT NULL THEN 'lapsed' ELSE 'unclaimed' END, \
     r.holder, r.term, r.attempts, \
     pg_catalog.to_char(r.finished_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'), r.detail \
     FROM @extschema@.leaderlock_runs r, (SELECT @extschema@.le_now() AS now) n \
     WHERE $1::pg_catalog.text IS NULL OR r.job OPERATOR(pg_catalog.=) $1 \
     ORDER BY r.due DESC, r.job LIMIT $2";

/// Contract 21, sessions: $1 id, $2 ttl and $3 lock-delay in seconds, $4
/// whether keys keep their values. The handle as text.
pub const OPEN_SESSION: &str =
    "SELECT @extschema@.le_open_session(id => $1, ttl => pg_catalog.make_interval(secs => $2), \
     lock_delay => pg_catalog.make_interval(secs => $3), keep_values => $4)::pg_catalog.text";
/// $1 the session's handle (text).
pub const RENEW_SESSION: &str =
    "SELECT @extschema@.le_renew_session(session => $1::pg_catalog.text::pg_catalog.uuid)";
pub const CLOSE_SESSION: &str =
    "SELECT @extschema@.le_close_session(session => $1::pg_catalog.text::pg_catalog.uuid)";
/// $1 handle, $2 key, $3 slots.
pub const TRY_ACQUIRE_IN: &str =
    "SELECT @extschema@.le_try_acquire_in(session => $1::pg_catalog.text::pg_catalog.uuid, key => $2, slots => $3)";
/// $1 handle, $2 key, $3 wait in seconds, $4 slots.
pub const ACQUIRE_IN: &str =
    "SELECT @extschema@.le_acquire_in(session => $1::pg_catalog.text::pg_catalog.uuid, key => $2, \
     wait => pg_catalog.make_interval(secs => $3), slots => $4)";
/// The term of key $1 held under session $2 (just acquired under it): a
/// key of one slot, or the session's slot of a key of many.
pub const TERM_IN_SESSION: &str = "SELECT term FROM @extschema@.leaderlock \
     WHERE key OPERATOR(pg_catalog.=) $1 \
       AND session OPERATOR(pg_catalog.=) $2::pg_catalog.text::pg_catalog.uuid AND holder IS NOT NULL \
     UNION ALL SELECT term FROM @extschema@.leaderlock_slots \
     WHERE key OPERATOR(pg_catalog.=) $1 \
       AND session OPERATOR(pg_catalog.=) $2::pg_catalog.text::pg_catalog.uuid AND holder IS NOT NULL";

/// Contract 23: the transitions after a position, in order (one page),
/// each with the last position numbered, read in the same statement (one
/// snapshot: both functions are STABLE): after a short page, every
/// transition the filter selects up to it has been read. No transition:
/// one row, NULL but the last position.
pub const HISTORY: &str = "SELECT h.\"position\", h.at, h.event, h.key, h.holder, h.term, \
    h.role::pg_catalog.text, h.payload::pg_catalog.text, p.head \
    FROM (SELECT @extschema@.le_history_position() AS head) p \
    LEFT JOIN @extschema@.le_history(after => $1, for_key => $2, key_prefix => $3, max_rows => $4) h ON true \
    ORDER BY h.\"position\"";
/// `leaderlock history`: one page of the transitions after position $1,
/// at or after $2 and at or before $3 (NULL: no bound), of key $4 or keys
/// starting with $5 (NULL: every key); at most $6 rows.
pub const HISTORY_READ: &str = "SELECT h.\"position\", h.at, h.event, h.key, h.holder, h.term, \
    h.role::pg_catalog.regrole::pg_catalog.text, h.payload::pg_catalog.text \
    FROM @extschema@.leaderlock_history h \
    WHERE h.\"position\" OPERATOR(pg_catalog.>) $1 \
      AND ($2::pg_catalog.timestamptz IS NULL OR h.at OPERATOR(pg_catalog.>=) $2) \
      AND ($3::pg_catalog.timestamptz IS NULL OR h.at OPERATOR(pg_catalog.<=) $3) \
      AND ($4::pg_catalog.text IS NULL OR h.key OPERATOR(pg_catalog.=) $4) \
      AND ($5::pg_catalog.text IS NULL OR pg_catalog.starts_with(h.key, $5)) \
    ORDER BY h.\"position\" LIMIT $6";
/// An instant $1 seconds before the server's lease clock's now ("2h": two
/// hours ago).
pub const HISTORY_AGO: &str = "SELECT @extschema@.le_now() OPERATOR(pg_catalog.-) \
    pg_catalog.make_interval(secs => $1)";
/// An instant as the server parses it ($1 text).
pub const HISTORY_INSTANT: &str = "SELECT $1::pg_catalog.text::pg_catalog.timestamptz";
/// The last position numbered: where following "from now on" starts.
pub const HISTORY_POSITION: &str = "SELECT @extschema@.le_history_position()";
/// Where the server says it numbered transitions (a hint).
pub const LISTEN_HISTORY: &str = "LISTEN leaderlock_history";
/// Where no worker numbers the history: the changes too, as hints to
/// number (le_expire_lapsed) and read.
pub const LISTEN_HISTORY_AND_CHANGES: &str = "LISTEN leaderlock_history; LISTEN leaderlock";
pub const HISTORY_CHANNEL: &str = "leaderlock_history";

#[cfg(test)]
mod tests {
    /// Every statement of this file, by name, read from its source.
    fn statements() -> Vec<(String, String)> {
        let source = include_str!("sql.rs");
        let source = &source[..source.find("#[cfg(test)]").expect("this module")];
        let mut found = Vec::new();
        for part in source.split("pub const ").skip(1) {
            let name = part[..part.find(':').expect("a type")].to_owned();
            let Some(open) = part.find("= \"").or_else(|| part.find("=\n    \"")) else {
                continue;
            };
            let body = &part[part[open..].find('"').expect("a literal") + open + 1..];
            let (mut text, mut chars) = (String::new(), body.chars().peekable());
            while let Some(c) = chars.next() {
                match c {
                    '"' => break,
                    '\\' => match chars.next() {
                        Some('"') => text.push('"'),
                        Some('\n') => {
                            while chars.peek().is_some_and(|c| c.is_whitespace()) {
                                chars.next();
                            }
                        }
                        Some(other) => text.push(other),
                        None => break,
                    },
                    c => text.push(c),
                }
            }
            found.push((name, text));
        }
        found
    }

    /// What `statement` would look up on the session's search_path: a
    /// function, aggregate or type not qualified, an operator not written
    /// OPERATOR(pg_catalog.x), a relation not in `@extschema@`.
    fn unqualified(statement: &str) -> Vec<String> {
        // Literals and quoted names are data, not names looked up.
        let mut plain = String::new();
        let mut quote = None;
        for c in statement.chars() {
            match (quote, c) {
                (None, '\'' | '"') => quote = Some(c),
                (Some(q), c) if c == q => quote = None,
                (None, c) => plain.push(c),
                _ => {}
            }
        }
        let plain = plain
            .replace("OPERATOR(pg_catalog.", "OPERATOR(")
            .replace("extract(epoch FROM", "extract(");
        let words = [
            "coalesce", "exists", "extract", "array", "any", "filter", "values", "row", "in",
        ];
        let keyword_types = ["boolean", "bigint", "integer", "int", "double", "interval"];
        let mut found = Vec::new();
        let tokens: Vec<&str> = plain
            .split(|c: char| c.is_whitespace() || c == ',')
            .filter(|t| !t.is_empty())
            .collect();
        for (i, token) in tokens.iter().enumerate() {
            // name( : a call
            let mut rest = *token;
            while let Some(open) = rest.find('(') {
                let before = &rest[..open];
                let name = before.trim_start_matches(|c: char| {
                    !c.is_alphanumeric() && c != '_' && c != '.' && c != '@'
                });
                let name = name.rsplit("::").next().unwrap_or(name);
                if !name.is_empty()
                    && !name.starts_with("pg_catalog.")
                    && !name.starts_with("@extschema@.")
                    && !name.eq_ignore_ascii_case("OPERATOR")
                    && !words.contains(&name.to_ascii_lowercase().as_str())
                {
                    found.push(format!("call {name}"));
                }
                rest = &rest[open + 1..];
            }
            // ::type
            for cast in token.split("::").skip(1) {
                let ty = cast.trim_end_matches(|c: char| !c.is_alphanumeric() && c != '_');
                if !ty.starts_with("pg_catalog.") && !keyword_types.contains(&ty) {
                    found.push(format!("type {ty}"));
                }
            }
            // an operator outside OPERATOR(...)
            let bare = token
                .replace("=>", "")
                .replace("@extschema@", "")
                .replace("(*)", "")
                .replace("::", "");
            let in_operator = i > 0 && tokens[..i].last().is_some_and(|t| t.ends_with("OPERATOR("));
            if !token.starts_with("OPERATOR(")
                && !in_operator
                && bare.chars().any(|c| "=<>!~+-*/|&^%@#".contains(c))
            {
                found.push(format!("operator in {token}"));
            }
            // FROM / JOIN a relation
            if (token.eq_ignore_ascii_case("FROM") || token.eq_ignore_ascii_case("JOIN"))
                && tokens.get(i + 1).is_some_and(|next| {
                    !next.starts_with('(')
                        && !next.starts_with("@extschema@.")
                        && !next.starts_with("pg_catalog.")
                })
            {
                found.push(format!("relation {}", tokens[i + 1]));
            }
            // CASE x WHEN, IN (, LIKE, BETWEEN, NULLIF, IS DISTINCT: hidden operators
            let upper = token.to_ascii_uppercase();
            if ["LIKE", "ILIKE", "BETWEEN", "DISTINCT", "NULLIF", "IN"].contains(&upper.as_str())
                || (upper == "CASE"
                    && tokens
                        .get(i + 1)
                        .is_some_and(|n| !n.eq_ignore_ascii_case("WHEN")))
            {
                found.push(format!("hidden operator {token}"));
            }
        }
        found
    }

    /// No statement depends on the session's search_path (SECURITY.md): a
    /// database owner's `evil.make_interval` or `"$user".leaderlock` is
    /// never what a client runs.
    #[test]
    fn no_statement_depends_on_the_search_path() {
        let all = statements();
        assert!(all.len() > 40, "found {} statements", all.len());
        let bad: Vec<String> = all
            .iter()
            .flat_map(|(name, s)| {
                unqualified(s)
                    .into_iter()
                    .map(move |w| format!("{name}: {w}"))
            })
            .collect();
        assert!(bad.is_empty(), "{bad:#?}");
    }

    /// The check finds what it must.
    #[test]
    fn the_check_finds_unqualified_names() {
        for careless in [
            "SELECT make_interval(secs => $1)",
            "SELECT a = b",
            "SELECT $1::text",
            "SELECT x FROM leaderlock",
            "SELECT CASE state WHEN 'held' THEN 0 END",
            "SELECT count(*) FROM @extschema@.leaderlock",
            "SELECT x FROM @extschema@.t WHERE k LIKE 'a%'",
        ] {
            assert!(
                !super::tests::unqualified(careless).is_empty(),
                "{careless}"
            );
        }
        assert!(unqualified(
            "SELECT pg_catalog.count(*) FROM @extschema@.leaderlock \
             WHERE key OPERATOR(pg_catalog.=) $1::pg_catalog.text"
        )
        .is_empty());
    }
}
