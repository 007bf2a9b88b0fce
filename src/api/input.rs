//! Argument validation (contract section 6). Every SQL-callable function
//! runs these before touching anything, so a rejected call changes nothing.

pub use crate::base::names::MAX_NAME_BYTES;
use crate::base::preload;
use crate::base::settings;
use crate::base::value::{JsonbText, MAX_VALUE_BYTES};
use crate::shmem::databases;
use crate::shmem::sessions;
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;

const MICROS_PER_DAY: i128 = 86_400_000_000;

pub use crate::base::ttl::Ttl;

fn reject(code: PgSqlErrorCode, message: String, hint: Option<&str>) -> ! {
    reject_with(code, message, None, hint)
}

fn reject_with(
    code: PgSqlErrorCode,
    message: String,
    detail: Option<&str>,
    hint: Option<&str>,
) -> ! {
    let mut report = ErrorReport::new(code, message, "leaderlock");
    if let Some(detail) = detail {
        report = report.set_detail(detail);
    }
    if let Some(hint) = hint {
        report = report.set_hint(hint);
    }
    report.report(PgLogLevel::ERROR);
    unreachable!("an ERROR does not return")
}

/// Contract 13: only superusers and members of role `leaderlock_admin`
/// may force a release; others get SQLSTATE 42501. The session's current
/// role counts, as for ownership.
pub fn may_force_release() {
    let me = unsafe { pg_sys::GetOuterUserId() };
    let admin = unsafe { pg_sys::get_role_oid(c"leaderlock_admin".as_ptr(), true) };
    let allowed = unsafe {
        pg_sys::superuser_arg(me)
            || (admin != pg_sys::InvalidOid && pg_sys::is_member_of_role(me, admin))
    };
    if !allowed {
        reject(
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            "leaderlock: permission denied to force the release of a lease".to_string(),
            Some(
                "Superusers and members of role leaderlock_admin may \
                 (CREATE ROLE leaderlock_admin NOLOGIN; GRANT leaderlock_admin TO ...).",
            ),
        );
    }
}

/// `key` or `id`: not NULL, not empty, at most 255 bytes.
pub fn name<'a>(arg: &str, value: Option<&'a str>) -> &'a str {
    let Some(value) = value else {
        reject(
            PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
            format!("leaderlock: {arg} must not be NULL"),
            None,
        );
    };
    if value.is_empty() {
        reject(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("leaderlock: {arg} must not be empty"),
            None,
        );
    }
    if value.len() > MAX_NAME_BYTES {
        reject(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!(
                "leaderlock: {arg} is {} bytes long; the limit is {MAX_NAME_BYTES} bytes",
                value.len()
            ),
            None,
        );
    }
    value
}

/// A required ttl.
pub fn ttl(value: Option<Interval>) -> Ttl {
    let Some(value) = value else {
        reject(
            PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
            "leaderlock: ttl must not be NULL".to_string(),
            None,
        );
    };
    check_ttl(value)
}

/// An optional ttl (le_renew): NULL keeps the stored one.
pub fn optional_ttl(value: Option<Interval>) -> Option<Ttl> {
    value.map(check_ttl)
}

fn check_ttl(value: Interval) -> Ttl {
    if value.months() != 0 {
        reject(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("leaderlock: ttl must not have a month or year part (got {value})"),
            Some("A month has no fixed length; give the ttl in days, hours, minutes or seconds."),
        );
    }
    let total = total_micros(&value);
    if total <= 0 {
        reject(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("leaderlock: ttl must be positive (got {value})"),
            None,
        );
    }
    let max = settings::max_ttl_micros();
    if total > i128::from(max) {
        reject(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!(
                "leaderlock: ttl {value} is above leaderlock.max_ttl ({})",
                seconds(max)
            ),
            Some("Give a shorter ttl, or raise leaderlock.max_ttl (superuser)."),
        );
    }
    Ttl(total as i64)
}

