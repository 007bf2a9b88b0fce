-- Contract 26: groups. Members (sessions) join a group of partitions; the
-- server assigns them, balanced and sticky; a live owner's partition is
-- revoked, then granted after its ack or its drain budget, in a higher
-- term; a dead owner's at once. Here le_expire_lapsed steps the groups
-- (no worker serves the regression database).
CREATE ROLE ll_grp_a;
CREATE ROLE ll_grp_b;

\set VERBOSITY sqlstate
SELECT le_join(NULL, 'm', '10 seconds', 4);
SELECT le_join('g', NULL, '10 seconds', 4);
SELECT le_join('g', 'm', NULL, 4);
SELECT le_join('g', 'm', '10 seconds', 0);
SELECT le_join('g', 'm', '10 seconds', 100001);
SELECT le_join('g', 'm', '10 seconds', 4, '-1 second');
SELECT le_join('g', 'm', '10 seconds', 4, '1 month');
SELECT le_join('g', 'm', '10 seconds');
SELECT le_ack('g', 'm', 0, 1);
SELECT le_ack('g', 'm', 1, NULL);
SELECT le_assert_partition('g', NULL, 'm');
SELECT le_assert_partition('g', 1, 'm');
\set VERBOSITY default
SELECT (SELECT count(*) FROM leaderlock_groups) + (SELECT count(*) FROM leaderlock_members)
       + (SELECT count(*) FROM leaderlock_partitions) AS nothing_written;

-- The first join makes the group: every partition to its one member, term 1.
SET ROLE ll_grp_a;
SELECT le_join('grp', 'a', '1 hour', 6, '30 seconds') IS NOT NULL AS joined;
SELECT * FROM le_assignment('grp', 'a');
SELECT grp, partitions, drain, owner::regrole FROM leaderlock_groups;
-- Joining again renews; its count and drain as they are need no right.
SELECT le_join('grp', 'a', '1 hour') IS NOT NULL AS renewed;
SELECT count(*) AS members FROM leaderlock_members;
RESET ROLE;

-- A second member: half of a's partitions are revoked (a is live), none
-- granted yet; b owns nothing until a gives them back.
SET ROLE ll_grp_b;
SELECT le_join('grp', 'b', '1 hour') IS NOT NULL AS joined;
SELECT * FROM le_assignment('grp', 'b');
\set VERBOSITY sqlstate
SELECT le_join('grp', 'b', '1 hour', 8);
SELECT le_join('grp', 'a', '1 hour');
\set VERBOSITY default
RESET ROLE;
SELECT partition, term, state, until IS NOT NULL AS until FROM le_assignment('grp', 'a');

-- a still owns a revoked partition until it gives it back: its guard holds.
SELECT le_assert_partition('grp', 4, 'a', 1) AS term;
\set VERBOSITY sqlstate
SELECT le_assert_partition('grp', 4, 'b');
SELECT le_assert_partition('grp', 1, 'a', 2);
\set VERBOSITY default
-- Another role neither guards a's partition (a rival's open guard would
-- hold the group's steps back) nor gives it back.
SET ROLE ll_grp_b;
\set VERBOSITY sqlstate
SELECT le_assert_partition('grp', 4, 'a', 1);
\set VERBOSITY default
SELECT le_ack('grp', 'a', 4, 1) AS acked_by_another_role;
RESET ROLE;
-- Given back: granted to b in term 2 at once; a's guard on it refuses.
SET ROLE ll_grp_a;
SELECT le_ack('grp', 'a', 4, 1) AS acked, le_ack('grp', 'a', 4, 1) AS acked_again;
RESET ROLE;
SELECT * FROM le_assignment('grp', 'b');
\set VERBOSITY sqlstate
SELECT le_assert_partition('grp', 4, 'a');
\set VERBOSITY default
SELECT le_assert_partition('grp', 4, 'b', 2) AS term;
-- The others given back too: balanced, 3 each.
SET ROLE ll_grp_a;
SELECT bool_and(le_ack('grp', 'a', partition, term)) AS acked
  FROM le_assignment('grp', 'a') WHERE state = 'revoked';
