#!/usr/bin/env bash
# Portable -> compiled -> portable on a live database, keeping every lease,
# term, owner, value and counter, the tenures of a key of many slots
# and the sessions of contract 21 (their keys, a lock-delay) and a group of
# contract 26 (its members, partitions and terms) included (portable/to-compiled.sql and to-portable.sql), on a cluster with the compiled edition installed and
# preloaded (scripts/test.sh runs it on PostgreSQL 15 and 18 after the
# package suite installed it). After the move to the compiled edition the
# worker serves the database and the leases go on from their terms; after
# the move back, the portable functions do.
set -euo pipefail
major=${PG_MAJOR:?}  # (lib.sh, when sourced, picks its default version)
source "$(dirname "$0")/../../scripts/lib.sh"
use_pg "$major"
fail() { log "FAILED: $*"; exit 1; }
DATA=$(mktemp -d /tmp/leaderlock-editions.XXXXXX)
PORT=$(free_port)
trap 'stop_cluster "$DATA/data" immediate; rm -rf "$DATA"' EXIT
give_to_server "$DATA"
start_cluster "$DATA/data" "$PORT"
q() { psql_at "$PORT" -d editions -At "$@"; }
psql_at "$PORT" -d postgres -c "CREATE ROLE ll_admin LOGIN CREATEROLE NOSUPERUSER" \
  -c "CREATE ROLE ll_app NOLOGIN" -c "GRANT ll_app TO ll_admin" -c "CREATE DATABASE editions OWNER ll_admin"
# the portable edition installs only into a schema that is the admin's alone
psql_at "$PORT" -d editions -c "ALTER SCHEMA public OWNER TO ll_admin" -c "REVOKE CREATE ON SCHEMA public FROM PUBLIC"
# the portable edition, installed as a managed service's admin would
"$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PORT" -U ll_admin -d editions -1 \
  -f "$REPO_ROOT/portable/leaderlock.sql" >/dev/null
[ "$(q -c "SELECT le_capabilities()->>'edition'")" = portable ] || fail "not the portable edition"
q >/dev/null <<'SQL'
SET ROLE ll_app;
SELECT le_try_acquire('e-live', 'a', '1 hour', value => '{"addr": "10.0.0.1", "n": 12345678901234567890}');
RESET ROLE;
SELECT le_try_acquire('e-vacant', 'a', '1 hour'), le_release('e-vacant', 'a');
SELECT le_try_acquire('e-vacant', 'b', '1 hour'), le_release('e-vacant', 'b');
SELECT le_try_acquire('e-held', 'c', '1 hour'), le_renew('e-held', 'c');
-- contract 17: a key of 3 slots, two live tenures (one another role's,
-- with a value) and a vacated one
SET ROLE ll_app;
SELECT le_try_acquire('e-sem', 's1', '1 hour', value => '{"shard": 1}', slots => 3);
RESET ROLE;
SELECT le_try_acquire('e-sem', 's2', '1 hour', slots => 3);
SELECT le_try_acquire('e-sem', 's3', '1 hour', slots => 3);
SELECT le_release('e-sem', 's3');
-- contract 21: a live session of another role keeping values, with two
-- keys (one with a value) and a tenure of a key of many slots (with a
-- value), and a key and a slot vacated under a lock-delay
SET ROLE ll_app;
SELECT le_open_session('e-ses', '1 hour', keep_values => true) AS s \gset
SELECT le_try_acquire_in(:'s', 'e-ses-1', '{"v": 1}'), le_try_acquire_in(:'s', 'e-ses-2'),
       le_try_acquire_in(:'s', 'e-ses-pool', '{"v": 2}', slots => 2);
