//! `leaderlock run --metrics ADDR`: Prometheus text at `/metrics` and a
//! health check at `/healthz`, over plain HTTP/1.0 (one request per
//! connection, nothing else served), so a supervisor or a Kubernetes probe
//! can see what the elector is doing and whether it is stuck.
use std::collections::BTreeMap;
use std::fmt::Write as _;

pub use crate::schedule_metrics::{write_schedule_metrics, ScheduleRead};
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use leaderlock_client::{Heartbeat, Watchdog};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::time::{timeout_at, Instant};

use crate::text;

/// What `run` has seen, for `/metrics`.
#[derive(Default)]
pub struct Metrics {
    pub leading: bool,
    /// The current or last term (0 before the first).
    pub term: i64,
    pub renewals: u64,
    /// Renewals that failed: no answer in time, or refused while the row
    /// was locked (the ones refused for good end the tenure: `stops`).
    pub renewals_failed: u64,
    /// The local deadline of the current tenure.
    pub deadline: Option<Instant>,
    /// When the current tenure last started or renewed.
    pub last_renewal: Option<Instant>,
    /// Tenures ended, by reason.
    pub stops: BTreeMap<&'static str, u64>,
    /// Exits of the command, by cause (own, stopped, deadline).
    pub command_exits: BTreeMap<&'static str, u64>,
}

pub type Shared = Arc<Mutex<Metrics>>;

/// Serves `/metrics` and `/healthz` on `listener` until the process ends.
/// `/healthz` fails (503) when the elector is past the moment it meant to
/// act by more than `wedged_after` (a call's timeout is well within it),
/// or when it leads and no renewal has succeeded for `renewals_failing`.
pub async fn serve(
    listener: TcpListener,
    key: String,
    metrics: Shared,
    watchdog: Watchdog,
    wedged_after: Duration,
    renewals_failing: Duration,
) {
    let respond = move |path: &str| {
        route(
            path,
            &key,
            &metrics,
            watchdog.overdue(),
            wedged_after,
            renewals_failing,
        )
    };
    accept(listener, Arc::new(respond)).await;
}

/// The status and body for `path`; `overdue`: how late the elector is.
fn route(
    path: &str,
    key: &str,
    metrics: &Shared,
    overdue: Duration,
    wedged_after: Duration,
    renewals_failing: Duration,
) -> (&'static str, String) {
    match path {
        "/metrics" => ("200 OK", render(key, metrics, overdue)),
        "/healthz" => match unhealthy(metrics, overdue, wedged_after, renewals_failing) {
            Some(why) => ("503 Service Unavailable", why),
            None => ("200 OK", "ok\n".into()),
        },
        _ => ("404 Not Found", "not found: /metrics, /healthz\n".into()),
    }
}

pub(crate) type Respond = Arc<dyn Fn(&str) -> (&'static str, String) + Send + Sync>;

/// An answer that may wait (a read of the database at scrape time).
pub(crate) type Answer =
    std::pin::Pin<Box<dyn std::future::Future<Output = (&'static str, String)> + Send>>;
pub(crate) type RespondLater = Arc<dyn Fn(String) -> Answer + Send + Sync>;

/// Connections open at once, at most: beyond it, the oldest is dropped.
const MAX_CONNECTIONS: usize = 128;
/// Connections open at once from one address (an IPv6 /64), at most:
/// beyond it, that address's oldest is dropped, not someone else's.
const MAX_PER_PEER: usize = 16;
/// The request line must have arrived this long after the connect.
const REQUEST_WITHIN: Duration = Duration::from_secs(1);
/// Every connection is closed this long after the connect, at the latest.
const CONNECTION_WITHIN: Duration = Duration::from_secs(2);
/// The request line is read up to this many bytes.
const MAX_REQUEST_LINE: usize = 4096;
/// What the client sends after its request line is read and thrown away
/// up to this many bytes, so that closing does not reset the connection
/// (and lose the answer) while it is still unread.
const MAX_DRAINED: usize = 16 * 1024;

/// The connections open, oldest first; dropping a connection's sender
/// closes it.
#[derive(Default)]
struct Open {
    next: u64,
    connections: BTreeMap<u64, (IpAddr, oneshot::Sender<()>)>,
}

impl Open {
    /// Makes room for one more connection from `peer` (dropping that
    /// peer's oldest when it has `MAX_PER_PEER` open, else the oldest of
    /// all when `MAX_CONNECTIONS` are) and registers it: its number, and
    /// what tells it it has been dropped.
    fn admit(&mut self, peer: IpAddr) -> (u64, oneshot::Receiver<()>) {
        let mut from_peer = self.connections.iter().filter(|(_, (p, _))| *p == peer);
        let oldest = match from_peer.next() {
            Some((&oldest, _)) if from_peer.count() + 1 >= MAX_PER_PEER => Some(oldest),
            _ if self.connections.len() >= MAX_CONNECTIONS => {
                self.connections.keys().next().copied()
            }
            _ => None,
        };
        if let Some(oldest) = oldest {
            self.connections.remove(&oldest);
        }
        let (id, (tx, rx)) = (self.next, oneshot::channel());
        self.next += 1;
        self.connections.insert(id, (peer, tx));
        (id, rx)
    }
}

/// Whom a connection counts against: its address, or an IPv6 address's
/// /64 (what one host is usually given).
fn peer(addr: SocketAddr) -> IpAddr {
    match addr.ip() {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & (!0u128 << 64))),
        },
        v4 => v4,
    }
}

