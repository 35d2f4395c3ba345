#!/usr/bin/env bash
# MicroHTTP vs the same route in C on libmicrohttpd, driven by wrk in one run.
# Builds both (swift release; gcc -O2), then alternates ROUNDS measurements of each:
#   wrk -t2 -c64 -d$DURATION http://127.0.0.1:PORT/hello   (keep-alive)
# and prints requests/s per round, the means, and the ratio MicroHTTP / C (target >= 0.9).
# It also prints the server's own CPU time per request (utime+stime from /proc/PID/stat over
# the measured run): on a shared 2-core machine requests/s swing with whatever else runs,
# while CPU per request barely does, so its ratio (C / MicroHTTP) is the steadier figure.
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

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
TICK=$(getconf CLK_TCK)

# measure NAME BINARY PORT -> prints "requests/s  server-CPU-microseconds-per-request"
measure() {
  local binary=$2 port=$3
  "${SERVER_CPU[@]}" "$binary" "$port" "$THREADS" >/dev/null &
  server_pid=$!
  for _ in $(seq 50); do curl -sf "http://127.0.0.1:$port/hello" >/dev/null 2>&1 && break; sleep 0.1; done
  "${CLIENT_CPU[@]}" wrk -t2 -c64 -d"$WARMUP" "http://127.0.0.1:$port/hello" >/dev/null
  local out before after
  before=$(cpu_ticks "$server_pid")
  out=$("${CLIENT_CPU[@]}" wrk -t2 -c64 -d"$DURATION" "http://127.0.0.1:$port/hello")
  after=$(cpu_ticks "$server_pid")
  echo "$out" | grep -qE "Non-2xx|Socket errors" && echo "$out" >&2
  cleanup
  local rps requests
  rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
  requests=$(echo "$out" | awk '/requests in/ {print $1}')
  awk -v r="$rps" -v n="$requests" -v t=$((after - before)) -v hz="$TICK" \
    'BEGIN {printf "%s %.3f\n", r, t / hz * 1e6 / n}'
}

echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)  host: $(nproc) cores  wrk -t2 -c64 -d$DURATION  server threads: $THREADS  pinned: $PIN"
swift_total=0; c_total=0; swift_cpu=0; c_cpu=0
for round in $(seq "$ROUNDS"); do
  if (( round % 2 )); then
    read -r c ccpu < <(measure C "$SCRATCH/reference" "$C_PORT")
    read -r s scpu < <(measure MicroHTTP "$SWIFT_BIN" "$SWIFT_PORT")
  else
    read -r s scpu < <(measure MicroHTTP "$SWIFT_BIN" "$SWIFT_PORT")
    read -r c ccpu < <(measure C "$SCRATCH/reference" "$C_PORT")
  fi
  printf 'round %d: C %9.0f req/s %6.2f us CPU/req   MicroHTTP %9.0f req/s %6.2f us CPU/req\n' \
    "$round" "$c" "$ccpu" "$s" "$scpu"
  c_total=$(awk -v a="$c_total" -v b="$c" 'BEGIN {print a + b}')
  swift_total=$(awk -v a="$swift_total" -v b="$s" 'BEGIN {print a + b}')
  c_cpu=$(awk -v a="$c_cpu" -v b="$ccpu" 'BEGIN {print a + b}')
  swift_cpu=$(awk -v a="$swift_cpu" -v b="$scpu" 'BEGIN {print a + b}')
done
awk -v c="$c_total" -v s="$swift_total" -v cc="$c_cpu" -v sc="$swift_cpu" -v n="$ROUNDS" 'BEGIN {
  printf "mean:    C %9.0f req/s %6.2f us CPU/req   MicroHTTP %9.0f req/s %6.2f us CPU/req\n", c / n, cc / n, s / n, sc / n
  printf "ratio MicroHTTP/C: throughput %.3f, CPU efficiency (C us/req / MicroHTTP us/req) %.3f  (target >= 0.9)\n", s / c, cc / sc }'
