//! Against a real server: LEADERLOCK_DSN names a database with leaderlock
//! (skipped without it). Stops a backend with SIGSTOP: run on the server's
//! host as root or as the server's user. The test command runs it on 15.

use std::time::Duration;

use leaderlock_client::{pg_config_from_env, Elector, ElectorConfig};
use tokio::time::{sleep, Instant};

/// LEADERLOCK_DSN, or None (the test is skipped, saying so).
fn server() -> Option<String> {
    let dsn = std::env::var("LEADERLOCK_DSN").ok();
    if dsn.is_none() {
        eprintln!("LEADERLOCK_DSN is not set: skipped");
    }
    dsn
}

async fn sql_i64(dsn: &str, query: &str, app: &str) -> Option<i64> {
    let (client, conn) = tokio_postgres::connect(dsn, tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(conn);
    let row = client.query_opt(query, &[&app]).await.expect(query);
    row.map(|r| r.get::<_, i64>(0))
}

async fn leader(dsn: &str, key: &str) -> Option<String> {
    let (client, conn) = tokio_postgres::connect(dsn, tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(conn);
    let row = client
        .query_one("SELECT le_leader($1)", &[&key])
        .await
        .expect("le_leader");
    row.get(0)
}

async fn term_when_leading(e: &Elector) -> i64 {
    let until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < until {
        if let Some(l) = e.leadership() {
            return l.term;
        }
        sleep(Duration::from_millis(20)).await;
    }
    panic!("never led");
}

fn signal(pid: i64, sig: libc::c_int) {
    // SAFETY: kill(2) with a pid and a signal number; no memory involved.
    unsafe { libc::kill(pid as libc::pid_t, sig) };
}

/// An elector for `id` on `key` with `ttl` (its connections named `app`),
/// leading; then its backend stopped (SIGSTOP): whatever it sends next
/// hangs. The config (to campaign again), its term, and the backend's pid.
async fn lead_then_freeze(
    dsn: &str,
    key: &str,
    id: &str,
    app: &str,
    ttl: Duration,
) -> (
    leaderlock_client::ConnectConfig,
    ElectorConfig,
    Elector,
    i64,
    i64,
) {
    let db = pg_config_from_env(Some(&format!("{dsn} application_name={app}"))).expect("dsn");
    let mut config = ElectorConfig::with_ttl(key.to_string(), ttl);
    config.id = id.to_string();
    let elector = Elector::start(db.clone(), config.clone());
    let term = term_when_leading(&elector).await;
    let newest = "SELECT pid::int8 FROM pg_stat_activity WHERE application_name = $1 \
                  ORDER BY backend_start DESC LIMIT 1";
    let pid = sql_i64(dsn, newest, app)
        .await
        .expect("the elector's backend");
    signal(pid, libc::SIGSTOP);
    (db, config, elector, term, pid)
}

/// The release hangs (its backend stopped) and is given up on: it may still
/// arrive. The next campaign under the same id sends it again first, so it
/// takes a new term instead of extending the old one; the late release,
/// served at last, names the old term and ends nothing.
#[tokio::test]
async fn a_release_that_heard_no_answer_is_sent_again_before_the_next_campaign() {
    let Some(dsn) = server() else {
        return;
    };
    let tag = format!("{:x}", std::process::id());
    let (key, me, app) = (
        format!("rust-unanswered-{tag}"),
        format!("rust-me-{tag}"),
        format!("leaderlock-rust-test-{tag}"),
    );
    let (db, config, first, old, pid) =
        lead_then_freeze(&dsn, &key, &me, &app, Duration::from_millis(1500)).await;
    let released = first.shutdown().await;
    assert!(!released, "the release cannot have been answered");

    let again = Elector::start(db, config);
    let term = term_when_leading(&again).await;
    signal(pid, libc::SIGCONT);
    assert!(
        term > old,
        "led again in term {term} after {old}: the old tenure was extended"
    );
    let pending = format!(
        "SELECT count(*) FROM pg_stat_activity WHERE pid = {pid} AND $1 <> '' \
         AND NOT (state = 'idle' AND strpos(query, 'le_release') > 0)"
    );
    let until = Instant::now() + Duration::from_secs(10);
    while sql_i64(&dsn, &pending, &app).await != Some(0) {
        assert!(Instant::now() < until, "the late release was never served");
        sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(leader(&dsn, &key).await.as_deref(), Some(me.as_str()));
    assert!(again.leadership().is_some_and(|l| l.term == term));
    again.shutdown().await;
}

/// A guarded transaction of the old tenure still open: the release sent
/// again is answered false while the tenure is live; the campaign waits,
/// and leads in a new term once the lock is gone, never in the old one.
#[tokio::test]
async fn a_release_sent_again_that_meets_its_row_locked_holds_the_campaign_back() {
    let Some(dsn) = server() else {
        return;
    };
    let tag = format!("{:x}-locked", std::process::id());
    let (key, me, app) = (
        format!("rust-{tag}"),
        format!("rust-me-{tag}"),
        format!("leaderlock-rust-test-{tag}"),
    );
    // still live when the lock goes
    let (db, config, first, old, pid) =
        lead_then_freeze(&dsn, &key, &me, &app, Duration::from_secs(6)).await;
    let (blocker, conn) = tokio_postgres::connect(&dsn, tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(conn);
    blocker.batch_execute("BEGIN").await.expect("begin");
    blocker
        .query("SELECT le_assert_leader($1, $2)", &[&key, &me])
        .await
        .expect("share-locks the row");
    assert!(
        !first.shutdown().await,
        "the release cannot have been answered"
    );

    let again = Elector::start(db, config);
    sleep(Duration::from_secs(1)).await;
    assert!(
        again.leadership().is_none(),
        "led while the old tenure's row was locked"
    );
    blocker.batch_execute("COMMIT").await.expect("commit");
    let term = term_when_leading(&again).await;
    signal(pid, libc::SIGCONT);
    assert!(
        term > old,
        "led again in term {term} after {old}: the old tenure was extended"
    );
    again.shutdown().await;
}

/// On the schema 0.4.0 (the library updated, ALTER EXTENSION not yet run),
/// le_renew and le_release have no term: the elector leads, renews and
/// releases without it.
#[tokio::test]
async fn on_the_schema_before_terms_it_leads_renews_and_releases() {
    let Some(dsn) = server() else {
        return;
    };
    let name = format!("ll_rust_old_schema_{:x}", std::process::id());
    let (admin, conn) = tokio_postgres::connect(&dsn, tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(conn);
    for statement in [
        format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
        format!("CREATE DATABASE {name}"),
    ] {
        admin.batch_execute(&statement).await.expect("a database");
    }
    let old_dsn = format!("{dsn} dbname={name}");
    let (c, conn) = tokio_postgres::connect(&old_dsn, tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(conn);
    let installed = c
        .batch_execute("CREATE EXTENSION leaderlock VERSION '0.4.0'")
        .await;
    if let Ok(()) = installed {
        let key = format!("rust-old-{:x}", std::process::id());
        let db = pg_config_from_env(Some(&old_dsn)).expect("dsn");
        let e = Elector::start(
            db,
            ElectorConfig::with_ttl(key.clone(), Duration::from_secs(1)),
        );
        let term = term_when_leading(&e).await;
        sleep(Duration::from_millis(2500)).await; // renewals every ttl/3
        assert!(
            e.leadership().is_some_and(|l| l.term == term),
            "the lease was lost: renewals failed on the old schema"
        );
        assert!(e.shutdown().await, "the release was refused");
        assert_eq!(leader(&old_dsn, &key).await, None);
    } else {
        eprintln!("no compiled edition 0.4.0 here: {installed:?}");
    }
    drop(c);
    admin
        .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        .await
        .expect("drop");
}

/// Contract 22: two schedulers of one job every 300 ms: each due run is
/// claimed by one of them, terms grow with the due instants, the runs
/// finish; a claim taken over (backdated by the test, claimed by the other)
/// is no longer ours: its renewal is refused and its finish too.
#[tokio::test]
async fn two_schedulers_run_each_due_run_once() {
    use leaderlock_client::{RunConfig, Schedule, Scheduler, Turn};
    let Some(dsn) = server() else { return };
    let job = format!("rust-runs-{}", std::process::id());
    let scheduler = |id: &str| {
        let mut config = RunConfig::new(job.clone(), Duration::from_secs(2));
        config.id = id.into();
        config.misfire_grace = Some(Duration::from_secs(5));
        let schedule = Schedule::every(Duration::from_millis(300)).unwrap();
        Scheduler::new(pg_config_from_env(Some(&dsn)).unwrap(), schedule, config)
    };
    let (mut a, mut b) = (scheduler("a"), scheduler("b"));
    let mut ran = Vec::new();
    let until = Instant::now() + Duration::from_millis(2500);
    while Instant::now() < until {
        // b looks only after a has finished its run: b settles it, or claims
        // the ones a has not reached.
        let s = if ran.len() % 2 == 0 { &mut a } else { &mut b };
        match s.next().await.expect("next") {
            Turn::Run(run) => {
                assert!(run.is_ours());
                assert!(s.finish(&run, true, None).await.unwrap());
                ran.push((run.due, run.term));
            }
            Turn::Settled { outcome, .. } => assert_eq!(outcome.as_deref(), Some("succeeded")),
            Turn::Registered(_) => unreachable!("a schedule of its own"),
        }
    }
    assert!(ran.len() >= 5, "{ran:?}");
    for w in ran.windows(2) {
        assert!(w[0].0 < w[1].0 && w[0].1 < w[1].1, "{ran:?}");
    }
    // A claim lost: a claims the next run, the claim is backdated, b takes it.
    let mut lost = loop {
        // (a first settles the runs b ran meanwhile)
        if let Turn::Run(run) = a.next().await.unwrap() {
            break run;
        }
    };
    let backdate = format!(
        "UPDATE leaderlock_runs SET expires_at = le_now() - interval '1 second' \
         WHERE job = $1 AND term = {} RETURNING term",
        lost.term
    );
    assert_eq!(sql_i64(&dsn, &backdate, &job).await, Some(lost.term));
    let mut taken = None;
    while taken.is_none() {
        if let Turn::Run(run) = b.next().await.unwrap() {
            if run.due == lost.due {
                taken = Some(run);
            } else {
                b.finish(&run, true, None).await.unwrap();
            }
        }
    }
    let taken = taken.unwrap();
    assert!(taken.term > lost.term);
    assert!(
        !a.renew(&mut lost).await.unwrap(),
        "a renewed a run b took over"
    );
    assert!(!a.finish(&lost, true, None).await.unwrap());
    assert!(b.finish(&taken, false, Some("taken over")).await.unwrap());
}

/// Contract 21 through the client: many keys under one session, kept by
/// its one renewer past several ttls; a rival refused meanwhile; a renewal
/// the server refuses (the session closed elsewhere) makes every key not
/// ours within a renewal period, before its deadline; a closed session's
/// keys are free at once.
#[tokio::test]
async fn a_session_keeps_its_keys_until_it_is_refused_or_closed() {
    use leaderlock_client::{Session, SessionConfig};
    let Some(dsn) = server() else { return };
    let prefix = format!("rust-session-{}-", std::process::id());
    let mut config = SessionConfig::new(Duration::from_millis(900));
    config.id = format!("{prefix}holder");
    let session = Session::open(pg_config_from_env(Some(&dsn)).unwrap(), config.clone())
        .await
        .unwrap();
    let mut leases = Vec::new();
    for i in 0..20 {
        let key = format!("{prefix}{i}");
        leases.push(session.try_acquire(&key).await.unwrap().expect("taken"));
    }
    assert!(leases.iter().all(|l| l.term >= 1));
    sleep(Duration::from_millis(2_500)).await;
    assert!(session.is_alive() && leases.iter().all(|l| l.is_ours()));
    let held = format!(
        "SELECT count(*) FROM leaderlock_status WHERE key LIKE $1 || '%' AND state = 'held' \
         AND holder = '{prefix}holder'"
    );
    assert_eq!(sql_i64(&dsn, &held, &prefix).await, Some(20));
    let rival = Session::open(
        pg_config_from_env(Some(&dsn)).unwrap(),
        SessionConfig::new(Duration::from_secs(5)),
    )
    .await
    .unwrap();
    assert!(rival.try_acquire(&leases[0].key).await.unwrap().is_none());
    // Closed behind its back: the next renewal is refused, and every key
    // is not ours from then, long before the local deadline would pass.
    let close =
        "SELECT count(*) FILTER (WHERE le_close_session(session)) FROM leaderlock_sessions \
                 WHERE id = $1";
    assert_eq!(
        sql_i64(&dsn, close, &format!("{prefix}holder")).await,
        Some(1)
    );
    let until = Instant::now() + Duration::from_millis(600);
    while session.is_alive() && Instant::now() < until {
        sleep(Duration::from_millis(10)).await;
    }
    assert!(!session.is_alive() && !leases[0].is_ours());
    // Its keys were released: the rival takes one at once.
    let taken = rival
        .acquire(&leases[0].key, Duration::from_secs(1))
        .await
        .unwrap();
    assert!(taken.is_some_and(|l| l.term > leases[0].term));
    assert!(rival.close().await.unwrap());
    assert!(!session.close().await.unwrap());
}

/// Contracts 17 and 21 through the client: a key of two slots held under
/// two sessions, each lease with its own term; a third session refused,
/// then given the slot its closing rival frees, with the next term.
#[tokio::test]
async fn sessions_share_a_key_of_many_slots() {
    use leaderlock_client::{Session, SessionConfig};
    let Some(dsn) = server() else { return };
    let key = format!("rust-session-slots-{}", std::process::id());
    let mut sessions = Vec::new();
    for name in ["a", "b", "c"] {
        let mut config = SessionConfig::new(Duration::from_secs(5));
        config.id = format!("{key}-{name}");
        let s = Session::open(pg_config_from_env(Some(&dsn)).unwrap(), config)
            .await
            .unwrap();
        sessions.push(s);
    }
    let a = sessions[0]
        .try_acquire_slot(&key, 2)
        .await
        .unwrap()
        .expect("a slot");
    let b = sessions[1]
        .try_acquire_slot(&key, 2)
        .await
        .unwrap()
        .expect("a slot");
    assert!(a.is_ours() && b.is_ours() && b.term > a.term);
    assert!(sessions[2]
        .try_acquire_slot(&key, 2)
        .await
        .unwrap()
        .is_none());
    let c = sessions.pop().unwrap();
    let b_session = sessions.pop().unwrap();
    let waiting = tokio::spawn(async move {
        let lease = c.acquire_slot(&key, 2, Duration::from_secs(5)).await;
        (c, lease)
    });
    sleep(Duration::from_millis(300)).await;
    assert!(b_session.close().await.unwrap());
    let (c, lease) = waiting.await.unwrap();
    let lease = lease.unwrap().expect("the freed slot");
    assert!(lease.is_ours() && lease.term > b.term);
    assert!(c.close().await.unwrap());
    assert!(sessions.pop().unwrap().close().await.unwrap());
}
