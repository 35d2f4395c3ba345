#!/usr/bin/env python3
"""Two reactord builds against each other on one SQLite server each, alternated in one run.

    Benchmarks/action_ab.py BASE_BINARY OTHER_BINARY [--rounds 3] [--seconds 8] [--modes M,M] [--store memory]

Each round starts each build on a fresh SQLite file (or the memory store) with 64 `counter` sessions and measures
POST /action with wrk (-t1 -c64 --latency, Benchmarks/load/action.lua) in each mode (default:
without keys, `reactord-fresh`, and with a key in time order each, `reactord-keyed`; also
`reactord-keyed-random`); prints the medians of the rate and of wrk's p99 latency, and the
ratios of OTHER to BASE.
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

from action_load import SCRIPT
from store_bench import Server


def rate_and_p99(port, sessions, seconds, folder, mode):
    """wrk after a 2 s warm-up: requests per second and the p99 latency in ms."""
    ids = os.path.join(folder, "sessions.txt")
    with open(ids, "w") as out:
        out.write("\n".join(sessions) + "\n")
    command = ["wrk", "-t1", "-c64", "--latency", "--timeout", "30s", "-s", SCRIPT, "http://127.0.0.1:%d" % port,
               "--", mode, ids]
    subprocess.run(command[:2] + ["-d2s"] + command[2:], check=True, stdout=subprocess.DEVNULL)
    out = subprocess.run(command[:2] + ["-d%ds" % seconds] + command[2:], check=True, capture_output=True,
                         text=True).stdout
    if "Non-2xx" in out:
        sys.exit("non-2xx answers under load:\n" + out)
    value, unit = re.search(r"99%\s+([0-9.]+)(us|ms|s)", out).groups()
    scale = {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]
    return float(re.search(r"Requests/sec:\s+([0-9.]+)", out).group(1)), float(value) * scale


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("base")
    parser.add_argument("other")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=8)
    parser.add_argument("--modes", default="reactord-fresh,reactord-keyed")
    parser.add_argument("--store", choices=("sqlite", "memory"), default="sqlite")
    args = parser.parse_args()
    modes = args.modes.split(",")
    builds = (args.base, args.other)
    results = {(build, mode): [] for build in (0, 1) for mode in modes}
    for round_ in range(args.rounds):
        for build, binary in enumerate(builds):
            folder = tempfile.mkdtemp(prefix="reactord-ab-")
            store = "memory" if args.store == "memory" else "sqlite:" + os.path.join(folder, "ab.sqlite")
            server = Server(binary, store)
            try:
                sessions = server.counters(64)
                for mode in modes:
                    results[(build, mode)].append(rate_and_p99(server.port, sessions, args.seconds, folder, mode))
            finally:
                server.stop()
                shutil.rmtree(folder, ignore_errors=True)
            print("round %d, %s: %s" % (round_ + 1, binary, ", ".join(
                "%s %.0f/s p99 %.1f ms" % ((mode,) + results[(build, mode)][-1]) for mode in modes)), flush=True)
    for mode in modes:
        base, other = ([statistics.median(row[i] for row in results[(build, mode)]) for i in (0, 1)] for build in (0, 1))
        print("%s: base %.0f/s p99 %.1f ms, other %.0f/s (%.2fx) p99 %.1f ms" % (
            mode, base[0], base[1], other[0], other[0] / base[0], other[1]))


if __name__ == "__main__":
    main()
