"""The extension's own SQL statements, read from src/queries.rs, so the
benchmarks explain exactly what the extension runs."""
import os
import re

SRC = os.path.join(os.path.dirname(__file__), "..", "src", "queries.rs")


def load():
    with open(SRC, encoding="utf-8") as f:
        text = f.read()
    found = {}
    for name, body in re.findall(r'pub const (\w+): &str\s*=\s*"((?:[^"\\]|\\.)*)";', text, re.S):
        body = re.sub(r"\\\n\s*", "", body)  # Rust line continuations
        found[name] = body.replace('\\"', '"')
    return found
