//! Groups (contract 26): a member's share of a group's partitions, which
//! the server assigns. A [`Member`] joins (le_join: the first join makes
//! the group, every later one renews the membership and all its
//! partitions) every ttl/3 from a task of its own, then reads its
//! assignment (le_assignment), and tells what changed as [`MemberEvent`]s.
//! Every partition owned has the local deadline of the last round whose
//! assignment was read: the instant its join was sent + ttl, less the clock
//! margin. [`Member::owns`] checks it at each call: a process paused past it
//! sees so on its first look, whatever a timer did.
//!
//! A partition the server revokes comes as [`MemberEvent::Revoked`]: stop
//! work on it, drain, then [`Member::ack`] gives it back (its next owner
//! gets it at once; without an ack, at the group's drain budget). One gone
//! from the assignment, or whose deadline passed, comes as
//! [`MemberEvent::Lost`]: stop at once; nothing to give back.
//! Notifications of the group's changes for this member make the next
//! round come sooner (a hint: what counts is the assignment read), at most
//! once per [`MemberConfig::soonest`].
//!
//! ```no_run
//! # async fn demo() -> Result<(), leaderlock_client::Error> {
//! use std::time::Duration;
//! use leaderlock_client::{pg_config_from_env, Member, MemberConfig, MemberEvent};
//! let mut member = Member::start(pg_config_from_env(None)?, MemberConfig::new("orders", Duration::from_secs(10)));
//! while let Some(event) = member.next_event().await {
//!     match event {
//!         MemberEvent::Assigned { partition, term, .. } => { /* start work on it */ }
//!         MemberEvent::Revoked { partition, term } => { /* stop, drain */ member.ack(partition, term) }
//!         MemberEvent::Lost { partition, .. } => { /* stop at once */ }
//!         _ => {}
//!     }
//! }
//! # Ok(()) }
//! ```
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::time::{sleep_until, timeout_at, Instant};
use tokio_postgres::types::Type;
use tokio_postgres::Notification;

use crate::config::{forward_notifications, micros, ConnectConfig};
use crate::db::Db;
use crate::error::{explain, Error};
use crate::payload::Announcement;
use crate::sql;

/// Settings of a [`Member`].
#[derive(Debug, Clone)]
pub struct MemberConfig {
    pub group: String,
    /// The member's name in the group. Default: [`crate::default_id`].
    pub id: String,
    /// The membership's ttl, renewed every ttl/3.
    pub ttl: Duration,
    /// The group's partition count, for its first join (or its maker's
    /// change). None: as it is.
    pub partitions: Option<i32>,
    /// How long an owner has to give a revoked partition back, for the
    /// group's first join (or its maker's change). None: as it is.
    pub drain: Option<Duration>,
    /// Subtracted from the local deadline (as the elector's).
    pub margin: Duration,
    /// The shortest time between two rounds when notifications ask for
    /// one sooner. Default: ttl/30, at least 50 ms.
    pub soonest: Duration,
}

impl MemberConfig {
    pub fn new(group: impl Into<String>, ttl: Duration) -> MemberConfig {
        MemberConfig {
            group: group.into(),
            id: crate::default_id(),
            ttl,
            partitions: None,
            drain: None,
            margin: Duration::from_micros(leaderlock_protocol::margin(
                micros(ttl),
                leaderlock_protocol::CLOCK_RATE_BOUND_PPM,
            ) as u64),
            soonest: (ttl / 30).max(Duration::from_millis(50)),
        }
    }
}

/// What a member hears, in the order it happened.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum MemberEvent {
    /// A round's join and assignment were answered: every owned partition
    /// is ours until `deadline` (unless revoked or lost before).
    Renewed { deadline: Instant },
    /// `partition` is ours in `term` until `deadline` (moved by later
    /// `Renewed`s).
    Assigned {
        partition: i32,
        term: i64,
        deadline: Instant,
    },
    /// The server revoked `partition` (ours in `term`): stop work on it,
    /// drain, then [`Member::ack`] it.
    Revoked { partition: i32, term: i64 },
    /// `partition` is not ours any more (gone from the assignment, or its
    /// deadline passed): stop at once.
    Lost { partition: i32, term: i64 },
    /// A round failed to reach the server (the member goes on trying).
    Disconnected { error: Error },
    /// The server refused for good (another role's member, a bad name or
    /// count): the member has stopped; every partition was lost before.
    Failed { error: Error },
}

/// What the member's task and its handle share: the partitions owned and
/// the deadline they are owned until.
#[derive(Debug, Default)]
struct Owned {
    terms: BTreeMap<i32, i64>,
    deadline: Option<Instant>,
    /// leaderlock's schema, as the member's connection found it.
    schema: Option<String>,
}

