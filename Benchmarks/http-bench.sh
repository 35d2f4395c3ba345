#!/usr/bin/env bash
# MicroHTTP vs the same route in C on libmicrohttpd, driven by wrk in one run.
# Builds both (swift release; gcc -O2), then alternates ROUNDS measurements of each:
#   wrk -t2 -c64 -d$DURATION http://127.0.0.1:PORT/hello   (keep-alive)
# and prints requests/s per round, the means, and the ratio MicroHTTP / C (target >= 0.9).
# Rounds alternate which server goes first, so neither always meets a warmer or cooler machine.
# Environment: DURATION (10s), ROUNDS (2), THREADS (server threads, 1), WARMUP (2s),
# PIN=1: server on CPU 0, wrk on CPU 1 (taskset) — steadier on a 2-core machine, where
# unpinned runs measure the scheduler's placement as much as the servers.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-10s}
ROUNDS=${ROUNDS:-2}
THREADS=${THREADS:-1}
WARMUP=${WARMUP:-2s}
PIN=${PIN:-0}
SERVER_CPU=(); CLIENT_CPU=()
if [ "$PIN" = 1 ]; then SERVER_CPU=(taskset -c 0); CLIENT_CPU=(taskset -c 1); fi
SCRATCH=.build-http-release
SWIFT_PORT=18181
C_PORT=18182

command -v wrk >/dev/null || { echo "wrk is missing (apt-get install wrk)" >&2; exit 1; }
swift build -c release --scratch-path "$SCRATCH" --product MicroHTTPBenchmark >&2
mkdir -p "$SCRATCH"
# shellcheck disable=SC2046
gcc -O2 -o "$SCRATCH/reference" Benchmarks/reference/reference.c $(pkg-config --cflags --libs libmicrohttpd)
SWIFT_BIN="$(swift build -c release --scratch-path "$SCRATCH" --show-bin-path)/MicroHTTPBenchmark"

server_pid=
cleanup() { [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null; server_pid=; }
trap cleanup EXIT

# measure NAME BINARY PORT -> prints requests/s
measure() {
  local binary=$2 port=$3
  "${SERVER_CPU[@]}" "$binary" "$port" "$THREADS" >/dev/null &
  server_pid=$!
  for _ in $(seq 50); do curl -sf "http://127.0.0.1:$port/hello" >/dev/null 2>&1 && break; sleep 0.1; done
  "${CLIENT_CPU[@]}" wrk -t2 -c64 -d"$WARMUP" "http://127.0.0.1:$port/hello" >/dev/null
  local out
  out=$("${CLIENT_CPU[@]}" wrk -t2 -c64 -d"$DURATION" "http://127.0.0.1:$port/hello")
  echo "$out" | grep -qE "Non-2xx|Socket errors" && echo "$out" >&2
  cleanup
  echo "$out" | awk '/Requests\/sec/ {print $2}'
}

echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)  host: $(nproc) cores  wrk -t2 -c64 -d$DURATION  server threads: $THREADS  pinned: $PIN"
swift_total=0; c_total=0
for round in $(seq "$ROUNDS"); do
  if (( round % 2 )); then
    c=$(measure C "$SCRATCH/reference" "$C_PORT")
    s=$(measure MicroHTTP "$SWIFT_BIN" "$SWIFT_PORT")
  else
    s=$(measure MicroHTTP "$SWIFT_BIN" "$SWIFT_PORT")
    c=$(measure C "$SCRATCH/reference" "$C_PORT")
  fi
  printf 'round %d: C %10.0f req/s   MicroHTTP %10.0f req/s\n' "$round" "$c" "$s"
  c_total=$(awk -v a="$c_total" -v b="$c" 'BEGIN {print a + b}')
  swift_total=$(awk -v a="$swift_total" -v b="$s" 'BEGIN {print a + b}')
done
awk -v c="$c_total" -v s="$swift_total" -v n="$ROUNDS" 'BEGIN {
  printf "mean:    C %10.0f req/s   MicroHTTP %10.0f req/s   ratio %.3f (target >= 0.9)\n", c / n, s / n, s / c }'
