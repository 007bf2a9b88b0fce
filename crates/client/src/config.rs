//! What an elector campaigns for, how often it talks to the database, and
//! how it connects.
use crate::dsn;
use crate::error::{causes, Error};
use crate::tls::{SslMode, TlsSettings};
use futures_util::{Stream, StreamExt};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_postgres::config::TargetSessionAttrs;
use tokio_postgres::{AsyncMessage, Client, Notification};

/// Settings of an [`crate::Elector`]. `ElectorConfig::new(key)` gives the
/// defaults; every field can be changed before `Elector::start`.
#[derive(Debug, Clone)]
pub struct ElectorConfig {
    /// The election's name (the `key` of the `leaderlock` table).
    pub key: String,
    /// This candidate's id: unique per process. Default: [`default_id`].
    pub id: String,
    /// Lease length requested at each acquire and renewal. Default 10 s.
    pub ttl: Duration,
    /// Time between the starts of two renewals. Default ttl/3, so two
    /// renewals can fail before the lease is in danger.
    pub renew_every: Duration,
    /// While campaigning, how often to try even without a notification.
    /// Default: 1 s until notifications are known to arrive on this
    /// connection, then ttl/2 (the worker announces every expiry).
    pub poll_every: Option<Duration>,
    /// Retry delay after a failed call or connection. Default ttl/10
    /// (at least 50 ms, at most 1 s).
    pub retry_every: Duration,
    /// Subtracted from every local deadline: it covers the client's and the
    /// server's clocks running at slightly different rates. Default ttl/200
    /// (`leaderlock_protocol::margin` at its clock-rate bound, 5,000 ppm).
    pub margin: Duration,
    /// Campaign again after losing or resigning the lease. Default true.
    pub campaign_again: bool,
    /// How many holders the key admits at once (contract 17, extension
    /// 0.5.0): above 1, this elector holds one of its slots. Every
    /// candidate of a key must give the same number. Default 1.
    pub slots: u32,
    /// Contract 18 (extension 0.5.0, preloaded): while this candidate
    /// waits, no candidate of lower priority takes the key; a live holder
    /// is never preempted. Other than 0, the elector waits inside
    /// le_acquire (about a second per call) instead of polling, so that
    /// the server knows it waits. Default 0.
    pub priority: i32,
}

impl ElectorConfig {
    pub fn new(key: impl Into<String>) -> ElectorConfig {
        ElectorConfig::with_ttl(key, Duration::from_secs(10))
    }

    pub fn with_ttl(key: impl Into<String>, ttl: Duration) -> ElectorConfig {
        ElectorConfig {
            key: key.into(),
            id: default_id(),
            ttl,
            renew_every: ttl / 3,
            poll_every: None,
            retry_every: (ttl / 10).clamp(Duration::from_millis(50), Duration::from_secs(1)),
            margin: Duration::from_micros(leaderlock_protocol::margin(
                micros(ttl),
                leaderlock_protocol::CLOCK_RATE_BOUND_PPM,
            ) as u64),
            campaign_again: true,
            slots: 1,
            priority: 0,
        }
    }
}

/// A duration in microseconds, as the protocol's functions take them.
pub(crate) fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

/// `host:pid:random`: unique even for two replicas with the same hostname
/// and pid (containers), which would otherwise both believe they lead.
pub fn default_id() -> String {
    format!("{}:{}:{}", hostname(), std::process::id(), random_hex(4))
}

fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: buf is writable for its whole length.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "localhost".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// `n` random bytes as hex, from the OS.
pub(crate) fn random_hex(n: usize) -> String {
    use std::io::Read;
    let mut bytes = vec![0u8; n];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .is_err()
    {
        // No /dev/urandom: the std hasher's per-process random keys will do.
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(
            std::time::SystemTime::now()
                .elapsed()
                .map_or(0, |d| d.as_nanos()),
        );
        bytes = h.finish().to_le_bytes()[..n.min(8)].to_vec();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Where and how to connect: tokio-postgres's settings, TLS as libpq
/// understands it (`sslmode` and the rest: see [`crate::TlsSettings`]), and
/// libpq's `target_session_attrs`.
#[derive(Clone, Debug)]
pub struct ConnectConfig {
    pub pg: tokio_postgres::Config,
    tls: TlsSettings,
    rustls: Arc<rustls::ClientConfig>,
    session_attrs: SessionAttrs,
    /// The schema leaderlock is in, when the settings name it (only needed
    /// where the portable edition's script put it in several).
    schema: Option<String>,
}

/// libpq's `target_session_attrs`: which of several hosts to settle on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionAttrs {
    /// The first that answers (the default).
    Any,
    /// One that accepts writes.
    ReadWrite,
    /// One in read-only mode.
    ReadOnly,
    /// A primary: here as read-write (a primary set to read-only by
    /// default_transaction_read_only is skipped).
    Primary,
    /// A standby: here as read-only (so is a primary set to read-only).
    Standby,
    /// A standby if one answers, else any.
    PreferStandby,
}

impl SessionAttrs {
    /// Parses a value of `target_session_attrs` (or the variable `what`).
    pub(crate) fn parse(what: &str, value: &str) -> Result<SessionAttrs, String> {
        Ok(match value {
            "any" => SessionAttrs::Any,
            "read-write" => SessionAttrs::ReadWrite,
            "read-only" => SessionAttrs::ReadOnly,
            "primary" => SessionAttrs::Primary,
            "standby" => SessionAttrs::Standby,
            "prefer-standby" => SessionAttrs::PreferStandby,
            _ => {
                return Err(format!(
                    "invalid {what} value {value:?}: one of any, read-write, read-only, primary, \
                     standby, prefer-standby"
                ))
            }
        })
    }

    /// What tokio-postgres is asked for, attempt by attempt.
    fn attempts(self) -> &'static [TargetSessionAttrs] {
        match self {
            SessionAttrs::Any => &[TargetSessionAttrs::Any],
            SessionAttrs::ReadWrite | SessionAttrs::Primary => &[TargetSessionAttrs::ReadWrite],
            SessionAttrs::ReadOnly | SessionAttrs::Standby => &[TargetSessionAttrs::ReadOnly],
            SessionAttrs::PreferStandby => &[TargetSessionAttrs::ReadOnly, TargetSessionAttrs::Any],
        }
    }
}

/// A connection's messages (notifications, notices), polled in a task.
pub type Messages = Pin<Box<dyn Stream<Item = Result<AsyncMessage, tokio_postgres::Error>> + Send>>;

/// Polls `messages` in a task and passes on the notifications `keep`
/// chooses, until the connection ends (the receiver then finds the
/// channel closed: the connection is gone) or the receiver is dropped.
pub(crate) fn forward_notifications(
    mut messages: Messages,
    keep: fn(&Notification) -> bool,
) -> mpsc::UnboundedReceiver<Notification> {
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(Ok(message)) = messages.next().await {
            if let AsyncMessage::Notification(n) = message {
                if keep(&n) && tx.send(n).is_err() {
                    break;
                }
            }
        }
    });
    rx
}

impl ConnectConfig {
    /// `pg` with `tls`; the certificate and key files are read now, so a
    /// missing or unreadable one is an error here, not at the first call.
    pub fn new(pg: tokio_postgres::Config, tls: TlsSettings) -> Result<ConnectConfig, Error> {
        ConnectConfig::build(pg, tls).map_err(Error::Config)
    }

    fn build(pg: tokio_postgres::Config, tls: TlsSettings) -> Result<ConnectConfig, String> {
        let rustls = tls.client_config()?;
        let session_attrs = match pg.get_target_session_attrs() {
            TargetSessionAttrs::ReadWrite => SessionAttrs::ReadWrite,
            TargetSessionAttrs::ReadOnly => SessionAttrs::ReadOnly,
            _ => SessionAttrs::Any,
        };
        Ok(ConnectConfig {
            pg,
            tls,
            rustls,
            session_attrs,
            schema: std::env::var("LEADERLOCK_SCHEMA")
                .ok()
                .filter(|s| !s.is_empty()),
        })
    }