/// Answers each connection accepted on `listener` with `respond`.
///
/// It serves probes, so nothing a client does may keep it from answering
/// the next one for long: the accept loop never waits for a connection to
/// end; each is given `REQUEST_WITHIN` to send its request line and is
/// closed `CONNECTION_WITHIN` after it connected whatever it does; and a
/// new connection beyond `MAX_PER_PEER` or `MAX_CONNECTIONS` makes room by
/// dropping the oldest (idle or slow ones, the answered are gone within a
/// round trip), never by waiting, so a flood of connections that say
/// nothing delays a probe by no more than it takes to accept it.
pub(crate) async fn accept(listener: TcpListener, respond: Respond) {
    let later: RespondLater = Arc::new(move |path: String| {
        let answer = respond(&path);
        Box::pin(async move { answer })
    });
    accept_later(listener, later).await;
}

/// `accept`, with answers that may wait (bounded by the connection's time).
pub(crate) async fn accept_later(listener: TcpListener, respond: RespondLater) {
    let open = Arc::new(Mutex::new(Open::default()));
    loop {
        let (socket, addr) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of file descriptors: free one (the oldest
                // connection's) for the next. Not a busy loop either way.
                if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) {
                    let mut open = open.lock().unwrap_or_else(|e| e.into_inner());
                    if let Some(&oldest) = open.connections.keys().next() {
                        open.connections.remove(&oldest);
                    }
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let (id, dropped) = open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .admit(peer(addr));
        let (open, respond) = (open.clone(), respond.clone());
        tokio::spawn(async move {
            tokio::select! {
                _ = dropped => {}
                () = connection(socket, &respond) => {}
            }
            let mut open = open.lock().unwrap_or_else(|e| e.into_inner());
            open.connections.remove(&id);
        });
    }
}

/// Reads one request line from `socket` and answers it.
async fn connection(mut socket: TcpStream, respond: &RespondLater) {
    let connected = Instant::now();
    let mut request = Vec::new();
    let mut chunk = [0u8; 1024];
    let read_line = async {
        while !request.contains(&b'\n') && request.len() < MAX_REQUEST_LINE {
            match socket.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => request.extend_from_slice(&chunk[..n]),
            }
        }
    };
    if timeout_at(connected + REQUEST_WITHIN, read_line)
        .await
        .is_err()
        || request.is_empty()
    {
        return;
    }
    let line = String::from_utf8_lossy(&request);
    let target = line.split_whitespace().nth(1).unwrap_or("");
    let path = target.split('?').next().unwrap_or("");
    let Ok((status, body)) =
        timeout_at(connected + CONNECTION_WITHIN, respond(path.to_owned())).await
    else {
        return;
    };
    let response = format!(
        "HTTP/1.0 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let answer = async {
        socket.write_all(response.as_bytes()).await?;
        socket.shutdown().await?;
        // Until the client closes (having read the answer), a bounded
        // amount of what it sent after the request line.
        let mut drained = 0;
        while drained < MAX_DRAINED {
            match socket.read(&mut chunk).await? {
                0 => break,
                n => drained += n,
            }
        }
        Ok::<_, std::io::Error>(())
    };
    let _ = timeout_at(connected + CONNECTION_WITHIN, answer).await;
}

