#!/usr/bin/env python3
"""Fails when a paragraph of the documentation runs over 1,500 characters:
the documentation states the present in paragraphs a reader can take in,
and the past goes to CHANGELOG.md and the commits. Run by scripts/test.sh;
`check_docs.py DIR` checks another checkout.

A paragraph is a run of consecutive non-blank lines outside fenced code
blocks. A line starting with '|' (a table row) is not counted and ends the
paragraph before it; so does a heading. Each list item (a line starting
with "- ", "* " or "1. ", indented or not) starts a paragraph of its own,
which its continuation lines belong to."""
import glob
import os
import re
import sys

DOCS = ["docs/*.md", "bench/README.md"]
LIMIT = 1500

FENCE = re.compile(r"^\s*(```|~~~)")
LIST_ITEM = re.compile(r"^\s*(?:[-*]|\d+\.)\s")


def paragraphs(text):
    """(first line number, text) of every paragraph of a Markdown text."""
    start, lines, fenced = None, [], False

    def flush():
        if lines:
            yield start, "\n".join(lines)

    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            yield from flush()
            start, lines = None, []
            fenced = not fenced
            continue
        if fenced or not line.strip() or line.lstrip().startswith(("|", "#")):
            yield from flush()
            start, lines = None, []
            continue
        if LIST_ITEM.match(line):
            yield from flush()
            start, lines = None, []
        if not lines:
            start = number
        lines.append(line.strip())
    yield from flush()


def problems(root):
    root = os.path.realpath(root)
    for pattern in DOCS:
        for f in sorted(glob.glob(os.path.join(root, pattern))):
            with open(f, encoding="utf-8") as fh:
                text = fh.read()
            for line, paragraph in paragraphs(text):
                if len(paragraph) > LIMIT:
                    words = " ".join(paragraph.split()[:8])
                    yield (f"{os.path.relpath(f, root)}:{line}: paragraph of "
                           f"{len(paragraph)} characters (at most {LIMIT}): {words} ...")


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    found = list(problems(root))
    for p in found:
        print(p, file=sys.stderr)
    sys.exit(1 if found else 0)


if __name__ == "__main__":
    main()
