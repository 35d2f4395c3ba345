#!/usr/bin/env bash
# Benchmarks/connection-counts.sh — POST /action at several numbers of keep-alive connections, to
# see a cliff at one of them (a full batch of 128 ready connections stalled libmicrohttpd's loop
# at 256: BENCHMARKS.md, "A full batch served at once").
#
#   Benchmarks/connection-counts.sh BIN [BIN...]     e.g. two release builds, before and after
#
# Each round starts each binary in turn (--store memory, access log off, one libmicrohttpd
# thread), makes 64 `counter` sessions, then runs wrk (-t1, Benchmarks/load/action.lua,
# reactord-fresh) for DURATION seconds at each connection count. One line per binary, round and count:
# actions/s, wrk's p50 and p99. Knobs: CONNS="64 256" ROUNDS=3 DURATION=4 STORE=memory.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
CONNS=${CONNS:-64 256}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-4}
command -v wrk >/dev/null || { echo "connection-counts.sh: wrk missing (apt-get install wrk)" >&2; exit 1; }
free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1]);s.close()'; }
WORK=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$WORK"' EXIT

for round in $(seq "$ROUNDS"); do
    for BIN in "$@"; do
        port=$(free_port)
        "$BIN" --port "$port" --host 127.0.0.1 --admin-token bench --threads 1 --log-level warning \
            --access-log off --connections-per-ip 0 --session-create-rate 0 --store "${STORE:-memory}" \
            >/dev/null 2>"$WORK/server.err" &
        pid=$!
        for _ in $(seq 100); do curl -s -o /dev/null "localhost:$port/healthz" && break; sleep 0.1; done
        "$HERE/load/sseload" sessions -p "$port" -c 64 -k 4 --out "$WORK/sessions.txt" -q >/dev/null
        for conns in $CONNS; do
            wrk -t1 -c"$conns" -d"${DURATION}s" --latency --timeout 30s -s "$HERE/load/action.lua" \
                "http://127.0.0.1:$port" -- reactord-fresh "$WORK/sessions.txt" > "$WORK/wrk.out"
            awk -v bin="$BIN" -v round="$round" -v conns="$conns" '
                / 50%/ {p50 = $2} / 99%/ {p99 = $2} /Requests\/sec/ {rate = $2}
                END {printf "round=%s connections=%s bin=%s actions_per_s=%s p50=%s p99=%s\n", round, conns, bin, rate, p50, p99}' \
                "$WORK/wrk.out"
        done
        kill "$pid"; wait "$pid" 2>/dev/null || true
    done
done
