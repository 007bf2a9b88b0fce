"""`leaderlock run --group G -- cmd` (contract 26): one command per
partition the member owns. The commands are tests/client/group_child.py:
each records its start, a tick every 20 ms, SIGTERM and its drain in a
shared log, so the tests check what the commands themselves did: on a
partition, never two commands at once, terms growing; and how long a
partition went with no command while members restarted one by one.
"""
import json
import os
import signal
import subprocess
import sys
import time
import unittest

from harness import PORTABLE, wait_for
from test_cli import CLI, REJECTED, CliCase, Run, dsn

CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "group_child.py")


def commands(path):
    """Per command (pid): partition, term, member, first and last record,
    whether it got SIGTERM; sorted by partition, then start."""
    runs = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                kind, pid, partition, term, member, t = line.split()
                r = runs.setdefault(pid, {"partition": int(partition), "term": int(term), "member": member,
                                          "first": float(t), "last": float(t), "sigterm": False})
                r["first"], r["last"] = min(r["first"], float(t)), max(r["last"], float(t))
                r["sigterm"] |= kind == "term"
    return sorted(runs.values(), key=lambda r: (r["partition"], r["first"]))


def handoffs(test, path):
    """Every change of command on a partition: (partition, gap in seconds);
    fails on two commands of a partition at once or a term going back."""
    out = []
    runs = commands(path)
    for a, b in zip(runs, runs[1:]):
        if a["partition"] != b["partition"]:
            continue
        test.assertLess(a["last"], b["first"],
                        f"partition {a['partition']}: {b['member']} (term {b['term']}) started while "
                        f"{a['member']} (term {a['term']}) still ran")
        test.assertLess(a["term"], b["term"], f"partition {a['partition']}: term went from {a['term']} to {b['term']}")
        out.append((a["partition"], b["first"] - a["last"]))
    return out


