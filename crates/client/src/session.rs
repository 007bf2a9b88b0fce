//! Sessions (contract 21): one ttl for all the keys a process holds. A
//! [`Session`] opens one on the server, renews it every ttl/3 from a task
//! of its own on a connection of its own (one row written, however many
//! keys), and keeps a local deadline: the start of its last successful
//! renewal (or of the open) plus the ttl, less the clock margin. Every
//! [`SessionLease`] acquired under it is ours only while that deadline has
//! not passed, checked at the call ([`SessionLease::is_ours`]): a process
//! paused past it sees so on its first look, before any renewal answers.
//! A renewal the server refuses loses the session, and every key, for
//! good: open a new one.
//!
//! ```no_run
//! # async fn demo() -> Result<(), leaderlock_client::Error> {
//! use std::time::Duration;
//! use leaderlock_client::{pg_config_from_env, Session, SessionConfig};
//! let session = Session::open(pg_config_from_env(None)?, SessionConfig::new(Duration::from_secs(10))).await?;
//! if let Some(shard) = session.try_acquire("shard/7").await? {
//!     if shard.is_ours() { /* work on shard 7, fenced by shard.term */ }
//! }
//! session.close().await?;
//! # Ok(()) }
//! ```

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::{sleep, timeout, Instant};
use tokio_postgres::types::Type;

use crate::config::ConnectConfig;
use crate::db::Db;
use crate::error::{explain, Error};
use crate::sql;

/// Settings of a [`Session`].
#[derive(Debug, Clone)]
pub struct SessionConfig {
    /// The holder id of every key acquired under the session. Default:
    /// [`crate::default_id`].
    pub id: String,
    /// The session's ttl, renewed every ttl/3.
    pub ttl: Duration,
    /// After the session expires or its connection ends, its keys are not
    /// acquirable by anyone for this long (contract 21). Default 0.
    pub lock_delay: Duration,
    /// Its keys keep their values when vacated. Default false.
    pub keep_values: bool,
    /// Subtracted from the local deadline (as the elector's).
    pub margin: Duration,
}

impl SessionConfig {
    pub fn new(ttl: Duration) -> SessionConfig {
        SessionConfig {
            id: crate::default_id(),
            ttl,
            lock_delay: Duration::ZERO,
            keep_values: false,
            margin: Duration::from_micros(leaderlock_protocol::margin(
                i64::try_from(ttl.as_micros()).unwrap_or(i64::MAX),
                leaderlock_protocol::CLOCK_RATE_BOUND_PPM,
            ) as u64),
        }
    }
}

/// What the session's renewer and its leases share.
#[derive(Debug)]
struct Shared {
    deadline: Mutex<Instant>,
    lost: AtomicBool,
}

