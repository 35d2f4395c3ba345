#!/usr/bin/env python3
"""The durable store's cost, measured against the memory store in the same run (issue 11).

    Benchmarks/store_bench.py [--rounds 3] [--seconds 10] [--stored 100000]

1. POST /action, wrk with 64 keep-alive connections over 64 `counter` sessions, one libmicrohttpd
   thread: `--store memory` and `--store sqlite:…` alternate for --rounds rounds; the ratio of
   the medians is the figure (target >= 0.7, aim 0.9).
2. Restart with --stored sessions in the file: seconds from exec to the first 200 of /healthz
   (target <= 3 s), and the latency of the first action on 20 random stored sessions (each one
   brought back from the store; target <= 50 ms).
3. Memory per session brought back from the store, against a session made in the memory store
   (RSS growth over 10,000 of each, same binary).

Uses the release build (.build-bench, as bench.sh) unless REACTORD_BIN names one; wrk from
Debian's packages. Prints one line per figure; exits non-zero only when something failed to run.
"""
import argparse
import http.client
import json
import os
import random
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

from action_load import actions_per_second, build


class Server:
    def __init__(self, binary, store, *extra):
        self.log = tempfile.NamedTemporaryFile(prefix="reactord-store-bench-", suffix=".log", delete=False)
        self.started = time.monotonic()
        self.process = subprocess.Popen([binary, "--port", "0", "--admin-token", "t", "--log-level", "info",
                                         "--connections-per-ip", "0",
                                         "--store", store, *extra], stderr=self.log)
        self.port = None
        for _ in range(600):
            text = open(self.log.name).read()
            match = re.search(r"port=(\d+)", text)
            if match:
                self.port = int(match.group(1))
                break
            if self.process.poll() is not None:
                sys.exit("reactord exited: " + text)
            time.sleep(0.005)
        if self.port is None:
            sys.exit("reactord did not start")
        self.client = http.client.HTTPConnection("127.0.0.1", self.port)

    def request(self, method, path, body=None):
        self.client.request(method, path, body=body)
        response = self.client.getresponse()
        return response.status, response.read()

    def counters(self, count):
        """The ids of `count` new `counter` sessions."""
        return [json.loads(self.request("POST", "/sessions", b'{"reactor":"counter"}')[1])["session"]
                for _ in range(count)]

    def healthy_after(self, path="/healthz"):
        """Seconds from exec until `path` answers 200."""
        while True:
            try:
                client = http.client.HTTPConnection("127.0.0.1", self.port, timeout=1)
                client.request("GET", path)
                if client.getresponse().status == 200:
                    return time.monotonic() - self.started
            except OSError:
                pass
            time.sleep(0.002)

    def rss(self):
        with open("/proc/%d/status" % self.process.pid) as status:
            return int(re.search(r"VmRSS:\s+(\d+) kB", status.read()).group(1)) * 1024

    def stop(self):
        self.client.close()
        self.process.terminate()
        self.process.wait(timeout=15)
        os.unlink(self.log.name)


def throughput(binary, store, seconds, folder):
    server = Server(binary, store)
    sessions = server.counters(64)
    try:
        return actions_per_second(server.port, sessions, seconds, folder)
    finally:
        server.stop()


def fill(binary, path, count):
    """A store file with `count` counter sessions, written with SQLite directly (the schema
    is the one reactord made in it)."""
    Server(binary, "sqlite:" + path).stop()
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    now = time.time()
    db = sqlite3.connect(path)
    rows = []
    for index in range(count):
        session = "".join(random.choice(alphabet) for _ in range(21)) + random.choice("AQgw")
        state = json.dumps({"alertMessage": None, "count": index % 100, "user": None}, separators=(",", ":"))
        rows.append((session, "counter", state, index % 100, now, now))
    db.executemany("INSERT INTO sessions (id, kind, state, version, created_at, last_active) VALUES (?,?,?,?,?,?)",
                   rows)
    db.commit()
    db.close()
    return [row[0] for row in rows]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--stored", type=int, default=100_000)
    args = parser.parse_args()
    binary = build()
    folder = tempfile.mkdtemp(prefix="reactord-store-bench-")
    try:
        memory, durable = [], []
        for round_ in range(args.rounds):
            memory.append(throughput(binary, "memory", args.seconds, folder))
            path = os.path.join(folder, "throughput-%d.sqlite" % round_)
            durable.append(throughput(binary, "sqlite:" + path, args.seconds, folder))
            print("round %d: actions/s memory %.0f, sqlite %.0f (%.2fx)"
                  % (round_ + 1, memory[-1], durable[-1], durable[-1] / memory[-1]), flush=True)
        ratio = statistics.median(durable) / statistics.median(memory)
        print("throughput actions/s memory=%.0f sqlite=%.0f ratio=%.2f (medians of %d rounds; target >= 0.7)"
              % (statistics.median(memory), statistics.median(durable), ratio, args.rounds), flush=True)

        path = os.path.join(folder, "stored.sqlite")
        sessions = fill(binary, path, args.stored)
        server = Server(binary, "sqlite:" + path)
        ready = server.healthy_after()
        latencies = []
        for session in random.sample(sessions, 20):
            body = json.dumps({"session": session, "action": {"type": "increase"}}).encode()
            began = time.monotonic()
            status, _ = server.request("POST", "/action", body)
            latencies.append((time.monotonic() - began) * 1000)
            if status != 200:
                sys.exit("first action on a stored session answered %d" % status)
        print("restart with %d stored sessions: /healthz 200 after %.2f s (target <= 3 s); first action on a stored "
              "session: median %.1f ms, max %.1f ms (target <= 50 ms)"
              % (args.stored, ready, statistics.median(latencies), max(latencies)), flush=True)

        before = server.rss()
        for session in sessions[:10_000]:
            server.request("GET", "/sessions/" + session)
        restored = (server.rss() - before) / 10_000
        server.stop()
        server = Server(binary, "memory")
        before = server.rss()
        for _ in range(10_000):
            server.request("POST", "/sessions", b"")
        made = (server.rss() - before) / 10_000
        server.stop()
        print("memory per session: restored from the store %.2f KiB, made in the memory store %.2f KiB "
              "(RSS growth over 10,000; target <= 4 KB)" % (restored / 1024, made / 1024), flush=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
