//! Every statement the client runs, in one place. All take bind parameters
//! (sent with their types in one round trip, so they also work through
//! pgbouncer's transaction pooling, which has no named prepared statements).

/// $1 key, $2 id, $3 ttl in seconds.
pub const TRY_ACQUIRE: &str = "SELECT le_try_acquire($1, $2, make_interval(secs => $3))";
/// $1 key, $2 id, $3 ttl in seconds.
pub const RENEW: &str = "SELECT le_renew($1, $2, make_interval(secs => $3))";
/// $1 key, $2 id.
pub const RELEASE: &str = "SELECT le_release($1, $2)";
/// The term of the tenure just won: $1 key, $2 id. A row holding our id
/// can only be our own tenure (ids are unique per elector).
pub const TERM_OF: &str = "SELECT term FROM leaderlock WHERE key = $1 AND holder = $2";
/// $1 key: the live holder, if any.
pub const LEADER: &str = "SELECT le_leader($1)";
/// Channel names cannot be bound, so these two are fixed texts.
pub const LISTEN: &str = "LISTEN leaderlock; LISTEN leaderlock_probe";
/// $1 the elector's probe token: a notification this session should hear
/// if notifications reach it at all.
pub const PROBE: &str = "SELECT pg_notify('leaderlock_probe', $1)";
/// The announcements' channel.
pub const CHANNEL: &str = "leaderlock";
pub const PROBE_CHANNEL: &str = "leaderlock_probe";
/// For `leaderlock status`: $1 key or NULL for every key.
pub const STATUS: &str = "SELECT key, state, holder, term, \
     to_char(remaining, 'HH24:MI:SS.MS'), \
     to_char(expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"') \
     FROM leaderlock_status WHERE $1::text IS NULL OR key = $1 ORDER BY key";
/// For `leaderlock watch`.
pub const LISTEN_ANNOUNCEMENTS: &str = "LISTEN leaderlock";
