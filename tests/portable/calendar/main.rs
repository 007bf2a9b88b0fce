//! Answers the cases of cases.py (one per line on stdin, tab-separated,
//! `\` escapes \n, \t and itself) with the compiled edition's calendar,
//! crates/protocol/src/calendar.rs itself, and serde_json's way of writing
//! an f64 (ryu), appending the answer to each line:
//!   P expr tz                    -> "ok", or why Schedule::cron refuses it
//!   N expr tz after count        -> `count` instants stepped from `after`
//!   E period_us after count      -> the same for Schedule::every
//!   J microseconds               -> microseconds / 1e6 as a JSON number
#[path = "../../../crates/protocol/src/calendar.rs"]
#[allow(dead_code)]
mod calendar;

pub type Micros = i64;

use calendar::Schedule;
use chrono::{DateTime, Utc};
use std::io::BufRead;

fn rfc3339(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

fn steps(s: &Schedule, after: &str, count: usize) -> String {
    let mut t = DateTime::parse_from_rfc3339(after)
        .expect("an RFC 3339 instant")
        .with_timezone(&Utc);
    let mut out = vec![];
    for _ in 0..count {
        match s.next_after(t) {
            Some(n) => {
                out.push(rfc3339(n));
                t = n;
            }
            None => {
                out.push("none".to_string());
                break;
            }
        }
    }
    out.join(",")
}

fn unescape(e: &str) -> String {
    let mut out = String::new();
    let mut it = e.chars();
    while let Some(c) = it.next() {
        if c == '\\' {
            match it.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some(o) => out.push(o),
                None => {}
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn main() {
    for line in std::io::stdin().lock().lines() {
        let line = line.expect("a line");
        let f: Vec<&str> = line.split('\t').collect();
        let arg = unescape(f[1]);
        let answer = match f[0] {
            "P" => Schedule::cron(&arg, f[2]).map_or_else(|e| e, |_| "ok".to_string()),
            "N" => Schedule::cron(&arg, f[2]).map_or_else(
                |e| format!("error: {e}"),
                |s| steps(&s, f[3], f[4].parse().expect("a count")),
            ),
            "E" => Schedule::every(arg.parse().expect("microseconds")).map_or_else(
                |e| format!("error: {e}"),
                |s| steps(&s, f[2], f[3].parse().expect("a count")),
            ),
            "J" => ryu::Buffer::new()
                .format_finite(arg.parse::<i64>().expect("microseconds") as f64 / 1e6)
                .to_string(),
            _ => panic!("unknown case: {line}"),
        };
        println!(
            "{line}\t{}",
            answer.replace('\\', "\\\\").replace('\n', "\\n")
        );
    }
}
