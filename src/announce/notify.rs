//! Notifications on channel `leaderlock` (contract section 4).
//!
//! Payloads are built with serde_json, so they are valid JSON whatever key
//! and id hold. They are queued with `pg_notify` in the transaction making
//! the change, so PostgreSQL delivers them only if it commits. With keys and
//! ids capped at 255 bytes and values at 2000 bytes of JSON, even the worst
//! case (every byte of key, holder and previous holder a control character,
//! escaped to six: 4590 bytes, plus the value) stays under the 8000-byte
//! payload limit.

use crate::announce::history;
use pgrx::prelude::*;
use serde::Serialize;
use serde_json::value::RawValue;

pub const CHANNEL: &str = "leaderlock";

/// A leadership change. Times are server `TimestampTz` microseconds.
#[derive(Debug, Clone, PartialEq)]
pub enum Event<'a> {
    Acquired {
        key: &'a str,
        holder: &'a str,
        term: i64,
        at: i64,
        previous_holder: Option<&'a str>,
        expires_at: i64,
        /// The leader value, as jsonb text.
        value: Option<&'a str>,
    },
    Released {
        key: &'a str,
        holder: &'a str,
        term: i64,
        at: i64,
        /// By le_force_release (contract 13), not by the holder.
        forced: bool,
    },
    Expired {
        key: &'a str,
        holder: &'a str,
        term: i64,
        at: i64,
        expires_at: i64,
        reason: ExpiryReason,
    },
    /// Contract 11: the holder set a new value.
    Proclaimed {
        key: &'a str,
        holder: &'a str,
        term: i64,
        at: i64,
        value: Option<&'a str>,
    },
}

/// Why a lease expired (contracts 5, 9, 10, 21), as the decision core
/// says (`leaderlock_protocol::vacate`).
pub use leaderlock_protocol::vacate::Reason as ExpiryReason;

#[derive(Serialize)]
struct Payload<'a> {
    event: &'static str,
    key: &'a str,
    holder: &'a str,
    term: i64,
    at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    previous_holder: Option<Option<&'a str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    expires_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    value: Option<Option<&'a RawValue>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    forced: Option<bool>,
    /// Contract 17: only for a key of more than one slot.
    #[serde(skip_serializing_if = "Option::is_none")]
    slots: Option<i32>,
}

/// jsonb text (always valid JSON) to embed as is: no number is rounded.
fn raw(value: Option<&str>) -> Option<&RawValue> {
    value.map(|v| serde_json::from_str(v).expect("jsonb text is valid JSON"))
}

