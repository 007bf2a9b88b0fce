"""No statement of the library depends on the session's search_path
(SECURITY.md; tests/clients/hostile.py proves it against a database set
against its clients, by clients/python/tests/tour.py):

- every statement constant of the library (no server): every function
  call is pg_catalog.name(...) or @extschema@.name(...) (or one of a few
  grammar words); no operator outside OPERATOR(pg_catalog.op); every cast
  to pg_catalog.type or to a type whose name is an SQL keyword; no
  construct that hides an operator (IN (...), LIKE, BETWEEN, NULLIF, IS
  DISTINCT FROM, CASE x WHEN); every relation and function of leaderlock
  in @extschema@. The checker is tested on careless statements too;
- the schema's lookup, the option and its default (no server);
- against the server (LEADERLOCK_DSN): the statements the tour cannot
  reach on a schema 0.5.0 (HAS_RUNS, HAS_HISTORY, WORKER_RUNNING, LEGACY)
  are valid and answer right; the schema option names the schema, one that
  does not hold leaderlock is NotInstalled naming it.
"""
import os
import re
import unittest
from unittest import mock

import psycopg

import leaderlock
from leaderlock import _core, _group, _history, _schedule, _session

from support import DSN

# Words that may be followed by "(" without naming a function of a schema.
GRAMMAR = {"coalesce", "exists", "extract", "greatest", "least", "array", "row", "values", "any", "operator",
           # keywords that may precede a parenthesis
           "select", "from", "where", "and", "or", "not", "on", "join", "as", "then", "else", "when", "by",
           "is", "null", "case", "end"}
# Types whose names are SQL keywords: not looked up on the search_path
# (the grammar maps them to pg_catalog's).
KEYWORD_TYPES = {"bigint", "integer", "int", "smallint", "boolean", "numeric", "interval", "double", "real",
                 "timestamp", "decimal", "char", "character", "varchar"}
HIDDEN = [
    (re.compile(r"\bIN\s*\(", re.I), "IN (...) (an = of the search_path)"),
    (re.compile(r"\b(NOT\s+)?I?LIKE\b", re.I), "LIKE (an ~~ of the search_path)"),
    (re.compile(r"\bBETWEEN\b", re.I), "BETWEEN (<= and >= of the search_path)"),
    (re.compile(r"\bNULLIF\b", re.I), "NULLIF (an = of the search_path)"),
    (re.compile(r"\bIS\s+(NOT\s+)?DISTINCT\s+FROM\b", re.I), "IS DISTINCT FROM (an = of the search_path)"),
    (re.compile(r"\bCASE\s+(?!WHEN\b)", re.I), "CASE x WHEN (an = of the search_path)"),
]


def problems(sql):
    """What in `sql` depends on the search_path (empty: nothing)."""
    found = []
    s = re.sub(r"'(?:[^']|'')*'", "''", sql)  # string literals: their text is no name
    s = re.sub(r'"(?:[^"]|"")*"', "quoted_ident", s)  # quoted identifiers (column names)
    s = re.sub(r"%\(\w+\)s|%s", " param ", s)  # bind parameters
    if re.match(r"\s*(UN)?LISTEN\b", s, re.I):
        return found  # a channel's name: not looked up
    for pattern, what in HIDDEN:
        if pattern.search(s):
            found.append(what)
    # operators, once those written OPERATOR(pg_catalog.op) are out of the way
    rest = re.sub(r"OPERATOR\(pg_catalog\.[^)\s]+\)", " op ", s)
    for m in re.finditer(r"OPERATOR\s*\(", rest):
        found.append(f"an operator not in pg_catalog at {rest[m.start():m.start() + 30]!r}")
    # casts
    for m in re.finditer(r"::\s*([\w.]+)", rest):
        name = m.group(1)
        if not name.startswith("pg_catalog.") and name.lower() not in KEYWORD_TYPES:
            found.append(f"a cast to {name} (not pg_catalog.{name})")
    rest = re.sub(r"::\s*[\w.]+(\s+precision)?", " ", rest)
    rest = re.sub(r"(^|[(,]|=>)\s*-\s*(?=\d)", r"\1 ", rest)  # a negative number
    rest = rest.replace("=>", " ")  # named arguments
    rest = rest.replace("(*)", "( )")  # count(*)
    rest = rest.replace(_core.EXTSCHEMA, "extschema")
    for m in re.finditer(r"[=<>!~+\-*/^&|#%@?]+", rest):
        found.append(f"operator {m.group(0)} (not OPERATOR(pg_catalog.{m.group(0)}))")
    # function calls
    for m in re.finditer(r"([\w.]+)\s*\(", s.replace(_core.EXTSCHEMA, "extschema")):
        name = m.group(1)
        if name.startswith(("pg_catalog.", "extschema.")) or name.lower() in GRAMMAR:
            continue
        found.append(f"a call of {name} (not pg_catalog.{name} or @extschema@.{name})")
    # leaderlock's objects
    for m in re.finditer(r"(?<![\w.])(le_\w+|leaderlock\w*)\b", s.replace(_core.EXTSCHEMA + ".", "extschema.")):
        found.append(f"{m.group(1)} not in @extschema@")
    # relations of pg_catalog read unqualified
    for m in re.finditer(r"\b(?:FROM|JOIN)\s+([A-Za-z_]\w*)(?![\w.(])(?!\s*\()",
                         re.sub(r"extract\s*\(\s*\w+\s+FROM", "", s, flags=re.I), re.I):
        if m.group(1).lower() not in ("param", "quoted_ident", "lateral"):
            found.append(f"relation {m.group(1)} not qualified")
    return found


