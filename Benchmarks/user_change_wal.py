#!/usr/bin/env python3
"""The SQLite WAL file under user changes over many sessions in memory.

One reactord on a fresh SQLite file in a temporary folder; SESSIONS sessions opened (and kept
in memory: --unload-after 0), then CHANGES `PUT /user`s a second apart. Prints the WAL file's
size after each change and its largest. A user change writes every session in memory.

    REACTORD_BIN=<release reactord> python3 Benchmarks/user_change_wal.py --sessions 6000 --changes 20
"""
import argparse
import json
import os
import tempfile
import time

from store_bench import Server


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=6000)
    parser.add_argument("--changes", type=int, default=20)
    args = parser.parse_args()
    binary = os.environ.get("REACTORD_BIN", ".build/release/reactord")
    with tempfile.TemporaryDirectory() as folder:
        store = os.path.join(folder, "s.sqlite")
        server = Server(binary, f"sqlite:{store}", "--session-create-rate", "0", "--unload-after", "0")
        try:
            server.counters(args.sessions)
            largest = 0
            for change in range(1, args.changes + 1):
                server.client.request("PUT", "/user", body=json.dumps({"id": f"u{change}", "name": "n"}),
                                      headers={"Authorization": "Bearer t"})
                answer = server.client.getresponse()
                answer.read()
                assert answer.status == 200, answer.status
                time.sleep(1.0)
                size = os.path.getsize(store + "-wal")
                largest = max(largest, size)
                print(f"after change {change}: WAL {size / 1e6:.1f} MB", flush=True)
            print(f"sessions {args.sessions}, changes {args.changes}: largest WAL {largest / 1e6:.1f} MB")
        finally:
            server.stop()


if __name__ == "__main__":
    main()
