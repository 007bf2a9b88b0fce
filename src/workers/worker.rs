//! The background worker (contract section 5): turns lapsed leases vacant
//! and announces each with an `expired` notification, in one transaction;
//! likewise session-bound leases whose session ended (contract 10). One per
//! served database, started by the launcher (`launcher.rs`, contract 12).
//!
//! It sleeps until the next check is due (index probes find it: see
//! `queries::NEXT_CHECK`), capped by `leaderlock.naptime`, and is woken
//! early by a commit that sets an earlier expiry (`worker_wakeup.rs`). An idle
//! check is that one query. Laid out after
//! pg_cron's and worker_spi's main loops: standard `die`/reload signal
//! handlers, latch waits that exit with the postmaster.

use crate::base::clock;
use crate::base::settings;
use crate::lease::expected;
use crate::lease::expiry;
use crate::lease::failover;
use crate::lease::groups;
use crate::lease::runs;
use crate::lease::settle;
use crate::shmem::databases::{self, Slot};
use crate::shmem::sessions::{self, Session};
use crate::shmem::worker_wakeup;
use crate::store::call;
use crate::store::plans;
use crate::store::schema_version;
use crate::workers::bgworker;
use crate::workers::numbering;
use pgrx::bgworkers::BackgroundWorker;
use pgrx::prelude::*;
use std::sync::atomic::Ordering;

/// The worker's name, and its `backend_type` in pg_stat_activity.
pub const BACKEND_TYPE: &str = "leaderlock worker";

/// First retry delay when lapsed leases had to be skipped because another
/// transaction holds them locked; doubles up to the naptime.
const LOCKED_RETRY_MS: i64 = 10;

/// What the worker knows between checks.
#[derive(Default)]
struct State {
    /// Extension OID in this database when last seen; None when absent.
    extension: Option<pg_sys::Oid>,
    told_standby: bool,
    /// Current retry delay for locked lapsed rows, in ms (0: none pending).
    locked_retry_ms: i64,
    /// Ended sessions whose bound leases are not all vacated yet.
    ended_sessions: Vec<Session>,
    /// When sessions gone without a word were last looked for (0: never,
    /// so the first check after a start, or a crash, looks).
    last_sweep: i64,
    /// Retry delay while ended sessions' leases are locked, in ms.
    session_retry_ms: i64,
    /// Sessions that found the ended-sessions queue full, as last seen.
    queue_overflows: u64,
    /// The session settings are still to be pinned (new, or re-created).
    pin_settings: bool,
    /// When the history was last numbered (0: never).
    last_numbered: i64,
    /// Since when committed transitions await a position (None: none known).
    pending_since: Option<i64>,
    /// The last numbering left rows for another round.
    backlog: bool,
    /// The last check found a primary with the failover step taken: the
    /// history may be numbered.
    primary: bool,
    /// Numberings failed since the last one that did not, and when one was
    /// last logged.
    numbering_failures: u64,
    failure_logged_at: i64,
    /// When the runs' retention last ran.
    last_runs_pruned: i64,
    /// The launcher's reloads of the settings as of this worker's own
    /// (`databases::settings_reloaded`).
    reloads: u32,
}

/// The runs' retention runs at most this often.
const RUNS_PRUNE_MS: i64 = 1_000;

/// A numbering that keeps failing is logged at most this often.
const FAILURE_LOG_MS: i64 = 60_000;

/// Contract 23: how long after the first commit of a transition the
/// history is numbered, in milliseconds. A transition is readable about
/// this long after its commit; the transitions committed meanwhile cost one
/// numbering (one commit), not one each, and it comes after a hand-over's
/// critical moments, not during them.
pub const HISTORY_GAP_MS: i64 = 50;

/// Contract 23: the least time between two numberings, in milliseconds,
/// while transitions keep coming: each numbering is a commit, and its WAL
/// flush, when it meets a hand-over's, delays it by one flush; four a
/// second meet fewer hand-overs than twenty (what it costs them:
/// bench/README.md). A transition after a quiet spell is still numbered
/// `HISTORY_GAP_MS` after its commit.
const HISTORY_SPACING_MS: i64 = 250;

