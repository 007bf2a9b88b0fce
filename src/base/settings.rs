//! Settings (GUCs), all under `leaderlock.`.

use pgrx::pg_sys;
use pgrx::{GucContext, GucFlags, GucRegistry, GucSetting};
use std::ffi::{CStr, CString};

/// Databases the workers serve (contract 12): `*`, or names separated by
/// commas.
pub static DATABASES: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(Some(c"*"));

/// Deprecated alias (contract 1 of version 1): one database to serve, used
/// when `leaderlock.databases` is left at `*`.
pub static DATABASE: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);

/// Upper bound on any ttl, in seconds (contract 6). Default 1 day.
pub static MAX_TTL: GucSetting<i32> = GucSetting::<i32>::new(86_400);

/// Contract 22: how long runs are kept after their due instant, in seconds.
/// Default 7 days.
pub static RUN_RETENTION: GucSetting<i32> = GucSetting::<i32>::new(604_800);

/// Contract 23: how long transitions are kept in the history, in seconds.
/// Default 7 days.
pub static HISTORY_RETENTION: GucSetting<i32> = GucSetting::<i32>::new(604_800);

/// Contract 23: the most transitions the history keeps. Default 1,000,000.
pub static HISTORY_MAX_ROWS: GucSetting<i32> = GucSetting::<i32>::new(1_000_000);

/// Longest sleep of the worker between two checks, in milliseconds. The
/// worker normally sleeps until the next expiry and is woken early by a
/// commit that sets an earlier one; this bounds the sleep regardless.
pub static NAPTIME: GucSetting<i32> = GucSetting::<i32>::new(1_000);

/// The largest `leaderlock.max_databases`: the slots shared memory has.
pub const MAX_DATABASES_LIMIT: i32 = 4096;

/// Databases with the extension that can be served at once (shared memory
/// slots, set at server start). Default 512.
pub static MAX_DATABASES: GucSetting<i32> = GucSetting::<i32>::new(512);

/// Longest `wait` of le_acquire, in seconds. Default 5 minutes.
pub static MAX_WAIT: GucSetting<i32> = GucSetting::<i32>::new(300);

/// Databases owned by one role that is not a superuser that the launcher
/// serves at once (a role that may create databases could otherwise clone
/// one with the extension until no background worker process is left).
pub static MAX_WORKERS_PER_OWNER: GucSetting<i32> = GucSetting::<i32>::new(2);

/// Entries of the candidates' registry one role may hold at once (it has
/// `candidates::CAPACITY` for the whole server).
pub static MAX_CANDIDATES_PER_ROLE: GucSetting<i32> = GucSetting::<i32>::new(64);

/// Jobs of scheduled runs one role that is not a superuser may have made
/// and not yet forgotten (contract 22: a job goes once its runs all passed
/// the retention).
pub static MAX_JOBS_PER_ROLE: GucSetting<i32> = GucSetting::<i32>::new(1_000);

