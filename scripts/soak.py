#!/usr/bin/env python3
"""Soak: mixed load against a running reactord for a bounded time, sampling its RSS, open
file descriptors and threads from /proc every 10 s; fails on growth after the warm-up.

Load (all on 127.0.0.1, every loop bounded by the deadline):
  * action clients: keep-alive POST /action (increase, alert) on a pool of sessions;
  * session churn: sessions created and deleted all along (the pool is renewed);
  * subscriber churn: SSE streams opened on random sessions, read for a moment, then closed
    (half cleanly, half with a reset, as vanishing mobile clients do);
  * user changes: PUT /user and DELETE /user with the admin token, twice a second.

Checks: after the warm-up, RSS may not grow by more than max(16 MiB, 25 %), fds by more
than 64 (the load's own connections come and go), threads by more than 4; once the load
stops and the server's heartbeat has found the closed subscribers, fds return to within 2
of the idle count before the load and the subscriber gauge to 0; the server answers, then
exits 0 on SIGTERM. Exit status 0 when all hold.

Usage: soak.py BINARY [SECONDS]
"""
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

TOKEN = "soak-admin-token"
SAMPLE_EVERY = 10


def proc_sample(pid):
    status = open("/proc/%d/status" % pid).read()
    rss = int(re.search(r"VmRSS:\s+(\d+) kB", status).group(1)) * 1024
    threads = int(re.search(r"Threads:\s+(\d+)", status).group(1))
    fds = len(os.listdir("/proc/%d/fd" % pid))
    return rss, fds, threads


def being_deleted(status, body):
    """A 503 for a session whose DELETE (the churn's) waits for its commit: retry, then 404."""
    return status == 503 and b"a DELETE of this session" in body


class Client:
    """A keep-alive HTTP/1.1 client (reconnects after a close)."""

    def __init__(self, port):
        self.port, self.sock, self.buf = port, None, b""

    def request(self, method, path, body=None, headers=()):
        for attempt in range(2):
            try:
                if self.sock is None:
                    self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=10)
                    self.buf = b""
                data = body.encode() if isinstance(body, str) else (body or b"")
                head = "%s %s HTTP/1.1\r\nHost: soak\r\nContent-Length: %d\r\n" % (method, path, len(data))
                head += "".join("%s: %s\r\n" % h for h in headers) + "\r\n"
                self.sock.sendall(head.encode() + data)
                return self._read()
            except (OSError, ValueError):
                self.close()
                if attempt == 1:
                    raise
        return None

    def _read(self):
        while b"\r\n\r\n" not in self.buf:
            self._fill()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.split(b"\r\n")
        status = int(lines[0].split(b" ")[1])
        fields = {l.split(b":", 1)[0].strip().lower(): l.split(b":", 1)[1].strip() for l in lines[1:] if b":" in l}
        length = int(fields.get(b"content-length", b"0"))
        while len(self.buf) < length:
            self._fill()
        body, self.buf = self.buf[:length], self.buf[length:]
        if fields.get(b"connection", b"").lower() == b"close":
            self.close()
        return status, body

    def _fill(self):
        data = self.sock.recv(65536)
        if not data:
            raise ValueError("closed")
        self.buf += data

    def close(self):
        if self.sock is not None:
            self.sock.close()
        self.sock = None


