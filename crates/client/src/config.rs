//! What an elector campaigns for and how often it talks to the database.
use std::time::Duration;

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
    /// server's clocks running at slightly different rates. Default ttl/200.
    pub margin: Duration,
    /// Campaign again after losing or resigning the lease. Default true.
    pub campaign_again: bool,
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
            margin: ttl / 200,
            campaign_again: true,
        }
    }
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

/// Connection settings: `dsn` (a libpq-style `key=value` string or a
/// `postgres://` URL) when given, else `LEADERLOCK_DSN`, else `DATABASE_URL`,
/// else the libpq variables PGHOST (default: the local socket directory),
/// PGPORT, PGUSER, PGPASSWORD, PGDATABASE. TLS is not supported yet.
pub fn pg_config_from_env(dsn: Option<&str>) -> Result<tokio_postgres::Config, String> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    if let Some(dsn) = dsn
        .map(str::to_owned)
        .or_else(|| env("LEADERLOCK_DSN"))
        .or_else(|| env("DATABASE_URL"))
    {
        return dsn
            .parse()
            .map_err(|e| format!("cannot parse the connection string: {e}"));
    }
    let mut config = tokio_postgres::Config::new();
    config.host(env("PGHOST").unwrap_or_else(|| "/var/run/postgresql".into()));
    if let Some(port) = env("PGPORT") {
        config.port(
            port.parse()
                .map_err(|_| format!("PGPORT is not a port: {port}"))?,
        );
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
        assert_eq!(c.get_ports(), &[6543]);
        assert_eq!(c.get_user(), Some("u"));
        assert!(pg_config_from_env(Some("host=x port=notaport")).is_err());
    }
}