pub fn init() {
    // A setting read only at server start can be defined only then:
    // PostgreSQL refuses it from a library loaded later (XX000).
    if unsafe { pg_sys::process_shared_preload_libraries_in_progress } {
        GucRegistry::define_int_guc(
            c"leaderlock.max_databases",
            c"Databases with the extension that the workers can serve at once.",
            c"Each takes a slot in shared memory from its first use on (a database without \
              the extension takes none); when all are taken, a further database is not served \
              and its worker says so in the log. Takes effect at server start.",
            &MAX_DATABASES,
            1,
            MAX_DATABASES_LIMIT,
            GucContext::Postmaster,
            GucFlags::default(),
        );
    }
    GucRegistry::define_int_guc(
        c"leaderlock.max_wait",
        c"Longest wait le_acquire may be given.",
        c"A waiting le_acquire holds its statement's snapshot, which keeps vacuum from \
          removing dead rows meanwhile; this bounds how long. Longer waits are rejected \
          with SQLSTATE 22023.",
        &MAX_WAIT,
        0,
        86_400,
        GucContext::Suset,
        GucFlags::UNIT_S,
    );
    GucRegistry::define_string_guc(
        c"leaderlock.databases",
        c"Databases the leaderlock workers serve: * (every one) or a list of names.",
        c"A worker serves each listed database in which the extension is installed: it \
          expires lapsed leases and announces them there. Names are separated by commas; \
          a change takes effect on reload.",
        &DATABASES,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"leaderlock.database",
        c"Deprecated: one database to serve, used when leaderlock.databases is *.",
        c"Kept from version 0.3 and earlier, which served one database only.",
        &DATABASE,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"leaderlock.max_ttl",
        c"Largest ttl a lease may be given.",
        c"le_try_acquire and le_renew reject a longer ttl with SQLSTATE 22023.",
        &MAX_TTL,
        1,
        i32::MAX,
        GucContext::Suset,
        GucFlags::UNIT_S,
    );
    GucRegistry::define_int_guc(
        c"leaderlock.max_jobs_per_role",
        c"Jobs of scheduled runs one role may have made at once.",
        c"A claim that would make another job for a role that is not a superuser is refused \
          (53400). A job is forgotten once its runs all passed leaderlock.run_retention.",
        &MAX_JOBS_PER_ROLE,
        1,
        1_000_000,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"leaderlock.run_retention",
        c"How long scheduled runs are kept after their due instant.",
        c"The worker (or le_expire_lapsed where no worker serves) deletes runs due longer ago \
          than this that are finished or not claimed live (leaderlock_runs), and then the \
          jobs that have no run left; no term is issued twice.",
        &RUN_RETENTION,
        1,
        i32::MAX,
        GucContext::Suset,
        GucFlags::UNIT_S,
    );
    GucRegistry::define_int_guc(
        c"leaderlock.history_retention",
        c"How long transitions are kept in the history.",
        c"The worker (or le_expire_lapsed where no worker serves) deletes older ones from \
          leaderlock_history, oldest first; reading from a position deleted is an error (LE002).",
        &HISTORY_RETENTION,
        1,
        i32::MAX,
        GucContext::Suset,
        GucFlags::UNIT_S,
    );
    GucRegistry::define_int_guc(
        c"leaderlock.history_max_rows",
        c"The most transitions the history keeps.",
        c"Beyond it, the oldest are deleted as by leaderlock.history_retention.",
        &HISTORY_MAX_ROWS,
        1,
        i32::MAX,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"leaderlock.max_workers_per_owner",
        c"Databases owned by one role that is not a superuser that get a worker at once.",
        c"The launcher serves the oldest of them; the others keep lazy expiry (and refuse \
          session-bound leases) until one of those is dropped. Databases a superuser owns \
          are not counted. A change takes effect on reload.",
        &MAX_WORKERS_PER_OWNER,
        0,
        i32::MAX,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"leaderlock.max_candidates_per_role",
        c"Candidates waiting in le_acquire that one role may have listed at once.",
        c"Beyond it, that role's candidates still wait, unlisted and unranked: their \
          priority is not honoured and no release hands them the lease. Superusers are not \
          counted. A change takes effect on reload.",
        &MAX_CANDIDATES_PER_ROLE,
        1,
        i32::MAX,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"leaderlock.naptime",
        c"Longest sleep of the leaderlock worker between two checks.",
        c"The worker sleeps until the next lease expiry, woken early when a shorter lease \
          commits; this caps that sleep.",
        &NAPTIME,
        10,
        3_600_000,
        GucContext::Suset,
        GucFlags::UNIT_MS,
    );
}

/// Which databases are served, from `leaderlock.databases` (and its
/// deprecated alias `leaderlock.database`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Served {
    All,
    Named(Vec<String>),
}

impl Served {
    pub fn includes(&self, database: &str) -> bool {
        match self {
            Served::All => true,
            Served::Named(names) => names.iter().any(|n| n == database),
        }
    }

