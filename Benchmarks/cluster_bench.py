#!/usr/bin/env python3
"""Cluster mode's speed, against the SQLite store in the same run (issues 12 and 31).

    Benchmarks/cluster_bench.py [--rounds 3] [--seconds 8] [--against OLD_BINARY | --on-holder]

A PostgreSQL server is started here (scripts/postgres-test-server, loopback, a temporary
folder), then for --rounds rounds:

1. POST /action, wrk with 64 keep-alive connections over 64 `counter` sessions, one
   libmicrohttpd thread per node: a single node on `sqlite:…` (the reference), node A of a
   two-node cluster for sessions A holds (through the holder, target >= 0.5x), and node B for
   the same sessions (every request forwarded to A, target >= 0.3x; issue 31: >= 0.7x of
   through the holder).
2. Cross-node delivery: a subscriber on node B of each of 8 sessions held by A, while actions
   go to A at 1,000/s for --seconds: from sending an action to its event arriving on B,
   p50/p99/max (issue 31's target: p99 <= 5 ms, max <= 20 ms). With --against, only this part, --rounds times for
   each binary, alternated: the figure against another build's in the same run. With
   --on-holder, only this part, alternated with the subscribers on node A itself.
3. Takeover after kill -9, default lease (5 s): node A holds a session and is killed; node B
   is asked every 50 ms until it answers 200: seconds from the kill (target <= 10 s).
4. The peer, nginx+nchan with Redis (Benchmarks/nchan_redis_peer.py: two nodes of one worker
   on one Redis without persistence): publish/s on one node, and node 1 -> a subscriber on
   node 2 at 1,000 messages/s as in part 2. Skipped, saying why, where nchan or Redis is missing.

Uses the release build (.build-bench) unless REACTORD_BIN names one; wrk from Debian's packages.
"""
import argparse
import http.client
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from action_load import ROOT, actions_per_second, build, free_port
import nchan_redis_peer
from delivery_latency import delivery_latency

PG = os.path.join(ROOT, "scripts", "postgres-test-server")
STARTED = []   # every node, killed on the way out whatever happens


def stop_all(pg_dir, folder):
    """Kills every node started, stops PostgreSQL and removes the run's folder."""
    for node in STARTED:
        if node.process.poll() is None:
            node.process.kill()
    subprocess.run([PG, "stop", pg_dir], capture_output=True)
    shutil.rmtree(folder, ignore_errors=True)


def createdb(pg_dir, name):
    """A fresh database on the benchmark's PostgreSQL server; its URL."""
    out = subprocess.run([PG, "createdb", pg_dir, name], check=True, capture_output=True, text=True).stdout
    return out.strip().splitlines()[-1]


class Node:
    def __init__(self, binary, store, *extra):
        self.port = free_port()
        self.log = tempfile.TemporaryFile()
        self.process = subprocess.Popen([binary, "--port", str(self.port), "--admin-token", "t", "--access-log", "off",
                                         "--connections-per-ip", "0",
                                         "--store", store, *extra], stdout=subprocess.DEVNULL, stderr=self.log)
        STARTED.append(self)
        for _ in range(2000):
            try:
                if self.request("GET", "/healthz")[0] == 200:
                    return
            except OSError:
                time.sleep(0.01)
        self.log.seek(0)
        sys.exit("reactord did not start: " + self.log.read().decode())

    def request(self, method, path, body=None, timeout=10):
        client = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            client.request(method, path, body=body)
            response = client.getresponse()
            return response.status, response.read()
        finally:
            client.close()

    def create(self):
        return json.loads(self.request("POST", "/sessions", b'{"reactor":"counter"}')[1])["session"]

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=15)


def warnings(nodes):
    lines = []
    for node in nodes:
        node.log.seek(0)
        lines += [line for line in node.log.read().decode().splitlines() if "info" not in line.split(" ", 3)[1:2]]
    return "\n".join(lines[-20:])


def wrk(port, sessions, seconds, folder):
    return actions_per_second(port, sessions, seconds, folder,
                              explain=lambda: "\nthe nodes' log:\n" + warnings(STARTED))


def cross_node_latency(a, b, seconds):
    """8 sessions held by `a`, a subscriber of each on `b`, 1,000 actions/s sent to `a` (125/s a
    session): from sending an action to its state event arriving on `b`."""
    sessions = [a.create() for _ in range(8)]

    def send(session, connection):
        body = json.dumps({"session": session, "action": {"type": "increase"}}).encode()
        connection.request("POST", "/action", body)
        return json.loads(connection.getresponse().read())["version"]

    return delivery_latency({session: "/sessions/%s/events" % session for session in sessions}, b.port, a.port,
                            rb"event: state\nid: (\d+)\n", send, seconds)


def takeover(binary, dsn):
    a = Node(binary, dsn)
    b = Node(binary, dsn)
    session = a.create()
    body = json.dumps({"session": session, "action": {"type": "increase"}}).encode()
    assert b.request("POST", "/action", body)[0] == 200   # forwarded: A holds it
    killed = time.monotonic()
    a.process.send_signal(signal.SIGKILL)
    a.process.wait()
    statuses = {}
    while True:
        try:
            status, _ = b.request("POST", "/action", body, timeout=15)
        except OSError:
            status = None
        statuses[status] = statuses.get(status, 0) + 1
        if status == 200:
            break
        time.sleep(0.05)
    seconds = time.monotonic() - killed
    b.stop()
    return seconds, statuses


