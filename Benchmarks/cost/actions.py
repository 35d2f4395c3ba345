"""POST /action {"type":"increase"} N times on one keep-alive connection, over the sessions in
SESSIONS_FILE in turn, each answer read whole (Benchmarks/cost/action-cost.sh).
Usage: actions.py PORT N SESSIONS_FILE
ROUTE=session sends each to POST /sessions/{id}/actions instead, the action alone as the body."""
import os
import socket
import sys

port, count, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
ids = [line.strip() for line in open(path) if line.strip()]
connection = socket.create_connection(("127.0.0.1", port))
answers = connection.makefile("rb")
for i in range(count):
    session = ids[i % len(ids)]
    if os.environ.get("ROUTE") == "session":
        target, body = "/sessions/%s/actions" % session, b'{"type":"increase"}'
    else:
        target, body = "/action", ('{"session":"%s","action":{"type":"increase"}}' % session).encode()
    connection.sendall(b"POST %s HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
                       b"Content-Length: %d\r\n\r\n" % (target.encode(), len(body)) + body)
    status = answers.readline()
    if not status.startswith(b"HTTP/1.1 200"):
        sys.exit("actions.py: answer %d was %r" % (i, status))
    length = 0
    while True:
        line = answers.readline()
        if line in (b"\r\n", b""):
            break
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    answers.read(length)