impl Event<'_> {
    /// The JSON payload: `{"event","key","holder","term","at",...}`.
    #[cfg(any(test, feature = "pg_test"))]
    pub fn payload(&self) -> String {
        self.payload_with(None)
    }

    /// The payload, with `"slots"` for a key of more than one slot.
    pub fn payload_with(&self, slots: Option<i32>) -> String {
        let mut p = match *self {
            Event::Acquired {
                key,
                holder,
                term,
                at,
                previous_holder,
                expires_at,
                value,
            } => Payload {
                event: "acquired",
                key,
                holder,
                term,
                at: rfc3339(at),
                // present, and null when there was no previous holder
                previous_holder: Some(previous_holder),
                expires_at: Some(rfc3339(expires_at)),
                reason: None,
                value: Some(raw(value)),
                forced: None,
                slots: None,
            },
            Event::Released {
                key,
                holder,
                term,
                at,
                forced,
            } => Payload {
                event: "released",
                key,
                holder,
                term,
                at: rfc3339(at),
                previous_holder: None,
                expires_at: None,
                reason: None,
                value: None,
                forced: Some(forced),
                slots: None,
            },
            Event::Expired {
                key,
                holder,
                term,
                at,
                expires_at,
                reason,
            } => Payload {
                event: "expired",
                key,
                holder,
                term,
                at: rfc3339(at),
                previous_holder: None,
                expires_at: Some(rfc3339(expires_at)),
                reason: Some(match reason {
                    ExpiryReason::Ttl => "ttl",
                    ExpiryReason::SessionEnded => "session_ended",
                    ExpiryReason::SessionExpired => "session_expired",
                    ExpiryReason::Abandoned => "abandoned",
                }),
                value: None,
                forced: None,
                slots: None,
            },
            Event::Proclaimed {
                key,
                holder,
                term,
                at,
                value,
            } => Payload {
                event: "proclaimed",
                key,
                holder,
                term,
                at: rfc3339(at),
                previous_holder: None,
                expires_at: None,
                reason: None,
                value: Some(raw(value)),
                forced: None,
                slots: None,
            },
        };
        p.slots = slots.filter(|n| *n > 1);
        serde_json::to_string(&p).expect("a payload of strings and integers always serializes")
    }

    /// Queues the notification in the current transaction.
    pub fn send(&self) {
        self.send_for(1);
    }

    /// Queues the notification of a change to a key of `slots` slots, and
    /// records it in the history (contract 23).
    pub fn send_for(&self, slots: i32) {
        let payload = self.payload_with(Some(slots));
        queue(&payload);
        let (event, key, holder, term, at) = match *self {
            Event::Acquired {
                key,
                holder,
                term,
                at,
                ..
            } => ("acquired", key, holder, term, at),
            Event::Released {
                key,
                holder,
                term,
                at,
                ..
            } => ("released", key, holder, term, at),
            Event::Expired {
                key,
                holder,
                term,
                at,
                ..
            } => ("expired", key, holder, term, at),
            Event::Proclaimed {
                key,
                holder,
                term,
                at,
                ..
            } => ("proclaimed", key, holder, term, at),
        };
        history::record(at, event, key, Some(holder), Some(term), &payload);
    }
}

/// Contract 22: a change of a scheduled run, on the same channel. Listeners
/// of leases tell them apart by `event` (`run_claimed`, `run_finished`,
/// `run_missed`); they carry `job` and `due`, no `key`.
#[derive(Debug, Clone, PartialEq)]
pub enum RunEvent<'a> {
    Claimed {
        holder: &'a str,
        term: i64,
        expires_at: i64,
        attempt: i32,
    },
    Finished {
        holder: &'a str,
        term: i64,
        outcome: &'a str,
    },
    Missed,
}

#[derive(Serialize)]
struct RunPayload<'a> {
    event: &'static str,
    job: &'a str,
    due: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    holder: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    term: Option<i64>,
    at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    expires_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    attempt: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    outcome: Option<&'a str>,
}

impl RunEvent<'_> {
    /// The JSON payload: `{"event","job","due",...,"at",...}`.
    pub fn payload(&self, job: &str, due: i64, at: i64) -> String {
        let mut p = RunPayload {
            event: "run_missed",
            job,
            due: rfc3339(due),
            holder: None,
            term: None,
            at: rfc3339(at),
            expires_at: None,
            attempt: None,
            outcome: None,
        };
        match *self {
            RunEvent::Claimed {
                holder,
                term,
                expires_at,
                attempt,
            } => {
                p.event = "run_claimed";
                p.holder = Some(holder);
                p.term = Some(term);
                p.expires_at = Some(rfc3339(expires_at));
                p.attempt = Some(attempt);
            }
            RunEvent::Finished {
                holder,
                term,
                outcome,
            } => {
                p.event = "run_finished";
                p.holder = Some(holder);
                p.term = Some(term);
                p.outcome = Some(outcome);
            }
            RunEvent::Missed => {}
        }
        serde_json::to_string(&p).expect("a payload of strings and integers always serializes")
    }

    /// Queues the notification in the current transaction, and records it
    /// in the history (contract 23) under the job's name.
    pub fn send(&self, job: &str, due: i64, at: i64) {
        let payload = self.payload(job, due, at);
        queue(&payload);
        let (event, holder, term) = match *self {
            RunEvent::Claimed { holder, term, .. } => ("run_claimed", Some(holder), Some(term)),
            RunEvent::Finished { holder, term, .. } => ("run_finished", Some(holder), Some(term)),
            RunEvent::Missed => ("run_missed", None, None),
        };
        history::record(at, event, job, holder, term, &payload);
    }
}