    /// `pg` as it is, its `ssl_mode` read as libpq's mode of that name (no
    /// certificate check unless `~/.postgresql/root.crt` is there).
    pub fn from_pg(pg: tokio_postgres::Config) -> Result<ConnectConfig, Error> {
        use tokio_postgres::config::SslMode as Pg;
        let mode = match pg.get_ssl_mode() {
            Pg::Disable => SslMode::Disable,
            Pg::Require => SslMode::Require,
            _ => SslMode::Prefer,
        };
        ConnectConfig::new(
            pg,
            TlsSettings {
                mode,
                ..TlsSettings::default()
            },
        )
    }

    /// The TLS settings in force.
    pub fn tls(&self) -> &TlsSettings {
        &self.tls
    }

    /// Which host to settle on, as libpq's `target_session_attrs`.
    pub fn session_attrs(&self) -> SessionAttrs {
        self.session_attrs
    }

    /// Sets [`ConnectConfig::session_attrs`].
    pub fn set_session_attrs(&mut self, attrs: SessionAttrs) {
        self.session_attrs = attrs;
    }

    /// The schema leaderlock is looked for in (`LEADERLOCK_SCHEMA`), or
    /// None: wherever it is installed ([`crate::Db::attach`]).
    pub fn schema(&self) -> Option<&str> {
        self.schema.as_deref()
    }

    /// Sets [`ConnectConfig::schema`].
    pub fn set_schema(&mut self, schema: Option<String>) {
        self.schema = schema;
    }

    /// The tokio-postgres TLS modes to try, in order. As libpq: no TLS on a
    /// Unix-domain socket, whatever sslmode says (hostaddr means TCP,
    /// whatever host says).
    fn tls_attempts(&self) -> Vec<tokio_postgres::config::SslMode> {
        use tokio_postgres::config::SslMode as Pg;
        let only_sockets = self.pg.get_hostaddrs().is_empty()
            && !self.pg.get_hosts().is_empty()
            && self
                .pg
                .get_hosts()
                .iter()
                .all(|h| matches!(h, tokio_postgres::config::Host::Unix(_)));
        match (only_sockets, self.tls.mode) {
            (true, _) => vec![Pg::Disable],
            (false, SslMode::Allow) => vec![Pg::Disable, Pg::Require],
            _ => vec![self.tls.first_attempt()],
        }
    }

    /// Opens a connection; its messages are returned to be polled. With
    /// `sslmode=allow`, plaintext first, then TLS if that failed; with
    /// `prefer-standby`, a standby first, then any host.
    pub async fn connect(&self) -> Result<(Client, Messages), tokio_postgres::Error> {
        let mut pg = self.pg.clone();
        let mut failed = None;
        for &attrs in self.session_attrs.attempts() {
            for mode in self.tls_attempts() {
                pg.target_session_attrs(attrs).ssl_mode(mode);
                let tls = tokio_postgres_rustls::MakeRustlsConnect::new((*self.rustls).clone());
                match pg.connect(tls).await {
                    Ok((client, mut connection)) => {
                        let messages =
                            futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
                        return Ok((client, Box::pin(messages)));
                    }
                    Err(e) => failed = Some(e),
                }
            }
        }
        Err(failed.expect("at least one attempt"))
    }
}

/// The parameters of a connection string that tokio-postgres does not read
/// as libpq does: TLS, and target_session_attrs.
const LIBPQ_PARAMS: [&str; 5] = [
    "sslmode",
    "sslrootcert",
    "sslcert",
    "sslkey",
    "target_session_attrs",
];

