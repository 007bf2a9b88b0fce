//! Statements on `leaderlock_schedules`: a job's schedule kept in the
//! database (contract 24), and what the worker reads and writes to record
//! the due instants nobody claimed.

use leaderlock_protocol::live;

statements! {
    /// A job's schedule, locked for a change by its owner (waits for
    /// another change of it: only its owner's calls and the worker's short
    /// settling lock it). `$1` job, `$2` the caller. Whether the caller is
    /// a member of its owner, and its settings.
    LOCK_SCHEDULE = "SELECT pg_catalog.pg_has_role($2::oid, owner, 'MEMBER'), every, cron, tz, \
                misfire_grace, overlap, paused, active_since, settled_to, backfill \
           FROM @extschema@.leaderlock_schedules WHERE job = $1 FOR NO KEY UPDATE";
    /// Whether the caller `$2` may schedule job `$1` (its row made by a
    /// role the caller is a member of, or none yet): NULL when it has no row.
    JOB_OWNED_BY = "SELECT owner IS NULL OR pg_catalog.pg_has_role($2::oid, owner, 'MEMBER') \
           FROM @extschema@.leaderlock_jobs WHERE job = $1";
    /// A new schedule: `$1` job, `$2` every, `$3` cron, `$4` tz, `$5` grace,
    /// `$6` overlap, `$7` now (judged from then), `$8` its first check, `$9`
    /// backfill, `$10` the caller, who owns it.
    INSERT_SCHEDULE = "INSERT INTO @extschema@.leaderlock_schedules \
             (job, every, cron, tz, misfire_grace, overlap, paused, active_since, settled_to, \
              next_check, backfill, owner, changed_at) \
         VALUES ($1, $2, $3, $4, $5, $6, false, $7, $7, $8, $9, $10::oid, $7)";
    /// A changed schedule, judged from `$7` on (its paused state kept).
    CHANGE_SCHEDULE = "UPDATE @extschema@.leaderlock_schedules \
            SET every = $2, cron = $3, tz = $4, misfire_grace = $5, overlap = $6, \
                active_since = $7, settled_to = $7, \
                next_check = CASE WHEN paused THEN NULL ELSE $8 END, backfill = $9, \
                changed_at = $7 \
          WHERE job = $1";
    /// A schedule whose calendar stays, with another misfire grace (`$2`),
    /// overlap (`$3`) or backfill (`$6`): judged as before; its next check
    /// at `$4` (NULL while paused), changed at `$5`.
    CHANGE_SCHEDULE_RULES = "UPDATE @extschema@.leaderlock_schedules \
            SET misfire_grace = $2, overlap = $3, backfill = $6, \
                next_check = CASE WHEN paused THEN NULL ELSE $4 END, changed_at = $5 \
          WHERE job = $1";
    /// Pauses (`$2` true, `$4` NULL) or resumes (`$2` false, judged from `$3`
    /// on, first checked at `$4`) the schedule of job `$1`.
    PAUSE_SCHEDULE = "UPDATE @extschema@.leaderlock_schedules \
            SET paused = $2, next_check = $4, changed_at = $3, \
                active_since = CASE WHEN $2 THEN active_since ELSE $3 END, \
                settled_to = CASE WHEN $2 THEN settled_to ELSE GREATEST(settled_to, $3) END \
          WHERE job = $1";
    /// Job `$1`'s schedule goes (its runs and terms stay, kept as any job's).
    DELETE_SCHEDULE = "DELETE FROM @extschema@.leaderlock_schedules WHERE job = $1";
    /// Job `$1`'s schedule, as anyone may read it (as `LOCK_SCHEDULE`).
    READ_SCHEDULE = "SELECT pg_catalog.pg_has_role($2::oid, owner, 'MEMBER'), every, cron, tz, \
                misfire_grace, overlap, paused, active_since, settled_to, backfill \
           FROM @extschema@.leaderlock_schedules WHERE job = $1";
    /// The schedules whose next instant's grace has ended by `$1`, their
    /// owners in turn after `$3` (`due_in_turn!`; each role's longest
    /// waiting first), up to `$2`, with their jobs' rows, both locked
    /// without waiting: a schedule being changed, or whose job a claim
    /// holds, is passed over and the next one taken (a role that holds its
    /// jobs' rows in open transactions never keeps the round from the
    /// others'). Each one's settings, pause rules, `pruned_before` and
    /// owner.
    LOCK_SCHEDULES_TO_SETTLE = concat!(
        "SELECT s.job, s.every, s.cron, s.tz, s.misfire_grace, s.settled_to, \
                s.overlap, s.active_since, j.pruned_before, s.owner \
           FROM @extschema@.leaderlock_schedules s \
           JOIN @extschema@.leaderlock_jobs j ON j.job = s.job ",
        due_in_turn!("leaderlock_schedules", "job", "next_check"),
        "s.job WHERE s.next_check <= $1 ",
        in_turn!(),
        " LIMIT $2 FOR NO KEY UPDATE OF s, j SKIP LOCKED"
    );
    /// Every instant of job `$1` up to `$2` is settled; the next check at `$3`.
    SETTLED = "UPDATE @extschema@.leaderlock_schedules SET settled_to = $2, next_check = $3 \
          WHERE job = $1";
    /// When the worker next has a schedule to settle.
    NEXT_SCHEDULE_CHECK = "SELECT next_check FROM @extschema@.leaderlock_schedules \
          WHERE next_check IS NOT NULL ORDER BY next_check LIMIT 1";
    /// Whether a run of job `$1` other than the one due at `$2` is claimed
    /// live at `$3` (contract 24's overlap).
    OTHER_RUN_LIVE = concat!(
        "SELECT EXISTS (SELECT FROM @extschema@.leaderlock_runs \
          WHERE job = $1 AND due <> $2 AND finished_at IS NULL AND ",
        live!("$3"),
        ")"
    );
    /// Overlap `replace`: the other runs of job `$1` claimed live at `$3`
    /// are ended (recorded `replaced`, with `$4`): their runners' renewals
    /// and finishes are refused from now, and the new claim's term fences
    /// them off. Their due instants, holders and terms.
    END_OTHER_RUNS = concat!(
        "UPDATE @extschema@.leaderlock_runs \
            SET finished_at = $3, outcome = 'replaced', detail = $4, \
                expires_at = LEAST(expires_at, $3) \
          WHERE job = $1 AND due <> $2 AND finished_at IS NULL AND ",
        live!("$3"),
        " RETURNING due, holder, term"
    );
    /// The latest due instant of job `$1` a claim took (what a schedule's
    /// lateness is counted from).
    LAST_CLAIMED_DUE = "SELECT pg_catalog.max(due) FROM @extschema@.leaderlock_runs \
          WHERE job = $1 AND claimed_at IS NOT NULL";
}
