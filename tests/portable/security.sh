#!/usr/bin/env bash
# Install-time and cross-session security checks of the portable edition
# (the review of 2026-11, H4, M1, M2, L1, L2, L3), against a running
# server, as its superuser and a non-superuser admin:
#   H4  the install refuses a schema another role owns (public on 15+: owned
#       by pg_database_owner) or where another role has CREATE; installs
#       into a dedicated schema owned by the admin;
#   M1  an operator planted before the install, in a schema on the
#       installer's search_path, is never bound into the functions;
#   L3  a schema whose name needs quoting ($, quotes) is refused;
#   L1  uninstall.sql drops only the edition's objects, never another
#       role's, and refuses (dropping nothing) while another role's object
#       depends on them;
#   L2  PostgreSQL 16+: acting for a role needs the SET option of the
#       membership, not only membership;
#   M2  after a promotion (simulated), a rival's open transaction does not
#       make the holder's renewals fail.
# Usage: security.sh PSQL HOST PORT MAJOR   (run.sh calls it)
set -euo pipefail
PSQL=$1 HOST=$2 PORT=$3 MAJOR=$4
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
q() { local user=$1 db=$2; shift 2; "$PSQL" -X -q -At -v ON_ERROR_STOP=1 -h "$HOST" -p "$PORT" -U "$user" -d "$db" "$@"; }
install() {  # install USER DB SCHEMA -> the install's stderr on stdout, rc kept
  PGOPTIONS="-c search_path=$3" "$PSQL" -X -q -v ON_ERROR_STOP=1 -h "$HOST" -p "$PORT" -U "$1" -d "$2" \
    -1 -f "$REPO/portable/leaderlock.sql" 2>&1 >/dev/null
}
fail=0
ok() { echo "  ok: $*"; }
bad() { echo "  FAIL: $*"; fail=1; }

q postgres postgres >/dev/null <<'SQL'
CREATE ROLE ll_sec_admin LOGIN CREATEROLE;
CREATE ROLE ll_sec_mallory LOGIN;
CREATE ROLE ll_sec_alice LOGIN;
CREATE DATABASE ll_sec OWNER ll_sec_admin;
SQL

# H4: public (owned by pg_database_owner on 15+, creatable by all on 14).
out=$(install ll_sec_admin ll_sec public || true)
if echo "$out" | grep -q "cannot install into schema public"; then ok "H4: public refused: $(echo "$out" | grep ERROR | head -1)"
else bad "H4: install into public: $out"; fi
# a schema another role owns
q postgres ll_sec -c "CREATE SCHEMA mallory_s AUTHORIZATION ll_sec_mallory" -c "GRANT USAGE, CREATE ON SCHEMA mallory_s TO ll_sec_admin"
out=$(install ll_sec_admin ll_sec mallory_s || true)
echo "$out" | grep -q "owned by role ll_sec_mallory" && ok "H4: a schema owned by another role refused" \
  || bad "H4: schema of another role: $out"
# the admin's schema where another role may CREATE
q ll_sec_admin ll_sec -c "CREATE SCHEMA shared_s" -c "GRANT CREATE ON SCHEMA shared_s TO ll_sec_mallory"
out=$(install ll_sec_admin ll_sec shared_s || true)
echo "$out" | grep -q "other roles may create objects in it (ll_sec_mallory)" && ok "H4: a schema others may create in refused" \
  || bad "H4: shared schema: $out"
[ "$(q ll_sec_admin ll_sec -c "SELECT count(*) FROM pg_proc WHERE proname LIKE 'le\_%'")" = 0 ] \
  && ok "H4: nothing installed by the refused installs" || bad "H4: objects left by a refused install"

