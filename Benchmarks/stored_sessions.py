#!/usr/bin/env python3
"""Sessions that live in the store (issue 27): a node with a million stored sessions.

    Benchmarks/stored_sessions.py [--stored 1000000] [--active 10000] [--seconds 20] [--expire 100000]

1. Restart with --stored sessions in the SQLite file: seconds from exec to /readyz 200 (target <= 3 s).
2. --active of them in use: wrk, 8 connections, POST /action round robin over the active ids
   (each first touch loads a session). RSS once every active session is loaded (target <= 150 MB),
   the actions/s, and the loads' duration from the server's own histogram
   (reactord_session_load_duration_seconds: p50 <= 1 ms, p99 <= 5 ms), then the client's view:
   GET /sessions/{id} of 300 stored sessions not loaded yet, one at a time.
3. The same wrk load on a file with only the active sessions in it (same binary, same run): the
   actions/s ratio says what a million stored sessions cost a loaded one.
4. --expire sessions stored past the TTL, deleted by the server while a client acts on 64 live
   sessions one request at a time: the longest wait of that client while expiry ran (target <= 50 ms),
   and how long expiry took.

Uses the release build (.build-bench, as bench.sh) unless REACTORD_BIN names one.
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

from action_load import build
from store_bench import Server

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "Benchmarks", "load", "action.lua")
ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def fill(binary, path, count, last_active):
    """`count` counter sessions written with SQLite directly (into the schema reactord made)."""
    Server(binary, "sqlite:" + path).stop()
    db = sqlite3.connect(path)
    ids = []
    for start in range(0, count, 100_000):
        rows = []
        for index in range(start, min(count, start + 100_000)):
            session = "".join(random.choice(ALPHABET) for _ in range(21)) + random.choice("AQgw")
            state = '{"alertMessage":null,"count":%d,"user":null}' % (index % 100)
            rows.append((session, "counter", state, index % 100, last_active, last_active))
            ids.append(session)
        db.executemany("INSERT INTO sessions (id, kind, state, version, created_at, last_active) "
                       "VALUES (?,?,?,?,?,?)", rows)
        db.commit()
    db.close()
    return ids


def wrk(port, sessions, seconds, folder):
    ids = os.path.join(folder, "sessions.txt")
    with open(ids, "w") as out:
        out.write("\n".join(sessions) + "\n")
    result = subprocess.run(["wrk", "-t1", "-c8", "-d%ds" % seconds, "-s", SCRIPT, "http://127.0.0.1:%d" % port,
                             "--", "reactord", ids], check=True, capture_output=True, text=True).stdout
    if "Non-2xx" in result:
        sys.exit("non-2xx answers under load:\n" + result)
    return float(re.search(r"Requests/sec:\s+([0-9.]+)", result).group(1))


def histogram(server, name):
    """Quantiles (as bucket upper bounds, in ms) and count of one histogram of /metrics."""
    text = server.request("GET", "/metrics")[1].decode()
    buckets = [(float("inf") if bound == "+Inf" else float(bound) * 1000, int(count))
               for bound, count in re.findall(name + r'_bucket\{le="([^"]+)"\} (\d+)', text)]
    total = buckets[-1][1] if buckets else 0

    def quantile(q):
        return next((bound for bound, count in buckets if count >= q * total), float("nan"))
    return quantile(0.5), quantile(0.99), total


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--stored", type=int, default=1_000_000)
    parser.add_argument("--active", type=int, default=10_000)
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--expire", type=int, default=100_000)
    args = parser.parse_args()
    binary = build()
    folder = tempfile.mkdtemp(prefix="reactord-stored-bench-")
    try:
        path = os.path.join(folder, "million.sqlite")
        began = time.monotonic()
        sessions = fill(binary, path, args.stored, time.time())
        print("filled %d sessions in %.0f s (%.0f MB)" % (len(sessions), time.monotonic() - began,
                                                         os.path.getsize(path) / 1e6), flush=True)
        server = Server(binary, "sqlite:" + path)
        print("restart with %d stored sessions: /readyz 200 after %.2f s (target <= 3 s)"
              % (args.stored, server.healthy_after("/readyz")), flush=True)
        active = random.sample(sessions, args.active)
        warm = wrk(server.port, active, max(5, args.seconds // 2), folder)   # loads every active session
        rate = wrk(server.port, active, args.seconds, folder)
        health = json.loads(server.request("GET", "/healthz")[1])
        p50, p99, loads = histogram(server, "reactord_session_load_duration_seconds")
        print("%d active: %.0f actions/s (warm-up %.0f); RSS %.1f MB with %d loaded (target <= 150 MB); "
              "loads %d, server's load time p50 <= %.2f ms, p99 <= %.2f ms (targets 1 / 5 ms)"
              % (args.active, rate, warm, server.rss() / 1e6, health["loaded_sessions"], loads, p50, p99), flush=True)
        cold = [session for session in random.sample(sessions, 2 * 300) if session not in set(active)][:300]
        waits = []
        for session in cold:
            began = time.monotonic()
            status, _ = server.request("GET", "/sessions/" + session)
            waits.append((time.monotonic() - began) * 1000)
            if status != 200:
                sys.exit("a stored session answered %d" % status)
        waits.sort()
        print("client's view of a load (GET of a stored session not loaded, one at a time, 300): p50 %.2f ms, "
              "p99 %.2f ms" % (waits[len(waits) // 2], waits[int(len(waits) * 0.99)]), flush=True)
        server.stop()

        small = os.path.join(folder, "active-only.sqlite")
        only = fill(binary, small, args.active, time.time())
        server = Server(binary, "sqlite:" + small)
        wrk(server.port, only, max(5, args.seconds // 2), folder)
        alone = wrk(server.port, only, args.seconds, folder)
        server.stop()
        print("same load, a file of only the %d active sessions: %.0f actions/s; with %d stored: %.2fx"
              % (args.active, alone, args.stored, rate / alone), flush=True)

        expiring = os.path.join(folder, "expiring.sqlite")
        fill(binary, expiring, args.expire, time.time() - 7200)
        server = Server(binary, "sqlite:" + expiring, "--session-ttl", "3600")
        live = server.counters(64)
        began, longest, requests = time.monotonic(), 0.0, 0
        while time.monotonic() - began < 600:   # bounded
            for session in live:
                body = json.dumps({"session": session, "action": {"type": "increase"}}).encode()
                sent = time.monotonic()
                status, _ = server.request("POST", "/action", body)
                longest = max(longest, time.monotonic() - sent)
                requests += 1
                if status != 200:
                    sys.exit("an action answered %d while sessions expired" % status)
            if json.loads(server.request("GET", "/healthz")[1])["stored_sessions"] <= len(live):
                break
        took = time.monotonic() - began
        server.stop()
        print("expiring %d stored sessions while serving: done in %.1f s; %d actions, the longest waited %.1f ms "
              "(target <= 50 ms)" % (args.expire, took, requests, longest * 1000), flush=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
