//! Reading a key (contracts 3, 3.4, 11, 17): its leader, whether an id
//! leads in a term (le_assert_leader), the lease as it stands, its holders.

use crate::base::clock::{micros, now, ts};
use crate::base::value::JsonbText;
use crate::lease::failover;
use crate::lease::row::{caller, first_lease, Lease};
use crate::lease::slots::{self};
use crate::store::plans;
use crate::store::schema_version;
use pgrx::prelude::*;

/// Contract 3, le_leader: the live holder, else None.
pub fn leader(key: &str) -> Option<String> {
    plans::run(
        schema_version::live_holder(),
        &[key.into(), ts(now()).into()],
        |t| {
            t.into_iter()
                .next()
                .and_then(|row| row.get::<String>(1).expect("holder"))
        },
    )
}

/// Why le_assert_leader refused: everything its message names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotLeader {
    pub key: String,
    pub id: String,
    pub expected_term: Option<i64>,
    /// None when the key was never acquired.
    pub term: Option<i64>,
    pub holder: Option<String>,
    pub live: bool,
    /// The lease is owned by a role the caller is not a member of.
    pub foreign_owner: bool,
    /// How many holders the key admits (contract 17).
    pub slots: i32,
}

impl NotLeader {
    pub fn message(&self) -> String {
        let (key, id) = (&self.key, &self.id);
        let state = match (&self.term, &self.holder, self.live) {
            (None, _, _) => "the key has never been acquired".to_string(),
            (Some(term), None, _) if self.slots > 1 => format!(
                "it holds none of the key's {} slots (last term {term})",
                self.slots
            ),
            (Some(term), None, _) => format!("the lease is vacant (term {term})"),
            (Some(term), Some(h), true) if self.foreign_owner && h == id => format!(
                "the lease of \"{h}\" (term {term}) is owned by a role the current role \
                 is not a member of"
            ),
            (Some(term), Some(h), true) => format!("the holder is \"{h}\" (term {term})"),
            (Some(term), Some(h), false) => {
                format!("the lease of \"{h}\" (term {term}) has lapsed")
            }
        };
        match self.expected_term {
            Some(t)
                if self.live
                    && !self.foreign_owner
                    && self.holder.as_deref() == Some(id.as_str()) =>
            {
                format!(
                    "leaderlock: \"{id}\" leads \"{key}\" in term {}, not in term {t}",
                    self.term.unwrap_or_default()
                )
            }
            _ => format!("leaderlock: \"{id}\" is not the leader of \"{key}\": {state}"),
        }
    }
}

/// Contract 3.4: the current term when `id` is the live holder (and the
/// term matches); the share lock stays until the transaction ends.
pub fn assert_leader(key: &str, id: &str, expected_term: Option<i64>) -> Result<i64, NotLeader> {
    match assert_once(key, id, expected_term) {
        // Its own lease, lapsed by the look: the failover step still to be
        // taken may give it its ttl again.
        Err(n)
            if n.holder.as_deref() == Some(id) && !n.live && failover::step_taken_for_holder() =>
        {
            assert_once(key, id, expected_term)
        }
        answer => answer,
    }
}

/// One look of `assert_leader`.
fn assert_once(key: &str, id: &str, expected_term: Option<i64>) -> Result<i64, NotLeader> {
    // Without a lock first: only the holder itself ever locks its row (a
    // rival's lock would make the holder's renewals fail meanwhile).
    let args = [key.into(), caller().into()];
    let seen = plans::run(schema_version::read_lease(), &args, first_lease);
    if let Some(l) = seen.as_ref().filter(|l| l.slots > 1) {
        return assert_tenure(key, id, expected_term, l.term, l.slots);
    }
    let read_at = now();
    let lease = match seen {
        Some(l) if l.is_led_by(id, expected_term, read_at) => {
            plans::run(schema_version::share_lock_lease(), &args, first_lease)
        }
        other => other,
    };
    let now = now();
    let refuse = |lease: Option<&Lease>| NotLeader {
        key: key.to_string(),
        id: id.to_string(),
        expected_term,
        term: lease.map(|l| l.term),
        holder: lease.and_then(|l| l.holder.clone()),
        live: lease.is_some_and(|l| l.is_live(now)),
        foreign_owner: lease.is_some_and(|l| !l.owned),
        slots: 1,
    };
    match lease {
        Some(l) if l.is_led_by(id, expected_term, now) => Ok(l.term),
        other => Err(refuse(other.as_ref())),
    }
}

/// Contract 3.4 on a key of many slots (17): the caller's own tenure.
/// `key_term`: the key's last term, named when `id` has none; the key
/// admits `slots`.
fn assert_tenure(
    key: &str,
    id: &str,
    expected_term: Option<i64>,
    key_term: i64,
    slots: i32,
) -> Result<i64, NotLeader> {
    let own = slots::assert_own(key, id, expected_term);
    let now = now();
    match own {
        Some(o) if o.is_led(expected_term, now) => Ok(o.term),
        other => Err(NotLeader {
            key: key.to_string(),
            id: id.to_string(),
            expected_term,
            term: Some(other.map_or(key_term, |o| o.term)),
            holder: other.map(|_| id.to_string()),
            live: other.is_some_and(|o| o.is_live(now)),
            foreign_owner: other.is_some_and(|o| !o.owned),
            slots,
        }),
    }
}

/// Contract 11, le_lease: the lease as it stands now. Holder, remaining and
/// value only while it is live; term and expires_at as stored; all None for
/// an unknown key.
#[derive(Debug, Default)]
pub struct LeaseNow {
    pub holder: Option<String>,
    pub term: Option<i64>,
    pub expires_at: Option<i64>,
    /// Microseconds left.
    pub remaining: Option<i64>,
    pub value: Option<String>,
}

pub fn lease_now(key: &str) -> LeaseNow {
    plans::run(schema_version::lease_row(), &[key.into()], |t| {
        let Some(row) = t.into_iter().next() else {
            return LeaseNow::default();
        };
        let holder = row.get::<String>(1).expect("holder");
        let expires_at = micros(row.get::<TimestampWithTimeZone>(3).expect("expires_at"));
        let now = now();
        let remaining = expires_at
            .filter(|_| leaderlock_protocol::is_live(holder.is_some(), expires_at, now))
            .map(|e| e - now);
        let live = remaining.is_some();
        LeaseNow {
            holder: holder.filter(|_| live),
            term: row.get::<i64>(2).expect("term"),
            expires_at,
            remaining,
            value: row
                .get::<JsonbText>(4)
                .expect("value")
                .filter(|_| live)
                .map(|v| v.0),
        }
    })
}

/// Contract 17, le_holders: the live holders of `key`, one `LeaseNow` each
/// (one at most for a key of one slot).
pub fn holders(key: &str) -> Vec<LeaseNow> {
    if slots::slots_of(key) > 1 {
        let now = now();
        return slots::holders(key)
            .into_iter()
            .map(|(holder, term, expires_at, value)| LeaseNow {
                holder: Some(holder),
                term: Some(term),
                expires_at: Some(expires_at),
                remaining: Some((expires_at - now).max(0)),
                value,
            })
            .collect();
    }
    let lease = lease_now(key);
    if lease.holder.is_some() {
        vec![lease]
    } else {
        Vec::new()
    }
}
