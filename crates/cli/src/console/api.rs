//! What the console reads and does, as JSON: each statement names
//! pg_catalog's operators and functions and the extension's objects (never
//! the session's search_path), takes its input as bind parameters, and
//! returns columns the page shows as text (other roles' keys, ids, values
//! and job names are data: the page never parses them as markup). Instants
//! are seconds since the Unix epoch on the lease clock, durations seconds.
use serde_json::{json, Map, Value};
use tokio_postgres::types::Type;
use tokio_postgres::Row;

use leaderlock_client::Db;

/// Keys per page of the list, at most.
pub const MAX_PAGE: i64 = 500;

/// The lease clock's now.
const NOW: &str = "SELECT pg_catalog.date_part('epoch'::pg_catalog.text, @extschema@.le_now())";

/// Every holder (slot) of the keys of a page, in the keys' order.
macro_rules! holders_of_page {
    ($page:literal) => {
        concat!(
            $page,
            " SELECT s.key, s.slot, s.slots, s.holder, s.term, s.state, \
                     pg_catalog.date_part('epoch'::pg_catalog.text, s.expires_at), \
                     pg_catalog.date_part('epoch'::pg_catalog.text, s.acquired_at), \
                     s.value::pg_catalog.text, s.session::pg_catalog.text, \
                     s.owner::pg_catalog.text \
                FROM @extschema@.leaderlock_status s \
               WHERE s.key OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT p.key FROM page p)) \
               ORDER BY s.key, s.slot"
        )
    };
}

/// A page of keys after `$1` (in the keys' order), at most `$3` (`$2`:
/// the prefix, empty here): read from the keys' index, so a database of
/// a million keys reads a page, not the table.
const KEYS: &str = holders_of_page!(
    "WITH page AS ( \
       SELECT l.key FROM @extschema@.leaderlock l \
        WHERE l.key OPERATOR(pg_catalog.>) $1 AND $2::pg_catalog.text IS NOT NULL \
        ORDER BY l.key LIMIT $3)"
);

/// The same, of the keys starting with `$2`: the index is walked from the
/// prefix on, a key at a time, until a key does not start with it (keys
/// with a common prefix are together in the index's order), so a prefix
/// of few keys does not read the rest of the index.
const KEYS_WITH_PREFIX: &str = holders_of_page!(
    "WITH RECURSIVE walk(key, n) AS ( \
       (SELECT l.key, 1 FROM @extschema@.leaderlock l \
         WHERE l.key OPERATOR(pg_catalog.>) $1 AND l.key OPERATOR(pg_catalog.>=) $2 \
         ORDER BY l.key LIMIT 1) \
       UNION ALL \
       SELECT (SELECT l.key FROM @extschema@.leaderlock l \
                WHERE l.key OPERATOR(pg_catalog.>) w.key ORDER BY l.key LIMIT 1), \
              w.n OPERATOR(pg_catalog.+) 1 \
         FROM walk w \
        WHERE w.n OPERATOR(pg_catalog.<) $3 AND pg_catalog.starts_with(w.key, $2)), \
     page AS (SELECT w.key FROM walk w WHERE pg_catalog.starts_with(w.key, $2))"
);

/// Key `$1`'s holders (as `KEYS`).
const KEY: &str = "SELECT s.key, s.slot, s.slots, s.holder, s.term, s.state, \
            pg_catalog.date_part('epoch'::pg_catalog.text, s.expires_at), \
            pg_catalog.date_part('epoch'::pg_catalog.text, s.acquired_at), \
            s.value::pg_catalog.text, s.session::pg_catalog.text, s.owner::pg_catalog.text \
       FROM @extschema@.leaderlock_status s WHERE s.key OPERATOR(pg_catalog.=) $1 ORDER BY s.slot";

/// The candidates waiting for key `$1` in serving order (contract 18; the
/// compiled edition).
const CANDIDATES: &str = "SELECT c.id, c.priority, \
            pg_catalog.date_part('epoch'::pg_catalog.text, c.waiting_since) \
       FROM @extschema@.le_candidates(key => $1) c";