/// The longest the history goes without a numbering round (its pruning
/// by age, rows no commit announced: a worker started after them).
const HISTORY_ROUND_MS: i64 = 1_000;

#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn leaderlock_worker_main(arg: pg_sys::Datum) {
    bgworker::standard_signal_handlers();
    let oid = pg_sys::Oid::from(arg.value() as u32);
    bgworker::connect(oid);
    // A catalog lookup: inside a transaction.
    let database = BackgroundWorker::transaction(databases::current_name);
    let mut state = State {
        reloads: (arg.value() as u64 >> 32) as u32,
        ..State::default()
    };
    // A database without the extension takes no slot in shared memory (a
    // role that may only create databases could otherwise fill them all).
    let found = {
        let mut state = std::panic::AssertUnwindSafe(&mut state);
        let database = database.as_str();
        BackgroundWorker::transaction(move || extension_ready(&mut state, database).is_some())
    };
    if !found {
        if let Some(slot) = databases::find(oid.to_u32()) {
            slot.absent.store(true, Ordering::SeqCst);
        }
        return;
    }
    let Some(slot) = databases::mine() else {
        log!(
            "leaderlock worker: cannot serve database \"{database}\": leaderlock.max_databases \
             ({}) databases with the extension are served already; raise it (restart needed)",
            settings::MAX_DATABASES.get()
        );
        return;
    };
    // (after the claim above: a command that found no slot left an entry
    // that this sees, see `databases::keep_out`)
    if slot.paused() {
        // A command needs the database: left on request, so the launcher
        // starts the next worker without backing off.
        slot.stepped_aside.store(true, Ordering::SeqCst);
        return;
    }
    if !worker_wakeup::register_worker(slot) {
        return; // another worker serves it
    }
    slot.absent.store(false, Ordering::SeqCst);

    loop {
        // A reload the launcher read since this worker's start or its last
        // look: read the settings too (its SIGHUP may have come before this
        // worker set its handlers).
        let reloads = databases::settings_reloads();
        if reloads != state.reloads {
            state.reloads = reloads;
            bgworker::ask_reload();
        }
        bgworker::reload_config();
        if let Some(why) = must_stop(slot, &database) {
            log!("leaderlock worker for database \"{database}\": {why}; exiting");
            slot.stepped_aside.store(true, Ordering::SeqCst);
            return;
        }
        worker_wakeup::check_started();
        let Some(sleep_ms) = check(&mut state, &database) else {
            // Not installed: the launcher starts a worker again when a
            // CREATE EXTENSION commits here.
            slot.absent.store(true, Ordering::SeqCst);
            return;
        };
        sleep_numbering(&mut state, clock::now() + sleep_ms * 1000);
    }
}

/// Sleeps until `wake_at` (the next check), or until a wake-up asks for a
/// check, numbering the history when due on the way (contract 23). A
/// commit's wake-up for the history alone only notes that rows wait: the
/// numbering comes `HISTORY_GAP_MS` later, and no check runs at the
/// commit of a release, while its follower takes over.
fn sleep_numbering(state: &mut State, wake_at: i64) {
    loop {
        let now = clock::now();
        if state.pending_since.is_none() && worker_wakeup::take_history_pending() {
            state.pending_since = Some(now);
        }
        let due = numbering_due(state.pending_since, state.last_numbered, state.backlog);
        if now >= due && state.primary {
            match number_history(state) {
                Some(more) => {
                    state.backlog = more; // a full batch: another round soon
                    if more {
                        state.pending_since = Some(now);
                    }
                }
                None => return, // not installed: the check tells
            }
            continue;
        }
        let until = if state.primary {
            due.min(wake_at)
        } else {
            wake_at
        };
        if now >= until {
            return;
        }
        // Rounded up: waking before it would find nothing due.
        let woken = bgworker::wait_woken((until - now + 999) / 1000, i64::MAX);
        if woken
            && (worker_wakeup::check_wanted()
                || bgworker::reload_pending()
                || databases::settings_reloads() != state.reloads)
        {
            return;
        }
    }
}

