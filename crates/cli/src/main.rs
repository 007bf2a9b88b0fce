//! `leaderlock`: run a command only while it leads, show leases, watch
//! announcements. See the README's "Command line" section.
mod console;
mod db_metrics;
mod duration;
mod exit;
mod group_run;
mod history;
mod log;
mod man;
mod metrics;
mod run;
mod runs;
mod schedule_metrics;
mod scheduled;
mod status;
mod supervisor;
mod text;
mod timeline;

use std::ffi::OsString;

use clap::{CommandFactory, Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "leaderlock",
    version,
    about = "Leader election in PostgreSQL, from the command line"
)]
struct Cli {
    /// Connection string (key=value or postgres:// URL). Default:
    /// LEADERLOCK_DSN, DATABASE_URL, else PGHOST, PGPORT, PGUSER,
    /// PGPASSWORD, PGDATABASE.
    #[arg(long, global = true)]
    dsn: Option<String>,
    #[command(subcommand)]
    command: Commands,
}

#[derive(Subcommand, Debug)]
enum Commands {
    /// Run a command only while leading: leaderlock run --key K -- cmd args...
    Run(Box<run::RunArgs>),
    /// Show the leases (all, or one key) as a table: held first, then
    /// lapsed, then vacant; long keys and holders shortened (--json: whole).
    Status {
        key: Option<String>,
        /// Only leases held now.
        #[arg(long)]
        held: bool,
        /// A group's partitions instead (§26): who owns each, in which
        /// term, revoked or not, and whether its owner is live.
        #[arg(long, conflicts_with_all = ["key", "held"])]
        group: Option<String>,
        /// One JSON object per lease instead of the table.
        #[arg(long)]
        json: bool,
    },
    /// Show how scheduled runs went (leaderlock run --every/--cron/--job):
    /// a line per schedule kept in the database (next due, overdue, missed),
    /// a line per job (runs, succeeded, failed, missed, running, last
    /// success and failure), then the latest runs, newest first.
    Runs {
        /// Only this job's runs.
        #[arg(long)]
        job: Option<String>,
        /// How many of the latest runs to list.
        #[arg(long, default_value_t = 20)]
        limit: i64,
        /// One JSON object per run instead of the summary and table.
        #[arg(long)]
        json: bool,
    },
    /// Serve Prometheus metrics read from the database when scraped, at /metrics (and
    /// /healthz): per schedule how overdue it is and its missed runs, per
    /// key expected to be led its leaderless seconds, intervals and
    /// tenures. Run it anywhere beside the database: it reports a job whose
    /// replicas all died.
    Metrics {
        /// Address to listen on, e.g. 127.0.0.1:9187.
        #[arg(long)]
        listen: std::net::SocketAddr,
        /// The database is read when a scrape comes, at most once per this
        /// (a scrape within it gets the last read).
        #[arg(long, default_value = "1s", value_parser = duration::parse)]
        every: std::time::Duration,
    },
    /// Serve a web page of what the database knows, live: keys and their
    /// holders (with a prefix filter, by pages), a key's leadership
    /// timeline, scheduled jobs and their runs, sessions. Read-only unless
    /// --allow-writes (force-release a key, pause or resume a schedule,
    /// close a session: as this connection's role). Listens on localhost;
    /// another address needs LEADERLOCK_CONSOLE_TOKEN (a bearer token; open
    /// /login?token=... once in the browser).
    Console {
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:8080")]
        listen: std::net::SocketAddr,
        /// Let the page force-release keys, pause and resume schedules and
        /// close sessions (PostgreSQL's privileges still decide).
        #[arg(long)]
        allow_writes: bool,
    },
    /// Print each transition as it happens, one JSON line each (the
    /// announcement with its "position" and "role"), read from the
    /// server's history: a lost connection is made again and nothing is
    /// missed or repeated. Exits 123 when the history no longer holds the
    /// transitions after the position.
    Watch {
        key: Option<String>,
        /// Start after this position (from an earlier line), not from now.
        #[arg(long)]
        since: Option<i64>,
        /// Only keys starting with this.
        #[arg(long, conflicts_with = "key")]
        prefix: Option<String>,
        /// A group's changes of ownership only (§26: partition_granted,
        /// partition_revoked, partition_freed).
        #[arg(long, conflicts_with_all = ["key", "prefix"])]
        group: Option<String>,
    },
    /// Show the transitions the server kept (acquired, released, expired,
    /// ...), oldest first: a table, JSON lines, or an SVG timeline of who
    /// led each key.
    History {
        key: Option<String>,
        /// Only keys starting with this.
        #[arg(long, conflicts_with = "key")]
        prefix: Option<String>,
        /// From this instant (2026-11-28T03:12:00Z), or this long ago (2h).
        #[arg(long)]
        since: Option<String>,
        /// Until this instant, or this long ago.
        #[arg(long)]
        until: Option<String>,
        /// One JSON object per transition instead of the table.
        #[arg(long, conflicts_with = "svg")]
        json: bool,
        /// Draw the timeline into FILE (SVG) instead.
        #[arg(long, value_name = "FILE")]
        svg: Option<std::path::PathBuf>,
    },
    /// Internal: writes the man pages (leaderlock.1 and one per command)
    /// into DIR, from this help text (the Debian package ships them).
    #[command(name = "__man", hide = true)]
    Man { dir: std::path::PathBuf },
    /// Internal: the process that starts and stops the command.
    #[command(name = "__supervise", hide = true)]
    Supervise {
        #[arg(long)]
        grace_ms: u64,
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<OsString>,
    },
}

