//! Against a real server: LEADERLOCK_DSN names a database with leaderlock
//! (skipped without it). Stops a backend with SIGSTOP: run on the server's
//! host as root or as the server's user. The test command runs it on 15.

use std::time::Duration;

use leaderlock_client::{pg_config_from_env, Elector, ElectorConfig};
use tokio::time::{sleep, Instant};

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

/// The release hangs (its backend stopped) and is given up on: it may still
/// arrive. The next campaign under the same id sends it again first, so it
/// takes a new term instead of extending the old one; the late release,
/// served at last, names the old term and ends nothing.
#[tokio::test]
async fn a_release_that_heard_no_answer_is_sent_again_before_the_next_campaign() {
    let Ok(dsn) = std::env::var("LEADERLOCK_DSN") else {
        eprintln!("LEADERLOCK_DSN is not set: skipped");
        return;
    };
    let tag = format!("{:x}", std::process::id());
    let (key, me, app) = (
        format!("rust-unanswered-{tag}"),
        format!("rust-me-{tag}"),
        format!("leaderlock-rust-test-{tag}"),
    );
    let elector_dsn = format!("{dsn} application_name={app}");
    let db = pg_config_from_env(Some(&elector_dsn)).expect("dsn");
    let mut config = ElectorConfig::with_ttl(key.clone(), Duration::from_millis(1500));
    config.id = me.clone();
    let first = Elector::start(db.clone(), config.clone());
    let old = term_when_leading(&first).await;
    let newest = "SELECT pid::int8 FROM pg_stat_activity WHERE application_name = $1 \
                  ORDER BY backend_start DESC LIMIT 1";
    let pid = sql_i64(&dsn, newest, &app)
        .await
        .expect("the elector's backend");
    signal(pid, libc::SIGSTOP);
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
