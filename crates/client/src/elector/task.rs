//! The elector's task: the loop that campaigns, renews, releases and
//! tells, one per `Elector` (`super`), holding the connection.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::{sleep_until, timeout_at, Instant};
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::Notification;

use crate::config::{forward_notifications, random_hex, ConnectConfig, ElectorConfig};
use crate::db::Db;
use crate::error::{self, Error};
use crate::payload::Announcement;
use crate::sql;

use super::{Command, Event, Leadership, StopReason, Watchdog};

/// The connection, with its notifications forwarded by the task that
/// drives it.
struct Conn {
    client: Db,
    notifications: mpsc::UnboundedReceiver<Notification>,
    /// A worker serves the database (le_capabilities).
    worker: bool,
}

/// A held lease inside the task.
#[derive(Clone, Copy)]
struct Held {
    lease: Leadership,
    next_renewal: Instant,
}

/// Releases that heard no answer, by server, key and id: their term. Such a
/// release may still reach the server, so a campaign under the same id
/// sends it again, and hears an answer, before its first try: a try before
/// that would extend the very tenure the late release then ends, while this
/// process leads in it (docs/verification.md). Process-wide: a new Elector
/// may campaign under the id of one that ended.
static UNANSWERED: LazyLock<Mutex<HashMap<[String; 3], i64>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

pub(super) struct Task {
    watchdog: Watchdog,
    db: ConnectConfig,
    config: ElectorConfig,
    events: mpsc::UnboundedSender<Event>,
    leadership: watch::Sender<Option<Leadership>>,
    commands: mpsc::UnboundedReceiver<Command>,
    conn: Option<Conn>,
    probe_token: String,
    notifications_arrive: bool,
    /// What the last connection said of the worker (None before any).
    worker: Option<bool>,
    /// The server has no le_expire_lapsed (compiled before 0.5.0).
    no_expire_lapsed: bool,
    disconnected: bool,
    /// When the last acquire or renewal started.
    last_call: Instant,
    /// The last attempt met the key held with another number of slots.
    slots_differ: bool,
    /// Where an unanswered release of this elector is kept in `UNANSWERED`:
    /// server, key, id.
    release_slot: [String; 3],
}

enum Wake {
    Timer,
    Command(Option<Command>),
    Notification(Option<Notification>),
}

impl Task {
    pub(super) fn new(
        watchdog: Watchdog,
        db: ConnectConfig,
        config: ElectorConfig,
        (events, leadership, commands): (
            mpsc::UnboundedSender<Event>,
            watch::Sender<Option<Leadership>>,
            mpsc::UnboundedReceiver<Command>,
        ),
        release_slot: [String; 3],
    ) -> Task {
        Task {
            watchdog,
            db,
            config,
            events,
            leadership,
            commands,
            conn: None,
            probe_token: random_hex(8),
            notifications_arrive: false,
            worker: None,
            no_expire_lapsed: false,
            disconnected: false,
            last_call: Instant::now(),
            slots_differ: false,
            release_slot,
        }
    }