impl Shared {
    fn is_alive(&self) -> bool {
        !self.lost.load(Ordering::SeqCst)
            && Instant::now() < *self.deadline.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lose(&self) {
        self.lost.store(true, Ordering::SeqCst);
    }
}

/// A key held under a [`Session`].
#[derive(Debug, Clone)]
pub struct SessionLease {
    pub key: String,
    /// The key's fencing term (`le_assert_leader(key, id, term)`).
    pub term: i64,
    shared: Arc<Shared>,
}

impl SessionLease {
    /// Whether this process may still act as the key's holder: its session
    /// is alive by the local deadline. Check right before every side
    /// effect (a timer alone misses a pause).
    pub fn is_ours(&self) -> bool {
        self.shared.is_alive()
    }
}

/// A session of the server, renewed in the background; see the module.
pub struct Session {
    config: SessionConfig,
    client: Db,
    handle: String,
    shared: Arc<Shared>,
    renewer: JoinHandle<()>,
}

async fn connect(db: &ConnectConfig, limit: Duration) -> Result<Db, Error> {
    let (client, mut messages) = timeout(limit, db.connect())
        .await
        .map_err(|_| Error::Unreachable("connecting timed out".into()))?
        .map_err(|e| Error::from_pg(&e))?;
    // The connection makes progress only while its messages are read.
    tokio::spawn(async move {
        use futures_util::StreamExt;
        while let Some(m) = messages.next().await {
            if m.is_err() {
                break;
            }
        }
    });
    timeout(limit, Db::attach(client, db.schema()))
        .await
        .map_err(|_| Error::Unreachable("connecting timed out".into()))?
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

impl Session {
    /// Opens a session of `config.id` for `config.ttl`.
    pub async fn open(db: ConnectConfig, config: SessionConfig) -> Result<Session, Error> {
        let limit = (config.ttl / 3).max(Duration::from_millis(100));
        let client = connect(&db, limit).await?;
        let sent = Instant::now();
        let row = timeout(
            limit,
            client.query_one(
                sql::OPEN_SESSION,
                &[
                    (&config.id, Type::TEXT),
                    (&secs(config.ttl), Type::FLOAT8),
                    (&secs(config.lock_delay), Type::FLOAT8),
                    (&config.keep_values, Type::BOOL),
                ],
            ),
        )
        .await
        .map_err(|_| Error::Unreachable("opening the session timed out".into()))?;
        let handle: String = match row {
            Ok(row) => row.get(0),
            Err(e) => return Err(explain(client.client(), &e).await),
        };
        let shared = Arc::new(Shared {
            deadline: Mutex::new(sent + config.ttl.saturating_sub(config.margin)),
            lost: AtomicBool::new(false),
        });
        let renewer = tokio::spawn(renew_loop(
            db.clone(),
            config.clone(),
            handle.clone(),
            shared.clone(),
        ));
        Ok(Session {
            config,
            client,
            handle,
            shared,
            renewer,
        })
    }

    /// The session's handle (a uuid).
    pub fn handle(&self) -> &str {
        &self.handle
    }

    /// The id that holds every key of the session.
    pub fn id(&self) -> &str {
        &self.config.id
    }

    /// Whether the session is alive by its local deadline (and was not
    /// refused a renewal).
    pub fn is_alive(&self) -> bool {
        self.shared.is_alive()
    }

    /// le_try_acquire_in: the key, held under this session, or None.
    pub async fn try_acquire(&self, key: &str) -> Result<Option<SessionLease>, Error> {
        self.acquire_with(sql::TRY_ACQUIRE_IN, key, None, 1).await
    }

    /// le_acquire_in: waits up to `wait` for the key (None when not taken).
    pub async fn acquire(&self, key: &str, wait: Duration) -> Result<Option<SessionLease>, Error> {
        self.acquire_with(sql::ACQUIRE_IN, key, Some(wait), 1).await
    }

    /// le_try_acquire_in of a key of `slots` holders at once (contract 17):
    /// one of its slots, held under this session, or None when all are
    /// taken. Every holder of the key asks for the same number of slots.
    pub async fn try_acquire_slot(
        &self,
        key: &str,
        slots: u32,
    ) -> Result<Option<SessionLease>, Error> {
        self.acquire_with(sql::TRY_ACQUIRE_IN, key, None, slots)
            .await
    }

    /// le_acquire_in of a key of `slots` holders: waits up to `wait` for a
    /// free slot.
    pub async fn acquire_slot(
        &self,
        key: &str,
        slots: u32,
        wait: Duration,
    ) -> Result<Option<SessionLease>, Error> {
        self.acquire_with(sql::ACQUIRE_IN, key, Some(wait), slots)
            .await
    }

    async fn acquire_with(
        &self,
        statement: &str,
        key: &str,
        wait: Option<Duration>,
        slots: u32,
    ) -> Result<Option<SessionLease>, Error> {
        if !self.is_alive() {
            return Ok(None);
        }
        // (the server refuses a number it does not admit: 22023)
        let slots = i32::try_from(slots).unwrap_or(i32::MAX);
        let limit =
            (self.config.ttl / 3).max(Duration::from_millis(100)) + wait.unwrap_or_default();
        let key_owned = key.to_owned();
        let wait_secs = wait.map_or(0.0, secs);
        let asked = timeout(limit, async {
            let taken: bool = match wait {
                None => {
                    self.client
                        .query_one(
                            statement,
                            &[
                                (&self.handle, Type::TEXT),
                                (&key_owned, Type::TEXT),
                                (&slots, Type::INT4),
                            ],
                        )
                        .await?
                }
                Some(_) => {
                    self.client
                        .query_one(
                            statement,
                            &[
                                (&self.handle, Type::TEXT),
                                (&key_owned, Type::TEXT),
                                (&wait_secs, Type::FLOAT8),
                                (&slots, Type::INT4),
                            ],
                        )
                        .await?
                }
            }
            .get(0);
            if !taken {
                return Ok(None);
            }
            // Held under our live session: nobody else can change its term.
            let row = self
                .client
                .query_opt(
                    sql::TERM_IN_SESSION,
                    &[(&key_owned, Type::TEXT), (&self.handle, Type::TEXT)],
                )
                .await?;
            Ok::<_, tokio_postgres::Error>(row.map(|r| r.get::<_, i64>(0)))
        })
        .await
        .map_err(|_| Error::Unreachable("the acquisition timed out".into()))?;
        let term = match asked {
            Ok(t) => t,
            Err(e) => return Err(explain(self.client.client(), &e).await),
        };
        // Ours from the answer on, until the session's deadline.
        Ok(term.filter(|_| self.is_alive()).map(|term| SessionLease {
            key: key.to_owned(),
            term,
            shared: self.shared.clone(),
        }))
    }

    /// le_release of one key of the session (the session goes on).
    pub async fn release(&self, lease: &SessionLease) -> Result<bool, Error> {
        match self
            .client
            .query_one(
                sql::RELEASE,
                &[
                    (&lease.key, Type::TEXT),
                    (&self.config.id, Type::TEXT),
                    (&lease.term, Type::INT8),
                ],
            )
            .await
        {
            Ok(row) => Ok(row.get(0)),
            Err(e) => Err(explain(self.client.client(), &e).await),
        }
    }

    /// Closes the session: every key released on the server, in one
    /// transaction. Lost here first, whatever the answer.
    pub async fn close(self) -> Result<bool, Error> {
        self.shared.lose();
        self.renewer.abort();
        match self
            .client
            .query_one(sql::CLOSE_SESSION, &[(&self.handle, Type::TEXT)])
            .await
        {
            Ok(row) => Ok(row.get(0)),
            Err(e) => Err(explain(self.client.client(), &e).await),
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.shared.lose();
        self.renewer.abort();
    }
}

/// Renews the session every ttl/3 on a connection of its own until the
/// server refuses a renewal (lost for good) or the session is dropped.
async fn renew_loop(db: ConnectConfig, config: SessionConfig, handle: String, shared: Arc<Shared>) {
    let every = (config.ttl / 3).max(Duration::from_millis(10));
    let mut client: Option<Db> = None;
    loop {
        sleep(every).await;
        if shared.lost.load(Ordering::SeqCst) {
            return;
        }
        let sent = Instant::now();
        if client.is_none() {
            client = connect(&db, every).await.ok();
        }
        let Some(c) = client.as_ref() else {
            continue;
        };
        match timeout(
            every,
            c.query_one(sql::RENEW_SESSION, &[(&handle, Type::TEXT)]),
        )
        .await
        {
            Ok(Ok(row)) if row.get::<_, bool>(0) => {
                let mut deadline = shared.deadline.lock().unwrap_or_else(|e| e.into_inner());
                *deadline = sent + config.ttl.saturating_sub(config.margin);
            }
            Ok(Ok(_)) => {
                // Refused: lapsed, closed, or not ours. For good.
                shared.lose();
                return;
            }
            // Unanswered: the deadline stands; a new connection next time.
            _ => client = None,
        }
    }
}