/// Why this worker must stop now, if it must.
fn must_stop(slot: &Slot, database: &str) -> Option<&'static str> {
    if !settings::served().includes(database) {
        Some("no longer included by leaderlock.databases")
    } else if slot.paused() {
        Some("the database is being dropped, renamed, copied or made a template")
    } else {
        None
    }
}

/// A step of the worker's round that reads the lease clock's now.
type RoundStep = fn(i64) -> usize;

/// One check. Returns how long to sleep, in milliseconds; None when the
/// extension is not installed here (any more).
fn check(state: &mut State, database: &str) -> Option<i64> {
    let naptime = i64::from(settings::NAPTIME.get());
    let mut state = std::panic::AssertUnwindSafe(state);
    BackgroundWorker::transaction(move || {
        let state = &mut **state;
        // Looked for on a standby too: a worker stays only where the
        // extension is installed.
        state.primary = false;
        let schema = extension_ready(state, database)?;
        let _call = call::enter_worker(schema);
        if state.pin_settings {
            bgworker::pin_settings();
            state.pin_settings = false;
        }
        if unsafe { pg_sys::RecoveryInProgress() } {
            // Hot standby: write nothing, poll for promotion.
            if !state.told_standby {
                log!(
                    "leaderlock worker for database \"{database}\": server is in recovery; \
                     waiting for promotion"
                );
                state.told_standby = true;
            }
            return Some(naptime.min(1_000));
        }
        if state.told_standby {
            log!("leaderlock worker for database \"{database}\": server promoted; expiring leases");
            state.told_standby = false;
        }
        if !failover::make_leases_outlast_failover() {
            return Some(LOCKED_RETRY_MS); // another transaction is taking the step
        }
        state.primary = true;
        let now = clock::now();
        end_sessions(state, now);
        expiry::end_abandoned(now);
        let mut next = expiry::next_check(now);
        let mut expired_all = 0usize;
        // A full batch: more are waiting, and the round goes again at once,
        // after the steps below (one role's flood of lapsed leases keeps
        // none of them from another role's schedules, marks and groups).
        let mut full = false;
        if next.is_some_and(|n| n <= now) {
            (expired_all, full) = expiry::expire_lapsed(now, expiry::BATCH);
            next = expiry::next_check(now);
        }
        // Contract 24: the due instants nobody claimed, recorded missed;
        // contract 25: the keys expected to be led, checked; contract 26:
        // the groups whose revocations ran out or whose members may have
        // lapsed, stepped. A failure of any is rolled back alone and
        // logged, never taking the expiries down with it.
        if schema_version::has_slots() {
            // (each a bounded round: a full one is followed at once by another)
            let steps: [(&str, RoundStep, usize); 3] = [
                (
                    "the schedules were not settled",
                    settle::settle,
                    settle::INSTANTS_PER_ROUND,
                ),
                (
                    "the keys expected to be led were not checked",
                    expected::check_due,
                    expected::MARKS_PER_ROUND,
                ),
                (
                    "the groups were not stepped",
                    groups::settle_due,
                    groups::GROUPS_PER_ROUND,
                ),
            ];
            for (what, step, bound) in steps {
                match plans::caught(|| step(now)) {
                    Ok(done) => full |= done >= bound,
                    Err((code, message)) => warning!(
                        "leaderlock worker: {what}: {message} (SQLSTATE {})",
                        plans::sqlstate(code)
                    ),
                }
            }
            if !full {
                next = next
                    .into_iter()
                    .chain(settle::next_settle())
                    .chain(expected::next_check())
                    .chain(groups::next_check())
                    .min();
            }
        }
        if full {
            return Some(0);
        }
        let sleep_ms = sleep_after_check(state, next, expired_all, naptime);
        Some(if state.ended_sessions.is_empty() {
            sleep_ms
        } else {
            // some of their leases were locked: again soon, backing off
            sleep_ms.min(state.session_retry_ms)
        })
    })
}