    pub(super) async fn run(mut self) {
        let mut held: Option<Held> = None;
        let mut campaigning = true;
        let mut next_attempt = Instant::now();
        loop {
            let now = Instant::now();
            if let Some(h) = held {
                if now >= h.lease.deadline {
                    self.stop(h.lease.term, StopReason::Deadline);
                    held = None;
                    campaigning = self.config.campaign_again;
                    next_attempt = now;
                }
            }
            let wake_at = match (held, campaigning) {
                (Some(h), _) => h.next_renewal.min(h.lease.deadline),
                (None, true) => next_attempt,
                (None, false) => now + Duration::from_secs(3600),
            };
            self.watchdog.set(wake_at);
            match self.wait(wake_at).await {
                Wake::Timer => {}
                Wake::Command(None) => return self.finish(held, None).await,
                Wake::Command(Some(Command::Shutdown(reply))) => {
                    return self.finish(held, Some(reply)).await
                }
                Wake::Command(Some(Command::Resign)) => {
                    if let Some(h) = held.take() {
                        self.release(h.lease.deadline, h.lease.term).await;
                        self.stop(h.lease.term, StopReason::Resigned);
                    }
                    campaigning = self.config.campaign_again;
                    next_attempt = Instant::now();
                    continue;
                }
                Wake::Notification(None) => {
                    // The connection ended: reconnect at the next call.
                    self.lost_connection(Error::Unreachable("connection closed".into()));
                    next_attempt = next_attempt.min(Instant::now() + self.config.retry_every);
                    if let Some(h) = held.as_mut() {
                        h.next_renewal =
                            h.next_renewal.min(Instant::now() + self.config.retry_every);
                    }
                    continue;
                }
                Wake::Notification(Some(n)) => {
                    // A hint, never authority: any role may send one. It only
                    // brings the next call forward; what the server answers
                    // decides. Hints bring calls forward at most every
                    // HINT_FLOOR, so a flood of them cannot flood the server.
                    let soon = self.last_call + HINT_FLOOR;
                    match self.heard(&n) {
                        Heard::Freed if held.is_none() => {
                            next_attempt = next_attempt.min(soon.max(Instant::now()))
                        }
                        Heard::OtherHolder { term } => {
                            if let Some(h) = held.as_mut() {
                                if term > h.lease.term {
                                    h.next_renewal = h.next_renewal.min(soon.max(Instant::now()));
                                }
                            }
                        }
                        _ => {}
                    }
                    continue;
                }
            }
            let now = Instant::now();
            if let Some(h) = held {
                if now >= h.next_renewal && now < h.lease.deadline {
                    held = match self.renew(h).await {
                        Ok(Some(renewed)) => Some(renewed),
                        Ok(None) => {
                            self.stop(h.lease.term, StopReason::Refused);
                            campaigning = self.config.campaign_again;
                            next_attempt = Instant::now() + self.poll_every();
                            None
                        }
                        Err(e @ Error::Unreachable(_)) => {
                            self.lost_connection(e);
                            Some(Held {
                                next_renewal: Instant::now() + self.config.retry_every,
                                ..h
                            })
                        }
                        Err(e) => {
                            self.stop(h.lease.term, StopReason::Refused);
                            return self.fail(e);
                        }
                    };
                }
            } else if campaigning && now >= next_attempt {
                match self.try_acquire().await {
                    Ok(Some(lease)) => {
                        let renew_at = lease.deadline + self.config.margin - self.config.ttl
                            + self.config.renew_every;
                        held = Some(Held {
                            lease,
                            next_renewal: renew_at,
                        });
                        self.leadership.send_replace(Some(lease));
                        self.emit(Event::Started(lease));
                    }
                    // A ranked candidate waited in the call: at once again
                    // (unless the server refused it at once: slots differ).
                    Ok(None) if self.config.priority != 0 && !self.slots_differ => {
                        next_attempt = Instant::now()
                    }
                    Ok(None) => next_attempt = Instant::now() + self.poll_every(),
                    Err(e @ Error::Unreachable(_)) => {
                        self.lost_connection(e);
                        next_attempt = Instant::now() + self.config.retry_every;
                    }
                    Err(e) => return self.fail(e),
                }
            }
        }
    }

