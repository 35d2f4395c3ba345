#!/usr/bin/env bash
# Benchmarks/cost/postgres-action-cost.sh — what one POST /action costs a cluster node in user
# space, counted by callgrind (not timed), so two builds compare exactly on a busy machine:
#
#   Benchmarks/cost/postgres-action-cost.sh BIN [BIN...]      e.g. two release builds
#
# A throwaway PostgreSQL (scripts/postgres-test-server, as `postgres` when run as root), one node
# of each binary on it under callgrind, 64 counter sessions, then N=1000 (knob N) `increase`
# actions one after another on one connection: one action per commit, so each action pays its
# commit's whole cost (the node's side of it: the statement's parameters, libpq, the
# notification the node reads back). Prints instructions per action, and the inclusive cost per
# action of the store's commit, its array parameters and the notification's parse.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
N=${N:-1000}
command -v valgrind >/dev/null || { echo "postgres-action-cost.sh: valgrind missing (apt-get install valgrind)" >&2; exit 1; }
make -s -C "$HERE/../load" sseload
WORK=$(mktemp -d)
chmod 755 "$WORK"
free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1]);s.close()'; }
trap 'kill $(jobs -p) 2>/dev/null || true; "$ROOT/scripts/postgres-test-server" stop "$WORK/pg" >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
"$ROOT/scripts/postgres-test-server" start "$WORK/pg" "$(free_port)" >/dev/null
index=0
for BIN in "$@"; do
    index=$((index + 1))
    dsn=$("$ROOT/scripts/postgres-test-server" createdb "$WORK/pg" "cost$index")
    # valgrind 3.19 cannot read the DWARF 5 that Swift writes: a copy without debug information.
    strip --strip-debug -o "$WORK/reactord" "$BIN"
    port=$(free_port)
    valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$WORK/callgrind.%p" "$WORK/reactord" \
        --port "$port" --host 127.0.0.1 --admin-token bench --log-level warning --session-create-rate 0 \
        --connections-per-ip 0 --store "$dsn" >/dev/null 2>"$WORK/server.err" &
    pid=$!
    for _ in $(seq 300); do curl -s -o /dev/null "localhost:$port/healthz" && break; sleep 0.2; done
    "$HERE/../load/sseload" sessions -p "$port" -c 64 -k 4 --out "$WORK/sessions.txt" -q >/dev/null
    python3 "$HERE/actions.py" "$port" 200 "$WORK/sessions.txt"
    callgrind_control -i on "$pid" >/dev/null 2>&1
    python3 "$HERE/actions.py" "$port" "$N" "$WORK/sessions.txt"
    callgrind_control -d "$pid" >/dev/null 2>&1
    kill "$pid"; wait "$pid" 2>/dev/null || true
    profile=$(ls "$WORK"/callgrind.*.1)
    instructions=$(awk '/^summary:/ {sum += $2} END {print sum}' "$profile")
    echo "postgres-action-cost $BIN instructions_per_action=$((instructions / N))"
    callgrind_annotate --inclusive=yes "$profile" 2>/dev/null | awk -v n="$N" '
        /PostgresStore.*commit_13historyLength|PostgresB0C6commit_13historyLength/ && !c++ { name = "  the store commit" }
        /PostgresB0C5arrayySS/ && !a++ { name = "  its array parameters" }
        /PostgresListenerC5parse/ && !p++ { name = "  the notification parse" }
        name != "" { gsub(",", "", $1); printf "%s: %d\n", name, $1 / n; name = "" }'
    if [ -n "${PROFILE_DIR:-}" ]; then cp "$profile" "$PROFILE_DIR/$(basename "$BIN").callgrind"; fi
    rm -f "$WORK"/callgrind.*
done