/// `wait` of le_acquire: not NULL, no month part, not negative, at most
/// `leaderlock.max_wait`; in microseconds (0: try once). A wait needs a
/// new snapshot per attempt, which only READ COMMITTED gives.
pub fn wait(value: Option<Interval>) -> i64 {
    let Some(value) = value else {
        reject(
            PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
            "leaderlock: wait must not be NULL".to_string(),
            Some("Give '0' to try once without waiting."),
        );
    };
    if value.months() != 0 {
        reject(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("leaderlock: wait must not have a month or year part (got {value})"),
            None,
        );
    }
    let total = total_micros(&value);
    if total < 0 {
        reject(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("leaderlock: wait must not be negative (got {value})"),
            None,
        );
    }
    let max = settings::max_wait_micros();
    if total > i128::from(max) {
        reject(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!(
                "leaderlock: wait {value} is above leaderlock.max_wait ({})",
                seconds(max)
            ),
            Some(
                "A waiting statement holds its snapshot, which holds back vacuum: \
                 wait in shorter rounds, or raise leaderlock.max_wait (superuser).",
            ),
        );
    }
    if total > 0 && unsafe { pg_sys::XactIsoLevel } >= pg_sys::XACT_REPEATABLE_READ as i32 {
        reject(
            PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
            "leaderlock: le_acquire can wait only in a READ COMMITTED transaction".to_string(),
            Some(
                "Under REPEATABLE READ or SERIALIZABLE the transaction's snapshot never \
                 sees the release; call it outside that transaction, or with wait '0'.",
            ),
        );
    }
    total as i64
}

/// Most slots a key may admit (contract 17): a semaphore, not a table of
/// members (each slot is a row a waiting acquire may look at).
pub const MAX_SLOTS: i32 = 1000;

/// `slots` of le_try_acquire and le_acquire: not NULL, 1 to `MAX_SLOTS`,
/// and more than 1 only for a lease that is not session-bound.
pub fn slots(value: Option<i32>, session_bound: bool) -> i32 {
    let Some(value) = value else {
        reject(
            PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
            "leaderlock: slots must not be NULL".to_string(),
            Some("Give 1 for a lease of one holder."),
        );
    };
    if !(1..=MAX_SLOTS).contains(&value) {
        reject(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("leaderlock: slots must be between 1 and {MAX_SLOTS} (got {value})"),
            None,
        );
    }
    if value > 1 && session_bound {
        reject(
            PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
            "leaderlock: a key of more than one slot cannot be session-bound".to_string(),
            Some("Acquire with session_bound => false and a short ttl."),
        );
    }
    value
}

/// `priority` of le_acquire (contract 18): not NULL; other than 0 only
/// where the library is preloaded (the candidates are in shared memory).
pub fn priority(value: Option<i32>) -> i32 {
    let Some(value) = value else {
        reject(
            PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
            "leaderlock: priority must not be NULL".to_string(),
            Some("Give 0 for the default priority."),
        );
    };
    if value != 0 && !preload::preloaded() {
        reject(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            "leaderlock: priorities need the library preloaded".to_string(),
            Some("Add leaderlock to shared_preload_libraries and restart, or give priority 0."),
        );
    }
    value
}

/// Contract 17: acquiring a key that has live holders with another number
/// of slots than it admits raises 22023 and changes nothing.
pub fn slots_differ(key: &str, has: i32, asked: i32) -> ! {
    reject_with(
        PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
        format!(
            "leaderlock: key \"{}\" admits {has} holder(s) at once, not {asked}",
            key.escape_debug()
        ),
        Some("While a key has live holders, every acquisition must give the same slots."),
        Some("Give the key's slots, or wait until it has no live holder to change them."),
    )
}

/// `session_bound`: not NULL; true only where a worker runs now and can end
/// the lease when the session does (one that is only expected might never
/// come: no background worker process free, or the launcher's limits).
pub fn session_bound(value: Option<bool>) -> bool {
    let Some(bound) = value else {
        reject(
            PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
            "leaderlock: session_bound must not be NULL".to_string(),
            None,
        );
    };
    if !bound {
        return false;
    }
    if !sessions::available() {
        reject(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            "leaderlock: session-bound leases need leaderlock in shared_preload_libraries"
                .to_string(),
            Some("Without the background worker nothing would end the lease with its session."),
        );
    }
    let here = databases::current_name();
    if !settings::served().includes(&here) {
        reject(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!(
                "leaderlock: session-bound leases work only in the databases the workers \
                 serve, and leaderlock.databases does not include \"{here}\""
            ),
            Some("Add this database to leaderlock.databases, or use a plain lease."),
        );
    }
    if !databases::worker_serves_this_database() {
        reject(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!(
                "leaderlock: no worker serves database \"{here}\" now, and nothing else would \
                 end a session-bound lease with its session"
            ),
            Some(
                "A worker starts within a second of the server or of CREATE EXTENSION unless \
                 no background worker process is free or leaderlock's limits leave this \
                 database none (the server log says which); le_capabilities()->>'worker' tells. \
                 Or use a plain lease.",
            ),
        );
    }
    true
}