/// Why the elector is not healthy, if it is not.
/// `overdue`: how late the elector is (its [`Watchdog`]).
fn unhealthy(
    metrics: &Shared,
    overdue: Duration,
    wedged_after: Duration,
    renewals_failing: Duration,
) -> Option<String> {
    if overdue > wedged_after {
        return Some(format!(
            "wedged: the elector is {:.1} s late\n",
            overdue.as_secs_f64()
        ));
    }
    let m = metrics.lock().unwrap_or_else(|e| e.into_inner());
    let since = m.last_renewal.filter(|_| m.leading)?.elapsed();
    (since > renewals_failing).then(|| {
        format!(
            "leading, but no renewal has succeeded for {:.1} s\n",
            since.as_secs_f64()
        )
    })
}

/// The Prometheus text exposition of `metrics`; `overdue`: how late the
/// elector is (its [`Watchdog`]).
fn render(key: &str, metrics: &Shared, overdue: Duration) -> String {
    let m = metrics.lock().unwrap_or_else(|e| e.into_inner());
    let key = label(key);
    let left = m.deadline.filter(|_| m.leading).map_or(0.0, |d| {
        d.saturating_duration_since(Instant::now()).as_secs_f64()
    });
    let mut out = String::new();
    let mut metric = |name: &str, kind: &str, help: &str, samples: &[(String, String)]| {
        let _ = writeln!(
            out,
            "# HELP leaderlock_{name} {help}\n# TYPE leaderlock_{name} {kind}"
        );
        for (labels, value) in samples {
            let _ = writeln!(out, "leaderlock_{name}{{key=\"{key}\"{labels}}} {value}");
        }
    };
    let one = |v: String| vec![(String::new(), v)];
    metric(
        "leading",
        "gauge",
        "1 while this process leads the key, else 0.",
        &one(u8::from(m.leading).to_string()),
    );
    metric(
        "term",
        "gauge",
        "The term of the current or last tenure (0 before the first).",
        &one(m.term.to_string()),
    );
    metric(
        "renewals_total",
        "counter",
        "Renewals that moved the local deadline.",
        &one(m.renewals.to_string()),
    );
    metric(
        "renewals_failed_total",
        "counter",
        "Renewals that failed without ending the tenure: no answer in time, or a locked row.",
        &one(m.renewals_failed.to_string()),
    );
    metric(
        "deadline_seconds",
        "gauge",
        "Seconds left before the local deadline (0 when not leading).",
        &one(format!("{left:.3}")),
    );
    let by = |name: &str, counts: &BTreeMap<&'static str, u64>| -> Vec<(String, String)> {
        counts
            .iter()
            .map(|(k, v)| (format!(",{name}=\"{k}\""), v.to_string()))
            .collect()
    };
    metric(
        "stops_total",
        "counter",
        "Tenures ended, by reason.",
        &by("reason", &m.stops),
    );
    metric(
        "command_exits_total",
        "counter",
        "Exits of the command, by cause: own, stopped (lease lost or shutdown), deadline.",
        &by("cause", &m.command_exits),
    );
    metric(
        "elector_overdue_seconds",
        "gauge",
        "How late the elector is for what it meant to do (near 0 when healthy).",
        &one(format!("{:.3}", overdue.as_secs_f64())),
    );
    out
}

/// What `run --every/--cron` has seen of its job, for `/metrics`: every
/// due run ends up here once per replica that was up, as its own run or
/// as settled elsewhere, so each replica shows the job's history.
#[derive(Default)]
pub struct RunMetrics {
    /// A run of this replica's command is going on.
    pub running: bool,
    /// Runs this replica claimed.
    pub claimed: u64,
    /// Runs settled, by outcome (`succeeded`, `failed`, `missed`), whoever ran them.
    pub settled: BTreeMap<String, u64>,
    /// Due instants (Unix seconds) of the last run that succeeded, and failed.
    pub last_success_due: Option<f64>,
    pub last_failure_due: Option<f64>,
    /// The job's schedule kept in the database, as last read (None: none).
    pub schedule: Option<ScheduleRead>,
}

pub type SharedRuns = Arc<Mutex<RunMetrics>>;

impl RunMetrics {
    /// A run settled (by this replica or another) with `outcome`.
    pub fn settled(&mut self, due: f64, outcome: &str) {
        *self.settled.entry(outcome.to_owned()).or_default() += 1;
        match outcome {
            "succeeded" => self.last_success_due = Some(due),
            "failed" => self.last_failure_due = Some(due),
            _ => {}
        }
    }
}

