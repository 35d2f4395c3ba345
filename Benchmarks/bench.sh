#!/usr/bin/env bash
# Benchmarks/bench.sh — reactord's benchmark suite (issue 5), one command for every scenario.
#
#   Benchmarks/bench.sh                 full sizes (several minutes; scale holds 60 s)
#   Benchmarks/bench.sh --smoke         small sizes, short runs: proves the pipeline end to end
#   Benchmarks/bench.sh --only fanout,latency
#
# Builds reactord (release, --scratch-path .build-bench) and Benchmarks/load/sseload, starts a
# fresh reactord and a fresh nginx+nchan (Benchmarks/peers/nchan) on loopback ports for each
# scenario, and prints one line per figure with the peers beside it, e.g.
#   fanout deliveries/s reactord=... nchan=... ratio=...
# Raw load-client lines and server logs go to bench-results/<UTC stamp>/ (git-ignored).
#
# Every size is an environment variable (defaults = the issue's sizes; --smoke shrinks them):
#   THREADS=1            reactord --threads and nginx worker_processes (one event loop each)
#   WRK_THREADS=1 WRK_SECONDS=10 WRK_CONNS=64 WRK_WARMUP=2 THROUGHPUT_SESSIONS=64
#   FANOUT_SUBS=5000 FANOUT_SECONDS=5 FANOUT_PUB_CONNS=1
#   FANOUT_BATCH_US=0    sseload --batch-us in fan-out, if the client's CPU nears one core
#   FANOUT_QUERY=""      e.g. "?fields=count": reactord then sends the pulse only, one event per
#                        action like nchan (ids then skip, so id_gaps is no loss signal)
#   LAT_SUBS=1000 LAT_RATE=100 LAT_SECONDS=10 LAT_PUB_CONNS=8   (open loop: enough connections
#                        that a slow answer does not lower the offered rate)
#   BCAST_SESSIONS=10000
#   MEM_SUBS=10000 MEM_SESSIONS=100000 MEM_HOLD=3
#   SCALE_SUBS=9000 SCALE_SECONDS=60 HEARTBEAT=15
#   SCENARIOS="throughput fanout latency broadcast memory scale"
#   REACTORD_BIN=/path/to/reactord    skip the swift build
#   REACTORD_STORE=memory REACTORD_ACCESS_LOG=off   reactord's store and access log: like nchan,
#                        no persistence and no access log by default (the durable store has
#                        its own benchmark, Benchmarks/store_bench.py); set them to measure others
#   REACTORD_LOG_LEVEL=warning   access lines are at info: REACTORD_LOG_LEVEL=info with
#                        REACTORD_ACCESS_LOG=on measures what the access log costs (to a file)
#   SKIP_REACTORD=1 / SKIP_NCHAN=1    run one side only (figures of the other show n/a)
#   REFERENCE_CMD="path args"         the C libmicrohttpd reference server (else built from
#                                     Benchmarks/reference/reference.c when it exists)
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
LOAD=$HERE/load
NCHAN_DIR=$HERE/peers/nchan

SMOKE=${SMOKE:-0}
while [ $# -gt 0 ]; do
    case "$1" in
        --smoke) SMOKE=1 ;;
        --only) SCENARIOS=$(echo "${2:?--only needs a list}" | tr , ' '); shift ;;
        --scale-seconds) SCALE_SECONDS=${2:?}; shift ;;
        -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
        *) echo "bench.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done

if [ "$SMOKE" = 1 ]; then
    : "${WRK_SECONDS:=3}" "${FANOUT_SUBS:=200}" "${FANOUT_SECONDS:=2}" "${LAT_SUBS:=100}" \
      "${LAT_SECONDS:=3}" "${BCAST_SESSIONS:=300}" "${MEM_SUBS:=500}" "${MEM_SESSIONS:=2000}" \
      "${MEM_HOLD:=1}" "${SCALE_SUBS:=300}" "${SCALE_SECONDS:=5}" "${HEARTBEAT:=2}"