RESET ROLE;
SELECT member, count(*) AS owned, min(term) AS min_term, max(term) AS max_term
  FROM leaderlock_partitions WHERE grp = 'grp' GROUP BY member ORDER BY member;
-- The view: who owns what, live.
SELECT "group", partition, member, term, state, until IS NOT NULL AS until, live
  FROM leaderlock_group_status WHERE "group" = 'grp' ORDER BY partition;

-- a leaves: its partitions go to b at once, each in its next term.
SET ROLE ll_grp_a;
SELECT le_leave('grp', 'a') AS left_, le_leave('grp', 'a') AS left_again;
RESET ROLE;
SELECT partition, member, term FROM leaderlock_partitions WHERE grp = 'grp' ORDER BY partition;

-- The owner shrinks the group: a partition above the count is revoked
-- from its live owner, then freed once given back; its row and term stay.
SET ROLE ll_grp_a;
SELECT le_join('grp', 'a2', '1 hour', 5) IS NOT NULL AS joined_and_shrunk;
RESET ROLE;
SELECT partition, member, term, revoke_until IS NOT NULL AS revoked
  FROM leaderlock_partitions WHERE grp = 'grp' ORDER BY partition;

-- A member whose session lapsed is dead: the next step (here
-- le_expire_lapsed) grants its partitions to the others at once.
SET ROLE ll_grp_b;
SELECT le_join('g2', 'x', '1 second', 2, '0') IS NOT NULL AS joined;
RESET ROLE;
SELECT le_join('g2', 'y', '1 hour') IS NOT NULL AS joined;
SELECT pg_sleep(1.2);
SELECT le_expire_lapsed() >= 0 AS stepped;
SELECT partition, member, term FROM leaderlock_partitions WHERE grp = 'g2' ORDER BY partition;

-- A revoked partition goes, when given back, to whom the assignment names
-- then: a third member joining takes one of b's two revocations.
SELECT le_join('rt', 'a', '1 hour', 4, '1 hour') IS NOT NULL AS joined;
SELECT le_join('rt', 'b', '1 hour') IS NOT NULL AS joined;
SELECT le_join('rt', 'c', '1 hour') IS NOT NULL AS joined;
SELECT le_ack('rt', 'a', 3, 1) AS acked_3, le_ack('rt', 'a', 4, 1) AS acked_4;
SELECT partition, member, term, revoke_until IS NOT NULL AS revoked
  FROM leaderlock_partitions WHERE grp = 'rt' ORDER BY partition;

-- Every change is in the history under the group's name.
SELECT event, holder, term, payload::jsonb->>'partition' AS partition
  FROM (SELECT 1 AS part, position AS n, event, holder, term, payload::text AS payload
          FROM leaderlock_history WHERE key = 'g2'
        UNION ALL
        SELECT 2, seq, event, holder, term, payload FROM leaderlock_history_pending WHERE key = 'g2') h
 ORDER BY part, n;

-- Every member leaves; the groups' rows go (the files after this one
-- count sessions and rows).
SET ROLE ll_grp_b;
SELECT le_leave('grp', 'b') AS left_;
RESET ROLE;
SET ROLE ll_grp_a;
SELECT le_leave('grp', 'a2') AS left_;
RESET ROLE;
SELECT le_leave('g2', 'y') AS left_;
SELECT bool_and(le_leave('rt', m)) AS left_ FROM unnest(ARRAY['a', 'b', 'c']) m;
SELECT count(*) AS sessions_left FROM leaderlock_sessions;
SELECT count(*) AS owned_left FROM leaderlock_partitions WHERE member IS NOT NULL;
DELETE FROM leaderlock_partitions;
DELETE FROM leaderlock_members;
DELETE FROM leaderlock_groups;
DROP OWNED BY ll_grp_a, ll_grp_b;
DROP ROLE ll_grp_a;
DROP ROLE ll_grp_b;