/// Contract 24: a schedule paused or resumed, announced and recorded in the
/// history under the job's name (with the role whose call did it): who
/// stopped a job's runs, and when, is in the history as the runs are.
pub enum ScheduleEvent {
    Paused,
    Resumed,
}

#[derive(Serialize)]
struct SchedulePayload<'a> {
    event: &'static str,
    job: &'a str,
    at: String,
}

impl ScheduleEvent {
    fn name(&self) -> &'static str {
        match self {
            ScheduleEvent::Paused => "schedule_paused",
            ScheduleEvent::Resumed => "schedule_resumed",
        }
    }

    /// The JSON payload: `{"event","job","at"}`.
    pub fn payload(&self, job: &str, at: i64) -> String {
        let p = SchedulePayload {
            event: self.name(),
            job,
            at: rfc3339(at),
        };
        serde_json::to_string(&p).expect("a payload of strings always serializes")
    }

    /// Queues the notification in the current transaction, and records it.
    pub fn send(&self, job: &str, at: i64) {
        let payload = self.payload(job, at);
        queue(&payload);
        history::record(at, self.name(), job, None, None, &payload);
    }
}

/// Contract 25: a key expected to be led was without a live holder for
/// longer than its bound (`Started`, announced once past it), or got one
/// again (`Ended`). Times: the interval's exact start and end.
pub enum LeaderlessEvent {
    Started { since: i64, within: i64 },
    Ended { since: i64, until: i64 },
}

#[derive(Serialize)]
struct LeaderlessPayload<'a> {
    event: &'static str,
    key: &'a str,
    since: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    until: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    within_seconds: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    seconds: Option<f64>,
    at: String,
}

impl LeaderlessEvent {
    /// The JSON payload: `{"event":"leaderless"|"leaderless_end","key",...}`.
    pub fn payload(&self, key: &str, at: i64) -> String {
        let p = match *self {
            LeaderlessEvent::Started { since, within } => LeaderlessPayload {
                event: "leaderless",
                key,
                since: rfc3339(since),
                until: None,
                within_seconds: Some(within as f64 / 1e6),
                seconds: None,
                at: rfc3339(at),
            },
            LeaderlessEvent::Ended { since, until } => LeaderlessPayload {
                event: "leaderless_end",
                key,
                since: rfc3339(since),
                until: Some(rfc3339(until)),
                within_seconds: None,
                seconds: Some((until - since) as f64 / 1e6),
                at: rfc3339(at),
            },
        };
        serde_json::to_string(&p).expect("a payload of strings and numbers always serializes")
    }

    /// Queues the notification in the current transaction, and records it
    /// in the history (contract 23) under the key.
    pub fn send(&self, key: &str, at: i64) {
        let payload = self.payload(key, at);
        queue(&payload);
        let event = match self {
            LeaderlessEvent::Started { .. } => "leaderless",
            LeaderlessEvent::Ended { .. } => "leaderless_end",
        };
        history::record(at, event, key, None, None, &payload);
    }
}

pub(crate) fn queue(payload: &str) {
    unsafe {
        pgrx::fcinfo::direct_function_call_as_datum(
            pg_sys::pg_notify,
            &[CHANNEL.into_datum(), payload.into_datum()],
        );
    }
}

/// Microseconds since 2000-01-01 00:00:00 UTC (PostgreSQL's epoch) as an
/// RFC 3339 UTC timestamp with microseconds, e.g. `2026-11-22T11:25:03.123456Z`.
pub fn rfc3339(pg_micros: i64) -> String {
    // 2000-01-01 in microseconds since 1970-01-01
    pg_micros
        .checked_add(crate::base::clock::PG_EPOCH_IN_UNIX_MICROS)
        .and_then(chrono::DateTime::from_timestamp_micros)
        // Only ±infinity lies outside chrono's range; leases never expire there.
        .map_or_else(
            || {
                if pg_micros > 0 {
                    "infinity"
                } else {
                    "-infinity"
                }
                .to_owned()
            },
            |t| t.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string(),
        )
}
