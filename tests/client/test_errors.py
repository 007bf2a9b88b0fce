"""What a client application sees: SQLSTATEs it can branch on (contract 3.4,
6), and an unprivileged login role (contract 7)."""
import unittest

import psycopg2

from harness import connect, one


class ClientErrorTest(unittest.TestCase):
    def setUp(self):
        self.conn = connect()
        self.key = f"errors-{self.id()}"

    def tearDown(self):
        self.conn.close()

    def error(self, sql, args=()):
        with self.assertRaises(psycopg2.Error) as caught:
            one(self.conn, sql, args)
        return caught.exception

    def test_not_leader_is_LE001_naming_key_id_holder_and_term(self):
        self.assertTrue(one(self.conn, "SELECT le_try_acquire(%s, 'alice', '10 seconds')", (self.key,)))
        e = self.error("SELECT le_assert_leader(%s, 'bob')", (self.key,))
        self.assertEqual(e.pgcode, "LE001")
        msg = e.diag.message_primary
        for part in (self.key, '"bob"', '"alice"', "term 1"):
            self.assertIn(part, msg)
        self.assertIn("le_try_acquire", e.diag.message_hint)

        e = self.error("SELECT le_assert_leader(%s, 'alice', 2)", (self.key,))
        self.assertEqual(e.pgcode, "LE001")
        self.assertIn("term 1", e.diag.message_primary)
        self.assertIn("term 2", e.diag.message_primary)

        self.assertEqual(one(self.conn, "SELECT le_assert_leader(%s, 'alice', 1)", (self.key,)), 1)

    def test_bad_input_sqlstates(self):
        cases = [
            ("SELECT le_try_acquire(NULL, 'a', '1 second')", "22004", "key"),
            ("SELECT le_renew(%s, NULL)", "22004", "id"),
            ("SELECT le_try_acquire(%s, 'a', NULL)", "22004", "ttl"),
            ("SELECT le_try_acquire(%s, repeat('x', 256), '1 second')", "22023", "255"),
            ("SELECT le_try_acquire(%s, 'a', '3 months')", "22023", "month"),
            ("SELECT le_try_acquire(%s, 'a', '2 days')", "22023", "max_ttl"),
            ("SELECT le_assert_leader(%s, 'a', -3)", "22023", "term"),
        ]
        for sql, state, mention in cases:
            args = (self.key,) if "%s" in sql else ()
            e = self.error(sql, args)
            self.assertEqual(e.pgcode, state, sql)
            self.assertIn(mention, e.diag.message_primary, sql)

    def test_unprivileged_login_role_calls_functions_but_cannot_write(self):
        one(self.conn, "DROP ROLE IF EXISTS leaderlock_client_app")
        one(self.conn, "CREATE ROLE leaderlock_client_app LOGIN")
        try:
            app = connect(user="leaderlock_client_app")
            try:
                self.assertTrue(one(app, "SELECT le_try_acquire(%s, 'app', '10 seconds')", (self.key,)))
                self.assertEqual(one(app, "SELECT le_assert_leader(%s, 'app')", (self.key,)), 1)
                self.assertEqual(one(app, "SELECT holder FROM leaderlock WHERE key = %s", (self.key,)), "app")
                for sql in ["UPDATE leaderlock SET term = 0 RETURNING 1",
                            "DELETE FROM leaderlock RETURNING 1",
                            "INSERT INTO leaderlock (key, term) VALUES ('x', 1) RETURNING 1"]:
                    with self.assertRaises(psycopg2.Error) as caught:
                        one(app, sql)
                    self.assertEqual(caught.exception.pgcode, "42501", sql)
                self.assertTrue(one(app, "SELECT le_release(%s, 'app')", (self.key,)))
            finally:
                app.close()
        finally:
            one(self.conn, "DROP ROLE leaderlock_client_app")


if __name__ == "__main__":
    unittest.main()
