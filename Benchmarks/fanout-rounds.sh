#!/usr/bin/env bash
# Benchmarks/fanout-rounds.sh — fan-out rounds back to back on ONE server (issue 14).
#
#   Benchmarks/fanout-rounds.sh              3 rounds x 5,000 subscribers x 200 pulses, reactord
#                                            defaults (heartbeat 15 s, connection limit 10,000),
#                                            then the same rounds on one nginx+nchan
#   Benchmarks/fanout-rounds.sh --check      small and paced (what scripts/test runs, any build):
#                                            exit 1 if a round stalls (max latency >= MAX_MS) or
#                                            loses an event, a publish or a subscriber
#
# Each round: a new session (nchan: a new channel), SUBS subscribers on its event stream, MESSAGES
# `alert` actions as fast as they are answered, every subscriber waits for every pulse, then the
# load client exits and all SUBS connections close at once (FIN; DISCONNECT=rst for RST). The next
# round starts at once on the same server: whatever the server still does about the dead
# connections of the last round happens during it. One line per round:
#   round=N server=reactord deliveries_per_s=... p50_ms=... p99_ms=... max_ms=... lost=... open=...
#   pub_max_ms: the slowest POST /action (a stall shows here first: the publisher's connection
#               waiting in the listen backlog);
#   released_ms (reactord): after the round's client exited, how long until reactord_subscribers
#               was back to its value before the round (RELEASE_WAIT_MS=1000 at most, then ">1000")
#
# Knobs (environment): ROUNDS=3 SUBS=5000 MESSAGES=200 RATE=0 (actions/s, 0 = as fast as answered)
#   PUB_CONNS=1 DURATION=120 (cap on a round's publishing, s) DRAIN=30 MAX_MS=1000
#   --check defaults: SUBS=300 MESSAGES=30 RATE=30 DURATION=8 DRAIN=5 (a round takes ~2 s, at
#   most ~15 s when stalled: the whole check stays well under a minute) and --connection-limit 2 x SUBS, the ratio of
#   reactord's default limit (10,000) to the full run's 5,000 subscribers, so that connections a
#   server has not let go crowd out new ones (503, then the backlog) at this size as at full size. Paced, because
#   it is a stall detector, not a throughput figure: a debug build on a busy machine must pass.
#   REACTORD_BIN=path (else a release build in .build-bench, as bench.sh)  REACTORD_FLAGS="..."
#   SKIP_NCHAN=1   SKIP_REACTORD=1   DISCONNECT=fin|rst   BENCH_OUT=dir (default bench-results/rounds-<stamp>)
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
LOAD=$HERE/load
NCHAN_DIR=$HERE/peers/nchan

CHECK=0
while [ $# -gt 0 ]; do
    case "$1" in
        --check) CHECK=1 ;;
        -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
        *) echo "fanout-rounds.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
if [ "$CHECK" = 1 ]; then
    : "${SUBS:=300}" "${MESSAGES:=30}" "${RATE:=30}" "${DURATION:=8}" "${DRAIN:=5}"
    REACTORD_FLAGS="--connection-limit $((2 * SUBS)) ${REACTORD_FLAGS:-}"
fi
ROUNDS=${ROUNDS:-3}
SUBS=${SUBS:-5000}
MESSAGES=${MESSAGES:-200}
RATE=${RATE:-0}
DURATION=${DURATION:-120}   # cap on a round's publishing (sseload --duration)
PUB_CONNS=${PUB_CONNS:-1}
DRAIN=${DRAIN:-30}
MAX_MS=${MAX_MS:-1000}
DISCONNECT=${DISCONNECT:-fin}
REACTORD_FLAGS=${REACTORD_FLAGS:-}
[ "$CHECK" = 1 ] && : "${SKIP_NCHAN:=1}"
SKIP_NCHAN=${SKIP_NCHAN:-0}
SKIP_REACTORD=${SKIP_REACTORD:-0}

STAMP=$(date -u +%Y%m%dT%H%M%SZ)
OUT=${BENCH_OUT:-$ROOT/bench-results/rounds-$STAMP}
mkdir -p "$OUT"
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
log() { echo "# $*" >&2; }

