"""The extension's own SQL statements, from bench/statements.json (every
statement of src/queries.rs by name; a unit test keeps the file equal to
the source), so the benchmarks explain exactly what the extension runs."""
import json
import os

STATEMENTS = os.path.join(os.path.dirname(__file__), "statements.json")


def load(schema="public"):
    """Statements keyed by constant name, with the extension's schema (the
    extension puts the schema it finds by OID where the text says
    @extschema@) filled in as `schema`."""
    with open(STATEMENTS, encoding="utf-8") as f:
        found = json.load(f)
    return {name: sql.replace("@extschema@", schema) for name, sql in found.items()}


if __name__ == "__main__":
    for name, sql in sorted(load().items()):
        print(f"{name}: {sql}\n")