    /// Whether the database was named, not only matched by `*`.
    pub fn names(&self, database: &str) -> bool {
        matches!(self, Served::Named(names) if names.iter().any(|n| n == database))
    }
}

fn text(setting: &GucSetting<Option<CString>>) -> String {
    setting
        .get()
        .and_then(|c| c.into_string().ok())
        .unwrap_or_default()
}

/// The databases served, as currently set.
pub fn served() -> Served {
    parse_served(&text(&DATABASES), &text(&DATABASE))
}

/// `databases`: `*` or names separated by commas (blanks around a name
/// ignored, double quotes around one removed); `alias`: the deprecated
/// `leaderlock.database`, which applies when `databases` is `*`.
pub fn parse_served(databases: &str, alias: &str) -> Served {
    let alias = alias.trim();
    if databases.trim() == "*" {
        return if alias.is_empty() {
            Served::All
        } else {
            Served::Named(vec![alias.to_string()])
        };
    }
    Served::Named(
        databases
            .split(',')
            .map(|n| {
                let n = n.trim();
                n.strip_prefix('"')
                    .and_then(|n| n.strip_suffix('"'))
                    .unwrap_or(n)
                    .to_string()
            })
            .filter(|n| !n.is_empty())
            .collect(),
    )
}

/// `leaderlock.max_ttl` in microseconds.
pub fn max_ttl_micros() -> i64 {
    i64::from(MAX_TTL.get()) * 1_000_000
}

/// `leaderlock.run_retention` in microseconds.
pub fn run_retention_micros() -> i64 {
    i64::from(RUN_RETENTION.get()) * 1_000_000
}

/// `leaderlock.history_retention` in microseconds.
pub fn history_retention_micros() -> i64 {
    i64::from(HISTORY_RETENTION.get()) * 1_000_000
}

/// `leaderlock.max_wait` in microseconds.
pub fn max_wait_micros() -> i64 {
    i64::from(MAX_WAIT.get()) * 1_000_000
}

/// A setting of PostgreSQL's changed until this is dropped, as a
/// function's SET clause changes it for the call.
pub struct Local(i32);

impl Local {
    pub fn set(name: &CStr, value: &str) -> Local {
        let value = CString::new(value).expect("a setting's value has no NUL");
        unsafe {
            let nest = pg_sys::NewGUCNestLevel();
            pg_sys::set_config_option(
                name.as_ptr(),
                value.as_ptr(),
                pg_sys::GucContext::PGC_USERSET,
                pg_sys::GucSource::PGC_S_SESSION,
                pg_sys::GucAction::GUC_ACTION_SAVE,
                true,
                0,
                false,
            );
            Local(nest)
        }
    }
}

impl Drop for Local {
    fn drop(&mut self) {
        // On an error, the (sub)transaction's abort restores it.
        if !std::thread::panicking() {
            unsafe { pg_sys::AtEOXact_GUC(true, self.0) };
        }
    }
}

#[cfg(test)]
mod unit {
    use super::{parse_served, Served};

    fn named(names: &[&str]) -> Served {
        Served::Named(names.iter().map(|n| n.to_string()).collect())
    }

    #[test]
    fn databases_setting() {
        assert_eq!(parse_served("*", ""), Served::All);
        assert_eq!(parse_served(" * ", "  "), Served::All);
        // the deprecated alias applies only under `*`
        assert_eq!(parse_served("*", "app"), named(&["app"]));
        assert_eq!(parse_served("a, b", "app"), named(&["a", "b"]));
        assert_eq!(
            parse_served(" a ,\"My Db\",, b", ""),
            named(&["a", "My Db", "b"])
        );
        assert_eq!(parse_served("", ""), named(&[]));
        let s = parse_served("postgres, app", "");
        assert!(s.includes("app") && s.names("app") && !s.includes("App"));
        assert!(Served::All.includes("x") && !Served::All.names("x"));
    }
}
