"""A database set against its clients, for the test that no statement the
CLI or a client library sends depends on the session's search_path
(SECURITY.md, "The command-line tool and the client library").

`plant(admin, db, edition)` makes database DB owned by a role of no other
rights (OWNER), installs leaderlock there (the compiled edition by CREATE
EXTENSION, or the portable one by its script into schema `leaderlock`),
and then, as that owner, as a database owner may:

- schema `evil`, first on the database's default search_path
  (`ALTER DATABASE ... SET search_path = evil, pg_catalog, "$user",
  public`), holding a trap of the same signature for every function,
  aggregate and operator of pg_catalog and of leaderlock's schema (where
  the names guard lets her: the portable edition has none), a domain over
  every base type of pg_catalog by the type's name, and a look-alike view
  of every relation and type of leaderlock's schema;
- schema USER (the name of the role the clients connect as), which
  `"$user"` on the path resolves to, with the same look-alike views.

Every trap counts itself in the sequence `evil.ll_trap_hits` (which a
rollback does not undo), logs `leaderlock-trap: WHAT` as a WARNING, and
raises. `hits(admin_conn)` reads the count.

As a program, it plants the traps in a database and runs every client's
tour (a program per client that sends every statement its library has)
against it, directly and through pgbouncer in transaction pooling mode,
then checks that no trap ran:

    hostile.py --dsn postgresql://postgres@HOST:PORT/postgres [--edition compiled|portable]
               [--tours cli,rust,python,node,go,java] [--targets direct,superuser,pgbouncer] [--keep]

Needs psycopg2; LEADERLOCK_CLI (the CLI, for cli), PY_CLIENT_PYTHON (a
Python with psycopg 3, for python), GO_TOUR (the Go tour, built by
clients/go/test.sh --tour FILE), JAVA_TOUR (the Java tour, built by
clients/java/test.sh --tour FILE), node with clients/node built, and for
rust LEADERLOCK_RUST_TOUR (crates/client's tour example, built).
"""
import argparse
import concurrent.futures
import os
import sys
import time
import urllib.parse

import psycopg2

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "client"))



def roles(db):
    """The database's owner and the role the tours connect as (each planted
    database has its own: plantings of several never meet)."""
    return f"{db}_owner", f"{db}_user"

HOSTILE_PATH = 'evil, pg_catalog, "$user", public'

# The trap: counted (a sequence, which no rollback undoes), logged, raised.
TRAP = """
CREATE SCHEMA evil;
GRANT USAGE ON SCHEMA evil TO PUBLIC;
CREATE SEQUENCE evil.ll_trap_hits;
GRANT USAGE, SELECT ON SEQUENCE evil.ll_trap_hits TO PUBLIC;
CREATE FUNCTION evil.ll_trap(what pg_catalog.text) RETURNS pg_catalog.bool
LANGUAGE plpgsql SET search_path = pg_catalog AS $t$
BEGIN
  PERFORM pg_catalog.nextval('evil.ll_trap_hits'::pg_catalog.regclass);
  RAISE WARNING 'leaderlock-trap: % (as %)', what, current_user;
  RAISE EXCEPTION 'leaderlock-trap: %', what;
END $t$;
GRANT EXECUTE ON FUNCTION evil.ll_trap(pg_catalog.text) TO PUBLIC;
"""

