"""Each client's tour: a program that sends every statement its library
has (leases, blocking and ranked acquisition, keys of many slots,
sessions, scheduled runs, the history, the worker's questions), checks
each answer, and exits 0 when all were as expected. tests/clients/hostile.py
runs them against a database set against its clients.

Every tour is started as `PROGRAM DSN PREFIX [--pooled]`: DSN a URL, PREFIX
what every key and job it uses starts with (so tours never meet), --pooled
when the DSN goes through pgbouncer in transaction pooling (no LISTEN to
rely on: the tour does what the library does there). LEADERLOCK_SCHEMA,
when set, is passed on (the portable edition installed by its script), and
LEADERLOCK_TOUR_EDITION says which edition the database has (`portable`:
no priorities, no session-bound leases, no worker).
"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

TIMEOUT = 120


def command(tour):
    """The command line of a tour, without its arguments."""
    if tour == "cli":
        return [sys.executable, os.path.join(HERE, "cli_tour.py")]
    if tour == "rust":
        return [os.environ["LEADERLOCK_RUST_TOUR"]]
    if tour == "python":
        return [os.environ.get("PY_CLIENT_PYTHON", sys.executable),
                os.path.join(REPO, "clients", "python", "tests", "tour.py")]
    if tour == "node":
        return ["node", os.path.join(REPO, "clients", "node", "test", "tour.mjs")]
    if tour == "go":
        return [os.environ["GO_TOUR"]]
    if tour == "java":
        return [os.environ["JAVA_TOUR"]]
    raise ValueError(f"no tour named {tour}")


def run(tour, dsn, pooled, prefix):
    """Runs one tour; returns (whether it passed, what it printed)."""
    argv = command(tour) + [dsn, prefix] + (["--pooled"] if pooled else [])
    env = dict(os.environ)
    if tour == "python":
        env["PYTHONPATH"] = os.path.join(REPO, "clients", "python", "src")
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT, env=env)
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        return False, out + f"\n(timed out after {TIMEOUT} s)"
    return p.returncode == 0, p.stdout + p.stderr