fi
THREADS=${THREADS:-1}
WRK_THREADS=${WRK_THREADS:-1}
WRK_SECONDS=${WRK_SECONDS:-10}
WRK_CONNS=${WRK_CONNS:-64}
WRK_WARMUP=${WRK_WARMUP:-2}      # seconds of unmeasured wrk before each measured run (0: none)
THROUGHPUT_SESSIONS=${THROUGHPUT_SESSIONS:-64}
FANOUT_SUBS=${FANOUT_SUBS:-5000}
FANOUT_SECONDS=${FANOUT_SECONDS:-5}
FANOUT_PUB_CONNS=${FANOUT_PUB_CONNS:-1}
FANOUT_QUERY=${FANOUT_QUERY:-}
FANOUT_BATCH_US=${FANOUT_BATCH_US:-0}   # sseload --batch-us for fan-out (both servers alike)
LAT_SUBS=${LAT_SUBS:-1000}
LAT_RATE=${LAT_RATE:-100}
LAT_SECONDS=${LAT_SECONDS:-10}
LAT_PUB_CONNS=${LAT_PUB_CONNS:-8}
BCAST_SESSIONS=${BCAST_SESSIONS:-10000}
MEM_SUBS=${MEM_SUBS:-10000}
MEM_SESSIONS=${MEM_SESSIONS:-100000}
MEM_HOLD=${MEM_HOLD:-3}
SCALE_SUBS=${SCALE_SUBS:-9000}
SCALE_SECONDS=${SCALE_SECONDS:-60}
HEARTBEAT=${HEARTBEAT:-15}
SCENARIOS=${SCENARIOS:-throughput fanout latency broadcast memory scale}
TOKEN=${BENCH_ADMIN_TOKEN:-bench-admin-token}

STAMP=$(date -u +%Y%m%dT%H%M%SZ)
OUT=${BENCH_OUT:-$ROOT/bench-results/$STAMP}
mkdir -p "$OUT"
RAW=$OUT/raw.txt
FIGS=$OUT/figures.txt
: > "$RAW"; : > "$FIGS"

ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

log() { echo "# $*" >&2; }

# ------------------------------------------------------------------ build
build() {
    if [ "${SKIP_REACTORD:-0}" = 1 ]; then
        log "SKIP_REACTORD=1: peers only"
    elif [ -z "${REACTORD_BIN:-}" ]; then
        log "building reactord (release, .build-bench)"
        (cd "$ROOT" && swift build -c release --product reactord --scratch-path .build-bench) >"$OUT/build.log" 2>&1 || {
            tail -30 "$OUT/build.log" >&2; echo "bench.sh: reactord build failed (log: $OUT/build.log)" >&2; exit 1; }
        REACTORD_BIN=$(cd "$ROOT" && swift build -c release --product reactord --scratch-path .build-bench --show-bin-path)/reactord
    fi
    [ "${SKIP_REACTORD:-0}" = 1 ] || [ -x "$REACTORD_BIN" ] || { echo "bench.sh: no reactord binary at $REACTORD_BIN" >&2; exit 1; }
    log "building sseload"
    make -s -C "$LOAD" sseload >&2
    SSELOAD=$LOAD/sseload
    command -v wrk >/dev/null || { echo "bench.sh: wrk missing (apt-get install wrk)" >&2; exit 1; }
    [ -x /usr/sbin/nginx ] && [ -f /usr/lib/nginx/modules/ngx_nchan_module.so ] || {
        echo "bench.sh: nchan peer missing (apt-get install nginx libnginx-mod-nchan)" >&2; exit 1; }
}

# ------------------------------------------------------------------ helpers
free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1]);s.close()'; }

wait_http() {   # wait_http URL — up to 15 s
    local i=0
    while [ $i -lt 150 ]; do
        curl -s -o /dev/null --max-time 1 "$1" && return 0
        sleep 0.1; i=$((i + 1))
    done
    return 1
}

