//! The group member (contract 26) against a real server: LEADERLOCK_DSN
//! names a database with leaderlock (skipped without it), as a role that
//! may lock leaderlock's tables (the test command's superuser).

use std::collections::BTreeMap;
use std::time::Duration;

use leaderlock_client::{pg_config_from_env, Member, MemberConfig, MemberEvent};
use tokio::time::{timeout, Instant};

fn server() -> Option<String> {
    let dsn = std::env::var("LEADERLOCK_DSN").ok();
    if dsn.is_none() {
        eprintln!("LEADERLOCK_DSN is not set: skipped");
    }
    dsn
}

async fn connect(dsn: &str) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(dsn, tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(conn);
    client
}

fn member(dsn: &str, group: &str, id: &str, ttl: Duration) -> Member {
    let db = pg_config_from_env(Some(&format!("{dsn} application_name={id}"))).expect("dsn");
    let mut config = MemberConfig::new(group, ttl);
    config.id = id.into();
    config.partitions = Some(4);
    config.drain = Some(Duration::from_secs(5));
    Member::start(db, config)
}

/// Reads `m`'s events until it owns `want` partitions by them (acking
/// every revocation at once): `owned`, kept by the caller from the
/// member's first event on (`m.owned()` may change before the events that
/// tell it are read). Those, with their terms.
async fn until_owning(
    m: &mut Member,
    owned: &mut BTreeMap<i32, i64>,
    want: usize,
    limit: Duration,
) -> BTreeMap<i32, i64> {
    let until = Instant::now() + limit;
    while owned.len() != want || m.owned().len() != want {
        let left = until.saturating_duration_since(Instant::now());
        let event = timeout(left, m.next_event())
            .await
            .unwrap_or_else(|_| panic!("not owning {want} partitions in time: {owned:?}"))
            .expect("the member stopped");
        match event {
            MemberEvent::Assigned {
                partition, term, ..
            } => {
                owned.insert(partition, term);
            }
            MemberEvent::Revoked { partition, term } => {
                owned.remove(&partition);
                m.ack(partition, term);
            }
            MemberEvent::Lost { partition, .. } => {
                owned.remove(&partition);
            }
            MemberEvent::Failed { error } => panic!("refused: {error}"),
            _ => {}
        }
    }
    owned.clone()
}

/// A second member joins: the first is told to give back half, gives it
/// back, and the newcomer owns it, told by the notification well before
/// its next round; the guard admits the owner in its term and refuses the
/// other; leaving hands everything to the one left at once.
#[tokio::test]
async fn members_share_move_on_ack_and_guard_writes() {
    let Some(dsn) = server() else {
        return;
    };
    let group = format!("rust-group-{:x}", std::process::id());
    let ttl = Duration::from_secs(6);
    let (mut a_owns, mut b_owns) = (BTreeMap::new(), BTreeMap::new());
    let mut a = member(&dsn, &group, "a", ttl);
    let all = until_owning(&mut a, &mut a_owns, 4, Duration::from_secs(5)).await;
    assert_eq!(all.keys().copied().collect::<Vec<_>>(), vec![1, 2, 3, 4]);

    let joined = Instant::now();
    let mut b = member(&dsn, &group, "b", ttl);
    let kept = until_owning(&mut a, &mut a_owns, 2, Duration::from_secs(5)).await;
    let given = until_owning(&mut b, &mut b_owns, 2, Duration::from_secs(5)).await;
    // Moved on the ack, heard at once: no round (every 2 s) waited for.
    assert!(
        joined.elapsed() < Duration::from_millis(1500),
        "the newcomer owned its share {:?} after joining",
        joined.elapsed()
    );
    for (p, term) in &given {
        assert!(!kept.contains_key(p));
        assert!(
            *term > all[p],
            "partition {p}: term {term} after {}",
            all[p]
        );
    }

    let mut client = connect(&dsn).await;
    let (mine, theirs) = (*kept.keys().next().unwrap(), *given.keys().next().unwrap());
    let tx = client.transaction().await.unwrap();
    assert_eq!(a.guard(&tx, mine).await.unwrap(), kept[&mine]);
    let refused = a.guard(&tx, theirs).await.unwrap_err();
    assert_eq!(refused.sqlstate(), Some("LE001"), "{refused}");
    tx.rollback().await.unwrap();
    // The server's guard itself refuses a superseded term.
    let stale = format!(
        "SELECT le_assert_partition('{group}', {theirs}, 'a', {})",
        all[&theirs]
    );
    let e = client.simple_query(&stale).await.unwrap_err();
    assert_eq!(e.code().map(|c| c.code()), Some("LE001"), "{e}");

    let left = Instant::now();
    assert!(a.leave().await.unwrap());
    until_owning(&mut b, &mut b_owns, 4, Duration::from_secs(5)).await;
    assert!(left.elapsed() < Duration::from_millis(1500));
    assert!(b.leave().await.unwrap());
}

/// The member's renewals wait (its session's row locked by another
/// transaction) and time out: at the local deadline every partition is
/// lost and `owns` answers None, though no answer said so; once the lock
/// is gone it owns them again.
#[tokio::test]
async fn a_member_that_cannot_renew_stops_at_its_local_deadline() {
    let Some(dsn) = server() else {
        return;
    };
    let group = format!("rust-group-stall-{:x}", std::process::id());
    let ttl = Duration::from_millis(1500);
    let mut m = member(&dsn, &group, "stalled", ttl);
    let mut owns = BTreeMap::new();
    until_owning(&mut m, &mut owns, 4, Duration::from_secs(5)).await;
    let mut client = connect(&dsn).await;
    let tx = client.transaction().await.unwrap();
    tx.query_one(
        "SELECT 1 FROM leaderlock_sessions s JOIN leaderlock_members m USING (session) \
         WHERE m.grp = $1 AND m.member = 'stalled' FOR UPDATE OF s",
        &[&group],
    )
    .await
    .unwrap();
    let locked = Instant::now();
    let mut lost = 0;
    while lost < 4 {
        match timeout(ttl * 2, m.next_event()).await {
            Ok(Some(MemberEvent::Lost { .. })) => lost += 1,
            Ok(Some(MemberEvent::Disconnected { .. })) => {}
            other => panic!("not lost by the deadline: {other:?}"),
        }
    }
    let after = locked.elapsed();
    assert!(m.owns(1).is_none() && m.owned().is_empty());
    // The deadline is at most ttl - margin after the lock (the last round
    // was sent before it); the events reach this task after it, so a
    // scheduling allowance.
    let allowance = Duration::from_millis(250);
    assert!(
        after <= ttl + allowance,
        "lost {after:?} after the lock, ttl {ttl:?}"
    );
    tx.rollback().await.unwrap();
    owns.clear(); // (every partition was told lost above)
    until_owning(&mut m, &mut owns, 4, Duration::from_secs(5)).await;
    assert!(m.leave().await.unwrap());
}