/// When the history is next numbered: `HISTORY_GAP_MS` after the first
/// commit that awaits a position (`pending_since`), at least
/// `HISTORY_SPACING_MS` after the last numbering unless it left a
/// `backlog`, and at least every `HISTORY_ROUND_MS` (the pruning by age).
fn numbering_due(pending_since: Option<i64>, last_numbered: i64, backlog: bool) -> i64 {
    let spacing = if backlog { 0 } else { HISTORY_SPACING_MS };
    pending_since
        .map_or(i64::MAX, |t| {
            (t + HISTORY_GAP_MS * 1000).max(last_numbered + spacing * 1000)
        })
        .min(last_numbered + HISTORY_ROUND_MS * 1000)
}

/// Contract 23: numbers and prunes the history, in a transaction of its
/// own, apart from the checks: their expiries commit (their rows free for
/// takers, their announcements sent) without waiting for a numbering a
/// flood of transitions made long, and are numbered here with the rest.
/// Whether rows are left for another round; None when the extension is
/// not installed (any more).
fn number_history(state: &mut State) -> Option<bool> {
    let mut state = std::panic::AssertUnwindSafe(state);
    BackgroundWorker::transaction(move || {
        let state = &mut **state;
        // The one the check saw, or the check tells (and logs) what changed.
        let oid = unsafe { pg_sys::get_extension_oid(c"leaderlock".as_ptr(), true) };
        if state.extension != Some(oid) {
            return None;
        }
        let _call = call::enter_worker(bgworker::extension_schema()?);
        let now = clock::now();
        state.last_numbered = now;
        state.pending_since = None;
        // What commits before the numbering's snapshot it numbers; what
        // commits after sets the flag again.
        worker_wakeup::take_history_pending();
        // A numbering that fails (a publication it cannot delete under, a
        // table changed behind the extension) is rolled back alone, logged,
        // and tried again at the next round: it never takes the worker,
        // and so the expiries, down with it.
        // The runs' retention, at most once a second (contract 22).
        if now - state.last_runs_pruned >= RUNS_PRUNE_MS * 1000 {
            state.last_runs_pruned = now;
            if let Err((code, message)) = plans::caught(|| runs::prune_expired(now)) {
                warning!(
                    "leaderlock worker: the runs' retention did not run: {message} (SQLSTATE {})",
                    plans::sqlstate(code)
                );
            }
        }
        match plans::caught(|| numbering::number_and_prune(now)) {
            Ok(more) => {
                state.numbering_failures = 0;
                Some(more)
            }
            Err((code, message)) => {
                state.numbering_failures += 1;
                if state.numbering_failures == 1
                    || now - state.failure_logged_at >= FAILURE_LOG_MS * 1000
                {
                    state.failure_logged_at = now;
                    warning!(
                        "leaderlock worker: the history was not numbered ({} time(s) since it \
                         last was): {message} (SQLSTATE {}); tried again every second",
                        state.numbering_failures,
                        plans::sqlstate(code)
                    );
                }
                Some(false)
            }
        }
    })
}

/// Contract 10: vacates the leases of sessions that ended, as the exiting
/// backends reported them (`sessions.rs`), and, at start, after a report
/// was lost, and every `SWEEP_INTERVAL_MS`, those of any session gone.
fn end_sessions(state: &mut State, now: i64) {
    let here = unsafe { pg_sys::MyDatabaseId }.to_u32();
    let (ended, overflowed) = sessions::take_ended(here, &mut state.queue_overflows);
    state.ended_sessions.extend(ended);
    if overflowed || now - state.last_sweep >= sessions::SWEEP_INTERVAL_MS * 1000 {
        // Again while a full batch was locked and some of it vacated (rows
        // of live sessions stay locked by us and come back; they stop it).
        loop {
            let (locked, vacated) = expiry::end_orphaned_sessions(expiry::BATCH);
            if (locked as i64) < expiry::BATCH || vacated == 0 {
                break;
            }
        }
        state.last_sweep = now;
    }
    state.ended_sessions.retain(|s| !expiry::end_session(s));
    state.session_retry_ms = if state.ended_sessions.is_empty() {
        0
    } else {
        backoff(state.session_retry_ms, i64::from(settings::NAPTIME.get()))
    };
}

