//! Connection strings as libpq reads them, for the parameters
//! tokio-postgres does not know: they are taken out (by name) before the
//! rest is handed to tokio-postgres. Both forms: `key=value` pairs
//! (values quoted with `'`, `\` escaping) and `postgres://` URLs (query
//! parameters, percent-encoded).

/// `dsn` without the parameters named in `names`, and those parameters
/// (name, value) in the order given.
pub fn take_params(dsn: &str, names: &[&str]) -> Result<(String, Vec<(String, String)>), String> {
    if dsn.starts_with("postgres://") || dsn.starts_with("postgresql://") {
        return Ok(take_from_url(dsn, names));
    }
    let mut kept = Vec::new();
    let mut taken = Vec::new();
    for (key, value) in pairs(dsn)? {
        if names.contains(&key.as_str()) {
            taken.push((key, value));
        } else {
            kept.push(format!(
                "{key}='{}'",
                value.replace('\\', "\\\\").replace('\'', "\\'")
            ));
        }
    }
    Ok((kept.join(" "), taken))
}

/// The `key=value` pairs of a libpq connection string.
fn pairs(dsn: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    let mut chars = dsn.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.peek().is_none() {
            return Ok(out);
        }
        let mut key = String::new();
        while let Some(c) = chars.next_if(|c| *c != '=' && !c.is_whitespace()) {
            key.push(c);
        }
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if key.is_empty() {
            return Err("invalid connection string: a parameter with no name".into());
        }
        if chars.next() != Some('=') {
            return Err(format!(
                "invalid connection string: missing \"=\" after {key:?}"
            ));
        }
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let mut value = String::new();
        if chars.next_if_eq(&'\'').is_some() {
            loop {
                match chars.next() {
                    Some('\\') => value.extend(chars.next()),
                    Some('\'') => break,
                    Some(c) => value.push(c),
                    None => {
                        return Err(format!(
                            "invalid connection string: unterminated quoted value of {key:?}"
                        ))
                    }
                }
            }
        } else {
            while let Some(c) = chars.next_if(|c| !c.is_whitespace()) {
                if c == '\\' {
                    value.extend(chars.next());
                } else {
                    value.push(c);
                }
            }
        }
        out.push((key, value));
    }
}

fn take_from_url(url: &str, names: &[&str]) -> (String, Vec<(String, String)>) {
    // As tokio-postgres (and libpq) read it: user and password run to the
    // first `@`; the query starts at the first `?` after them.
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    let after_credentials = url[after_scheme..]
        .find('@')
        .map_or(after_scheme, |i| after_scheme + i + 1);
    let Some(q) = url[after_credentials..].find('?') else {
        return (url.to_owned(), Vec::new());
    };
    let (base, query) = (
        &url[..after_credentials + q],
        &url[after_credentials + q + 1..],
    );
    let mut kept = Vec::new();
    let mut taken = Vec::new();
    for piece in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = piece.split_once('=').unwrap_or((piece, ""));
        let key = percent_decode(k);
        if names.contains(&key.as_str()) {
            taken.push((key, percent_decode(v)));
        } else {
            kept.push(piece);
        }
    }
    let rest = if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    (rest, taken)
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) if hex(h).is_some() && hex(l).is_some() => {
                out.push((hex(h).unwrap() * 16 + hex(l).unwrap()) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SSL: &[&str] = &["sslmode", "sslrootcert"];

    #[test]
    fn key_value_strings_keep_everything_else_exactly() {
        let (rest, taken) = take_params(
            "host=h port = 5433 sslmode=verify-full password='p w' sslrootcert='/a b/c\\'d'",
            SSL,
        )
        .unwrap();
        assert_eq!(
            taken,
            vec![
                ("sslmode".into(), "verify-full".into()),
                ("sslrootcert".into(), "/a b/c'd".into())
            ]
        );
        let config: tokio_postgres::Config = rest.parse().unwrap();
        assert_eq!(config.get_ports(), &[5433]);
    }

    #[test]
    fn quoted_values_with_escapes_survive_the_round_trip() {
        let (rest, taken) =
            take_params(r"user='a\'b\\c' dbname=d\ e sslmode=require", SSL).unwrap();
        assert_eq!(taken, vec![("sslmode".into(), "require".into())]);
        let config: tokio_postgres::Config = rest.parse().unwrap();
        assert_eq!(config.get_user(), Some(r"a'b\c"));
        assert_eq!(config.get_dbname(), Some("d e"));
    }

    #[test]
    fn urls_lose_only_the_named_query_parameters() {
        let (rest, taken) = take_params(
            "postgres://u@h:5433/d?sslmode=verify-ca&application_name=x&sslrootcert=%2Fa%20b",
            SSL,
        )
        .unwrap();
        assert_eq!(rest, "postgres://u@h:5433/d?application_name=x");
        assert_eq!(
            taken,
            vec![
                ("sslmode".into(), "verify-ca".into()),
                ("sslrootcert".into(), "/a b".into())
            ]
        );
        assert_eq!(
            take_params("postgresql://h/d?sslmode=disable", SSL)
                .unwrap()
                .0,
            "postgresql://h/d"
        );
    }

    #[test]
    fn a_question_mark_in_the_password_is_not_the_query() {
        let (rest, taken) = take_params("postgres://u:pa?ss@h/d?sslmode=require&x=1", SSL).unwrap();
        assert_eq!(rest, "postgres://u:pa?ss@h/d?x=1");
        assert_eq!(taken, vec![("sslmode".into(), "require".into())]);
    }

    #[test]
    fn malformed_strings_say_what_is_wrong() {
        assert!(take_params("host=h =x user=u", SSL)
            .unwrap_err()
            .contains("no name"));
        assert!(take_params("host", SSL)
            .unwrap_err()
            .contains("missing \"=\""));
        assert!(take_params("host='h", SSL)
            .unwrap_err()
            .contains("unterminated"));
    }
}
