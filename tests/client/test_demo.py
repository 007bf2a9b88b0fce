"""The quick start's demo (demo/election.py, what ./scripts/demo.sh runs)
against the test cluster: three candidates, a handover on release, a
leader killed with -9 and replaced after its lease expires."""
import os
import re
import subprocess
import unittest

from harness import client_side, PORT, connect, one

DEMO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "demo", "election.py")


@client_side
class DemoTest(unittest.TestCase):
    def test_the_demo_election_runs_as_the_quick_start_says(self):
        c = connect()
        self.addCleanup(c.close)
        one(c, "DELETE FROM leaderlock WHERE key = 'nightly-report'")
        out = subprocess.run(["/usr/bin/python3", DEMO, str(PORT)], capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stderr)
        lines = out.stdout.splitlines()
        self.assertIn("background worker running: True", lines[0])
        self.assertEqual(lines[-1], "demo finished")
        terms = [int(t) for t in re.findall(r"won the election: leader in term (\d+)", out.stdout)]
        # the first leader, the one after its release, the one after the kill
        self.assertGreaterEqual(len(terms), 3, out.stdout)
        self.assertEqual(terms, sorted(set(terms)), "a term was won twice or went down")
        self.assertIn("done: released the lease", out.stdout)
        self.assertRegex(out.stdout, r"kill -9 candidate-\d \(the leader\)")
        self.assertRegex(out.stdout, r"candidate-\d leads [0-9.]+ s after the kill")
        self.assertIn('"event": "expired"', out.stdout)


if __name__ == "__main__":
    unittest.main()