# Traps for every function, aggregate and operator of the schemas given
# (pg_catalog's, leaderlock's), of the same signature; a domain for every
# base type of pg_catalog, named as it. A signature PL/pgSQL cannot take
# (internal, cstring, "any"...) is skipped: no statement of a client can
# name one. Returns how many were made.
GENERATE = r"""
CREATE FUNCTION pg_temp.ll_plant(schemas pg_catalog.regnamespace[]) RETURNS pg_catalog.int4
LANGUAGE plpgsql SET search_path = pg_catalog AS $g$
DECLARE
  r record;
  n int := 0;
  i int := 0;
  args text;
  ret text;
  body text;
  kind text;
BEGIN
  -- functions, with their arguments' names and defaults (a call by name
  -- or leaving out a defaulted argument must find the trap too)
  FOR r IN SELECT p.oid, p.proname, p.proretset, p.prorettype
             FROM pg_proc p
            WHERE p.pronamespace = ANY (schemas) AND p.prokind = 'f'
  LOOP
    -- "any" cannot be declared but in C: text stands for it (format,
    -- concat, jsonb_build_object... called with text arguments)
    args := replace(replace(pg_get_function_arguments(r.oid), 'VARIADIC "any"', 'VARIADIC text[]'),
                    '"any"', 'text');
    ret := pg_get_function_result(r.oid);
    FOREACH body IN ARRAY ARRAY['RETURN NULL;', 'RETURN;'] LOOP
      BEGIN
        EXECUTE format('CREATE FUNCTION evil.%I(%s) RETURNS %s LANGUAGE plpgsql AS %L',
                       r.proname, args, ret,
                       format('BEGIN PERFORM evil.ll_trap(%L); %s END',
                              'function ' || r.proname || '(' || args || ')', body));
        n := n + 1;
        EXIT;
      EXCEPTION WHEN OTHERS THEN NULL;
      END;
    END LOOP;
  END LOOP;
  -- aggregates: the transition and final functions trap (the final one
  -- runs over no rows too); stype int4
  FOR r IN SELECT p.oid, p.proname, p.proargtypes, p.pronargs
             FROM pg_proc p JOIN pg_aggregate g ON g.aggfnoid = p.oid
            WHERE p.pronamespace = ANY (schemas) AND p.prokind = 'a' AND g.aggkind = 'n'
  LOOP
    i := i + 1;
    SELECT string_agg(replace(format_type(t, NULL), '"any"', 'text'), ', ' ORDER BY o) INTO args
      FROM unnest(r.proargtypes::oid[]) WITH ORDINALITY AS a(t, o);
    body := format('BEGIN PERFORM evil.ll_trap(%L); RETURN 0; END',
                   'aggregate ' || r.proname || '(' || coalesce(args, '*') || ')');
    BEGIN
      EXECUTE format('CREATE FUNCTION evil.%I(pg_catalog.int4%s) RETURNS pg_catalog.int4 LANGUAGE plpgsql AS %L',
                     'll_sfunc_' || i, CASE WHEN r.pronargs > 0 THEN ', ' || args ELSE '' END, body);
      EXECUTE format('CREATE FUNCTION evil.%I(pg_catalog.int4) RETURNS pg_catalog.int4 LANGUAGE plpgsql AS %L',
                     'll_final_' || i, body);
      EXECUTE format('CREATE AGGREGATE evil.%I(%s) (SFUNC = evil.%I, STYPE = pg_catalog.int4, FINALFUNC = evil.%I)',
                     r.proname, coalesce(args, '*'), 'll_sfunc_' || i, 'll_final_' || i);
      n := n + 1;
    EXCEPTION WHEN OTHERS THEN NULL;
    END;
  END LOOP;
  -- operators (prefix and infix)
  FOR r IN SELECT o.oid, o.oprname, o.oprkind, o.oprleft, o.oprright, o.oprresult
             FROM pg_operator o WHERE o.oprnamespace = ANY (schemas) AND o.oprkind IN ('b', 'l')
  LOOP
    i := i + 1;
    args := CASE WHEN r.oprkind = 'b' THEN format_type(r.oprleft, NULL) || ', ' ELSE '' END
            || format_type(r.oprright, NULL);
    BEGIN
      EXECUTE format('CREATE FUNCTION evil.%I(%s) RETURNS %s LANGUAGE plpgsql AS %L',
                     'll_op_' || i, args, format_type(r.oprresult, NULL),
                     format('BEGIN PERFORM evil.ll_trap(%L); RETURN NULL; END',
                            'operator ' || r.oprname || ' (' || args || ')'));
      EXECUTE format('CREATE OPERATOR evil.%s (%s RIGHTARG = %s, FUNCTION = evil.%I)',
                     r.oprname,
                     CASE WHEN r.oprkind = 'b' THEN format('LEFTARG = %s,', format_type(r.oprleft, NULL)) ELSE '' END,
                     format_type(r.oprright, NULL), 'll_op_' || i);
      n := n + 1;
    EXCEPTION WHEN OTHERS THEN NULL;
    END;
  END LOOP;
  -- types: a domain named as each base type of pg_catalog
  FOR r IN SELECT t.typname FROM pg_type t
            WHERE t.typnamespace = 'pg_catalog'::regnamespace AND t.typtype = 'b' AND t.typname !~ '^_'
  LOOP
    BEGIN
      EXECUTE format('CREATE DOMAIN evil.%I AS pg_catalog.%I CHECK (evil.ll_trap(%L))',
                     r.typname, r.typname, 'type ' || r.typname);
      n := n + 1;
    EXCEPTION WHEN OTHERS THEN NULL;
    END;
  END LOOP;
  RETURN n;
END $g$;
"""

