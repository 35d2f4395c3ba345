"""What the store and cluster benchmarks share: the release build they measure, the
POST /action load (wrk, 64 keep-alive connections over the given counter sessions), and a
free loopback port."""
import os
import re
import shutil
import socket
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "Benchmarks", "load", "action.lua")


def build():
    """REACTORD_BIN, else the release build in .build-bench (as bench.sh)."""
    binary = os.environ.get("REACTORD_BIN")
    if binary:
        return binary
    subprocess.run(["swift", "build", "-c", "release", "--product", "reactord", "--scratch-path", ".build-bench"],
                   cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return os.path.join(ROOT, ".build-bench", "release", "reactord")


def actions_per_second(port, sessions, seconds, folder, explain=lambda: "", mode="reactord"):
    """wrk -t1 -c64 on POST /action round robin over `sessions`, after a 2 s warm-up; exits,
    with wrk's output and `explain()`, when any answer was not 2xx. `mode`: action.lua's
    (reactord-keyed: every request with an Idempotency-Key of its own)."""
    ids = os.path.join(folder, "sessions.txt")
    with open(ids, "w") as out:
        out.write("\n".join(sessions) + "\n")
    return requests_per_second(port, [mode, ids], seconds, explain)


def requests_per_second(port, script_args, seconds, explain=lambda: ""):
    """wrk -t1 -c64 with action.lua and `script_args` against 127.0.0.1:`port`, after a 2 s
    warm-up (Debian's wrk installed first when missing); exits, with wrk's output and
    `explain()`, when any answer was not 2xx."""
    if not shutil.which("wrk"):
        subprocess.run(["apt-get", "install", "-y", "-qq", "wrk"], check=True, stdout=subprocess.DEVNULL)
    command = ["wrk", "-t1", "-c64", "-s", SCRIPT, "http://127.0.0.1:%d" % port, "--"] + script_args
    subprocess.run(command[:3] + ["-d2s"] + command[3:], check=True, stdout=subprocess.DEVNULL)
    result = subprocess.run(command[:3] + ["-d%ds" % seconds] + command[3:], check=True, capture_output=True,
                            text=True).stdout
    if "Non-2xx" in result:
        sys.exit("non-2xx answers under load:\n" + result + explain())
    return float(re.search(r"Requests/sec:\s+([0-9.]+)", result).group(1))


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