SELECT le_open_session('e-ses-d', '200 milliseconds', lock_delay => '1 minute') AS d \gset
SELECT le_try_acquire_in(:'d', 'e-ses-d'), le_try_acquire_in(:'d', 'e-ses-dpool', slots => 2);
RESET ROLE;
SELECT pg_sleep(0.3);
SELECT le_try_acquire('e-ses-d', 'x', '1 hour');   -- ends the lapsed session: the delays start
-- contract 26: a group of another role, two of its member's four
-- partitions revoked for a second member (until an hour from now)
SET ROLE ll_app;
SELECT le_join('e-grp', 'ga', '1 hour', 4, '1 hour') IS NOT NULL;
RESET ROLE;
SELECT le_join('e-grp', 'gb', '1 hour') IS NOT NULL;
SQL
snapshot() {
  q -c "SELECT key, holder, term, acquired_at, renewed_at, expires_at, ttl, value, owner, tenures, releases,
               expiries, changed_at, slots, session, delayed_until FROM leaderlock ORDER BY key" \
    -c "SELECT key, slot, holder, term, acquired_at, renewed_at, expires_at, ttl, value, owner, releases,
               expiries, changed_at, session, delayed_until FROM leaderlock_slots ORDER BY key, slot" \
    -c "SELECT session, id, owner, ttl, opened_at, renewed_at, expires_at, lock_delay, keep_values
          FROM leaderlock_sessions ORDER BY session" \
    -c "SELECT grp, partitions, drain, owner, changed_at, check_at, restep FROM leaderlock_groups ORDER BY grp" \
    -c "SELECT grp, member, session, joined_at FROM leaderlock_members ORDER BY grp, member" \
    -c "SELECT grp, partition, member, session, term, revoke_until, next_member, acked, changed_at
          FROM leaderlock_partitions ORDER BY grp, partition"
}
# Contract 23: the history comes along, positions and all (the rows
# numbered before a move, identical after it; later ones are numbered above).
history_upto() {
  q -c "SELECT row(h.position, h.at, h.event, h.key, h.holder, h.term, h.role, h.payload)::text
          FROM leaderlock_history h WHERE h.position <= $1 ORDER BY h.position"
}
q -c "SELECT _le_number_history()" >/dev/null
hmax=$(q -c "SELECT coalesce(max(position), 0) FROM leaderlock_history")
[ "$hmax" -gt 0 ] || fail "no history to carry"
hist_before=$(history_upto "$hmax")
# and one transition not numbered yet: carried as such, numbered by the
# compiled edition's worker after the rest
q -c "SELECT le_try_acquire('e-pending', 'p', '1 hour')" >/dev/null
[ "$(q -c "SELECT count(*) FROM leaderlock_history_pending")" = 1 ] || fail "no transition waiting to be numbered"
pending=$(q -c "SELECT concat_ws(' ', event, key, holder, term, payload::jsonb->>'at') FROM leaderlock_history_pending")
before=$(snapshot)

# to the compiled edition (as a superuser; the compiled files are installed)
(cd "$REPO_ROOT/portable" && psql_at "$PORT" -d editions -f to-compiled.sql >/dev/null)
[ "$(q -c "SELECT extversion FROM pg_extension WHERE extname = 'leaderlock'")" = "$EXT_VERSION" ] \
  || fail "the compiled edition is not installed"
after=$(snapshot)
[ "$before" = "$after" ] || { diff <(echo "$before") <(echo "$after") || true; fail "rows differ after to-compiled"; }
[ "$(history_upto "$hmax")" = "$hist_before" ] || fail "the history differs after to-compiled"
for _ in $(seq 100); do [ "$(q -c "SELECT le_worker_running()")" = t ] && break; sleep 0.1; done
[ "$(q -c "SELECT le_worker_running()")" = t ] || fail "no worker serves the database after to-compiled"
carried() {
  q -c "SELECT concat_ws(' ', event, key, holder, term, payload->>'at') FROM leaderlock_history
         WHERE key = 'e-pending' AND position > $hmax"
}
for _ in $(seq 100); do [ -n "$(carried)" ] && break; sleep 0.1; done
[ "$(carried)" = "$pending" ] || fail "the transition waiting to be numbered: '$(carried)', not '$pending'"
got=$(q <<'SQL'
SET ROLE ll_app;
SELECT le_renew('e-live', 'a');
RESET ROLE;
SELECT le_try_acquire('e-vacant', 'd', '1 hour');
SELECT term FROM leaderlock WHERE key = 'e-vacant';
SELECT le_try_acquire('e-held', 'x', '1 hour');
SET ROLE ll_app;
SELECT le_renew('e-sem', 's1');
RESET ROLE;
SELECT le_try_acquire('e-sem', 's4', '1 hour', slots => 3);   -- the vacated slot 3, term 4
SELECT le_try_acquire('e-sem', 's5', '1 hour', slots => 3);   -- every slot live
SELECT string_agg(holder || ':' || term, ' ' ORDER BY slot) FROM leaderlock_slots WHERE key = 'e-sem';
SET ROLE ll_app;
SELECT le_renew_session(session), le_assert_leader('e-ses-1', 'e-ses'), le_assert_leader('e-ses-pool', 'e-ses')
  FROM leaderlock_sessions WHERE id = 'e-ses';
RESET ROLE;
SELECT le_try_acquire('e-ses-d', 'y', '1 hour'),
       (SELECT holder IS NULL AND delayed_until > now() FROM leaderlock WHERE key = 'e-ses-d');   -- the lock-delay goes on
SELECT le_try_acquire('e-ses-dpool', 'y', '1 hour', slots => 2),   -- slot 2 (slot 1 delayed)
       (SELECT holder IS NULL AND delayed_until > now()
          FROM leaderlock_slots WHERE key = 'e-ses-dpool' AND slot = 1);
SQL
)
[ "$got" = $'t\nt\n3\nf\nt\nt\nf\ns1:1 s2:2 s4:4\nt|1|1\nf|t\nt|t' ] || fail "after to-compiled: $got"
# the group goes on: a revoked partition given back goes to the other member
got=$(q <<'SQL'
SET ROLE ll_app;
SELECT le_ack('e-grp', 'ga', 3, 1);
RESET ROLE;
SELECT string_agg(partition || ':' || member || ':' || term, ' ' ORDER BY partition)
  FROM leaderlock_partitions WHERE grp = 'e-grp';
SQL
)
[ "$got" = $'t\n1:ga:1 2:ga:1 3:gb:2 4:ga:1' ] || fail "the group after to-compiled: $got"
log "portable -> compiled: $(echo "$before" | wc -l) rows identical, the worker serves the database, terms go on"

