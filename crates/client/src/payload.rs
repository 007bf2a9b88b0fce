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

    /// `payload` as JSON when it is an announcement as the server writes
    /// them: an object with a known `event`, a string `key` and `at`, an
    /// integer `term` not below 0, and `holder` a string or null. Any role
    /// may notify on the channel: a well-formed payload is still only a
    /// hint; the server's answer to a call is what counts.
    pub fn well_formed(payload: &str) -> Option<serde_json::Value> {
        let v = announced(
            payload,
            &["acquired", "released", "expired"],
            &["key", "at"],
        )?;
        let holder = v.get("holder");
        holder
            .is_none_or(|h| h.is_null() || h.is_string())
            .then_some(v)
    }

    /// `payload` as JSON when it is a group's announcement (contract 26) as
    /// the server writes them: `partition_granted`, `partition_revoked` or
    /// `partition_freed`, with a string `group`, `member` and `at`, and an
    /// integer `partition` above 0 and `term` not below 0. A hint, as any.
    pub fn well_formed_partition(payload: &str) -> Option<serde_json::Value> {
        let v = announced(
            payload,
            &["partition_granted", "partition_revoked", "partition_freed"],
            &["group", "member", "at"],
        )?;
        (v.get("partition")?.as_i64()? > 0).then_some(v)
    }

    /// The key became free: worth trying to acquire now.
    pub fn frees_key(&self) -> bool {
        self.event == "released" || self.event == "expired"
    }
}

/// `payload` as JSON when it is an object whose `event` is one of `events`,
/// whose `strings` are strings, and whose `term` is an integer not below 0.
fn announced(payload: &str, events: &[&str], strings: &[&str]) -> Option<serde_json::Value> {
    let v: serde_json::Value = serde_json::from_str(payload).ok()?;
    let o = v.as_object()?;
    let ok = events.contains(&o.get("event")?.as_str()?)
        && strings
            .iter()
            .all(|name| o.get(*name).is_some_and(serde_json::Value::is_string))
        && o.get("term")?.as_i64()? >= 0;
    ok.then_some(v)
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
    fn tells_a_group_announcement() {
        let p = r#"{"event":"partition_revoked","group":"g","partition":3,"member":"m","term":2,
                    "until":"2026-12-06T10:00:00.000000Z","at":"2026-12-06T09:59:50.000000Z"}"#;
        assert!(Announcement::well_formed_partition(p).is_some());
        assert!(Announcement::well_formed(p).is_none());
        let bad = p.replace("\"partition\":3", "\"partition\":0");
        assert!(Announcement::well_formed_partition(&bad).is_none());
        let lease = r#"{"event":"released","key":"k","holder":"h","term":1,"at":"t"}"#;
        assert!(Announcement::well_formed_partition(lease).is_none());
    }

    #[test]
    fn ignores_what_is_not_an_announcement() {
        assert!(Announcement::parse("marker").is_none());
        assert!(Announcement::parse(r#"{"event":"acquired"}"#).is_none());
    }

    #[test]
    fn well_formed_is_only_what_the_server_writes() {
        let ok = r#"{"event":"acquired","key":"k","holder":"h","term":2,"at":"t","extra":1}"#;
        assert_eq!(Announcement::well_formed(ok).unwrap()["extra"], 1);
        for bad in [
            "plain text",
            "[1]",
            r#"{"event":"pwned","key":"k","holder":"h","term":2,"at":"t"}"#,
            r#"{"event":"acquired","key":1,"holder":"h","term":2,"at":"t"}"#,
            r#"{"event":"acquired","key":"k","holder":"h","term":-1,"at":"t"}"#,
            r#"{"event":"acquired","key":"k","holder":"h","term":"2","at":"t"}"#,
            r#"{"event":"acquired","key":"k","holder":7,"term":2,"at":"t"}"#,
            r#"{"event":"released","key":"k","holder":"h","term":2}"#,
        ] {
            assert!(Announcement::well_formed(bad).is_none(), "{bad}");
        }
    }
}
