#!/usr/bin/env bash
# Benchmarks/cost/log-writes.sh — how many write(2) calls on stderr reactord makes for N
# POST /action with the access log on (the default): counted by strace, so two builds compare
# exactly whatever else the machine is doing.
#
#   Benchmarks/cost/log-writes.sh BIN [BIN...]      e.g. two release builds, before and after
#
# Each binary: --threads 1, memory store, text log, one session, N=2000 (knob N) `increase`
# actions one after another on one keep-alive connection, then SIGTERM.
set -euo pipefail
N=${N:-2000}
command -v strace >/dev/null || { echo "log-writes.sh: strace missing (apt-get install strace)" >&2; exit 1; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
for BIN in "$@"; do
    port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1]);s.close()')
    strace -f -qq -e trace=write -e signal=none -o "$WORK/trace" \
        "$BIN" --port "$port" --store memory --admin-token bench --threads 1 2>"$WORK/log" &
    tracer=$!
    for _ in $(seq 300); do curl -s -o /dev/null "localhost:$port/healthz" && break; sleep 0.1; done
    python3 - "$port" "$N" <<'PY'
import json, socket, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
s = socket.create_connection(("127.0.0.1", port))
s.sendall(b"POST /sessions HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n")
head, body = s.recv(65536).split(b"\r\n\r\n", 1)
session = json.loads(body)["session"]
action = json.dumps({"session": session, "action": {"type": "increase"}}).encode()
request = b"POST /action HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n%s" % (len(action), action)
for _ in range(n):
    s.sendall(request)
    answer = b""
    while not (b"\r\n\r\n" in answer and answer.endswith(b"}")):
        answer += s.recv(65536)
PY
    pkill -TERM -P "$tracer" || true   # reactord itself: strace forwards no signal here
    wait "$tracer" || true
    echo "$BIN: $(grep -c 'write(2,' "$WORK/trace") write(2) calls on stderr for $(grep -c 'POST /action' "$WORK/log") access lines"
done
