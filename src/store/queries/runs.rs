//! Statements on `leaderlock_jobs` and `leaderlock_runs`: scheduled runs
//! (contract 22).

use leaderlock_protocol::{expiry, held_by, next_term, not_live, of_term};

statements! {
    /// Contract 22: a job's row, made by its first claim; may wait only for a
    /// concurrent first claim (bounded by `keys::insert_first`). `$1` job.
    INSERT_JOB = "INSERT INTO @extschema@.leaderlock_jobs (job, term, owner) \
         SELECT $1, coalesce((SELECT f.term FROM @extschema@.leaderlock_jobs f WHERE f.job = ''), 0), \
                $2::oid \
         ON CONFLICT (job) DO NOTHING RETURNING term";
    /// How many jobs role `$1` made that are still kept (contract 22's
    /// bound per role).
    JOBS_MADE_BY = "SELECT pg_catalog.count(*) FROM @extschema@.leaderlock_jobs WHERE owner = $1::oid";
    /// Retention, for every job: the jobs of up to `$3` runs due before
    /// `$1` that are finished or have no live claim at `$2`, locked to be
    /// pruned, never waiting (a job a claim holds waits for a later prune,
    /// and its claims skip it meanwhile: they take turns on its row).
    LOCK_JOBS_TO_PRUNE = concat!(
        "SELECT j.job FROM @extschema@.leaderlock_jobs j \
          WHERE j.job IN (SELECT r.job FROM @extschema@.leaderlock_runs r \
                           WHERE r.due < $1 AND (r.finished_at IS NOT NULL OR ",
        not_live!("$2"),
        ") ORDER BY r.due LIMIT $3) \
          FOR UPDATE SKIP LOCKED"
    );
    /// The runs of the locked jobs `$1` due before `$2` that are finished
    /// or have no live claim at `$3` (a run still going on keeps its row),
    /// never waiting (a run another transaction holds goes at a later
    /// prune); and no run due before `$2` of those jobs is claimed again.
    /// How many runs went.
    PRUNE_JOBS_RUNS = concat!(
        "WITH gone AS ( \
           DELETE FROM @extschema@.leaderlock_runs r \
            WHERE (r.job, r.due) IN (SELECT job, due FROM @extschema@.leaderlock_runs \
                                     WHERE job = ANY($1::text[]) AND due < $2 \
                                       AND (finished_at IS NOT NULL OR ",
        not_live!("$3"),
        ") FOR UPDATE SKIP LOCKED) \
           RETURNING 1), \
         marked AS ( \
           UPDATE @extschema@.leaderlock_jobs SET pruned_before = GREATEST(pruned_before, $2) \
            WHERE job = ANY($1::text[]) RETURNING 1) \
         SELECT pg_catalog.count(*) FROM gone"
    );
    /// The row of job '' (the highest term of jobs forgotten), made by the
    /// first prune that forgets a job. Its term.
    MAKE_JOBS_FLOOR = "INSERT INTO @extschema@.leaderlock_jobs (job, term) VALUES ('', 0) \
         ON CONFLICT (job) DO NOTHING RETURNING term";
    /// The row of job '' locked without waiting: whether it exists (its
    /// lock then taken, or not: another prune holds it).
    LOCK_JOBS_FLOOR = "SELECT EXISTS (SELECT FROM @extschema@.leaderlock_jobs WHERE job = ''), \
                (SELECT true FROM @extschema@.leaderlock_jobs WHERE job = '' FOR UPDATE SKIP LOCKED)";
    /// Of the locked jobs `$1`, those with no run left and no schedule go; the locked row
    /// of job '' keeps the highest term they had, which a job made again
    /// starts from (contract 22: no term issued twice). How many went.
    FORGET_JOBS = "WITH gone AS ( \
           DELETE FROM @extschema@.leaderlock_jobs j \
            WHERE j.job = ANY($1::text[]) AND j.job <> '' \
              AND NOT EXISTS (SELECT FROM @extschema@.leaderlock_runs r WHERE r.job = j.job) \
              AND NOT EXISTS (SELECT FROM @extschema@.leaderlock_schedules s WHERE s.job = j.job) \
           RETURNING j.term), \
         floor AS ( \
           UPDATE @extschema@.leaderlock_jobs SET term = GREATEST(term, (SELECT pg_catalog.max(g.term) FROM gone g)) \
            WHERE job = '' AND EXISTS (SELECT FROM gone) RETURNING 1) \
         SELECT pg_catalog.count(*) FROM gone";
    /// Whether job `$1`'s row exists (a snapshot read: a claim inserts it only
    /// when it does not, since an insert that meets a row another
    /// transaction has updated waits for that transaction).
    JOB_EXISTS = "SELECT true FROM @extschema@.leaderlock_jobs WHERE job = $1";
    /// Whether the run of job `$1` due at `$2` has a row (read under the
    /// job's lock, so nothing inserts it meanwhile; checked first, for the
    /// reason of `JOB_EXISTS`: its runner may be renewing it right now).
    RUN_EXISTS = "SELECT true FROM @extschema@.leaderlock_runs WHERE job = $1 AND due = $2";
    /// Lock a job's row, never waiting: claims of one job take turns on it,
    /// and so does the worker settling its schedule (renewals and finishes
    /// never touch it). `$1` job. Before when its runs were pruned, and its
    /// schedule's overlap, misfire grace, pause, since when it is judged
    /// and backfill (contract 24; NULL without one).
    LOCK_JOB = "SELECT j.pruned_before, s.overlap, s.misfire_grace, s.paused, s.active_since, \
                s.backfill \
           FROM @extschema@.leaderlock_jobs j \
           LEFT JOIN @extschema@.leaderlock_schedules s ON s.job = j.job \
          WHERE j.job = $1 \
         FOR NO KEY UPDATE OF j SKIP LOCKED";
    /// The job's next term, on its locked row (contract 8.1's floor `$2`).
    NEXT_JOB_TERM = concat!(
        "UPDATE @extschema@.leaderlock_jobs SET term = ",
        next_term!("$2"),
        " WHERE job = $1 RETURNING term"
    );
    /// A run's row, on its first claim, under its job's lock (so nothing else
    /// inserts it meanwhile). Whether it was new. `$1` job, `$2` due.
    INSERT_RUN = "INSERT INTO @extschema@.leaderlock_runs (job, due) VALUES ($1, $2) \
         ON CONFLICT (job, due) DO NOTHING RETURNING true";
    /// Retention, on a new run of job `$1`: its runs due before `$2` that are
    /// finished or have no live claim at `$3` (a run still going on keeps its
    /// row: its runner renews and finishes it), never waiting (a row another
    /// transaction holds goes at a later prune).
    PRUNE_RUNS = concat!(
        "DELETE FROM @extschema@.leaderlock_runs WHERE job = $1 AND due IN \
           (SELECT due FROM @extschema@.leaderlock_runs \
             WHERE job = $1 AND due < $2 AND (finished_at IS NOT NULL OR ",
        not_live!("$3"),
        ") FOR UPDATE SKIP LOCKED)"
    );
    /// What a prune of job `$1` up to `$2` leaves behind: no run due before
    /// `$2` is claimed again (a shorter retention never brings one back).
    MARK_PRUNED = "UPDATE @extschema@.leaderlock_jobs \
            SET pruned_before = GREATEST(pruned_before, $2) WHERE job = $1";
    /// Lock a run only if it may be claimed at `$3`: unfinished and without a
    /// live claim (a rival never locks the runner's row), never waiting.
    /// `$1` job, `$2` due. Its last claim's holder and term.
    LOCK_CLAIMABLE_RUN = concat!(
        "SELECT holder, term FROM @extschema@.leaderlock_runs \
          WHERE job = $1 AND due = $2 AND finished_at IS NULL AND ",
        not_live!("$3"),
        " FOR NO KEY UPDATE SKIP LOCKED"
    );
    /// Contract 24's backfill: lock a run recorded missed and never taken up
    /// since, if it is one of job `$1`'s `$3` latest instants recorded
    /// missed (taken up since or not; `may_backfill`), never waiting. `$2`
    /// due. Its last claim's holder and term.
    LOCK_BACKFILL_RUN = "SELECT r.holder, r.term FROM @extschema@.leaderlock_runs r \
          WHERE r.job = $1 AND r.due = $2 AND r.outcome = 'missed' AND r.backfilled_at IS NULL \
            AND (SELECT pg_catalog.count(*) FROM \
                   (SELECT FROM @extschema@.leaderlock_runs l \
                     WHERE l.job = $1 AND l.due > $2 \
                       AND (l.outcome = 'missed' OR l.backfilled_at IS NOT NULL) \
                     LIMIT $3) later) < $3 \
         FOR NO KEY UPDATE OF r SKIP LOCKED";
    /// Contract 24's backfill: the instants of job `$1` due from `$2` on
    /// that a replica may still run late, oldest first: of its `$3` latest
    /// instants recorded missed (taken up since or not), those never
    /// taken up (as `LOCK_BACKFILL_RUN` locks them).
    BACKFILL_DUE = "SELECT due FROM \
           (SELECT due, outcome, backfilled_at FROM @extschema@.leaderlock_runs \
             WHERE job = $1 AND due >= $2 \
               AND (outcome = 'missed' OR backfilled_at IS NOT NULL) \
             ORDER BY due DESC LIMIT $3) latest \
          WHERE outcome = 'missed' AND backfilled_at IS NULL ORDER BY due";
    /// A claim of a locked run: `$3` id, `$4` term, `$5` now, `$6` ttl, `$7`
    /// the caller, who owns it. `$1` job, `$2` due. A run recorded missed
    /// (locked by `LOCK_BACKFILL_RUN`) is unfinished again, taken up now.
    /// Its expiry and attempt.
    CLAIM_RUN = concat!(
        "UPDATE @extschema@.leaderlock_runs \
            SET holder = $3, term = $4, claimed_at = $5, expires_at = ",
        expiry!("$5", "$6"),
        ", ttl = $6, owner = $7::oid, attempts = attempts + 1, \
            backfilled_at = CASE WHEN finished_at IS NULL THEN backfilled_at ELSE $5 END, \
            finished_at = NULL, outcome = NULL, detail = NULL \
          WHERE job = $1 AND due = $2 \
      RETURNING expires_at, attempts"
    );
    /// A locked run past its misfire grace, recorded missed once, at `$3`,
    /// with why (`$4`). `$1` job, `$2` due.
    MISS_RUN = "UPDATE @extschema@.leaderlock_runs \
            SET finished_at = $3, outcome = 'missed', detail = $4 \
          WHERE job = $1 AND due = $2";
    /// Extend the claim `$3` holds live at `$4` on an unfinished run by `$5`
    /// or its stored ttl, in one statement that never waits and locks only
    /// the caller's own claim (as `RENEW`). `$6` the caller, `$7` the claim's
    /// term or NULL for any. `$1` job, `$2` due. Its expiry and term.
    RENEW_RUN = concat!(
        "UPDATE @extschema@.leaderlock_runs \
            SET expires_at = ",
        expiry!("$4", "coalesce($5, ttl)"),
        ", ttl = coalesce($5, ttl) \
          WHERE job = $1 AND due = $2 AND finished_at IS NULL AND ",
        held_by!("$3", "$4"),
        " AND due = (SELECT due FROM @extschema@.leaderlock_runs \
                      WHERE job = $1 AND due = $2 AND finished_at IS NULL AND ",
        held_by!("$3", "$4"),
        " AND ",
        of_term!("$7"),
        " AND ",
        owned_by!("$6"),
        " FOR NO KEY UPDATE SKIP LOCKED) \
      RETURNING expires_at, term"
    );
    /// Finish the run whose last claim is `$3`'s of term `$4` (live, or lapsed
    /// and not claimed again since), never waiting: `$5` now, `$6` outcome,
    /// `$7` detail, `$8` the caller. `$1` job, `$2` due.
    FINISH_RUN = concat!(
        "UPDATE @extschema@.leaderlock_runs \
            SET finished_at = $5, outcome = $6, detail = $7, \
                expires_at = LEAST(expires_at, $5) \
          WHERE job = $1 AND due = $2 \
            AND due = (SELECT due FROM @extschema@.leaderlock_runs \
                        WHERE job = $1 AND due = $2 AND finished_at IS NULL \
                          AND holder = $3 AND term = $4::int8 AND ",
        owned_by!("$8"),
        " FOR NO KEY UPDATE SKIP LOCKED) \
      RETURNING term"
    );
}