class Load:
    def __init__(self, port, until):
        self.port, self.until = port, until
        self.lock = threading.Lock()
        self.sessions = []
        self.counts = {"actions": 0, "sessions_created": 0, "sessions_deleted": 0, "subscriptions": 0,
                       "events_read": 0, "user_changes": 0, "errors": 0}
        self.error_samples = []

    def count(self, key, n=1):
        with self.lock:
            self.counts[key] += n

    def error(self, text):
        with self.lock:
            self.counts["errors"] += 1
            if len(self.error_samples) < 10:
                self.error_samples.append(text)

    def pick(self, rng):
        with self.lock:
            return rng.choice(self.sessions) if self.sessions else None

    def create(self, client):
        status, body = client.request("POST", "/sessions", '{"reactor":"counter"}')
        if status != 201:
            self.error("POST /sessions %d" % status)
            return
        with self.lock:
            self.sessions.append(json.loads(body)["session"])
        self.count("sessions_created")

    def actions(self, seed):
        rng, client = random.Random(seed), Client(self.port)
        while time.monotonic() < self.until:
            session = self.pick(rng)
            if session is None:
                time.sleep(0.01)
                continue
            action = rng.choice(['{"type":"increase"}', '{"type":"decrease"}',
                                 '{"type":"alert","message":"soak %d"}' % rng.randint(0, 9)])
            try:
                status, body = client.request("POST", "/action", '{"session":"%s","action":%s}' % (session, action))
                if status == 200:
                    self.count("actions")
                elif status != 404 and not being_deleted(status, body):   # deleted by the churn meanwhile
                    self.error("POST /action %d %r" % (status, body[:100]))
            except Exception as e:   # noqa: BLE001
                self.error("action: %r" % e)
        client.close()

    def churn_sessions(self, seed):
        rng, client = random.Random(seed), Client(self.port)
        while time.monotonic() < self.until:
            try:
                self.create(client)
                with self.lock:
                    victim = self.sessions.pop(rng.randrange(len(self.sessions))) if len(self.sessions) > 100 else None
                if victim:
                    status, _ = client.request("DELETE", "/sessions/" + victim)
                    if status == 204:
                        self.count("sessions_deleted")
                    else:
                        self.error("DELETE %d" % status)
            except Exception as e:   # noqa: BLE001
                self.error("churn: %r" % e)
            time.sleep(0.02)
        client.close()

    def subscribers(self, seed):
        rng = random.Random(seed)
        while time.monotonic() < self.until:
            session = self.pick(rng)
            if session is None:
                time.sleep(0.01)
                continue
            try:
                sock = socket.create_connection(("127.0.0.1", self.port), timeout=5)
                sock.sendall(("GET /sessions/%s/events HTTP/1.1\r\nHost: soak\r\nAccept: text/event-stream\r\n\r\n"
                              % session).encode())
                # The answer's head first (up to 5 s, however busy the machine), then a moment of events.
                data, head_by = b"", time.monotonic() + 5
                sock.settimeout(0.2)
                while b"\r\n\r\n" not in data and time.monotonic() < head_by:
                    try:
                        chunk = sock.recv(65536)
                    except socket.timeout:
                        continue
                    if not chunk:
                        break
                    data += chunk
                end = time.monotonic() + rng.uniform(0.05, 1.5)
                while time.monotonic() < end:
                    try:
                        chunk = sock.recv(65536)
                    except socket.timeout:
                        continue
                    if not chunk:
                        break
                    data += chunk
                if not data.startswith((b"HTTP/1.1 200", b"HTTP/1.1 404")) \
                        and not being_deleted(int(data[9:12]) if data[9:12].isdigit() else 0, data):
                    self.error("subscribe: %r" % data[:80])
                self.count("subscriptions")
                self.count("events_read", data.count(b"\nevent: "))
                if rng.random() < 0.5:   # vanish with a reset
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                sock.close()
            except Exception as e:   # noqa: BLE001
                self.error("subscribe: %r" % e)

    def users(self, seed):
        rng, client = random.Random(seed), Client(self.port)
        auth = [("Authorization", "Bearer " + TOKEN)]
        while time.monotonic() < self.until:
            try:
                if rng.random() < 0.7:
                    status, _ = client.request("PUT", "/user", '{"id":"u%d","name":"user %d"}' % (rng.randint(0, 99), rng.randint(0, 99)), auth)
                    ok = status == 200
                else:
                    status, _ = client.request("DELETE", "/user", None, auth)
                    ok = status == 204
                if ok:
                    self.count("user_changes")
                else:
                    self.error("user %d" % status)
            except Exception as e:   # noqa: BLE001
                self.error("user: %r" % e)
            time.sleep(0.5)
        client.close()


def metric(port, name):
    status, body = Client(port).request("GET", "/metrics")
    m = re.search(rb"^" + name.encode() + rb" ([0-9.e+]+)$", body, re.M)
    return float(m.group(1)) if m else None


