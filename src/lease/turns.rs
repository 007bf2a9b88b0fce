//! The worker's time, shared out per role (docs/design-choices.md): each
//! step of a round (the schedules' instants, the marks, the groups) takes
//! its due rows with their owners in turn (`due_in_turn!` in the
//! statements: each role's earliest first, the roles in rotation from the
//! one this step served last), and goes on past its first row only for
//! `BUDGET_US`. What is left is still due: the next round, which comes at
//! once, takes it, after the leases' expiries.

use crate::base::clock;
use pgrx::datum::DatumWithOid;
use pgrx::pg_sys;
use std::cell::Cell;

/// How long a step of a round goes on past its first row.
pub const BUDGET_US: i64 = 50_000;

/// The steps whose due rows take turns by owner.
#[derive(Clone, Copy)]
pub enum Queue {
    Schedules,
    Marks,
    Groups,
}

thread_local! {
    /// The owner each step served last in this process, by `Queue`.
    static LAST_OWNER: [Cell<u32>; 3] = const { [Cell::new(0), Cell::new(0), Cell::new(0)] };
}

/// One step's round: its queue, and when it took its first row.
pub struct Turns {
    queue: Queue,
    started: Cell<i64>,
}

impl Turns {
    pub fn begin(queue: Queue) -> Self {
        Turns {
            queue,
            started: Cell::new(0),
        }
    }

    /// The owner served last, the statement's `$3`.
    pub fn last(&self) -> DatumWithOid<'static> {
        pg_sys::Oid::from(LAST_OWNER.with(|l| l[self.queue as usize].get())).into()
    }

    /// Whether the round takes another row, `taken` so far (the budget
    /// counts from the first, not from the statement that found them).
    pub fn more(&self, taken: usize) -> bool {
        if taken == 0 {
            self.started.set(clock::now());
            return true;
        }
        clock::now() - self.started.get() < BUDGET_US
    }

    /// A row of `owner` was taken.
    pub fn served(&self, owner: pg_sys::Oid) {
        LAST_OWNER.with(|l| l[self.queue as usize].set(owner.to_u32()));
    }
}