/// Key `$1`'s latest transitions in the history (and those not numbered
/// yet), at most `$2`, oldest first.
const KEY_HISTORY: &str = "SELECT * FROM ( \
       SELECT h.position, pg_catalog.date_part('epoch'::pg_catalog.text, h.at) AS at, h.event, \
              h.holder, h.term, h.payload::pg_catalog.text \
         FROM @extschema@.leaderlock_history h WHERE h.key OPERATOR(pg_catalog.=) $1 \
       UNION ALL \
       SELECT NULL, pg_catalog.date_part('epoch'::pg_catalog.text, p.at), p.event, p.holder, \
              p.term, p.payload \
         FROM @extschema@.leaderlock_history_pending p WHERE p.key OPERATOR(pg_catalog.=) $1 \
       ORDER BY 2 DESC LIMIT $2) t ORDER BY 2, 1";

/// The jobs (scheduled or not) with their schedule and its next three
/// due instants, at most `$1`, the scheduled first.
const JOBS: &str =
    "SELECT j.job, pg_catalog.date_part('epoch'::pg_catalog.text, s.every), s.cron, s.tz, \
            pg_catalog.date_part('epoch'::pg_catalog.text, s.misfire_grace), s.overlap, s.paused, \
            pg_catalog.date_part('epoch'::pg_catalog.text, s.next_due), \
            pg_catalog.date_part('epoch'::pg_catalog.text, s.overdue), s.last_outcome, s.missed, \
            j.term, j.owner::pg_catalog.regrole::pg_catalog.text, s.job IS NOT NULL, \
            pg_catalog.date_part('epoch'::pg_catalog.text, \
              @extschema@.le_next_due(job => j.job, after => s.next_due)), \
            pg_catalog.date_part('epoch'::pg_catalog.text, \
              @extschema@.le_next_due(job => j.job, after => \
                @extschema@.le_next_due(job => j.job, after => s.next_due))) \
       FROM @extschema@.leaderlock_jobs j \
       LEFT JOIN @extschema@.leaderlock_schedule_status s ON s.job OPERATOR(pg_catalog.=) j.job \
      WHERE j.job OPERATOR(pg_catalog.<>) '' ORDER BY s.job IS NULL, j.job LIMIT $1";

/// The latest runs of the jobs `$1`, at most `$2` each, newest first.
const RUNS: &str =
    "SELECT r.job, pg_catalog.date_part('epoch'::pg_catalog.text, r.due), r.holder, \
            r.term, r.outcome, r.detail, \
            pg_catalog.date_part('epoch'::pg_catalog.text, r.expires_at), r.finished_at IS NULL \
       FROM pg_catalog.unnest($1::pg_catalog.text[]) AS j(job) \
      CROSS JOIN LATERAL (SELECT * FROM @extschema@.leaderlock_runs x \
                           WHERE x.job OPERATOR(pg_catalog.=) j.job \
                           ORDER BY x.due DESC LIMIT $2) r";

/// The sessions (contract 21) with how many keys each holds and the first
/// 20 of them (by the session's own index), at most `$1`.
const SESSIONS: &str = "SELECT x.session::pg_catalog.text, x.id, \
            pg_catalog.date_part('epoch'::pg_catalog.text, x.expires_at), \
            pg_catalog.date_part('epoch'::pg_catalog.text, x.ttl), x.session_pid, \
            x.owner::pg_catalog.regrole::pg_catalog.text, \
            (SELECT pg_catalog.count(*) FROM @extschema@.leaderlock_status s \
              WHERE s.session OPERATOR(pg_catalog.=) x.session), \
            ARRAY(SELECT s.key FROM @extschema@.leaderlock_status s \
                   WHERE s.session OPERATOR(pg_catalog.=) x.session ORDER BY s.key LIMIT 20) \
       FROM @extschema@.leaderlock_sessions x ORDER BY x.expires_at DESC LIMIT $1";

