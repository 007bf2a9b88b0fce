//! The elector: one background task per key that campaigns, renews, and
//! reports leadership as events. The local deadline is the safety rule:
//! a lease counts only until (start of the last successful acquire or
//! renewal) + ttl - margin. The server computed its own expiry from a later
//! instant, so this deadline is never after the server's expires_at.
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::config::{ConnectConfig, ElectorConfig};
use crate::error::Error;

mod task;
use task::Task;

/// A tenure as this process sees it: valid until `deadline` unless renewed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Leadership {
    pub term: i64,
    /// Local deadline (monotonic clock): stop acting as leader here.
    pub deadline: Instant,
}

impl Leadership {
    /// True while the local deadline has not passed.
    pub fn is_current(&self) -> bool {
        Instant::now() < self.deadline
    }
}

/// Why a tenure ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopReason {
    /// A renewal returned false: the lease lapsed or was taken. (A
    /// notification that another candidate acquired the key only makes the
    /// elector renew at once: the server's answer decides.)
    Refused,
    /// No renewal succeeded before the local deadline (database slow or
    /// unreachable).
    Deadline,
    /// [`Elector::resign`] released it.
    Resigned,
    /// [`Elector::shutdown`] released it.
    Shutdown,
}

impl fmt::Display for StopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StopReason::Refused => {
                write!(f, "the server refused the renewal (lease lapsed or taken)")
            }
            StopReason::Deadline => write!(f, "no renewal succeeded before the local deadline"),
            StopReason::Resigned => write!(f, "resigned"),
            StopReason::Shutdown => write!(f, "shut down"),
        }
    }
}

/// What an elector reports, in order.
#[derive(Debug, Clone)]
pub enum Event {
    /// A connection is up (again).
    Connected,
    /// A connection failed or a call on it failed or timed out.
    Disconnected { error: Error },
    /// Notifications arrive on this connection: campaigning can rely on
    /// them (polling slows down to ttl/2 where a worker announces expiries).
    NotificationsArrive,
    /// What the server offers, on the first connection and whenever it
    /// changes: whether a background worker expires lapsed leases and
    /// announces them. Without one (the portable edition, or the library
    /// not preloaded) the elector tries every `poll_every` while it
    /// campaigns and calls `le_expire_lapsed()` before each try, so that a
    /// dead leader's lease is taken over and announced within that period
    /// of its expiry.
    Served { worker: bool, poll_every: Duration },
    /// An attempt to acquire found the key held (by `holder`, if known).
    Refused { holder: Option<String> },
    /// An attempt to acquire found the key held with another number of
    /// slots than [`ElectorConfig::slots`] (the server's 22023 of contract
    /// 17, `message` its text): not ours now. The elector keeps
    /// campaigning, as after a refusal (at its polling interval, or on a
    /// notification that a tenure ended): the key takes our number again
    /// once the rival tenures end. Reported once per run of such attempts
    /// (again only after an attempt that did not meet it).
    SlotsDiffer { message: String },
    /// This process leads from now until `deadline` unless renewed.
    Started(Leadership),
    /// A renewal succeeded: the deadline moved.
    Renewed(Leadership),
    /// A renewal was refused while the server still shows the lease as
    /// ours and live: its row was locked by another transaction (the step
    /// after a failover, a superuser's). Retried until the deadline, which
    /// did not move.
    RenewalDeferred(Leadership),
    /// This process no longer leads.
    Stopped { term: i64, reason: StopReason },
    /// A permanent error (extension missing, a key or id the server
    /// rejects, no privilege): the elector has stopped.
    Failed { error: Error },
}

pub(super) enum Command {
    Resign,
    Shutdown(oneshot::Sender<bool>),
}

/// Handle of a running elector. Dropping it shuts the elector down (and
/// releases the lease) in the background; call [`Elector::shutdown`] to
/// wait for the release.
pub struct Elector {
    commands: mpsc::UnboundedSender<Command>,
    events: mpsc::UnboundedReceiver<Event>,
    leadership: watch::Receiver<Option<Leadership>>,
    task: Option<JoinHandle<()>>,
    config: ElectorConfig,
    watchdog: Watchdog,
}

