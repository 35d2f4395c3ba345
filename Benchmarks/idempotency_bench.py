#!/usr/bin/env python3
"""What an Idempotency-Key costs (issue 28), against the same requests without one, in one run.

    Benchmarks/idempotency_bench.py [--rounds 5] [--seconds 10]

1. POST /action, wrk with 64 keep-alive connections over 64 `counter` sessions on one SQLite
   server (release build): rounds alternate between requests without a key, requests each with
   a key of its own that sorts after the ones before (as ReactorClient's keys, the time first),
   and requests with random keys (as UUIDv4s); all formatted per request by wrk, with a header of
   the same size. The ratios of the medians are the figures (target >= 0.85).
2. Storage per key: the answers kept by the keyed rounds, as the file holds them (the pages of
   the `answers` table and its index, from SQLite's dbstat) and as row payload.

Uses the release build (.build-bench, as bench.sh) unless REACTORD_BIN names one; wrk from
Debian's packages.
"""
import argparse
import os
import shutil
import sqlite3
import statistics
import tempfile

from action_load import actions_per_second, build
from store_bench import Server


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=int, default=10)
    args = parser.parse_args()
    binary = build()
    folder = tempfile.mkdtemp(prefix="reactord-keys-bench-")
    path = os.path.join(folder, "keys.sqlite")
    try:
        server = Server(binary, "sqlite:" + path)
        sessions = server.counters(64)
        plain, keyed, scattered = [], [], []
        try:
            for round_ in range(args.rounds):
                # Both formatted per request by wrk (a key must be new each time), one with a key.
                plain.append(actions_per_second(server.port, sessions, args.seconds, folder, mode="reactord-fresh"))
                keyed.append(actions_per_second(server.port, sessions, args.seconds, folder, mode="reactord-keyed"))
                scattered.append(actions_per_second(server.port, sessions, args.seconds, folder,
                                                    mode="reactord-keyed-random"))
                print("round %d: actions/s without keys %.0f, with keys in time order %.0f (%.2fx), "
                      "with random keys %.0f (%.2fx)" % (round_ + 1, plain[-1], keyed[-1], keyed[-1] / plain[-1],
                                                         scattered[-1], scattered[-1] / plain[-1]), flush=True)
        finally:
            server.stop()
        reference = statistics.median(plain)
        print("throughput actions/s without=%.0f time-ordered=%.0f (%.2fx) random=%.0f (%.2fx) "
              "(medians of %d rounds; target >= 0.85)"
              % (reference, statistics.median(keyed), statistics.median(keyed) / reference,
                 statistics.median(scattered), statistics.median(scattered) / reference, args.rounds), flush=True)
        db = sqlite3.connect(path)
        count, payload = db.execute("SELECT count(*), sum(length(scope) + length(key) + length(request) + 8 "
                                    "+ length(headers) + length(body) + 8) FROM answers").fetchone()
        try:
            pages = db.execute("SELECT sum(pgsize) FROM dbstat WHERE name IN ('answers', 'answers_by_key')").fetchone()[0]
        except sqlite3.OperationalError:
            pages = None   # this SQLite has no dbstat
        db.close()
        if count:
            print("storage: %d keys kept, %.0f bytes of row payload per key%s"
                  % (count, payload / count, "" if pages is None else ", %.0f bytes of pages per key (table and index)"
                     % (pages / count)))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
