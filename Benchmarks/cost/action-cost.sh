#!/usr/bin/env bash
# Benchmarks/cost/action-cost.sh — what one POST /action costs reactord in user space, measured
# without timing anything, so two builds compare exactly whatever else the machine is doing:
#   instructions  callgrind's count, collected only while N actions run (libmicrohttpd, libc and
#                 the Swift runtime included; the kernel not). valgrind counts each byte of a
#                 `rep stosb` as an instruction, so libmicrohttpd's per-request memset of its
#                 8 KiB pool shows as ~12k of them.
#   allocations   malloc/calloc/realloc calls per action (an LD_PRELOAD counter, malloc_count.c)
#
#   Benchmarks/cost/action-cost.sh BIN [BIN...]      e.g. two release builds, before and after
#
# Each binary runs alone: --threads 1, memory store, no access log, 64 counter sessions, then
# N=3000 (knob N) `increase` actions on one keep-alive connection after a warm-up of 200.
# ACCESS_LOG=on LOG_LEVEL=info counts what the access log adds (its lines go to a file).
# ROUTE=session sends the actions to POST /sessions/{id}/actions (the client's route) instead.
# PROFILE_DIR=dir keeps each binary's callgrind profile there (for callgrind_annotate --inclusive=yes).
# STORE=<--store value> runs on another store than memory (postgres-action-cost.sh passes a DSN).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
N=${N:-3000}
command -v valgrind >/dev/null || { echo "action-cost.sh: valgrind missing (apt-get install valgrind)" >&2; exit 1; }
make -s -C "$HERE/../load" sseload
WORK=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$WORK"' EXIT
gcc -O2 -shared -fPIC -o "$WORK/malloc_count.so" "$HERE/malloc_count.c"
free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1]);s.close()'; }

start() {   # start PORT [wrapper...] — reactord on PORT, waits for /healthz (valgrind is slow to start)
    local port=$1; shift
    "$@" "$BIN" --port "$port" --host 127.0.0.1 --admin-token bench --threads 1 --log-level "${LOG_LEVEL:-warning}" \
        --session-create-rate 0 --connections-per-ip 0 --store "${STORE:-memory}" --access-log "${ACCESS_LOG:-off}" >/dev/null 2>"$WORK/server.err" &
    PID=$!
    for _ in $(seq 300); do curl -s -o /dev/null "localhost:$port/healthz" && break; sleep 0.2; done
    "$HERE/../load/sseload" sessions -p "$port" -c 64 -k 4 --out "$WORK/sessions.txt" -q >/dev/null
    python3 "$HERE/actions.py" "$port" 200 "$WORK/sessions.txt"
}

for BIN in "$@"; do
    # valgrind 3.19 cannot read the DWARF 5 that Swift writes: a copy without debug information.
    strip --strip-debug -o "$WORK/reactord" "$BIN"
    port=$(free_port)
    ( BIN="$WORK/reactord"; start "$port" valgrind --tool=callgrind --instr-atstart=no \
        --callgrind-out-file="$WORK/callgrind.%p"
      callgrind_control -i on "$PID" >/dev/null 2>&1
      python3 "$HERE/actions.py" "$port" "$N" "$WORK/sessions.txt"
      callgrind_control -d "$PID" >/dev/null 2>&1
      kill "$PID"; wait "$PID" 2>/dev/null || true )
    instructions=$(cat "$WORK"/callgrind.*.1 | awk '/^summary:/ {sum += $2} END {print sum}')
    if [ -n "${PROFILE_DIR:-}" ]; then cp "$WORK"/callgrind.*.1 "$PROFILE_DIR/$(basename "$BIN").callgrind"; fi
    rm -f "$WORK"/callgrind.*

    port=$(free_port)
    ( start "$port" env LD_PRELOAD="$WORK/malloc_count.so"
      kill -USR2 "$PID"; sleep 0.3
      python3 "$HERE/actions.py" "$port" "$N" "$WORK/sessions.txt"
      kill -USR2 "$PID"; sleep 0.3
      kill "$PID"; wait "$PID" 2>/dev/null || true )
    allocations=$(grep MALLOCS "$WORK/server.err" | tail -2 | tr -dc '0-9 \n=' | awk -F'[ =]+' '
        NR == 1 {a = $2 + $3 + $4} NR == 2 {b = $2 + $3 + $4} END {print b - a}')
    echo "action-cost $BIN instructions_per_action=$((instructions / N)) allocations_per_action=$(python3 -c "print(round($allocations / $N, 2))")"
done