/// The groups (contract 26): name, partitions, drain, owner, and how many
/// partitions are owned, revoked and free.
const GROUPS: &str = "SELECT g.grp, g.partitions, \
            pg_catalog.date_part('epoch'::pg_catalog.text, g.drain), \
            g.owner::pg_catalog.regrole::pg_catalog.text, \
            pg_catalog.count(*) FILTER (WHERE v.state OPERATOR(pg_catalog.=) 'owned'), \
            pg_catalog.count(*) FILTER (WHERE v.state OPERATOR(pg_catalog.=) 'revoked'), \
            pg_catalog.count(*) FILTER (WHERE v.state OPERATOR(pg_catalog.=) 'free') \
       FROM @extschema@.leaderlock_groups g \
       LEFT JOIN @extschema@.leaderlock_group_status v ON v.\"group\" OPERATOR(pg_catalog.=) g.grp \
      GROUP BY g.grp ORDER BY g.grp LIMIT $1";

/// The members of groups `$1`: group, member, its session's expiry, how
/// many partitions it owns and gives back, and the first of them.
const GROUP_MEMBERS: &str = "SELECT m.grp, m.member, \
            pg_catalog.date_part('epoch'::pg_catalog.text, s.expires_at), \
            pg_catalog.count(p.partition) FILTER (WHERE p.revoke_until IS NULL), \
            pg_catalog.count(p.partition) FILTER (WHERE p.revoke_until IS NOT NULL), \
            (pg_catalog.array_agg(p.partition ORDER BY p.partition) \
               FILTER (WHERE p.partition IS NOT NULL))[1:20] \
       FROM @extschema@.leaderlock_members m \
       LEFT JOIN @extschema@.leaderlock_sessions s ON s.session OPERATOR(pg_catalog.=) m.session \
       LEFT JOIN @extschema@.leaderlock_partitions p ON p.grp OPERATOR(pg_catalog.=) m.grp \
            AND p.member OPERATOR(pg_catalog.=) m.member AND p.session OPERATOR(pg_catalog.=) m.session \
      WHERE m.grp OPERATOR(pg_catalog.=) ANY ($1) \
      GROUP BY m.grp, m.member, s.expires_at ORDER BY m.grp, m.member";

pub const FORCE_RELEASE: &str = "SELECT @extschema@.le_force_release(key => $1)";
pub const PAUSE: &str = "SELECT @extschema@.le_pause_schedule(job => $1)";
pub const RESUME: &str = "SELECT @extschema@.le_resume_schedule(job => $1)";
pub const CLOSE_SESSION: &str =
    "SELECT @extschema@.le_close_session(session => $1::pg_catalog.uuid)";

pub async fn now(db: &Db) -> Result<f64, tokio_postgres::Error> {
    Ok(db.query_one(NOW, &[]).await?.get(0))
}

fn holder(r: &Row) -> Value {
    json!({
        "key": r.get::<_, String>(0),
        "slot": r.get::<_, Option<i32>>(1),
        "slots": r.get::<_, Option<i32>>(2),
        "holder": r.get::<_, Option<String>>(3),
        "term": r.get::<_, Option<i64>>(4),
        "state": r.get::<_, Option<String>>(5),
        "expires_at": r.get::<_, Option<f64>>(6),
        "acquired_at": r.get::<_, Option<f64>>(7),
        "value": r.get::<_, Option<String>>(8),
        "session": r.get::<_, Option<String>>(9),
        "owner": r.get::<_, Option<String>>(10),
    })
}

