//! Following the history of transitions (contract 23): a
//! [`HistoryWatcher`] delivers every transition after a position once, in
//! position order, and when its connection is lost it connects again and
//! goes on after the last one it read, so nothing is missed or repeated.
//!
//! The server numbers transitions in commit order once they commit, and
//! says so on channel `leaderlock_history`. Any role may notify there: a
//! notification only makes the watcher read `le_history` now (at most
//! every [`MIN_READ_GAP`]); what it delivers is what the server returns. It
//! also reads every poll interval, in case a notification is lost.
//!
//! Where no worker serves the database (the portable edition, or a library
//! that is not preloaded) nothing numbers transitions but
//! `le_expire_lapsed()`: the watcher calls it before each read (which also
//! vacates lapsed leases, as clients there do anyway), and also takes the
//! `leaderlock` channel's announcements as hints.
use std::collections::VecDeque;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::mpsc;
use tokio::time::{sleep, timeout, Instant};
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::Notification;

use crate::config::{forward_notifications, ConnectConfig};
use crate::db::Db;
use crate::error::Error;
use crate::sql;

pub use crate::error::PRUNED;

/// Rows read per call.
const PAGE: i32 = 1000;

/// Least time between two reads, however many notifications arrive.
pub const MIN_READ_GAP: Duration = Duration::from_millis(50);

/// Longest a connection attempt or a read may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// Wait before connecting again: doubles from the first to the last.
const BACKOFF: (Duration, Duration) = (Duration::from_millis(100), Duration::from_secs(5));

/// One transition, as the history holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct Transition {
    /// Only grows, in commit order: resume after it.
    pub position: i64,
    /// When it happened (the server's lease clock).
    pub at: DateTime<Utc>,
    /// `acquired`, `released`, `expired`, `proclaimed`, `run_claimed`,
    /// `run_finished` or `run_missed`.
    pub event: String,
    /// The lease's key, or the run's job.
    pub key: Option<String>,
    pub holder: Option<String>,
    pub term: Option<i64>,
    /// The role whose call made it; None for the server's worker.
    pub role: Option<String>,
    /// The notification that announced it.
    pub payload: serde_json::Value,
}

/// Which transitions to follow.
#[derive(Debug, Clone, Default)]
pub struct HistoryFilter {
    /// One key only.
    pub key: Option<String>,
    /// Keys starting with this only.
    pub key_prefix: Option<String>,
}

/// Follows the history; see the module's documentation.
pub struct HistoryWatcher {
    db: ConnectConfig,
    filter: HistoryFilter,
    poll: Duration,
    /// The last position delivered (None: not started, from now on).
    delivered: Option<i64>,
    /// The last position read: rows up to it wait in `ready`.
    read: Option<i64>,
    ready: VecDeque<Transition>,
    conn: Option<(Db, mpsc::UnboundedReceiver<Notification>)>,
    /// No worker numbers the history: le_expire_lapsed() before each read.
    number_here: bool,
    backoff: Duration,
    last_read: Option<Instant>,
    reconnects: u64,
}

impl HistoryWatcher {
    /// A watcher of the transitions after `since`, or, None, of those
    /// numbered after its first connection. Connects at the first
    /// [`next`](Self::next).
    pub fn new(db: ConnectConfig, since: Option<i64>, filter: HistoryFilter) -> HistoryWatcher {
        let mut db = db;
        if db.pg.get_application_name().is_none() {
            db.pg.application_name("leaderlock watch");
        }
        HistoryWatcher {
            db,
            filter,
            poll: Duration::from_secs(1),
            delivered: since,
            read: since,
            ready: VecDeque::new(),
            conn: None,
            number_here: false,
            backoff: BACKOFF.0,
            last_read: None,
            reconnects: 0,
        }
    }

    /// Reads at least this often without a notification (default 1 s).
    pub fn poll_every(mut self, poll: Duration) -> HistoryWatcher {
        self.poll = poll.max(MIN_READ_GAP);
        self
    }

    /// The position up to which every transition the filter selects was
    /// delivered (the last one delivered, or, when nothing more was for the
    /// filter, the last position numbered): keep it to resume later (as
    /// `since`).
    pub fn position(&self) -> Option<i64> {
        self.delivered
    }

    /// How many times the connection was lost and made again.
    pub fn reconnects(&self) -> u64 {
        self.reconnects
    }

    /// The next transition, waiting for one. An error only for what
    /// retrying cannot heal: [`Error::Rejected`] with SQLSTATE [`PRUNED`]
    /// when the transitions after the position were deleted by the
    /// retention before they were read, or a refused argument. A lost
    /// connection is made again, with backoff, going on after the last
    /// transition read.
    pub async fn next(&mut self) -> Result<Transition, Error> {
        loop {
            if let Some(t) = self.ready.pop_front() {
                // The last of a short page: everything the filter selects
                // up to the position read is delivered.
                let through = match self.ready.is_empty() {
                    true => self.read.map_or(t.position, |r| r.max(t.position)),
                    false => t.position,
                };
                self.delivered = Some(through);
                return Ok(t);
            }
            match self.read_more().await {
                Ok(()) => {}
                Err(e @ (Error::Rejected { .. } | Error::Config(_))) => return Err(e),
                Err(Error::Unreachable(_)) => {
                    self.conn = None;
                    sleep(self.backoff).await;
                    self.backoff = (self.backoff * 2).min(BACKOFF.1);
                }
            }
        }
    }