/// Serves `/metrics` and `/healthz` for a scheduled job: `/healthz` fails
/// once the database has not answered the scheduler for `silent_after`.
pub async fn serve_runs(
    listener: TcpListener,
    job: String,
    metrics: SharedRuns,
    heartbeat: Heartbeat,
    silent_after: Duration,
) {
    let respond = move |path: &str| match path {
        "/metrics" => ("200 OK", render_runs(&job, &metrics)),
        "/healthz" => match heartbeat.silent_for() {
            Some(since) if since > silent_after => (
                "503 Service Unavailable",
                format!(
                    "the database has not answered for {:.1} s\n",
                    since.as_secs_f64()
                ),
            ),
            _ => ("200 OK", "ok\n".into()),
        },
        _ => ("404 Not Found", "not found: /metrics, /healthz\n".into()),
    };
    accept(listener, Arc::new(respond)).await;
}

fn render_runs(job: &str, metrics: &SharedRuns) -> String {
    let m = metrics.lock().unwrap_or_else(|e| e.into_inner());
    let job = label(job);
    let mut out = String::new();
    let mut metric = |name: &str, kind: &str, help: &str, samples: &[(String, String)]| {
        let _ = writeln!(
            out,
            "# HELP leaderlock_run_{name} {help}\n# TYPE leaderlock_run_{name} {kind}"
        );
        for (labels, value) in samples {
            let _ = writeln!(
                out,
                "leaderlock_run_{name}{{job=\"{job}\"{labels}}} {value}"
            );
        }
    };
    let one = |v: String| vec![(String::new(), v)];
    metric(
        "running",
        "gauge",
        "1 while this replica runs a run of the job, else 0.",
        &one(u8::from(m.running).to_string()),
    );
    metric(
        "claimed_total",
        "counter",
        "Runs of the job this replica claimed.",
        &one(m.claimed.to_string()),
    );
    let outcomes: Vec<(String, String)> = ["succeeded", "failed", "missed"]
        .iter()
        .map(|o| {
            (
                format!(",outcome=\"{o}\""),
                m.settled.get(*o).copied().unwrap_or(0).to_string(),
            )
        })
        .collect();
    metric(
        "settled_total",
        "counter",
        "Runs of the job seen settled, by outcome, whichever replica ran them.",
        &outcomes,
    );
    let due = |t: Option<f64>| one(t.map_or_else(|| "0".into(), |t| format!("{t:.3}")));
    metric(
        "last_success_due_seconds",
        "gauge",
        "Due instant (Unix time) of the last run seen succeed (0: none yet).",
        &due(m.last_success_due),
    );
    metric(
        "last_failure_due_seconds",
        "gauge",
        "Due instant (Unix time) of the last run seen fail (0: none yet).",
        &due(m.last_failure_due),
    );
    if let Some(s) = &m.schedule {
        write_schedule_metrics(&mut out, &[(format!("job=\"{job}\""), s)]);
    }
    out
}