/// A page of keys: `{"now", "rows", "next"}` (`next`: where the next page
/// starts, NULL on the last).
pub async fn keys(
    db: &Db,
    prefix: &str,
    after: &str,
    limit: i64,
) -> Result<Value, tokio_postgres::Error> {
    let limit = limit.clamp(1, MAX_PAGE);
    let statement = if prefix.is_empty() {
        KEYS
    } else {
        KEYS_WITH_PREFIX
    };
    let rows = db
        .query_typed(
            statement,
            &[
                (&after, Type::TEXT),
                (&prefix, Type::TEXT),
                (&limit, Type::INT8),
            ],
        )
        .await?;
    let mut distinct: Vec<String> = rows.iter().map(|r| r.get::<_, String>(0)).collect();
    distinct.dedup();
    let next = (distinct.len() as i64 == limit).then(|| distinct.last().cloned());
    Ok(json!({
        "now": now(db).await?,
        "rows": rows.iter().map(holder).collect::<Vec<_>>(),
        "next": next.flatten(),
    }))
}

/// One key: its holders, its waiting candidates (none where the edition
/// has no priorities) and its latest transitions.
pub async fn key(db: &Db, key: &str) -> Result<Value, tokio_postgres::Error> {
    let holders = db.query_typed(KEY, &[(&key, Type::TEXT)]).await?;
    let candidates = match db.query_typed(CANDIDATES, &[(&key, Type::TEXT)]).await {
        Ok(rows) => rows
            .iter()
            .map(|r| {
                json!({
                    "id": r.get::<_, Option<String>>(0),
                    "priority": r.get::<_, Option<i32>>(1),
                    "waiting_since": r.get::<_, Option<f64>>(2),
                })
            })
            .collect(),
        Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::UNDEFINED_FUNCTION) => {
            Vec::new()
        }
        Err(e) => return Err(e),
    };
    let limit: i64 = 1000;
    let history = db
        .query_typed(KEY_HISTORY, &[(&key, Type::TEXT), (&limit, Type::INT8)])
        .await?;
    Ok(json!({
        "now": now(db).await?,
        "key": key,
        "holders": holders.iter().map(holder).collect::<Vec<_>>(),
        "candidates": candidates,
        "history": history.iter().map(|r| json!({
            "position": r.get::<_, Option<i64>>(0),
            "at": r.get::<_, Option<f64>>(1),
            "event": r.get::<_, Option<String>>(2),
            "holder": r.get::<_, Option<String>>(3),
            "term": r.get::<_, Option<i64>>(4),
            "payload": r.get::<_, Option<String>>(5)
                .and_then(|p| serde_json::from_str::<Value>(&p).ok()),
        })).collect::<Vec<_>>(),
    }))
}

/// The jobs with their schedules and latest runs.
pub async fn jobs(db: &Db) -> Result<Value, tokio_postgres::Error> {
    let limit: i64 = 200;
    let jobs = db.query_typed(JOBS, &[(&limit, Type::INT8)]).await?;
    let names: Vec<String> = jobs.iter().map(|r| r.get(0)).collect();
    let each: i64 = 6;
    let runs = db
        .query_typed(RUNS, &[(&names, Type::TEXT_ARRAY), (&each, Type::INT8)])
        .await?;
    let mut by_job: Map<String, Value> = Map::new();
    for r in &runs {
        let job: String = r.get(0);
        let run = json!({
            "due": r.get::<_, Option<f64>>(1),
            "holder": r.get::<_, Option<String>>(2),
            "term": r.get::<_, Option<i64>>(3),
            "outcome": r.get::<_, Option<String>>(4),
            "detail": r.get::<_, Option<String>>(5),
            "expires_at": r.get::<_, Option<f64>>(6),
            "unfinished": r.get::<_, Option<bool>>(7),
        });
        match by_job.entry(job).or_insert_with(|| json!([])) {
            Value::Array(a) => a.push(run),
            _ => unreachable!("an array"),
        }
    }
    Ok(json!({
        "now": now(db).await?,
        "jobs": jobs.iter().map(|r| {
            let job: String = r.get(0);
            json!({
                "job": job,
                "every": r.get::<_, Option<f64>>(1),
                "cron": r.get::<_, Option<String>>(2),
                "tz": r.get::<_, Option<String>>(3),
                "misfire_grace": r.get::<_, Option<f64>>(4),
                "overlap": r.get::<_, Option<String>>(5),
                "paused": r.get::<_, Option<bool>>(6),
                "next_due": r.get::<_, Option<f64>>(7),
                "overdue": r.get::<_, Option<f64>>(8),
                "last_outcome": r.get::<_, Option<String>>(9),
                "missed": r.get::<_, Option<i64>>(10),
                "term": r.get::<_, Option<i64>>(11),
                "owner": r.get::<_, Option<String>>(12),
                "scheduled": r.get::<_, Option<bool>>(13),
                "upcoming": upcoming(r),
                "runs": by_job.get(&job).cloned().unwrap_or_else(|| json!([])),
            })
        }).collect::<Vec<_>>(),
    }))
}

