"""The history of transitions (contract 23) as a user meets it: `leaderlock
watch` following it across killed connections, `leaderlock history` as a
table, JSON lines and an SVG timeline rendered to pixels, and pruning under
load that never holds up an election. Both editions (where no worker
serves, the watcher numbers with le_expire_lapsed).

LEADERLOCK_HISTORY_CHAOS_SECONDS (default 60) sets the chaos run's length."""
import json
import os
import random
import shutil
import signal
import struct
import subprocess
import tempfile
import threading
import time
import unittest
import zlib

from harness import DB, HOST, PORT, PORTABLE, client_side, connect, numbered, one, wait_for

CLI = os.environ.get("LEADERLOCK_CLI", "")
CHAOS_SECONDS = float(os.environ.get("LEADERLOCK_HISTORY_CHAOS_SECONDS", "60"))
KILLS = 10
DSN = f"host={HOST} port={PORT} user=postgres dbname={DB}"


def history(conn, after, prefix):
    """(position, event, key, holder, term) the server kept after `after`."""
    with conn.cursor() as cur:
        cur.execute('SELECT "position", event, key, holder, term FROM le_history(%s, key_prefix => %s, '
                    "max_rows => 100000)", (after, prefix))
        return cur.fetchall()


def keep_rows(test, conn, n):
    """The retention by count, as the numbering sees it: the worker's
    configuration; in the portable edition (no worker: every
    le_expire_lapsed numbers) the administrator's, set for the database
    and read at each call (a session's SET is ignored there)."""
    if PORTABLE:
        one(conn, "DO $$ BEGIN EXECUTE 'ALTER DATABASE ' || quote_ident(current_database()) "
                  f"|| ' SET leaderlock.history_max_rows = {int(n)}'; END $$")

        def reset_database():
            c = connect()
            one(c, "DO $$ BEGIN EXECUTE 'ALTER DATABASE ' || quote_ident(current_database()) "
                   "|| ' RESET leaderlock.history_max_rows'; END $$")
            c.close()
        test.addCleanup(reset_database)
        return
    one(conn, f"ALTER SYSTEM SET leaderlock.history_max_rows = {int(n)}")
    one(conn, "SELECT pg_reload_conf()")

    def reset():
        c = connect()
        one(c, "ALTER SYSTEM RESET leaderlock.history_max_rows")
        one(c, "SELECT pg_reload_conf()")
        c.close()
    test.addCleanup(reset)


