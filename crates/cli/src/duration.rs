//! Durations on the command line: `10s`, `500ms`, `2m`, `1h`, `1.5s`; a bare
//! number is seconds. At most `MAX` (a year): longer is a usage error, not a
//! clock overflow.
use std::time::Duration;

/// The longest duration any flag takes.
pub const MAX: Duration = Duration::from_secs(365 * 86_400);

pub fn parse(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("'{text}' is not a duration (examples: 10s, 500ms, 2m)"))?;
    let scale = match unit {
        "" | "s" => 1.0,
        "ms" => 0.001,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        _ => {
            return Err(format!(
                "'{text}': unknown unit '{unit}' (use ms, s, m or h)"
            ))
        }
    };
    Duration::try_from_secs_f64(value * scale)
        .ok()
        .filter(|d| *d <= MAX)
        .ok_or_else(|| format!("'{text}' is out of range (at most 365 days)"))
}

/// A duration as the flags take it, in its largest whole unit where one
/// fits (`5m`, `1h`, `1s`, `250ms`), else in seconds (`1.5s`).
pub fn shown(d: Duration) -> String {
    let ms = d.as_millis();
    if !d.subsec_nanos().is_multiple_of(1_000_000) {
        return format!("{}s", d.as_secs_f64());
    }
    match ms {
        0 => "0s".into(),
        m if m % 3_600_000 == 0 => format!("{}h", m / 3_600_000),
        m if m % 60_000 == 0 => format!("{}m", m / 60_000),
        m if m % 1_000 == 0 => format!("{}s", m / 1_000),
        m if m < 1_000 => format!("{m}ms"),
        m => format!("{}s", m as f64 / 1e3),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(parse("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse("10"), Ok(Duration::from_secs(10)));
        assert_eq!(parse("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse("0"), Ok(Duration::ZERO));
    }

    #[test]
    fn shown_as_the_flags_take_it() {
        for (d, text) in [
            (300_000, "5m"),
            (3_600_000, "1h"),
            (1_000, "1s"),
            (250, "250ms"),
            (1_500, "1.5s"),
            (0, "0s"),
        ] {
            assert_eq!(shown(Duration::from_millis(d)), text);
            assert_eq!(parse(text), Ok(Duration::from_millis(d)));
        }
    }

    #[test]
    fn rejects() {
        assert!(parse("ten").is_err());
        assert!(parse("10 parsecs").is_err());
        assert!(parse("-1s").is_err());
        assert!(parse("").is_err());
        assert!(parse("5000000000000000h").is_err());
        assert!(parse("366d").is_err());
        assert_eq!(parse("8760h"), Ok(MAX));
    }
}