/// A job's next three due instants (columns 7, 14, 15 of `JOBS`).
fn upcoming(r: &Row) -> Vec<f64> {
    [7, 14, 15]
        .into_iter()
        .filter_map(|i| r.get::<_, Option<f64>>(i))
        .collect()
}

/// The sessions.
pub async fn sessions(db: &Db) -> Result<Value, tokio_postgres::Error> {
    let limit: i64 = 500;
    let rows = db.query_typed(SESSIONS, &[(&limit, Type::INT8)]).await?;
    Ok(json!({
        "now": now(db).await?,
        "sessions": rows.iter().map(|r| json!({
            "session": r.get::<_, Option<String>>(0),
            "id": r.get::<_, Option<String>>(1),
            "expires_at": r.get::<_, Option<f64>>(2),
            "ttl": r.get::<_, Option<f64>>(3),
            "pid": r.get::<_, Option<i32>>(4),
            "owner": r.get::<_, Option<String>>(5),
            "keys": r.get::<_, Option<i64>>(6),
            "some_keys": r.get::<_, Option<Vec<String>>>(7).unwrap_or_default(),
        })).collect::<Vec<_>>(),
    }))
}

/// The groups with their members (none on a server without groups).
pub async fn groups(db: &Db) -> Result<Value, tokio_postgres::Error> {
    let limit: i64 = 200;
    let groups = match db.query_typed(GROUPS, &[(&limit, Type::INT8)]).await {
        Ok(rows) => rows,
        Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::UNDEFINED_TABLE) => Vec::new(),
        Err(e) => return Err(e),
    };
    let names: Vec<String> = groups.iter().map(|r| r.get(0)).collect();
    let members = db
        .query_typed(GROUP_MEMBERS, &[(&names, Type::TEXT_ARRAY)])
        .await?;
    let mut by_group: Map<String, Value> = Map::new();
    for r in &members {
        let member = json!({
            "member": r.get::<_, Option<String>>(1),
            "expires_at": r.get::<_, Option<f64>>(2),
            "owned": r.get::<_, Option<i64>>(3),
            "revoked": r.get::<_, Option<i64>>(4),
            "some_partitions": r.get::<_, Option<Vec<i32>>>(5).unwrap_or_default(),
        });
        match by_group
            .entry(r.get::<_, String>(0))
            .or_insert_with(|| json!([]))
        {
            Value::Array(a) => a.push(member),
            _ => unreachable!("an array"),
        }
    }
    Ok(json!({
        "now": now(db).await?,
        "groups": groups.iter().map(|r| {
            let group: String = r.get(0);
            json!({
                "group": group,
                "partitions": r.get::<_, Option<i32>>(1),
                "drain": r.get::<_, Option<f64>>(2),
                "owner": r.get::<_, Option<String>>(3),
                "owned": r.get::<_, Option<i64>>(4),
                "revoked": r.get::<_, Option<i64>>(5),
                "free": r.get::<_, Option<i64>>(6),
                "members": by_group.get(&group).cloned().unwrap_or_else(|| json!([])),
            })
        }).collect::<Vec<_>>(),
    }))
}
