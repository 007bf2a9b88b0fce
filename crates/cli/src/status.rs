//! `leaderlock status` and `leaderlock watch`. Both print what other roles
//! wrote (keys, holders, payloads): through text.rs, never raw. Output
//! whose reader went away (`| head`) ends the command quietly, with 0.
use std::io::Write;

use futures_util::StreamExt;
use leaderlock_client::{
    describe_error, is_permanent, pg_config_from_env, Announcement, Db, Error,
};
use tokio_postgres::types::Type;
use tokio_postgres::AsyncMessage;

use crate::{exit, text};

/// One line on stderr, whatever became of stderr.
pub fn say(message: &str) {
    let _ = writeln!(
        std::io::stderr().lock(),
        "leaderlock: {}",
        text::without_controls(message)
    );
}

pub async fn connect(
    dsn: Option<&str>,
) -> Result<(Db, tokio::sync::mpsc::UnboundedReceiver<String>), i32> {
    let config = pg_config_from_env(dsn).map_err(|e| {
        say(&e.to_string());
        exit::USAGE
    })?;
    let (client, mut messages) = config.connect().await.map_err(|e| {
        say(&format!("cannot connect: {}", describe_error(&e)));
        exit_code(&e)
    })?;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    // Drives the connection until it ends. A caller that dropped the
    // receiver only stops wanting notifications: the connection must go
    // on, and one may come to a connection that never listened (through a
    // pooler, its server session may be one another client LISTENed on).
    tokio::spawn(async move {
        while let Some(Ok(message)) = messages.next().await {
            if let AsyncMessage::Notification(n) = message {
                if n.channel() == leaderlock_client::sql::CHANNEL {
                    let _ = tx.send(n.payload().to_owned());
                }
            }
        }
    });
    // Where leaderlock is: never the session's search_path.
    let db = Db::attach(client, config.schema()).await.map_err(|e| {
        say(&e.to_string());
        match e {
            Error::Config(_) => exit::USAGE,
            Error::Rejected { .. } => exit::REJECTED,
            _ => exit::UNREACHABLE,
        }
    })?;
    Ok((db, rx))
}

/// The same codes as `leaderlock run`: 123 when retrying cannot help (no
/// extension, no privilege, a wrong password), else 122.
fn exit_code(e: &tokio_postgres::Error) -> i32 {
    if is_permanent(e) {
        exit::REJECTED
    } else {
        exit::UNREACHABLE
    }
}

/// Says what went wrong with a call on `client` (a missing extension by
/// name, `leaderlock_client::explain`); the exit code for it.
pub async fn db_error(db: &Db, e: tokio_postgres::Error) -> i32 {
    say(&leaderlock_client::explain(db.client(), &e)
        .await
        .to_string());
    exit_code(&e)
}

/// Widest key or holder shown in the table of every lease: longer ones are
/// shortened (with `…`), so one long key does not widen every line (the
/// table of one key and `--json` give them whole).
const WIDEST: usize = 64;

/// Prints the leases (one key, or all) as a table, held first, with a
/// summary line; or (`json`) one JSON object per lease.
pub async fn status(dsn: Option<&str>, key: Option<String>, held: bool, json: bool) -> i32 {
    let (client, _) = match connect(dsn).await {
        Ok(c) => c,
        Err(code) => return code,
    };
    let rows = match client
        .query_typed(
            leaderlock_client::sql::STATUS,
            &[(&key, Type::TEXT), (&held, Type::BOOL)],
        )
        .await
    {
        Ok(rows) => rows,
        Err(e) => return db_error(&client, e).await,
    };
    let mut out = std::io::stdout().lock();
    let printed = if json {
        rows.iter().try_for_each(|r| {
            let line = serde_json::json!({
                "key": r.get::<_, String>(0),
                "state": r.get::<_, String>(1),
                "holder": r.get::<_, Option<String>>(2),
                "term": r.get::<_, i64>(3),
                "remaining_seconds": r.get::<_, Option<f64>>(6),
                "expires_at": r.get::<_, Option<String>>(5),
            });
            writeln!(out, "{}", text::json_line(&line))
        })
    } else {
        print_table(&mut out, &rows, key.is_none(), key.is_none())
    };
    if printed.and_then(|_| out.flush()).is_err() {
        return 0; // reader went away (| head)
    }
    if key.is_some() && rows.is_empty() {
        say("no such key");
        return 1;
    }
    0
}

