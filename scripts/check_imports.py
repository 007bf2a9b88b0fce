#!/usr/bin/env python3
"""Fails when the modules of the extension (src/*.rs) or of a crate
(crates/*/src/*.rs) import each other in a circle: every module should
use only modules below it. Prints each module's imports with --list. Run
by scripts/test.sh."""
import os
import re
import sys

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SOURCES = [os.path.join(REPO, "src")] + sorted(
    os.path.join(REPO, "crates", c, "src") for c in os.listdir(os.path.join(REPO, "crates")))


def imports(src):
    mods = {f[:-3] for f in os.listdir(src) if f.endswith(".rs")} - {"lib", "main"}
    deps = {}
    for m in mods:
        with open(os.path.join(src, m + ".rs"), encoding="utf-8") as f:
            text = f.read()
        used = set(re.findall(r"crate::(\w+)", text))
        for group in re.findall(r"use crate::\{([^}]*)\}", text, re.S):
            used |= {x.strip().split("::")[0] for x in group.split(",") if x.strip()}
        deps[m] = sorted((used & mods) - {m})
    return deps


def circles(deps):
    """The strongly connected components with more than one module."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in deps[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(deps):
        if v not in index:
            visit(v)
    return found


def main():
    failed = False
    for src in SOURCES:
        where = os.path.relpath(src, REPO) + "/"
        deps = imports(src)
        if "--list" in sys.argv:
            for m in sorted(deps):
                print(f"{where}{m}: {' '.join(deps[m])}")
        for c in circles(deps):
            print(f"import circle among {where}" + f".rs, {where}".join(c) + ".rs", file=sys.stderr)
            failed = True
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