enum Command {
    Ack(i32, i64),
    Leave(oneshot::Sender<Result<bool, Error>>),
}

/// A member of a group, renewed in the background; see the module.
pub struct Member {
    config: MemberConfig,
    owned: Arc<Mutex<Owned>>,
    events: mpsc::UnboundedReceiver<MemberEvent>,
    commands: mpsc::UnboundedSender<Command>,
}

impl Member {
    /// Starts the member's task: it joins at once, then every ttl/3.
    pub fn start(db: ConnectConfig, config: MemberConfig) -> Member {
        let owned = Arc::new(Mutex::new(Owned::default()));
        let (events_tx, events) = mpsc::unbounded_channel();
        let (commands, commands_rx) = mpsc::unbounded_channel();
        let task = Task {
            db,
            config: config.clone(),
            owned: owned.clone(),
            events: events_tx,
            conn: None,
            hints: None,
            revoking: BTreeSet::new(),
            disconnected: false,
        };
        tokio::spawn(task.run(commands_rx));
        Member {
            config,
            owned,
            events,
            commands,
        }
    }

    /// The member's name in the group.
    pub fn id(&self) -> &str {
        &self.config.id
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Owned> {
        self.owned.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The next event (None once the member has stopped).
    pub async fn next_event(&mut self) -> Option<MemberEvent> {
        self.events.recv().await
    }

    /// The term `partition` is owned in, or None: not ours, revoked, or the
    /// local deadline has passed (checked now). Check right before every
    /// side effect.
    pub fn owns(&self, partition: i32) -> Option<i64> {
        let owned = self.lock();
        let live = owned.deadline.is_some_and(|d| Instant::now() < d);
        live.then(|| owned.terms.get(&partition).copied()).flatten()
    }

    /// Every partition owned now (partition -> term), as `owns` says.
    pub fn owned(&self) -> BTreeMap<i32, i64> {
        let owned = self.lock();
        match owned.deadline {
            Some(d) if Instant::now() < d => owned.terms.clone(),
            _ => BTreeMap::new(),
        }
    }

    /// Gives back `partition`, revoked in `term`, once drained (sent by the
    /// member's task at once).
    pub fn ack(&self, partition: i32, term: i64) {
        let _ = self.commands.send(Command::Ack(partition, term));
    }

    /// In the caller's open transaction on `client` (a connection to the
    /// member's database): raises (LE001) unless this member owns
    /// `partition` in the term it was assigned, and holds it so until that
    /// transaction ends. Its term; [`Error::Rejected`] with LE001, without
    /// a call, when it is not ours here.
    pub async fn guard(
        &self,
        client: &impl tokio_postgres::GenericClient,
        partition: i32,
    ) -> Result<i64, Error> {
        let term = self.owns(partition);
        let schema = self.lock().schema.clone();
        let Some(term) = term else {
            return Err(Error::Rejected {
                sqlstate: "LE001".into(),
                message: format!(
                    "partition {partition} of group {:?} is not ours now",
                    self.config.group
                ),
            });
        };
        // (the schema the member's connection found, never the search path)
        let schema = schema.expect("a partition is owned only after a round found the schema");
        let statement = sql::ASSERT_PARTITION.replace(sql::EXTSCHEMA, &schema);
        client
            .query_typed(
                &statement,
                &[
                    (&self.config.group, Type::TEXT),
                    (&partition, Type::INT4),
                    (&self.config.id, Type::TEXT),
                    (&term, Type::INT8),
                ],
            )
            .await
            .map(|_| term)
            .map_err(|e| Error::from_pg(&e))
    }

    /// Leaves the group (le_leave: the member's partitions go to the others
    /// at once); nothing is ours from the call on. Stop work on every
    /// partition first. Whether the server knew the member.
    pub async fn leave(self) -> Result<bool, Error> {
        {
            let mut owned = self.lock();
            owned.terms.clear();
            owned.deadline = None;
        }
        let (tx, rx) = oneshot::channel();
        if self.commands.send(Command::Leave(tx)).is_err() {
            return Err(Error::Unreachable("the member has stopped".into()));
        }
        rx.await
            .unwrap_or_else(|_| Err(Error::Unreachable("the member has stopped".into())))
    }
}

/// The connection of a member's task.
struct Task {
    db: ConnectConfig,
    config: MemberConfig,
    owned: Arc<Mutex<Owned>>,
    events: mpsc::UnboundedSender<MemberEvent>,
    conn: Option<Db>,
    /// The connection's notifications (None: not connected).
    hints: Option<mpsc::UnboundedReceiver<Notification>>,
    /// Revocations told (partition, term), not yet gone from the assignment.
    revoking: BTreeSet<(i32, i64)>,
    disconnected: bool,
}

/// Why the task's loop woke.
enum Wake {
    Round,
    /// The local deadline passed (handled after every wake).
    Deadline,
    Command(Option<Command>),
    Hint(Option<Notification>),
}

impl Task {
    fn every(&self) -> Duration {
        (self.config.ttl / 3).max(Duration::from_millis(10))
    }

    fn emit(&self, event: MemberEvent) {
        let _ = self.events.send(event);
    }

    async fn run(mut self, mut commands: mpsc::UnboundedReceiver<Command>) {
        let mut next_round = Instant::now();
        let mut last_round = None::<Instant>;
        loop {
            let deadline = self.lock().deadline;
            let wake = tokio::select! {
                _ = sleep_until(next_round) => Wake::Round,
                _ = sleep_until(deadline.unwrap_or(next_round)), if deadline.is_some() => Wake::Deadline,
                c = commands.recv() => Wake::Command(c),
                n = async { self.hints.as_mut()?.recv().await }, if self.hints.is_some() => Wake::Hint(n),
            };
            match wake {
                Wake::Round => {
                    let sent = Instant::now();
                    last_round = Some(sent);
                    next_round = sent + self.every();
                    match self.round(sent).await {
                        Ok(()) => {}
                        Err(Error::Unreachable(m)) => self.disconnect(Error::Unreachable(m)),
                        Err(error) => {
                            self.lose_all();
                            self.emit(MemberEvent::Failed { error });
                            return;
                        }
                    }
                }
                Wake::Command(None) => return, // the Member was dropped
                Wake::Command(Some(Command::Ack(partition, term))) => {
                    self.revoking.remove(&(partition, term));
                    if let Err(e) = self.ack(partition, term).await {
                        self.disconnect(e);
                    }
                }
                Wake::Command(Some(Command::Leave(reply))) => {
                    self.lose_all();
                    let _ = reply.send(self.leave().await);
                    return;
                }
                Wake::Deadline => {}
                Wake::Hint(None) => self.disconnect(Error::Unreachable("connection closed".into())),
                Wake::Hint(Some(n)) => {
                    if self.concerns_us(&n) {
                        // Sooner, at a bounded rate.
                        let soonest =
                            last_round.map_or(Instant::now(), |t| t + self.config.soonest);
                        next_round = next_round.min(soonest.max(Instant::now()));
                    }
                }
            }
            if self.lock().deadline.is_some_and(|d| Instant::now() >= d) {
                self.lose_all();
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Owned> {
        self.owned.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A well-formed announcement of this group naming this member.
    fn concerns_us(&self, n: &Notification) -> bool {
        Announcement::well_formed_partition(n.payload()).is_some_and(|v| {
            v["group"].as_str() == Some(&self.config.group)
                && v["member"].as_str() == Some(&self.config.id)
        })
    }

    fn disconnect(&mut self, error: Error) {
        self.conn = None;
        self.hints = None;
        if !self.disconnected {
            self.disconnected = true;
            self.emit(MemberEvent::Disconnected { error });
        }
    }

    /// Every partition lost (the deadline passed, the member stopped).
    fn lose_all(&mut self) {
        let lost = {
            let mut owned = self.lock();
            owned.deadline = None;
            std::mem::take(&mut owned.terms)
        };
        for (partition, term) in lost {
            self.emit(MemberEvent::Lost { partition, term });
        }
    }

    /// When a call is given up: a renewal period from now, and never past
    /// the local deadline, so that the partitions are told lost on time.
    fn call_by(&self) -> Instant {
        let now = Instant::now();
        let by = now + self.every().max(Duration::from_millis(100));
        match self.lock().deadline {
            Some(d) if d > now => by.min(d),
            _ => by,
        }
    }

    async fn client(&mut self) -> Result<&Db, Error> {
        if self.conn.is_none() {
            let by = self.call_by();
            let mut db = self.db.clone();
            if db.pg.get_application_name().is_none() {
                db.pg.application_name("leaderlock member");
            }
            let connected = timeout_at(by, async {
                let (client, messages) = db.connect().await.map_err(|e| Error::from_pg(&e))?;
                let hints = forward_notifications(messages, |n| n.channel() == sql::CHANNEL);
                let client = Db::attach(client, db.schema()).await?;
                if let Err(e) = client.batch_execute(sql::LISTEN_ANNOUNCEMENTS).await {
                    return Err(explain(client.client(), &e).await);
                }
                Ok((client, hints))
            })
            .await
            .map_err(|_| Error::Unreachable("timed out connecting".into()))??;
            self.lock().schema = Some(connected.0.schema().to_owned());
            self.conn = Some(connected.0);
            self.hints = Some(connected.1);
            self.disconnected = false;
        }
        Ok(self.conn.as_ref().expect("connected above"))
    }

    /// Join (renew), read the assignment, tell what changed.
    async fn round(&mut self, sent: Instant) -> Result<(), Error> {
        let by = self.call_by();
        let config = self.config.clone();
        let ttl = config.ttl.as_secs_f64();
        let drain = config.drain.map(|d| d.as_secs_f64());
        let client = self.client().await?;
        let read = timeout_at(by, async {
            client
                .query_typed(
                    sql::JOIN,
                    &[
                        (&config.group, Type::TEXT),
                        (&config.id, Type::TEXT),
                        (&ttl, Type::FLOAT8),
                        (&config.partitions, Type::INT4),
                        (&drain, Type::FLOAT8),
                    ],
                )
                .await?;
            client
                .query_typed(
                    sql::ASSIGNMENT,
                    &[(&config.group, Type::TEXT), (&config.id, Type::TEXT)],
                )
                .await
        })
        .await
        .map_err(|_| Error::Unreachable("the round timed out".into()))?;
        let rows = match read {
            Ok(rows) => rows,
            Err(e) => return Err(explain(client.client(), &e).await),
        };
        let mut owned = BTreeMap::new();
        let mut revoked = BTreeMap::new();
        for row in rows {
            let (partition, term, state): (i32, i64, String) = (row.get(0), row.get(1), row.get(2));
            match state.as_str() {
                "owned" => owned.insert(partition, term),
                _ => revoked.insert(partition, term),
            };
        }
        let deadline = sent + config.ttl.saturating_sub(config.margin);
        let (lost, told, new) = {
            let mut mine = self.lock();
            // Ours no more: gone, or now in another term.
            let lost: Vec<_> = mine
                .terms
                .iter()
                .filter(|(p, t)| owned.get(p) != Some(t) && revoked.get(p) != Some(t))
                .map(|(p, t)| (*p, *t))
                .collect();
            let told: Vec<_> = revoked
                .iter()
                .filter(|(p, t)| mine.terms.get(p) == Some(t))
                .map(|(p, t)| (*p, *t))
                .collect();
            for (p, _) in lost.iter().chain(&told) {
                mine.terms.remove(p);
            }
            let new: Vec<_> = owned
                .iter()
                .filter(|(p, _)| !mine.terms.contains_key(p))
                .map(|(p, t)| (*p, *t))
                .collect();
            mine.terms.extend(new.iter().copied());
            mine.deadline = Some(deadline);
            (lost, told, new)
        };
        for (partition, term) in lost {
            self.emit(MemberEvent::Lost { partition, term });
        }
        self.revoking.retain(|pt| revoked.get(&pt.0) == Some(&pt.1));
        for (partition, term) in told {
            self.revoking.insert((partition, term));
            self.emit(MemberEvent::Revoked { partition, term });
        }
        // Revoked, but nothing of ours runs on it (never seen granted, or
        // lost at the deadline): given back at once.
        let idle: Vec<_> = revoked
            .iter()
            .filter(|(p, t)| !self.revoking.contains(&(**p, **t)))
            .map(|(p, t)| (*p, *t))
            .collect();
        for (partition, term) in idle {
            self.ack(partition, term).await?;
        }
        self.emit(MemberEvent::Renewed { deadline });
        for (partition, term) in new {
            self.emit(MemberEvent::Assigned {
                partition,
                term,
                deadline,
            });
        }
        Ok(())
    }

    async fn ack(&mut self, partition: i32, term: i64) -> Result<(), Error> {
        let by = self.call_by();
        let group = self.config.group.clone();
        let id = self.config.id.clone();
        let client = self.client().await?;
        let sent = timeout_at(
            by,
            client.query_typed(
                sql::ACK,
                &[
                    (&group, Type::TEXT),
                    (&id, Type::TEXT),
                    (&partition, Type::INT4),
                    (&term, Type::INT8),
                ],
            ),
        )
        .await
        .map_err(|_| Error::Unreachable("the ack timed out".into()))?;
        match sent {
            Ok(_) => Ok(()),
            Err(e) => Err(explain(client.client(), &e).await),
        }
    }

    async fn leave(&mut self) -> Result<bool, Error> {
        let by = self.call_by();
        let group = self.config.group.clone();
        let id = self.config.id.clone();
        let client = self.client().await?;
        let left = timeout_at(
            by,
            client.query_typed(sql::LEAVE, &[(&group, Type::TEXT), (&id, Type::TEXT)]),
        )
        .await
        .map_err(|_| Error::Unreachable("leaving timed out".into()))?;
        match left {
            Ok(rows) => Ok(rows[0].get(0)),
            Err(e) => Err(explain(client.client(), &e).await),
        }
    }
}
