//! Text from the database on a terminal or in a log. Keys, ids, holders and
//! values were written by whichever role acquired the key; printed raw, a
//! control character could recolour or retitle the operator's terminal,
//! write its clipboard (OSC 52), or start a forged log line. So every such
//! string goes out through one of these two functions.
use serde_json::Value;

/// `s` for a text line: printable characters as they are; control and
/// format characters (bidirectional overrides, zero-width ones), quotes and
/// backslashes as Rust-style escapes (`\n`, `\u{1b}`, `\"`).
pub fn shown(s: &str) -> String {
    s.escape_debug().to_string()
}

/// `s` with only its control and format characters escaped: the last
/// guard of every text log line (strings from the database are already
/// [`shown`] in it).
pub fn without_controls(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_control() || c.escape_debug().nth(1) == Some('u') {
                c.escape_debug().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// `value` as one line of JSON that is also safe on a terminal: what JSON
/// must escape (C0 controls, quotes) and also DEL, C1 controls and format
/// characters are written as `\u` escapes. Still exactly the same JSON value.
pub fn json_line(value: &Value) -> String {
    let raw = value.to_string();
    let mut out = String::with_capacity(raw.len());
    for c in raw.chars() {
        // Outside strings serde_json writes ASCII only, so any such
        // character is inside a string, where a \u escape means the same.
        if c == '\u{7f}' || (!c.is_ascii() && c.escape_debug().nth(1) == Some('u')) {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// `text` cut to `widest` characters, the last one `…`.
pub fn cut(text: &str, widest: usize) -> String {
    if text.chars().count() <= widest {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(widest - 1).collect();
    cut.push('…');
    cut
}

/// `rows` under `header` in left-aligned columns two spaces apart (cells
/// already [`shown`]).
pub fn table(
    out: &mut impl std::io::Write,
    header: &[&str],
    rows: &[Vec<String>],
) -> std::io::Result<()> {
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            rows.iter()
                .map(|r| r[i].chars().count())
                .chain([header[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut print = |cells: Vec<&str>| {
        let line: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        writeln!(out, "{}", line.join("  ").trim_end())
    };
    print(header.to_vec())?;
    for r in rows {
        print(r.iter().map(String::as_str).collect())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const HOSTILE: &str =
        "esc\u{1b}[31mRED\u{1b}]52;c;ZXZpbA==\u{7}\nFAKE\r\u{9b}2J\u{202e}\u{7f}\u{e0041}";

    fn has_control(s: &str) -> bool {
        s.chars()
            .any(|c| c.is_control() || c.escape_debug().nth(1) == Some('u'))
    }

    #[test]
    fn shown_text_has_no_control_characters() {
        let s = shown(HOSTILE);
        assert!(!has_control(&s), "{s}");
        assert!(s.starts_with("esc\\u{1b}[31mRED"), "{s}");
        assert_eq!(shown("plain-key_1 é 日本"), "plain-key_1 é 日本");
        let w = without_controls(HOSTILE);
        assert!(!has_control(&w), "{w}");
        assert_eq!(without_controls("held by \"x\""), "held by \"x\"");
    }

    #[test]
    fn json_lines_are_the_same_value_without_control_characters() {
        let v = json!({"key": HOSTILE, "term": 3, "holder": null});
        let line = json_line(&v);
        assert!(!has_control(&line), "{line}");
        assert_eq!(serde_json::from_str::<Value>(&line).unwrap(), v);
        assert_eq!(json_line(&json!({"k": "é 日本"})), r#"{"k":"é 日本"}"#);
    }
}
