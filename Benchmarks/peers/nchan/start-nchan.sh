#!/bin/sh
# start-nchan.sh PORT [WORKERS] — run nginx+nchan in the foreground of a background job,
# on 127.0.0.1:PORT, with its own prefix (config, pid, logs, temp) under a fresh temp dir.
# NCHAN_REDIS_URL=redis://127.0.0.1:PORT: channels live in that Redis (nchan's cluster mode),
# shared by every nginx+nchan started with the same URL.
# Prints "prefix=DIR pid=PID port=PORT" and returns once /healthz answers.
# Stop it with: stop-nchan.sh DIR   (or kill the printed pid).
set -eu
PORT=${1:?usage: start-nchan.sh PORT [WORKERS]}
WORKERS=${2:-${NCHAN_WORKERS:-1}}
PING=${NCHAN_PING:-15}   # seconds between keep-alive comments, like reactord --heartbeat
REDIS=""
if [ -n "${NCHAN_REDIS_URL:-}" ]; then
    REDIS="    nchan_redis_url \"$NCHAN_REDIS_URL\"; nchan_use_redis on;"
fi
HERE=$(cd "$(dirname "$0")" && pwd)
NGINX=${NGINX:-/usr/sbin/nginx}
[ -x "$NGINX" ] || { echo "start-nchan.sh: $NGINX missing: apt-get install nginx libnginx-mod-nchan" >&2; exit 1; }
[ -f /usr/lib/nginx/modules/ngx_nchan_module.so ] || { echo "start-nchan.sh: libnginx-mod-nchan missing" >&2; exit 1; }
PREFIX=$(mktemp -d "${TMPDIR:-/tmp}/nchan-bench.XXXXXX")
mkdir -p "$PREFIX/logs" "$PREFIX/tmp"
sed -e "s|@PREFIX@|$PREFIX|g" -e "s|@PORT@|$PORT|g" -e "s|@WORKERS@|$WORKERS|g" -e "s|@PING@|$PING|g" \
    -e "s|@REDIS@|$REDIS|g" \
    "$HERE/nginx.conf.in" > "$PREFIX/nginx.conf"
"$NGINX" -p "$PREFIX" -c "$PREFIX/nginx.conf" -t -q -e "$PREFIX/logs/error.log" 2>"$PREFIX/logs/configtest.log" || {
    cat "$PREFIX/logs/configtest.log" >&2; exit 1; }
( ulimit -n 20000 2>/dev/null || true
  exec "$NGINX" -p "$PREFIX" -c "$PREFIX/nginx.conf" -e "$PREFIX/logs/error.log" ) \
    >"$PREFIX/logs/stdout.log" 2>&1 &
PID=$!
echo "$PID" > "$PREFIX/master.pid"
i=0
while [ $i -lt 100 ]; do            # at most 10 s
    if curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$PORT/healthz"; then
        echo "prefix=$PREFIX pid=$PID port=$PORT workers=$WORKERS"
        exit 0
    fi
    kill -0 "$PID" 2>/dev/null || break
    sleep 0.1; i=$((i + 1))
done
echo "start-nchan.sh: nginx did not come up on port $PORT; see $PREFIX/logs" >&2
cat "$PREFIX/logs/error.log" >&2 2>/dev/null || true
kill "$PID" 2>/dev/null || true
exit 1
