#!/usr/bin/env python3
"""What a POST /action costs the server, per action, for builds alternated in one run.

    Benchmarks/action_costs.py BIN [BIN ...] [--rounds 3] [--seconds 8] [--modes M,M]
    Benchmarks/action_costs.py --callgrind BIN [BIN ...] [--seconds 10]

Each build, each round, gets a fresh SQLite file and 64 `counter` sessions; wrk (-t1 -c64,
Benchmarks/load/action.lua) runs each mode (default: without keys, keys in time order, random
keys). Printed per action: actions/s, the server's CPU time, the bytes it wrote (`wchar`: the
WAL, the checkpoints, the sockets) and its write and read calls, from /proc: counts that move far
less than the throughput when the machine is shared. With --callgrind the server runs under
valgrind's callgrind (a copy without debug info, which valgrind 3.19 cannot read) and the
instructions per action are printed instead of CPU time: a count the machine's load does not
change (the batching under valgrind differs from a native run, alike for every build).
PROFILE_DIR=dir keeps each build's and mode's profile there as <build index>-<mode>.cg.
"""
import argparse
import http.client
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from action_load import SCRIPT

MODES = "reactord-fresh,reactord-keyed,reactord-keyed-random"


def counters(pid):
    fields = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    io = dict(line.split(": ") for line in open("/proc/%d/io" % pid).read().splitlines())
    return cpu, int(io["wchar"]), int(io["syscw"]), int(io["syscr"])


def start(command, folder):
    log = open(os.path.join(folder, "log"), "w")
    process = subprocess.Popen(command + ["--port", "0", "--admin-token", "t", "--log-level", "info",
                                          "--connections-per-ip", "0", "--store",
                                          "sqlite:" + os.path.join(folder, "s.sqlite")], stdout=log, stderr=log)
    port = None
    for _ in range(6000):
        match = re.search(r"port=(\d+)", open(log.name).read())
        if match:
            port = int(match.group(1))
            break
        if process.poll() is not None:
            sys.exit("reactord exited: " + open(log.name).read())
        time.sleep(0.01)
    while True:
        try:
            client = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            ids = []
            for _ in range(64):
                client.request("POST", "/sessions", b'{"reactor":"counter"}')
                ids.append(json.loads(client.getresponse().read())["session"])
            break
        except OSError:
            time.sleep(0.1)
    path = os.path.join(folder, "ids")
    with open(path, "w") as out:
        out.write("\n".join(ids) + "\n")
    return process, port, path


def load(port, mode, ids, seconds):
    command = ["wrk", "-t1", "-c64", "--timeout", "30s", "-s", SCRIPT, "http://127.0.0.1:%d" % port]
    out = subprocess.run(command + ["-d%ds" % seconds, "--", mode, ids], check=True, capture_output=True,
                         text=True).stdout
    if "Non-2xx" in out:
        sys.exit("non-2xx answers:\n" + out)
    return int(re.search(r"(\d+) requests in", out).group(1)), float(re.search(r"Requests/sec:\s+([0-9.]+)",
                                                                                 out).group(1))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("builds", nargs="+")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=8)
    parser.add_argument("--modes", default=MODES)
    parser.add_argument("--callgrind", action="store_true")
    args = parser.parse_args()
    modes = args.modes.split(",")
    results = {}
    for round_ in range(1 if args.callgrind else args.rounds):
        for index, build in enumerate(args.builds):
            for mode in modes if args.callgrind else [None]:
                folder = tempfile.mkdtemp(prefix="reactord-costs-")
                try:
                    if args.callgrind:
                        binary = os.path.join(folder, "reactord")
                        subprocess.run(["strip", "--strip-debug", "-o", binary, build], check=True)
                        command = ["valgrind", "--tool=callgrind", "--callgrind-out-file=" + os.path.join(folder, "cg"),
                                   binary]
                    else:
                        command = [build]
                    process, port, ids = start(command, folder)
                    try:
                        for current in [mode] if args.callgrind else modes:
                            load(port, current, ids, 2)  # warm-up
                            if args.callgrind:
                                subprocess.run(["callgrind_control", "-z", str(process.pid)], check=True,
                                               stdout=subprocess.DEVNULL)
                            before = counters(process.pid)
                            count, rate = load(port, current, ids, args.seconds)
                            after = counters(process.pid)
                            if args.callgrind:
                                subprocess.run(["callgrind_control", "-d", str(process.pid)], check=True,
                                               stdout=subprocess.DEVNULL)
                                dumps = [f for f in os.listdir(folder) if f.startswith("cg.")]
                                dump = os.path.join(folder, max(dumps, key=lambda f: int(f.split(".")[1])))
                                text = open(dump).read()
                                if os.environ.get("PROFILE_DIR"):
                                    shutil.copy(dump, os.path.join(os.environ["PROFILE_DIR"], "%d-%s.cg" % (index, current)))
                                first = int(re.search(r"^(?:summary|totals): (\d+)", text, re.M).group(1)) / count
                            else:
                                first = (after[0] - before[0]) / count * 1e6
                            row = (rate, first) + tuple((after[i] - before[i]) / count for i in (1, 2, 3))
                            results.setdefault((index, current), []).append(row)
                            print("round %d, %s, %-22s %7.0f/s  %s %8.1f  wchar %6.0f B  writes %.2f  reads %.2f"
                                  % ((round_ + 1, build, current, rate, "Ir" if args.callgrind else "cpu us")
                                     + row[1:]), flush=True)
                    finally:
                        process.terminate()
                        process.wait(timeout=60)
                finally:
                    shutil.rmtree(folder, ignore_errors=True)
    for index, build in enumerate(args.builds):
        reference = statistics.median(row[0] for row in results[(index, modes[0])])
        for mode in modes:
            rows = results[(index, mode)]
            medians = [statistics.median(row[i] for row in rows) for i in range(5)]
            print("%s %-22s median %7.0f/s (%.2fx)  %s %.1f  wchar %.0f B  writes %.2f  reads %.2f"
                  % ((build, mode, medians[0], medians[0] / reference, "Ir" if args.callgrind else "cpu us")
                     + tuple(medians[1:])))


if __name__ == "__main__":
    main()
