"""The extension's own SQL statements, read from src/queries.rs, so the
benchmarks explain exactly what the extension runs."""
import os
import re

SRC = os.path.join(os.path.dirname(__file__), "..", "src", "queries.rs")

STRING = r'"((?:[^"\\]|\\.)*)"'


def unescape(body):
    body = re.sub(r"\\\n\s*", "", body)  # Rust line continuations
    return body.replace('\\"', '"')


def load(schema="public"):
    """Statements keyed by constant name, with the extension's schema (the
    extension puts the schema it finds by OID where the text says
    @extschema@) filled in as `schema`."""
    with open(SRC, encoding="utf-8") as f:
        text = f.read()
    # macro_rules! owned_by { ($param:literal) => { concat!("...", $param, "...") } }
    m = re.search(r"macro_rules! owned_by \{.*?concat!\(\s*" + STRING + r",\s*\$param,\s*" + STRING, text, re.S)
    owned_by = (unescape(m.group(1)), unescape(m.group(2)))
    found = {}
    for name, body in re.findall(r"pub const (\w+): &str\s*=\s*" + STRING + ";", text, re.S):
        found[name] = unescape(body)
    for name, parts in re.findall(r"pub const (\w+): &str\s*=\s*concat!\((.*?)\);", text, re.S):
        sql = ""
        for literal, param in re.findall(STRING + r'|owned_by!\("(\$\d+)"\)', parts, re.S):
            sql += param.join(owned_by) if param else unescape(literal)
        found[name] = sql
    return {name: sql.replace("@extschema@", schema) for name, sql in found.items()}


if __name__ == "__main__":
    for name, sql in sorted(load().items()):
        print(f"{name}: {sql}\n")
