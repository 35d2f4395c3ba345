#!/usr/bin/env python3
"""What the action log costs (issue 29), against the same build with `--action-log 0`, in one run.

    Benchmarks/action_log_bench.py [--rounds 5] [--seconds 10]

1. POST /action, wrk with 64 keep-alive connections over 64 `counter` sessions: two SQLite
   servers of the same release build, one with the log (the default, 1000 entries a session) and
   one with `--action-log 0`, each on a file of its own; rounds alternate between them. The ratio
   of the medians is the figure (target >= 0.85). Each server's bytes written (write syscalls,
   the WAL and its checkpoints), write calls and CPU time per action, from /proc, over all rounds.
2. Storage per action: the log's share of the `events` table's rows as payload, and the table's
   pages per event with the log and without (from SQLite's dbstat).

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


def process_usage(pid):
    """(bytes written by write calls, write calls, CPU seconds) of process `pid` so far."""
    fields = dict(line.split(": ") for line in open("/proc/%d/io" % pid).read().splitlines() if line)
    stat = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return int(fields["wchar"]), int(fields["syscw"]), (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=int, default=10)
    args = parser.parse_args()
    binary = build()
    folder = tempfile.mkdtemp(prefix="reactord-log-bench-")
    logged_path = os.path.join(folder, "logged.sqlite")
    try:
        off = Server(binary, "sqlite:" + os.path.join(folder, "off.sqlite"), "--action-log", "0")
        on = Server(binary, "sqlite:" + logged_path)
        off_sessions, on_sessions = off.counters(64), on.counters(64)
        without, with_log = [], []
        usage = {off: [0.0, 0.0, 0.0, 0.0], on: [0.0, 0.0, 0.0, 0.0]}   # bytes, writes, CPU s, actions

        def measured(server, sessions):
            before = process_usage(server.process.pid)
            rate = actions_per_second(server.port, sessions, args.seconds, folder)
            after = process_usage(server.process.pid)
            totals = usage[server]
            for index in range(3):
                totals[index] += after[index] - before[index]
            totals[3] += rate * (args.seconds + 2)   # wrk's 2 s warm-up runs at about the same rate
            return rate

        try:
            for round_ in range(args.rounds):
                without.append(measured(off, off_sessions))
                with_log.append(measured(on, on_sessions))
                print("round %d: actions/s with --action-log 0 %.0f, with the log %.0f (%.2fx)"
                      % (round_ + 1, without[-1], with_log[-1], with_log[-1] / without[-1]), flush=True)
        finally:
            off.stop()
            on.stop()
        for name, server in (("--action-log 0", off), ("with the log", on)):
            written, writes, cpu, actions = usage[server]
            print("%s: %.0f bytes written, %.2f write calls, %.0f us of CPU per action"
                  % (name, written / actions, writes / actions, cpu / actions * 1e6), flush=True)
        reference = statistics.median(without)
        print("throughput actions/s without the log=%.0f with=%.0f (%.2fx; medians of %d rounds; target >= 0.85)"
              % (reference, statistics.median(with_log), statistics.median(with_log) / reference, args.rounds),
              flush=True)
        # SQLite keeps an entry on the row of the event it ended on (cause NOT NULL), or as a row of
        # its own (key above 2^62) when there is none.
        db = sqlite3.connect(logged_path)
        count, payload = db.execute(
            "SELECT count(*), sum(8 + length(cause) + 8 + 8 + coalesce(length(action), 0) + coalesce(length(subject), 0) "
            "+ coalesce(length(idempotency_key), 0) + 8 "
            "+ CASE WHEN seq > (1 << 62) THEN length(session) + 8 + length(data) ELSE 0 END) "
            "FROM events WHERE cause IS NOT NULL").fetchone()
        db.close()
        pages = {}
        for name, path in (("with the log", logged_path), ("--action-log 0", os.path.join(folder, "off.sqlite"))):
            db = sqlite3.connect(path)
            events = db.execute("SELECT count(*) FROM events WHERE seq < (1 << 62)").fetchone()[0]
            try:
                pages[name] = db.execute("SELECT sum(pgsize) FROM dbstat WHERE name = 'events'").fetchone()[0] / events
            except sqlite3.OperationalError:
                pass   # this SQLite has no dbstat
            db.close()
        if count:
            print("storage: %d entries kept, %.0f bytes of row payload per entry; the events table's pages per event: %s"
                  % (count, payload / count, ", ".join("%.0f bytes %s" % (size, name) for name, size in pages.items())))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
