//! The statements and how they run: every SQL text the extension sends
//! (`queries`, by table), the SPI plans and subtransactions that run them
//! (`plans`), the statements of an acquisition as data and their rows
//! (`keys`, one gate), the role and schema of the call (`call`), which statements
//! fit the installed schema (`schema_version`), and the last check before
//! any runs (`guard`).

pub mod call;
pub mod guard;
pub mod keys;
pub mod plans;
pub mod queries;
pub mod schema_version;
