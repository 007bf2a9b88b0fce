//! What can go wrong, sorted by what a caller can do about it.
use std::fmt;

use tokio_postgres::error::SqlState;

/// An error of the client library.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The connection settings cannot be used (a malformed string or value,
    /// a missing or unreadable certificate or key): nothing was tried. Fix
    /// the settings.
    Config(String),
    /// The database could not be reached, or a call failed or timed out:
    /// worth retrying (the elector does).
    Unreachable(String),
    /// The server refused for good (no extension, a key or id it rejects,
    /// no privilege, a wrong password, no such database): retrying cannot
    /// help. `sqlstate` says which.
    Rejected { sqlstate: String, message: String },
}

impl Error {
    /// A tokio-postgres error, sorted: [`Error::Rejected`] when retrying
    /// cannot help ([`is_permanent`]), else [`Error::Unreachable`].
    pub fn from_pg(e: &tokio_postgres::Error) -> Error {
        let message = describe_error(e);
        match e.code() {
            Some(code) if is_permanent(e) => Error::Rejected {
                sqlstate: code.code().to_owned(),
                message,
            },
            _ => Error::Unreachable(message),
        }
    }

    /// The SQLSTATE, for an error the server raised for good.
    pub fn sqlstate(&self) -> Option<&str> {
        match self {
            Error::Rejected { sqlstate, .. } => Some(sqlstate),
            _ => None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Config(m) | Error::Unreachable(m) | Error::Rejected { message: m, .. } => {
                f.write_str(m)
            }
        }
    }
}

impl std::error::Error for Error {}

/// The SQLSTATE of a history position the retention no longer keeps
/// (contract 23).
pub const PRUNED: &str = "LE002";

/// True when retrying cannot help: bad input, no extension, no privilege,
/// a wrong password or no such database, a history position no longer
/// kept (contract 23).
pub fn is_permanent(e: &tokio_postgres::Error) -> bool {
    const PERMANENT: [SqlState; 8] = [
        SqlState::INVALID_PARAMETER_VALUE,
        SqlState::NULL_VALUE_NOT_ALLOWED,
        SqlState::UNDEFINED_FUNCTION,
        SqlState::UNDEFINED_TABLE,
        SqlState::INSUFFICIENT_PRIVILEGE,
        SqlState::INVALID_PASSWORD,
        SqlState::INVALID_AUTHORIZATION_SPECIFICATION,
        SqlState::INVALID_CATALOG_NAME,
    ];
    e.code()
        .is_some_and(|code| PERMANENT.contains(code) || code.code() == PRUNED)
}

/// The DETAIL both editions give when a key with live holders is asked
/// for with another number of slots than it admits (22023, contract 17).
pub const SLOTS_DIFFER_DETAIL: &str =
    "While a key has live holders, every acquisition must give the same slots.";

/// True when the server refused an acquisition because the key's live
/// holders hold it with another number of slots (22023 with
/// [`SLOTS_DIFFER_DETAIL`]). Not a permanent error: the key is not ours
/// now, and it takes our number again once those tenures end, so an
/// elector keeps campaigning. (22023 alone also means a key or id the
/// server refuses, which retrying cannot heal: the DETAIL tells them apart.)
pub fn slots_differ(e: &tokio_postgres::Error) -> bool {
    e.as_db_error().is_some_and(|db| {
        db.code() == &SqlState::INVALID_PARAMETER_VALUE
            && db
                .detail()
                .is_some_and(|d| d.starts_with(SLOTS_DIFFER_DETAIL))
    })
}

/// What `e`, an error of a call on `client`, means for a program: as
/// [`Error::from_pg`], except that a function or relation of leaderlock the
/// server does not know (42883, 42P01) is told as what it almost always
/// is, the extension missing from the database, with its name.
pub async fn explain(client: &tokio_postgres::Client, e: &tokio_postgres::Error) -> Error {
    let missing = e.as_db_error().is_some_and(|db| {
        (db.code() == &SqlState::UNDEFINED_FUNCTION || db.code() == &SqlState::UNDEFINED_TABLE)
            && (db.message().contains("le_") || db.message().contains("leaderlock"))
    });
    if missing {
        if let Ok(row) = client.query_one(crate::sql::EXTENSION_HERE, &[]).await {
            let (database, installed): (String, bool) = (row.get(0), row.get(1));
            if !installed {
                return Error::Rejected {
                    sqlstate: e.code().map_or("42883", |c| c.code()).to_owned(),
                    message: format!(
                        "extension leaderlock is not installed in database {database:?}: a \
                         superuser runs CREATE EXTENSION leaderlock there (docs: README, \
                         Installing)"
                    ),
                };
            }
        }
    }
    Error::from_pg(e)
}

/// An error with its cause: the server's message and SQLSTATE, or the chain
/// of causes of a connection error ("db error" alone says nothing).
pub fn describe_error(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        let mut text = format!(
            "{}: {} (SQLSTATE {})",
            db.severity(),
            db.message(),
            db.code().code()
        );
        if db.code() == &SqlState::READ_ONLY_SQL_TRANSACTION {
            text.push_str(
                "; the server is a standby or read-only: retrying until it is promoted \
                 (with several hosts, target_session_attrs=read-write picks the primary)",
            );
        }
        return text;
    }
    causes(e)
}

/// An error with its causes: tokio-postgres names the offending parameter
/// only in the cause.
pub(crate) fn causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let c = cause.to_string();
        if !text.contains(&c) {
            text.push_str(": ");
            text.push_str(&c);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::Error;

    #[test]
    fn errors_show_their_message_and_say_their_kind() {
        let e = Error::Rejected {
            sqlstate: "42501".into(),
            message: "ERROR: permission denied (SQLSTATE 42501)".into(),
        };
        assert_eq!(e.to_string(), "ERROR: permission denied (SQLSTATE 42501)");
        assert_eq!(e.sqlstate(), Some("42501"));
        assert_eq!(Error::Config("x".into()).sqlstate(), None);
        let boxed: Box<dyn std::error::Error> = Box::new(Error::Unreachable("down".into()));
        assert_eq!(boxed.to_string(), "down");
    }
}
