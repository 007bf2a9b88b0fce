#!/usr/bin/env python3
"""Fails when the modules of the extension (src/, in folders) or of a crate
(crates/*/src/) import each other in a circle, when a part of src/ imports
a part above it (the order is PARTS, lib.rs's list), or when a source
file (src/ or a crate's) is longer than MAX_LINES. A module is a file: src/lease/take.rs is
`lease::take`, src/lease/mod.rs is `lease`. Prints each module's imports
with --list. Run by scripts/test.sh."""
import os
import re
import sys

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SOURCES = [os.path.join(REPO, "src")] + sorted(
    os.path.join(REPO, "crates", c, "src") for c in os.listdir(os.path.join(REPO, "crates")))
# The parts of src/, from the bottom up: each may import only those before it.
PARTS = ["base", "store", "shmem", "announce", "lease", "workers", "api"]
# Test code: may import any part; no part may import it.
TESTS = "tests"
MAX_LINES = 800


def modules(src):
    """{module path: file} of every .rs under src (lib.rs and main.rs apart)."""
    found = {}
    for root, _, files in os.walk(src):
        for f in files:
            if not f.endswith(".rs"):
                continue
            rel = os.path.relpath(os.path.join(root, f), src)[:-3].split(os.sep)
            if rel[-1] == "mod":
                rel = rel[:-1]
            if rel in (["lib"], ["main"]) or rel[0] == "bin":
                continue
            found["::".join(rel)] = os.path.join(root, f)
    return found


def imports(src):
    mods = modules(src)
    deps = {}
    for m, path in mods.items():
        with open(path, encoding="utf-8") as f:
            text = f.read()
        paths = set(re.findall(r"crate::((?:\w+::)*\w+)", text))
        for group in re.findall(r"use crate::\{([^}]*)\}", text, re.S):
            paths |= {x.strip() for x in group.split(",") if x.strip()}
        used = set()
        for p in paths:
            segs = p.split("::")
            # the longest prefix that is a module
            for n in range(len(segs), 0, -1):
                cand = "::".join(segs[:n])
                if cand in mods:
                    used.add(cand)
                    break
        deps[m] = sorted(used - {m} - {a for a in used if m.startswith(a + "::")})
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


def upward(deps):
    """Imports of src/ from a part to a part above it, or of the tests."""
    wrong = []
    for m, used in sorted(deps.items()):
        part = m.split("::")[0]
        for u in used:
            upart = u.split("::")[0]
            if part == TESTS:
                continue
            if upart == TESTS or part not in PARTS or upart not in PARTS:
                wrong.append((m, u))
            elif PARTS.index(upart) > PARTS.index(part):
                wrong.append((m, u))
    return wrong


def long_files(src):
    out = []
    for root, _, files in os.walk(src):
        for f in files:
            if f.endswith(".rs"):
                path = os.path.join(root, f)
                with open(path, encoding="utf-8") as fh:
                    n = sum(1 for _ in fh)
                if n > MAX_LINES:
                    out.append((os.path.relpath(path, REPO), n))
    return out


def main():
    failed = False
    for src in SOURCES:
        where = os.path.relpath(src, REPO) + "/"
        deps = imports(src)
        if "--list" in sys.argv:
            for m in sorted(deps):
                print(f"{where}{m}: {' '.join(deps[m])}")
        for c in circles(deps):
            print(f"import circle among {where}: " + ", ".join(c), file=sys.stderr)
            failed = True
        if where == "src/":
            for m, u in upward(deps):
                print(f"{where}: {m} imports {u}, a part above it (order: "
                      f"{' < '.join(PARTS)})", file=sys.stderr)
                failed = True
        for path, n in long_files(src):
            print(f"{path}: {n} lines (at most {MAX_LINES})", file=sys.stderr)
            failed = True
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
