//! A real run's history, replayed through the rules of this crate: each
//! successful call the stress and chaos suites saw (by server clock) must
//! be a step the rules allow from what the calls before it established
//! (the etcd pattern of validating traces against the specification's step
//! function). What the history cannot show (failed calls, the worker's
//! expiries, answers lost to a crash) changes nothing the check relies on:
//! every step is judged against the last recorded state of its key.

use crate::{Lease, Micros};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Acquire,
    Renew,
    Release,
}

/// One successful call: what its caller was told (the row read back in
/// the call's transaction). For a release, `expires_at` is its time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub op: Op,
    pub key: String,
    pub id: String,
    pub term: i64,
    pub acquired_at: Micros,
    pub renewed_at: Micros,
    pub expires_at: Micros,
}

impl Record {
    /// `op key id term acquired_at renewed_at expires_at`, times in
    /// microseconds; None when the line is not one.
    pub fn parse(line: &str) -> Option<Record> {
        let f: Vec<&str> = line.split_whitespace().collect();
        let [op, key, id, term, acquired, renewed, expires] = f[..] else {
            return None;
        };
        Some(Record {
            op: match op {
                "acquire" => Op::Acquire,
                "renew" => Op::Renew,
                "release" => Op::Release,
                _ => return None,
            },
            key: key.to_string(),
            id: id.to_string(),
            term: term.parse().ok()?,
            acquired_at: acquired.parse().ok()?,
            renewed_at: renewed.parse().ok()?,
            expires_at: expires.parse().ok()?,
        })
    }

    /// When the server served it.
    fn at(&self) -> Micros {
        match self.op {
            Op::Release => self.expires_at,
            _ => self.renewed_at,
        }
    }
}

/// How a history may differ from one the rules produce by themselves.
#[derive(Clone, Copy, Debug, Default)]
pub struct Allow {
    /// Promotions happened: a promotion extends held leases without telling
    /// anyone (contract 8.2), so a renewal or release may come after the
    /// expiry its holder last heard of.
    pub failovers: bool,
}

/// Replays `records` of one key in the order the server served them.
/// Returns the number of tenures, or the first step the rules forbid.
pub fn check_key(records: &[Record], allow: Allow) -> Result<usize, String> {
    let mut recs: Vec<&Record> = records.iter().collect();
    recs.sort_by_key(|r| (r.at(), r.term));
    let mut lease: Option<Lease<&str>> = None;
    let mut tenures = 0;
    for r in recs {
        let now = r.at();
        let what = format!("{:?} by {} in term {} at {}", r.op, r.id, r.term, now);
        let known = lease.as_ref();
        if let Some(l) = known {
            if r.term < l.term {
                return Err(format!("{what}: the term went back from {}", l.term));
            }
        }
        let new_tenure = known.is_none_or(|l| r.term > l.term);
        if new_tenure {
            if r.op != Op::Acquire || r.acquired_at != r.renewed_at {
                return Err(format!("{what}: a tenure not started by an acquire"));
            }
            // The previous tenure must have ended: released, or lapsed by
            // the expiry last written (a failover only extends it, which
            // would make this acquisition more wrong, not less).
            if let Some(l) = known.filter(|l| l.is_live(now)) {
                return Err(format!(
                    "{what}: overlaps term {} of {:?}, live until {}",
                    l.term, l.holder, l.expires_at
                ));
            }
            tenures += 1;
            lease = Some(Lease {
                holder: Some(&r.id),
                term: r.term,
                expires_at: r.expires_at,
            });
            continue;
        }
        let l = lease.as_mut().expect("a known tenure");
        if l.holder != Some(r.id.as_str()) {
            return Err(format!("{what}: term {} is held by {:?}", l.term, l.holder));
        }
        // Renewals, an own acquire and releases need the lease live (or a
        // failover may have extended it).
        if !allow.failovers && !l.is_live(now) {
            return Err(format!(
                "{what}: after the lease lapsed at {}",
                l.expires_at
            ));
        }
        if r.op == Op::Release {
            l.holder = None;
            l.expires_at = now;
        } else {
            l.expires_at = r.expires_at;
        }
    }
    Ok(tenures)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(line: &str) -> Record {
        Record::parse(line).expect(line)
    }

    #[test]
    fn a_clean_history_passes() {
        let h = [
            rec("acquire k a 1 0 0 10"),
            rec("renew k a 1 0 5 15"),
            rec("release k a 1 0 5 8"),
            rec("acquire k b 2 8 8 20"),
            rec("acquire k c 3 20 20 30"),
        ];
        assert_eq!(check_key(&h, Allow::default()), Ok(3));
    }

    #[test]
    fn overlaps_reused_terms_and_late_renewals_are_caught() {
        let overlap = [rec("acquire k a 1 0 0 10"), rec("acquire k b 2 9 9 20")];
        assert!(check_key(&overlap, Allow::default())
            .unwrap_err()
            .contains("overlaps"));
        let reused = [rec("acquire k a 2 0 0 10"), rec("acquire k b 1 11 11 20")];
        assert!(check_key(&reused, Allow::default())
            .unwrap_err()
            .contains("went back"));
        let two_ids = [rec("acquire k a 1 0 0 10"), rec("renew k b 1 0 5 15")];
        assert!(check_key(&two_ids, Allow::default())
            .unwrap_err()
            .contains("held by"));
        let late = [rec("acquire k a 1 0 0 10"), rec("renew k a 1 0 10 20")];
        assert!(check_key(&late, Allow::default())
            .unwrap_err()
            .contains("lapsed"));
        assert_eq!(check_key(&late, Allow { failovers: true }), Ok(1));
        assert!(Record::parse("acquire k a x 0 0 10").is_none());
    }
}
