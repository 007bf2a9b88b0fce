//! Reads a history of successful calls on stdin, one per line (`op key id
//! term acquired_at renewed_at expires_at`, microseconds), and replays each
//! key's through the lease rules (`leaderlock_protocol::history`). Prints
//! the tenures of each key; exits 1 at the first step the rules forbid, 2
//! on a line it cannot read. `--failovers`: promotions happened.
use leaderlock_protocol::history::{check_key, Allow, Record};
use std::collections::BTreeMap;
use std::io::BufRead;
use std::process::ExitCode;

fn main() -> ExitCode {
    let allow = Allow {
        failovers: std::env::args().any(|a| a == "--failovers"),
    };
    let mut keys: BTreeMap<String, Vec<Record>> = BTreeMap::new();
    for (n, line) in std::io::stdin().lock().lines().enumerate() {
        let Ok(line) = line else {
            eprintln!("leaderlock-check-history: cannot read line {}", n + 1);
            return ExitCode::from(2);
        };
        if line.trim().is_empty() {
            continue;
        }
        let Some(r) = Record::parse(&line) else {
            eprintln!("leaderlock-check-history: line {} is not a record", n + 1);
            return ExitCode::from(2);
        };
        keys.entry(r.key.clone()).or_default().push(r);
    }
    for (key, records) in &keys {
        match check_key(records, allow) {
            Ok(tenures) => println!(
                "  {key:?}: {} calls, {tenures} tenures, every step allowed by the rules",
                records.len()
            ),
            Err(e) => {
                println!("  {key:?}: {e}");
                return ExitCode::from(1);
            }
        }
    }
    ExitCode::SUCCESS
}
