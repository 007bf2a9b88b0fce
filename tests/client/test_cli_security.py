"""The CLI against hostile input from other roles, and its own bounds.

Any role that can connect may notify on the `leaderlock` channel, and any
role that may acquire a key chooses the key, id and value others see. These
tests forge notifications as an unprivileged role and plant control
characters in keys and holders, then check that no leader is stopped or
started on a notification's word, and that nothing raw reaches a terminal
or a log. Then the CLI's own edges: TLS that was asked for, the password
file, flag values that used to panic, closed pipes, the command's
environment.
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import unicodedata

from harness import DB, HOST, PGDATA, PORT, WORK, connect, one, wait_for
from test_cli import CHILD, CLI, NOT_ACQUIRED, REJECTED, CliCase, Run, dsn, records

# Colours the terminal, writes its clipboard (OSC 52), forges a log line,
# clears the screen (C1 CSI), reverses the text that follows.
HOSTILE = "esc\x1b[31mRED\x1b]52;c;ZXZpbA==\x07\nFAKE LOG LINE\r\u009b2J\u202eevil"
ROLE = "ll_cli_mallory"


def raw_controls(text):
    """Control and format characters in `text`, line ends aside."""
    return [c for c in text if unicodedata.category(c) in ("Cc", "Cf") and c != "\n"]


def tries(conn):
    """le_try_acquire calls the server counted, from the sessions that
    track them (track_functions = all: only the candidate under test)."""
    return int(one(conn, "SELECT coalesce(sum(calls), 0) FROM pg_stat_user_functions WHERE funcname = 'le_try_acquire'"))


def settled_tries(conn, application, since):
    """tries() once the sessions of `application` started since `since` are
    gone (a backend's counts reach the shared statistics when it exits at
    the latest) and the count has settled."""
    assert wait_for(lambda: not one(conn, "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s "
                                          "AND backend_start >= %s", (application, since)), timeout=15)
    last, steady = tries(conn), time.monotonic()
    while time.monotonic() - steady < 0.5:
        time.sleep(0.1)
        now = tries(conn)
        if now != last:
            last, steady = now, time.monotonic()
    return last


def cli(*args, env=None, **kw):
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=30,
                          env={**os.environ, **(env or {})}, **kw)


class CliSecurityTest(CliCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        one(cls.conn, f"DROP ROLE IF EXISTS {ROLE}")
        one(cls.conn, f"CREATE ROLE {ROLE} LOGIN")
        cls.mallory = connect(user=ROLE)

    @classmethod
    def tearDownClass(cls):
        cls.mallory.close()
        one(cls.conn, f"DROP ROLE IF EXISTS {ROLE}")
        super().tearDownClass()

    def forge(self, payload):
        one(self.mallory, "SELECT pg_notify('leaderlock', %s)", (payload,))

    def forged_events(self, key, holder="mallory"):
        at = "2026-01-01T00:00:00.000000Z"
        return [json.dumps({"event": e, "key": key, "holder": holder, "term": t, "at": at})
                for e, t in (("acquired", 2**63 - 1), ("released", 1), ("expired", 1))]

    # --- notifications are hints ---

    def test_forged_announcements_never_stop_a_leader(self):
        r = Run(self, "--key", self.key, "--id", "me", "--ttl", "3s")
        self.assertTrue(wait_for(lambda: records(self.children), timeout=10))
        for _ in range(20):
            for payload in self.forged_events(self.key):
                self.forge(payload)
            time.sleep(0.05)
        time.sleep(2.5)  # beyond the renewal due at ttl/3, and the one after
        self.assertIsNone(r.proc.poll(), r.events())
        self.assertEqual(self.holder(), "me")
        self.assertEqual(r.events("stopped"), [])
        pids = {pid for _, pid, _, _ in records(self.children)}
        self.assertEqual(len(pids), 1)
        self.assertGreater(records(self.children)[-1][3], time.time() - 0.5, "the command stopped ticking")
        r.signal(signal.SIGTERM)
        self.assertEqual(r.wait(), 128 + signal.SIGTERM)

    def test_forged_releases_never_start_a_command(self):
        self.hold()
        r = Run(self, "--key", self.key, "--ttl", "3s")
        self.assertTrue(wait_for(lambda: r.events("refused"), timeout=10))
        for _ in range(50):
            for payload in self.forged_events(self.key, holder="someone-else"):
                self.forge(payload)
        time.sleep(1)
        self.assertEqual(records(self.children), [])
        self.assertEqual(self.holder(), "someone-else")
        self.assertIsNone(r.proc.poll())

    def test_a_flood_of_forged_releases_makes_tries_at_a_bounded_rate(self):
        """Forged `released` announcements of the key, as fast as one
        session of a role with no rights sends them, for 2 s: the waiting
        candidate's tries (le_try_acquire, counted by the server for its
        session alone: track_functions = all) stay at one per HINT_FLOOR
        (10 ms) at most, and the real release after the flood is still
        taken over at once (it polls every 10 s)."""
        self.hold(ttl="60 seconds")
        since = one(self.conn, "SELECT clock_timestamp()")
        before = tries(self.conn)
        r = Run(self, "--key", self.key, "--ttl", "20s", dsn_extra="options='-c track_functions=all'")
        self.assertTrue(wait_for(lambda: r.events("refused"), timeout=10))
        time.sleep(0.5)
        t0, sent = time.monotonic(), 0
        while time.monotonic() - t0 < 2.0:
            sent += 1
            self.forge(json.dumps({"event": "released", "key": self.key, "holder": "mallory", "term": sent,
                                   "at": "2026-01-01T00:00:00.000000Z"}))
        flooded = time.monotonic() - t0
        released = time.monotonic()
        self.assertTrue(one(self.conn, "SELECT le_release(%s, 'someone-else')", (self.key,)))
        self.assertTrue(wait_for(lambda: r.events("leading"), timeout=5), "not leading 5 s after the release")
        took = time.monotonic() - released
        r.signal(signal.SIGTERM)
        self.assertEqual(r.wait(), 128 + signal.SIGTERM)
        n = settled_tries(self.conn, "leaderlock elector", since) - before
        seconds = flooded + took
        print(f"\n  {self._testMethodName}: {sent} forged releases in {flooded:.1f} s; {n} tries, "
              f"{n / seconds:.0f}/s; led {took * 1000:.0f} ms after the release", file=sys.stderr)
        self.assertGreater(n, 10, "the hints brought no try forward")
        self.assertLessEqual(n / seconds, 120, f"{n} tries in {seconds:.1f} s")

    # --- other roles' tenures ---

    def test_a_rival_holding_the_key_with_other_slots_is_waited_out(self):
        """A one-second squat with slots => 1 (an hostile role could do it
        at will) must not end candidates of 3 slots: each waits (one
        warning), and leads once the squat ends."""
        self.assertTrue(one(self.conn, "SELECT le_try_acquire(%s, 'squatter', '30 seconds', slots => 1)", (self.key,)))
        self.addCleanup(one, self.conn, "SELECT le_release(%s, 'squatter')", (self.key,))
        ends = time.time() + 1.0
        r = Run(self, "--key", self.key, "--slots", "3", "--restart", "--ttl", "3s")
        self.assertTrue(wait_for(lambda: r.events("slots_differ"), timeout=10), r.events())
        # --timeout 0: the key is not ours (120), not a rejection (123); the
        # server's message, with the key, escaped
        key = self.key + HOSTILE
        self.assertTrue(one(self.conn, "SELECT le_try_acquire(%s, 'squatter', '30 seconds', slots => 1)", (key,)))
        self.addCleanup(one, self.conn, "SELECT le_release(%s, 'squatter')", (key,))
        once = cli("--dsn", dsn(), "run", "--key", key, "--slots", "3", "--timeout", "0", "--", "true")
        self.assertEqual(once.returncode, NOT_ACQUIRED, once.stderr)
        self.assertIn("another number of slots", once.stderr)
        self.assertEqual(raw_controls(once.stderr), [], once.stderr)
        time.sleep(max(0.0, ends - time.time()))
        self.assertTrue(one(self.conn, "SELECT le_release(%s, 'squatter')", (self.key,)))
        self.assertTrue(wait_for(lambda: records(self.children), timeout=10), r.events())
        self.assertGreater(records(self.children)[0][3], ends)
        self.assertIsNone(r.proc.poll(), r.events())
        self.assertEqual(len(r.events("slots_differ")), 1, r.events("slots_differ"))
        self.assertEqual(r.events("rejected"), [])
        r.signal(signal.SIGTERM)
        self.assertEqual(r.wait(), 128 + signal.SIGTERM)

    # --- what other roles wrote, on a terminal or in a log ---

    def test_run_logs_never_carry_another_role_s_control_characters(self):
        self.hold(id=HOSTILE)
        text = cli("--dsn", dsn(), "run", "--key", self.key, "--timeout", "0", "--", "true")
        self.assertEqual(text.returncode, NOT_ACQUIRED, text.stderr)
        self.assertEqual(raw_controls(text.stderr), [], text.stderr)
        lines = text.stderr.splitlines()
        self.assertTrue(lines and all(line.startswith("leaderlock[") for line in lines), lines)
        self.assertTrue(any("held by" in line and "FAKE LOG LINE" in line for line in lines), lines)
        js = cli("--dsn", dsn(), "run", "--log-format", "json", "--key", self.key, "--timeout", "0", "--", "true")
        self.assertEqual(js.returncode, NOT_ACQUIRED, js.stderr)
        self.assertEqual(raw_controls(js.stderr), [], js.stderr)
        events = [json.loads(line) for line in js.stderr.splitlines()]
        self.assertIn(HOSTILE, [e.get("holder") for e in events])

    def test_status_escapes_keys_and_holders(self):
        key = self.key + HOSTILE
        self.assertTrue(one(self.conn, "SELECT le_try_acquire(%s, %s, '30 seconds')", (key, HOSTILE)))
        self.addCleanup(one, self.conn, "SELECT le_force_release(%s)", (key,))
        out = cli("--dsn", dsn(), "status", key)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(raw_controls(out.stdout), [], out.stdout)
        header, line = out.stdout.splitlines()
        self.assertIn("\\u{1b}]52;c;ZXZpbA==\\u{7}\\nFAKE LOG LINE", line)
        everything = cli("--dsn", dsn(), "status")
        self.assertEqual(raw_controls(everything.stdout), [])
        rows = [line for line in everything.stdout.splitlines() if "FAKE LOG LINE" in line]
        self.assertTrue(rows and all("\\u{1b}" in line for line in rows), rows)

    def test_history_escapes_every_column(self):
        """`leaderlock history` prints every column escaped, whatever the
        row holds (here a row a superuser wrote with control characters in
        its event, key and holder): no raw control character reaches the
        terminal, in the table or in JSON lines."""
        key = self.key + HOSTILE
        position = one(self.conn, "SELECT greatest(le_history_position(), "
                                  "(SELECT coalesce(max(position), 0) FROM leaderlock_history)) + 1000")
        one(self.conn, "INSERT INTO leaderlock_history (position, at, event, key, holder, term, role, payload) "
                       "VALUES (%s, le_now(), %s, %s, %s, 1, NULL, "
                       "jsonb_build_object('event', %s::text, 'key', %s::text, 'holder', %s::text))",
            (position, HOSTILE, key, HOSTILE, HOSTILE, key, HOSTILE))
        self.addCleanup(one, self.conn, "DELETE FROM leaderlock_history WHERE position = %s", (position,))
        for args in ((), ("--json",)):
            out = cli("--dsn", dsn(), "history", "--prefix", self.key, *args)
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertIn("FAKE LOG LINE", out.stdout)
            self.assertEqual(raw_controls(out.stdout), [], out.stdout)

    def test_watch_prints_only_what_the_history_holds(self):
        """Any role may notify on leaderlock and leaderlock_history: watch
        reads the history on a hint and prints its rows only (a forged
        announcement never, whatever it looks like), each escaped."""
        import threading
        w = subprocess.Popen([CLI, "--dsn", dsn(), "watch", self.key], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        self.addCleanup(lambda: (w.kill(), w.communicate()))
        out, err = [], []
        threading.Thread(target=lambda: out.extend(w.stdout), daemon=True).start()
        threading.Thread(target=lambda: err.extend(w.stderr), daemon=True).start()
        # It starts after the last position numbered when it connects:
        # transitions until one is heard.
        self.assertTrue(wait_for(lambda: (self.hold("w"), one(self.conn, "SELECT le_release(%s, 'w')", (self.key,)),
                                          out)[2], timeout=10))
        self.forge("plain text \x1b[31m")
        self.forge(json.dumps({"event": "pwned", "key": self.key, "term": 1, "at": "x"}))
        self.forge(json.dumps({"event": "acquired", "key": self.key, "holder": "forged", "term": 5, "at": "x"}))
        one(self.mallory, "SELECT pg_notify('leaderlock_history', '9223372036854775807')")
        one(self.mallory, "SELECT pg_notify('leaderlock_history', 'junk \x1b[31m')")
        self.assertTrue(one(self.conn, "SELECT le_try_acquire(%s, %s, '30 seconds')", (self.key, HOSTILE)))
        one(self.conn, "SELECT le_release(%s, %s)", (self.key, HOSTILE))
        self.hold("last")
        self.assertTrue(wait_for(lambda: any('"last"' in line for line in out), timeout=10))
        self.assertEqual(raw_controls("".join(out)), [])
        events = [json.loads(line) for line in out]
        self.assertTrue({e["event"] for e in events} <= {"acquired", "released", "expired"}, events)
        self.assertNotIn("forged", [e["holder"] for e in events])
        self.assertIn(HOSTILE, [e["holder"] for e in events])
        positions = [e["position"] for e in events]
        self.assertEqual(positions, sorted(set(positions)))
        self.assertEqual(raw_controls("".join(err)), [])
        self.assertNotIn("plain text", "".join(err))

    # --- connection settings ---

    def test_tls_that_was_asked_for_is_never_dropped(self):
        """The test cluster has no TLS: require fails (never plaintext), and
        verification without a root certificate file is refused before
        connecting. (TLS itself: test_tls.py.)"""
        home = tempfile.mkdtemp(prefix="no-postgresql-dir-", dir=WORK)
        base = {"HOME": home, "PGHOST": HOST, "PGPORT": str(PORT), "PGUSER": "postgres"}
        for env, args in (({"PGSSLMODE": "require"}, ["--dsn", dsn()]),
                          ({}, ["--dsn", dsn() + " sslmode=require"])):
            out = cli(*args, "status", env={**base, **env})
            self.assertEqual(out.returncode, 122, (env, args, out.stdout, out.stderr))
            self.assertIn("TLS", out.stderr)
        for env, args in (({"PGSSLMODE": "verify-full"}, []),
                          ({}, ["--dsn", dsn() + " sslmode=verify-full"])):
            out = cli(*args, "status", env={**base, **env})
            self.assertEqual(out.returncode, 2, (env, args, out.stdout, out.stderr))
            self.assertIn("root certificate file", out.stderr)
        run = cli("--dsn", dsn() + " sslmode=require", "run", "--key", self.key, "--timeout", "1s", "--", "true",
                  env={**base})
        self.assertEqual(run.returncode, 122, run.stderr)
        self.assertIsNone(self.holder())

    def test_password_file_and_errors_with_their_cause(self):
        role, password = "ll_cli_pgpass", "pw-" + os.urandom(6).hex()
        one(self.conn, f"DROP ROLE IF EXISTS {role}")
        one(self.conn, f"CREATE ROLE {role} LOGIN PASSWORD %s", (password,))
        self.addCleanup(one, self.conn, f"DROP ROLE IF EXISTS {role}")
        hba = os.path.join(PGDATA, "pg_hba.conf")
        with open(hba) as f:
            original = f.read()

        def restore():
            with open(hba, "w") as f:
                f.write(original)
            one(self.conn, "SELECT pg_reload_conf()")
        self.addCleanup(restore)
        with open(hba, "w") as f:
            f.write(f"host all {role} 127.0.0.1/32 scram-sha-256\n" + original)
        one(self.conn, "SELECT pg_reload_conf()")
        passfile = os.path.join(self.dir, "pgpass")
        target = f"host={HOST} port={PORT} user={role} dbname={DB}"

        def status(secret):
            with open(passfile, "w") as f:
                f.write(f"# a comment\nelsewhere:1:*:*:nope\n{HOST}:{PORT}:{DB}:{role}:{secret}\n")
            os.chmod(passfile, 0o600)
            return cli("--dsn", target, "status", env={"PGPASSFILE": passfile})

        self.assertTrue(wait_for(lambda: status("wrong").returncode != 0, timeout=5))
        ok = status(password)
        self.assertEqual(ok.returncode, 0, ok.stderr)
        bad = status("wrong")
        self.assertEqual(bad.returncode, REJECTED, bad.stderr)
        self.assertIn("28P01", bad.stderr)
        self.assertNotIn("wrong", bad.stderr)
        run = cli("--dsn", target, "run", "--key", self.key, "--timeout", "0", "--", "true",
                  env={"PGPASSFILE": passfile})
        self.assertEqual(run.returncode, REJECTED, run.stderr)
        # a file others may read is ignored, as libpq does
        status(password)
        os.chmod(passfile, 0o644)
        self.assertNotEqual(cli("--dsn", target, "status", env={"PGPASSFILE": passfile}).returncode, 0)

    def test_command_environment_without_connection_settings(self):
        dump = os.path.join(self.dir, "env")
        show = [sys.executable, "-c", "import os, sys; open(sys.argv[1], 'w').write('\\n'.join(os.environ))", dump]
        secrets = {"PGPASSWORD": "s3cret", "DATABASE_URL": "postgres://u:s3cret@h/d", "LEADERLOCK_DSN": dsn()}
        for flag, expect in (([], True), (["--no-connection-env"], False)):
            _, code = self.run_once("--key", self.key, *flag, command=show, env=secrets)
            self.assertEqual(code, 0)
            with open(dump) as f:
                names = set(f.read().split("\n"))
            self.assertIn("LEADERLOCK_KEY", names)
            for name in secrets:
                self.assertEqual(name in names, expect, (flag, name))

    # --- the CLI's own edges ---

    def test_flag_values_are_usage_errors_not_panics(self):
        huge = "5000000000000000h"
        for args in (["--timeout", huge], ["--restart", "--restart-delay", huge], ["--ttl", huge],
                     ["--grace", huge], ["--poll", "0"], ["--ttl", "1ms"], ["--restart", "--restart-delay", "0"]):
            out = cli("--dsn", dsn(), "run", "--key", self.key, *args, "--", "true")
            self.assertEqual(out.returncode, 2, (args, out.stderr))
            self.assertNotIn("panicked", out.stderr)
        self.assertIsNone(self.holder())

    def test_closed_pipes_end_quietly_and_release_the_lease(self):
        status = subprocess.Popen([CLI, "--dsn", dsn(), "status"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        status.stdout.close()  # the reader is gone before anything is written
        _, err = status.communicate(timeout=30)
        self.assertEqual(status.returncode, 0, err)
        run = subprocess.Popen([CLI, "--dsn", dsn(), "run", "--key", self.key, "--", sys.executable, CHILD,
                                self.children, "0.3"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        run.stderr.close()
        self.assertEqual(run.wait(30), 0)
        self.assertTrue(records(self.children))
        self.assertIsNone(self.holder())

    def test_renewals_outlive_the_listening_connection(self):
        r = Run(self, "--key", self.key, "--id", "me", "--ttl", "3s")
        self.assertTrue(wait_for(lambda: records(self.children), timeout=10))
        for _ in range(3):
            self.assertTrue(one(self.conn, "SELECT count(pg_terminate_backend(pid)) = 1 FROM pg_stat_activity "
                                           "WHERE application_name = 'leaderlock elector'"))
            time.sleep(1.2)
        self.assertIsNone(r.proc.poll(), r.events())
        self.assertEqual(r.events("stopped"), [])
        self.assertEqual(len({pid for _, pid, _, _ in records(self.children)}), 1)
        self.assertEqual(self.holder(), "me")
        r.signal(signal.SIGTERM)
        self.assertEqual(r.wait(), 128 + signal.SIGTERM)


if __name__ == "__main__":
    import unittest
    unittest.main()
