#!/bin/sh
# stop-nchan.sh PREFIX — stop the nginx started by start-nchan.sh (TERM, bounded wait, then KILL).
set -eu
PREFIX=${1:?usage: stop-nchan.sh PREFIX}
PID=$(cat "$PREFIX/master.pid" 2>/dev/null || true)
[ -n "$PID" ] || { echo "stop-nchan.sh: no pid in $PREFIX" >&2; exit 1; }
kill -TERM "$PID" 2>/dev/null || exit 0   # fast stop: SSE streams would hold a graceful QUIT
i=0
while kill -0 "$PID" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
if kill -0 "$PID" 2>/dev/null; then
    pkill -KILL -P "$PID" 2>/dev/null || true   # its workers, by parent pid
    kill -KILL "$PID" 2>/dev/null || true
fi
exit 0
