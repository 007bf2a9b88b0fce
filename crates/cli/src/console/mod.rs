//! `leaderlock console`: a web page of what the database knows (keys and
//! their holders, a key's leadership timeline, scheduled jobs and their
//! runs, sessions), live, served by this binary with its assets embedded
//! (no other origin: it works offline). Read-only unless started with
//! `--allow-writes`; every write runs as the console's database role, so
//! PostgreSQL's privileges decide. Bound to localhost by default; any
//! other address needs a token (LEADERLOCK_CONSOLE_TOKEN).
//!
//! The page builds its DOM from JSON with text nodes only: a key named
//! `<script>` is shown as those characters. Changes reach it as hints
//! (server-sent events fed by LISTEN): it reads the data again from the
//! server, at most a few times a second.
mod api;
mod http;
mod live;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{broadcast, RwLock, Semaphore};
use tokio_postgres::types::Type;

use http::{Request, Response};
use leaderlock_client::Db;

use crate::status::{connect, say};

const PAGE: &str = include_str!("assets/index.html");
const SCRIPT: &str = include_str!("assets/console.js");
const STYLE: &str = include_str!("assets/console.css");

/// Requests served at once, at most (more wait for a turn).
const MAX_CONNECTIONS: usize = 64;
/// Server-sent event streams open at once, at most.
const MAX_STREAMS: usize = 32;
/// The cookie that carries the token after `/login`.
const COOKIE: &str = "leaderlock_console";
/// The header every write carries (a form of another site cannot set it).
const WRITE_HEADER: &str = "x-leaderlock-console";

pub struct Options {
    pub listen: SocketAddr,
    pub allow_writes: bool,
    /// Required beyond the loopback interface.
    pub token: Option<String>,
}

struct Console {
    dsn: Option<String>,
    options: Options,
    db: RwLock<Option<Arc<Db>>>,
    events: broadcast::Sender<String>,
    streams: Semaphore,
}

