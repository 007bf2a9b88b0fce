"""Prints the first TCP port from argv[1] on that can be bound on 127.0.0.1.
Not merely one nobody listens on: a closed connection's TIME_WAIT (ports
in the ephemeral range are also clients' ports) keeps a port from a server
that binds it."""
import socket
import sys

port = int(sys.argv[1])
while True:
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
        print(port)
        break
    except OSError:
        port += 1
    finally:
        s.close()