/// Prints a group's partitions (contract 26) as a table with a summary
/// line, or (`json`) one JSON object per partition.
pub async fn group(dsn: Option<&str>, group: &str, json: bool) -> i32 {
    let (client, _) = match connect(dsn).await {
        Ok(c) => c,
        Err(code) => return code,
    };
    let rows = match client
        .query_typed(
            leaderlock_client::sql::GROUP_STATUS,
            &[(&group, Type::TEXT)],
        )
        .await
    {
        Ok(rows) => rows,
        Err(e) => return db_error(&client, e).await,
    };
    if rows.is_empty() {
        say("no such group");
        return 1;
    }
    let mut out = std::io::stdout().lock();
    let printed = if json {
        rows.iter().try_for_each(|r| {
            let line = serde_json::json!({
                "partition": r.get::<_, i32>(0),
                "member": r.get::<_, Option<String>>(1),
                "term": r.get::<_, i64>(2),
                "state": r.get::<_, String>(3),
                "member_live": r.get::<_, Option<bool>>(4),
                "revoked_until": r.get::<_, Option<String>>(5),
            });
            writeln!(out, "{}", text::json_line(&line))
        })
    } else {
        let header = ["PARTITION", "MEMBER", "TERM", "STATE", "LIVE", "UNTIL"];
        let table: Vec<Vec<String>> = rows
            .iter()
            .map(|r| {
                vec![
                    r.get::<_, i32>(0).to_string(),
                    r.get::<_, Option<String>>(1)
                        .map_or_else(|| "-".into(), |m| shortened(&text::shown(&m))),
                    r.get::<_, i64>(2).to_string(),
                    r.get::<_, String>(3),
                    r.get::<_, Option<bool>>(4)
                        .map_or_else(|| "-".into(), |l| if l { "yes" } else { "no" }.into()),
                    r.get::<_, Option<String>>(5).unwrap_or_else(|| "-".into()),
                ]
            })
            .collect();
        let members: std::collections::BTreeSet<&String> = table
            .iter()
            .filter(|r| r[3] != "free")
            .map(|r| &r[1])
            .collect();
        text::table(&mut out, &header, &table).and_then(|_| {
            let count = |state: &str| table.iter().filter(|r| r[3] == state).count();
            writeln!(
                out,
                "{} partitions: {} owned and {} revoked among {} members, {} free",
                table.len(),
                count("owned"),
                count("revoked"),
                members.len(),
                count("free")
            )
        })
    };
    let _ = printed.and_then(|_| out.flush()); // (an error: the reader went away, | head)
    0
}

fn print_table(
    out: &mut impl Write,
    rows: &[tokio_postgres::Row],
    shorten: bool,
    summary: bool,
) -> std::io::Result<()> {
    let cell = |v: String| {
        let shown = text::shown(&v);
        if shorten {
            shortened(&shown)
        } else {
            shown
        }
    };
    let header = ["KEY", "STATE", "HOLDER", "TERM", "REMAINING", "EXPIRES_AT"];
    let table: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            (0..6)
                .map(|i| match i {
                    3 => r.get::<_, i64>(i).to_string(),
                    0 | 2 => r
                        .get::<_, Option<String>>(i)
                        .map_or_else(|| "-".into(), cell),
                    _ => r
                        .get::<_, Option<String>>(i)
                        .map_or_else(|| "-".into(), |v| text::shown(&v)),
                })
                .collect()
        })
        .collect();
    text::table(out, &header, &table)?;
    if summary {
        let count = |state: &str| table.iter().filter(|r| r[1] == state).count();
        writeln!(
            out,
            "{} leases: {} held, {} lapsed, {} vacant",
            table.len(),
            count("held"),
            count("lapsed"),
            count("vacant")
        )?;
    }
    Ok(())
}

/// `text` cut to WIDEST characters, the last one `…`.
pub fn shortened(text: &str) -> String {
    text::cut(text, WIDEST)
}

/// One JSON line per announcement on the `leaderlock` channel (only those
/// for `key` when given), until interrupted or the connection ends. Any
/// role may notify on the channel: a payload that is not a well-formed
/// announcement is not printed; a line on stderr says one was dropped.
/// (A well-formed one is still only what someone said: `status` shows what
/// the server holds.)
pub async fn watch(dsn: Option<&str>, key: Option<String>) -> i32 {
    let (client, mut payloads) = match connect(dsn).await {
        Ok(c) => c,
        Err(code) => return code,
    };
    if let Err(e) = client
        .batch_execute(leaderlock_client::sql::LISTEN_ANNOUNCEMENTS)
        .await
    {
        return db_error(&client, e).await;
    }
    let mut out = std::io::stdout().lock();
    while let Some(payload) = payloads.recv().await {
        let Some(value) = Announcement::well_formed(&payload) else {
            say(&format!(
                "dropped a notification on the leaderlock channel that is not an announcement ({} bytes)",
                payload.len()
            ));
            continue;
        };
        if key.as_ref().is_some_and(|k| value["key"] != k.as_str()) {
            continue;
        }
        if writeln!(out, "{}", text::json_line(&value))
            .and_then(|_| out.flush())
            .is_err()
        {
            return 0; // reader went away (| head)
        }
    }
    say("connection lost");
    exit::UNREACHABLE
}

#[cfg(test)]
mod tests {
    #[test]
    fn long_names_are_shortened_to_the_widest_column() {
        assert_eq!(super::shortened("short"), "short");
        let long = "k".repeat(255);
        let cut = super::shortened(&long);
        assert_eq!(cut.chars().count(), super::WIDEST);
        assert!(cut.ends_with('…'));
    }
}