# N4 (round 2): objects another role made in the schema while it could
# create there (here a trojan le_try_acquire(text, text, text), preferred
# by unknown-typed literals); CREATE since revoked
q postgres ll_sec -c "CREATE SCHEMA trojan_s AUTHORIZATION ll_sec_admin" -c "GRANT CREATE ON SCHEMA trojan_s TO ll_sec_mallory" >/dev/null
q ll_sec_mallory ll_sec -c "CREATE FUNCTION trojan_s.le_try_acquire(key text, id text, ttl text) RETURNS boolean LANGUAGE sql RETURN false" >/dev/null
q postgres ll_sec -c "REVOKE CREATE ON SCHEMA trojan_s FROM ll_sec_mallory" >/dev/null
out=$(install ll_sec_admin ll_sec trojan_s || true)
echo "$out" | grep -q "holds objects of other roles: function trojan_s.le_try_acquire(text,text,text) (owner ll_sec_mallory)" \
  && ok "N4: a schema holding another role's function refused" || bad "N4: schema with a trojan: $out"
[ "$(q ll_sec_admin ll_sec -c "SELECT count(*) FROM pg_proc WHERE pronamespace = 'trojan_s'::regnamespace")" = 1 ] \
  && ok "N4: nothing installed beside it" || bad "N4: objects installed beside the trojan"
q postgres ll_sec -c "DROP SCHEMA trojan_s CASCADE" >/dev/null 2>&1

# L3: names that need quoting
for s in 'a$fn$b' 'Mixed' "a'b"; do
  q postgres ll_sec -c "CREATE SCHEMA \"$s\" AUTHORIZATION ll_sec_admin"
  out=$(PGOPTIONS="-c search_path=\"$s\"" "$PSQL" -X -q -v ON_ERROR_STOP=1 -h "$HOST" -p "$PORT" -U ll_sec_admin \
        -d ll_sec -1 -f "$REPO/portable/leaderlock.sql" 2>&1 >/dev/null || true)
  echo "$out" | grep -q "the name needs quoting" && ok "L3: schema \"$s\" refused" || bad "L3: schema \"$s\": $out"
done

# M1: an operator planted in public (creatable by all, as on 14) before the install
q postgres ll_sec >/dev/null <<'SQL'
GRANT CREATE ON SCHEMA public TO PUBLIC;
CREATE TABLE public.stolen (cu text, su text, what text);
GRANT INSERT ON public.stolen TO PUBLIC;
SQL
q ll_sec_mallory ll_sec >/dev/null <<'SQL'
CREATE FUNCTION public.evil_mul(numeric, bigint) RETURNS numeric LANGUAGE plpgsql AS $$ BEGIN
  INSERT INTO public.stolen VALUES (current_user, session_user, 'op trojan'); RETURN $1 * $2::numeric; END $$;
CREATE OPERATOR public.* (LEFTARG = numeric, RIGHTARG = bigint, FUNCTION = public.evil_mul);
CREATE FUNCTION public.evil_mul4(numeric, integer) RETURNS numeric LANGUAGE plpgsql AS $$ BEGIN
  INSERT INTO public.stolen VALUES (current_user, session_user, 'op trojan'); RETURN $1 * $2::numeric; END $$;
CREATE OPERATOR public.* (LEFTARG = numeric, RIGHTARG = integer, FUNCTION = public.evil_mul4);
CREATE FUNCTION public.evil_mod(numeric, integer) RETURNS numeric LANGUAGE plpgsql AS $$ BEGIN
  INSERT INTO public.stolen VALUES (current_user, session_user, 'op trojan'); RETURN $1 % $2::numeric; END $$;
CREATE OPERATOR public.% (LEFTARG = numeric, RIGHTARG = integer, FUNCTION = public.evil_mod);
-- (the calendar of schedules, contract 24, works on bit masks)
CREATE FUNCTION public.evil_shr(bigint, integer) RETURNS bigint LANGUAGE plpgsql AS $$ BEGIN
  INSERT INTO public.stolen VALUES (current_user, session_user, 'op trojan'); RETURN $1 >> $2; END $$;
CREATE OPERATOR public.>> (LEFTARG = bigint, RIGHTARG = integer, FUNCTION = public.evil_shr);
CREATE FUNCTION public.evil_and(bigint, bigint) RETURNS bigint LANGUAGE plpgsql AS $$ BEGIN
  INSERT INTO public.stolen VALUES (current_user, session_user, 'op trojan'); RETURN $1 & $2; END $$;
