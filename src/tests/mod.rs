//! `#[pg_test]` unit tests: every rule of contract sections 2, 3 and 6, run
//! inside one backend. Several sessions, LISTEN/NOTIFY delivery and the
//! worker are tested with real clients under `tests/`. Each file's tests
//! are in a module `tests` (`#[pg_schema]`): `cargo pgrx test` and
//! tests/unit/run.py call them in schema `tests`.

mod durability;
mod helpers;
mod input;
mod payloads;
mod plans;
mod transitions;
mod values;
