//! `leaderlock history` and `leaderlock watch` (contract 23): the recorded
//! transitions, as a table, JSON lines or an SVG timeline, and following
//! them live from a position, resuming after a lost connection. Keys,
//! holders and payloads were written by other roles: printed through
//! text.rs only.
use std::io::Write;

use chrono::{DateTime, Utc};
use leaderlock_client::{
    pg_config_from_env, Announcement, HistoryFilter, HistoryWatcher, Transition, HISTORY_PRUNED,
};
use serde_json::Value;
use tokio_postgres::types::{ToSql, Type};

use crate::status::{connect, db_error, say};
use crate::{duration, exit, text, timeline};

/// Rows read per query.
const PAGE: i64 = 10_000;

use leaderlock_client::sql::LE_NOW as NOW;
use leaderlock_client::sql::{
    HISTORY_AGO as AGO, HISTORY_INSTANT as INSTANT, HISTORY_READ as READ,
};

pub struct Args {
    pub key: Option<String>,
    pub prefix: Option<String>,
    pub since: Option<String>,
    pub until: Option<String>,
    pub json: bool,
    pub svg: Option<std::path::PathBuf>,
}

/// The transitions kept between `--since` and `--until`.
pub async fn history(dsn: Option<&str>, args: Args) -> i32 {
    if args.key.is_some() && args.prefix.is_some() {
        say("give a key or --prefix, not both");
        return exit::USAGE;
    }
    let (client, _) = match connect(dsn).await {
        Ok(c) => c,
        Err(code) => return code,
    };
    let (since, until) = match (
        bound(&client, args.since.clone()).await,
        bound(&client, args.until.clone()).await,
    ) {
        (Ok(since), Ok(until)) => (since, until),
        (Err(e), _) | (_, Err(e)) => {
            if e.code().is_some_and(|c| c.code().starts_with("22")) {
                say(&format!(
                    "--since, --until: {}",
                    leaderlock_client::describe_error(&e)
                ));
                return exit::USAGE;
            }
            return db_error(&client, e).await;
        }
    };
    let mut after = 0i64;
    let mut rows: Vec<(i64, timeline::Row, String, Option<String>)> = Vec::new();
    loop {
        let params: [(&(dyn ToSql + Sync), Type); 6] = [
            (&after, Type::INT8),
            (&since, Type::TIMESTAMPTZ),
            (&until, Type::TIMESTAMPTZ),
            (&args.key, Type::TEXT),
            (&args.prefix, Type::TEXT),
            (&PAGE, Type::INT8),
        ];
        let page = match client.query_typed(READ, &params).await {
            Ok(p) => p,
            Err(e) => return db_error(&client, e).await,
        };
        let n = page.len() as i64;
        for r in page {
            let payload: String = r.get(7);
            let value: Value = serde_json::from_str(&payload).unwrap_or(Value::Null);
            let row = timeline::Row {
                at: r.get(1),
                event: r.get(2),
                key: r.get::<_, Option<String>>(3).unwrap_or_default(),
                holder: r.get(4),
                term: r.get(5),
                detail: detail(&value),
            };
            after = r.get(0);
            rows.push((after, row, payload, r.get(6)));
        }
        if n < PAGE {
            break;
        }
    }
    if let Some(path) = args.svg {
        let to = match until {
            Some(t) => t,
            None => match client.query_one(NOW, &[]).await {
                Ok(r) => r.get(0),
                Err(e) => return db_error(&client, e).await,
            },
        };
        let from = since
            .or_else(|| rows.first().map(|r| r.1.at))
            .unwrap_or(to - chrono::Duration::hours(1));
        let picture: Vec<timeline::Row> = rows.into_iter().map(|r| r.1).collect();
        if let Err(e) = std::fs::write(&path, timeline::render(&picture, from, to)) {
            say(&format!("cannot write {}: {e}", path.display()));
            return exit::CANNOT_RUN;
        }
        return 0;
    }
    let mut out = std::io::stdout().lock();
    let written = if args.json {
        rows.iter().try_for_each(|(position, row, payload, role)| {
            let value = serde_json::from_str(payload).unwrap_or(Value::Null);
            writeln!(
                out,
                "{}",
                text::json_line(&line(*position, role, value, row.at))
            )
        })
    } else {
        let table: Vec<Vec<String>> = rows
            .iter()
            .map(|(position, r, _, role)| {
                vec![
                    position.to_string(),
                    r.at.format("%Y-%m-%d %H:%M:%S%.3fZ").to_string(),
                    text::shown(&r.event),
                    text::shown(&r.key),
                    r.holder.as_deref().map(text::shown).unwrap_or_default(),
                    r.term.map(|t| t.to_string()).unwrap_or_default(),
                    role.as_deref().map(text::shown).unwrap_or_default(),
                    r.detail.as_deref().map(text::shown).unwrap_or_default(),
                ]
            })
            .collect();
        text::table(
            &mut out,
            &[
                "POSITION", "AT", "EVENT", "KEY", "HOLDER", "TERM", "ROLE", "DETAIL",
            ],
            &table,
        )
    };
    let _ = written.and_then(|_| out.flush()); // reader gone (| head): fine
    0
}