class Watch:
    """`leaderlock watch` running, its lines collected as they come."""

    def __init__(self, *args):
        self.proc = subprocess.Popen([CLI, "--dsn", DSN, "watch", *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.lines, self.errors = [], []
        self.threads = [threading.Thread(target=self._read, args=(self.proc.stdout, self.lines)),
                        threading.Thread(target=self._read, args=(self.proc.stderr, self.errors))]
        for t in self.threads:
            t.start()

    @staticmethod
    def _read(stream, into):
        for line in stream:
            into.append(line)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for t in self.threads:
            t.join(10)
        return self.proc.returncode

    def seen(self):
        return [json.loads(line) for line in list(self.lines)]


@client_side
@unittest.skipUnless(CLI, "LEADERLOCK_CLI names the command-line binary")
class HistoryTest(unittest.TestCase):
    def setUp(self):
        self.conn = connect()
        self.prefix = f"hist-{self.id().rsplit('.', 1)[-1]}-{os.getpid()}-{random.randrange(1 << 30)}/"

    def tearDown(self):
        self.conn.close()

    def test_a_watcher_killed_ten_times_in_a_chaos_run_reports_the_history(self):
        """Hand-overs, releases, expiries and value changes on six keys from
        six connections; the watcher's connection is terminated ten times
        meanwhile. What it printed is exactly what the history holds for
        those keys, each once, in position order, terms never going back."""
        wait_for(lambda: numbered(self.conn), timeout=10)
        start = one(self.conn, "SELECT le_history_position()")
        watch = Watch("--prefix", self.prefix, "--since", str(start))
        self.addCleanup(watch.stop)
        keys = [f"{self.prefix}{i}" for i in range(6)]
        stop_at = time.monotonic() + CHAOS_SECONDS
        errors = []

        def churn(n):
            rnd = random.Random(n)
            conn = connect()
            try:
                while time.monotonic() < stop_at:
                    key, me = rnd.choice(keys), f"replica-{n}"
                    ttl = rnd.choice(["300 milliseconds", "2 seconds"])
                    if one(conn, "SELECT le_acquire(%s, %s, %s, '300 milliseconds')", (key, me, ttl)):
                        if rnd.random() < 0.3:
                            one(conn, "SELECT le_proclaim(%s, %s, %s)", (key, me, json.dumps({"n": n})))
                        time.sleep(rnd.uniform(0, 0.2))
                        if rnd.random() < 0.7:
                            one(conn, "SELECT le_release(%s, %s)", (key, me))
                        # else: left to expire
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(repr(e))
            finally:
                conn.close()

        churners = [threading.Thread(target=churn, args=(n,)) for n in range(6)]
        for t in churners:
            t.start()
        kills = 0
        for k in range(KILLS):
            time.sleep(CHAOS_SECONDS / (KILLS + 1))
            # the watcher has connected again since the last kill
            self.assertTrue(wait_for(lambda: one(
                self.conn, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'leaderlock watch'"),
                timeout=15), f"the watcher did not connect again after kill {k}: {watch.errors}")
            kills += one(self.conn, "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                    "WHERE application_name = 'leaderlock watch') t")
        for t in churners:
            t.join()
        self.assertEqual(errors, [])
        self.assertEqual(kills, KILLS)
        # Everything expired, numbered, and then printed.
        # (in this order: an expiry committing between the two looks would
        # leave its transition unnumbered, and missing from `kept`)
        self.assertTrue(wait_for(lambda: one(
            self.conn, "SELECT count(*) FROM leaderlock WHERE key LIKE %s AND holder IS NOT NULL",
            (self.prefix + "%",)) == 0 and numbered(self.conn), timeout=15))
        kept = history(self.conn, start, self.prefix)
        self.assertTrue(wait_for(lambda: len(watch.lines) >= len(kept), timeout=15),
                        f"{len(watch.lines)} lines of {len(kept)}; stderr: {watch.errors}")
        time.sleep(0.3)  # nothing more comes
        watch.stop()
        seen = watch.seen()
        print(f"\n  history chaos: {CHAOS_SECONDS:.0f} s, {len(kept)} transitions, {kills} kills of the "
              f"watcher's connection; {len(seen)} lines")
        self.assertGreater(len(kept), 100)
        self.assertEqual([(s["position"], s["event"], s["key"], s["holder"], s["term"]) for s in seen],
                         [tuple(r) for r in kept])
        last_term = {}
        for s in seen:
            if s["event"] == "acquired":
                self.assertGreater(s["term"], last_term.get(s["key"], 0), s)
            self.assertGreaterEqual(s["term"], last_term.get(s["key"], 0), s)
            last_term[s["key"]] = s["term"]
        self.assertTrue(any("connection lost" in e for e in watch.errors), watch.errors)

    def test_watch_from_a_pruned_position_says_so_and_exits_123(self):
        conn = self.conn
        one(conn, "SELECT le_try_acquire(%s, 'a', '1 minute')", (self.prefix + "k",))
        one(conn, "SELECT le_release(%s, 'a')", (self.prefix + "k",))
        self.assertTrue(wait_for(lambda: numbered(conn), timeout=10))
        keep_rows(self, conn, 1)
        self.assertTrue(wait_for(lambda: numbered(conn) and one(
            conn, "SELECT pruned_through > 0 FROM leaderlock_history_head"), timeout=10))
        watch = Watch("--since", "0")
        self.assertEqual(watch.proc.wait(15), 123)
        watch.stop()
        self.assertIn("no longer kept", "".join(watch.errors))
        self.assertEqual(watch.lines, [])

    def test_pruning_under_load_holds_no_election_up(self):
        """Eight connections hand six keys over as fast as they can while
        the retention keeps 50 rows: the history stays near that size, reads
        from a kept position go on, and no acquisition waits on the pruning."""
        conn = self.conn
        keep_rows(self, conn, 50)
        keys = [f"{self.prefix}{i}" for i in range(6)]
        stop_at = time.monotonic() + 5
        slowest, counts, errors = [], [], []

        def churn(n):
            c = connect()
            worst = done = 0
            try:
                while time.monotonic() < stop_at:
                    key = keys[(n + done) % len(keys)]
                    t = time.monotonic()
                    if one(c, "SELECT le_try_acquire(%s, %s, '1 minute')", (key, f"r{n}")):
                        one(c, "SELECT le_release(%s, %s)", (key, f"r{n}"))
                    worst = max(worst, time.monotonic() - t)
                    done += 1
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(repr(e))
            finally:
                c.close()
            slowest.append(worst)
            counts.append(done)

        threads = [threading.Thread(target=churn, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        sizes = []
        while any(t.is_alive() for t in threads):
            numbered(conn)
            sizes.append(one(conn, "SELECT count(*) FROM leaderlock_history"))
            # reading from the oldest kept goes on (one snapshot for both)
            one(conn, "SELECT count(*) FROM le_history((SELECT pruned_through FROM leaderlock_history_head))")
            time.sleep(0.2)
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        print(f"\n  pruning under load: {sum(counts)} attempts, slowest {max(slowest) * 1000:.0f} ms, "
              f"history kept {min(sizes)}..{max(sizes)} rows")
        self.assertGreater(sum(counts), 500)
        self.assertLess(max(slowest), 1.0)
        self.assertTrue(wait_for(lambda: numbered(conn) and one(
            conn, "SELECT count(*) FROM leaderlock_history") <= 50 + 10, timeout=10))

    def test_history_as_a_table_json_lines_and_a_timeline(self):
        nasty = 'job "nightly" \x1b]52;c;eA==\x07 é 雪\n<b>&'
        conn = self.conn
        k1, k2 = self.prefix + nasty, self.prefix + "plain"
        one(conn, "SELECT le_try_acquire(%s, %s, '1 minute')", (k1, "x" + nasty))
        time.sleep(0.3)
        one(conn, "SELECT le_try_acquire(%s, 'b', '300 milliseconds')", (k2,))
        time.sleep(0.3)
        one(conn, "SELECT le_release(%s, %s)", (k1, "x" + nasty))
        time.sleep(0.5)
        self.assertTrue(wait_for(lambda: numbered(conn) and one(
            conn, "SELECT count(*) FROM leaderlock_history WHERE starts_with(key, %s)", (self.prefix,)) == 4,
            timeout=10))

        def cli(*args):
            return subprocess.run([CLI, "--dsn", DSN, "history", "--prefix", self.prefix, *args],
                                  capture_output=True, text=True, timeout=30)

        table = cli()
        self.assertEqual(table.returncode, 0, table.stderr)
        lines = table.stdout.splitlines()
        self.assertEqual(len(lines), 5, table.stdout)
        self.assertEqual(sorted(line.split()[3] for line in lines[1:]), ["acquired", "acquired", "expired", "released"])
        self.assertNotIn("\x1b", table.stdout)
        self.assertNotIn("\x07", table.stdout)
        self.assertIn("\\u{1b}", table.stdout)
        self.assertIn("reason ttl", table.stdout)

        js = cli("--json")
        self.assertEqual(js.returncode, 0, js.stderr)
        self.assertNotIn("\x1b", js.stdout)
        rows = [json.loads(line) for line in js.stdout.splitlines()]
        self.assertEqual({r["key"] for r in rows}, {k1, k2})
        self.assertEqual(sorted(r["position"] for r in rows), [r["position"] for r in rows])
        # the role whose call made it (an expiry: the worker's, none)
        self.assertEqual({r["role"] for r in rows if r["event"] != "expired"}, {"postgres"})

        with tempfile.TemporaryDirectory() as d:
            svg, png = os.path.join(d, "t.svg"), os.path.join(d, "t.png")
            drawn = cli("--svg", svg)
            self.assertEqual(drawn.returncode, 0, drawn.stderr)
            text = open(svg).read()
            self.assertNotIn("\x1b", text)
            self.assertNotIn("<b>", text)
            self.assertIn("&lt;b&gt;&amp;", text)
            renderer = shutil.which("rsvg-convert")
            self.assertIsNotNone(renderer, "rsvg-convert (librsvg2-bin, scripts/setup.sh) renders the timeline")
            subprocess.run([renderer, "-o", png, svg], check=True, timeout=30)
            width, height, pixels = read_png(png)
        # Two holders, two colours of bars (the palette's first two), each
        # on its own lane. (Their lengths: where no worker serves, an
        # expiry's instant is when something vacated it.)
        blue, orange = (0x00, 0x72, 0xB2), (0xE6, 0x9F, 0x00)
        count = {c: sum(1 for p in pixels if p == c) for c in (blue, orange)}
        self.assertGreater(count[blue], 500, count)
        self.assertGreater(count[orange], 50, count)
        self.assertGreater(width, 1000)


def read_png(path):
    """(width, height, [(r, g, b), ...]) of an 8-bit RGB or RGBA PNG without
    interlacing: what rsvg-convert writes."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat = 8, b""
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and colour in (2, 6) and interlace == 0, (depth, colour, interlace)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    channels = 3 if colour == 2 else 4
    raw, stride = zlib.decompress(idat), width * channels
    pixels, previous = [], bytearray(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b, c = previous[i], previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        pixels.extend(tuple(line[i:i + 3]) for i in range(0, stride, channels))
        previous = line
    return width, height, pixels


if __name__ == "__main__":
    unittest.main()
