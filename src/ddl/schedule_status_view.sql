-- Contract 24: each schedule with its next due instant, since when it
-- waits for a run (its first due instant no claim took yet) and how long
-- that is, its last outcome, and the missed runs kept. Readable by all.
CREATE VIEW leaderlock_schedule_status AS
SELECT s.job, s.every, s.cron, s.tz, s.misfire_grace, s.overlap, s.paused,
       s.owner::regrole AS owner, t.next_due, t.waiting_since,
       CASE WHEN t.waiting_since IS NOT NULL
            THEN c.now OPERATOR(pg_catalog.-) t.waiting_since
            ELSE '0'::interval END AS overdue,
       f.due AS last_finished_due, f.outcome AS last_outcome,
       (SELECT pg_catalog.count(*) FROM leaderlock_runs r
         WHERE r.job OPERATOR(pg_catalog.=) s.job
           AND r.outcome OPERATOR(pg_catalog.=) 'missed') AS missed,
       s.settled_to, s.changed_at
  FROM leaderlock_schedules s
 CROSS JOIN (SELECT @extschema@.le_now() AS now) c
 CROSS JOIN LATERAL @extschema@.le_schedule_times(s.job) t
  LEFT JOIN LATERAL (
       SELECT r.due, r.outcome FROM leaderlock_runs r
        WHERE r.job OPERATOR(pg_catalog.=) s.job AND r.finished_at IS NOT NULL
        ORDER BY r.due DESC LIMIT 1) f ON true;
REVOKE ALL ON leaderlock_schedule_status FROM PUBLIC;
GRANT SELECT ON leaderlock_schedule_status TO PUBLIC;
