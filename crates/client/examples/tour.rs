//! The Rust client's tour (tests/clients/tours.py): every statement of
//! `sql.rs` that the CLI's tour does not send, through the library's API,
//! each answer checked. `tour DSN PREFIX [--pooled]`; exits 1 on the first
//! unexpected answer.
use std::time::Duration;

use leaderlock_client::{
    pg_config_from_env, ConnectConfig, Db, Elector, ElectorConfig, Event, HistoryFilter,
    HistoryWatcher, Member, MemberConfig, MemberEvent, Session, SessionConfig,
};
use tokio::time::{sleep, timeout, Instant};
use tokio_postgres::types::Type;

fn fail(what: String) -> ! {
    println!("FAILED: {what}");
    std::process::exit(1);
}

fn step(what: &str) {
    println!("{what}");
}

async fn leading(e: &mut Elector, within: Duration) -> i64 {
    let until = Instant::now() + within;
    while Instant::now() < until {
        if let Some(l) = e.leadership() {
            return l.term;
        }
        let _ = timeout(Duration::from_millis(50), e.next_event()).await;
    }
    fail(format!("{} never led", e.config().key));
}

/// An elector of `key` with ttl 1.5 s, configured by `f`.
fn elector(db: &ConnectConfig, key: String, f: impl FnOnce(&mut ElectorConfig)) -> Elector {
    let mut config = ElectorConfig::with_ttl(key, Duration::from_millis(1500));
    f(&mut config);
    Elector::start(db.clone(), config)
}

/// A connection of the tour's own (to lock a row as another transaction).
async fn own_connection(db: &ConnectConfig) -> Db {
    let (client, mut messages) = db.connect().await.unwrap_or_else(|e| fail(e.to_string()));
    tokio::spawn(async move {
        use futures_util::StreamExt;
        while let Some(Ok(_)) = messages.next().await {}
    });
    Db::attach(client, db.schema())
        .await
        .unwrap_or_else(|e| fail(e.to_string()))
}

/// A member of `group` named `id` (ttl 1.5 s, 4 partitions).
fn member(db: &ConnectConfig, group: &str, id: String) -> Member {
    let mut config = MemberConfig::new(group, Duration::from_millis(1500));
    config.id = id;
    config.partitions = Some(4);
    config.drain = Some(Duration::from_secs(2));
    Member::start(db.clone(), config)
}

/// Reads `m`'s events (acking revocations) until, by them, it owns `want`
/// partitions (`owned()` may say so before the events are read): `owned`
/// counts them from its first event on.
async fn owning(m: &mut Member, owned: &mut usize, want: usize) {
    let until = Instant::now() + Duration::from_secs(8);
    while *owned != want {
        match timeout(
            until.saturating_duration_since(Instant::now()),
            m.next_event(),
        )
        .await
        {
            Ok(Some(MemberEvent::Assigned { .. })) => *owned += 1,
            Ok(Some(MemberEvent::Revoked { partition, term })) => {
                *owned -= 1;
                m.ack(partition, term)
            }
            Ok(Some(MemberEvent::Lost { .. })) => *owned -= 1,
            Ok(Some(MemberEvent::Failed { error })) => fail(error.to_string()),
            Ok(Some(_)) => {}
            _ => fail(format!("{} never owned {want} partitions", m.id())),
        }
    }
}

