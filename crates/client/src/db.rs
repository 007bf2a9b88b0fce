//! A connection that knows where leaderlock is. Every statement of
//! `sql.rs` names the extension's objects as `@extschema@.name`; `Db`
//! finds the schema once per connection (`sql::FIND_SCHEMA`, never by the
//! session's search_path, which the database's owner may set) and puts it,
//! as the server quoted it, in each statement it sends.
use std::borrow::Cow;

use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Client, Row};

use crate::error::Error;
use crate::sql;

/// A connection and the schema leaderlock is installed in.
pub struct Db {
    client: Client,
    /// `quote_ident` of the schema, as the server returned it.
    schema: String,
}

impl Db {
    /// Finds leaderlock's schema on `client` (`wanted`: the one the
    /// settings name, else any): the extension's, or where the portable
    /// edition's script put it. Its absence is [`Error::Rejected`] (42883,
    /// naming the database); several schemas holding it without one
    /// named, [`Error::Config`].
    pub async fn attach(client: Client, wanted: Option<&str>) -> Result<Db, Error> {
        let rows = match client
            .query_typed(sql::FIND_SCHEMA, &[(&wanted, Type::TEXT)])
            .await
        {
            Ok(rows) => rows,
            Err(e) => return Err(Error::from_pg(&e)),
        };
        let mut found: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
        match found.len() {
            1 => Ok(Db {
                client,
                schema: found.remove(0),
            }),
            0 => {
                let database = match client.query_one(sql::EXTENSION_HERE, &[]).await {
                    Ok(row) => row.get::<_, String>(0),
                    Err(e) => return Err(Error::from_pg(&e)),
                };
                Err(Error::Rejected {
                    sqlstate: "42883".into(),
                    message: match wanted {
                        Some(schema) => format!(
                            "schema {schema:?} of database {database:?} does not hold leaderlock \
                             (LEADERLOCK_SCHEMA or the schema setting names it)"
                        ),
                        None => format!(
                            "extension leaderlock is not installed in database {database:?}: a \
                             superuser runs CREATE EXTENSION leaderlock there (docs: README, \
                             Installing)"
                        ),
                    },
                })
            }
            _ => Err(Error::Config(format!(
                "leaderlock's functions are in several schemas of this database ({}): name the \
                 one to use with LEADERLOCK_SCHEMA (or the schema setting)",
                found.join(", ")
            ))),
        }
    }

    /// The connection itself (for what sends no statement of ours).
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The schema, as the server quoted it.
    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// `statement` with the extension's schema in place of `@extschema@`.
    pub fn sql<'a>(&self, statement: &'a str) -> Cow<'a, str> {
        if statement.contains(sql::EXTSCHEMA) {
            Cow::Owned(statement.replace(sql::EXTSCHEMA, &self.schema))
        } else {
            Cow::Borrowed(statement)
        }
    }

    pub async fn query_typed(
        &self,
        statement: &str,
        params: &[(&(dyn ToSql + Sync), Type)],
    ) -> Result<Vec<Row>, tokio_postgres::Error> {
        self.client.query_typed(&self.sql(statement), params).await
    }

    /// `query_typed`'s first row, if any. (Every statement goes with its
    /// parameters' types in one round trip: tokio-postgres's untyped calls
    /// prepare a named statement first, which pgbouncer's transaction
    /// pooling may send to another server.)
    pub async fn query_opt(
        &self,
        statement: &str,
        params: &[(&(dyn ToSql + Sync), Type)],
    ) -> Result<Option<Row>, tokio_postgres::Error> {
        Ok(self
            .query_typed(statement, params)
            .await?
            .into_iter()
            .next())
    }

    /// `query_typed`'s one row (a statement that always returns one).
    pub async fn query_one(
        &self,
        statement: &str,
        params: &[(&(dyn ToSql + Sync), Type)],
    ) -> Result<Row, tokio_postgres::Error> {
        let mut rows = self.query_typed(statement, params).await?.into_iter();
        Ok(rows.next().expect("the statement returns one row"))
    }

    pub async fn batch_execute(&self, statements: &str) -> Result<(), tokio_postgres::Error> {
        self.client.batch_execute(&self.sql(statements)).await
    }

    pub fn is_closed(&self) -> bool {
        self.client.is_closed()
    }
}