    /// Reads the next page into `ready`, or, when there is none yet, waits
    /// for a notification or the poll interval.
    async fn read_more(&mut self) -> Result<(), Error> {
        if self.conn.is_none() {
            self.connect().await?;
        }
        if let Some(at) = self.last_read {
            let next = at + MIN_READ_GAP;
            if Instant::now() < next {
                sleep(next - Instant::now()).await;
            }
        }
        self.last_read = Some(Instant::now());
        let (client, hints) = self.conn.as_mut().expect("connected above");
        let after = self.read.unwrap_or(0);
        let page = PAGE;
        if self.number_here {
            timeout(CALL_TIMEOUT, client.query_typed(sql::EXPIRE_LAPSED, &[]))
                .await
                .map_err(|_| Error::Unreachable("numbering the history timed out".into()))?
                .map_err(|e| Error::from_pg(&e))?;
        }
        let params: [(&(dyn ToSql + Sync), Type); 4] = [
            (&after, Type::INT8),
            (&self.filter.key, Type::TEXT),
            (&self.filter.key_prefix, Type::TEXT),
            (&page, Type::INT4),
        ];
        let rows = timeout(CALL_TIMEOUT, client.query_typed(sql::HISTORY, &params))
            .await
            .map_err(|_| Error::Unreachable("reading the history timed out".into()))?
            .map_err(|e| Error::from_pg(&e))?;
        let head: i64 = rows.first().map_or(0, |r| r.get(8));
        let transitions: Vec<_> = rows
            .into_iter()
            .filter(|r| r.get::<_, Option<i64>>(0).is_some())
            .collect();
        if transitions.len() < PAGE as usize && head > after {
            // A short page: nothing more up to `head` is for this filter, so
            // a watcher of a quiet key is not passed by the retention.
            self.read = Some(head);
            if transitions.is_empty() && self.ready.is_empty() {
                self.delivered = Some(head);
            }
        }
        let rows = transitions;
        if rows.is_empty() {
            // Nothing new: wait for a hint, or poll.
            tokio::select! {
                hint = hints.recv() => if hint.is_none() {
                    return Err(Error::Unreachable("connection lost".into()));
                },
                _ = sleep(self.poll) => {}
            }
            // Hints that came meanwhile ask for the same read.
            while hints.try_recv().is_ok() {}
            return Ok(());
        }
        self.backoff = BACKOFF.0;
        for row in rows {
            let payload: String = row.get(7);
            let t = Transition {
                position: row.get(0),
                at: row.get(1),
                event: row.get(2),
                key: row.get(3),
                holder: row.get(4),
                term: row.get(5),
                role: row.get(6),
                payload: serde_json::from_str(&payload).unwrap_or(serde_json::Value::Null),
            };
            self.read = Some(self.read.map_or(t.position, |r| r.max(t.position)));
            self.ready.push_back(t);
        }
        Ok(())
    }

    async fn connect(&mut self) -> Result<(), Error> {
        let (client, messages) = timeout(CALL_TIMEOUT, self.db.connect())
            .await
            .map_err(|_| Error::Unreachable("connecting timed out".into()))?
            .map_err(|e| Error::from_pg(&e))?;
        // Hints; closed when the connection is gone: the watcher then knows.
        let rx = forward_notifications(messages, |n| {
            n.channel() == sql::HISTORY_CHANNEL || n.channel() == sql::CHANNEL
        });
        let client = timeout(CALL_TIMEOUT, Db::attach(client, self.db.schema()))
            .await
            .map_err(|_| Error::Unreachable("connecting timed out".into()))??;
        let call = async {
            let worker: bool = client.query_one(sql::WORKER_SERVES, &[]).await?.get(0);
            client
                .batch_execute(if worker {
                    sql::LISTEN_HISTORY
                } else {
                    sql::LISTEN_HISTORY_AND_CHANGES
                })
                .await?;
            let start = if self.read.is_none() {
                let row = client.query_one(sql::HISTORY_POSITION, &[]).await?;
                Some(row.get::<_, i64>(0))
            } else {
                None
            };
            Ok::<_, tokio_postgres::Error>((worker, start))
        };
        let (worker, start) = timeout(CALL_TIMEOUT, call)
            .await
            .map_err(|_| Error::Unreachable("starting to listen timed out".into()))?
            .map_err(|e| Error::from_pg(&e))?;
        self.number_here = !worker;
        if let Some(start) = start {
            self.read = Some(start);
            self.delivered = Some(start);
        }
        if self.last_read.is_some() {
            self.reconnects += 1;
        }
        self.conn = Some((client, rx));
        Ok(())
    }
}
