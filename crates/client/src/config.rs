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
/// PGPORT, PGUSER, PGPASSWORD, PGDATABASE. Without a password, one is looked
/// up in the password file as libpq does (PGPASSFILE, else ~/.pgpass).
/// TLS is not supported yet: an `sslmode` (or PGSSLMODE) of `require`,
/// `verify-ca` or `verify-full` is refused here rather than connecting
/// without it.
pub fn pg_config_from_env(dsn: Option<&str>) -> Result<tokio_postgres::Config, String> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let mut config = match dsn
        .map(str::to_owned)
        .or_else(|| env("LEADERLOCK_DSN"))
        .or_else(|| env("DATABASE_URL"))
    {
        Some(dsn) => {
            // libpq's rule: a setting the string leaves out comes from the
            // environment; only sslmode matters here (it must not be lost).
            if !dsn.contains("sslmode") {
                refuse_tls_mode("PGSSLMODE", env("PGSSLMODE").as_deref())?;
            }
            for mode in ["require", "verify-ca", "verify-full"] {
                if dsn.contains(&format!("sslmode={mode}")) {
                    refuse_tls_mode("sslmode", Some(mode))?;
                }
            }
            dsn.parse()
                .map_err(|e| format!("cannot parse the connection string: {e}"))?
        }
        None => {
            refuse_tls_mode("PGSSLMODE", env("PGSSLMODE").as_deref())?;
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
            config
        }
    };
    if config.get_password().is_none() {
        if let Some(password) = password_from_file(&config) {
            config.password(password);
        }
    }
    Ok(config)
}

fn refuse_tls_mode(what: &str, mode: Option<&str>) -> Result<(), String> {
    match mode {
        Some(m @ ("require" | "verify-ca" | "verify-full")) => Err(format!(
            "{what}={m}: this client has no TLS support yet, and will not connect without \
             the TLS that was asked for (use sslmode=disable or prefer on a trusted network, \
             or a local pooler)"
        )),
        _ => Ok(()),
    }
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
        assert_eq!(c.get_ports(), &[6543]);
        assert_eq!(c.get_user(), Some("u"));
        assert!(pg_config_from_env(Some("host=x port=notaport")).is_err());
    }

    #[test]
    fn tls_that_was_asked_for_is_never_dropped() {
        for dsn in [
            "host=h sslmode=require",
            "host=h sslmode=verify-full",
            "postgres://u@h/d?sslmode=verify-ca",
        ] {
            let e = pg_config_from_env(Some(dsn)).unwrap_err();
            assert!(e.contains("sslmode=") && e.contains("no TLS"), "{e}");
        }
        assert!(pg_config_from_env(Some("host=h sslmode=disable")).is_ok());
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
