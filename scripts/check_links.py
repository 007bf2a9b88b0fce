#!/usr/bin/env python3
"""Fails when a link in the documentation points at a file or a heading
that does not exist, or out of the repository (a web address included:
the documentation is self-contained). Run by scripts/test.sh;
`check_links.py DIR` checks another checkout."""
import glob
import os
import re
import sys

DOCS = ["README.md", "SECURITY.md", "UPDATING.md", "CHANGELOG.md", "CONTRIBUTING.md",
        "bench/README.md", "sql/README.md", "docs/*.md",
        "portable/README.md", "tests/portable/README.md", "clients/*/README.md",
        "crates/*/README.md", "examples/*.md", "packaging/*.md", "tests/*/README.md"]


def without_code(text):
    return re.sub(r"```.*?```", "", text, flags=re.S)


def anchors(path):
    """GitHub's heading anchors in a Markdown file."""
    found, seen = set(), {}
    with open(path, encoding="utf-8") as f:
        text = without_code(f.read())
    for m in re.finditer(r"^#+ (.*)$", text, re.M):
        slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        found.add(slug if n == 0 else f"{slug}-{n}")
    return found


def problems(root):
    root = os.path.realpath(root)
    for pattern in DOCS:
        for f in sorted(glob.glob(os.path.join(root, pattern))):
            with open(f, encoding="utf-8") as fh:
                text = without_code(fh.read())
            for m in re.finditer(r"\]\(([^)\s]+)\)", text):
                link = m.group(1)
                where = os.path.relpath(f, root)
                if re.match(r"[a-z][a-z0-9+.-]*:", link):
                    yield f"{where}: {link} leaves the repository"
                    continue
                path, _, anchor = link.partition("#")
                target = os.path.realpath(os.path.join(os.path.dirname(f), path)) if path else f
                if not target.startswith(root + os.sep):
                    yield f"{where}: {link} leaves the repository"
                elif not os.path.exists(target):
                    yield f"{where}: {link}: no such file"
                elif anchor and target.endswith(".md") and anchor not in anchors(target):
                    yield f"{where}: {link}: no such heading"


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    found = list(problems(root))
    for p in found:
        print(p, file=sys.stderr)
    sys.exit(1 if found else 0)


if __name__ == "__main__":
    main()
