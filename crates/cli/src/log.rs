//! What `leaderlock run` says on stderr: one line per event, as text or as
//! JSON (`--log-format json`), each with the wall-clock time in seconds
//! since the epoch, microsecond precision. Lines are written whatever
//! became of stderr (a reader that went away is not an error here), and no
//! line carries a control character (see text.rs).
use std::io::Write;

use serde_json::{json, Map, Value};

use crate::text;

#[derive(Clone, Copy, PartialEq, Eq, Debug, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
}

#[derive(Clone, Copy)]
pub struct Log {
    pub format: Format,
}

impl Log {
    /// `event` is a stable name (for JSON readers), `message` the sentence
    /// for people, `fields` extra JSON members.
    pub fn event(&self, event: &str, message: &str, fields: Value) {
        let ts = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        let line = match self.format {
            Format::Text => format!(
                "leaderlock[{}] {ts:.6}: {}",
                std::process::id(),
                text::without_controls(message)
            ),
            Format::Json => {
                let mut object = Map::new();
                object.insert("ts".into(), json!((ts * 1e6).round() / 1e6));
                object.insert("pid".into(), json!(std::process::id()));
                object.insert("event".into(), json!(event));
                object.insert("message".into(), json!(message));
                if let Value::Object(extra) = fields {
                    object.extend(extra);
                }
                text::json_line(&Value::Object(object))
            }
        };
        let _ = writeln!(std::io::stderr().lock(), "{line}");
    }
}