/// `text` as an instant: a duration back from the server's lease clock, or
/// an instant the server parses; None when not given.
async fn bound(
    client: &leaderlock_client::Db,
    text: Option<String>,
) -> Result<Option<DateTime<Utc>>, tokio_postgres::Error> {
    let Some(text) = text else {
        return Ok(None);
    };
    let row = match duration::parse(&text) {
        Ok(d) => {
            let secs = d.as_secs_f64();
            client.query_typed(AGO, &[(&secs, Type::FLOAT8)]).await?
        }
        Err(_) => client.query_typed(INSTANT, &[(&text, Type::TEXT)]).await?,
    };
    Ok(row[0].get(0))
}

/// What a table line says beyond the columns: why it expired, a forced
/// release, who held before, the run's outcome.
fn detail(payload: &Value) -> Option<String> {
    let s = |k: &str| payload.get(k).and_then(Value::as_str);
    match payload.get("event").and_then(Value::as_str)? {
        "expired" => s("reason").map(|r| format!("reason {r}")),
        "released" if payload.get("forced") == Some(&Value::Bool(true)) => Some("forced".into()),
        "acquired" => s("previous_holder").map(|p| format!("after {}", text::shown(p))),
        "run_finished" => s("outcome").map(Into::into),
        "run_claimed" | "run_missed" => s("due").map(|d| format!("due {d}")),
        _ => None,
    }
}

/// One JSON line: the notification, with its position and role.
fn line(position: i64, role: &Option<String>, payload: Value, at: DateTime<Utc>) -> Value {
    let mut map = match payload {
        Value::Object(m) => m,
        _ => serde_json::Map::new(),
    };
    map.insert("position".into(), position.into());
    map.insert(
        "role".into(),
        role.clone().map_or(Value::Null, Value::String),
    );
    map.entry("at")
        .or_insert_with(|| at.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string().into());
    Value::Object(map)
}

/// Every transition after `since` (None: from now on), one JSON line each,
/// following the history across lost connections, until interrupted.
pub async fn watch(
    dsn: Option<&str>,
    key: Option<String>,
    prefix: Option<String>,
    since: Option<i64>,
    group: Option<String>,
) -> i32 {
    // A group's transitions are kept under its name (contract 26).
    let key = key.or_else(|| group.clone());
    let config = match pg_config_from_env(dsn) {
        Ok(c) => c,
        Err(e) => {
            say(&e.to_string());
            return exit::USAGE;
        }
    };
    let filter = HistoryFilter {
        key: key.clone(),
        key_prefix: prefix,
    };
    let mut watcher = HistoryWatcher::new(config, since, filter);
    let mut out = std::io::stdout().lock();
    let mut reconnects = 0;
    let mut last = since;
    loop {
        let t: Transition = match watcher.next().await {
            Ok(t) => t,
            Err(e) if e.sqlstate() == Some(HISTORY_PRUNED) => {
                say(&e.to_string());
                return exit::REJECTED;
            }
            Err(e) if e.sqlstate() == Some("42883") && since.is_none() => {
                say("this server keeps no history (leaderlock before 0.5.0): printing announcements, which a lost connection misses");
                return crate::status::watch(dsn, key).await;
            }
            Err(e) => {
                say(&e.to_string());
                return exit::REJECTED;
            }
        };
        if watcher.reconnects() != reconnects {
            reconnects = watcher.reconnects();
            say(&format!(
                "connection lost and made again; going on after position {}",
                last.map_or("(none yet)".into(), |p| p.to_string())
            ));
        }
        last = Some(t.position);
        if let Some(g) = &group {
            let of_group = Announcement::well_formed_partition(&t.payload.to_string())
                .is_some_and(|v| v["group"] == g.as_str());
            if !of_group {
                continue; // (a key of the group's name, or a notification forged into no history)
            }
        }
        let value = line(t.position, &t.role, t.payload, t.at);
        if writeln!(out, "{}", text::json_line(&value))
            .and_then(|_| out.flush())
            .is_err()
        {
            return 0; // reader went away (| head)
        }
    }
}
