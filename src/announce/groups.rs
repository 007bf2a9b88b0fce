//! Contract 26: a group's changes of ownership, announced on the channel
//! (a hint: a member reads its assignment from the server) and recorded
//! in the history under the group's name, with the member and the
//! partition's term.

use crate::announce::history;
use crate::announce::notify::{queue, rfc3339};
use serde::Serialize;

/// A partition's change.
pub enum PartitionEvent {
    /// Granted to `member` in `term`.
    Granted,
    /// `member` is to give it back (drain, then le_ack) by `until`.
    Revoked { until: i64 },
    /// Owned by nobody: its group shrank, or no live member is left.
    Freed,
}

#[derive(Serialize)]
struct Payload<'a> {
    event: &'static str,
    group: &'a str,
    partition: i32,
    member: &'a str,
    term: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    until: Option<String>,
    at: String,
}

impl PartitionEvent {
    fn name(&self) -> &'static str {
        match self {
            PartitionEvent::Granted => "partition_granted",
            PartitionEvent::Revoked { .. } => "partition_revoked",
            PartitionEvent::Freed => "partition_freed",
        }
    }

    /// The JSON payload: `{"event","group","partition","member","term",
    /// "until"?,"at"}`.
    pub fn payload(&self, group: &str, partition: i32, member: &str, term: i64, at: i64) -> String {
        let p = Payload {
            event: self.name(),
            group,
            partition,
            member,
            term,
            until: match self {
                PartitionEvent::Revoked { until } => Some(rfc3339(*until)),
                _ => None,
            },
            at: rfc3339(at),
        };
        serde_json::to_string(&p).expect("a payload of strings and numbers always serializes")
    }

    /// Queues the notification in the current transaction, and records it.
    pub fn send(&self, group: &str, partition: i32, member: &str, term: i64, at: i64) {
        let payload = self.payload(group, partition, member, term, at);
        queue(&payload);
        history::record(at, self.name(), group, Some(member), Some(term), &payload);
    }
}