def statements():
    """Every statement constant of the library, by name."""
    found = {}
    for mod in (_core, _session, _schedule, _history, _group):
        short = mod.__name__.rsplit(".", 1)[-1]
        for name, value in vars(mod).items():
            if name.isupper() and isinstance(value, str) and re.match(r"\s*(SELECT|LISTEN|UNLISTEN)\b", value):
                found[f"{short}.{name}"] = value
    for i, legacy in enumerate(_core.LEGACY.values()):
        found[f"_core.LEGACY[{i}]"] = legacy
    return found


class StatementsTest(unittest.TestCase):
    def test_the_checker_finds_what_depends_on_the_search_path(self):
        careless = {
            "SELECT make_interval(secs => %s)": "make_interval",
            "SELECT count(*) FROM @extschema@.leaderlock": "count",
            "SELECT 1 = 1": "operator =",
            "SELECT a OPERATOR(=) b": "an operator not in pg_catalog",
            "SELECT x::text": "a cast to text",
            "SELECT x::float8": "a cast to float8",
            "SELECT le_leader(key => %s)": "le_leader",
            "SELECT holder FROM leaderlock": "leaderlock not in @extschema@",
            "SELECT 1 FROM @extschema@.leaderlock WHERE key IN ('a', 'b')": "IN (...)",
            "SELECT CASE x WHEN 'a' THEN 1 END": "CASE x WHEN",
            "SELECT 1 WHERE 'a' LIKE 'b'": "LIKE",
            "SELECT 1 WHERE 2 BETWEEN 1 AND 3": "BETWEEN",
            "SELECT nullif(1, 2)": "NULLIF",
            "SELECT 1 IS DISTINCT FROM 2": "IS DISTINCT FROM",
            "SELECT v ->> 'worker'": "operator ->>",
            "SELECT 'a' || 'b'": "operator ||",
            "SELECT nspname FROM pg_namespace": "relation pg_namespace",
        }
        for sql, what in careless.items():
            with self.subTest(sql=sql):
                found = problems(sql)
                self.assertTrue(any(what in p for p in found), f"{sql!r}: {found}")
        careful = ("SELECT pg_catalog.make_interval(secs => %s::double precision)",
                   "SELECT EXISTS (SELECT FROM @extschema@.leaderlock_sessions "
                   "WHERE session OPERATOR(pg_catalog.=) %s)",
                   "SELECT coalesce((@extschema@.le_capabilities() OPERATOR(pg_catalog.->>) 'worker')::boolean, true)",
                   "SELECT extract(epoch FROM a OPERATOR(pg_catalog.-) b)::pg_catalog.float8",
                   "SELECT pg_catalog.count(*) FROM @extschema@.le_lease(key => %s) WHERE term IS NULL",
                   "SELECT 'a = b, le_x(), ::text'::pg_catalog.text",
                   'SELECT h."position" FROM @extschema@.le_history(after => -1) h ORDER BY h."position"')
        for sql in careful:
            with self.subTest(sql=sql):
                self.assertEqual(problems(sql), [])

    def test_no_statement_of_the_library_depends_on_the_search_path(self):
        found = statements()
        self.assertIn("_core.SCHEMA_OF", found)
        self.assertGreater(len(found), 30)
        for name, sql in found.items():
            with self.subTest(statement=name):
                self.assertEqual(problems(sql), [], sql)

    def test_every_statement_of_leaderlock_names_its_schema(self):
        for name, sql in statements().items():
            if re.search(r"\ble_\w+\(|\bleaderlock\w*\b", re.sub(r"'[^']*'", "", sql)) and \
                    not sql.startswith(("LISTEN", "UNLISTEN")):
                with self.subTest(statement=name):
                    self.assertIn(_core.EXTSCHEMA + ".", sql)