# and back
for _ in $(seq 100); do
  [ "$(q -c "SELECT count(*) FROM leaderlock_history_pending")" = 0 ] && break; sleep 0.1
done
hmax=$(q -c "SELECT coalesce(max(position), 0) FROM leaderlock_history")
hist_before=$(history_upto "$hmax")
before=$(snapshot)
(cd "$REPO_ROOT/portable" && psql_at "$PORT" -d editions -v owner=ll_admin -f to-portable.sql >/dev/null)
[ -z "$(q -c "SELECT extversion FROM pg_extension WHERE extname = 'leaderlock'")" ] || fail "the extension is still there"
[ "$(q -c "SELECT le_capabilities()->>'edition'")" = portable ] || fail "not the portable edition after to-portable"
after=$(snapshot)
[ "$before" = "$after" ] || { diff <(echo "$before") <(echo "$after") || true; fail "rows differ after to-portable"; }
[ "$(history_upto "$hmax")" = "$hist_before" ] || fail "the history differs after to-portable"
got=$(q <<'SQL'
SELECT le_release('e-vacant', 'd');
SELECT le_try_acquire('e-vacant', 'e', '1 hour');
SELECT term FROM leaderlock WHERE key = 'e-vacant';
SET ROLE ll_app;
SELECT le_renew('e-live', 'a');
SELECT le_renew('e-sem', 's1');
RESET ROLE;
SELECT le_release('e-sem', 's4');
SELECT le_try_acquire('e-sem', 's6', '1 hour', slots => 3);   -- term 5
SELECT string_agg(holder || ':' || term, ' ' ORDER BY slot) FROM leaderlock_slots WHERE key = 'e-sem';
SET ROLE ll_app;
SELECT le_renew_session(session), le_assert_leader('e-ses-2', 'e-ses'), le_assert_leader('e-ses-pool', 'e-ses'),
       le_close_session(session)
  FROM leaderlock_sessions WHERE id = 'e-ses';
RESET ROLE;
SELECT le_try_acquire('e-ses-d', 'y', '1 hour'),
       (SELECT holder IS NULL AND delayed_until > now() FROM leaderlock WHERE key = 'e-ses-d');   -- the lock-delay goes on
SELECT le_try_acquire('e-ses-dpool', 'z', '1 hour', slots => 2),   -- slot 1 delayed, slot 2 y's
       (SELECT holder IS NULL AND delayed_until > now()
          FROM leaderlock_slots WHERE key = 'e-ses-dpool' AND slot = 1);
SELECT value FROM leaderlock WHERE key = 'e-ses-1';  -- kept by the closed session
SELECT value FROM leaderlock_slots WHERE key = 'e-ses-pool';  -- its tenure's too
SQL
)
[ "$got" = $'t\nt\n4\nt\nt\nt\nt\ns1:1 s2:2 s6:5\nt|1|1|t\nf|t\nf|t\n{"v": 1}\n{"v": 2}' ] || fail "after to-portable: $got"
got=$(q <<'SQL'
SET ROLE ll_app;
SELECT le_join('e-grp', 'ga', '1 hour') = session FROM leaderlock_members WHERE grp = 'e-grp' AND member = 'ga';
SELECT le_ack('e-grp', 'ga', 4, 1);
RESET ROLE;
SELECT string_agg(partition || ':' || member || ':' || term, ' ' ORDER BY partition)
  FROM leaderlock_partitions WHERE grp = 'e-grp';
SELECT le_assert_partition('e-grp', 4, 'gb', 2);
SQL
)
[ "$got" = $'t\nt\n1:ga:1 2:ga:1 3:gb:2 4:gb:2\n2' ] || fail "the group after to-portable: $got"
log "compiled -> portable: $(echo "$before" | wc -l) rows identical, and $(echo "$hist_before" | wc -l) of the history, terms go on"
