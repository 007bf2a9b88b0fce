//! The same rules as SQL text, for the statements that must apply them
//! inside one statement: to lock only rows the caller may change (a rival
//! must never lock the holder's row), or to decide and write in one round
//! trip (a renewal). The extension's statements are built from these
//! macros and from no other form of the rules; its unit test
//! `the_sql_rules_decide_as_the_protocol_crate` evaluates each one in
//! PostgreSQL over a grid of leases and compares it with the function it
//! mirrors, so the model, the client and the statements cannot drift apart.
//!
//! Each macro takes SQL text: optionally a column prefix such as `"s."`,
//! then the parameters or expressions (`"$3"`, `"@extschema@.le_now()"`).
//! Columns are the tables' `holder`, `expires_at` and `term`.

/// `is_live`: the lease has a holder and has not reached its expiry at `now`.
#[macro_export]
macro_rules! live {
    ($now:literal) => {
        $crate::live!("", $now)
    };
    ($p:literal, $now:literal) => {
        concat!(
            "(",
            $p,
            "holder IS NOT NULL AND ",
            $p,
            "expires_at > ",
            $now,
            ")"
        )
    };
}

/// `!is_live`: vacant, or lapsed at `now` (acquirable by anyone).
#[macro_export]
macro_rules! not_live {
    ($now:literal) => {
        $crate::not_live!("", $now)
    };
    ($p:literal, $now:literal) => {
        concat!(
            "(",
            $p,
            "holder IS NULL OR ",
            $p,
            "expires_at <= ",
            $now,
            ")"
        )
    };
}

/// `Lease::is_held_by`: held live by `id` at `now`.
#[macro_export]
macro_rules! held_by {
    ($id:literal, $now:literal) => {
        $crate::held_by!("", $id, $now)
    };
    ($p:literal, $id:literal, $now:literal) => {
        concat!(
            "(",
            $p,
            "holder = ",
            $id,
            " AND ",
            $p,
            "expires_at > ",
            $now,
            ")"
        )
    };
}

/// `may_vacate`: has a holder and lapsed at `now` (the worker's to vacate).
#[macro_export]
macro_rules! lapsed {
    ($now:literal) => {
        $crate::lapsed!("", $now)
    };
    ($p:literal, $now:literal) => {
        concat!(
            "(",
            $p,
            "holder IS NOT NULL AND ",
            $p,
            "expires_at <= ",
            $now,
            ")"
        )
    };
}

/// The term part of `leads`: the tenure of term `$term` (int8), or
/// any when it is NULL.
#[macro_export]
macro_rules! of_term {
    ($term:literal) => {
        concat!("(", $term, "::int8 IS NULL OR term = ", $term, "::int8)")
    };
}

/// `next_term` of a row that has a term: one above it, never below `floor`.
#[macro_export]
macro_rules! next_term {
    ($floor:literal) => {
        concat!("GREATEST(term + 1, ", $floor, ")")
    };
}

/// `expiry` (and `expiry_after_promotion`): `now` + `ttl`.
#[macro_export]
macro_rules! expiry {
    ($now:literal, $ttl:literal) => {
        concat!("(", $now, " + ", $ttl, ")")
    };
}

/// Every rule as SQL over the columns `holder`, `expires_at`, `term` and
/// `ttl` of one row, with `$1` now (timestamptz), `$2` an id (text), `$3` a
/// term (int8) and `$4` a floor (int8), by the name of the function it
/// mirrors: what the extension's test evaluates.
pub const RULES: &[(&str, &str)] = &[
    ("is_live", live!("$1")),
    ("not is_live", not_live!("$1")),
    ("is_held_by", held_by!("$2", "$1")),
    ("may_vacate", lapsed!("$1")),
    (
        "leads",
        concat!(held_by!("$2", "$1"), " AND ", of_term!("$3")),
    ),
    ("next_term", next_term!("$4")),
    ("expiry", expiry!("$1", "ttl")),
    ("expiry_after_promotion", expiry!("$1", "ttl")),
];

/// Rules the extension's statements hold over many rows, which `RULES`
/// cannot evaluate over one: the function, and the statements that hold
/// it. A #[pg_test] runs those statements over rows that cover the rule
/// and compares their choice with the function's.
pub const STATEMENT_RULES: &[(&str, &[&str])] =
    &[("may_backfill", &["LOCK_BACKFILL_RUN", "BACKFILL_DUE"])];

#[cfg(test)]
mod tests {
    #[test]
    fn prefixes_apply_to_every_column() {
        assert_eq!(
            live!("s.", "$2"),
            "(s.holder IS NOT NULL AND s.expires_at > $2)"
        );
        assert_eq!(
            held_by!("l.", "$1", "$2"),
            "(l.holder = $1 AND l.expires_at > $2)"
        );
        assert_eq!(not_live!("$3"), "(holder IS NULL OR expires_at <= $3)");
    }
}