def store_size(path):
    """The database file and its WAL, in bytes."""
    return sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    binary, seconds = sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 60
    warmup = min(60.0, max(20.0, seconds / 5))
    log = open(os.environ.get("SOAK_LOG", "/tmp/reactord-soak.log"), "wb")
    # The default durable store, in a fresh file: its size is sampled too.
    data = tempfile.mkdtemp(prefix="reactord-soak-")
    store = os.path.join(data, "soak.sqlite")
    # The churn opens up to 50 sessions a second from one address: no per-address creation limit
    # (its default, 10/s in bursts of 100, is for clients; scripts/check-auth tests it).
    proc = subprocess.Popen([binary, "--port", "0", "--admin-token", TOKEN, "--heartbeat", "1",
                             "--log-level", "info", "--store", "sqlite:" + store, "--session-create-rate", "0",
                             "--connections-per-ip", "0"],
                            stderr=log)
    port = None
    for _ in range(200):
        time.sleep(0.05)
        m = re.search(rb"port=(\d+)", open(log.name, "rb").read())
        if m:
            port = int(m.group(1))
            break
    if port is None:
        proc.kill()
        sys.exit("reactord did not start")
    pid = proc.pid
    time.sleep(0.5)
    idle = proc_sample(pid)
    print("soak: %s (pid %d, port %d) for %.0f s, warm-up %.0f s; idle: RSS %.1f MiB, %d fds, %d threads"
          % (binary, pid, port, seconds, warmup, idle[0] / 2**20, idle[1], idle[2]), flush=True)

    start = time.monotonic()
    load = Load(port, start + seconds)
    setup = Client(port)
    for _ in range(100):
        load.create(setup)
    setup.close()
    workers = ([threading.Thread(target=load.actions, args=(i,)) for i in range(4)]
               + [threading.Thread(target=load.subscribers, args=(100 + i,)) for i in range(6)]
               + [threading.Thread(target=load.churn_sessions, args=(200,)), threading.Thread(target=load.users, args=(300,))])
    for w in workers:
        w.start()

    samples = []
    print("%8s %10s %6s %8s %10s %8s %12s" % ("t (s)", "RSS (MiB)", "fds", "threads", "actions", "subs", "store (MiB)"),
          flush=True)
    next_sample = start + SAMPLE_EVERY
    while time.monotonic() < start + seconds:
        time.sleep(max(0, min(next_sample, start + seconds) - time.monotonic()))
        if proc.poll() is not None:
            break
        if time.monotonic() >= next_sample - 0.01:
            rss, fds, threads = proc_sample(pid)
            t = time.monotonic() - start
            stored = store_size(store)
            samples.append((t, rss, fds, threads, stored))
            with load.lock:
                print("%8.0f %10.1f %6d %8d %10d %8d %12.1f" % (t, rss / 2**20, fds, threads, load.counts["actions"],
                                                              load.counts["subscriptions"], stored / 2**20), flush=True)
            next_sample += SAMPLE_EVERY
    for w in workers:
        w.join(timeout=30)

    failures = []
    if proc.poll() is not None:
        failures.append("reactord exited during the soak (status %s)" % proc.returncode)
    else:
        after = [s for s in samples if s[0] >= warmup - 0.5]
        if len(after) >= 2:
            base, last = after[0], after[-1]
            peak_rss = max(s[1] for s in after)
            print("after warm-up (t=%.0f s → %.0f s): RSS %.1f → %.1f MiB (peak %.1f), fds %d → %d, threads %d → %d"
                  % (base[0], last[0], base[1] / 2**20, last[1] / 2**20, peak_rss / 2**20, base[2], last[2], base[3], last[3]))
            if last[1] > base[1] + max(16 * 2**20, base[1] * 0.25):
                failures.append("RSS grew from %.1f to %.1f MiB after warm-up" % (base[1] / 2**20, last[1] / 2**20))
            if last[2] > base[2] + 64:
                failures.append("fds grew from %d to %d after warm-up" % (base[2], last[2]))
            if last[3] > base[3] + 4:
                failures.append("threads grew from %d to %d after warm-up" % (base[3], last[3]))
            # History is trimmed to --history per session and deleted sessions go: once every
            # session's history is full (minutes, not the CI's one), the file stops growing.
            half = [x for x in after if x[0] >= seconds / 2]
            print("store file (with its WAL): %.1f MiB at the warm-up's end, %.1f MiB at the end"
                  % (base[4] / 2**20, last[4] / 2**20))
            if seconds >= 300 and half and last[4] > half[0][4] * 1.25 + 4 * 2**20:
                failures.append("the store grew from %.1f to %.1f MiB in the run's second half"
                                % (half[0][4] / 2**20, last[4] / 2**20))
        else:
            failures.append("too few samples after the warm-up (run longer than %.0f s)" % (warmup + 2 * SAMPLE_EVERY))
        # Quiet: every load connection is closed; the heartbeat (1 s) finds the reset subscribers.
        # (A cleanly closed socket takes two heartbeats: the first write only draws the reset.)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and (proc_sample(pid)[1] > idle[1] + 2
                                                or metric(port, "reactord_subscribers") != 0):
            time.sleep(0.5)
        quiet = proc_sample(pid)
        subscribers = metric(port, "reactord_subscribers")
        print("quiet after the load: RSS %.1f MiB, %d fds (idle before: %d), %d threads, reactord_subscribers %s"
              % (quiet[0] / 2**20, quiet[1], idle[1], quiet[2], subscribers))
        if quiet[1] > idle[1] + 2:
            failures.append("fds did not return to idle: %d vs %d" % (quiet[1], idle[1]))
        if subscribers != 0:
            failures.append("reactord_subscribers is %s after the load" % subscribers)
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = "hung"
        if code != 0:
            failures.append("exit status %s after SIGTERM" % code)
    c = load.counts
    print("load: %d actions, %d sessions created, %d deleted, %d subscriptions (%d events read), %d user changes, %d errors"
          % (c["actions"], c["sessions_created"], c["sessions_deleted"], c["subscriptions"], c["events_read"],
             c["user_changes"], c["errors"]))
    if c["errors"]:
        failures.append("%d request errors, e.g. %s" % (c["errors"], load.error_samples[:3]))
    shutil.rmtree(data, ignore_errors=True)
    if failures:
        print("SOAK FAILED:\n  " + "\n  ".join(failures))
        sys.exit(1)
    print("SOAK OK: no growth after warm-up")


if __name__ == "__main__":
    main()
