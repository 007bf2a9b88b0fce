//! The SQL face (contract section 3). Each function enters its call
//! (`store::call`: the acting role, the extension's schema), checks its
//! arguments (`input`, contract section 6) before anything is read or
//! written, then hands over to `lease`. Every function pins `search_path =
//! pg_catalog, pg_temp`; writers act as the table's owner for their own
//! statements only (section 7, SECURITY.md); arguments are never spliced
//! into SQL.

mod acquire;
mod assert;
mod expected;
mod expire;
mod groups;
mod holder;
pub mod input;
mod read;
mod runs;
mod schedules;
mod sessions;
