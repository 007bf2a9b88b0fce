//! What the unit tests share: reading one value, running as a worker's
//! check does, and asserting that a call is refused and changes nothing.

use pgrx::pg_sys::panic::CaughtError;
use pgrx::prelude::*;

pub fn bool_of(sql: &str) -> bool {
    Spi::get_one::<bool>(sql).expect("query").expect("not null")
}

pub fn text_of(sql: &str) -> Option<String> {
    Spi::get_one::<String>(sql).expect("query")
}

pub fn i64_of(sql: &str) -> i64 {
    Spi::get_one::<i64>(sql).expect("query").expect("not null")
}

/// (holder, term, state) of a key from the status view.
pub fn lease_of(key: &str) -> (Option<String>, i64, String) {
    Spi::connect(|c| {
        let row = c
            .select(
                "SELECT holder, term, state FROM leaderlock_status WHERE key = $1",
                None,
                &[key.into()],
            )
            .expect("select")
            .first();
        (
            row.get::<String>(1).expect("holder"),
            row.get::<i64>(2).expect("term").expect("term"),
            row.get::<String>(3).expect("state").expect("state"),
        )
    })
}

/// Runs `f` as a worker's check would, in the extension's schema: for
/// tests that call the library's Rust functions directly.
pub fn in_call<T>(f: impl FnOnce() -> T) -> T {
    let schema = crate::workers::bgworker::extension_schema().expect("the extension is installed");
    let _call = crate::store::call::enter_worker(schema);
    f()
}

/// The extension's statements as the library runs them: in the
/// extension's schema.
pub fn in_schema(sql: &str) -> String {
    let schema = text_of(
        "SELECT quote_ident(n.nspname) FROM pg_extension e \
           JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'leaderlock'",
    )
    .expect("the extension is installed");
    sql.replace("@extschema@", &schema)
}

/// The whole table as text, to show that something changed nothing.
pub fn table_image() -> String {
    text_of("SELECT coalesce(string_agg(l::text, ';' ORDER BY key), '') FROM leaderlock l")
        .unwrap_or_default()
}

pub fn sleep_ms(ms: u64) {
    std::thread::sleep(std::time::Duration::from_millis(ms));
}

/// Before a test that times a short lease: every function's first call
/// in a backend loads the library and prepares its plans, which took
/// over a second for a debug build on a busy machine.
pub fn warm_up() {
    assert!(bool_of("SELECT le_try_acquire('warm-up', 'w', '1 minute')"));
    assert!(bool_of("SELECT le_renew('warm-up', 'w')"));
    assert_eq!(text_of("SELECT le_leader('warm-up')").as_deref(), Some("w"));
    assert!(bool_of("SELECT le_release('warm-up', 'w')"));
}

/// Runs `sql` in a subtransaction. Returns None when it succeeds, else
/// the SQLSTATE and message of its error (the subtransaction is rolled
/// back, as a client's failed statement would be).
pub fn error_of(sql: &str) -> Option<(PgSqlErrorCode, String)> {
    let (cxt, owner) = unsafe { (pg_sys::CurrentMemoryContext, pg_sys::CurrentResourceOwner) };
    unsafe { pg_sys::BeginInternalSubTransaction(std::ptr::null()) };
    PgTryBuilder::new(|| {
        Spi::run(sql).expect("spi");
        unsafe {
            pg_sys::ReleaseCurrentSubTransaction();
            pg_sys::MemoryContextSwitchTo(cxt);
            pg_sys::CurrentResourceOwner = owner;
        }
        None
    })
    .catch_others(|e| {
        unsafe {
            pg_sys::MemoryContextSwitchTo(cxt);
            pg_sys::RollbackAndReleaseCurrentSubTransaction();
            pg_sys::MemoryContextSwitchTo(cxt);
            pg_sys::CurrentResourceOwner = owner;
        }
        let report = match e {
            CaughtError::PostgresError(r)
            | CaughtError::ErrorReport(r)
            | CaughtError::RustPanic { ereport: r, .. } => r,
        };
        Some((report.sql_error_code(), report.message().to_string()))
    })
    .execute()
}

/// Asserts that `sql` fails with `code`, that the message contains every
/// word of `mentions`, and that the table is unchanged.
pub fn assert_rejected(sql: &str, code: PgSqlErrorCode, mentions: &[&str]) {
    let before = table_image();
    let (got, message) = error_of(sql).unwrap_or_else(|| panic!("{sql} did not fail"));
    assert_eq!(got, code, "{sql}: {message}");
    for m in mentions {
        assert!(
            message.contains(m),
            "{sql}: message {message:?} lacks {m:?}"
        );
    }
    assert_eq!(table_image(), before, "{sql} changed the table");
}
