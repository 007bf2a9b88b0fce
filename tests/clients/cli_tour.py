"""The CLI's tour (tests/clients/tours.py): every command that talks to the
database, each checked by what it prints or returns.

    cli_tour.py DSN PREFIX [--pooled]

LEADERLOCK_CLI is the CLI.
"""
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

CLI = os.environ.get("LEADERLOCK_CLI", "leaderlock")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from free_port import free_port  # noqa: E402 (never an ephemeral port: it says why)


def main():
    dsn, prefix = sys.argv[1], sys.argv[2]
    failures = []

    def cli(*args, timeout=30, expect=0):
        try:
            p = subprocess.run([CLI, "--dsn", dsn, *args], capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            failures.append(f"leaderlock {' '.join(args)} did not end within {timeout} s")
            return ""
        print(f"leaderlock {' '.join(args)}: exit {p.returncode}", flush=True)
        if p.returncode != expect:
            failures.append(f"leaderlock {' '.join(args)} exited {p.returncode}: {p.stderr.strip()[-500:]}")
        return p.stdout

    def until_stopped(seconds, *args):
        """Runs a command that does not end by itself for `seconds`, then
        SIGTERM; its output."""
        p = subprocess.Popen([CLI, "--dsn", dsn, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        time.sleep(seconds)
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=30)
        print(f"leaderlock {' '.join(args)} (stopped after {seconds} s): exit {p.returncode}", flush=True)
        bad = [line for line in err.splitlines() if "leaderlock-trap" in line or "SQLSTATE" in line]
        if bad:
            failures.append(f"leaderlock {' '.join(args)}: {' / '.join(bad)[-1000:]}")
        return out

    key = f"{prefix}-lead"
    cli("run", "--key", key, "--ttl", "2s", "--", "true")
    cli("run", "--key", f"{prefix}-slots", "--slots", "2", "--ttl", "2s", "--", "true")
    if os.environ.get("LEADERLOCK_TOUR_EDITION") != "portable":  # priorities need shared memory
        cli("run", "--key", f"{prefix}-ranked", "--priority", "1", "--ttl", "2s", "--", "true")
    def serving(args, requests):
        """Starts a command that serves HTTP on a free port (`{port}` in
        `args`), sends it `requests` ((method, path, JSON body or None[,
        a refusal expected: its HTTP status, for SQLSTATE 42501])), each
        answered 200 unless so refused, then SIGTERM; the bodies by path."""
        port = free_port()
        p = subprocess.Popen([CLI, "--dsn", dsn, *[a.replace("{port}", str(port)) for a in args]],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        bodies = {}
        try:
            up = time.monotonic() + 10
            for method, path, body, *status in requests:
                data = None if body is None else json.dumps(body).encode()
                req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method,
                                             headers={"x-leaderlock-console": "1",
                                                      "content-type": "application/json"})
                while True:
                    try:
                        with urllib.request.urlopen(req, timeout=10) as r:
                            bodies[path.split("?")[0]] = r.read().decode()
                        break
                    except urllib.error.HTTPError as e:
                        answer = e.read()
                        if [e.code] != status or b'"sqlstate":"42501"' not in answer:
                            failures.append(f"leaderlock {args[0]}: {method} {path}: {e.code} {answer[:300]!r}")
                        break
                    except OSError:
                        if time.monotonic() > up:
                            failures.append(f"leaderlock {args[0]}: {method} {path}: never answered")
                            break
                        time.sleep(0.1)
                print(f"leaderlock {args[0]}: {method} {path}", flush=True)
        finally:
            p.send_signal(signal.SIGTERM)
            _, err = p.communicate(timeout=30)
        if p.returncode not in (0, -signal.SIGTERM, 128 + signal.SIGTERM):
            failures.append(f"leaderlock {args[0]} exited {p.returncode}: {err.strip()[-500:]}")
        bad = [line for line in err.splitlines() if "leaderlock-trap" in line or "SQLSTATE" in line]
        if bad:
            failures.append(f"leaderlock {args[0]}: {' / '.join(bad)[-1000:]}")
        return bodies

    # A leader that holds on while the tour reads it.
    holder = subprocess.Popen([CLI, "--dsn", dsn, "run", "--key", f"{prefix}-held", "--ttl", "3s", "--",
                               "sleep", "30"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    job = f"{prefix}-job"
    until_stopped(2.5, "run", "--job", job, "--every", "1s", "--ttl", "2s", "--", "true")
    deadline = time.monotonic() + 10
    held = []
    while time.monotonic() < deadline and not held:
        held = [json.loads(line) for line in cli("status", "--held", "--json").splitlines()
                if json.loads(line)["key"] == f"{prefix}-held"]
        time.sleep(0.1)
    if not held:
        failures.append("status --held --json never showed the held key")
    if f"{prefix}-held" not in cli("status"):
        failures.append("status does not show the held key")
    cli("status", f"{prefix}-lead")
    runs = [json.loads(line) for line in cli("runs", "--job", job, "--json").splitlines()]
    if not any(r["state"] == "succeeded" for r in runs):
        failures.append(f"runs --job --json shows no run that succeeded: {runs}")
    if job not in cli("runs"):
        failures.append("runs does not show the job")
    holder.send_signal(signal.SIGTERM)
    holder.communicate(timeout=30)
    if os.environ.get("LEADERLOCK_TOUR_EDITION") != "portable":  # schedules kept in the database
        sched = f"{prefix}-sched"
        until_stopped(2.5, "run", "--job", sched, "--every", "1s", "--register", "--overlap", "forbid",
                      "--ttl", "2s", "--", "true")
        until_stopped(2.5, "run", "--job", sched, "--ttl", "2s", "--", "true")
        if f'schedule "{sched}": every 1s' not in cli("runs", "--job", sched):
            failures.append("runs does not show the registered schedule")
        cli("status", "--group", f"{prefix}-group", expect=1)  # (no such group: its statement ran)
        until_stopped(2.0, "run", "--group", f"{prefix}-grun", "--partitions", "2", "--ttl", "2s", "--", "sleep", "30")
        grun = [json.loads(line) for line in cli("status", "--group", f"{prefix}-grun", "--json").splitlines()]
        if len(grun) != 2:  # (freed when the member left)
            failures.append(f"status --group after run --group: {grun}")
        until_stopped(1.0, "watch", "--group", f"{prefix}-group", "--since", "0")
        # The metrics read the database when scraped, the console when a
        # page asks: each is asked for everything it reads and writes.
        body = serving(["metrics", "--listen", "127.0.0.1:{port}", "--every", "200ms"],
                       [("GET", "/metrics", None)])
        if "leaderlock_leases" not in body.get("/metrics", ""):
            failures.append(f"metrics: no leaderlock_leases in the scrape: {body.get('/metrics', '')[:300]!r}")
        held_q = urllib.parse.quote(f"{prefix}-held")
        body = serving(["console", "--listen", "127.0.0.1:{port}", "--allow-writes"],
                       [("GET", "/api/config", None), ("GET", "/api/keys", None),
                        ("GET", f"/api/key?key={held_q}", None), ("GET", "/api/jobs", None),
                        ("GET", "/api/sessions", None), ("GET", "/api/groups", None),
                        ("POST", "/api/pause", {"job": sched}),
                        ("POST", "/api/resume", {"job": sched}),
                        # (the tour's role may not force a release: refused by the server, 42501)
                        ("POST", "/api/release", {"key": f"{prefix}-never-held"}, 403),
                        ("POST", "/api/close-session", {"session": "00000000-0000-0000-0000-000000000000"})])
        if sched not in body.get("/api/jobs", ""):
            failures.append(f"console: /api/jobs does not list {sched}: {body.get('/api/jobs', '')[:300]!r}")
    # The history followed live (where no worker serves, the watcher
    # numbers it), then as JSON lines, a table and an SVG.
    watched = until_stopped(2.0, "watch", "--prefix", prefix, "--since", "0")
    if key not in watched:
        failures.append("watch --since printed nothing of the tour's keys")
    until_stopped(1.0, "watch", key)
    deadline = time.monotonic() + 10
    events = []
    while time.monotonic() < deadline and not any(e.get("key") == f"{prefix}-held" and e["event"] == "released"
                                                  for e in events):
        events = [json.loads(line) for line in cli("history", "--prefix", prefix, "--json").splitlines()]
        time.sleep(0.2)
    if not any(e.get("key") == key and e["event"] == "acquired" for e in events):
        failures.append(f"history --json has no acquisition of {key}")
    if key not in cli("history", "--prefix", prefix, "--since", "1h"):
        failures.append("history (the table) does not show the key")
    svg = f"/tmp/{prefix}.svg"
    cli("history", key, "--svg", svg, "--until", "2100-01-01T00:00:00Z")
    if not os.path.exists(svg):
        failures.append("history --svg wrote nothing")
    else:
        os.unlink(svg)
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures), flush=True)
        sys.exit(1)
    print("the CLI's tour passed", flush=True)


if __name__ == "__main__":
    main()
