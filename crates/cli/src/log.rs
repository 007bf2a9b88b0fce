//! What `leaderlock run` says on stderr: one line per event, as text or as
//! JSON (`--log-format json`), each with the wall-clock time, microsecond
//! precision: RFC 3339 in UTC in text (`2026-11-25T07:05:12.345678Z`), and
//! in JSON both that (`time`) and seconds since the epoch (`ts`, for
//! arithmetic). Lines are written whatever
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
        let since_epoch = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let ts = since_epoch.as_secs_f64();
        let time = rfc3339(since_epoch.as_micros());
        let line = match self.format {
            Format::Text => format!(
                "leaderlock[{}] {time}: {}",
                std::process::id(),
                text::without_controls(message)
            ),
            Format::Json => {
                let mut object = Map::new();
                object.insert("time".into(), json!(time));
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

/// Microseconds since the epoch as RFC 3339 in UTC, microsecond precision.
fn rfc3339(micros: u128) -> String {
    let secs = (micros / 1_000_000) as i64;
    let (days, rest) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:06}Z",
        rest / 3600,
        rest / 60 % 60,
        rest % 60,
        micros % 1_000_000
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn rfc3339_in_utc() {
        assert_eq!(super::rfc3339(0), "1970-01-01T00:00:00.000000Z");
        // 2026-11-25T07:05:12.345678Z
        assert_eq!(
            super::rfc3339(1_795_590_312_345_678),
            "2026-11-25T07:05:12.345678Z"
        );
        // a leap day
        assert_eq!(
            super::rfc3339(951_782_400_000_001),
            "2000-02-29T00:00:00.000001Z"
        );
    }
}
