//! The console's HTTP: one request per connection (HTTP/1.1 with
//! `Connection: close`), bounded in size and time, and its answers with
//! the headers that keep a page of other roles' text inert (a strict
//! Content-Security-Policy: no inline script, no other origin).
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;

/// The request line and headers, at most.
const MAX_HEAD: usize = 16 * 1024;
/// A write's body (a key, a job or a session, as JSON), at most.
const MAX_BODY: usize = 4 * 1024;
/// Time to send the whole request.
const REQUEST_WITHIN: Duration = Duration::from_secs(10);

pub struct Request {
    pub method: String,
    /// The path, percent-decoded, without the query.
    pub path: String,
    /// The query's pairs, percent-decoded.
    pub query: Vec<(String, String)>,
    /// Header names in lower case.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn param(&self, name: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The value of cookie `name`.
    pub fn cookie(&self, name: &str) -> Option<&str> {
        self.header("cookie")?.split(';').find_map(|c| {
            let (n, v) = c.trim().split_once('=')?;
            (n == name).then_some(v)
        })
    }
}

/// Reads one request; None when it is malformed, too large or too slow.
pub async fn read(socket: &mut TcpStream) -> Option<Request> {
    timeout(REQUEST_WITHIN, read_inner(socket))
        .await
        .ok()
        .flatten()
}

async fn read_inner(socket: &mut TcpStream) -> Option<Request> {
    let mut data = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = find(&data, b"\r\n\r\n") {
            break i;
        }
        if data.len() > MAX_HEAD {
            return None;
        }
        match socket.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => data.extend_from_slice(&chunk[..n]),
        }
    };
    let head = std::str::from_utf8(&data[..head_end]).ok()?;
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let (method, target) = (first.next()?.to_owned(), first.next()?);
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| {
            let (n, v) = l.split_once(':')?;
            Some((n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        })
        .collect();
    let length: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .map_or(Some(0), |(_, v)| v.parse().ok())?;
    if length > MAX_BODY {
        return None;
    }
    let mut body = data[head_end + 4..].to_vec();
    while body.len() < length {
        match socket.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => body.extend_from_slice(&chunk[..n]),
        }
    }
    body.truncate(length);
    Some(Request {
        method,
        path: decode(path)?,
        query: query
            .split('&')
            .filter(|p| !p.is_empty())
            .filter_map(|p| {
                let (n, v) = p.split_once('=').unwrap_or((p, ""));
                Some((decode(n)?, decode(v)?))
            })
            .collect(),
        headers,
        body,
    })
}

fn find(data: &[u8], what: &[u8]) -> Option<usize> {
    data.windows(what.len()).position(|w| w == what)
}

/// Percent-decoding (and `+` as a space, as forms send it); None when it is
/// not UTF-8.
pub fn decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
                if !hex.bytes().all(|c| c.is_ascii_hexdigit()) {
                    return None;
                }
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// What every answer carries: nothing of the page runs but its own script,
/// nothing is framed, cached or sent elsewhere.
const SECURITY_HEADERS: &str = "Content-Security-Policy: default-src 'none'; script-src 'self'; \
     style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; \
     form-action 'none'; frame-ancestors 'none'\r\n\
     X-Content-Type-Options: nosniff\r\nX-Frame-Options: DENY\r\nReferrer-Policy: no-referrer\r\n\
     Cache-Control: no-store\r\n";

pub struct Response {
    pub status: &'static str,
    pub content_type: &'static str,
    pub extra: String,
    pub body: Vec<u8>,
}

impl Response {
    pub fn new(status: &'static str, content_type: &'static str, body: impl Into<Vec<u8>>) -> Self {
        Response {
            status,
            content_type,
            extra: String::new(),
            body: body.into(),
        }
    }

    pub fn json(status: &'static str, value: &serde_json::Value) -> Self {
        Response::new(status, "application/json", value.to_string())
    }

    /// An error as JSON: `{"error": ..., "sqlstate": ...}`.
    pub fn error(status: &'static str, message: &str, sqlstate: Option<&str>) -> Self {
        Response::json(
            status,
            &serde_json::json!({ "error": message, "sqlstate": sqlstate }),
        )
    }

    pub async fn send(self, socket: &mut TcpStream) {
        let head = format!(
            "HTTP/1.1 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n{}{}Connection: close\r\n\r\n",
            self.status,
            self.content_type,
            self.body.len(),
            SECURITY_HEADERS,
            self.extra
        );
        let _ = timeout(Duration::from_secs(10), async {
            socket.write_all(head.as_bytes()).await?;
            socket.write_all(&self.body).await?;
            socket.shutdown().await
        })
        .await;
    }
}

/// The head of a server-sent events stream.
pub async fn start_events(socket: &mut TcpStream) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n{SECURITY_HEADERS}Connection: close\r\n\r\n"
    );
    socket.write_all(head.as_bytes()).await
}

/// Whether two secrets are equal, in a time that does not tell where they
/// differ.
pub fn same_secret(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_decoding() {
        assert_eq!(decode("a%20b+c").as_deref(), Some("a b c"));
        assert_eq!(decode("%3Cscript%3E").as_deref(), Some("<script>"));
        assert_eq!(decode("%E2%82%AC").as_deref(), Some("€"));
        assert_eq!(decode("%ZZ"), None);
        assert_eq!(decode("%2"), None);
        assert_eq!(decode("%FF"), None);
        assert_eq!(decode("%+1"), None);
    }

    #[test]
    fn secrets_compare_whole() {
        assert!(same_secret("abc", "abc"));
        assert!(!same_secret("abc", "abd"));
        assert!(!same_secret("abc", "ab"));
    }
}