/// The leader value: NULL (none) or at most 2000 bytes as text.
pub fn value(value: Option<JsonbText>) -> Option<JsonbText> {
    if let Some(v) = &value {
        if v.0.len() > MAX_VALUE_BYTES {
            reject(
                PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                format!(
                    "leaderlock: value is {} bytes as text; the limit is {MAX_VALUE_BYTES} bytes",
                    v.0.len()
                ),
                Some("Keep the value small (an address, a version); store more elsewhere."),
            );
        }
    }
    value
}

/// An interval without its month part, in microseconds; a day is 24 hours.
fn total_micros(value: &Interval) -> i128 {
    i128::from(value.days()) * MICROS_PER_DAY + i128::from(value.micros())
}

/// `term` of le_assert_leader: NULL (no check) or not negative.
pub fn term(value: Option<i64>) -> Option<i64> {
    if let Some(term) = value {
        if term < 0 {
            reject(
                PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                format!("leaderlock: term must not be negative (got {term})"),
                None,
            );
        }
    }
    value
}

/// Longest `detail` of le_finish_run, in bytes: a short note, not a log.
pub const MAX_DETAIL_BYTES: usize = 1000;

/// `due` of the run functions (contract 22): not NULL, finite; on the
/// lease clock, in microseconds.
pub fn due(value: Option<TimestampWithTimeZone>) -> i64 {
    let Some(value) = value else {
        reject(
            PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
            "leaderlock: due must not be NULL".to_string(),
            None,
        );
    };
    match crate::base::clock::micros(Some(value)) {
        Some(us) if value.is_finite() => us,
        _ => reject(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            "leaderlock: due must be a finite instant".to_string(),
            None,
        ),
    }
}

/// A claim before its run is due (22023): due instants are on the server's
/// lease clock (`le_now()`), never a client's.
pub fn not_before_due(due: i64, now: i64) {
    if due > now {
        reject_with(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            "leaderlock: the run is not due yet; it cannot be claimed before its due instant"
                .to_string(),
            Some(&format!("It is due in {}.", seconds(due - now))),
            Some("Due instants are on the server's lease clock: compare them with le_now()."),
        );
    }
}

/// `misfire_grace` of le_claim_run: NULL (no limit), else not negative and
/// without a month part; in microseconds.
pub fn misfire_grace(value: Option<Interval>) -> Option<i64> {
    let value = value?;
    let total = total_micros(&value);
    if value.months() != 0 || total < 0 {
        reject(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!(
                "leaderlock: misfire_grace must not be negative nor have a month or year part (got {value})"
            ),
            None,
        );
    }
    Some(i64::try_from(total).unwrap_or(i64::MAX))
}

/// The shortest period of a schedule kept in the database (contract 24):
/// the worker records each instant nobody claimed, and its time is shared.
pub const MIN_SCHEDULE_PERIOD_US: i64 = 1_000_000;

/// `every` and `cron`/`tz` of le_schedule: exactly one of every and cron;
/// every at least a second in whole milliseconds, without a month part; a
/// cron expression the clients' libraries all read alike, in a known time
/// zone (which applies to cron only). Its calendar.
pub fn schedule_calendar(
    every: Option<Interval>,
    cron: Option<&str>,
    tz: Option<&str>,
) -> (Option<i64>, leaderlock_protocol::calendar::Schedule) {
    let bad = |message: String, hint: Option<&str>| -> ! {
        reject(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            message,
            hint,
        )
    };
    let Some(tz) = tz else {
        reject(
            PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
            "leaderlock: tz must not be NULL".to_string(),
            Some("Give an IANA time zone name, e.g. 'Europe/Paris', or 'UTC'."),
        );
    };
    let every = match (every, cron) {
        (Some(_), Some(_)) | (None, None) => bad(
            "leaderlock: give exactly one of every and cron".to_string(),
            Some("every => '5 minutes', or cron => '0 3 * * *' (with tz)."),
        ),
        (Some(e), None) => {
            let us = total_micros(&e);
            if e.months() != 0
                || us < i128::from(MIN_SCHEDULE_PERIOD_US)
                || us % 1_000 != 0
                || us > i128::from(i64::MAX)
            {
                bad(
                    format!(
                        "leaderlock: every must be at least 1 second, in whole milliseconds, \
                         without a month or year part (got {e})"
                    ),
                    Some(
                        "The worker records every instant nobody claimed: a schedule kept in \
                          the database runs at most once a second.",
                    ),
                );
            }
            if tz != "UTC" {
                bad(
                    format!("leaderlock: tz applies to cron only (got tz {tz:?} with every)"),
                    Some("A period runs at its multiples since the Unix epoch, in any time zone."),
                );
            }
            Some(us as i64)
        }
        (None, Some(_)) => None,
    };
    match crate::lease::schedules::calendar(every, cron, tz) {
        Ok(c) => (every, c),
        Err(why) => bad(format!("leaderlock: {why}"), None),
    }
}

