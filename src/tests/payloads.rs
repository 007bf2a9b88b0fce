//! Contract section 4's payloads (delivery is tested with real clients),
//! and the statements' lease rules held to the protocol crate's.

use pgrx::prelude::*;

#[pg_schema]
mod tests {
    use crate::announce::notify::{rfc3339, Event, ExpiryReason};

    use pgrx::prelude::*;

    // ---- 4 notification payloads (delivery is tested with real clients) ----

    #[pg_test]
    fn run_payloads_name_the_job_and_due_instant() {
        use crate::announce::notify::RunEvent;
        let claimed = RunEvent::Claimed {
            holder: "r\"1",
            term: 7,
            expires_at: 70_000_000,
            attempt: 2,
        };
        let v: serde_json::Value =
            serde_json::from_str(&claimed.payload("job\n1", 60_000_000, 61_000_000)).unwrap();
        assert_eq!(v["event"], "run_claimed");
        assert_eq!(v["job"], "job\n1");
        assert_eq!(v["due"], "2000-01-01T00:01:00.000000Z");
        assert_eq!(v["holder"], "r\"1");
        assert_eq!(v["term"], 7);
        assert_eq!(v["at"], "2000-01-01T00:01:01.000000Z");
        assert_eq!(v["expires_at"], "2000-01-01T00:01:10.000000Z");
        assert_eq!(v["attempt"], 2);
        assert!(v.get("key").is_none(), "runs are not leases: no key");
        let finished = RunEvent::Finished {
            holder: "r",
            term: 7,
            outcome: "failed",
        };
        let v: serde_json::Value = serde_json::from_str(&finished.payload("j", 0, 0)).unwrap();
        assert_eq!(v["event"], "run_finished");
        assert_eq!(v["outcome"], "failed");
        assert!(v.get("expires_at").is_none());
        let missed = RunEvent::Missed.payload("j", 0, 5);
        assert_eq!(
            missed,
            r#"{"event":"run_missed","job":"j","due":"2000-01-01T00:00:00.000000Z","at":"2000-01-01T00:00:00.000005Z"}"#
        );
    }

