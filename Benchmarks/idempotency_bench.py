#!/usr/bin/env python3
"""What an Idempotency-Key costs (issue 28), against the same requests without one, in one run.

    Benchmarks/idempotency_bench.py [--rounds 5] [--seconds 10] [--against OTHER_BIN]

1. POST /action, wrk with 64 keep-alive connections over 64 `counter` sessions on one SQLite
   server (release build): rounds alternate between requests without a key, requests each with
   a key of its own that sorts after the ones before (as ReactorClient's keys, the time first),
   and requests with random keys (as UUIDv4s); all formatted per request by wrk, with a header of
   the same size. The ratios of the medians are the figures (target >= 0.85). The keys pile up
   over the rounds in the one file, as they would over a TTL.
   Printed per action beside the rate, from /proc: the server's CPU time, the bytes it wrote
   (`wchar`: WAL, checkpoints, sockets) and its read calls; counts that move far less than the
   rate when the machine is shared.
2. Storage per key: the answers kept by the keyed rounds, as the file holds them (the pages of
   the `answers` table and its index, from SQLite's dbstat) and as row payload; and the largest
   size the WAL's file reached (checkpointed WAL is reused, so it stays near 4 MB).

With --against, a second build gets a server and a file of its own, and each round runs both,
one after the other, so that the two are compared under the same load of the machine.

Uses the release build (.build-bench, as bench.sh) unless REACTORD_BIN names one; wrk from
Debian's packages.
"""
import argparse
import os
import shutil
import sqlite3
import statistics
import tempfile

from action_costs import counters, load
from action_load import build
from store_bench import Server

MODES = [("without keys", "reactord-fresh"), ("keys in time order", "reactord-keyed"),
         ("random keys", "reactord-keyed-random")]


def storage(path):
    db = sqlite3.connect(path)
    count, payload = db.execute("SELECT count(*), sum(length(scope) + length(key) + length(request) + 8 "
                                "+ length(headers) + length(body) + 8) FROM answers").fetchone()
    try:
        pages = db.execute("SELECT sum(pgsize) FROM dbstat WHERE name IN "
                           "('answers', 'answers_by_key', 'answer_keys')").fetchone()[0]
    except sqlite3.OperationalError:
        pages = None   # this SQLite has no dbstat
    db.close()
    if not count:
        return "no keys kept"
    return "%d keys kept, %.0f bytes of row payload per key%s" % (
        count, payload / count, "" if pages is None else ", %.0f bytes of pages per key (table and key index)"
        % (pages / count))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--against", help="a second reactord build, alternated with the first in each round")
    args = parser.parse_args()
    binaries = [build()] + ([args.against] if args.against else [])
    folder = tempfile.mkdtemp(prefix="reactord-keys-bench-")
    servers, ids, paths = [], [], []
    try:
        for index, binary in enumerate(binaries):
            paths.append(os.path.join(folder, "keys-%d.sqlite" % index))
            servers.append(Server(binary, "sqlite:" + paths[-1]))
            ids.append(os.path.join(folder, "sessions-%d.txt" % index))
            with open(ids[-1], "w") as out:
                out.write("\n".join(servers[-1].counters(64)) + "\n")
        results = {}
        largest_wal = {}  # SQLite reuses a checkpointed WAL: its file stays near wal_autocheckpoint's pages
        try:
            for round_ in range(args.rounds):
                for index, server in enumerate(servers):
                    line = []
                    for name, mode in MODES:
                        load(server.port, mode, ids[index], 2)  # warm-up
                        before = counters(server.process.pid)
                        count, rate = load(server.port, mode, ids[index], args.seconds)
                        after = counters(server.process.pid)
                        row = (rate, (after[0] - before[0]) / count * 1e6, (after[1] - before[1]) / count,
                               (after[3] - before[3]) / count)
                        results.setdefault((index, name), []).append(row)
                        line.append("%s %.0f/s (cpu %.1f us, wchar %.0f B, reads %.2f)" % ((name,) + row))
                    wal = os.path.getsize(paths[index] + "-wal") if os.path.exists(paths[index] + "-wal") else 0
                    largest_wal[index] = max(largest_wal.get(index, 0), wal)
                    print("round %d, %s: %s; WAL file %.1f MB" % (round_ + 1, binaries[index], "; ".join(line), wal / 1e6),
                          flush=True)
        finally:
            for server in servers:
                # Its last checkpoint may take a while on a busy machine.
                server.client.close()
                server.process.terminate()
                server.process.wait(timeout=300)
                os.unlink(server.log.name)
        for index, binary in enumerate(binaries):
            medians = {name: [statistics.median(row[i] for row in results[(index, name)]) for i in range(4)]
                       for name, _ in MODES}
            reference = medians[MODES[0][0]]
            print("%s, medians of %d rounds (target >= 0.85):" % (binary, args.rounds))
            for name, _ in MODES:
                rate, cpu, written, reads = medians[name]
                print("  %-18s %7.0f actions/s (%.2fx)  cpu %6.1f us/action (%.2fx)  wchar %6.0f B  reads %.2f"
                      % (name, rate, rate / reference[0], cpu, cpu / reference[1], written, reads))
            print("  storage: " + storage(paths[index]))
            print("  largest WAL file: %.1f MB" % (largest_wal.get(index, 0) / 1e6))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