fn main() {
    let cli = Cli::parse();
    if let Commands::Supervise { grace_ms, command } = cli.command {
        // No runtime, no threads: it forks the command.
        supervisor::supervise(grace_ms, command);
    }
    if let Commands::Man { dir } = cli.command {
        std::process::exit(match man::write_pages(Cli::command(), &dir) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!(
                    "leaderlock: cannot write man pages into {}: {e}",
                    dir.display()
                );
                exit::USAGE
            }
        });
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let dsn = cli.dsn.as_deref();
    let code = runtime.block_on(async {
        match cli.command {
            Commands::Run(args) => run::run(*args, dsn).await,
            Commands::Status {
                group: Some(group),
                json,
                ..
            } => status::group(dsn, &group, json).await,
            Commands::Status {
                key, held, json, ..
            } => status::status(dsn, key, held, json).await,
            Commands::Watch {
                key,
                since,
                prefix,
                group,
            } => history::watch(dsn, key, prefix, since, group).await,
            Commands::History {
                key,
                prefix,
                since,
                until,
                json,
                svg,
            } => {
                let args = history::Args {
                    key,
                    prefix,
                    since,
                    until,
                    json,
                    svg,
                };
                history::history(dsn, args).await
            }
            Commands::Runs { job, limit, json } => runs::runs(dsn, job, limit, json).await,
            Commands::Metrics { listen, every } => db_metrics::serve(dsn, listen, every).await,
            Commands::Console {
                listen,
                allow_writes,
            } => {
                let options = console::Options {
                    listen,
                    allow_writes,
                    token: std::env::var("LEADERLOCK_CONSOLE_TOKEN")
                        .ok()
                        .filter(|t| !t.is_empty()),
                };
                console::serve(dsn, options).await
            }
            Commands::Supervise { .. } | Commands::Man { .. } => unreachable!("handled above"),
        }
    });
    // Background tasks (connection drivers) are not waited for.
    runtime.shutdown_background();
    std::process::exit(code);
}

#[cfg(test)]
mod tests {
    /// `leaderlock --version` is the release's: the CLI, the client library
    /// and the extension carry one version.
    #[test]
    fn version_is_the_release_s() {
        let release = |toml: &str| {
            toml.lines()
                .find_map(|l| l.strip_prefix("version = \""))
                .and_then(|v| v.strip_suffix('"'))
                .map(str::to_owned)
        };
        let extension = release(include_str!("../../../Cargo.toml"));
        assert_eq!(extension.as_deref(), Some(env!("CARGO_PKG_VERSION")));
        assert_eq!(
            release(include_str!("../../client/Cargo.toml")).as_deref(),
            Some(env!("CARGO_PKG_VERSION"))
        );
    }
}
