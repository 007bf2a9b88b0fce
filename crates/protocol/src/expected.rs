//! Contract 25: keys expected to be led. What the worker does at a check of
//! a key marked as expected to have a live holder within a bound, from
//! what it read: open a `leaderless` interval (its start exact: when the
//! key lost its last live holder, or was marked), close it (its end exact:
//! when the tenure found began), or wait; and when to look again.
//! Decided by the extension (`src/lease/expected.rs`) and tested here.

use crate::Micros;

/// How often a key is looked at while it is led or while an interval is
/// open (an interval's start and end come from the rows, whatever the
/// pace; only the announcement waits for it).
pub const POLL: Micros = 1_000_000;

/// A key's holders as read at a check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Led {
    /// When the earliest live tenure began (None: no live holder).
    pub since: Option<Micros>,
    /// When the live tenures end unless renewed (their earliest expiry).
    pub until: Option<Micros>,
    /// When its last live holder's tenure ended (None: never held).
    pub last_end: Option<Micros>,
}

/// A key's mark.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mark {
    /// The longest the key may stay without a live holder.
    pub within: Micros,
    /// When it was marked (or its bound changed): no interval starts before.
    pub marked_at: Micros,
    /// The start of the open leaderless interval, recorded already.
    pub open_since: Option<Micros>,
}

/// What a check does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    Wait,
    /// Record the start of a leaderless interval at `since`.
    Open {
        since: Micros,
    },
    /// Record the end of the interval open since `since`, at `until`.
    Close {
        since: Micros,
        until: Micros,
    },
}

/// The check of `mark` at `now` over `led`: the step, and when to check again.
pub fn check(mark: Mark, led: Led, now: Micros) -> (Step, Micros) {
    let poll = now.saturating_add(POLL);
    match (led.since, mark.open_since) {
        (Some(began), Some(since)) => (
            Step::Close {
                since,
                until: began.max(since),
            },
            led.until.unwrap_or(poll).min(poll),
        ),
        (Some(_), None) => (Step::Wait, led.until.unwrap_or(poll).min(poll)),
        (None, Some(_)) => (Step::Wait, poll),
        (None, None) => {
            let since = led.last_end.unwrap_or(mark.marked_at).max(mark.marked_at);
            let due = since.saturating_add(mark.within);
            if now > due {
                (Step::Open { since }, poll)
            } else {
                // (just after the bound: "longer than" it)
                (Step::Wait, due.saturating_add(1))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MARK: Mark = Mark {
        within: 10,
        marked_at: 100,
        open_since: None,
    };
    const NOBODY: Led = Led {
        since: None,
        until: None,
        last_end: None,
    };

    #[test]
    fn a_key_never_led_is_leaderless_from_its_mark_once_past_the_bound() {
        assert_eq!(check(MARK, NOBODY, 105), (Step::Wait, 111));
        assert_eq!(check(MARK, NOBODY, 110), (Step::Wait, 111));
        assert_eq!(
            check(MARK, NOBODY, 111),
            (Step::Open { since: 100 }, 111 + POLL)
        );
    }

    #[test]
    fn the_interval_starts_when_the_last_tenure_ended() {
        let led = Led {
            last_end: Some(200),
            ..NOBODY
        };
        assert_eq!(check(MARK, led, 205), (Step::Wait, 211));
        assert_eq!(
            check(MARK, led, 215),
            (Step::Open { since: 200 }, 215 + POLL)
        );
        // before the mark: counted from the mark
        let old = Led {
            last_end: Some(50),
            ..NOBODY
        };
        assert_eq!(
            check(MARK, old, 111),
            (Step::Open { since: 100 }, 111 + POLL)
        );
    }

    #[test]
    fn an_open_interval_ends_when_the_tenure_found_began() {
        let open = Mark {
            open_since: Some(200),
            ..MARK
        };
        assert_eq!(check(open, NOBODY, 300), (Step::Wait, 300 + POLL));
        let led = Led {
            since: Some(290),
            until: Some(320),
            last_end: None,
        };
        assert_eq!(
            check(open, led, 300),
            (
                Step::Close {
                    since: 200,
                    until: 290
                },
                320
            )
        );
        // led, nothing open: looked at again when the tenure may end
        assert_eq!(check(MARK, led, 300), (Step::Wait, 320));
    }
}
