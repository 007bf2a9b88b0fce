//! Every statement the client runs, in one place. All take bind parameters
//! (sent with their types in one round trip, so they also work through
//! pgbouncer's transaction pooling, which has no named prepared statements).

/// $1 key, $2 id, $3 ttl in seconds. Arguments are passed by name, so a
/// later signature can never bind one to the wrong parameter.
pub const TRY_ACQUIRE: &str =
    "SELECT le_try_acquire(key => $1, id => $2, ttl => make_interval(secs => $3))";
/// The same for a key of many slots (extension 0.5.0): $4 slots.
pub const TRY_ACQUIRE_SLOTS: &str = "SELECT le_try_acquire(key => $1, id => $2, \
     ttl => make_interval(secs => $3), slots => $4)";
/// A candidate with a priority waits inside le_acquire, where the server
/// ranks it (extension 0.5.0): $1 key, $2 id, $3 ttl and $4 wait in
/// seconds, $5 slots, $6 priority.
pub const ACQUIRE_RANKED: &str = "SELECT le_acquire(key => $1, id => $2, \
     ttl => make_interval(secs => $3), wait => make_interval(secs => $4), \
     slots => $5, priority => $6)";
/// $1 key, $2 id, $3 ttl in seconds, $4 the tenure's term: a renewal
/// extends that tenure only, never a later one of the same id.
pub const RENEW: &str = "SELECT le_renew(key => $1, id => $2, \
     ttl => make_interval(secs => $3), term => $4)";
/// After a refused renewal: whether the lease is still ours ($2 id, $3
/// term) and live by the server's own lease clock (le_lease names only a
/// live holder and gives `remaining` only then: never compare expires_at
/// with clock_timestamp(), which a step of the wall clock or a credited
/// stall sets apart from it), so that the refusal only met a row locked by
/// another transaction. $1 key.
pub const STILL_OURS: &str = "SELECT coalesce(holder = $2 AND term = $3 \
     AND remaining IS NOT NULL, false) FROM le_lease(key => $1)";
/// `STILL_OURS` for a key of many slots: our tenure among its live ones.
pub const STILL_OURS_SLOT: &str = "SELECT coalesce(bool_or(holder = $2 AND term = $3), false) \
     FROM le_holders(key => $1)";
/// $1 key, $2 id, $3 the tenure's term (NULL: whichever tenure `id` holds,
/// after an interrupted try): a release sent in one tenure never ends a
/// later one of the same id.
pub const RELEASE: &str = "SELECT le_release(key => $1, id => $2, term => $3)";
/// `RENEW` and `RELEASE` on a schema before 0.5.0 (no `term`): a client
/// updated before the extension keeps working, without that protection.
pub const RENEW_0_4: &str =
    "SELECT le_renew(key => $1, id => $2, ttl => make_interval(secs => $3))";
pub const RELEASE_0_4: &str = "SELECT le_release(key => $1, id => $2)";
/// After a release sent again was answered false: whether `id` ($2) still
/// holds the tenure of term $3 of key $1 live (the release met its row
/// locked by another transaction).
pub const HOLDS: &str = "SELECT EXISTS (SELECT FROM le_holders(key => $1) \
     WHERE holder = $2 AND term = $3)";