class SchemaOptionTest(unittest.TestCase):
    def test_the_option_defaults_to_leaderlock_schema(self):
        with mock.patch.dict(os.environ, {"LEADERLOCK_SCHEMA": "ll"}):
            self.assertEqual(_core.schema_option(None), "ll")
            self.assertEqual(_core.schema_option("mine"), "mine")
            self.assertEqual(leaderlock.lead(DSN, "k").schema, "ll")
            self.assertEqual(leaderlock.lead(DSN, "k", schema="x").schema, "x")
            self.assertEqual(leaderlock.session(DSN).schema, "ll")
            self.assertEqual(leaderlock.watch(DSN).schema, "ll")
            self.assertEqual(leaderlock.Elector(DSN, "k").spec.schema, "ll")
            self.assertEqual(leaderlock.scheduled(DSN, "j", every=1)(lambda run: None).schema, "ll")
        with mock.patch.dict(os.environ, {"LEADERLOCK_SCHEMA": ""}):
            self.assertIsNone(_core.schema_option(None))
        with mock.patch.dict(os.environ, clear=True):
            self.assertIsNone(_core.schema_option(None))
        for bad in ("", 3, b"x"):
            with self.assertRaises(leaderlock.BadArgument):
                leaderlock.lead(DSN, "k", schema=bad)

    def test_the_lookup_s_answer(self):
        self.assertEqual(_core.found_schema([("public",)], "db", None), "public")
        e = _core.found_schema
        with self.assertRaises(leaderlock.NotInstalled) as caught:
            e([], "db", None)
        self.assertIn('extension leaderlock is not installed in database "db"', str(caught.exception))
        with self.assertRaises(leaderlock.NotInstalled) as caught:
            e([], "db", "mine")
        self.assertIn("schema 'mine'", str(caught.exception))
        self.assertEqual(caught.exception.schema, "mine")
        with self.assertRaises(leaderlock.BadArgument) as caught:
            e([("evil",), ('"we\nird"',)], "db", None)
        msg = str(caught.exception)
        self.assertIn("several schemas", msg)
        self.assertIn("'evil', '\"we\\nird\"'", msg)  # escaped as repr escapes
        self.assertIn("LEADERLOCK_SCHEMA", msg)

    def test_bind(self):
        self.assertEqual(_core.bind("SELECT @extschema@.le_leader(key => %s)", '"a b"'),
                         'SELECT "a b".le_leader(key => %s)')
        self.assertEqual(_core.bind("LISTEN leaderlock", None), "LISTEN leaderlock")
        with self.assertRaises(leaderlock.LeaderlockError):
            _core.bind("SELECT @extschema@.le_now()", None)


class OnTheServerTest(unittest.TestCase):
    """Against LEADERLOCK_DSN's database, where leaderlock is installed."""

    @classmethod
    def setUpClass(cls):
        cls.conn = psycopg.connect(DSN, autocommit=True)
        cls.schema = _core.find_schema(cls.conn, None)

    @classmethod
    def tearDownClass(cls):
        cls.conn.close()

    def one(self, sql, args=()):
        return self.conn.execute(_core.bind(sql, self.schema), args).fetchone()[0]

    def test_the_probes_after_a_42883_answer_right(self):
        self.assertIs(self.one(_schedule.HAS_RUNS, (self.schema,)), True)
        self.assertIs(self.one(_history.HAS_HISTORY, (self.schema,)), True)
        self.assertIs(self.one(_schedule.HAS_RUNS, ("pg_catalog",)), False)
        self.assertIs(self.one(_history.HAS_HISTORY, ("pg_catalog",)), False)

    def test_the_statements_for_schemas_before_0_5_0_are_valid(self):
        # (0.5.0 takes them too: term defaults to NULL there)
        key = f"pyst-legacy-{os.getpid()}"
        for sql in _core.LEGACY.values():
            self.assertIs(self.one(sql, (key, "nobody", 1.0)[:sql.count("%s")]), False)

    def test_the_worker_questions(self):
        self.assertIn(self.one(_core.WORKER_SERVES), (True, False))
        try:
            self.assertIn(self.one(_core.WORKER_RUNNING), (True, False))
        except psycopg.errors.UndefinedFunction:
            pass  # (gone from a later version: the statement is for schemas before 0.5.0)

    def test_the_schema_option_names_the_schema(self):
        name = self.conn.execute("SELECT e.extnamespace::pg_catalog.regnamespace::pg_catalog.text "
                                 "FROM pg_catalog.pg_extension e WHERE e.extname = 'leaderlock'").fetchone()
        if name is None:
            self.skipTest("leaderlock is not installed by CREATE EXTENSION here")
        key = f"pyst-{os.getpid()}"
        with leaderlock.lead(DSN, key, ttl=2, timeout=5, schema=name[0]) as lease:
            self.assertEqual(self.one("SELECT @extschema@.le_leader(key => %s)", (key,)), lease.id)
        with self.assertRaises(leaderlock.NotInstalled) as caught:
            with leaderlock.lead(DSN, key, timeout=1, schema="ll_py_no_such_schema"):
                self.fail("led")
        self.assertIn("schema 'll_py_no_such_schema'", str(caught.exception))
        self.assertEqual(caught.exception.schema, "ll_py_no_such_schema")


if __name__ == "__main__":
    unittest.main()