/// Contract 24: a claim of a scheduled job's run by a role that is not a
/// member of the schedule's owner (42501), or of an instant not on its
/// calendar (22023).
pub fn claim_refused(job: &str, why: crate::lease::schedules::ClaimRefused) -> ! {
    match why {
        crate::lease::schedules::ClaimRefused::NotOwner => reject(
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            format!(
                "leaderlock: permission denied to claim a run of job {job:?}: its schedule is \
                 another role's"
            ),
            Some("A scheduled job's runs are claimed by members of the role that scheduled it."),
        ),
        crate::lease::schedules::ClaimRefused::OffCalendar => reject(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("leaderlock: the instant is not a due instant of job {job:?}'s schedule"),
            Some(
                "le_next_due(job, after) gives the schedule's instants; a replica run with its \
                  own --every or --cron differs from the schedule kept in the database.",
            ),
        ),
    }
}

/// `overlap` of le_schedule: allow, forbid or replace.
pub fn overlap(value: Option<&str>) -> leaderlock_protocol::runs::Overlap {
    let Some(value) = value else {
        reject(
            PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
            "leaderlock: overlap must not be NULL".to_string(),
            None,
        );
    };
    leaderlock_protocol::runs::Overlap::named(value).unwrap_or_else(|| {
        reject(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("leaderlock: overlap must be allow, forbid or replace (got {value:?})"),
            None,
        )
    })
}

/// The most a schedule's `backfill` may be: a returning replica runs at
/// most this many missed instants late.
pub const MAX_BACKFILL: i32 = 100;

/// `backfill` of le_schedule: not NULL, 0 to `MAX_BACKFILL`.
pub fn backfill(value: Option<i32>) -> u16 {
    let Some(value) = value else {
        reject(
            PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
            "leaderlock: backfill must not be NULL".to_string(),
            None,
        );
    };
    if !(0..=MAX_BACKFILL).contains(&value) {
        reject(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("leaderlock: backfill must be between 0 and {MAX_BACKFILL} (got {value})"),
            None,
        );
    }
    u16::try_from(value).expect("bounded")
}

/// `misfire_grace` of le_schedule: as le_claim_run's, and NULL for the
/// default: the period with `every`, 5 minutes with a cron expression.
pub fn schedule_grace(value: Option<Interval>, every: Option<i64>) -> i64 {
    misfire_grace(value).unwrap_or(every.unwrap_or(300_000_000))
}

/// `within` of le_expect_leader: not NULL, at least a second (marks are
/// checked every second), without a month part; in microseconds.
pub fn within(value: Option<Interval>) -> i64 {
    let Some(value) = value else {
        reject(
            PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
            "leaderlock: within must not be NULL".to_string(),
            Some("To stop expecting a leader, call le_unexpect_leader(key)."),
        );
    };
    let total = total_micros(&value);
    if value.months() != 0 || total < 1_000_000 || total > i128::from(i64::MAX) {
        reject(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!(
                "leaderlock: within must be at least 1 second, without a month or year part (got {value})"
            ),
            Some("Marks are checked every second: a shorter absence may go unseen."),
        );
    }
    total as i64
}

/// `term` of le_finish_run: required and not negative.
pub fn required_term(value: Option<i64>) -> i64 {
    let Some(term) = term(value) else {
        reject(
            PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
            "leaderlock: term must not be NULL".to_string(),
            Some("Give the term le_claim_run returned."),
        );
    };
    term
}

/// `succeeded` of le_finish_run: not NULL.
pub fn succeeded(value: Option<bool>) -> bool {
    value.unwrap_or_else(|| {
        reject(
            PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
            "leaderlock: succeeded must not be NULL".to_string(),
            None,
        )
    })
}