rss_kb() {      # rss_kb PID... — sum of VmRSS in KiB
    local t=0 p v
    for p in "$@"; do
        v=$(awk '/^VmRSS:/{print $2}' "/proc/$p/status" 2>/dev/null || echo 0)
        t=$((t + ${v:-0}))
    done
    echo $t
}

cpu_ticks() {   # cpu_ticks PID... — utime+stime of every thread, in clock ticks
    local t=0 p v
    for p in "$@"; do
        v=$(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0)
        t=$((t + ${v:-0}))
    done
    echo $t
}
HZ=$(getconf CLK_TCK)

field() {       # field KEY LINE — the value of key=value in a result line, or n/a
    local v
    v=$(echo "$2" | tr ' ' '\n' | awk -F= -v k="$1" '$1 == k { print $2; exit }')
    echo "${v:-n/a}"
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || a == "n/a" || b == "n/a" || b + 0 == 0) print "n/a"; else printf "%.2f", a / b }'; }

figure() {      # figure SCENARIO NAME REACTORD PEER=VALUE... — ratio is reactord / first peer
    local line="$1 $2 reactord=$3" rdv=$3 first=""
    shift 3
    local p
    for p in "$@"; do
        line="$line $p"
        [ -z "$first" ] && first=${p#*=}
    done
    [ -n "$first" ] && line="$line ratio=$(ratio "$rdv" "$first")"
    echo "$line" | tee -a "$FIGS"
}

note() { echo "$*" | tee -a "$FIGS"; }

# ------------------------------------------------------------------ servers
RD_PID=""; RD_PORT=""; NC_PREFIX=""; NC_PID=""; NC_PORT=""; REF_PID=""

start_reactord() {   # start_reactord NAME [extra flags]
    local name=$1; shift
    RD_PORT=$(free_port)
    ( ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
      exec "$REACTORD_BIN" --port "$RD_PORT" --host 127.0.0.1 --admin-token "$TOKEN" \
          --threads "$THREADS" --log-level "${REACTORD_LOG_LEVEL:-warning}" --connection-limit 19000 --connections-per-ip 0 --session-create-rate 0 \
          --store "${REACTORD_STORE:-memory}" --access-log "${REACTORD_ACCESS_LOG:-off}" "$@" ) \
        >"$OUT/reactord-$name.log" 2>&1 &
    RD_PID=$!
    if ! wait_http "http://127.0.0.1:$RD_PORT/healthz"; then
        echo "bench.sh: reactord did not answer /healthz (log: $OUT/reactord-$name.log)" >&2
        tail -20 "$OUT/reactord-$name.log" >&2
        stop_reactord; return 1
    fi
}

stop_reactord() {
    [ -n "$RD_PID" ] || return 0
    kill -TERM "$RD_PID" 2>/dev/null || true
    local i=0
    while kill -0 "$RD_PID" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
    if kill -0 "$RD_PID" 2>/dev/null; then log "reactord did not stop in 10 s; killing"; kill -KILL "$RD_PID" 2>/dev/null || true; fi
    wait "$RD_PID" 2>/dev/null || true
    RD_PID=""
}

start_nchan() {
    NC_PORT=$(free_port)
    local info
    info=$(NCHAN_PING=$HEARTBEAT "$NCHAN_DIR/start-nchan.sh" "$NC_PORT" "$THREADS") || return 1
    NC_PREFIX=$(echo "$info" | sed -n 's/.*prefix=\([^ ]*\).*/\1/p')
    NC_PID=$(echo "$info" | sed -n 's/.*pid=\([0-9]*\).*/\1/p')
}

nchan_pids() {  # master and its workers
    [ -n "$NC_PID" ] || return 0
    echo "$NC_PID"; pgrep -P "$NC_PID" || true
}

stop_nchan() {
    [ -n "$NC_PREFIX" ] || return 0
    cp "$NC_PREFIX/nginx.conf" "$OUT/nchan-nginx.conf" 2>/dev/null || true
    "$NCHAN_DIR/stop-nchan.sh" "$NC_PREFIX" || true
    wait "$NC_PID" 2>/dev/null || true
    rm -rf "$NC_PREFIX"
    NC_PREFIX=""; NC_PID=""
}

stop_reference() {
    [ -n "$REF_PID" ] || return 0
    kill -TERM "$REF_PID" 2>/dev/null || true
    local i=0
    while kill -0 "$REF_PID" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
    kill -KILL "$REF_PID" 2>/dev/null || true
    wait "$REF_PID" 2>/dev/null || true
    REF_PID=""
}

cleanup() { stop_reactord; stop_nchan; stop_reference; }
trap cleanup EXIT
trap 'exit 130' INT TERM

new_session() {  # new_session → id
    curl -s --max-time 5 -X POST "http://127.0.0.1:$RD_PORT/sessions" -d '{"reactor":"counter"}' |
        sed -n 's/.*"session":"\([^"]*\)".*/\1/p'
}

sseload() {      # sseload TAG ARGS... — runs the load client, keeps its line, prints it
    local tag=$1; shift
    local line
    line=$("$SSELOAD" "$@" -q 2>>"$OUT/sseload.err" | grep '^result' | tail -1) || true
    echo "$tag $line" >> "$RAW"
    echo "$line"
}

wrk_warm() {     # wrk_warm URL [LUA_SCRIPT [SCRIPT ARGS]] — WRK_WARMUP s of unmeasured load
    [ "$WRK_WARMUP" != 0 ] || return 0
    local url=$1; shift
    if [ $# -gt 0 ]; then
        wrk -t"$WRK_THREADS" -c"$WRK_CONNS" -d"${WRK_WARMUP}s" -s "$1" "$url" -- "${@:2}" >/dev/null 2>&1 || true
    else
        wrk -t"$WRK_THREADS" -c"$WRK_CONNS" -d"${WRK_WARMUP}s" "$url" >/dev/null 2>&1 || true
    fi
}

wrk_rps() {      # wrk_rps TAG URL [LUA_SCRIPT [SCRIPT ARGS]] — prints requests/s, keeps wrk's output
    local tag=$1 url=$2; shift 2
    if [ $# -gt 0 ]; then
        local script=$1; shift
        $TIMEIT wrk -t"$WRK_THREADS" -c"$WRK_CONNS" -d"${WRK_SECONDS}s" -s "$script" "$url" -- "$@" >"$OUT/wrk-$tag.txt" 2>&1 || true
    else
        $TIMEIT wrk -t"$WRK_THREADS" -c"$WRK_CONNS" -d"${WRK_SECONDS}s" "$url" >"$OUT/wrk-$tag.txt" 2>&1 || true
    fi
    { echo "== $tag"; cat "$OUT/wrk-$tag.txt"; } >> "$RAW"
    local non2xx
    non2xx=$(awk '/Non-2xx/ {print $NF}' "$OUT/wrk-$tag.txt")
    [ -n "$non2xx" ] && log "$tag: $non2xx responses were not 2xx/3xx"
    awk '/^Requests\/sec:/ {print $2}' "$OUT/wrk-$tag.txt"
}

# wrk's own CPU use (100 = one core), so a load-generator bound run shows itself.
TIMEIT=""
[ -x /usr/bin/time ] && TIMEIT="/usr/bin/time -f wrk_cpu=%P"
wrk_cpu() { local v; v=$(sed -n 's/^wrk_cpu=\([0-9]*\)%.*/\1/p' "$OUT/wrk-$1.txt" 2>/dev/null | tail -1); echo "${v:-n/a}"; }

cpu_pct_since() {   # cpu_pct_since TICKS0 SECONDS PIDS... — server CPU % of one core
    local t0=$1 secs=$2; shift 2
    local t1; t1=$(cpu_ticks "$@")
    awk -v a="$t0" -v b="$t1" -v hz="$HZ" -v s="$secs" 'BEGIN { if (s <= 0) print "n/a"; else printf "%.0f", 100 * (b - a) / hz / s }'
}

# ------------------------------------------------------------------ scenarios
# Each scenario runs reactord, then its peers, each on a fresh server; a side that cannot start
# (or is skipped with SKIP_REACTORD=1 / SKIP_NCHAN=1) shows as n/a and the others still run.
rd_up() { [ "${SKIP_REACTORD:-0}" != 1 ] && start_reactord "$@"; }
nc_up() { [ "${SKIP_NCHAN:-0}" != 1 ] && start_nchan; }

# ------------------------------------------------------------------ scenario 1: action throughput
scenario_throughput() {
    log "1 throughput: POST /action increase over $THROUGHPUT_SESSIONS sessions, $WRK_CONNS connections, ${WRK_SECONDS}s"
    local rd=n/a ref=n/a nc=n/a rd_cpu=n/a ref_cpu=n/a nc_cpu=n/a rd_wrk=n/a ref_wrk=n/a nc_wrk=n/a t0 pids
    if rd_up throughput; then
        "$SSELOAD" sessions -p "$RD_PORT" -c "$THROUGHPUT_SESSIONS" -k 4 --out "$OUT/sessions-64.txt" -q >>"$RAW"
        wrk_warm "http://127.0.0.1:$RD_PORT" "$LOAD/action.lua" reactord "$OUT/sessions-64.txt"
        t0=$(cpu_ticks "$RD_PID")
        rd=$(wrk_rps reactord-action "http://127.0.0.1:$RD_PORT" "$LOAD/action.lua" reactord "$OUT/sessions-64.txt")
        rd_cpu=$(cpu_pct_since "$t0" "$WRK_SECONDS" "$RD_PID"); rd_wrk=$(wrk_cpu reactord-action)
        stop_reactord
    fi

    # HOOK: the C libmicrohttpd reference route (issue 3's MicroHTTP benchmark). It is built from
    # Benchmarks/reference/reference.c once that lands on main, assumed to take "PORT [THREADS]"
    # like Benchmarks/MicroHTTPBenchmark and to serve GET /hello; override with REFERENCE_CMD
    # ("binary args", %PORT% replaced) and REFERENCE_PATH.
    local ref_cmd=${REFERENCE_CMD:-} ref_path=${REFERENCE_PATH:-/hello} ref_port
    if [ -z "$ref_cmd" ] && [ -f "$HERE/reference/reference.c" ]; then
        if gcc -O2 -o "$OUT/reference" "$HERE/reference/reference.c" $(pkg-config --cflags --libs libmicrohttpd) 2>"$OUT/reference-build.log"; then
            ref_cmd="$OUT/reference %PORT% $THREADS"
        else
            log "reference.c did not build (log: $OUT/reference-build.log)"
        fi
    fi
    if [ -n "$ref_cmd" ]; then
        ref_port=$(free_port)
        ( ulimit -n "$(ulimit -Hn)" 2>/dev/null || true; exec ${ref_cmd//%PORT%/$ref_port} ) >"$OUT/reference.log" 2>&1 &
        REF_PID=$!
        if wait_http "http://127.0.0.1:$ref_port$ref_path"; then
            wrk_warm "http://127.0.0.1:$ref_port$ref_path"
            t0=$(cpu_ticks "$REF_PID")
            ref=$(wrk_rps reference "http://127.0.0.1:$ref_port$ref_path")
            ref_cpu=$(cpu_pct_since "$t0" "$WRK_SECONDS" "$REF_PID"); ref_wrk=$(wrk_cpu reference)
        else
            log "reference server did not answer $ref_path (log: $OUT/reference.log)"
        fi
        stop_reference
    else
        log "HOOK: no C reference yet (Benchmarks/reference/reference.c not on this branch; set REFERENCE_CMD)"
    fi

    if nc_up; then
        pids=$(nchan_pids)
        wrk_warm "http://127.0.0.1:$NC_PORT" "$LOAD/action.lua" nchan 64
        t0=$(cpu_ticks $pids)
        nc=$(wrk_rps nchan-publish "http://127.0.0.1:$NC_PORT" "$LOAD/action.lua" nchan 64)
        nc_cpu=$(cpu_pct_since "$t0" "$WRK_SECONDS" $pids); nc_wrk=$(wrk_cpu nchan-publish)
        stop_nchan
    fi

    figure throughput requests/s "${rd:-n/a}" "reference=${ref:-n/a}" "nchan=${nc:-n/a}"
    note "throughput ratio_to_nchan reactord/nchan=$(ratio "${rd:-n/a}" "${nc:-n/a}")  (targets: >=0.8 x reference, >=1.0 x nchan)"
    note "throughput server_cpu% reactord=$rd_cpu reference=$ref_cpu nchan=$nc_cpu  (100 = one core)"
    note "throughput wrk_cpu% reactord=$rd_wrk reference=$ref_wrk nchan=$nc_wrk  (wrk -t$WRK_THREADS; near 100 x threads = load-generator bound)"
}

# ------------------------------------------------------------------ scenario 2: fan-out
scenario_fanout() {
    log "2 fanout: $FANOUT_SUBS subscribers on one session, actions as fast as taken, ${FANOUT_SECONDS}s"
    local rd="" nc="" s k
    if rd_up fanout; then
        s=$(new_session)
        rd=$(sseload fanout-reactord pubsub -p "$RD_PORT" -n "$FANOUT_SUBS" --path "/sessions/$s/events$FANOUT_QUERY" \
            -f reactord --session "$s" -r 0 -k "$FANOUT_PUB_CONNS" -d "$FANOUT_SECONDS" --drain 30 --batch-us "$FANOUT_BATCH_US")
        stop_reactord
    fi
    if nc_up; then
        nc=$(sseload fanout-nchan pubsub -p "$NC_PORT" -n "$FANOUT_SUBS" --path /sub/fanout \
            -f nchan --pub-path /pub/fanout -r 0 -k "$FANOUT_PUB_CONNS" -d "$FANOUT_SECONDS" --drain 30 --batch-us "$FANOUT_BATCH_US")
        stop_nchan
    fi
    figure fanout deliveries/s "$(field deliveries_per_s "$rd")" "nchan=$(field deliveries_per_s "$nc")"
    figure fanout actions/s "$(field pub_per_s "$rd")" "nchan=$(field pub_per_s "$nc")"
    figure fanout events/s "$(field events_per_s "$rd")" "nchan=$(field events_per_s "$nc")"
    for k in lost dup id_gaps dropped open p99_us; do
        figure fanout "$k" "$(field $k "$rd")" "nchan=$(field $k "$nc")"
    done
    note "fanout note: deliveries = timestamped messages (reactord pulses, nchan messages); reactord's events/s also counts the state event each alert makes${FANOUT_QUERY:+ (query $FANOUT_QUERY)}"
    note "fanout sseload_cpu% reactord=$(field cpu_pct "$rd") nchan=$(field cpu_pct "$nc")  (load client, 100 = one core; target: deliveries/s >= nchan, lost = 0)"
}

# ------------------------------------------------------------------ scenario 3: latency
scenario_latency() {
    log "3 latency: $LAT_SUBS subscribers on one session, $LAT_RATE actions/s for ${LAT_SECONDS}s"
    local rd="" nc="" s k
    if rd_up latency; then
        s=$(new_session)
        rd=$(sseload latency-reactord pubsub -p "$RD_PORT" -n "$LAT_SUBS" --path "/sessions/$s/events" \
            -f reactord --session "$s" -r "$LAT_RATE" -k "$LAT_PUB_CONNS" -d "$LAT_SECONDS" --drain 10)
        stop_reactord
    fi
    if nc_up; then
        nc=$(sseload latency-nchan pubsub -p "$NC_PORT" -n "$LAT_SUBS" --path /sub/latency \
            -f nchan --pub-path /pub/latency -r "$LAT_RATE" -k "$LAT_PUB_CONNS" -d "$LAT_SECONDS" --drain 10)
        stop_nchan
    fi
    for k in p50_us p90_us p99_us p999_us max_us lost; do
        figure latency "$k" "$(field $k "$rd")" "nchan=$(field $k "$nc")"
    done
    note "latency actions/s reactord=$(field pub_per_s "$rd") nchan=$(field pub_per_s "$nc")  (offered $LAT_RATE/s; target p99 <= nchan and <= 15000 us)"
    note "latency sseload_cpu% reactord=$(field cpu_pct "$rd") nchan=$(field cpu_pct "$nc")"
}

# ------------------------------------------------------------------ scenario 4: broadcast
scenario_broadcast() {
    log "4 broadcast: $BCAST_SESSIONS sessions, one subscriber each, one PUT /user"
    local rd="" k
    if rd_up broadcast --max-sessions $((BCAST_SESSIONS + 1000)); then
        "$SSELOAD" sessions -p "$RD_PORT" -c "$BCAST_SESSIONS" -k 8 --out "$OUT/sessions-bcast.txt" -q >>"$RAW"
        rd=$(sseload broadcast-reactord pubsub -p "$RD_PORT" -n "$BCAST_SESSIONS" --path "/sessions/%s/events" \
            --ids-file "$OUT/sessions-bcast.txt" -f user --admin-token "$TOKEN" -c 1 -d 30 --drain 30 --settle 0.5)
        stop_reactord
    fi
    for k in complete lost p50_us p99_us max_us; do
        figure broadcast "$k" "$(field $k "$rd")" "nchan=n/a"
    done
    note "broadcast put_user_us reactord=$(field pub_max_us "$rd") subscribers_open=$(field open_end "$rd")/$BCAST_SESSIONS  (target: all have it, p99 <= 200000 us; nchan has no global value to compare)"
}

# ------------------------------------------------------------------ scenario 5: memory
wait_file() {   # up to 120 s
    local i=0
    while [ ! -e "$1" ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i + 1)); done
}

idle_rss() {    # idle_rss TAG PORT PATH PIDS... — KiB of RSS per idle subscriber (MEM_SUBS of them)
    local tag=$1 port=$2 path=$3; shift 3
    local r0 r1 job open ready=$OUT/ready-$tag
    sleep 0.5; r0=$(rss_kb "$@")
    rm -f "$ready"
    "$SSELOAD" idle -p "$port" -n "$MEM_SUBS" --path "$path" -d "$MEM_HOLD" --ready-file "$ready" -q \
        >"$OUT/mem-$tag.txt" 2>>"$OUT/sseload.err" &
    job=$!
    wait_file "$ready"; sleep 0.5
    r1=$(rss_kb "$@")
    wait "$job" || true
    open=$(field open "$(grep '^result' "$OUT/mem-$tag.txt")")
    echo "memory-$tag rss0_kb=$r0 rss1_kb=$r1 $(cat "$OUT/mem-$tag.txt")" >> "$RAW"
    awk -v a="$r0" -v b="$r1" -v n="${open:-0}" 'BEGIN { if (n > 0) printf "%.2f", (b - a) / n; else print "n/a" }'
}

scenario_memory() {
    log "5 memory: RSS per idle subscriber ($MEM_SUBS) and per idle session ($MEM_SESSIONS)"
    local s rd_sub=n/a nc_sub=n/a rd_sess=n/a r0 r1 made n=0
    if rd_up memory-subs; then
        s=$(new_session)
        rd_sub=$(idle_rss reactord "$RD_PORT" "/sessions/$s/events" "$RD_PID")
        stop_reactord
    fi
    if nc_up; then
        curl -s -o /dev/null -X POST "http://127.0.0.1:$NC_PORT/pub/memory" -d 1
        nc_sub=$(idle_rss nchan "$NC_PORT" /sub/memory $(nchan_pids))   # master + workers
        stop_nchan
    fi
    figure memory KiB/idle_subscriber "$rd_sub" "nchan=$nc_sub"
    if rd_up memory-sessions --max-sessions $((MEM_SESSIONS + 1000)); then
        new_session >/dev/null
        sleep 0.5; r0=$(rss_kb "$RD_PID")
        made=$("$SSELOAD" sessions -p "$RD_PORT" -c "$MEM_SESSIONS" -k 8 --out /dev/null -q | tee -a "$RAW")
        sleep 0.5; r1=$(rss_kb "$RD_PID")
        echo "memory-reactord-sessions rss0_kb=$r0 rss1_kb=$r1" >> "$RAW"
        n=$(field pub_ok "$made")
        rd_sess=$(awk -v a="$r0" -v b="$r1" -v n="${n:-0}" 'BEGIN { if (n > 0) printf "%.2f", (b - a) / n; else print "n/a" }')
        stop_reactord
    fi
    figure memory KiB/idle_session "$rd_sess" "nchan=n/a"
    note "memory sessions_created reactord=${n:-0}/$MEM_SESSIONS  (targets: <= 12 KiB/subscriber, <= 4 KiB/session; KiB = 1024 B)"
}

# ------------------------------------------------------------------ scenario 6: scale
scenario_scale() {
    log "6 scale: $SCALE_SUBS subscribers held ${SCALE_SECONDS}s, heartbeat ${HEARTBEAT}s"
    local rd="" nc="" s k
    if rd_up scale --heartbeat "$HEARTBEAT"; then
        s=$(new_session)
        rd=$(sseload scale-reactord idle -p "$RD_PORT" -n "$SCALE_SUBS" --path "/sessions/$s/events" -d "$SCALE_SECONDS")
        stop_reactord
    fi
    if nc_up; then
        nc=$(sseload scale-nchan idle -p "$NC_PORT" -n "$SCALE_SUBS" --path /sub/scale -d "$SCALE_SECONDS")
        stop_nchan
    fi
    for k in open open_end dropped failed hb_min; do
        figure scale "$k" "$(field $k "$rd")" "nchan=$(field $k "$nc")"
    done
    note "scale connect_s reactord=$(field connect_s "$rd") nchan=$(field connect_s "$nc")  (target: all $SCALE_SUBS open at the end; nchan's hb count includes its opening ': hi')"
}

idle_pct() {     # share of all cores idle over 1 s (from /proc/stat)
    local a b
    a=$(awk '/^cpu / {print $5 + $6, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9}' /proc/stat)
    sleep 1
    b=$(awk '/^cpu / {print $5 + $6, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9}' /proc/stat)
    echo "$a $b" | awk '{ d = $4 - $2; if (d > 0) printf "%.0f", 100 * ($3 - $1) / d; else print "n/a" }'
}

# ------------------------------------------------------------------ run
build
{
    echo "# reactord benchmark $STAMP on $(uname -srm), $(nproc) cores, $(awk -F: '/model name/ {print $2; exit}' /proc/cpuinfo | sed 's/^ *//')"
    echo "# commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?') smoke=$SMOKE threads=$THREADS wrk_threads=$WRK_THREADS"
} | tee -a "$FIGS"
for sc in $SCENARIOS; do
    case "$sc" in
        throughput|fanout|latency|broadcast|memory|scale)
            note "# $sc: machine idle before = $(idle_pct)% of $(nproc) cores (others' load skews every figure)"
            "scenario_$sc" || log "scenario $sc failed" ;;
        *) echo "bench.sh: unknown scenario $sc" >&2 ;;
    esac
done
log "figures: $FIGS  raw: $RAW"
