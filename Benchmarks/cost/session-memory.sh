#!/usr/bin/env bash
# Where an idle session's bytes are: valgrind's dhat over N counter sessions on the memory store,
# the blocks live at the peak that N sessions (or more) share, by allocation site, per session.
#   Benchmarks/cost/session-memory.sh <release binary> [N=2000]
# Prints bytes requested and malloc chunks (glibc: the size + 8, rounded up to 16, at least 32)
# per session, then each site. RSS per session, at 100,000 sessions: bench.sh --only memory.
# FRAMES=n names each site by its first n frames (callers joined by " <- ") instead of one.
set -euo pipefail
binary=$1
sessions=${2:-2000}
port=${PORT:-19477}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$binary" "$work/reactord"
strip --strip-debug "$work/reactord"   # valgrind reads Swift 6's DWARF slowly; symbols stay
valgrind --tool=dhat --dhat-out-file="$work/dhat.json" "$work/reactord" --port "$port" \
  --store memory --access-log off --session-create-rate 0 >"$work/server.log" 2>&1 &
server=$!
for _ in $(seq 1 120); do curl -s -o /dev/null "http://127.0.0.1:$port/healthz" && break; sleep 0.5; done
python3 - "$port" "$sessions" <<'PY'
import http.client, sys
connection = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]))
for _ in range(int(sys.argv[2])):
    connection.request("POST", "/sessions", body='{"reactor":"counter"}')
    answer = connection.getresponse()
    answer.read()
    assert answer.status == 201, answer.status
PY
sleep 1
kill -TERM "$server"
wait "$server" || true
FRAMES=${FRAMES:-0} python3 - "$work/dhat.json" "$sessions" <<'PY'
import json, os, re, subprocess, sys
profile, sessions = json.load(open(sys.argv[1])), int(sys.argv[2])
frames = profile["ftbl"]
plumbing = ("malloc", "memalign", "swift_slowAlloc", "swift_allocObject", "ManagedBuffer", "_ContiguousArrayBuffer",
            "operator new", "allocateUninitialized", "$sSa", "swift_weakAssign", "RefCounts")
rows, requested, chunks, blocks = [], 0, 0, 0
depth = int(os.environ["FRAMES"])
width = 150 * max(1, depth)
for site in profile["pps"]:
    size, count = site.get("gb", 0), site.get("gbk", 0)
    if count < sessions:
        continue   # not one per session
    chunk = max(32, (size // count + 8 + 15) // 16 * 16) * count
    requested, chunks, blocks = requested + size, chunks + chunk, blocks + count
    names = [re.sub(r"^0x[0-9A-F]+: | \(in .*\)$", "", frames[i]) for i in site["fs"]]
    weak = any("swift_weakAssign" in name for name in names)
    names = [name for name in names if not any(p in name for p in plumbing)]
    # A lock or a box says little by itself: name what made it too.
    holders = ("LockStorage", "Mutex", "Guarded", "Locked", "BoxC")
    maker = next((n for n in names if not any(h in n for h in holders)), "")
    name = " <- ".join(names[:depth]) if depth else names[0] + (" in " + maker if maker != names[0] else "")
    rows.append((chunk / sessions, size / count, count / sessions, weak, name))
print(f"per session: {requested / sessions:.0f} B requested in {blocks / sessions:.1f} blocks, "
      f"{chunks / sessions:.0f} B of malloc chunks")
demangled = subprocess.run(["swift-demangle", "--simplified"], input="\n".join(row[4] for row in rows),
                           capture_output=True, text=True).stdout.splitlines()
for (chunk, size, count, weak, _), name in sorted(zip(rows, demangled), key=lambda pair: -pair[0][0]):
    print(f"{chunk:6.0f} B  {count:.1f} x {size:5.0f} B  {'weak side table, ' if weak else ''}{name[:width]}")
PY