# A look-alike view in schema S of every relation and composite type of
# leaderlock's schema X: the same columns where it is a relation.
LOOK_ALIKES = r"""
CREATE FUNCTION pg_temp.ll_look_alikes(s pg_catalog.text, x pg_catalog.regnamespace) RETURNS pg_catalog.int4
LANGUAGE plpgsql SET search_path = pg_catalog AS $g$
DECLARE
  r record;
  n int := 0;
BEGIN
  FOR r IN SELECT c.relname, c.relkind FROM pg_class c
            WHERE c.relnamespace = x AND c.relkind IN ('r', 'v', 'm', 'p', 'f', 'c')
  LOOP
    BEGIN
      IF r.relkind = 'c' THEN
        EXECUTE format('CREATE VIEW %I.%I AS SELECT evil.ll_trap(%L) AS key',
                       s, r.relname, 'type ' || s || '.' || r.relname);
      ELSE
        -- the trap first, whether the relation has rows or not
        EXECUTE format('CREATE VIEW %I.%I AS SELECT r.* FROM (SELECT evil.ll_trap(%L) AS t) g, '
                       'LATERAL (SELECT * FROM %I.%I WHERE g.t) r',
                       s, r.relname, 'relation ' || s || '.' || r.relname, x::text, r.relname);
      END IF;
      EXECUTE format('GRANT SELECT ON %I.%I TO PUBLIC', s, r.relname);
      n := n + 1;
    EXCEPTION WHEN OTHERS THEN RAISE WARNING 'no look-alike of %: %', r.relname, SQLERRM;
    END;
  END LOOP;
  RETURN n;
END $g$;
"""


def with_db(dsn, db, user=None, options=None):
    """`dsn` (a URL) with another database, user, or options."""
    u = urllib.parse.urlsplit(dsn)
    netloc = u.netloc.split("@", 1)[-1]
    if user is not None:
        netloc = f"{user}@{netloc}"
    elif "@" in u.netloc:
        netloc = u.netloc
    query = urllib.parse.parse_qs(u.query)
    if options is not None:
        query["options"] = [options]
    q = urllib.parse.urlencode({k: v[0] for k, v in query.items()}, quote_via=urllib.parse.quote)
    return urllib.parse.urlunsplit((u.scheme, netloc, "/" + db, q, ""))


# What the trusted connections of this script use: never the database's path.
SAFE = "-c search_path=pg_catalog,public"


def run(conn, sql, args=None):
    with conn.cursor() as c:
        c.execute(sql, args)
        return c.fetchone() if c.description else None