/// `detail` of le_finish_run: NULL, or at most `MAX_DETAIL_BYTES`.
pub fn detail(value: Option<&str>) -> Option<&str> {
    if let Some(d) = value {
        if d.len() > MAX_DETAIL_BYTES {
            reject(
                PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                format!(
                    "leaderlock: detail is {} bytes long; the limit is {MAX_DETAIL_BYTES} bytes",
                    d.len()
                ),
                None,
            );
        }
    }
    value
}

/// Microseconds as a short human duration, e.g. `86400s` or `0.25s`.
pub fn seconds(micros: i64) -> String {
    if micros % 1_000_000 == 0 {
        format!("{}s", micros / 1_000_000)
    } else {
        let s = format!("{:.6}", micros as f64 / 1e6);
        format!("{}s", s.trim_end_matches('0'))
    }
}

/// Whether `session_bound => true` is taken in this database (for
/// le_capabilities): the checks of `session_bound` above.
pub fn session_bound_offered() -> bool {
    sessions::available()
        && settings::served().includes(&databases::current_name())
        && databases::worker_serves_this_database()
}

/// Longest lock-delay (contract 21), as Consul's: a session's keys are not
/// kept from everyone for longer by one role that walked away.
pub const MAX_LOCK_DELAY_S: i64 = 60;

/// `lock_delay` of le_open_session (contract 21): not NULL, no month part,
/// between 0 and `MAX_LOCK_DELAY_S` (or `leaderlock.max_ttl` when lower);
/// in microseconds.
pub fn lock_delay(value: Option<Interval>) -> i64 {
    let Some(value) = value else {
        reject(
            PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
            "leaderlock: lock_delay must not be NULL".to_string(),
            Some("Give '0' for no lock-delay."),
        );
    };
    let total = total_micros(&value);
    let max = settings::max_ttl_micros().min(MAX_LOCK_DELAY_S * 1_000_000);
    if value.months() != 0 || total < 0 || total > i128::from(max) {
        reject(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!(
                "leaderlock: lock_delay must be between 0 and {} (and at most leaderlock.max_ttl) \
                 without a month or year part (got {value})",
                seconds(max)
            ),
            None,
        );
    }
    total as i64
}

/// A boolean argument that must not be NULL (`keep_values`).
pub fn flag(arg: &str, value: Option<bool>) -> bool {
    let Some(value) = value else {
        reject(
            PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
            format!("leaderlock: {arg} must not be NULL"),
            None,
        );
    };
    value
}

/// A session's handle (contract 21): not NULL.
pub fn session(value: Option<pgrx::Uuid>) -> pgrx::Uuid {
    let Some(value) = value else {
        reject(
            PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
            "leaderlock: session must not be NULL".to_string(),
            Some("Give the uuid le_open_session returned."),
        );
    };
    value
}

/// The most partitions a group has (contract 26).
pub const MAX_PARTITIONS: i32 = 100_000;

/// `partitions` of le_join: NULL (an existing group's count), or 1 to
/// `MAX_PARTITIONS`.
pub fn partitions(value: Option<i32>) -> Option<i32> {
    let p = value?;
    if !(1..=MAX_PARTITIONS).contains(&p) {
        reject(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("leaderlock: partitions must be between 1 and {MAX_PARTITIONS} (got {p})"),
            None,
        );
    }
    Some(p)
}

/// `drain` of le_join: NULL (the group's, or 10 seconds for a new one),
/// or 0 to leaderlock.max_ttl, without a month or year part.
pub fn drain(value: Option<Interval>) -> Option<i64> {
    let value = value?;
    let total = total_micros(&value);
    let max = settings::max_ttl_micros();
    if value.months() != 0 || total < 0 || total > i128::from(max) {
        reject(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!(
                "leaderlock: drain must be between 0 and leaderlock.max_ttl ({}) without a month \
                 or year part (got {value})",
                seconds(max)
            ),
            None,
        );
    }
    Some(total as i64)
}

/// A partition of le_ack and le_assert_partition: from 1 on.
pub fn partition(value: Option<i32>) -> i32 {
    match value {
        None => reject(
            PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
            "leaderlock: partition must not be NULL".to_string(),
            None,
        ),
        Some(p) if p < 1 => reject(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("leaderlock: partition must be 1 or more (got {p})"),
            None,
        ),
        Some(p) => p,
    }
}