def latency_round(binary, dsn, seconds, label="node A -> subscriber on node B", on_holder=False):
    """Part 2 once, on a fresh database: (p50, p99) in ms. `on_holder`: the subscribers on node
    A itself, for what delivery costs without crossing nodes."""
    a, b = Node(binary, dsn), Node(binary, dsn)
    rate, delays, lost = cross_node_latency(a, a if on_holder else b, seconds)
    a.stop()
    b.stop()
    if not delays:
        sys.exit("no event reached node B")
    p50, p99 = delays[len(delays) // 2], delays[int(len(delays) * 0.99)]
    print("%s at %.0f actions/s: p50 %.1f ms, p99 %.1f ms, max %.1f ms, %d of %d events not seen "
          "(target p99 <= 5 ms, max <= 20 ms)" % (label, rate, p50, p99, delays[-1], lost, len(delays) + lost), flush=True)
    return p50, p99


def compare_latency(variants, pg_dir, rounds, seconds):
    """Part 2 for each variant (label -> (binary, subscribers on the holder?)), alternated."""
    results = {label: [] for label in variants}
    for round_ in range(rounds):
        for index, (label, (binary, on_holder)) in enumerate(variants.items()):
            dsn = createdb(pg_dir, "bench_latency_%d_%d" % (round_, index))
            results[label].append(latency_round(binary, dsn, seconds, label="round %d, %s" % (round_ + 1, label),
                                                on_holder=on_holder))
    for name, found in results.items():
        print("%s: median p50 %.1f ms, median p99 %.1f ms (%d rounds)"
              % (name, statistics.median(p for p, _ in found), statistics.median(p for _, p in found), rounds))


def peer_round(seconds):
    lacking = nchan_redis_peer.missing()
    if lacking:
        print("peer nginx+nchan+Redis: skipped, %s is not installed" % lacking, flush=True)
        return
    peer = nchan_redis_peer.NchanRedisCluster()
    try:
        rate = nchan_redis_peer.publish_rate(peer.ports[0], seconds)
        print("peer nginx+nchan+Redis: publish %.0f/s on one node" % rate, flush=True)
        sent, delays, lost = nchan_redis_peer.cross_node_latency(peer.ports[0], peer.ports[1], seconds)
        print("peer nginx+nchan+Redis: node 1 -> subscriber on node 2 at %.0f messages/s: p50 %.1f ms, p99 %.1f ms, "
              "max %.1f ms, %d of %d messages not seen" % (sent, delays[len(delays) // 2], delays[int(len(delays) * 0.99)],
                                                          delays[-1], lost, len(delays) + lost), flush=True)
    finally:
        peer.stop()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=8)
    parser.add_argument("--against", help="another reactord binary: cross-node delivery only, alternated")
    parser.add_argument("--on-holder", action="store_true",
                        help="cross-node delivery only, alternated with the subscribers on the holder itself")
    args = parser.parse_args()
    binary = build()
    folder = tempfile.mkdtemp(prefix="reactord-cluster-bench-")
    pg_dir = tempfile.mkdtemp(prefix="reactord-cluster-bench-pg-")   # its own: the script hands it to postgres
    # Each measurement gets a database of its own (createdb below), not the server's first one.
    subprocess.run([PG, "start", pg_dir, str(free_port())], check=True, capture_output=True)
    try:
        if args.against:
            return compare_latency({binary: (binary, False), args.against: (args.against, False)}, pg_dir,
                                   args.rounds, args.seconds)
        if args.on_holder:
            return compare_latency({"subscribers on node B": (binary, False), "subscribers on node A, the holder":
                                    (binary, True)}, pg_dir, args.rounds, args.seconds)
        reference, holder, forwarded = [], [], []
        for round_ in range(args.rounds):
            single = Node(binary, "sqlite:" + os.path.join(folder, "bench-%d.sqlite" % round_))
            reference.append(wrk(single.port, [single.create() for _ in range(64)], args.seconds, folder))
            single.stop()
            dsn = createdb(pg_dir, "bench_%d" % round_)
            a, b = Node(binary, dsn), Node(binary, dsn)
            sessions = [a.create() for _ in range(64)]
            holder.append(wrk(a.port, sessions, args.seconds, folder))
            forwarded.append(wrk(b.port, sessions, args.seconds, folder))
            a.stop()
            b.stop()
            print("round %d: actions/s sqlite %.0f, postgres via the holder %.0f (%.2fx), forwarded %.0f (%.2fx)"
                  % (round_ + 1, reference[-1], holder[-1], holder[-1] / reference[-1], forwarded[-1],
                     forwarded[-1] / reference[-1]), flush=True)
        ref = statistics.median(reference)
        print("throughput (medians of %d rounds): sqlite %.0f/s; via the holder %.0f/s = %.2fx (target >= 0.5); "
              "forwarded %.0f/s = %.2fx (target >= 0.3), %.2fx of via the holder (target >= 0.7)"
              % (args.rounds, ref, statistics.median(holder), statistics.median(holder) / ref,
                 statistics.median(forwarded), statistics.median(forwarded) / ref,
                 statistics.median(forwarded) / statistics.median(holder)), flush=True)

        dsn = createdb(pg_dir, "bench_latency")
        a, b = Node(binary, dsn), Node(binary, dsn)
        latency_round(binary, dsn, args.seconds)

        dsn = createdb(pg_dir, "bench_takeover")
        seconds, statuses = takeover(binary, dsn)
        print("takeover after kill -9 (lease 5 s): node B answered 200 after %.2f s; answers meanwhile: %s "
              "(target <= 10 s)" % (seconds, statuses), flush=True)
        peer_round(args.seconds)
    finally:
        stop_all(pg_dir, folder)


if __name__ == "__main__":
    main()
