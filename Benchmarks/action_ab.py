#!/usr/bin/env python3
"""Two reactord builds against each other on one SQLite server each, alternated in one run.

    Benchmarks/action_ab.py BASE_BINARY OTHER_BINARY [--rounds 3] [--seconds 8]

Each round starts each build on a fresh SQLite file with 64 `counter` sessions and measures
POST /action with wrk (-t1 -c64, Benchmarks/load/action.lua) without keys (`reactord-fresh`)
and with a key in time order each (`reactord-keyed`); prints the medians and the ratios of
OTHER to BASE.
"""
import argparse
import os
import shutil
import statistics
import tempfile

from action_load import actions_per_second
from store_bench import Server

MODES = ("reactord-fresh", "reactord-keyed")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("base")
    parser.add_argument("other")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=8)
    args = parser.parse_args()
    builds = (args.base, args.other)
    results = {(build, mode): [] for build in (0, 1) for mode in MODES}
    for round_ in range(args.rounds):
        for build, binary in enumerate(builds):
            folder = tempfile.mkdtemp(prefix="reactord-ab-")
            server = Server(binary, "sqlite:" + os.path.join(folder, "ab.sqlite"))
            try:
                sessions = server.counters(64)
                for mode in MODES:
                    results[(build, mode)].append(actions_per_second(server.port, sessions, args.seconds, folder,
                                                                      mode=mode))
            finally:
                server.stop()
                shutil.rmtree(folder, ignore_errors=True)
            print("round %d, %s: without keys %.0f, keyed %.0f/s" % (round_ + 1, binary, results[(build, MODES[0])][-1],
                                                                     results[(build, MODES[1])][-1]), flush=True)
    for mode in MODES:
        base = statistics.median(results[(0, mode)])
        other = statistics.median(results[(1, mode)])
        print("%s: base %.0f/s, other %.0f/s (%.2fx)" % (mode, base, other, other / base))


if __name__ == "__main__":
    main()