@unittest.skipIf(PORTABLE, "groups (contract 26) are the compiled edition's")
class GroupRunTest(CliCase):
    def setUp(self):
        super().setUp()
        self.group = self.key
        self.log = os.path.join(self.dir, "group.log")

    def member(self, name, partitions, ttl="3s", drain_child=0.2):
        return Run(self, "--group", self.group, "--id", name, "--ttl", ttl, "--partitions", str(partitions),
                   "--drain", "5s", command=[sys.executable, CHILD, self.log],
                   env={"GROUP_CHILD_DRAIN": str(drain_child)})

    def owners(self, partitions):
        """partition -> (member, revoked) as the server has it."""
        with self.conn.cursor() as c:
            c.execute("SELECT partition, member, revoke_until IS NOT NULL FROM leaderlock_partitions "
                      "WHERE grp = %s AND partition <= %s", (self.group, partitions))
            return {p: (m, r) for p, m, r in c.fetchall()}

    def stable(self, names, partitions):
        """Every partition owned by one of `names`, none revoked, spread at
        most 1, and each partition's command running (a record in the last
        0.2 s, of its owner and term)."""
        owners = self.owners(partitions)
        if len(owners) != partitions or any(m not in names or r for m, r in owners.values()):
            return False
        counts = [sum(1 for m, _ in owners.values() if m == n) for n in names]
        if max(counts) - min(counts) > 1:
            return False
        now = time.time()
        running = {r["partition"]: r["member"] for r in commands(self.log) if now - r["last"] < 0.2}
        return all(running.get(p) == m for p, (m, _) in owners.items())

    def test_a_command_per_partition_moved_after_it_stopped(self):
        """Two members share 4 partitions: each partition's command gets its
        partition, term and member; a moved partition's command gets
        SIGTERM, drains, and its successor starts after it ended, in a
        higher term; a member stopped by SIGTERM stops its commands,
        leaves, and the other runs all 4 soon after."""
        a = self.member("a", 4)
        self.assertTrue(wait_for(lambda: self.stable(["a"], 4), timeout=15), commands(self.log))
        b = self.member("b", 4)
        self.assertTrue(wait_for(lambda: self.stable(["a", "b"], 4), timeout=15), self.owners(4))
        runs = commands(self.log)
        moved = [r for r in runs if r["member"] == "a" and r["sigterm"]]
        self.assertEqual(len(moved), 2, runs)
        self.assertEqual(len(a.events("acked")), 2)
        with self.conn.cursor() as c:
            c.execute("SELECT partition, term FROM leaderlock_partitions WHERE grp = %s", (self.group,))
            terms = dict(c.fetchall())
        for r in runs:
            if not r["sigterm"]:
                self.assertEqual(r["term"], terms[r["partition"]], r)
        handoffs(self, self.log)

        a.signal(signal.SIGTERM)
        self.assertEqual(a.wait(15), 128 + signal.SIGTERM)
        exited = time.time()
        self.assertTrue(wait_for(lambda: self.stable(["b"], 4), timeout=10), self.owners(4))
        taken = time.time() - exited
        self.assertTrue(all(r["sigterm"] for r in commands(self.log) if r["member"] == "a"))
        self.assertEqual(len(a.events("left")), 1)
        # left at once, heard at once: well within a renewal period (1 s)
        self.assertLess(taken, 1.0)
        handoffs(self, self.log)
        b.signal(signal.SIGINT)
        self.assertEqual(b.wait(15), 128 + signal.SIGINT)

    def test_commands_stop_at_the_local_deadline_of_a_stopped_member(self):
        """A member stopped with SIGSTOP cannot renew: its supervisors stop
        its commands at its local deadline, before its session lapses and
        its partitions go to the other member (no overlap, from the
        commands' own records)."""
        a = self.member("a", 4, ttl="2s")
        self.assertTrue(wait_for(lambda: self.stable(["a"], 4), timeout=15))
        b = self.member("b", 4, ttl="2s")
        self.assertTrue(wait_for(lambda: self.stable(["a", "b"], 4), timeout=15))
        a.signal(signal.SIGSTOP)
        try:
            self.assertTrue(wait_for(lambda: self.stable(["b"], 4), timeout=15), self.owners(4))
            stopped = [r for r in commands(self.log) if r["member"] == "a" and not r["sigterm"]]
            self.assertEqual(stopped, [], "a's commands ran on though a could not renew")
            handoffs(self, self.log)
        finally:
            a.signal(signal.SIGCONT)
        # back: a joins again (a new session) and gets its share
        self.assertTrue(wait_for(lambda: self.stable(["a", "b"], 4), timeout=15), self.owners(4))
        handoffs(self, self.log)
        for m in (a, b):
            m.signal(signal.SIGTERM)
            self.assertEqual(m.wait(15), 128 + signal.SIGTERM)

    def test_a_refused_member_exits_rejected(self):
        r = Run(self, "--group", "", "--ttl", "2s", command=[sys.executable, CHILD, self.log])
        self.assertEqual(r.wait(15), REJECTED)
        self.assertIn("22023", json.dumps(r.events("rejected")))
        usage = subprocess.run([CLI, "--dsn", dsn(), "run", "--group", "g", "--slots", "2", "--", "true"],
                               capture_output=True, text=True)
        self.assertEqual(usage.returncode, 2, usage.stderr)

    def test_a_rolling_restart_leaves_no_partition_unowned_for_long(self):
        """8 members share 32 partitions; each in turn gets SIGTERM (its
        commands drain for 0.2 s, then it leaves) and is started again.
        From the commands' records: never two commands of a partition at
        once, and the time from one command's last record to the next
        command's start is within a renewal period (ttl/3 = 1 s) at p99."""
        partitions, ttl = 32, 3.0
        names = [f"m{i}" for i in range(8)]
        members = {}
        for n in names:
            members[n] = self.member(n, partitions)
        self.assertTrue(wait_for(lambda: self.stable(names, partitions), timeout=30), self.owners(partitions))
        before = len(handoffs(self, self.log))
        for n in names:
            members[n].signal(signal.SIGTERM)
            self.assertEqual(members[n].wait(15), 128 + signal.SIGTERM)
            members[n] = self.member(n, partitions)
            self.assertTrue(wait_for(lambda: self.stable(names, partitions), timeout=30),
                            f"after restarting {n}: {self.owners(partitions)}")
        gaps = sorted(g for _, g in handoffs(self, self.log)[before:])
        for m in members.values():
            m.signal(signal.SIGTERM)
        for m in members.values():
            self.assertEqual(m.wait(15), 128 + signal.SIGTERM)
        self.assertGreaterEqual(len(gaps), partitions, "the restarts moved too little to judge")
        p99 = gaps[min(len(gaps) - 1, int(len(gaps) * 0.99))]
        print(f"\n  rolling restart of 8 members, {partitions} partitions: {len(gaps)} moves, "
              f"gap p50 {gaps[len(gaps) // 2] * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms, "
              f"max {gaps[-1] * 1000:.0f} ms")
        self.assertLessEqual(p99, ttl / 3)


if __name__ == "__main__":
    unittest.main()
