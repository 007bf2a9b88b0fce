#!/usr/bin/env python3
"""Fails when a model (crates/protocol/tests/*.rs) calls a function of
the decision core (crates/protocol) that neither the extension (src/) nor a
client (crates/client, crates/cli) calls: the model must check the rules
the code runs, with no function of its own standing in for one. A rule the
extension runs as SQL counts as called: `leaderlock_protocol::sql::RULES`
names it, and a #[pg_test] holds that SQL to the function (or, for a rule
over many rows, `STATEMENT_RULES` names it with its statements, and a
#[pg_test] holds those to it). Calls through a module path (`p::runs::f(`)
count as calls of `f`. Run by scripts/test.sh."""
import os
import re
import sys

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
MODELS = os.path.join(REPO, "crates", "protocol", "tests")
SQL = os.path.join(REPO, "crates", "protocol", "src", "sql.rs")
USERS = [os.path.join(REPO, d) for d in ("src", "crates/client/src", "crates/cli/src")]


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def called_by_the_model():
    names = set()
    for f in sorted(os.listdir(MODELS)):
        if f.endswith(".rs"):
            names |= set(re.findall(r"\bp::(?:[a-z_][a-z0-9_]*::)*([a-z_][a-z0-9_]*)\s*\(", read(os.path.join(MODELS, f))))
    return names


def called_by_the_code():
    names = set()
    for top in USERS:
        for root, _, files in os.walk(top):
            if os.path.relpath(root, REPO).split(os.sep)[:2] == ["src", "tests"]:
                continue  # the unit tests are not the code
            for f in files:
                if not f.endswith(".rs") or f == "tests.rs":
                    continue
                text = read(os.path.join(root, f))
                names |= set(re.findall(r"leaderlock_protocol::(?:[a-z_]+::)*([a-z_][a-z0-9_]*)", text))
                for group in re.findall(r"use leaderlock_protocol::(?:[a-z_]+::)*\{([^}]*)\}", text, re.S):
                    names |= {n.strip().split(" as ")[0] for n in group.split(",") if n.strip()}
    rules = read(SQL)
    rules = rules[rules.index("pub const RULES"):]
    names |= set(re.findall(r'\(\s*"([a-z_]+)"\s*,', rules))  # RULES and STATEMENT_RULES
    return names


def main():
    missing = sorted(called_by_the_model() - called_by_the_code())
    for name in missing:
        print(f"the model calls leaderlock_protocol::{name}, which no code of the extension or a client calls",
              file=sys.stderr)
    sys.exit(1 if missing else 0)


if __name__ == "__main__":
    main()