async fn group(db: &ConnectConfig, prefix: &str) {
    let name = format!("{prefix}-group");
    let (mut a_owns, mut b_owns) = (0, 0);
    let mut a = member(db, &name, format!("{prefix}-a"));
    owning(&mut a, &mut a_owns, 4).await;
    let mut b = member(db, &name, format!("{prefix}-b"));
    owning(&mut a, &mut a_owns, 2).await;
    owning(&mut b, &mut b_owns, 2).await;
    let (&partition, &term) = b.owned().iter().next().expect("owns two");
    let other = own_connection(db).await;
    other
        .batch_execute("BEGIN")
        .await
        .unwrap_or_else(|e| fail(e.to_string()));
    match b.guard(other.client(), partition).await {
        Ok(t) if t == term => {}
        other => fail(format!("the guard of partition {partition}: {other:?}")),
    }
    other
        .batch_execute("COMMIT")
        .await
        .unwrap_or_else(|e| fail(e.to_string()));
    for m in [a, b] {
        if !m.leave().await.unwrap_or_else(|e| fail(e.to_string())) {
            fail("a member's leave was refused".into());
        }
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (dsn, prefix) = (&args[1], &args[2]);
    let db = pg_config_from_env(Some(dsn)).unwrap_or_else(|e| fail(e.to_string()));

    // One slot: lead, renew, a renewal that meets the row share-locked by
    // another transaction (the "still ours?" read), a rival refused (the
    // leader read), release on shutdown.
    step("elector of one slot");
    let key = format!("{prefix}-one");
    let mut a = elector(&db, key.clone(), |c| c.id = format!("{prefix}-a"));
    let term = leading(&mut a, Duration::from_secs(5)).await;
    let other = own_connection(&db).await;
    other
        .batch_execute("BEGIN")
        .await
        .unwrap_or_else(|e| fail(e.to_string()));
    let assert = "SELECT @extschema@.le_assert_leader(key => $1, id => $2)";
    let id = format!("{prefix}-a");
    let args: [(&(dyn tokio_postgres::types::ToSql + Sync), Type); 2] =
        [(&key, Type::TEXT), (&id, Type::TEXT)];
    if other.query_one(assert, &args).await.is_err() {
        fail("le_assert_leader refused the leader".into());
    }
    let mut deferred = false;
    let until = Instant::now() + Duration::from_secs(3);
    while !deferred && Instant::now() < until {
        if let Ok(Some(Event::RenewalDeferred(_))) =
            timeout(Duration::from_millis(100), a.next_event()).await
        {
            deferred = true;
        }
    }
    if !deferred {
        fail("a renewal meeting the locked row was not deferred".into());
    }
    other
        .batch_execute("COMMIT")
        .await
        .unwrap_or_else(|e| fail(e.to_string()));
    let mut b = elector(&db, key.clone(), |c| c.id = format!("{prefix}-b"));
    let until = Instant::now() + Duration::from_secs(3);
    let mut refused = false;
    while !refused && Instant::now() < until {
        if let Ok(Some(Event::Refused { holder })) =
            timeout(Duration::from_millis(100), b.next_event()).await
        {
            refused = holder.as_deref() == Some(id.as_str());
        }
    }
    if !refused {
        fail("the rival was not refused naming the leader".into());
    }
    if a.leadership().map(|l| l.term) != Some(term) {
        fail("the leader lost its lease".into());
    }
    if !a.shutdown().await {
        fail("the release was refused".into());
    }
    if leading(&mut b, Duration::from_secs(5)).await <= term {
        fail("the next term is not higher".into());
    }
    b.shutdown().await;

    step("elector of a key of two slots, and a ranked candidate");
    let mut s = elector(&db, format!("{prefix}-slots"), |c| c.slots = 2);
    leading(&mut s, Duration::from_secs(5)).await;
    sleep(Duration::from_millis(700)).await; // a renewal
    s.shutdown().await;
    // (Priorities need the compiled edition's shared memory.)
    if std::env::var("LEADERLOCK_TOUR_EDITION").as_deref() != Ok("portable") {
        let mut r = elector(&db, format!("{prefix}-ranked"), |c| c.priority = 1);
        leading(&mut r, Duration::from_secs(5)).await;
        r.shutdown().await;
    }

    step("session: open, keys under it, a slot, renewals, release, close");
    let mut config = SessionConfig::new(Duration::from_millis(1500));
    config.id = format!("{prefix}-session");
    config.lock_delay = Duration::from_millis(100);
    let session = Session::open(db.clone(), config)
        .await
        .unwrap_or_else(|e| fail(e.to_string()));
    let one = session
        .try_acquire(&format!("{prefix}-s1"))
        .await
        .unwrap_or_else(|e| fail(e.to_string()))
        .unwrap_or_else(|| fail("try_acquire under the session refused".into()));
    let two = session
        .acquire(&format!("{prefix}-s2"), Duration::from_millis(200))
        .await
        .unwrap_or_else(|e| fail(e.to_string()))
        .unwrap_or_else(|| fail("acquire under the session refused".into()));
    session
        .try_acquire_slot(&format!("{prefix}-s3"), 2)
        .await
        .unwrap_or_else(|e| fail(e.to_string()))
        .unwrap_or_else(|| fail("a slot under the session refused".into()));
    session
        .acquire_slot(&format!("{prefix}-s4"), 2, Duration::from_millis(200))
        .await
        .unwrap_or_else(|e| fail(e.to_string()))
        .unwrap_or_else(|| fail("a slot under the session refused".into()));
    if one.term < 1 || two.term < 1 {
        fail("terms under the session".into());
    }
    sleep(Duration::from_millis(1200)).await; // renewals of the session
    if !session.is_alive() || !one.is_ours() {
        fail("the session lapsed".into());
    }
    if !session.release(&one).await.unwrap_or(false) {
        fail("release under the session refused".into());
    }
    if !session.close().await.unwrap_or(false) {
        fail("close refused".into());
    }

    // (Groups are the compiled edition's.)
    if std::env::var("LEADERLOCK_TOUR_EDITION").as_deref() != Ok("portable") {
        step("group: two members share its partitions, a revoked one given back, the guard, both leave");
        group(&db, prefix).await;
    }

    step("history: from the tour's first transition, every one of its keys");
    let filter = HistoryFilter {
        key: None,
        key_prefix: Some(prefix.clone()),
    };
    let mut watcher = HistoryWatcher::new(db.clone(), Some(0), filter);
    let mut seen = 0;
    let until = Instant::now() + Duration::from_secs(10);
    while seen < 6 && Instant::now() < until {
        match timeout(Duration::from_secs(2), watcher.next()).await {
            Ok(Ok(_)) => seen += 1,
            Ok(Err(e)) => fail(e.to_string()),
            Err(_) => {}
        }
    }
    if seen < 6 {
        fail(format!("the watcher read {seen} transitions"));
    }
    let mut from_now = HistoryWatcher::new(
        db.clone(),
        None,
        HistoryFilter {
            key: Some(format!("{prefix}-later")),
            key_prefix: None,
        },
    );
    // Connected first (nothing to read yet): "now" is before the leader.
    let _ = timeout(Duration::from_millis(500), from_now.next()).await;
    let mut later = elector(&db, format!("{prefix}-later"), |_| {});
    leading(&mut later, Duration::from_secs(5)).await;
    match timeout(Duration::from_secs(5), from_now.next()).await {
        Ok(Ok(t)) if t.event == "acquired" => {}
        other => fail(format!("a watcher from now on read {other:?}")),
    }
    later.shutdown().await;
    // (Scheduled runs: `leaderlock run --every` in the CLI's tour.)
    println!("the Rust client's tour passed");
}