/// Connection settings: `dsn` (a libpq-style `key=value` string or a
/// `postgres://` URL) when given, else `LEADERLOCK_DSN`, else `DATABASE_URL`,
/// else the libpq variables PGHOST (default: the local socket directory;
/// a comma-separated list tries each host in turn), PGPORT (one port, or
/// one per host), PGUSER, PGPASSWORD, PGDATABASE. Whatever the string
/// leaves out of `sslmode`, `sslrootcert`, `sslcert`, `sslkey` (TLS, see
/// [`crate::TlsSettings`]), `target_session_attrs`, `connect_timeout` and
/// `application_name` comes from PGSSLMODE, PGSSLROOTCERT, PGSSLCERT,
/// PGSSLKEY, PGTARGETSESSIONATTRS, PGCONNECT_TIMEOUT and PGAPPNAME. Without
/// a password, one is looked up in the password file as libpq does
/// (PGPASSFILE, else ~/.pgpass). `LEADERLOCK_SCHEMA` names the schema
/// leaderlock is in, where more than one holds it (the portable edition).
pub fn pg_config_from_env(dsn: Option<&str>) -> Result<ConnectConfig, Error> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    connect_config(dsn, &env).map_err(Error::Config)
}

/// [`pg_config_from_env`] with the environment looked up by `env`.
fn connect_config(
    dsn: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<ConnectConfig, String> {
    let (mut config, libpq_params) = match dsn
        .map(str::to_owned)
        .or_else(|| env("LEADERLOCK_DSN"))
        .or_else(|| env("DATABASE_URL"))
    {
        Some(dsn) => {
            let (rest, libpq_params) = dsn::take_params(&dsn, &LIBPQ_PARAMS)?;
            let config: tokio_postgres::Config = rest
                .parse()
                .map_err(|e| format!("cannot parse the connection string: {}", causes(&e)))?;
            // Read by tokio-postgres rather than taken out above: the string
            // hides it somewhere it should not be (never silently weaker).
            use tokio_postgres::config::SslMode as Pg;
            if config.get_ssl_mode() != Pg::Prefer
                || config.get_target_session_attrs() != TargetSessionAttrs::Any
            {
                return Err(
                    "the connection string has sslmode or target_session_attrs where it cannot \
                     be read: percent-encode ?, @ and / in a URL's user and password"
                        .into(),
                );
            }
            (config, libpq_params)
        }
        None => (config_from_variables(env)?, Vec::new()),
    };
    if config.get_connect_timeout().is_none() {
        if let Some(t) = env("PGCONNECT_TIMEOUT") {
            let secs: u64 = t
                .parse()
                .map_err(|_| format!("PGCONNECT_TIMEOUT is not a number of seconds: {t:?}"))?;
            // libpq: at least 2 seconds; 0 means wait for ever
            if secs > 0 {
                config.connect_timeout(Duration::from_secs(secs.max(2)));
            }
        }
    }
    keep_alive(&mut config);
    if config.get_application_name().is_none() {
        if let Some(name) = env("PGAPPNAME") {
            config.application_name(name);
        }
    }
    if config.get_password().is_none() {
        if let Some(password) = password_from_file(&config) {
            config.password(password);
        }
    }
    let attrs = match libpq_params
        .iter()
        .rev()
        .find(|(k, _)| k == "target_session_attrs")
    {
        Some((k, v)) => Some(SessionAttrs::parse(k, v)?),
        None => env("PGTARGETSESSIONATTRS")
            .map(|v| SessionAttrs::parse("PGTARGETSESSIONATTRS", &v))
            .transpose()?,
    };
    let mut connect = ConnectConfig::build(config, TlsSettings::from_params(&libpq_params, env)?)?;
    if let Some(attrs) = attrs {
        connect.set_session_attrs(attrs);
    }
    connect.set_schema(env("LEADERLOCK_SCHEMA"));
    Ok(connect)
}

/// TCP keepalives, where the connection string did not set them: a
/// connection whose other end vanished without a word (a host that lost
/// power, a dropped network path) fails within KEEPALIVE_IDLE +
/// KEEPALIVE_RETRIES x KEEPALIVE_INTERVAL = 25 s of silence, instead of
/// the operating system's two hours. `run` does not wait for that (every
/// call has a timeout within the deadline); `watch` and the LISTEN
/// connection do.
fn keep_alive(config: &mut tokio_postgres::Config) {
    if config.get_keepalives_idle() == Duration::from_secs(2 * 60 * 60) {
        config.keepalives_idle(KEEPALIVE_IDLE);
    }
    if config.get_keepalives_interval().is_none() {
        config.keepalives_interval(KEEPALIVE_INTERVAL);
    }
    if config.get_keepalives_retries().is_none() {
        config.keepalives_retries(KEEPALIVE_RETRIES);
    }
}

const KEEPALIVE_IDLE: Duration = Duration::from_secs(10);
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(5);
const KEEPALIVE_RETRIES: u32 = 3;

/// The settings from the PG* variables alone (no connection string).
fn config_from_variables(
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<tokio_postgres::Config, String> {
    let mut config = tokio_postgres::Config::new();
    let hosts = env("PGHOST").unwrap_or_else(|| "/var/run/postgresql".into());
    let hosts: Vec<&str> = hosts.split(',').collect();
    for host in &hosts {
        config.host(if host.is_empty() {
            "/var/run/postgresql"
        } else {
            host
        });
    }
    if let Some(ports) = env("PGPORT") {
        let ports: Vec<&str> = ports.split(',').collect();
        if ports.len() != 1 && ports.len() != hosts.len() {
            return Err(format!(
                "PGPORT names {} ports for {} hosts: give one port, or one per host",
                ports.len(),
                hosts.len()
            ));
        }
        for port in ports {
            config.port(if port.is_empty() {
                5432
            } else {
                port.parse()
                    .map_err(|_| format!("PGPORT is not a port: {port:?}"))?
            });
        }
    }
    let user = env("PGUSER")
        .or_else(|| env("USER"))
        .unwrap_or_else(|| "postgres".into());
    config.user(&user);
    config.dbname(env("PGDATABASE").unwrap_or(user));
    if let Some(password) = env("PGPASSWORD") {
        config.password(password);
    }
    Ok(config)
}

/// The password for `config`'s first host, port, database and user from
/// the password file (PGPASSFILE, else ~/.pgpass), as libpq reads it:
/// `host:port:database:user:password` lines, `*` matches anything, `\`
/// escapes `:` and `\`, a socket directory matches `localhost`, and a file
/// that group or others may read is ignored.
fn password_from_file(config: &tokio_postgres::Config) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PGPASSFILE")
        .filter(|p| !p.is_empty())
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| std::path::Path::new(&h).join(".pgpass")))?;
    let meta = std::fs::metadata(&path).ok()?;
    if !meta.is_file() || meta.permissions().mode() & 0o077 != 0 {
        return None;
    }
    let text = std::fs::read_to_string(&path).ok()?;
    let host = match config.get_hosts().first()? {
        tokio_postgres::config::Host::Tcp(h) => h.clone(),
        tokio_postgres::config::Host::Unix(_) => "localhost".into(),
    };
    let port = config
        .get_ports()
        .first()
        .copied()
        .unwrap_or(5432)
        .to_string();
    let user = config.get_user()?;
    let dbname = config.get_dbname().unwrap_or(user);
    pgpass_lookup(&text, [&host, &port, dbname, user])
}