/// The term of the tenure just won: $1 key, $2 id. A lease holding our id
/// can only be our own tenure (ids are unique per elector). le_lease
/// (extension 0.3.0 and later), not the table: the function is the API.
pub const TERM_OF: &str = "SELECT term FROM le_lease(key => $1) WHERE holder = $2";
/// `TERM_OF` for a key of many slots: our tenure among its live ones.
pub const TERM_OF_SLOT: &str = "SELECT term FROM le_holders(key => $1) WHERE holder = $2";
/// $1 key: the live holder, if any.
pub const LEADER: &str = "SELECT le_leader(key => $1)";
/// Whether a background worker expires lapsed leases and announces them
/// (le_capabilities: extension 0.5.0 and the portable edition).
pub const WORKER_SERVES: &str = "SELECT coalesce((le_capabilities()->>'worker')::boolean, true)";
/// The same question before 0.5.0, which has no le_capabilities.
pub const WORKER_RUNNING: &str = "SELECT le_worker_running()";
/// Where no worker serves the database: vacate and announce every lapsed
/// lease. The server takes it only as a query of its own, in a
/// transaction of its own (it locks what it vacates until then).
pub const EXPIRE_LAPSED: &str = "SELECT le_expire_lapsed()";
/// Channel names cannot be bound, so these two are fixed texts.
pub const LISTEN: &str = "LISTEN leaderlock; LISTEN leaderlock_probe";
/// $1 the elector's probe token: a notification this session should hear
/// if notifications reach it at all.
pub const PROBE: &str = "SELECT pg_notify('leaderlock_probe', $1)";
/// The announcements' channel.
pub const CHANNEL: &str = "leaderlock";
pub const PROBE_CHANNEL: &str = "leaderlock_probe";
/// For `leaderlock status`: $1 key or NULL for every key, $2 held leases
/// only. Held leases first, then lapsed, then vacant; by key within each.
pub const STATUS: &str = "SELECT key, state, holder, term, \
     to_char(remaining, 'HH24:MI:SS.MS'), \
     to_char(expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), \
     extract(epoch FROM remaining)::float8 \
     FROM leaderlock_status WHERE ($1::text IS NULL OR key = $1) AND (NOT $2 OR state = 'held') \
     ORDER BY CASE state WHEN 'held' THEN 0 WHEN 'lapsed' THEN 1 ELSE 2 END, key";
/// For `leaderlock watch`.
pub const LISTEN_ANNOUNCEMENTS: &str = "LISTEN leaderlock";

/// The database connected to, and whether the extension is installed there
/// (to tell a missing extension from other errors, `error::explain`).
pub const EXTENSION_HERE: &str = "SELECT pg_catalog.current_database()::pg_catalog.text, \
     EXISTS (SELECT 1 FROM pg_catalog.pg_extension \
              WHERE extname OPERATOR(pg_catalog.=) 'leaderlock'::pg_catalog.name)";

/// Contract 22, scheduled runs. The server's lease clock, which due
/// instants are on (never this host's clock).
pub const LE_NOW: &str = "SELECT le_now()";
/// $1 job, $2 due, $3 id, $4 ttl in seconds, $5 misfire grace in seconds
/// (NULL: none): the claim's term, or NULL.
pub const CLAIM_RUN: &str = "SELECT le_claim_run(job => $1, due => $2, id => $3, \
     ttl => make_interval(secs => $4), misfire_grace => make_interval(secs => $5))";
/// $1 job, $2 due, $3 id, $4 ttl in seconds, $5 the claim's term.
pub const RENEW_RUN: &str = "SELECT le_renew_run(job => $1, due => $2, id => $3, \
     ttl => make_interval(secs => $4), term => $5)";
/// $1 job, $2 due, $3 id, $4 term, $5 succeeded, $6 detail.
pub const FINISH_RUN: &str = "SELECT le_finish_run(job => $1, due => $2, id => $3, \
     term => $4, succeeded => $5, detail => $6)";
/// After a refused claim, what the run is now: finished (or missed), how
/// long until its live claim ends (NULL: none live), its outcome. $1 job,
/// $2 due.
pub const RUN_STATE: &str = "SELECT r.finished_at IS NOT NULL, \
     CASE WHEN r.holder IS NOT NULL AND r.expires_at > n.now \
          THEN extract(epoch FROM r.expires_at - n.now)::float8 END, r.outcome \
     FROM leaderlock_runs r, (SELECT le_now() AS now) n WHERE r.job = $1 AND r.due = $2";