pub async fn serve(dsn: Option<&str>, options: Options) -> i32 {
    if options.token.as_deref().is_some_and(|t| t.len() < 16) {
        say("LEADERLOCK_CONSOLE_TOKEN must be at least 16 characters");
        return crate::exit::USAGE;
    }
    if !options.listen.ip().is_loopback() && options.token.is_none() {
        say(&format!(
            "--listen {} is not a loopback address: set LEADERLOCK_CONSOLE_TOKEN (a bearer token \
             of at least 16 characters), or keep the console on 127.0.0.1 behind your proxy",
            options.listen
        ));
        return crate::exit::USAGE;
    }
    let listener = match TcpListener::bind(options.listen).await {
        Ok(l) => l,
        Err(e) => {
            say(&format!("cannot listen on {}: {e}", options.listen));
            return crate::exit::USAGE;
        }
    };
    // The database first: a wrong DSN or a missing extension is told at once.
    let db = match connect(dsn).await {
        Ok((db, _)) => db,
        Err(code) => return code,
    };
    let (events, _) = broadcast::channel(1024);
    let console = Arc::new(Console {
        dsn: dsn.map(str::to_owned),
        options,
        db: RwLock::new(Some(Arc::new(db))),
        events,
        streams: Semaphore::new(MAX_STREAMS),
    });
    tokio::spawn(live::listen(console.dsn.clone(), console.events.clone()));
    say(&format!(
        "console on http://{}/ ({})",
        console.options.listen,
        if console.options.allow_writes {
            "writes allowed"
        } else {
            "read-only"
        }
    ));
    let turns = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok((socket, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let Ok(turn) = turns.clone().acquire_owned().await else {
            continue;
        };
        let console = console.clone();
        tokio::spawn(async move {
            console.connection(socket).await;
            drop(turn);
        });
    }
}

impl Console {
    async fn connection(&self, mut socket: TcpStream) {
        let Some(request) = http::read(&mut socket).await else {
            Response::error("400 Bad Request", "a malformed or too large request", None)
                .send(&mut socket)
                .await;
            return;
        };
        if let Some(refused) = self.refused(&request) {
            refused.send(&mut socket).await;
            return;
        }
        if request.method == "GET" && request.path == "/events" {
            self.stream(socket).await;
            return;
        }
        self.respond(&request).await.send(&mut socket).await;
    }

    /// Why a request is refused before anything is read: a Host that is
    /// not this console's (a page of another site reaching it through DNS
    /// rebinding), or a missing token.
    fn refused(&self, r: &Request) -> Option<Response> {
        let listen = self.options.listen;
        if listen.ip().is_loopback() {
            let port = listen.port();
            let host = r.header("host").unwrap_or("");
            let ours = [
                format!("127.0.0.1:{port}"),
                format!("localhost:{port}"),
                format!("[::1]:{port}"),
                listen.to_string(),
            ];
            if !ours.iter().any(|h| h == host) {
                return Some(Response::error(
                    "421 Misdirected Request",
                    "this console answers for its own address only",
                    None,
                ));
            }
        }
        let token = self.options.token.as_deref()?;
        if r.method == "GET" && r.path == "/login" {
            return None; // (answered by respond)
        }
        let bearer = r
            .header("authorization")
            .and_then(|a| a.strip_prefix("Bearer "));
        let given = bearer.or_else(|| r.cookie(COOKIE));
        if given.is_some_and(|g| http::same_secret(g, token)) {
            None
        } else {
            Some(Response::error(
                "401 Unauthorized",
                "a token is needed: open /login?token=... once, or send Authorization: Bearer",
                None,
            ))
        }
    }

    async fn respond(&self, r: &Request) -> Response {
        match (r.method.as_str(), r.path.as_str()) {
            ("GET", "/") => Response::new("200 OK", "text/html; charset=utf-8", PAGE),
            ("GET", "/console.js") => {
                Response::new("200 OK", "text/javascript; charset=utf-8", SCRIPT)
            }
            ("GET", "/console.css") => Response::new("200 OK", "text/css; charset=utf-8", STYLE),
            ("GET", "/login") => self.login(r),
            ("GET", "/api/config") => Response::json(
                "200 OK",
                &serde_json::json!({ "writes": self.options.allow_writes }),
            ),
            ("GET", "/api/keys") => {
                let limit = r.param("limit").and_then(|l| l.parse().ok()).unwrap_or(100);
                let (prefix, after) = (
                    r.param("prefix").unwrap_or(""),
                    r.param("after").unwrap_or(""),
                );
                self.read(|db| async move { api::keys(&db, prefix, after, limit).await })
                    .await
            }
            ("GET", "/api/key") => match r.param("key") {
                Some(key) => {
                    self.read(|db| async move { api::key(&db, key).await })
                        .await
                }
                None => Response::error("400 Bad Request", "which key: ?key=", None),
            },
            ("GET", "/api/jobs") => self.read(|db| async move { api::jobs(&db).await }).await,
            ("GET", "/api/groups") => self.read(|db| async move { api::groups(&db).await }).await,
            ("GET", "/api/sessions") => {
                self.read(|db| async move { api::sessions(&db).await })
                    .await
            }
            ("POST", path) if path.starts_with("/api/") => self.write(r).await,
            (_, path) if path.starts_with("/api/") => {
                Response::error("405 Method Not Allowed", "not a method of this path", None)
            }
            _ => Response::error("404 Not Found", "not found", None),
        }
    }

    /// `/login?token=T`: the token becomes a cookie only this console gets
    /// (HttpOnly, SameSite=Strict), and the page is opened without it.
    fn login(&self, r: &Request) -> Response {
        let Some(token) = self.options.token.as_deref() else {
            return redirect();
        };
        match r.param("token") {
            Some(given) if http::same_secret(given, token) => {
                let mut response = redirect();
                response.extra.push_str(&format!(
                    "Set-Cookie: {COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/\r\n"
                ));
                response
            }
            _ => Response::error("401 Unauthorized", "not the console's token", None),
        }
    }

    /// The shared connection, made again when it was lost.
    async fn db(&self) -> Option<Arc<Db>> {
        if let Some(db) = self.db.read().await.as_ref().filter(|d| !d.is_closed()) {
            return Some(db.clone());
        }
        let mut slot = self.db.write().await;
        if let Some(db) = slot.as_ref().filter(|d| !d.is_closed()) {
            return Some(db.clone());
        }
        let db = Arc::new(connect(self.dsn.as_deref()).await.ok()?.0);
        *slot = Some(db.clone());
        Some(db)
    }

    async fn read<'a, F, Fut>(&self, f: F) -> Response
    where
        F: FnOnce(Arc<Db>) -> Fut,
        Fut: std::future::Future<Output = Result<Value, tokio_postgres::Error>> + 'a,
    {
        let Some(db) = self.db().await else {
            return Response::error(
                "503 Service Unavailable",
                "the database cannot be reached",
                None,
            );
        };
        match f(db).await {
            Ok(v) => Response::json("200 OK", &v),
            Err(e) => db_error(&e),
        }
    }

    /// A write: only with `--allow-writes`, only from the page (its
    /// header), as the console's database role.
    async fn write(&self, r: &Request) -> Response {
        if !self.options.allow_writes {
            return Response::error(
                "403 Forbidden",
                "this console is read-only: start it with --allow-writes to act",
                None,
            );
        }
        if r.header(WRITE_HEADER) != Some("1") {
            return Response::error(
                "403 Forbidden",
                "a write comes from the console's page",
                None,
            );
        }
        let body: Value = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
        let (statement, name) = match r.path.as_str() {
            "/api/release" => (api::FORCE_RELEASE, "key"),
            "/api/pause" => (api::PAUSE, "job"),
            "/api/resume" => (api::RESUME, "job"),
            "/api/close-session" => (api::CLOSE_SESSION, "session"),
            _ => return Response::error("404 Not Found", "not a write of this console", None),
        };
        let Some(arg) = body.get(name).and_then(Value::as_str) else {
            return Response::error(
                "400 Bad Request",
                &format!("a JSON body with {name:?}"),
                None,
            );
        };
        let Some(db) = self.db().await else {
            return Response::error(
                "503 Service Unavailable",
                "the database cannot be reached",
                None,
            );
        };
        match db.query_one(statement, &[(&arg, Type::TEXT)]).await {
            Ok(row) => Response::json(
                "200 OK",
                &serde_json::json!({ "done": row.get::<_, Option<bool>>(0) }),
            ),
            Err(e) => db_error(&e),
        }
    }

    /// `/events`: a hint per change (`{"event", "key"}`), and `resync`
    /// when the console's LISTEN connection was lost (the page reads
    /// everything again).
    async fn stream(&self, mut socket: TcpStream) {
        let Ok(_turn) = self.streams.try_acquire() else {
            Response::error("503 Service Unavailable", "too many open streams", None)
                .send(&mut socket)
                .await;
            return;
        };
        let mut events = self.events.subscribe();
        if http::start_events(&mut socket).await.is_err() {
            return;
        }
        use tokio::io::AsyncWriteExt;
        loop {
            let line = match tokio::time::timeout(Duration::from_secs(15), events.recv()).await {
                Ok(Ok(event)) => format!("data: {event}\n\n"),
                Ok(Err(broadcast::error::RecvError::Lagged(_))) => {
                    "data: {\"event\":\"resync\"}\n\n".into()
                }
                Ok(Err(broadcast::error::RecvError::Closed)) => return,
                Err(_) => ": still here\n\n".into(),
            };
            if socket.write_all(line.as_bytes()).await.is_err() {
                return;
            }
        }
    }
}

fn redirect() -> Response {
    let mut r = Response::new("303 See Other", "text/plain; charset=utf-8", "");
    r.extra.push_str("Location: /\r\n");
    r
}

/// A refusal of the server's, with its SQLSTATE: 403 for a privilege,
/// 400 for bad input, 502 otherwise.
fn db_error(e: &tokio_postgres::Error) -> Response {
    let Some(db) = e.as_db_error() else {
        return Response::error("502 Bad Gateway", &e.to_string(), None);
    };
    let code = db.code().code();
    let status = match &code[..2] {
        "42" => "403 Forbidden",
        "22" => "400 Bad Request",
        _ => "502 Bad Gateway",
    };
    Response::error(status, db.message(), Some(code))
}
