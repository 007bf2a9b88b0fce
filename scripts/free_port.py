"""A TCP port on 127.0.0.1 for a test's server to listen on, printed when
run as a script (`python3 scripts/free_port.py`), or `free_port()`.

Never one of the kernel's ephemeral ports (ip_local_port_range, 32768 to
60999 on Debian): every client connection takes its own port from there,
so a port found free there can be taken by a connection, or by its
TIME_WAIT for a minute after, before the server binds it (a test server
then fails to start: "could not bind ... Address already in use"). Ports
are picked below that range, from a random place, each claimed by a
directory under /tmp/leaderlock-ports made atomically, so that stages
running side by side never pick the same one; a claim is taken again an
hour after it was made."""
import os
import random
import socket
import time

CLAIMS = "/tmp/leaderlock-ports"
FIRST = 20000
CLAIM_SECONDS = 3600


def _candidates():
    """The ports to try: below the ephemeral range (else above it)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low, high = (int(x) for x in f.read().split())
    except (OSError, ValueError):
        low, high = 32768, 60999
    ports = list(range(FIRST, low)) if low - FIRST >= 2000 else list(range(high + 1, 65536))
    start = random.SystemRandom().randrange(len(ports))
    return ports[start:] + ports[:start]


def _claim(port):
    """Whether this call now holds the claim on `port`."""
    path = os.path.join(CLAIMS, str(port))
    try:
        os.mkdir(path)
        return True
    except FileExistsError:
        try:
            if time.time() - os.stat(path).st_mtime < CLAIM_SECONDS:
                return False
            os.utime(path)
            return True
        except OSError:
            return False


def _bindable(port, host):
    s = socket.socket()
    try:
        s.bind((host, port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def free_port(host="127.0.0.1"):
    if not os.path.isdir(CLAIMS):
        try:
            os.mkdir(CLAIMS)
        except FileExistsError:
            pass
        try:
            os.chmod(CLAIMS, 0o1777)  # root's runs and a contributor's alike
        except OSError:
            pass
    for port in _candidates():
        if _claim(port) and _bindable(port, host):
            return port
    raise RuntimeError("no free port below the ephemeral range")


if __name__ == "__main__":
    print(free_port())