/// The next retry delay for locked rows: `LOCKED_RETRY_MS` first
/// (`current` 0), then doubling up to the naptime.
fn backoff(current: i64, naptime: i64) -> i64 {
    if current == 0 {
        LOCKED_RETRY_MS
    } else {
        (current * 2).min(naptime)
    }
}

/// Decides the sleep after a check, and tells backends when we will wake.
fn sleep_after_check(state: &mut State, next: Option<i64>, expired: usize, naptime: i64) -> i64 {
    let now = clock::now();
    let sleep_ms = match next {
        None => naptime,
        Some(n) if n > now => {
            state.locked_retry_ms = 0;
            // Round up: waking before the expiry would find nothing to do.
            ((n - now + 999) / 1000).min(naptime)
        }
        Some(_) => {
            // Lapsed leases remain: locked by another transaction (retry with
            // backoff) or lapsed during this check (retry at once).
            if expired > 0 {
                state.locked_retry_ms = 0;
                0
            } else {
                state.locked_retry_ms = backoff(state.locked_retry_ms, naptime);
                state.locked_retry_ms
            }
        }
    };
    worker_wakeup::sleeping_until(now + sleep_ms * 1000);
    sleep_ms
}

/// The extension's schema here, or None when it is not installed; logs
/// when it is not and was expected (named in `leaderlock.databases`, or
/// dropped while we served it), and when it (re)appears.
fn extension_ready(state: &mut State, database: &str) -> Option<pg_sys::Oid> {
    let oid = unsafe { pg_sys::get_extension_oid(c"leaderlock".as_ptr(), true) };
    let schema = bgworker::extension_schema();
    let Some(schema) = schema else {
        if state.extension.is_some() {
            log!("leaderlock worker for database \"{database}\": extension dropped; exiting");
        } else if oid != pg_sys::InvalidOid {
            log!(
                "leaderlock worker: database \"{database}\" is not UTF8; leaderlock supports \
                 UTF8 databases only; not serving it"
            );
        } else if settings::served().names(database) {
            log!(
                "leaderlock worker: extension \"leaderlock\" is not installed in database \
                 \"{database}\", which leaderlock.databases names; run CREATE EXTENSION \
                 leaderlock there (a worker starts when it commits)"
            );
        } else {
            debug1!("leaderlock worker: extension not installed in database \"{database}\"");
        }
        return None;
    };
    if state.extension != Some(oid) {
        log!("leaderlock worker started, serving database \"{database}\"");
        state.extension = Some(oid);
        state.pin_settings = true;
    }
    Some(schema)
}

#[cfg(test)]
mod unit {
    use super::*;

    const MS: i64 = 1000;

    #[test]
    fn a_transition_after_a_quiet_spell_is_numbered_a_gap_after_its_commit() {
        let last = 10_000 * MS;
        let commit = last + 5_000 * MS;
        // (the round of every second came in between; its numbering was last)
        assert_eq!(
            numbering_due(Some(commit), commit - 400 * MS, false),
            commit + HISTORY_GAP_MS * MS
        );
        assert_eq!(
            numbering_due(None, last, false),
            last + HISTORY_ROUND_MS * MS
        );
    }

    #[test]
    fn transitions_that_keep_coming_are_numbered_at_most_every_spacing() {
        let last = 10_000 * MS;
        let commit = last + 10 * MS;
        assert_eq!(
            numbering_due(Some(commit), last, false),
            last + HISTORY_SPACING_MS * MS
        );
        // a full batch left behind: the next round after the gap only
        assert_eq!(
            numbering_due(Some(last), last, true),
            last + HISTORY_GAP_MS * MS
        );
    }

    #[test]
    fn the_round_of_every_second_bounds_all() {
        const { assert!(HISTORY_GAP_MS < HISTORY_SPACING_MS) };
        const { assert!(HISTORY_SPACING_MS < HISTORY_ROUND_MS) };
        let last = 10_000 * MS;
        assert!(numbering_due(Some(last + 990 * MS), last, false) <= last + HISTORY_ROUND_MS * MS);
    }
}
