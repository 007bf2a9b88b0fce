"""The README's application example (examples/scheduler.py) works: two
replicas run side by side, only the leader runs jobs, and stopping it hands
the jobs to the other. And the code the documentation shows is that file's."""
import glob
import os
import re
import sys
import threading
import unittest

from harness import PORTABLE, client_side, DB, HOST, PORT, connect, one, wait_for

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
import scheduler  # noqa: E402
import sharding  # noqa: E402


ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def code_lines(text):
    return [line.rstrip() for line in text.splitlines() if line.strip()]


@client_side
class ExampleTest(unittest.TestCase):
    def test_the_documented_example_is_the_tested_file(self):
        """Every Python block in README.md and docs/ that shows the example
        (it defines `run(me, dsn, ...)`) is examples/scheduler.py, line for
        line, leaving out only the file's docstring, imports of sys and its
        `__main__` part."""
        with open(os.path.join(ROOT, "examples", "scheduler.py")) as f:
            text = f.read()
        text = text[text.index('"""', 3) + 3:]  # the docstring
        text = text[:text.index('if __name__ == "__main__":')]
        source = [line for line in code_lines(text) if line != "import sys"]
        shown = 0
        for path in [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md"))):
            with open(path) as f:
                for block in re.findall(r"```python\n(.*?)```", f.read(), re.S):
                    if "def run(me, dsn" not in block:
                        continue
                    shown += 1
                    self.assertEqual(code_lines(block), source, path)
        self.assertGreaterEqual(shown, 1, "no documentation shows examples/scheduler.py")

    def test_two_replicas_one_runs_jobs_then_hands_over(self):
        dsn = f"host={HOST} port={PORT} user=postgres dbname={DB}"
        c = connect()
        one(c, "DROP TABLE IF EXISTS job_runs")
        first = threading.Thread(target=scheduler.run, args=("replica-1", dsn, 0.05, 10))
        first.start()
        first.join()
        # replica-1 led all along; on exit it released the lease.
        self.assertEqual(one(c, "SELECT array_agg(DISTINCT by) FROM job_runs"), ["replica-1"])
        self.assertIsNone(one(c, "SELECT le_leader(%s)", (scheduler.KEY,)))
        term1 = one(c, "SELECT max(term) FROM job_runs")

        # Both run; replica-2 starts while replica-1 leads and gets nothing.
        one(c, "SELECT le_try_acquire(%s, 'replica-1', '10 seconds')", (scheduler.KEY,))
        second = threading.Thread(target=scheduler.run, args=("replica-2", dsn, 0.05, 5))
        second.start()
        second.join()
        self.assertEqual(one(c, "SELECT count(*) FROM job_runs WHERE by = 'replica-2'"), 0)
        # replica-1 releases; replica-2 now takes over with a new term.
        one(c, "SELECT le_release(%s, 'replica-1')", (scheduler.KEY,))
        scheduler.run("replica-2", dsn, 0.05, 3)
        self.assertEqual(one(c, "SELECT count(*) FROM job_runs WHERE by = 'replica-2'"), 3)
        self.assertGreater(one(c, "SELECT min(term) FROM job_runs WHERE by = 'replica-2'"), term1)
        c.close()

    def test_the_documented_sharding_example_is_the_tested_file(self):
        """The README's sharding block is examples/sharding.py's
        `rebalance`, line for line."""
        with open(os.path.join(ROOT, "examples", "sharding.py")) as f:
            text = f.read()
        text = text[text.index("def rebalance"):text.index('if __name__ == "__main__":')]
        with open(os.path.join(ROOT, "README.md")) as f:
            blocks = [b for b in re.findall(r"```python\n(.*?)```", f.read(), re.S) if "def rebalance" in b]
        self.assertEqual(len(blocks), 1, "README.md shows no sharding example")
        self.assertEqual(code_lines(blocks[0]), code_lines(text))

    @unittest.skipIf(PORTABLE, "groups (contract 26) are the compiled edition's")
    def test_sharding_workers_split_the_partitions_and_take_over_on_exit(self):
        dsn = f"host={HOST} port={PORT} user=postgres dbname={DB}"
        c = connect()
        owned = ("SELECT member, count(*) FROM leaderlock_partitions "
                 "WHERE grp = 'sharding' AND member IS NOT NULL AND revoke_until IS NULL "
                 "GROUP BY member ORDER BY member")
        worked, errors = [], []

        def work(conn, me, partition, term):
            # what a worker's writes would do: fenced by its partition's term
            with conn.cursor() as cur:
                cur.execute("SELECT le_assert_partition(%s, %s, %s, %s)", (sharding.GROUP, partition, me, term))
            worked.append((me, partition))

        def worker(me, rounds):
            try:
                sharding.run(me, dsn, every=0.05, rounds=rounds, work=work)
            except Exception as e:  # noqa: BLE001 - reported by the test
                errors.append(e)

        threads = [threading.Thread(target=worker, args=(f"w{i}", rounds), daemon=True)
                   for i, rounds in ((1, 120), (2, 120), (3, 40))]
        for t in threads:
            t.start()
        # Three workers: 16 / 3 rounded down or up each, every partition owned.
        def split():
            counts = [n for _, n in rows(c, owned)]
            return len(counts) == 3 and max(counts) <= 6 and min(counts) >= 5 and sum(counts) == 16
        self.assertTrue(wait_for(split, timeout=10), rows(c, owned))
        threads[2].join(timeout=20)
        # w3 left on exit: w1 and w2 own its partitions at once, well before
        # its membership (6 s) could have lapsed.
        self.assertTrue(wait_for(lambda: rows(c, owned) == [("w1", 8), ("w2", 8)], timeout=3), rows(c, owned))
        for t in threads:
            t.join(timeout=30)
        self.assertEqual(errors, [])
        self.assertEqual(rows(c, owned), [])
        self.assertEqual({me for me, _ in worked}, {"w1", "w2", "w3"})
        c.close()


def rows(conn, sql):
    with conn.cursor() as cur:
        cur.execute(sql)
        return [tuple(r) for r in cur.fetchall()]


if __name__ == "__main__":
    unittest.main()