fn pgpass_lookup(text: &str, want: [&str; 4]) -> Option<String> {
    for line in text.lines() {
        if line.starts_with('#') {
            continue;
        }
        let mut fields = vec![String::new()];
        let mut chars = line.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => fields.last_mut()?.extend(chars.next()),
                ':' if fields.len() < 5 => fields.push(String::new()),
                _ => fields.last_mut()?.push(c),
            }
        }
        if fields.len() == 5
            && fields[..4]
                .iter()
                .zip(want)
                .all(|(field, value)| field == "*" || field == value)
        {
            return fields.pop();
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_the_ttl() {
        let c = ElectorConfig::with_ttl("k", Duration::from_secs(30));
        assert_eq!(c.renew_every, Duration::from_secs(10));
        assert_eq!(c.retry_every, Duration::from_secs(1));
        assert_eq!(c.margin, Duration::from_millis(150));
        let short = ElectorConfig::with_ttl("k", Duration::from_millis(200));
        assert_eq!(short.retry_every, Duration::from_millis(50));
    }

    #[test]
    fn default_ids_differ() {
        let (a, b) = (default_id(), default_id());
        assert_ne!(a, b);
        assert_eq!(a.split(':').count(), 3, "{a}");
        assert!(a.contains(&format!(":{}:", std::process::id())));
    }

    #[test]
    fn a_dsn_wins_over_the_environment() {
        let c = pg_config_from_env(Some("host=127.0.0.1 port=6543 user=u dbname=d")).unwrap();
        assert_eq!(c.pg.get_ports(), &[6543]);
        assert_eq!(c.pg.get_user(), Some("u"));
        assert!(pg_config_from_env(Some("host=x port=notaport")).is_err());
    }

    fn vars(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| {
            pairs
                .iter()
                .find(|(name, _)| *name == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn host_and_port_lists_as_libpq_reads_them() {
        let c = connect_config(
            None,
            &vars(&[
                ("PGHOST", "a,b,/tmp"),
                ("PGPORT", "5433,,5434"),
                ("PGUSER", "u"),
            ]),
        )
        .unwrap();
        assert_eq!(c.pg.get_hosts().len(), 3);
        assert_eq!(c.pg.get_ports(), &[5433, 5432, 5434]);
        let one_port =
            connect_config(None, &vars(&[("PGHOST", "a,b"), ("PGPORT", "6000")])).unwrap();
        assert_eq!(one_port.pg.get_ports(), &[6000]);
        let e = connect_config(None, &vars(&[("PGHOST", "a,b,c"), ("PGPORT", "1,2")])).unwrap_err();
        assert!(e.contains("PGPORT names 2 ports for 3 hosts"), "{e}");
    }

    #[test]
    fn session_attrs_timeout_and_application_name_from_string_or_variables() {
        for (value, attrs) in [
            ("any", SessionAttrs::Any),
            ("read-write", SessionAttrs::ReadWrite),
            ("read-only", SessionAttrs::ReadOnly),
            ("primary", SessionAttrs::Primary),
            ("standby", SessionAttrs::Standby),
            ("prefer-standby", SessionAttrs::PreferStandby),
        ] {
            let dsn = format!("host=a,b target_session_attrs={value}");
            assert_eq!(
                connect_config(Some(&dsn), &vars(&[]))
                    .unwrap()
                    .session_attrs(),
                attrs
            );
        }
        let env = vars(&[
            ("PGTARGETSESSIONATTRS", "primary"),
            ("PGCONNECT_TIMEOUT", "1"),
            ("PGAPPNAME", "nightly"),
        ]);
        let c = connect_config(Some("host=a,b"), &env).unwrap();
        assert_eq!(c.session_attrs(), SessionAttrs::Primary);
        assert_eq!(c.pg.get_connect_timeout(), Some(&Duration::from_secs(2)));
        assert_eq!(c.pg.get_application_name(), Some("nightly"));
        // the string wins
        let c = connect_config(
            Some("host=a target_session_attrs=standby application_name=x"),
            &env,
        )
        .unwrap();
        assert_eq!(c.session_attrs(), SessionAttrs::Standby);
        assert_eq!(c.pg.get_application_name(), Some("x"));
        let e = connect_config(Some("host=a target_session_attrs=primaryish"), &env).unwrap_err();
        assert!(
            e.contains("invalid target_session_attrs value \"primaryish\""),
            "{e}"
        );
    }

    #[test]
    fn tls_is_skipped_on_sockets_only() {
        use tokio_postgres::config::SslMode as Pg;
        let modes = |dsn: &str| {
            connect_config(Some(dsn), &vars(&[]))
                .unwrap()
                .tls_attempts()
        };
        assert_eq!(modes("host=/tmp sslmode=require"), vec![Pg::Disable]);
        // hostaddr means TCP, whatever host says
        assert_eq!(
            modes("hostaddr=127.0.0.1 sslmode=require"),
            vec![Pg::Require]
        );
        assert_eq!(
            modes("host=/tmp hostaddr=127.0.0.1 sslmode=require"),
            vec![Pg::Require]
        );
        assert_eq!(modes("host=h,/tmp sslmode=require"), vec![Pg::Require]);
        assert_eq!(
            modes("host=h sslmode=allow"),
            vec![Pg::Disable, Pg::Require]
        );
        assert_eq!(modes("host=h"), vec![Pg::Prefer]);
    }

    #[test]
    fn keepalives_unless_the_string_sets_them() {
        let c = connect_config(Some("host=a"), &vars(&[])).unwrap();
        assert!(c.pg.get_keepalives());
        assert_eq!(c.pg.get_keepalives_idle(), KEEPALIVE_IDLE);
        assert_eq!(c.pg.get_keepalives_interval(), Some(KEEPALIVE_INTERVAL));
        assert_eq!(c.pg.get_keepalives_retries(), Some(KEEPALIVE_RETRIES));
        let c = connect_config(
            Some("host=a keepalives_idle=60 keepalives_interval=20 keepalives_retries=9"),
            &vars(&[]),
        )
        .unwrap();
        assert_eq!(c.pg.get_keepalives_idle(), Duration::from_secs(60));
        assert_eq!(
            c.pg.get_keepalives_interval(),
            Some(Duration::from_secs(20))
        );
        assert_eq!(c.pg.get_keepalives_retries(), Some(9));
    }

    #[test]
    fn a_parameter_tokio_postgres_rejects_is_named() {
        let e = connect_config(Some("host=a keepalives=maybe"), &vars(&[])).unwrap_err();
        assert!(e.contains("keepalives"), "{e}");
        let e = connect_config(Some("host=a frobnicate=1"), &vars(&[])).unwrap_err();
        assert!(e.contains("frobnicate"), "{e}");
    }

    #[test]
    fn tls_settings_come_from_the_connection_string() {
        let c = pg_config_from_env(Some(
            "host=h sslmode=require user=u sslrootcert=/nonexistent/ca.crt",
        ));
        // require with a root file named: verified as verify-ca, so the file must be there
        assert!(c.unwrap_err().to_string().contains("/nonexistent/ca.crt"));
        let c = pg_config_from_env(Some("postgres://u@h/d?sslmode=disable")).unwrap();
        assert_eq!(c.tls().mode, SslMode::Disable);
        assert_eq!(c.pg.get_user(), Some("u"));
        let e = pg_config_from_env(Some("host=h sslmode=sometimes")).unwrap_err();
        assert!(e.to_string().contains("invalid sslmode value"), "{e}");
    }

    #[test]
    fn password_file_lines_match_as_libpq_reads_them() {
        let text = "# comment\nother:5432:*:u:no\nh:5432:d:u:p\\:w\\\\d\n*:*:*:*:fallback";
        assert_eq!(
            pgpass_lookup(text, ["h", "5432", "d", "u"]).as_deref(),
            Some("p:w\\d")
        );
        assert_eq!(
            pgpass_lookup(text, ["x", "1", "d", "v"]).as_deref(),
            Some("fallback")
        );
        assert_eq!(
            pgpass_lookup("h:5432:d:u:pw", ["h", "5433", "d", "u"]),
            None
        );
    }
}