if [ "$SKIP_REACTORD" != 1 ] && [ -z "${REACTORD_BIN:-}" ]; then
    log "building reactord (release, .build-bench)"
    (cd "$ROOT" && swift build -c release --product reactord --scratch-path .build-bench) >"$OUT/build.log" 2>&1 || {
        tail -30 "$OUT/build.log" >&2; echo "fanout-rounds.sh: build failed" >&2; exit 1; }
    REACTORD_BIN=$(cd "$ROOT" && swift build -c release --product reactord --scratch-path .build-bench --show-bin-path)/reactord
fi
make -s -C "$LOAD" sseload >&2
SSELOAD=$LOAD/sseload

free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1]);s.close()'; }
field() { local v; v=$(echo "$2" | tr ' ' '\n' | awk -F= -v k="$1" '$1 == k { print $2; exit }'); echo "${v:-n/a}"; }
ms() { awk -v u="$1" 'BEGIN { if (u == "n/a" || u == "") print "n/a"; else printf "%.1f", u / 1000 }'; }
wait_http() { local i=0; while [ $i -lt 150 ]; do curl -s -o /dev/null --max-time 1 "$1" && return 0; sleep 0.1; i=$((i + 1)); done; return 1; }
now_ms() { date +%s%3N; }

RD_PID=""; NC_PREFIX=""; NC_PID=""
cleanup() {
    if [ -n "$RD_PID" ]; then
        kill -TERM "$RD_PID" 2>/dev/null || true
        local i=0; while kill -0 "$RD_PID" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
        kill -KILL "$RD_PID" 2>/dev/null || true; wait "$RD_PID" 2>/dev/null || true; RD_PID=""
    fi
    if [ -n "$NC_PREFIX" ]; then "$NCHAN_DIR/stop-nchan.sh" "$NC_PREFIX" || true; rm -rf "$NC_PREFIX"; NC_PREFIX=""; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

subscribers_gauge() {   # reactord_subscribers from /metrics, or -1
    { curl -s --max-time 1 "http://127.0.0.1:$1/metrics" || true; } | awk '/^reactord_subscribers / { printf "%d", $2; f=1 } END { if (!f) print -1 }'
}

FAILED=0
declare -A DPS P99
run_rounds() {   # run_rounds reactord|nchan PORT
    local server=$1 port=$2 r line s path extra before=0 released
    for r in $(seq 1 "$ROUNDS"); do
        if [ "$server" = reactord ]; then
            s=$(curl -s --max-time 5 -X POST "http://127.0.0.1:$port/sessions" -d '{"reactor":"counter"}' |
                sed -n 's/.*"session":"\([^"]*\)".*/\1/p') || true
            [ -n "$s" ] || { echo "round=$r server=$server error=no_session"; FAILED=1; return; }
            path="/sessions/$s/events"; extra=(-f reactord --session "$s")
            before=$(subscribers_gauge "$port")
        else
            path="/sub/round$r"; extra=(-f nchan --pub-path "/pub/round$r")
        fi
        line=$("$SSELOAD" pubsub -p "$port" -n "$SUBS" --path "$path" "${extra[@]}" -r "$RATE" -k "$PUB_CONNS" \
                 -c "$MESSAGES" -d "$DURATION" --drain "$DRAIN" ${DISCONNECT_FLAG:-} -q 2>>"$OUT/sseload.err" | grep '^result' | tail -1) || true
        echo "$server round=$r $line" >> "$OUT/raw.txt"
        released=n/a
        if [ "$server" = reactord ]; then
            # How long until the server has let this round's dead streams go, waited for at most
            # RELEASE_WAIT_MS (1 s): far below the 15 s heartbeat, so the wait cannot hide a
            # server that only finds them by writing.
            local t0 g wait_ms=${RELEASE_WAIT_MS:-1000}
            t0=$(now_ms); released=">$wait_ms"
            while [ $(( $(now_ms) - t0 )) -lt "$wait_ms" ]; do
                g=$(subscribers_gauge "$port")
                if [ "$g" -ge 0 ] && [ "$g" -le "$before" ]; then released=$(( $(now_ms) - t0 )); break; fi
                sleep 0.02
            done
        fi
        local max_us lost open failed pub_ok
        max_us=$(field max_us "$line"); lost=$(field lost "$line"); open=$(field open_end "$line")
        failed=$(field failed "$line"); pub_ok=$(field pub_ok "$line")
        DPS[$server.$r]=$(field deliveries_per_s "$line")
        echo "round=$r server=$server deliveries_per_s=$(field deliveries_per_s "$line") p50_ms=$(ms "$(field p50_us "$line")")" \
             "p99_ms=$(ms "$(field p99_us "$line")") max_ms=$(ms "$max_us") lost=$lost dup=$(field dup "$line")" \
             "published=$pub_ok/$MESSAGES open=$open/$SUBS pub_max_ms=$(ms "$(field pub_max_us "$line")") released_ms=$released" | tee -a "$OUT/rounds.txt"
        if [ "$CHECK" = 1 ]; then
            if [ "$max_us" = n/a ] || [ "$max_us" -ge $((MAX_MS * 1000)) ]; then
                echo "FAIL round $r: max latency $(ms "$max_us") ms >= $MAX_MS ms (a stall)"; FAILED=1; fi
            if [ "$lost" != 0 ] || [ "$open" != "$SUBS" ] || [ "$pub_ok" != "$MESSAGES" ]; then
                echo "FAIL round $r: lost=$lost open=$open/$SUBS published=$pub_ok/$MESSAGES"; FAILED=1; fi
        fi
    done
}

echo "# fanout-rounds $STAMP: $ROUNDS rounds x $SUBS subscribers x $MESSAGES messages (rate ${RATE}/s, 0 = as answered) on one server; reactord flags: ${REACTORD_FLAGS:-none}; disconnect=$DISCONNECT; $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg); worktree commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?'); binary ${REACTORD_BIN:-none}" | tee "$OUT/rounds.txt"
[ "$DISCONNECT" = rst ] && DISCONNECT_FLAG=--rst-at-exit

if [ "$SKIP_REACTORD" != 1 ]; then
    port=$(free_port)
    # reactord's defaults but for the port, the log level and where its (default, durable) store
    # file lives (REACTORD_FLAGS adds to them).
    ( ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
      exec "$REACTORD_BIN" --port "$port" --host 127.0.0.1 --log-level warning --store "sqlite:$OUT/reactord.sqlite" \
          --connections-per-ip 0 \
          $REACTORD_FLAGS ) >"$OUT/reactord.log" 2>&1 &
    RD_PID=$!
    wait_http "http://127.0.0.1:$port/healthz" || { echo "fanout-rounds.sh: reactord did not start" >&2; tail "$OUT/reactord.log" >&2; exit 1; }
    run_rounds reactord "$port"
    cleanup
fi
if [ "$SKIP_NCHAN" != 1 ]; then
    port=$(free_port)
    info=$("$NCHAN_DIR/start-nchan.sh" "$port" 1)
    NC_PREFIX=$(echo "$info" | sed -n 's/.*prefix=\([^ ]*\).*/\1/p'); NC_PID=$(echo "$info" | sed -n 's/.*pid=\([0-9]*\).*/\1/p')
    run_rounds nchan "$port"
    cleanup
    for r in $(seq 1 "$ROUNDS"); do
        echo "round=$r deliveries_per_s reactord=${DPS[reactord.$r]:-n/a} nchan=${DPS[nchan.$r]:-n/a} ratio=$(awk -v a="${DPS[reactord.$r]:-}" -v b="${DPS[nchan.$r]:-}" 'BEGIN { if (a == "" || b == "" || a == "n/a" || b == "n/a" || b + 0 == 0) print "n/a"; else printf "%.2f", a / b }')" | tee -a "$OUT/rounds.txt"
    done
fi
log "results: $OUT"
exit $FAILED