CREATE OPERATOR public.& (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = public.evil_and);
SQL
q ll_sec_admin ll_sec -c "CREATE SCHEMA leaderlock"
out=$(install ll_sec_admin ll_sec "leaderlock,public" || true)
[ -z "$out" ] && ok "H4: installed into the admin's own schema leaderlock (with public, trojans and all, on the path)" \
  || bad "install into leaderlock: $out"
q postgres ll_sec -c "ALTER DATABASE ll_sec SET search_path = \"\$user\", public, leaderlock"
got=$(q postgres ll_sec -c "SELECT le_try_acquire('k', 'root', '10 s'), le_capabilities()->>'max_ttl_s', le_release('k', 'root')" \
      -c "SELECT count(*) FROM public.stolen")
[ "$got" = $'t|86400|t\n0' ] && ok "M1: no planted operator bound into the functions" || bad "M1: $got"
# ... nor into schedules and marks (contracts 24 and 25), settled and checked by le_expire_lapsed
got=$(q postgres ll_sec \
      -c "SELECT le_schedule('m1-job', cron => '* * * * * *', tz => 'Europe/Paris', misfire_grace => '2 s')
                   IS NOT NULL, le_next_due('m1-job') IS NOT NULL, le_expect_leader('m1-key', '1 second')" \
      -c "SELECT pg_sleep(3.1) IS NOT NULL" \
      -c "SELECT le_claim_run('m1-job', le_next_due('m1-job', le_now() - interval '1 second'), 'x', '1 min') > 0,
                 le_expire_lapsed() >= 0" \
      -c "SELECT (SELECT count(*) FROM leaderlock.leaderlock_runs WHERE job = 'm1-job' AND outcome = 'missed') > 0,
                 (SELECT intervals FROM leaderlock.leaderlock_expected WHERE key = 'm1-key'),
                 (SELECT count(*) FROM leaderlock_schedule_status WHERE job = 'm1-job'),
                 le_unschedule('m1-job'), le_unexpect_leader('m1-key')" \
      -c "SELECT count(*) FROM public.stolen")
[ "$got" = $'t|t|t\nt\nt|t\nt|1|1|t|t\n0' ] \
  && ok "M1: no planted operator bound into schedules and marks (le_schedule, le_next_due, le_claim_run, le_expire_lapsed, leaderlock_schedule_status)" \
  || bad "M1 (schedules, marks): $got"
# ... nor into groups (contract 26), stepped by le_expire_lapsed
got=$(q postgres ll_sec \
      -c "SELECT le_join('m1-grp', 'a', '1 hour', 5, '0') IS NOT NULL, le_join('m1-grp', 'b', '1 second') IS NOT NULL" \
      -c "SELECT bool_and(le_ack('m1-grp', 'a', partition, term)) FROM le_assignment('m1-grp', 'a') WHERE state = 'revoked'" \
      -c "SELECT pg_sleep(1.1) IS NOT NULL, le_expire_lapsed() >= 0" \
      -c "SELECT count(*) FROM le_assignment('m1-grp', 'a')" \
      -c "SELECT le_assert_partition('m1-grp', 5, 'a')" \
      -c "SELECT le_leave('m1-grp', 'a')" \
      -c "SELECT count(*) FROM public.stolen")
[ "$got" = $'t|t\nt\nt|t\n5\n3\nt\n0' ] \
  && ok "M1: no planted operator bound into groups (le_join, le_ack, le_assignment, le_assert_partition, le_leave, le_expire_lapsed)" \
  || bad "M1 (groups): $got"
q postgres ll_sec -c "REVOKE CREATE ON SCHEMA public FROM PUBLIC"

# M2: after a promotion, a rival's open transaction cannot make the holder's renewals fail
q postgres ll_sec -c "GRANT ll_sec_alice TO ll_sec_admin" >/dev/null
q ll_sec_alice ll_sec -c "SELECT le_try_acquire('svc', 'alice-1', '2 s')" >/dev/null
q postgres ll_sec -c "UPDATE leaderlock.leaderlock_failover SET timeline = 0" >/dev/null
q ll_sec_mallory ll_sec -c "BEGIN" -c "SELECT le_try_acquire('other', 'mallory', '1 min')" \
  -c "SELECT pg_sleep(4)" -c "COMMIT" >/dev/null &
rival=$!
sleep 0.5
renewals=$(for _ in 1 2 3 4 5 6; do q ll_sec_alice ll_sec -c "SELECT le_renew('svc', 'alice-1')"; sleep 0.5; done | tr -d '\n')
wait "$rival"
[ "$renewals" = tttttt ] && ok "M2: the holder's renewals during a rival's open transaction after a promotion: $renewals" \
  || bad "M2: renewals $renewals"

# N2 (round 2): after a promotion, a rival's open transaction (which
# recorded it, uncommitted) does not keep a dead leader's lease live: a
# taker gets it once the lease's ttl has run from the promotion's first
# sight, while that transaction is still open.
q ll_sec_alice ll_sec -c "SELECT le_try_acquire('svc2', 'alice-dead', '2 s')" >/dev/null
q ll_sec_admin ll_sec -c "UPDATE leaderlock.leaderlock_failover SET timeline = 0, changed_at = NULL" \
  -c "SELECT setval(to_regclass('leaderlock._le_promo_tl'), 0) WHERE to_regclass('leaderlock._le_promo_tl') IS NOT NULL" \
  >/dev/null   # a promotion not seen yet
q ll_sec_mallory ll_sec -c "BEGIN" -c "SELECT le_try_acquire('m-own', 'm', '1 s')" \
  -c "SELECT pg_sleep(7)" -c "COMMIT" >/dev/null &
rival=$!
sleep 0.5
t0=$(date +%s)
taken=
for _ in $(seq 20); do
  got=$(q ll_sec_admin ll_sec -c "SELECT le_try_acquire('svc2', 'bob-1', '5 s')")
  if [ "$got" = t ]; then taken=$(( $(date +%s) - t0 )); break; fi
  sleep 0.25
done
open_still=$(q postgres ll_sec -c "SELECT count(*) FROM pg_stat_activity WHERE usename = 'll_sec_mallory' AND state <> 'idle'")
wait "$rival"
[ -n "$taken" ] && [ "$open_still" = 1 ] \
  && ok "N2: the dead leader's lease taken ${taken}s after the promotion's first sight, the rival's transaction still open" \
  || bad "N2: taken='$taken' (rival still open: $open_still)"

# Audit of 0.5.0, A: the retention settings (leaderlock.history_retention,
# history_max_rows, run_retention) are the administrator's (ALTER DATABASE
# ... SET, else ALTER ROLE ALL SET), never a caller's: mallory setting them
# for her session (SET, PGOPTIONS, or ALTER ROLE mallory SET made for her)
# and calling le_expire_lapsed, or claiming a new run of alice's job,
# deletes none of alice's transitions or runs; the administrator's do.
due=$(q postgres ll_sec -c "SELECT date_trunc('second', le_now()) - interval '1 hour'")
p0=$(q postgres ll_sec -c "SELECT le_history_position()")
q ll_sec_alice ll_sec -c "SELECT le_try_acquire('ret-a', 'alice-1', '1 min')" -c "SELECT le_release('ret-a', 'alice-1')" \
  -c "SELECT le_claim_run('ret-job', '$due', 'alice-1', '1 min')" \
  -c "SELECT le_finish_run(job, due, holder, term, true) FROM leaderlock.leaderlock_runs WHERE job = 'ret-job'" >/dev/null
q ll_sec_admin ll_sec -c "SELECT le_expire_lapsed()" >/dev/null
sleep 1.1   # older than a retention of 1 s
kept() {  # alice's transitions kept, the history's pruned_through, alice's runs of ret-job, pruned past hers
  q postgres ll_sec -c "SELECT (SELECT count(*) FROM leaderlock.leaderlock_history WHERE role = 'll_sec_alice'::regrole)
                          || ' ' || (SELECT pruned_through FROM leaderlock.leaderlock_history_head)
                          || ' ' || (SELECT count(*) FROM leaderlock.leaderlock_runs WHERE job = 'ret-job' AND holder = 'alice-1')
                          || ' ' || (SELECT pruned_before > '$due' FROM leaderlock.leaderlock_jobs WHERE job = 'ret-job')"
}
before=$(kept)
q postgres ll_sec -c "ALTER ROLE ll_sec_mallory SET leaderlock.history_max_rows = 1" \
  -c "ALTER ROLE ll_sec_mallory IN DATABASE ll_sec SET leaderlock.history_retention = 1" >/dev/null
out=$(q ll_sec_mallory ll_sec -c "SET leaderlock.history_max_rows = 1" -c "SET leaderlock.history_retention = 1" \
        -c "SET leaderlock.run_retention = 1" -c "SELECT le_expire_lapsed() >= 0" \
        -c "SELECT le_claim_run('ret-job', le_now() - interval '1 millisecond', 'mallory', '1 min') > 0" 2>&1 || true)
out+=$'\n'$(PGOPTIONS="-c leaderlock.history_max_rows=1 -c leaderlock.history_retention=1 -c leaderlock.run_retention=1" \
       q ll_sec_mallory ll_sec -c "SELECT le_expire_lapsed() >= 0" \
       -c "SELECT le_claim_run('ret-job', le_now() - interval '1 millisecond', 'mallory', '1 min') > 0" 2>&1 || true)
q postgres ll_sec -c "ALTER ROLE ll_sec_mallory RESET ALL" -c "ALTER ROLE ll_sec_mallory IN DATABASE ll_sec RESET ALL" >/dev/null
after=$(kept)
read -r n_before pruned_before runs_before job_before <<<"$before"
if [ "$n_before" -ge 4 ] && [ "$runs_before $job_before" = "1 false" ] && [ "$after" = "$before" ] && [ "$out" = $'t\nt\nt\nt' ] \
   && q ll_sec_alice ll_sec -c "SELECT count(*) FROM le_history($p0)" >/dev/null 2>&1; then
  ok "A: a role's own retention settings delete nothing of another role's (kept: $after)"
else bad "A: mallory's settings: before '$before', after '$after' ($out)"; fi
# the administrator's: the database's wins over ALTER ROLE ALL's, which applies without it
q postgres ll_sec -c "ALTER ROLE ALL SET leaderlock.history_max_rows = 1" \
  -c "ALTER DATABASE ll_sec SET leaderlock.history_max_rows = 1000" >/dev/null
q ll_sec_mallory ll_sec -c "SELECT le_expire_lapsed()" >/dev/null
same=$(kept)
q postgres ll_sec -c "ALTER DATABASE ll_sec RESET leaderlock.history_max_rows" >/dev/null
q ll_sec_mallory ll_sec -c "SELECT le_expire_lapsed()" >/dev/null
q postgres ll_sec -c "ALTER ROLE ALL RESET leaderlock.history_max_rows" \
  -c "ALTER DATABASE ll_sec SET leaderlock.run_retention = 1" >/dev/null
q ll_sec_mallory ll_sec -c "SELECT le_claim_run('ret-job', le_now() - interval '1 millisecond', 'mallory', '1 min')" >/dev/null
q postgres ll_sec -c "ALTER DATABASE ll_sec RESET leaderlock.run_retention" >/dev/null
read -r n_after pruned_after runs_after job_pruned <<<"$(kept)"
kept_rows=$(q postgres ll_sec -c "SELECT count(*) FROM leaderlock.leaderlock_history")
if [ "$same" = "$before" ] && [ "$kept_rows" = 1 ] && [ "$n_after" = 0 ] && [ "$pruned_after" -gt "$pruned_before" ] \
   && [ "$runs_after" = 0 ] && [ "$job_pruned" = true ]; then
  ok "A: the administrator's settings prune (ALTER DATABASE over ALTER ROLE ALL; 1 row kept, alice's run pruned)"
else bad "A: the administrator's settings: '$before' -> '$same' -> '$n_after $pruned_after $runs_after $job_pruned' ($kept_rows kept)"; fi

# Audit of 0.5.0, contract 22: runs and jobs do not grow without bound (a
# new job name per claim made a job row never deleted and a run no later
# claim pruned). Every le_expire_lapsed deletes every job's runs past the
# administrator's retention that are finished or have no live claim (a run
# still claimed live keeps its row and its job), then the jobs left without
# a run, the row of job '' keeping their highest term: a job made again
# starts above it. A role that is not a superuser makes at most
# leaderlock.max_jobs_per_role jobs (53400, nothing written); claims of its
# existing jobs go on, a superuser is not limited.
q ll_sec_admin ll_sec -c "DELETE FROM leaderlock.leaderlock_runs" -c "DELETE FROM leaderlock.leaderlock_jobs" >/dev/null
q postgres ll_sec -c "ALTER DATABASE ll_sec SET leaderlock.run_retention = '2s'" >/dev/null
q ll_sec_alice ll_sec >/dev/null <<'SQL'
SELECT le_claim_run('grow-' || i, le_now() - interval '100 milliseconds', 'alice-1', '1 second') FROM generate_series(1, 30) i;
SELECT le_finish_run(job, due, holder, term, i % 2 = 0) FROM leaderlock.leaderlock_runs,
       LATERAL (SELECT substr(job, 6)::int AS i) n WHERE job LIKE 'grow-%' AND i <= 10;
SELECT le_claim_run('grow-30', le_now() - interval '90 milliseconds', 'alice-1', '1 second');
SELECT le_claim_run('grow-30', le_now() - interval '80 milliseconds', 'alice-1', '1 second');
SELECT le_claim_run('grow-live', le_now() - interval '100 milliseconds', 'alice-1', '1 minute');
SELECT le_claim_run('grow-live', le_now() - interval '90 milliseconds', 'alice-1', '1 second');
SELECT le_finish_run('grow-live', due, 'alice-1', 2, true) FROM leaderlock.leaderlock_runs WHERE job = 'grow-live' AND term = 2;
SQL
made=$(q postgres ll_sec -c "SELECT count(*) || ' ' || max(term) FROM leaderlock.leaderlock_jobs WHERE job ~ '^grow-[0-9]+$'")
sleep 2.2   # past the retention and the 1 s claims
q ll_sec_mallory ll_sec -c "SELECT le_expire_lapsed()" >/dev/null
left=$(q postgres ll_sec -c "SELECT (SELECT count(*) FROM leaderlock.leaderlock_runs WHERE job ~ '^grow-[0-9]+$')
                               || ' ' || (SELECT count(*) FROM leaderlock.leaderlock_jobs WHERE job ~ '^grow-[0-9]+$')
                               || ' ' || (SELECT coalesce(string_agg(term::text, ','), 'none') FROM leaderlock.leaderlock_jobs WHERE job = '')
                               || ' ' || (SELECT coalesce(string_agg(term || ':' || (finished_at IS NULL), ','), 'none') FROM leaderlock.leaderlock_runs WHERE job = 'grow-live')
                               || ' ' || coalesce((SELECT (pruned_before IS NOT NULL)::text FROM leaderlock.leaderlock_jobs WHERE job = 'grow-live'), 'gone')")
again=$(q ll_sec_alice ll_sec -c "SELECT le_claim_run('grow-7', le_now() - interval '10 milliseconds', 'alice-2', '1 minute')" 2>&1 || true)
read -r n_made hi <<<"$made"
if [ "$n_made" = 30 ] && [ "$hi" = 3 ] && [ "$left" = "0 0 3 1:true true" ]; then
  ok "runs: le_expire_lapsed deleted the 30 jobs' runs and rows past the retention (floor term $hi); the live run and its job kept"
else bad "runs: made '$made', left '$left' (expected '0 0 $hi 1:true true')"; fi
[ "$again" = 4 ] && ok "runs: a forgotten job's name claimed again gets term $again, above the floor" \
  || bad "runs: grow-7 claimed again: term '$again' (the floor was $hi)"
# the bound per role (from no job at all): alice makes 5 jobs, the 6th is refused
q postgres ll_sec -c "DELETE FROM leaderlock.leaderlock_runs" -c "DELETE FROM leaderlock.leaderlock_jobs" \
  -c "ALTER DATABASE ll_sec SET leaderlock.max_jobs_per_role = 5" >/dev/null
made=$(q ll_sec_alice ll_sec -c "SELECT count(le_claim_run('cap-' || i, le_now() - interval '10 milliseconds', 'alice-1', '1 minute')) FROM generate_series(1, 5) i" 2>&1 || true)
rows() { q postgres ll_sec -c "SELECT (SELECT count(*) FROM leaderlock.leaderlock_jobs) || ' ' || (SELECT count(*) FROM leaderlock.leaderlock_runs)
                                     || ' ' || (SELECT count(*) FROM leaderlock.leaderlock_history_pending)"; }
before=$(rows)
out=$(q ll_sec_alice ll_sec -v VERBOSITY=verbose -c "SELECT le_claim_run('cap-6', le_now() - interval '10 milliseconds', 'alice-1', '1 minute')" 2>&1 || true)
after=$(rows)
existing=$(q ll_sec_alice ll_sec -c "SELECT le_claim_run('cap-1', le_now() - interval '5 milliseconds', 'alice-1', '1 minute') > 0" 2>&1 || true)
others=$(q ll_sec_mallory ll_sec -c "SELECT le_claim_run('cap-m', le_now() - interval '5 milliseconds', 'mallory', '1 minute') > 0" 2>&1 || true)
root=$(q postgres ll_sec -c "SELECT count(le_claim_run('cap-root-' || i, le_now() - interval '5 milliseconds', 'root', '1 minute')) FROM generate_series(1, 6) i" 2>&1 || true)
if [ "$made" = 5 ] && echo "$out" | grep -q "ERROR:  53400: leaderlock: this role has made leaderlock.max_jobs_per_role (5) jobs; no new job is made" \
   && echo "$out" | grep -q "HINT:  A job is forgotten once its runs all passed leaderlock.run_retention; a superuser may raise the limit." \
   && [ "$after" = "$before" ] && [ "$existing $others $root" = "t t 6" ]; then
  ok "runs: a role's 6th new job refused (53400, nothing written), its existing jobs claimed, another role's and a superuser's made"
else bad "runs: bound per role: made '$made', refusal '$out', rows '$before' -> '$after', existing/others/superuser '$existing $others $root'"; fi
q postgres ll_sec -c "ALTER DATABASE ll_sec RESET leaderlock.max_jobs_per_role" -c "ALTER DATABASE ll_sec RESET leaderlock.run_retention" \
  -c "DELETE FROM leaderlock.leaderlock_runs" -c "DELETE FROM leaderlock.leaderlock_jobs" >/dev/null

# L2: PostgreSQL 16+: membership without SET
if [ "$MAJOR" -ge 16 ]; then
  q postgres ll_sec -c "CREATE ROLE ll_sec_app" -c "GRANT ll_sec_app TO ll_sec_alice WITH INHERIT FALSE, SET FALSE" >/dev/null
  out=$(q ll_sec_alice ll_sec -c "SELECT * FROM leaderlock._le_attempt('app-key', 'x', '1 min', NULL, 'll_sec_app'::regrole, NULL)" 2>&1 || true)
  echo "$out" | grep -q "cannot act for role ll_sec_app" && ok "L2: membership without SET refused" || bad "L2: $out"
  q postgres ll_sec -c "GRANT ll_sec_app TO ll_sec_alice WITH SET TRUE" >/dev/null
  # with SET, alice acts for ll_sec_app as current_user ll_sec_app (SET ROLE);
  # naming it to an entry point while she is current_user is refused (N1)
  out=$(q ll_sec_alice ll_sec -c "SET ROLE ll_sec_app" -c "SELECT le_try_acquire('app-key', 'x', '1 min')" 2>&1 || true)
  [ "$out" = t ] && ok "L2: with SET, as SET ROLE ll_sec_app: $out" || bad "L2 with SET: $out"
  out=$(q ll_sec_alice ll_sec -c "SELECT o_outcome FROM leaderlock._le_attempt('app-key', 'x', '1 min', NULL, 'll_sec_app'::regrole, NULL)" 2>&1 || true)
  echo "$out" | grep -q "role ll_sec_app did not make this call" && ok "L2/N1: naming it in a direct call refused" \
    || bad "L2/N1: direct call naming ll_sec_app: $out"
else
  echo "  (L2: PostgreSQL $MAJOR has no SET option of membership; MEMBER is checked)"
fi

# L1: uninstall drops only the edition's objects
q postgres ll_sec -c "GRANT CREATE ON SCHEMA leaderlock TO ll_sec_alice" >/dev/null
q ll_sec_alice ll_sec -c "CREATE FUNCTION leaderlock.le_my_helper(k text) RETURNS text LANGUAGE sql RETURN k" >/dev/null
q postgres ll_sec -c "REVOKE CREATE ON SCHEMA leaderlock FROM ll_sec_alice" >/dev/null
q postgres ll_sec -c "GRANT CREATE ON SCHEMA public TO ll_sec_alice" >/dev/null
q ll_sec_alice ll_sec -c "CREATE VIEW public.alice_leaders AS SELECT k, leaderlock.le_leader(k) FROM (VALUES ('a'), ('b')) v(k)" >/dev/null
out=$(cd "$REPO/portable" && PGOPTIONS="-c search_path=leaderlock" "$PSQL" -X -q -v ON_ERROR_STOP=1 -h "$HOST" -p "$PORT" \
      -U ll_sec_admin -d ll_sec -f uninstall.sql 2>&1 || true)
left=$(q ll_sec_admin ll_sec -c "SELECT count(*) FROM pg_proc WHERE pronamespace = 'leaderlock'::regnamespace")
if echo "$out" | grep -q "view public.alice_leaders depends on function leaderlock.le_leader" && [ "$left" -gt 40 ]; then
  ok "L1: refused while alice's view depends on le_leader, nothing dropped ($left functions)"
else bad "L1: $out ($left functions left)"; fi
q ll_sec_alice ll_sec -c "DROP VIEW public.alice_leaders" >/dev/null
out=$(cd "$REPO/portable" && PGOPTIONS="-c search_path=leaderlock" "$PSQL" -X -q -v ON_ERROR_STOP=1 -h "$HOST" -p "$PORT" \
      -U ll_sec_admin -d ll_sec -f uninstall.sql 2>&1 || true)
left=$(q ll_sec_admin ll_sec -c "SELECT string_agg(p.proname, ',') FROM pg_proc p WHERE pronamespace = 'leaderlock'::regnamespace" \
       -c "SELECT count(*) FROM pg_class WHERE relnamespace = 'leaderlock'::regnamespace")
[ "$left" = $'le_my_helper\n0' ] && ok "L1: uninstalled; alice's le_my_helper kept" || bad "L1: $out / left: $left"

q postgres postgres -c "DROP DATABASE ll_sec" >/dev/null
q postgres postgres -c "DROP ROLE ll_sec_admin" -c "DROP ROLE ll_sec_mallory" -c "DROP ROLE ll_sec_alice" >/dev/null
[ "$MAJOR" -ge 16 ] && q postgres postgres -c "DROP ROLE ll_sec_app" >/dev/null
[ "$fail" = 0 ] || exit 1
echo "  ok: security checks passed"
