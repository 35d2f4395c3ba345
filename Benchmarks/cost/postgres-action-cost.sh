#!/usr/bin/env bash
# Benchmarks/cost/postgres-action-cost.sh — what one POST /action costs a cluster node in user
# space, counted by callgrind (not timed), so two builds compare exactly on a busy machine:
#
#   Benchmarks/cost/postgres-action-cost.sh BIN [BIN...]      e.g. two release builds
#
# action-cost.sh's count on a throwaway PostgreSQL (scripts/postgres-test-server, as `postgres`
# when run as root), a database for each binary. Its actions go one after another on one
# connection, so each commit carries one action and the action pays the node's whole share of it
# (the statement's parameters, libpq, the notification the node reads back). Prints
# action-cost.sh's line, then the inclusive cost per action of the store's commit, its array
# parameters and the notification's parse. N=1000 actions (knob N).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
export N=${N:-1000}
WORK=$(mktemp -d)
chmod 755 "$WORK"
trap '"$ROOT/scripts/postgres-test-server" stop "$WORK/pg" >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1]);s.close()')
"$ROOT/scripts/postgres-test-server" start "$WORK/pg" "$port" >/dev/null
mkdir "$WORK/profiles"
index=0
for BIN in "$@"; do
    index=$((index + 1))
    STORE=$("$ROOT/scripts/postgres-test-server" createdb "$WORK/pg" "cost$index") PROFILE_DIR="$WORK/profiles" \
        "$HERE/action-cost.sh" "$BIN"
    callgrind_annotate --inclusive=yes "$WORK/profiles/$(basename "$BIN").callgrind" 2>/dev/null | awk -v n="$N" '
        /PostgresB0C6commit_13historyLength/ && !c++ { name = "  the store commit" }
        /PostgresB0C5arrayySS/ && !a++ { name = "  its array parameters" }
        /PostgresListenerC5parse/ && !p++ { name = "  the notification parse" }
        name != "" { gsub(",", "", $1); printf "%s: %d\n", name, $1 / n; name = "" }'
done