    /// Sleeps until `at`, a command, or a notification, whichever first.
    async fn wait(&mut self, at: Instant) -> Wake {
        let (conn, commands) = (&mut self.conn, &mut self.commands);
        let notifications = async {
            match conn.as_mut() {
                Some(c) => c.notifications.recv().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            c = commands.recv() => Wake::Command(c),
            n = notifications => Wake::Notification(n),
            _ = sleep_until(at) => Wake::Timer,
        }
    }

    fn poll_every(&self) -> Duration {
        self.config
            .poll_every
            .unwrap_or(if self.worker == Some(false) {
                // Nobody announces an expiry: the try itself finds it.
                no_worker_poll_every(self.config.ttl)
            } else if self.notifications_arrive {
                (self.config.ttl / 2).max(Duration::from_secs(1))
            } else {
                Duration::from_secs(1)
            })
    }

    fn emit(&self, event: Event) {
        let _ = self.events.send(event);
    }

    fn stop(&self, term: i64, reason: StopReason) {
        self.leadership.send_replace(None);
        self.emit(Event::Stopped { term, reason });
    }

    fn fail(&self, error: Error) {
        self.leadership.send_replace(None);
        self.emit(Event::Failed { error });
    }

    fn lost_connection(&mut self, error: Error) {
        self.conn = None;
        if !self.disconnected {
            self.disconnected = true;
            self.emit(Event::Disconnected { error });
        }
    }

    async fn finish(mut self, held: Option<Held>, reply: Option<oneshot::Sender<bool>>) {
        let mut released = false;
        if let Some(h) = held {
            released = self
                .release(Instant::now() + self.call_timeout(), h.lease.term)
                .await;
            self.stop(h.lease.term, StopReason::Shutdown);
        }
        if let Some(reply) = reply {
            let _ = reply.send(released);
        }
    }

    /// How long after a call's send time its answer lets this process lead
    /// (`leaderlock_protocol::window`: from the send, never the reply).
    fn window(&self) -> Duration {
        let window = leaderlock_protocol::window(
            crate::config::micros(self.config.ttl),
            crate::config::micros(self.config.margin),
        );
        Duration::from_micros(window.max(0) as u64)
    }

    fn call_timeout(&self) -> Duration {
        (self.config.ttl / 3).max(Duration::from_millis(100))
    }

    /// How long one le_acquire of a ranked candidate waits: well inside a
    /// call's timeout, and short enough that a shutdown is not held up.
    fn ranked_wait(&self) -> Duration {
        (self.call_timeout() / 2).min(Duration::from_secs(1))
    }

    /// What a notification means for this elector.
    fn heard(&mut self, n: &Notification) -> Heard {
        if n.channel() == sql::PROBE_CHANNEL {
            if n.payload() == self.probe_token && !self.notifications_arrive {
                self.notifications_arrive = true;
                self.emit(Event::NotificationsArrive);
            }
            return Heard::Nothing;
        }
        match Announcement::parse(n.payload()) {
            Some(a) if a.key == self.config.key && a.frees_key() => Heard::Freed,
            Some(a) if a.key == self.config.key && a.event == "acquired" => match a.holder {
                Some(h) if h != self.config.id => Heard::OtherHolder { term: a.term },
                _ => Heard::Nothing,
            },
            _ => Heard::Nothing,
        }
    }

    /// The connection, opened (with LISTEN and a probe) if there is none.
    async fn client(&mut self, by: Instant) -> Result<&Db, Error> {
        if self.conn.is_none() {
            let conn = timeout_at(by, self.connect())
                .await
                .map_err(|_| Error::Unreachable("timed out connecting".into()))??;
            if self.worker != Some(conn.worker) {
                self.worker = Some(conn.worker);
                self.emit(Event::Served {
                    worker: conn.worker,
                    poll_every: self.poll_every(),
                });
            }
            self.conn = Some(conn);
            self.disconnected = false;
            self.emit(Event::Connected);
        }
        Ok(&self.conn.as_ref().expect("connected above").client)
    }

    async fn connect(&self) -> Result<Conn, Error> {
        let mut db = self.db.clone();
        if db.pg.get_application_name().is_none() {
            db.pg.application_name("leaderlock elector");
        }
        let (client, messages) = db.connect().await.map_err(classify)?;
        // Closed when the connection is gone: the elector then knows.
        let rx = forward_notifications(messages, |_| true);
        let client = Db::attach(client, db.schema()).await?;
        client.batch_execute(sql::LISTEN).await.map_err(classify)?;
        let token: &(dyn ToSql + Sync) = &self.probe_token;
        client
            .query_typed(sql::PROBE, &[(token, Type::TEXT)])
            .await
            .map_err(classify)?;
        let worker = match client.query_typed(sql::WORKER_SERVES, &[]).await {
            Ok(rows) => rows[0].get::<_, bool>(0),
            Err(e) if e.code() == Some(&SqlState::UNDEFINED_FUNCTION) => {
                match client.query_typed(sql::WORKER_RUNNING, &[]).await {
                    Ok(rows) => rows[0].get::<_, bool>(0),
                    Err(e) => return Err(error::explain(client.client(), &e).await),
                }
            }
            Err(e) => return Err(classify(e)),
        };
        Ok(Conn {
            client,
            notifications: rx,
            worker,
        })
    }

    /// One attempt: Some(lease) when won.
    async fn try_acquire(&mut self) -> Result<Option<Leadership>, Error> {
        let start = Instant::now();
        self.last_call = start;
        let by = start + self.call_timeout();
        let (key, id, ttl) = (
            self.config.key.clone(),
            self.config.id.clone(),
            self.config.ttl.as_secs_f64(),
        );
        let unanswered = UNANSWERED
            .lock()
            .expect("not poisoned")
            .get(&self.release_slot)
            .copied();
        if let Some(term) = unanswered {
            // It may still arrive: send it again, and hear the answer, first.
            let client = self.client(by).await?;
            let args: [(&(dyn ToSql + Sync), Type); 3] =
                [(&key, Type::TEXT), (&id, Type::TEXT), (&term, Type::INT8)];
            let released = call_named(client, by, sql::RELEASE, &args)
                .await
                .map_err(|_| Error::Unreachable("release timed out".into()))?
                .map_err(classify)?;
            if !released {
                // Its row was locked, or the tenure is gone: the server says.
                let holds = timeout_at(by, client.query_typed(sql::HOLDS, &args))
                    .await
                    .map_err(|_| Error::Unreachable("release timed out".into()))?;
                match holds {
                    Ok(rows) if rows[0].get::<_, bool>(0) => return Ok(None), // no try yet
                    Ok(_) => {}
                    Err(e) if e.code() == Some(&SqlState::UNDEFINED_FUNCTION) => {} // before 0.5.0
                    Err(e) => return Err(classify(e)),
                }
            }
            let mut unanswered = UNANSWERED.lock().expect("not poisoned");
            if unanswered.get(&self.release_slot) == Some(&term) {
                unanswered.remove(&self.release_slot); // not one recorded meanwhile
            }
        }
        if self.worker == Some(false) && !self.no_expire_lapsed {
            // No worker: announce what lapsed (the dead leader's lease
            // among them) before trying, so that every listener hears it.
            let client = self.client(by).await?;
            match timeout_at(by, client.query_typed(sql::EXPIRE_LAPSED, &[])).await {
                Err(_) => return Err(Error::Unreachable("le_expire_lapsed timed out".into())),
                // Refused by the server (or missing before 0.5.0): the try
                // below takes a lapsed lease anyway, only unannounced.
                Ok(Err(e)) if e.code().is_some() => self.no_expire_lapsed = true,
                Ok(Err(e)) => return Err(classify(e)),
                Ok(Ok(_)) => {}
            }
        }
        let slots = i32::try_from(self.config.slots).unwrap_or(i32::MAX);
        let priority = self.config.priority;
        let wait = self.ranked_wait().as_secs_f64();
        let client = self.client(by).await?;
        let won = timeout_at(by, async {
            let row = if priority != 0 {
                client
                    .query_typed(
                        sql::ACQUIRE_RANKED,
                        &[
                            (&key, Type::TEXT),
                            (&id, Type::TEXT),
                            (&ttl, Type::FLOAT8),
                            (&wait, Type::FLOAT8),
                            (&slots, Type::INT4),
                            (&priority, Type::INT4),
                        ],
                    )
                    .await?
            } else if slots > 1 {
                client
                    .query_typed(
                        sql::TRY_ACQUIRE_SLOTS,
                        &[
                            (&key, Type::TEXT),
                            (&id, Type::TEXT),
                            (&ttl, Type::FLOAT8),
                            (&slots, Type::INT4),
                        ],
                    )
                    .await?
            } else {
                client
                    .query_typed(
                        sql::TRY_ACQUIRE,
                        &[(&key, Type::TEXT), (&id, Type::TEXT), (&ttl, Type::FLOAT8)],
                    )
                    .await?
            };
            if !row[0].get::<_, bool>(0) {
                if slots > 1 {
                    // Every slot taken: no one holder to name.
                    return Ok::<_, tokio_postgres::Error>(Err(None));
                }
                let holder = client
                    .query_typed(sql::LEADER, &[(&key, Type::TEXT)])
                    .await?;
                return Ok(Err(holder[0].get::<_, Option<String>>(0)));
            }
            let term_of = if slots > 1 {
                sql::TERM_OF_SLOT
            } else {
                sql::TERM_OF
            };
            let term = client
                .query_typed(term_of, &[(&key, Type::TEXT), (&id, Type::TEXT)])
                .await?;
            // No row: lost already (never seen in practice); counts as refused.
            Ok(term.first().map(|r| r.get::<_, i64>(0)).ok_or(None))
        })
        .await
        .map_err(|_| Error::Unreachable("acquire timed out".into()))?;
        let won = match won {
            Ok(won) => won,
            // The key is held with another number of slots: not ours now,
            // and not for ever (the rival tenures end): a refusal.
            Err(e) if error::slots_differ(&e) => {
                if !self.slots_differ {
                    self.slots_differ = true;
                    self.emit(Event::SlotsDiffer {
                        message: error::describe_error(&e),
                    });
                }
                return Ok(None);
            }
            Err(e) => return Err(classify(e)),
        };
        self.slots_differ = false;
        match won {
            Ok(term) => Ok(Some(Leadership {
                term,
                deadline: start + self.window(),
            })),
            Err(holder) => {
                self.emit(Event::Refused { holder });
                Ok(None)
            }
        }
    }

    /// One renewal; Ok(None) when the server refused it.
    async fn renew(&mut self, h: Held) -> Result<Option<Held>, Error> {
        let start = Instant::now();
        self.last_call = start;
        // Never wait past the deadline: the caller must learn of it then.
        let by = (start + self.call_timeout()).min(h.lease.deadline);
        let (key, id, ttl) = (
            self.config.key.clone(),
            self.config.id.clone(),
            self.config.ttl.as_secs_f64(),
        );
        let still_ours_sql = if self.config.slots > 1 {
            sql::STILL_OURS_SLOT
        } else {
            sql::STILL_OURS
        };
        let client = self.client(by).await?;
        let args: [(&(dyn ToSql + Sync), Type); 4] = [
            (&key, Type::TEXT),
            (&id, Type::TEXT),
            (&ttl, Type::FLOAT8),
            (&h.lease.term, Type::INT8),
        ];
        let renewed = call_named(client, by, sql::RENEW, &args)
            .await
            .map_err(|_| Error::Unreachable("renewal timed out".into()))?
            .map_err(classify)?;
        if !renewed {
            // Refused: lost, or only locked? The server's own record says.
            let term = h.lease.term;
            let still_ours = timeout_at(
                by,
                client.query_typed(
                    still_ours_sql,
                    &[(&key, Type::TEXT), (&id, Type::TEXT), (&term, Type::INT8)],
                ),
            )
            .await;
            if !matches!(&still_ours, Ok(Ok(rows)) if rows.len() == 1 && rows[0].get::<_, bool>(0))
            {
                return Ok(None);
            }
            self.emit(Event::RenewalDeferred(h.lease));
            return Ok(Some(Held {
                next_renewal: Instant::now() + self.config.retry_every,
                ..h
            }));
        }
        let lease = Leadership {
            term: h.lease.term,
            deadline: start + self.window(),
        };
        self.leadership.send_replace(Some(lease));
        self.emit(Event::Renewed(lease));
        Ok(Some(Held {
            lease,
            next_renewal: start + self.config.renew_every,
        }))
    }

    /// Releases the tenure of `term`; true when the server says it was ours.
    /// One that hears no answer is kept in `UNANSWERED`.
    async fn release(&mut self, by: Instant, term: i64) -> bool {
        let (key, id) = (self.config.key.clone(), self.config.id.clone());
        let args: [(&(dyn ToSql + Sync), Type); 3] =
            [(&key, Type::TEXT), (&id, Type::TEXT), (&term, Type::INT8)];
        let answer = match self.client(by).await {
            Ok(client) => call_named(client, by, sql::RELEASE, &args)
                .await
                .ok()
                .and_then(Result::ok),
            Err(_) => None,
        };
        answer.unwrap_or_else(|| {
            UNANSWERED
                .lock()
                .expect("not poisoned")
                .insert(self.release_slot.clone(), term);
            false
        })
    }
}

enum Heard {
    Nothing,
    Freed,
    /// Someone announced a tenure of another holder.
    OtherHolder {
        term: i64,
    },
}

/// The rule every leaderlock client shares (docs/clients.md, "Notifications
/// are hints"): a notification brings the next call forward, but never to
/// less than HINT_FLOOR after the start of the previous one; hints that
/// arrive meanwhile make that one call, and the first hint after a quiet
/// period is acted on at once. A flood of forged notifications cannot make
/// an elector call more than once per HINT_FLOOR.
const HINT_FLOOR: Duration = Duration::from_millis(10);

/// How often a candidate tries where no worker announces expiries: a
/// quarter of the ttl, between 100 ms and 1 s. A dead leader's lease is
/// taken over within that of its expiry.
pub fn no_worker_poll_every(ttl: Duration) -> Duration {
    (ttl / 4).clamp(Duration::from_millis(100), Duration::from_secs(1))
}

/// `sql::RENEW` or `sql::RELEASE`, naming the tenure's term (the last
/// argument), by `by`; on a schema before 0.5.0, which has no such
/// argument, without it. Its boolean answer.
async fn call_named(
    client: &Db,
    by: Instant,
    sql: &'static str,
    args: &[(&(dyn ToSql + Sync), Type)],
) -> Result<Result<bool, tokio_postgres::Error>, tokio::time::error::Elapsed> {
    let rows = match timeout_at(by, client.query_typed(sql, args)).await? {
        Err(e) if e.code() == Some(&SqlState::UNDEFINED_FUNCTION) => {
            let legacy = if sql == sql::RENEW {
                sql::RENEW_0_4
            } else {
                sql::RELEASE_0_4
            };
            timeout_at(by, client.query_typed(legacy, &args[..args.len() - 1])).await?
        }
        other => other,
    };
    Ok(rows.map(|rows| rows[0].get::<_, bool>(0)))
}

fn classify(e: tokio_postgres::Error) -> Error {
    Error::from_pg(&e)
}
