//! Client library for leaderlock (leader election inside PostgreSQL): an
//! [`Elector`] campaigns for a key, renews every ttl/3, and keeps a local
//! deadline measured from the start of its last successful renewal, so a
//! process never believes it leads after the server could have let the
//! lease lapse. It hears changes with `LISTEN leaderlock`, polls when
//! notifications cannot arrive (transaction pooling), and releases on
//! shutdown.
//!
//! ```no_run
//! # async fn demo() {
//! use leaderlock_client::{Elector, ElectorConfig, Event, pg_config_from_env};
//! let mut elector = Elector::start(pg_config_from_env(None).unwrap(), ElectorConfig::new("nightly-report"));
//! while let Some(event) = elector.next_event().await {
//!     match event {
//!         Event::Started(lease) => println!("leading, term {}", lease.term),
//!         Event::Stopped { reason, .. } => println!("stopped leading: {reason}"),
//!         _ => {}
//!     }
//! }
//! # }
//! ```
mod config;
mod db;
mod dsn;
mod elector;
mod error;
mod group;
mod history;
mod payload;
mod schedule;
mod session;
pub mod sql;
mod tls;

pub use config::{
    default_id, pg_config_from_env, ConnectConfig, ElectorConfig, Messages, SessionAttrs,
};
pub use db::Db;
pub use elector::{Elector, Event, Leadership, StopReason, Watchdog};
pub use error::{describe_error, explain, is_permanent, slots_differ, Error, SLOTS_DIFFER_DETAIL};
pub use group::{Member, MemberConfig, MemberEvent};
pub use history::{HistoryFilter, HistoryWatcher, Transition, PRUNED as HISTORY_PRUNED};
pub use payload::Announcement;
pub use schedule::{Heartbeat, Run, RunConfig, Schedule, Scheduler, Turn};
pub use session::{Session, SessionConfig, SessionLease};
pub use tls::{RootCert, SslMode, TlsSettings};
