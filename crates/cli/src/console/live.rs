//! The console's LISTEN connection: each announcement on the `leaderlock`
//! channel becomes a hint for the pages (`{"event", "key"}`: they read the
//! data again from the server, never from the hint, which any role may
//! send). Made again when lost, with `resync` so the pages miss nothing.
use std::time::Duration;

use serde_json::json;
use tokio::sync::broadcast;

use crate::status::connect;

pub async fn listen(dsn: Option<String>, events: broadcast::Sender<String>) {
    let mut backoff = Duration::from_millis(200);
    loop {
        if let Ok((db, mut payloads)) = connect(dsn.as_deref()).await {
            if db
                .batch_execute(leaderlock_client::sql::LISTEN_ANNOUNCEMENTS)
                .await
                .is_ok()
            {
                backoff = Duration::from_millis(200);
                let _ = events.send(json!({ "event": "resync" }).to_string());
                while let Some(payload) = payloads.recv().await {
                    // Any transition (leases, runs, leaderless keys): only
                    // its event and key go on, as strings.
                    let Ok(a) = serde_json::from_str::<serde_json::Value>(&payload) else {
                        continue;
                    };
                    // (a run's transition names its job, a group's change
                    // its group, where a lease's names its key)
                    let key = a["key"]
                        .as_str()
                        .or_else(|| a["job"].as_str())
                        .or_else(|| a["group"].as_str());
                    let (Some(event), Some(key)) = (a["event"].as_str(), key) else {
                        continue;
                    };
                    let hint = json!({ "event": event, "key": key });
                    let _ = events.send(hint.to_string());
                }
            }
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}
