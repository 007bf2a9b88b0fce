//! `leaderlock run --metrics ADDR`: Prometheus text at `/metrics` and a
//! health check at `/healthz`, over plain HTTP/1.0 (one request per
//! connection, nothing else served), so a supervisor or a Kubernetes probe
//! can see what the elector is doing and whether it is stuck.
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use leaderlock_client::Watchdog;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::time::Instant;

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
    // At most this many requests at once, each given at most a second: a
    // client that connects and says nothing cannot use up file descriptors.
    let slots = Arc::new(tokio::sync::Semaphore::new(16));
    loop {
        let Ok(permit) = slots.clone().acquire_owned().await else {
            return;
        };
        let mut socket = match listener.accept().await {
            Ok((socket, _)) => socket,
            Err(_) => {
                // (out of file descriptors, say): not a busy loop
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let (key, metrics, watchdog) = (key.clone(), metrics.clone(), watchdog.clone());
        tokio::spawn(async move {
            let _permit = permit;
            let mut request = Vec::new();
            let mut chunk = [0u8; 1024];
            let read_line = async {
                while !request.contains(&b'\n') && request.len() < 4096 {
                    match socket.read(&mut chunk).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => request.extend_from_slice(&chunk[..n]),
                    }
                }
            };
            if tokio::time::timeout(Duration::from_secs(1), read_line)
                .await
                .is_err()
            {
                return;
            }
            let line = String::from_utf8_lossy(&request);
            let target = line.split_whitespace().nth(1).unwrap_or("");
            let path = target.split('?').next().unwrap_or("");
            let (status, body) = match path {
                "/metrics" => ("200 OK", render(&key, &metrics, &watchdog)),
                "/healthz" => {
                    let overdue = watchdog.overdue();
                    match unhealthy(&metrics, overdue, wedged_after, renewals_failing) {
                        Some(why) => ("503 Service Unavailable", why),
                        None => ("200 OK", "ok\n".into()),
                    }
                }
                _ => ("404 Not Found", "not found: /metrics, /healthz\n".into()),
            };
            let response = format!(
                "HTTP/1.0 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n\
                 Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let write = async {
                let _ = socket.write_all(response.as_bytes()).await;
                let _ = socket.shutdown().await;
            };
            let _ = tokio::time::timeout(Duration::from_secs(1), write).await;
        });
    }
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

/// The Prometheus text exposition of `metrics`.
fn render(key: &str, metrics: &Shared, watchdog: &Watchdog) -> String {
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
        &one(format!("{:.3}", watchdog.overdue().as_secs_f64())),
    );
    out
}

/// A label value: control and format characters written as `\u{..}` (as
/// in text logs), then backslash and double quote escaped as Prometheus
/// wants (it knows no other escape).
fn label(value: &str) -> String {
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

    #[test]
    fn label_values_carry_no_control_character_or_unknown_escape() {
        let l = super::label("a\"b\n\u{1b}c\\");
        assert_eq!(l, r#"a\"b\\n\\u{1b}c\\"#);
        assert!(!l.chars().any(char::is_control), "{l}");
    }
}