def plant(admin_dsn, db, edition="compiled"):
    """Makes database `db` (dropped first if it exists) as described above.
    Returns (extension schema, how many traps)."""
    OWNER, USER = roles(db)
    a = psycopg2.connect(admin_dsn)
    a.autocommit = True
    run(a, f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
    for role in (OWNER, USER):
        if run(a, "SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)):
            for d in run(a, "SELECT array_agg(datname) FROM pg_database WHERE datallowconn")[0]:
                c = psycopg2.connect(with_db(admin_dsn, d))
                c.autocommit = True
                run(c, f"DROP OWNED BY {role}")
                c.close()
            run(a, f"DROP ROLE {role}")
        run(a, f"CREATE ROLE {role} LOGIN")
    run(a, f"CREATE DATABASE {db} OWNER {OWNER}")
    a.close()
    su = psycopg2.connect(with_db(admin_dsn, db, options=SAFE))
    su.autocommit = True
    if edition == "compiled":
        run(su, "CREATE EXTENSION leaderlock SCHEMA public")
        schema = run(su, "SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'leaderlock'")[0]
    else:
        schema = "leaderlock"
        run(su, "CREATE SCHEMA leaderlock")
        run(su, "SET search_path = leaderlock")
        with open(os.path.join(REPO, "portable", "leaderlock.sql")) as f:
            run(su, f.read())
        run(su, f"SET {SAFE[3:].replace('=', ' = ')}")
    # As on PostgreSQL 14, where every role may create in public: the
    # database's owner owns it on 15 and later anyway.
    run(su, f"GRANT CREATE ON SCHEMA public TO {OWNER}")
    su.close()

    o = psycopg2.connect(with_db(admin_dsn, db, user=OWNER, options=SAFE))
    o.autocommit = True
    with o.cursor() as c:
        c.execute(TRAP)
        c.execute(GENERATE)
        c.execute(LOOK_ALIKES)
    t0 = time.monotonic()
    n = run(o, "SELECT pg_temp.ll_plant(ARRAY['pg_catalog'::regnamespace, %s::regnamespace])", (schema,))[0]
    run(o, f"CREATE SCHEMA {USER}")
    run(o, f"GRANT USAGE ON SCHEMA {USER} TO PUBLIC")
    views = run(o, "SELECT pg_temp.ll_look_alikes('evil', %s::regnamespace) "
                   "+ pg_temp.ll_look_alikes(%s, %s::regnamespace)", (schema, USER, schema))[0]
    run(o, f"ALTER DATABASE {db} SET search_path = {HOSTILE_PATH}")
    o.close()
    print(f"hostile database {db} ({edition}, leaderlock in {schema}): {n} traps, {views} look-alikes "
          f"in {time.monotonic() - t0:.1f} s", flush=True)
    return schema, n + views


def drop(admin_dsn, db):
    """Drops the planted database and its roles."""
    a = psycopg2.connect(admin_dsn)
    a.autocommit = True
    run(a, f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
    for role in roles(db):
        run(a, f"DROP ROLE IF EXISTS {role}")
    a.close()


def hits(admin_dsn, db):
    c = psycopg2.connect(with_db(admin_dsn, db, options=SAFE))
    try:
        last, called = run(c, "SELECT last_value, is_called FROM evil.ll_trap_hits")
        return last if called else 0
    finally:
        c.close()


def assert_planted(admin_dsn, db, user):
    """The traps are live: a statement written the careless way, as `user`
    on the database's own path, runs one (else the test could not fail)."""
    before = hits(admin_dsn, db)
    c = psycopg2.connect(with_db(admin_dsn, db, user=user))
    c.autocommit = True
    for sql in ("SELECT make_interval(secs => 1)", "SELECT count(*) FROM leaderlock",
                "SELECT 1 = 1", "SELECT 'x'::text"):
        try:
            run(c, sql)
        except psycopg2.Error:
            pass
    c.close()
    caught = hits(admin_dsn, db) - before
    if caught < 4:
        raise AssertionError(f"the traps caught {caught} of 4 careless statements")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dsn", required=True, help="a superuser's URL (its database is only used to connect)")
    ap.add_argument("--edition", choices=("compiled", "portable"), default="compiled")
    ap.add_argument("--db", help="the database to plant (default ll_hostile_TOURS)")
    ap.add_argument("--tours", default="cli,rust,python,node,go,java")
    ap.add_argument("--targets", default="direct,superuser,pgbouncer",
                    help="as the role of no rights directly, as the superuser, through pgbouncer")
    ap.add_argument("--keep", action="store_true", help="keep the planted database")
    args = ap.parse_args()
    tours = args.tours.split(",")
    args.db = args.db or "ll_hostile_" + "_".join(tours)
    USER = roles(args.db)[1]
    # Tours leave out what the edition does not offer (priorities need the
    # compiled edition's shared memory).
    os.environ["LEADERLOCK_TOUR_EDITION"] = args.edition
    plant(args.dsn, args.db, args.edition)
    assert_planted(args.dsn, args.db, USER)
    base = hits(args.dsn, args.db)
    import tours as tour_programs
    wanted = args.targets.split(",")
    targets = [t for t, name in ((("direct", with_db(args.dsn, args.db, user=USER), False), "direct"),
                                 (("direct, superuser", with_db(args.dsn, args.db), False), "superuser"))
               if name in wanted]
    bouncer = None
    if "pgbouncer" in wanted:
        import tempfile
        work = tempfile.mkdtemp(prefix="leaderlock-hostile-")
        os.chmod(work, 0o755)  # pgbouncer runs as the servers' user
        # (a pool of 20: the tours' calls never queue for a server session)
        sys.path.insert(0, HERE)
        from scenarios import start_pgbouncer
        bouncer_dsn, bouncer = start_pgbouncer(with_db(args.dsn, args.db), work, 20, [USER])
        targets.append(("pgbouncer transaction pooling", bouncer_dsn, True))
    failed = []
    try:
        for n, (name, dsn, pooled) in enumerate(targets):
            # The tours of a target side by side (their keys and jobs apart
            # by prefix; through the pooler a server session may carry
            # another tour's LISTEN, whose notifications a connection that
            # never listened must take in stride): the traps count per
            # target; a trap that ran names itself in the server's log.
            t0 = time.monotonic()
            before = hits(args.dsn, args.db)
            with concurrent.futures.ThreadPoolExecutor(len(tours)) as pool:
                results = dict(zip(tours, pool.map(
                    lambda tour: tour_programs.run(tour, dsn, pooled, f"{tour}-{'p' if pooled else 'd'}-{n}"),
                    tours)))
            caught = hits(args.dsn, args.db) - before
            for tour, (ok, out) in results.items():
                print(f"{tour:7} {name}: {'ok' if ok else 'FAILED'}", flush=True)
                if not ok:
                    failed.append(f"{tour} ({name})")
                    print(out[-4000:], flush=True)
            print(f"{name}: {caught} traps ran ({time.monotonic() - t0:.1f} s)", flush=True)
            if caught:
                failed.append(f"{caught} traps ({name})")
    finally:
        if bouncer is not None:
            bouncer.terminate()
    total = hits(args.dsn, args.db) - base
    if not args.keep:
        drop(args.dsn, args.db)
    if failed or total:
        print(f"FAILED: {', '.join(failed)}; {total} traps ran", flush=True)
        sys.exit(1)
    print("no statement of any tour ran a trap", flush=True)


if __name__ == "__main__":
    main()
