//! What a transition tells: its notification on channel `leaderlock`
//! (`notify`) and its row of the history (`history`), both in the
//! transaction that makes it.

pub mod groups;
pub mod history;
pub mod notify;
