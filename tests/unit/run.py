"""Runs the #[pg_test] unit tests of src/ against a running cluster, as
`cargo pgrx test` does, without building its test binary.

`cargo pgrx test` builds the library with the `pg_test` feature (each
#[pg_test] function is then also a SQL function in schema `tests`), installs
it, and calls each test from a test binary: one connection per test,
`BEGIN; SELECT tests."name"(); ROLLBACK`, two at a time, on a cluster that
does not preload the library. Building that binary costs almost a minute per
PostgreSQL version, and the test command runs it only on 15 (where it also
runs the plain #[test] functions); elsewhere scripts/test.sh installs the
`pg_test` build and runs this, which calls the very same functions the same
way. The names come from the source: a test missing from the installed
library fails, so none goes silently unrun.

Usage: run.py --port PORT [--dbname pgrx_tests] [--test PATTERN] [--log FILE]
"""
import argparse
import concurrent.futures
import pathlib
import re
import sys
import time

import psycopg2

SRC = pathlib.Path(__file__).resolve().parents[2] / "src"
# `#[pg_test]`, maybe other attributes and comments, then the function.
TEST = re.compile(r"#\[pg_test\]\s*(?:(?:#\[[^\]]*\]|//[^\n]*)\s*)*fn\s+(\w+)\s*\(")


def test_names():
    names = []
    for f in sorted(SRC.rglob("*.rs")):
        names += TEST.findall(f.read_text())
    return names


def sql_name(name, installed):
    """The SQL function of test `name`. pgrx renames a name too long for
    PostgreSQL (63 bytes) `t<N>_<its start>`, 63 bytes in all, N a counter
    of the build."""
    if len(name) < 64:
        return name if name in installed else None
    found = [
        f for f in installed
        if len(f) == 63 and (m := re.fullmatch(r"t\d+_(\w+)", f)) and name.startswith(m[1])
    ]
    return found[0] if len(found) == 1 else None


def run_one(port, dbname, name):
    """(name, seconds, error or None) of one test, in its own connection and
    a transaction rolled back afterwards."""
    t = time.monotonic()
    conn = psycopg2.connect(host="127.0.0.1", port=port, dbname=dbname, user="postgres")
    try:
        with conn.cursor() as cur:
            cur.execute(f'SELECT tests."{name}"()')  # names from the source: \w+ only
        return name, time.monotonic() - t, None
    except psycopg2.Error as e:
        return name, time.monotonic() - t, f"{e.pgcode}: {e.pgerror or e}".strip()
    finally:
        conn.rollback()
        conn.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--dbname", default="pgrx_tests")
    ap.add_argument("--test", default="", help="only tests whose name contains this")
    ap.add_argument("--log", help="the server's log, shown when a test fails")
    args = ap.parse_args()

    names = test_names()
    if len(names) != len(set(names)):
        sys.exit("two #[pg_test] functions share a name")
    conn = psycopg2.connect(host="127.0.0.1", port=args.port, dbname=args.dbname, user="postgres")
    with conn.cursor() as cur:
        cur.execute(
            "SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
            "WHERE n.nspname = 'tests' AND p.pronargs = 0"
        )
        installed = {r[0] for r in cur.fetchall()}
    conn.close()
    sql = {n: sql_name(n, installed) for n in names}
    missing = [n for n, s in sql.items() if s is None]
    if not names or missing:
        sys.exit(f"not in the installed library (built without pg_test?): {missing or 'no test found'}")

    chosen = [sql[n] for n in names if args.test in n]
    failed = []
    t0 = time.monotonic()
    # Two at a time, as cargo test on this 2-core machine.
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        for name, secs, error in pool.map(lambda n: run_one(args.port, args.dbname, n), chosen):
            print(f"test tests::pg_{name} ... {'ok' if error is None else 'FAILED'} ({secs:.2f} s)")
            if error is not None:
                failed.append((name, error))
    for name, error in failed:
        print(f"\n---- {name} ----\n{error}")
    if failed and args.log:
        print("\n---- server log (last 60 lines) ----")
        print("\n".join(pathlib.Path(args.log).read_text(errors="replace").splitlines()[-60:]))
    print(
        f"\ntest result: {'FAILED' if failed else 'ok'}. {len(chosen) - len(failed)} passed; "
        f"{len(failed)} failed; {len(names) - len(chosen)} filtered out; "
        f"finished in {time.monotonic() - t0:.2f}s"
    )
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
