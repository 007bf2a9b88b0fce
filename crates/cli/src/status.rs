//! `leaderlock status` and `leaderlock watch`.
use futures_util::StreamExt;
use leaderlock_client::{pg_config_from_env, Announcement};
use tokio_postgres::types::Type;
use tokio_postgres::{AsyncMessage, Client, NoTls};

use crate::exit;

async fn connect(
    dsn: Option<&str>,
) -> Result<(Client, tokio::sync::mpsc::UnboundedReceiver<String>), i32> {
    let config = pg_config_from_env(dsn).map_err(|e| {
        eprintln!("leaderlock: {e}");
        exit::USAGE
    })?;
    let (client, mut connection) = config.connect(NoTls).await.map_err(|e| {
        eprintln!("leaderlock: cannot connect: {e}");
        exit::UNREACHABLE
    })?;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(Ok(message)) = messages.next().await {
            if let AsyncMessage::Notification(n) = message {
                if n.channel() == leaderlock_client::sql::CHANNEL
                    && tx.send(n.payload().to_owned()).is_err()
                {
                    break;
                }
            }
        }
    });
    Ok((client, rx))
}

fn db_error(e: tokio_postgres::Error) -> i32 {
    match e.as_db_error() {
        Some(db) => {
            eprintln!(
                "leaderlock: {} (SQLSTATE {})",
                db.message(),
                db.code().code()
            );
            exit::REJECTED
        }
        None => {
            eprintln!("leaderlock: {e}");
            exit::UNREACHABLE
        }
    }
}

/// Prints the leases (one key, or all) as a table.
pub async fn status(dsn: Option<&str>, key: Option<String>) -> i32 {
    let (client, _) = match connect(dsn).await {
        Ok(c) => c,
        Err(code) => return code,
    };
    let rows = match client
        .query_typed(leaderlock_client::sql::STATUS, &[(&key, Type::TEXT)])
        .await
    {
        Ok(rows) => rows,
        Err(e) => return db_error(e),
    };
    let header = ["KEY", "STATE", "HOLDER", "TERM", "REMAINING", "EXPIRES_AT"];
    let table: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            (0..6)
                .map(|i| match i {
                    3 => r.get::<_, i64>(i).to_string(),
                    _ => r.get::<_, Option<String>>(i).unwrap_or_else(|| "-".into()),
                })
                .collect()
        })
        .collect();
    let widths: Vec<usize> = (0..6)
        .map(|i| {
            table
                .iter()
                .map(|r| r[i].chars().count())
                .chain([header[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let print = |cells: Vec<&str>| {
        let line: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        println!("{}", line.join("  ").trim_end());
    };
    print(header.to_vec());
    for r in &table {
        print(r.iter().map(String::as_str).collect());
    }
    if key.is_some() && table.is_empty() {
        eprintln!("leaderlock: no such key");
        return 1;
    }
    0
}

/// One JSON line per notification on the `leaderlock` channel (only those
/// for `key` when given), until interrupted or the connection ends.
pub async fn watch(dsn: Option<&str>, key: Option<String>) -> i32 {
    use std::io::Write;
    let (client, mut payloads) = match connect(dsn).await {
        Ok(c) => c,
        Err(code) => return code,
    };
    if let Err(e) = client
        .batch_execute(leaderlock_client::sql::LISTEN_ANNOUNCEMENTS)
        .await
    {
        return db_error(e);
    }
    let mut out = std::io::stdout().lock();
    while let Some(payload) = payloads.recv().await {
        if let Some(k) = &key {
            if Announcement::parse(&payload).is_none_or(|a| &a.key != k) {
                continue;
            }
        }
        if writeln!(out, "{payload}")
            .and_then(|_| out.flush())
            .is_err()
        {
            return 0; // reader went away (| head)
        }
    }
    eprintln!("leaderlock: connection lost");
    exit::UNREACHABLE
}