/// When the elector's task next means to act (call the server, or check
/// its deadline). An elector past that by much more than a call's timeout
/// is wedged: for a health check.
#[derive(Clone, Debug)]
pub struct Watchdog(Arc<Mutex<Instant>>);

impl Watchdog {
    /// How long the elector is past the moment it meant to act (zero when
    /// it is not).
    pub fn overdue(&self) -> Duration {
        let due = *self.0.lock().unwrap_or_else(|e| e.into_inner());
        Instant::now().saturating_duration_since(due)
    }

    fn set(&self, due: Instant) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = due;
    }
}

impl Elector {
    /// Starts campaigning in a background task (on the current tokio
    /// runtime). Connection problems are reported as events, never as an
    /// error here.
    pub fn start(db: ConnectConfig, config: ElectorConfig) -> Elector {
        let (command_tx, command_rx) = mpsc::unbounded_channel();
        let (event_tx, event_rx) = mpsc::unbounded_channel();
        let (lead_tx, lead_rx) = watch::channel(None);
        let watchdog = Watchdog(Arc::new(Mutex::new(Instant::now())));
        let pg = &db.pg;
        let release_slot = [
            format!(
                "{:?} {:?} {:?}",
                pg.get_hosts(),
                pg.get_ports(),
                pg.get_dbname()
            ),
            config.key.clone(),
            config.id.clone(),
        ];
        let task = Task::new(
            watchdog.clone(),
            db,
            config.clone(),
            (event_tx, lead_tx, command_rx),
            release_slot,
        );
        Elector {
            commands: command_tx,
            events: event_rx,
            leadership: lead_rx,
            task: Some(tokio::spawn(task.run())),
            config,
            watchdog,
        }
    }

    pub fn config(&self) -> &ElectorConfig {
        &self.config
    }

    /// The elector's [`Watchdog`].
    pub fn watchdog(&self) -> Watchdog {
        self.watchdog.clone()
    }

    /// The next event; None once the elector has stopped.
    pub async fn next_event(&mut self) -> Option<Event> {
        self.events.recv().await
    }

    /// The current tenure, if this process leads and its local deadline has
    /// not passed. Check it right before acting as leader.
    pub fn leadership(&self) -> Option<Leadership> {
        (*self.leadership.borrow()).filter(Leadership::is_current)
    }

    /// Releases the lease if held; campaigns again if
    /// `config.campaign_again`.
    pub fn resign(&self) {
        let _ = self.commands.send(Command::Resign);
    }

    /// Stops at once without releasing: the lease runs out its ttl. For a
    /// process that cannot tell whether its leader work has really stopped.
    pub fn abandon(mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }

    /// Releases the lease if held and stops. Returns whether a lease was
    /// released.
    pub async fn shutdown(mut self) -> bool {
        let (tx, rx) = oneshot::channel();
        let _ = self.commands.send(Command::Shutdown(tx));
        let released = rx.await.unwrap_or(false);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
        released
    }
}

impl Drop for Elector {
    fn drop(&mut self) {
        if self.task.is_some() {
            let (tx, _) = oneshot::channel();
            let _ = self.commands.send(Command::Shutdown(tx));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A runtime starved by a blocking call (one real way an elector
    /// wedges) shows in the watchdog; the same elector running freely does
    /// not. The server is unreachable, so the elector retries every 300 ms.
    #[test]
    fn the_watchdog_sees_a_starved_elector() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let pg: tokio_postgres::Config = "host=127.0.0.1 port=1 user=nobody sslmode=disable"
                .parse()
                .unwrap();
            let db = ConnectConfig::from_pg(pg).unwrap();
            let elector = Elector::start(db, ElectorConfig::with_ttl("k", Duration::from_secs(3)));
            let watchdog = elector.watchdog();
            tokio::time::sleep(Duration::from_secs(1)).await;
            let free = watchdog.overdue();
            assert!(free < Duration::from_millis(200), "{free:?}");
            // The only thread is busy: the elector's task cannot run.
            std::thread::sleep(Duration::from_secs(2));
            let starved = watchdog.overdue();
            assert!(starved > Duration::from_millis(1500), "{starved:?}");
            tokio::time::sleep(Duration::from_millis(500)).await;
            let again = watchdog.overdue();
            assert!(again < Duration::from_millis(200), "{again:?}");
        });
    }
}