/// A label value: control and format characters written as `\u{..}` (as
/// in text logs), then backslash and double quote escaped as Prometheus
/// wants (it knows no other escape).
pub(crate) fn label(value: &str) -> String {
    text::without_controls(value)
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each reason /healthz fails for, and the healthy cases next to it.
    #[test]
    fn health_fails_when_wedged_or_when_renewals_fail() {
        let (wedged, failing) = (Duration::from_secs(5), Duration::from_secs(4));
        let metrics: Shared = Arc::default();
        let check = |overdue| unhealthy(&metrics, overdue, wedged, failing);
        assert_eq!(check(Duration::ZERO), None);
        assert_eq!(check(Duration::from_secs(5)), None);
        let why = check(Duration::from_millis(5100)).unwrap();
        assert!(
            why.starts_with("wedged: the elector is 5.1 s late"),
            "{why}"
        );
        // A follower has no renewals to fail.
        metrics.lock().unwrap().last_renewal = Some(Instant::now() - Duration::from_secs(60));
        assert_eq!(check(Duration::ZERO), None);
        metrics.lock().unwrap().leading = true;
        let why = check(Duration::ZERO).unwrap();
        assert!(
            why.starts_with("leading, but no renewal has succeeded for 60"),
            "{why}"
        );
        metrics.lock().unwrap().last_renewal = Some(Instant::now());
        assert_eq!(check(Duration::ZERO), None);
        assert!(check(Duration::from_secs(6)).unwrap().starts_with("wedged"));
    }

    /// Starts the server on a loopback port, in a thread of its own and on
    /// a runtime like `main`'s (one thread), with the routes of a healthy
    /// follower.
    fn start_server() -> std::net::SocketAddr {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
                tx.send(listener.local_addr().unwrap()).unwrap();
                let metrics: Shared = Arc::default();
                let (wedged, failing) = (Duration::from_secs(5), Duration::from_secs(4));
                let respond =
                    move |path: &str| route(path, "k", &metrics, Duration::ZERO, wedged, failing);
                accept(listener, Arc::new(respond)).await
            })
        });
        rx.recv().unwrap()
    }

    /// `GET path` as a probe with `timeout` does it: the whole answer
    /// within `timeout` of the connect, or an error. The status line and
    /// the body, and how long it took.
    fn get(
        addr: std::net::SocketAddr,
        path: &str,
        timeout: Duration,
    ) -> Result<(String, String, Duration), String> {
        use std::io::{Read, Write};
        let start = std::time::Instant::now();
        let left = || {
            timeout
                .checked_sub(start.elapsed())
                .filter(|d| !d.is_zero())
                .ok_or_else(|| format!("no answer within {timeout:?}"))
        };
        let mut socket = std::net::TcpStream::connect_timeout(&addr, timeout)
            .map_err(|e| format!("connect: {e}"))?;
        socket.set_write_timeout(Some(left()?)).unwrap();
        socket
            .write_all(format!("GET {path} HTTP/1.0\r\nHost: probe\r\n\r\n").as_bytes())
            .map_err(|e| format!("write: {e}"))?;
        let mut response = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            socket.set_read_timeout(Some(left()?)).unwrap();
            match socket.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => response.extend_from_slice(&chunk[..n]),
                Err(e) => {
                    return Err(format!(
                        "read after {:?}: {e} ({} bytes read)",
                        start.elapsed(),
                        response.len()
                    ))
                }
            }
        }
        let response = String::from_utf8_lossy(&response);
        let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
        let status = head.lines().next().unwrap_or("").to_string();
        Ok((status, body.to_string(), start.elapsed()))
    }

    /// Issue 35: idle connections (connect, say nothing), slowloris ones (a
    /// byte every 500 ms, never a whole line) and a client that keeps
    /// opening new ones, all from the probe's own address, do not keep
    /// `/healthz` from answering each of 10 probes within their one-second
    /// timeout. (With 16 slots taken in turn, each for a second, by the
    /// idle connections queued first, none was answered.)
    #[test]
    fn probes_are_answered_under_a_flood_of_idle_and_slow_connections() {
        use std::io::Write;
        use std::sync::atomic::{AtomicBool, Ordering};
        let addr = start_server();
        let connect = move || std::net::TcpStream::connect(addr);
        assert_eq!(
            get(addr, "/healthz", Duration::from_secs(1)).map(|(status, body, _)| (status, body)),
            Ok(("HTTP/1.0 200 OK".into(), "ok\n".into()))
        );
        let stop = Arc::new(AtomicBool::new(false));
        let mut attackers = Vec::new();
        // 64 connections that say nothing, held open throughout.
        let idle: Vec<_> = (0..64).map(|_| connect().unwrap()).collect();
        // 16 slowloris connections, each opened again once the server
        // drops it.
        for _ in 0..16 {
            let stop = stop.clone();
            attackers.push(std::thread::spawn(move || {
                let mut socket = connect().ok();
                while !stop.load(Ordering::Relaxed) {
                    let sent = socket.as_mut().map(|s| s.write_all(b"G"));
                    if !matches!(sent, Some(Ok(()))) {
                        socket = connect().ok();
                    }
                    std::thread::sleep(Duration::from_millis(500));
                }
            }));
        }
        // One that keeps 64 more open, a new one every 5 ms.
        let churn = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut open = std::collections::VecDeque::new();
                while !stop.load(Ordering::Relaxed) {
                    if let Ok(socket) = connect() {
                        open.push_back(socket);
                    }
                    if open.len() > 64 {
                        open.pop_front();
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
            })
        };
        attackers.push(churn);
        std::thread::sleep(Duration::from_millis(300));
        let mut answers = Vec::new();
        for _ in 0..10 {
            answers.push(get(addr, "/healthz", Duration::from_secs(1)));
            std::thread::sleep(Duration::from_millis(100));
        }
        stop.store(true, Ordering::Relaxed);
        for attacker in attackers {
            attacker.join().unwrap();
        }
        drop(idle);
        let latencies: Vec<_> = answers
            .iter()
            .map(|a| match a {
                Ok((_, _, took)) => format!("{:.1} ms", took.as_secs_f64() * 1000.0),
                Err(e) => e.clone(),
            })
            .collect();
        eprintln!("probes under the flood: {latencies:?}");
        let answered = answers
            .iter()
            .filter(|a| matches!(a, Ok((status, body, _)) if status == "HTTP/1.0 200 OK" && body == "ok\n"))
            .count();
        assert_eq!(answered, 10, "{latencies:?}");
    }

    /// A new connection drops its peer's oldest once that peer has
    /// `MAX_PER_PEER` open (others' are kept), else the oldest of all once
    /// `MAX_CONNECTIONS` are open; IPv6 peers count by /64.
    #[test]
    fn admission_drops_the_peers_oldest_then_the_oldest_of_all() {
        let ip = |s: &str| peer(SocketAddr::new(s.parse().unwrap(), 1));
        assert_eq!(ip("2001:db8:1:2:3:4:5:6"), ip("2001:db8:1:2::9"));
        assert_ne!(ip("2001:db8:1:2::9"), ip("2001:db8:1:3::9"));
        assert_eq!(ip("::ffff:192.0.2.1"), ip("192.0.2.1"));
        use oneshot::error::TryRecvError::{Closed, Empty};
        let mut open = Open::default();
        let (probe, mut probe_dropped) = open.admit(ip("10.0.0.1"));
        let mut flood: Vec<_> = (0..=MAX_PER_PEER)
            .map(|_| open.admit(ip("10.0.0.2")))
            .collect();
        // The flooder's one too many dropped its own first, not the probe.
        assert_eq!(flood[0].1.try_recv(), Err(Closed));
        assert_eq!(flood[1].1.try_recv(), Err(Empty));
        assert_eq!(probe_dropped.try_recv(), Err(Empty));
        assert_eq!(open.connections.len(), 1 + MAX_PER_PEER);
        // Many peers: once MAX_CONNECTIONS are open, the oldest of all
        // goes (the probe).
        let mut others = Vec::new();
        for host in 0.. {
            if open.connections.len() == MAX_CONNECTIONS {
                break;
            }
            others.push(open.admit(ip(&format!("10.1.{}.{}", host / 256, host % 256))));
        }
        assert_eq!(probe_dropped.try_recv(), Err(Empty));
        open.admit(ip("10.2.0.1"));
        assert_eq!(open.connections.len(), MAX_CONNECTIONS);
        assert!(!open.connections.contains_key(&probe));
        assert_eq!(probe_dropped.try_recv(), Err(Closed));
        assert_eq!(flood[1].1.try_recv(), Err(Empty));
    }

    /// A connection that says nothing, or too slowly to finish its
    /// request line, is closed a second after it connected.
    #[test]
    fn idle_and_slow_connections_are_closed_after_a_second() {
        use std::io::{Read, Write};
        let addr = start_server();
        let idle = std::thread::spawn(move || {
            let mut socket = std::net::TcpStream::connect(addr).unwrap();
            let start = std::time::Instant::now();
            socket
                .set_read_timeout(Some(Duration::from_secs(3)))
                .unwrap();
            let closed = matches!(socket.read(&mut [0; 16]), Ok(0));
            (closed, start.elapsed())
        });
        let mut slow = std::net::TcpStream::connect(addr).unwrap();
        let start = std::time::Instant::now();
        slow.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let closed = loop {
            if slow.write_all(b"G").is_err() || start.elapsed() > Duration::from_secs(3) {
                break start.elapsed();
            }
            match slow.read(&mut [0; 16]) {
                Ok(_) => break start.elapsed(),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(_) => break start.elapsed(),
            }
        };
        let (idle_closed, idle_after) = idle.join().unwrap();
        assert!(idle_closed, "the idle connection was not closed");
        for after in [idle_after, closed] {
            assert!(
                (REQUEST_WITHIN - Duration::from_millis(50)..CONNECTION_WITHIN).contains(&after),
                "closed after {after:?}"
            );
        }
    }

    #[test]
    fn label_values_carry_no_control_character_or_unknown_escape() {
        let l = super::label("a\"b\n\u{1b}c\\");
        assert_eq!(l, r#"a\"b\\n\\u{1b}c\\"#);
        assert!(!l.chars().any(char::is_control), "{l}");
    }
}
