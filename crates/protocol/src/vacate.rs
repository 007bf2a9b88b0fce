//! Contract 5, 9, 10 and 21: what the worker's vacating of a tenure does,
//! and what the end of a session does to the keys held under it, decided
//! by the extension (`src/lease/expiry.rs`, `session_leases.rs`) and by
//! the models (`tests/model.rs`, `tests/key_rules.rs`) alike. Which rows
//! are locked is the rule of the locking statements' WHERE (`lapsed!`: a
//! live tenure is never locked by the worker); what is written and
//! announced for each is decided here.

use crate::{may_vacate, Lease, Micros};

/// Why a tenure ended without its holder's release, as its `expired`
/// announcement says (contract 4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reason {
    /// Not renewed within its ttl.
    Ttl,
    /// Handed over by a release and never taken up (9).
    Abandoned,
    /// Its session was not renewed within its ttl (21).
    SessionExpired,
    /// Its connection ended (10, 21).
    SessionEnded,
}

/// What the worker's statement locked a tenure for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Cause {
    /// It lapsed (`lapsed!`).
    Lapsed,
    /// A release handed it over, and its candidate never took it up.
    Abandoned,
    /// It is bound to a connection that ended (10).
    ConnectionEnded,
}

/// What the worker does with a tenure it locked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Vacating {
    /// Vacated: announced as expired for `reason`, with the tenure's own
    /// expiry; its waiters woken at commit.
    Expire { reason: Reason, expires_at: Micros },
    /// Left as it is (live again by the time it was locked).
    Keep,
}

/// Contract 5 (and 9, 10): what the worker does at `now` with `locked`, a
/// tenure its statement locked for `cause`. A lapsed one is vacated only
/// while it still may be (`may_vacate`): never a live lease.
pub fn vacate<Id: PartialEq>(locked: &Lease<Id>, cause: Cause, now: Micros) -> Vacating {
    let reason = match cause {
        Cause::Lapsed if may_vacate(locked, now) => Reason::Ttl,
        Cause::Lapsed => return Vacating::Keep,
        _ if locked.holder.is_none() => return Vacating::Keep,
        Cause::Abandoned => Reason::Abandoned,
        Cause::ConnectionEnded => Reason::SessionEnded,
    };
    Vacating::Expire {
        reason,
        expires_at: locked.expires_at,
    }
}

/// How a session ended (21).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SessionEnd {
    /// le_close_session.
    Closed,
    /// Not renewed within its ttl.
    Expired,
    /// Its connection ended.
    ConnectionEnded,
}

/// What is announced of a key vacated by a session's end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Announce {
    Released,
    Expired(Reason),
}

/// What a session's end does to every key still held under it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ending {
    pub announce: Announce,
    /// The keys' expiry as stored and announced: the close, or when the
    /// session lapsed (its connection gone: now at the latest).
    pub expires_at: Micros,
    /// Until when nobody may take the keys (the lock-delay), if at all.
    pub delayed_until: Option<Micros>,
}

/// Contract 21: what the end at `now` of a session that expires (or
/// expired) at `expires_at`, with `lock_delay` (0: none), does to the keys
/// held under it: vacated, each announced; after an expiry or a lost
/// connection (not a close), kept from every taker until the lock-delay
/// after the session's expiry: the same instant whoever ends it and
/// whenever, so a look that ends it and rolls back moves nothing.
pub fn session_end(how: SessionEnd, expires_at: Micros, lock_delay: Micros, now: Micros) -> Ending {
    let (announce, ended) = match how {
        SessionEnd::Closed => (Announce::Released, now),
        SessionEnd::Expired => (
            Announce::Expired(Reason::SessionExpired),
            expires_at.min(now),
        ),
        SessionEnd::ConnectionEnded => {
            (Announce::Expired(Reason::SessionEnded), expires_at.min(now))
        }
    };
    Ending {
        announce,
        expires_at: ended,
        delayed_until: (how != SessionEnd::Closed && lock_delay > 0)
            .then(|| ended.saturating_add(lock_delay)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worker_vacates_only_what_it_may() {
        let lapsed = Lease {
            holder: Some(1),
            term: 2,
            expires_at: 5,
        };
        assert_eq!(
            vacate(&lapsed, Cause::Lapsed, 5),
            Vacating::Expire {
                reason: Reason::Ttl,
                expires_at: 5
            }
        );
        assert_eq!(vacate(&lapsed, Cause::Lapsed, 4), Vacating::Keep);
        assert_eq!(
            vacate(&lapsed, Cause::Abandoned, 4),
            Vacating::Expire {
                reason: Reason::Abandoned,
                expires_at: 5
            }
        );
        let vacant = Lease {
            holder: None,
            ..lapsed
        };
        assert_eq!(vacate(&vacant, Cause::ConnectionEnded, 4), Vacating::Keep);
        assert_eq!(vacate(&vacant, Cause::Lapsed, 9), Vacating::Keep);
    }

    #[test]
    fn a_lock_delay_counts_from_the_session_s_expiry() {
        assert_eq!(
            session_end(SessionEnd::Expired, 5, 2, 9),
            Ending {
                announce: Announce::Expired(Reason::SessionExpired),
                expires_at: 5,
                delayed_until: Some(7),
            }
        );
        assert_eq!(
            session_end(SessionEnd::ConnectionEnded, 20, 2, 9),
            Ending {
                announce: Announce::Expired(Reason::SessionEnded),
                expires_at: 9,
                delayed_until: Some(11),
            }
        );
        assert_eq!(
            session_end(SessionEnd::Closed, 20, 2, 9),
            Ending {
                announce: Announce::Released,
                expires_at: 9,
                delayed_until: None,
            }
        );
        assert_eq!(
            session_end(SessionEnd::Expired, 5, 0, 9).delayed_until,
            None
        );
    }
}
