//! Groups (contract 26): join, leave, the assignment, ack (the guard,
//! le_assert_partition, is in `assert.rs`).

use crate::api::input;
use crate::base::clock;
use crate::base::settings;
use crate::lease::groups::{self, Join, Refusal};
use crate::store::call::{self, Access};
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;

fn refused(group: &str, member: &str, why: Refusal) -> ! {
    let (code, message, hint) = match why {
        Refusal::NoPartitions => (
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("leaderlock: group {group:?} does not exist; a new group needs its partitions"),
            "Give partitions => N to the first join.",
        ),
        Refusal::NotGroupOwner => (
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            format!(
                "leaderlock: permission denied to change group {group:?}: another role made it"
            ),
            "Join without partitions or drain to take the group as it is.",
        ),
        Refusal::MemberOfAnotherRole => (
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            format!(
                "leaderlock: member {member:?} of group {group:?} is live under another role's session"
            ),
            "Each member's name is its own: give this one another name.",
        ),
    };
    ErrorReport::new(code, message, "le_join")
        .set_hint(hint)
        .report(PgLogLevel::ERROR);
    unreachable!("an ERROR does not return")
}

/// A role that is not a superuser makes at most
/// `leaderlock.max_jobs_per_role` groups (53400 beyond, nothing written).
fn may_make_group() {
    let caller = call::caller();
    if unsafe { pg_sys::superuser_arg(caller) } {
        return;
    }
    let limit = i64::from(settings::MAX_JOBS_PER_ROLE.get());
    if groups::groups_made_by(caller) >= limit {
        ErrorReport::new(
            PgSqlErrorCode::ERRCODE_CONFIGURATION_LIMIT_EXCEEDED,
            format!(
                "leaderlock: this role has made leaderlock.max_jobs_per_role ({limit}) groups; \
                 no new group is made"
            ),
            "may_make_group",
        )
        .set_hint("A superuser may raise the limit.")
        .report(PgLogLevel::ERROR);
    }
}

/// Contract 26: `member` joins `group` for `ttl` (or renews its
/// membership: its session, and every partition it owns with it). The
/// first join makes the group with `partitions` (and `drain`, the time a
/// live owner has to give a revoked partition back: 10 seconds if not
/// given); its owner may change either later. The member's session.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn le_join(
    group: Option<&str>,
    member: Option<&str>,
    ttl: Option<Interval>,
    partitions: default!(Option<i32>, "NULL"),
    drain: default!(Option<Interval>, "NULL"),
    fcinfo: pg_sys::FunctionCallInfo,
) -> pgrx::Uuid {
    let _call = unsafe { call::enter(fcinfo, Access::Write) };
    let group = input::name("group", group);
    let member = input::name("member", member);
    let ttl = input::ttl(ttl);
    let partitions = input::partitions(partitions);
    let drain = input::drain(drain);
    let join = Join {
        ttl,
        partitions,
        drain,
    };
    groups::join(group, member, &join, clock::now(), may_make_group)
        .unwrap_or_else(|why| refused(group, member, why))
}

/// Contract 26: `member` leaves `group`; the partitions it owned go to the
/// others at once (it must have stopped acting on them). Whether it was a
/// member (live ones of the caller's role only).
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn le_leave(group: Option<&str>, member: Option<&str>, fcinfo: pg_sys::FunctionCallInfo) -> bool {
    let _call = unsafe { call::enter(fcinfo, Access::Write) };
    let group = input::name("group", group);
    let member = input::name("member", member);
    groups::leave(group, member, clock::now())
}

/// Contract 26: `member` gives back `partition` of `group`, revoked from it
/// in `term` (after draining it); it goes to its next owner at once.
/// Whether it was so revoked.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn le_ack(
    group: Option<&str>,
    member: Option<&str>,
    partition: Option<i32>,
    term: Option<i64>,
    fcinfo: pg_sys::FunctionCallInfo,
) -> bool {
    let _call = unsafe { call::enter(fcinfo, Access::Write) };
    let group = input::name("group", group);
    let member = input::name("member", member);
    let partition = input::partition(partition);
    let term = input::required_term(term);
    groups::ack(group, member, partition, term, clock::now())
}

/// Contract 26: `member`'s partitions of `group`, with their terms and
/// state: `owned`, or `revoked` (drain it, then le_ack, by `until`).
#[pg_extern(stable, parallel_safe)]
#[search_path(pg_catalog, pg_temp)]
fn le_assignment(
    group: Option<&str>,
    member: Option<&str>,
    fcinfo: pg_sys::FunctionCallInfo,
) -> TableIterator<
    'static,
    (
        name!(partition, i32),
        name!(term, i64),
        name!(state, String),
        name!(until, Option<TimestampWithTimeZone>),
    ),
> {
    let _call = unsafe { call::enter(fcinfo, Access::Read) };
    let group = input::name("group", group);
    let member = input::name("member", member);
    let rows: Vec<_> = groups::assignment(group, member)
        .into_iter()
        .map(|a| {
            let state = if a.revoke_until.is_some() {
                "revoked"
            } else {
                "owned"
            };
            (
                a.partition,
                a.term,
                state.to_owned(),
                a.revoke_until.map(clock::ts),
            )
        })
        .collect();
    TableIterator::new(rows)
}
