//! The JSON payloads of the `leaderlock` channel (contract section 4).
use serde::Deserialize;

/// One announcement: `acquired`, `released` or `expired` (and any event a
/// later server version adds, which an elector ignores).
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Announcement {
    pub event: String,
    pub key: String,
    /// The new holder for `acquired`, the departing one otherwise.
    pub holder: Option<String>,
    pub term: i64,
    pub at: String,
    #[serde(default)]
    pub previous_holder: Option<String>,
    #[serde(default)]
    pub expires_at: Option<String>,
}

impl Announcement {
    pub fn parse(payload: &str) -> Option<Announcement> {
        serde_json::from_str(payload).ok()
    }

    /// The key became free: worth trying to acquire now.
    pub fn frees_key(&self) -> bool {
        self.event == "released" || self.event == "expired"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_contract_payloads() {
        let a = Announcement::parse(
            r#"{"event":"acquired","key":"k\"1","holder":"h:1:ab","term":4294967297,
               "at":"2026-11-23T08:00:00.000001Z","previous_holder":null,
               "expires_at":"2026-11-23T08:00:10.000001Z"}"#,
        )
        .unwrap();
        assert_eq!(a.event, "acquired");
        assert_eq!(a.key, "k\"1");
        assert_eq!(a.term, 4294967297);
        assert!(!a.frees_key());
        let r = Announcement::parse(
            r#"{"event":"expired","key":"k","holder":"x","term":3,"at":"t","reason":"ttl"}"#,
        )
        .unwrap();
        assert!(r.frees_key());
        assert_eq!(r.holder.as_deref(), Some("x"));
    }

    #[test]
    fn ignores_what_is_not_an_announcement() {
        assert!(Announcement::parse("marker").is_none());
        assert!(Announcement::parse(r#"{"event":"acquired"}"#).is_none());
    }
}