    #[pg_test]
    fn payloads_are_json_with_the_contract_fields() {
        let acquired = Event::Acquired {
            key: "k",
            holder: "b",
            term: 3,
            at: 0,
            previous_holder: Some("a"),
            expires_at: 10_000_000,
            value: Some(r#"{"addr": "10.0.0.7:8080", "n": 123456789012345678901234567890}"#),
        };
        let v: serde_json::Value = serde_json::from_str(&acquired.payload()).unwrap();
        assert_eq!(v["event"], "acquired");
        assert_eq!(v["key"], "k");
        assert_eq!(v["holder"], "b");
        assert_eq!(v["term"], 3);
        assert_eq!(v["at"], "2000-01-01T00:00:00.000000Z");
        assert_eq!(v["previous_holder"], "a");
        assert_eq!(v["expires_at"], "2000-01-01T00:00:10.000000Z");
        assert_eq!(v["value"]["addr"], "10.0.0.7:8080");
        // numbers go through as written, not rounded to a double
        assert!(acquired
            .payload()
            .contains(r#""n": 123456789012345678901234567890"#));

        let first = Event::Acquired {
            key: "k",
            holder: "b",
            term: 1,
            at: 0,
            previous_holder: None,
            expires_at: 10_000_000,
            value: None,
        };
        let v: serde_json::Value = serde_json::from_str(&first.payload()).unwrap();
        assert!(v.get("previous_holder").is_some_and(|p| p.is_null()));
        assert!(v.get("value").is_some_and(|p| p.is_null()));

        for (reason, text) in [
            (ExpiryReason::Ttl, "ttl"),
            (ExpiryReason::SessionEnded, "session_ended"),
        ] {
            let expired = Event::Expired {
                key: "k",
                holder: "b",
                term: 3,
                at: 0,
                expires_at: 0,
                reason,
            };
            let v: serde_json::Value = serde_json::from_str(&expired.payload()).unwrap();
            assert_eq!(v["event"], "expired");
            assert_eq!(v["reason"], text);
            assert!(v.get("value").is_none());
        }

        let proclaimed = Event::Proclaimed {
            key: "k",
            holder: "b",
            term: 3,
            at: 0,
            value: Some("[1, 2]"),
        };
        let v: serde_json::Value = serde_json::from_str(&proclaimed.payload()).unwrap();
        assert_eq!(v["event"], "proclaimed");
        assert_eq!(v["value"], serde_json::json!([1, 2]));
        assert_eq!(v["term"], 3);

        let released = Event::Released {
            key: "k",
            holder: "b",
            term: 3,
            at: 0,
            forced: false,
        };
        let v: serde_json::Value = serde_json::from_str(&released.payload()).unwrap();
        assert_eq!(v["event"], "released");
        assert_eq!(v["forced"], false);
        assert!(v.get("previous_holder").is_none());
        let forced = Event::Released {
            key: "k",
            holder: "b",
            term: 3,
            at: 0,
            forced: true,
        };
        let v: serde_json::Value = serde_json::from_str(&forced.payload()).unwrap();
        assert_eq!(v["forced"], true);
        assert!(v.get("reason").is_none());
    }

    #[pg_test]
    fn payloads_survive_any_characters_and_fit_the_limit() {
        let nasty = "quote\" back\\slash \u{1} tab\t newline\n é 雪 🦀 </script> '";
        let e = Event::Released {
            key: nasty,
            holder: nasty,
            term: 1,
            at: 0,
            forced: true,
        };
        let v: serde_json::Value = serde_json::from_str(&e.payload()).unwrap();
        assert_eq!(v["key"], nasty);
        assert_eq!(v["holder"], nasty);

        // Worst case: every byte of 255-byte names escaped to \u00XX.
        let worst = "\u{1}".repeat(255);
        let worst_value = format!("\"{}\"", "\\u0001".repeat(333));
        assert_eq!(worst_value.len(), 2000);
        let e = Event::Acquired {
            key: &worst,
            holder: &worst,
            term: i64::MAX,
            at: 0,
            previous_holder: Some(&worst),
            expires_at: 0,
            // the largest value: 2000 bytes of JSON text
            value: Some(&worst_value),
        };
        let payload = e.payload();
        assert!(payload.len() < 8000, "{} bytes", payload.len());
        // and PostgreSQL accepts it
        crate::announce::notify::queue(&payload);
    }

    #[pg_test]
    fn rfc3339_matches_postgres() {
        for ts in [
            "2000-01-01 00:00:00+00",
            "1999-12-31 23:59:59.999999+00",
            "2024-02-29 12:34:56.789012+00",
            "2026-11-22 11:25:03.000001+00",
            "2100-03-01 00:00:00+00",
            "1970-01-01 00:00:00+00",
        ] {
            let (micros, expected) = Spi::connect(|c| {
                let row = c
                    .select(
                        "SELECT ((extract(epoch FROM t) - 946684800) * 1000000)::bigint, \
                                to_char(t AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') \
                           FROM (SELECT $1::timestamptz AS t) s",
                        None,
                        &[ts.into()],
                    )
                    .unwrap()
                    .first();
                (
                    row.get::<i64>(1).unwrap().unwrap(),
                    row.get::<String>(2).unwrap().unwrap(),
                )
            });
            assert_eq!(rfc3339(micros), expected, "{ts}");
        }
    }

    // ---- the statements' lease rules are the protocol crate's ----------------

    /// Every rule of `leaderlock_protocol::sql` (the only form of the rules
    /// the statements of `store::queries` use), evaluated by PostgreSQL over
    /// leases around their expiry, decides as the function the model
    /// checks: the statements cannot drift from the model.
    #[pg_test]
    fn the_sql_rules_decide_as_the_protocol_crate() {
        use crate::base::clock::{micros, ts};
        use leaderlock_protocol as p;
        use pgrx::datum::DatumWithOid;
        let now: i64 = 800_000_000_000_000;
        let ttl = 3_000_000;
        let mut cases = 0;
        for (rule, sql) in p::sql::RULES {
            let query = format!(
                "SELECT ({sql})::text FROM (SELECT $5::text AS holder, $6::timestamptz AS expires_at, \
                 $7::int8 AS term, interval '3 seconds' AS ttl) r"
            );
            for holder in [None, Some("a"), Some("b")] {
                let expiries: &[Option<i64>] = if holder.is_some() {
                    &[Some(now - 1), Some(now), Some(now + 1)]
                } else {
                    &[None, Some(now - 1), Some(now + 1)]
                };
                for &expires_at in expiries {
                    for term in [5, p::TERMS_PER_TIMELINE + 3] {
                        for named in [None, Some(term), Some(term - 1)] {
                            for floor in [1, 7, p::TERMS_PER_TIMELINE + 1] {
                                let lease = p::Lease {
                                    holder,
                                    term,
                                    expires_at: expires_at.unwrap_or(i64::MIN),
                                };
                                let live = p::is_live(holder.is_some(), expires_at, now);
                                let want = match *rule {
                                    "is_live" => live.to_string(),
                                    "not is_live" => (!live).to_string(),
                                    "is_held_by" => lease.is_held_by(&"a", now).to_string(),
                                    "may_vacate" => p::may_vacate(&lease, now).to_string(),
                                    "leads" => p::leads(&lease, &"a", named, now).to_string(),
                                    "next_term" => p::next_term(Some(term), floor).to_string(),
                                    "expiry" => p::expiry(now, ttl).to_string(),
                                    "expiry_after_promotion" => {
                                        p::expiry_after_promotion(now, ttl).to_string()
                                    }
                                    other => panic!("no Rust twin for the SQL rule {other}"),
                                };
                                let args = [
                                    ts(now).into(),
                                    "a".into(),
                                    named.map_or_else(DatumWithOid::null::<i64>, Into::into),
                                    floor.into(),
                                    holder.map_or_else(DatumWithOid::null::<&str>, Into::into),
                                    expires_at.map_or_else(
                                        DatumWithOid::null::<TimestampWithTimeZone>,
                                        |e| ts(e).into(),
                                    ),
                                    term.into(),
                                ];
                                let got = if rule.starts_with("expiry") {
                                    let q = query.replace("::text FROM", "::timestamptz FROM");
                                    let t =
                                        Spi::get_one_with_args::<TimestampWithTimeZone>(&q, &args)
                                            .expect("query");
                                    micros(t).map(|m| m.to_string())
                                } else {
                                    Spi::get_one_with_args::<String>(&query, &args).expect("query")
                                };
                                // A WHERE clause takes NULL as false.
                                let got = got.unwrap_or_else(|| "false".into());
                                assert_eq!(
                                    got, want,
                                    "{rule}: {sql} with holder {holder:?}, expires_at {expires_at:?} \
                                     (now {now}), term {term}, named {named:?}, floor {floor}"
                                );
                                cases += 1;
                            }
                        }
                    }
                }
            }
        }
        assert!(cases > 1000, "{cases} cases");
    }

    /// Contract 24's backfill: the statements that find (`BACKFILL_DUE`) and
    /// lock (`LOCK_BACKFILL_RUN`) a missed run to run late choose exactly
    /// the runs `leaderlock_protocol::runs::may_backfill` allows, the rule
    /// the runs' model explores, for every bound over a job whose runs are
    /// missed, taken up late, or ran.
    #[pg_test]
    fn the_backfill_statements_choose_as_the_protocol_crate() {
        use crate::base::clock::{micros, ts};
        use crate::store::queries as q;
        use crate::tests::helpers::in_schema;
        use leaderlock_protocol::runs::may_backfill;
        let base: i64 = 800_000_000_000_000;
        // oldest first: m missed, b missed then taken up late, s succeeded
        let kinds = "mmbsmbmsm";
        for (i, kind) in kinds.chars().enumerate() {
            let (outcome, backfilled) = match kind {
                'm' => ("missed", "NULL"),
                'b' => ("succeeded", "due"),
                _ => ("succeeded", "NULL"),
            };
            Spi::run_with_args(
                &in_schema(&format!(
                    "INSERT INTO @extschema@.leaderlock_runs (job, due, finished_at, outcome, backfilled_at) \
                     SELECT 'bf', due, due, '{outcome}', {backfilled} FROM (SELECT $1::timestamptz AS due) d"
                )),
                &[ts(base + i as i64 * 1_000_000).into()],
            )
            .expect("insert a run");
        }
        let counted = |k: char| k == 'm' || k == 'b';
        for backfill in 0..=6u16 {
            let mut allowed = Vec::new();
            for (i, kind) in kinds.chars().enumerate() {
                let due = base + i as i64 * 1_000_000;
                let later = kinds.chars().skip(i + 1).filter(|&k| counted(k)).count();
                let want = kind == 'm' && may_backfill(later, backfill);
                if want {
                    allowed.push(due);
                }
                let locked = Spi::connect(|c| {
                    c.select(
                        &in_schema(q::LOCK_BACKFILL_RUN),
                        None,
                        &["bf".into(), ts(due).into(), i64::from(backfill).into()],
                    )
                    .expect("LOCK_BACKFILL_RUN")
                    .len()
                });
                assert_eq!(
                    locked == 1,
                    want,
                    "run {i} ({kind}), {later} later, backfill {backfill}"
                );
            }
            let found: Vec<i64> = Spi::connect(|c| {
                c.select(
                    &in_schema(q::BACKFILL_DUE),
                    None,
                    &["bf".into(), ts(base).into(), i64::from(backfill).into()],
                )
                .expect("BACKFILL_DUE")
                .map(|row| {
                    micros(row.get::<TimestampWithTimeZone>(1).expect("due")).expect("finite")
                })
                .collect()
            });
            assert_eq!(found, allowed, "backfill {backfill}");
        }
    }
}