/// `leaderlock runs`: per job (all, or $1), how its runs went. Instants as
/// RFC 3339 UTC text.
pub const RUNS_SUMMARY: &str = "SELECT r.job, count(*), \
     count(*) FILTER (WHERE r.outcome = 'succeeded'), \
     count(*) FILTER (WHERE r.outcome = 'failed'), \
     count(*) FILTER (WHERE r.outcome = 'missed'), \
     count(*) FILTER (WHERE r.finished_at IS NULL AND r.holder IS NOT NULL \
                      AND r.expires_at > n.now), \
     to_char(max(r.due) FILTER (WHERE r.outcome = 'succeeded') AT TIME ZONE 'UTC', \
             'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'), \
     to_char(max(r.due) FILTER (WHERE r.outcome = 'failed') AT TIME ZONE 'UTC', \
             'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') \
     FROM leaderlock_runs r, (SELECT le_now() AS now) n \
     WHERE $1::text IS NULL OR r.job = $1 GROUP BY r.job ORDER BY r.job";
/// `leaderlock runs`: the latest $2 runs (of job $1, or all), newest
/// first: job, due, state (an outcome, or running, lapsed, unclaimed),
/// holder, term, attempts, finished at, detail.
pub const RUNS_HISTORY: &str = "SELECT r.job, \
     to_char(r.due AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'), \
     CASE WHEN r.finished_at IS NOT NULL THEN r.outcome \
          WHEN r.holder IS NOT NULL AND r.expires_at > n.now THEN 'running' \
          WHEN r.holder IS NOT NULL THEN 'lapsed' ELSE 'unclaimed' END, \
     r.holder, r.term, r.attempts, \
     to_char(r.finished_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'), r.detail \
     FROM leaderlock_runs r, (SELECT le_now() AS now) n \
     WHERE $1::text IS NULL OR r.job = $1 ORDER BY r.due DESC, r.job LIMIT $2";

/// Contract 21, sessions: $1 id, $2 ttl and $3 lock-delay in seconds, $4
/// whether keys keep their values. The handle as text.
pub const OPEN_SESSION: &str =
    "SELECT le_open_session(id => $1, ttl => make_interval(secs => $2), \
     lock_delay => make_interval(secs => $3), keep_values => $4)::text";
/// $1 the session's handle (text).
pub const RENEW_SESSION: &str = "SELECT le_renew_session(session => $1::text::uuid)";
pub const CLOSE_SESSION: &str = "SELECT le_close_session(session => $1::text::uuid)";
/// $1 handle, $2 key, $3 slots.
pub const TRY_ACQUIRE_IN: &str =
    "SELECT le_try_acquire_in(session => $1::text::uuid, key => $2, slots => $3)";
/// $1 handle, $2 key, $3 wait in seconds, $4 slots.
pub const ACQUIRE_IN: &str = "SELECT le_acquire_in(session => $1::text::uuid, key => $2, \
     wait => make_interval(secs => $3), slots => $4)";
/// The term of key $1 held under session $2 (just acquired under it): a
/// key of one slot, or the session's slot of a key of many.
pub const TERM_IN_SESSION: &str = "SELECT term FROM leaderlock \
     WHERE key = $1 AND session = $2::text::uuid AND holder IS NOT NULL \
     UNION ALL SELECT term FROM leaderlock_slots \
     WHERE key = $1 AND session = $2::text::uuid AND holder IS NOT NULL";

/// Contract 23: the transitions after a position, in order (one page),
/// each with the last position numbered, read in the same statement (one
/// snapshot: both functions are STABLE): after a short page, every
/// transition the filter selects up to it has been read. No transition:
/// one row, NULL but the last position.
pub const HISTORY: &str = "SELECT h.\"position\", h.at, h.event, h.key, h.holder, h.term, \
    h.role::text, h.payload::text, p.head \
    FROM (SELECT le_history_position() AS head) p \
    LEFT JOIN le_history(after => $1, for_key => $2, key_prefix => $3, max_rows => $4) h ON true \
    ORDER BY h.\"position\"";
/// The last position numbered: where following "from now on" starts.
pub const HISTORY_POSITION: &str = "SELECT le_history_position()";
/// Where the server says it numbered transitions (a hint).
pub const LISTEN_HISTORY: &str = "LISTEN leaderlock_history";
/// Where no worker numbers the history: the changes too, as hints to
/// number (le_expire_lapsed) and read.
pub const LISTEN_HISTORY_AND_CHANGES: &str = "LISTEN leaderlock_history; LISTEN leaderlock";
pub const HISTORY_CHANNEL: &str = "leaderlock_history";
