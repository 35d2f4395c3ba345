#!/usr/bin/env python3
"""A raw-socket HTTP fuzzer for reactord.

Starts the given reactord on 127.0.0.1 (port 0), then for a bounded time throws generated
and mutated requests at it from a few threads: methods, paths, headers, framing
(Content-Length, chunked, pipelining) and JSON bodies for /action, /sessions and /user,
each sometimes mutated byte by byte. It checks that

  * the server stays up (a /healthz probe on a fresh connection answers 200 every 2 s),
  * every answer is well-formed HTTP/1.x: a status line, header fields, a body consistent
    with Content-Length or a valid chunked encoding (event streams: the head and the first
    chunks are checked, then the connection is dropped),
  * no answer is a 5xx other than 503,
  * the server exits 0 on SIGTERM afterwards and its log shows no crash.

A request that gets no answer (libmicrohttpd closes the connection on some malformed heads,
or waits for a body that never comes) is counted, not failed. Failing requests are written
to the artifacts directory. Exit status 0 when nothing failed.

Usage: fuzz_http.py BINARY [SECONDS] [--seed N] [--threads N] [--artifacts DIR]
"""
import argparse
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time

TOKEN = "fuzz-admin-token"
STATUS_LINE = re.compile(rb"^HTTP/1\.[01] ([1-5][0-9]{2})(?: [^\r\n]*)?$")
FIELD = re.compile(rb"^([!#$%&'*+.^_`|~0-9A-Za-z-]+):[ \t]*([^\r\n]*?)[ \t]*$")


class Malformed(Exception):
    pass


# ---------------------------------------------------------------- response checking

class Reader:
    def __init__(self, sock, deadline):
        self.sock, self.buf, self.deadline, self.eof = sock, b"", deadline, False

    def fill(self):
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        self.sock.settimeout(left)
        try:
            data = self.sock.recv(65536)
        except socket.timeout:
            raise TimeoutError
        except (ConnectionResetError, BrokenPipeError):
            data = b""
        if not data:
            self.eof = True
        self.buf += data
        return bool(data)

    def line(self, limit=65536):
        while b"\r\n" not in self.buf:
            if len(self.buf) > limit:
                raise Malformed("line longer than %d bytes" % limit)
            if not self.fill():
                raise EOFError
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def exactly(self, n):
        while len(self.buf) < n:
            if not self.fill():
                raise Malformed("body cut short: %d of %d bytes" % (len(self.buf), n))
        data, self.buf = self.buf[:n], self.buf[n:]
        return data


def read_response(reader, method, stream_chunks=2):
    """Reads and checks one response, after any 1xx interim ones. Returns (status, headers,
    body). Raises EOFError when the connection closed before a status line, Malformed when
    the bytes are no HTTP."""
    while True:
        status, headers, body = read_one(reader, method, stream_chunks)
        if not 100 <= status < 200:
            return status, headers, body


def read_one(reader, method, stream_chunks):
    first = reader.line()
    m = STATUS_LINE.match(first)
    if not m:
        raise Malformed("bad status line %r" % first[:200])
    status = int(m.group(1))
    headers = []
    while True:
        try:
            line = reader.line()
        except EOFError:
            raise Malformed("connection closed inside the head")
        if line == b"":
            break
        f = FIELD.match(line)
        if not f:
            raise Malformed("bad header line %r" % line[:200])
        headers.append((f.group(1).lower(), f.group(2)))
    names = [h[0] for h in headers]
    lengths = [h[1] for h in headers if h[0] == b"content-length"]
    chunked = any(h[0] == b"transfer-encoding" and b"chunked" in h[1].lower() for h in headers)
    if chunked and lengths:
        raise Malformed("both Content-Length and chunked")
    if len(set(lengths)) > 1:
        raise Malformed("conflicting Content-Length %r" % lengths)
    ctype = dict(headers).get(b"content-type", b"")
    if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
        return status, headers, b""
    if chunked:
        body = b""
        chunks = 0
        while True:
            size_line = reader.line()
            size_text = size_line.split(b";")[0].strip()
            if not re.fullmatch(rb"[0-9a-fA-F]+", size_text):
                raise Malformed("bad chunk size line %r" % size_line[:100])
            size = int(size_text, 16)
            if size == 0:
                while reader.line() != b"":   # trailers, then the blank line
                    pass
                return status, headers, body
            body += reader.exactly(size)
            if reader.exactly(2) != b"\r\n":
                raise Malformed("chunk not followed by CRLF")
            chunks += 1
            if ctype.startswith(b"text/event-stream") and chunks >= stream_chunks:
                return status, headers, body   # never ends: the head and first chunks are enough
    if lengths:
        if not re.fullmatch(rb"[0-9]+", lengths[0]):
            raise Malformed("bad Content-Length %r" % lengths[0])
        if method == "HEAD?" and not reader.buf:
            # The request bytes hold a HEAD somewhere (a mutation may have made several
            # requests of one): a head with Content-Length and no body can be its answer.
            reader.fill() if not reader.eof else None
            if not reader.buf and reader.eof:
                return status, headers, b""
        body = reader.exactly(int(lengths[0]))
        return status, headers, body
    # Close-delimited.
    while reader.fill():
        pass
    body, reader.buf = reader.buf, b""
    return status, headers, body


# ---------------------------------------------------------------- request generation

METHODS = ["GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH", "TRACE", "CONNECT", "BREW",
           "get", "G\x00T", "POST ", "", "X" * 300, "M\u00e9THOD"]
HEADER_NAMES = ["Content-Type", "Accept", "Authorization", "Last-Event-ID", "Origin", "Connection",
                "Transfer-Encoding", "Content-Length", "Expect", "Host", "X-Forwarded-For", "Cookie",
                "If-None-Match", "Range", "Upgrade"]


def rand_string(rng, n=None):
    n = rng.randint(0, 40) if n is None else n
    pool = ["a", "Z", "0", " ", "\"", "\\", "/", "%", "{", "}", "[", "]", ":", ",", "\u00e9", "\u2603",
            "\U0001F600", "\x00", "\x1f", "\n", "\r", "\t", "\ud800" if rng.random() < 0.1 else "x"]
    return "".join(rng.choice(pool) for _ in range(n))


def rand_json(rng, depth=0):
    kind = rng.randint(0, 7 if depth < 4 else 4)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice([True, False])
    if kind == 2:
        return rng.choice([0, -1, 1, 2**31, 2**63, -2**63, 2**64, 10**30, 1.5, -0.0, 1e308])
    if kind == 3:
        return rand_string(rng)
    if kind == 4:
        return rng.choice(["increase", "decrease", "alert", "doSomeAction", "counter", ""])
    if kind == 5:
        return [rand_json(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    keys = ["type", "message", "session", "action", "reactor", "id", "name", rand_string(rng, 5)]
    return {rng.choice(keys): rand_json(rng, depth + 1) for _ in range(rng.randint(0, 4))}


def action_body(rng, sessions):
    session = rng.choice(sessions + ["AAAAAAAAAAAAAAAAAAAAAA", "", rand_string(rng, 22)])
    action = rng.choice([
        {"type": "increase"}, {"type": "decrease"}, {"type": "doSomeAction"},
        {"type": "alert", "message": rand_string(rng)},
        {"type": "alert", "message": rand_string(rng, rng.randint(0, 3000))},
        {"type": rand_string(rng, 8)}, {"type": "alert"}, {"type": "alert", "message": rand_json(rng)},
        rand_json(rng)])
    body = {"session": session, "action": action}
    if rng.random() < 0.2:
        body = rand_json(rng)
    return body


def encode_json(rng, value):
    text = json.dumps(value, ensure_ascii=rng.random() < 0.5)
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        data = text.encode("utf-8", "surrogatepass")   # invalid UTF-8 on purpose
    if rng.random() < 0.1:
        data = b" \t\r\n" + data + b"\n"
    return data


def mutate(rng, data):
    """Byte-level mutations: flips, inserts, deletions, truncation, duplication, splices."""
    data = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randint(0, 6)
        pos = rng.randint(0, len(data)) if data else 0
        if op == 0 and data:
            data[min(pos, len(data) - 1)] ^= 1 << rng.randint(0, 7)
        elif op == 1:
            data[pos:pos] = bytes([rng.randint(0, 255)])
        elif op == 2 and data:
            del data[pos:pos + rng.randint(1, 8)]
        elif op == 3:
            del data[pos:]
        elif op == 4 and data:
            end = min(len(data), pos + rng.randint(1, 64))
            data[pos:pos] = data[pos:end] * rng.randint(1, 50)
        elif op == 5:
            data[pos:pos] = rng.choice([b"\x00", b"\r\n", b"\r", b"\n", b"%00", b"%", b"\xff\xfe", b"\"", b"\\u0000",
                                        b"{", b"]", b"HTTP/1.1", b" ", b":", b"\r\n\r\n", b"0\r\n\r\n"])
        elif op == 6 and data:
            data[pos:pos + 1] = bytes([rng.choice(b"0123456789abcdefABCDEF{}[],:\"")])
    return bytes(data)


def make_path(rng, sessions):
    sid = rng.choice(sessions + ["AAAAAAAAAAAAAAAAAAAAAA", rand_string(rng, 22)])
    path = rng.choice([
        "/action", "/sessions", "/sessions/%s" % sid, "/sessions/%s/events" % sid, "/user", "/healthz",
        "/metrics", "/openapi.yaml", "/", "/sessions/", "//action", "/action/", "/./action", "/../../etc/passwd",
        "/sessions/%s/events?fields=count" % sid, "/sessions/%s/events?fields=%s" % (sid, rand_string(rng, 6)),
        "/sessions/%s/events?lastEventId=%d" % (sid, rng.randint(-5, 10**6)), "/%00", "/sessions/%s%%00" % sid,
        "/" + "a" * rng.choice([1, 100, 4000, 10000, 20000]), "*", "http://127.0.0.1/healthz", "/healthz?" + "x=1&" * 200,
        "/%" + rand_string(rng, 4), "/" + rand_string(rng)])
    return path


def make_request(rng, sessions, clean=False):
    """One request as bytes; and the method the response answers. A `clean` request is
    framed exactly (a well-formed head, Content-Length true), so several can be pipelined
    and each answer matched to its request."""
    method = rng.choice(METHODS[:7]) if clean or rng.random() < 0.85 else rng.choice(METHODS)
    path = make_path(rng, sessions)
    body = b""
    target = path.split("?")[0]
    if target == "/action" or rng.random() < 0.1:
        body = encode_json(rng, action_body(rng, sessions))
    elif target == "/sessions":
        body = encode_json(rng, rng.choice([{"reactor": "counter"}, {"reactor": rand_json(rng)}, rand_json(rng), {}]))
    elif target == "/user":
        body = encode_json(rng, rng.choice([{"id": rand_string(rng), "name": rand_string(rng)}, rand_json(rng)]))
    if rng.random() < 0.3:
        body = mutate(rng, body)
    if rng.random() < 0.02:
        body = b"{\"a\":" * rng.randint(1, 3000) + b"1"
    if clean:
        path = path.replace(" ", "%20").replace("\r", "").replace("\n", "")
        path = "".join(c for c in path if 32 < ord(c) < 127) or "/"
    version = "HTTP/1.1" if clean else rng.choice(["HTTP/1.1"] * 12 + ["HTTP/1.0", "HTTP/2.0", "HTTP/1.1 ", "HTTP/1", "", "http/1.1"])
    head = ["%s %s %s" % (method, path, version)]
    if clean or rng.random() < 0.95:
        head.append("Host: 127.0.0.1")
    if target == "/user" and rng.random() < 0.7:
        head.append("Authorization: " + rng.choice(["Bearer " + TOKEN, "Bearer wrong", "Bearer", "Basic x", "bearer " + TOKEN,
                                                    "Bearer " + TOKEN + "x", "Bearer  " + TOKEN]))
    for _ in range(0 if clean else rng.choice([0, 0, 1, 2, 5, 50])):
        name = rng.choice(HEADER_NAMES + [rand_string(rng, 6)])
        if name in ("Content-Length", "Transfer-Encoding"):
            continue
        head.append("%s: %s" % (name, rng.choice(["", "text/event-stream", "application/json", "0", "-1", "close",
                                                     "keep-alive", "100-continue", rand_string(rng), "x" * 5000])))
    framing = 0 if clean else rng.random()
    if framing < 0.7:
        head.append("Content-Length: %d" % len(body)) if body or clean or rng.random() < 0.5 else None
        payload = body
    elif framing < 0.8:
        head.append("Transfer-Encoding: chunked")
        payload = b""
        rest = body
        while rest:
            n = rng.randint(1, max(1, len(rest)))
            payload += b"%x\r\n" % n + rest[:n] + b"\r\n"
            rest = rest[n:]
        payload += b"0\r\n\r\n"
        if rng.random() < 0.3:
            payload = mutate(rng, payload)
    elif framing < 0.9:
        # A wrong Content-Length (see known_defect for libmicrohttpd's answer to a non-number).
        head.append("Content-Length: %s" % rng.choice(["99999999999999999999999",str(max(0, len(body) - rng.randint(1, 10))), "0", "abc", "-1",
                                                       "1, 2", " %d" % len(body), "%d" % len(body), "0x10",
                                                       str(len(body) + rng.randint(1, 5))]))
        payload = body
    else:
        payload = body   # no framing at all
    data = ("\r\n".join(head) + "\r\n\r\n").encode("utf-8", "surrogatepass") + payload
    if not clean and rng.random() < 0.1:
        data = mutate(rng, data)
    return data, method.strip().upper()


# ---------------------------------------------------------------- the run

class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.requests = 0
        self.statuses = {}
        self.unanswered = 0
        self.timeouts = 0
        self.known_defect = 0
        self.failures = []

    def add(self, key):
        with self.lock:
            self.requests += 1
            if isinstance(key, int):
                self.statuses[key] = self.statuses.get(key, 0) + 1
            elif key == "unanswered":
                self.unanswered += 1
            elif key == "timeout":
                self.timeouts += 1

    def fail(self, reason, data, artifacts):
        with self.lock:
            self.failures.append(reason)
            index = len(self.failures)
        if artifacts:
            os.makedirs(artifacts, exist_ok=True)
            with open(os.path.join(artifacts, "failure-%03d.bin" % index), "wb") as f:
                f.write(data)
            with open(os.path.join(artifacts, "failure-%03d.txt" % index), "w") as f:
                f.write(reason + "\n")
        print("FAIL: %s; request %r" % (reason, data[:300]), file=sys.stderr)


def known_defect(status, body, request):
    """libmicrohttpd 0.9.75 sometimes writes the head of its own error answers twice: to a
    request whose Content-Length is no decimal number or overflows 64 bits (400, 413), and
    to some over-long or malformed heads (414, 431). Read by the first head's Content-Length,
    the body is then a copy of the head (cut short where the problem document MicroHTTP sends
    in place of libmicrohttpd's page is shorter than the head), followed by the start of that
    document. The status is right and the connection closes after it. Only that shape is
    excused."""
    if status not in (400, 413, 414, 431) or not body.startswith(b"HTTP/1.1 %d " % status):
        return False
    head_end = body.find(b"\r\n\r\n")
    if head_end < 0:
        return b"\r\nConnection: close\r\n" in body
    return body[head_end + 4:].startswith(b'{"type":')


def exchange(port, requests, timeout):
    """Sends the requests (pipelined on one connection), reads the answers in order."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        try:
            sock.sendall(b"".join(r[0] for r in requests))
        except (BrokenPipeError, ConnectionResetError):
            pass
        reader = Reader(sock, time.monotonic() + timeout)
        results = []
        for data, method in requests:
            if method != "HEAD" and b"HEAD" in data.upper():
                method = "HEAD?"
            try:
                results.append(read_response(reader, method))
            except EOFError:
                results.append("unanswered")
                break
            except TimeoutError:
                results.append("timeout")
                break
            status = results[-1][0]
            if dict(results[-1][1]).get(b"content-type", b"").startswith(b"text/event-stream"):
                break
            if any(h == (b"connection", b"close") for h in results[-1][1]):
                break
        return results
    finally:
        sock.close()


def worker(port, seed, until, sessions, stats, artifacts, stop):
    rng = random.Random(seed)
    while time.monotonic() < until and not stop.is_set():
        if rng.random() < 0.8:
            batch = [make_request(rng, sessions)]
        else:   # pipelined on one connection: exactly framed ones, then anything
            batch = [make_request(rng, sessions, clean=True) for _ in range(rng.randint(1, 3))]
            batch.append(make_request(rng, sessions))
        try:
            results = exchange(port, batch, timeout=rng.choice([0.5, 1.0]))
        except Malformed as error:
            stats.fail("malformed answer: %s" % error, b"".join(r[0] for r in batch), artifacts)
            continue
        except (ConnectionRefusedError, OSError) as error:
            stats.fail("cannot connect: %s" % error, b"", artifacts)
            stop.set()
            return
        for (data, _), result in zip(batch, results):
            if isinstance(result, str):
                stats.add(result)
                continue
            status, headers, body = result
            stats.add(status)
            # 503: stopping or full; 505: libmicrohttpd's answer to an HTTP version it lacks.
            if status >= 500 and status not in (503, 505):
                stats.fail("status %d: %r" % (status, body[:300]), data, artifacts)
            if body.startswith(b"HTTP/1."):
                if known_defect(status, body, data):
                    with stats.lock:
                        stats.known_defect += 1
                else:
                    stats.fail("a response head inside a body: %r" % body[:200], data, artifacts)


def prober(port, until, stats, stop, proc):
    while time.monotonic() < until and not stop.is_set():
        if proc.poll() is not None:
            stats.fail("reactord exited with status %s during the run" % proc.returncode, b"", None)
            stop.set()
            return
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=3)
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n")
            status = read_response(Reader(sock, time.monotonic() + 3), "GET")[0]
            sock.close()
            if status != 200:
                stats.fail("health probe answered %d" % status, b"", None)
        except Exception as error:   # noqa: BLE001 - any failure of the probe is the finding
            stats.fail("health probe failed: %r" % error, b"", None)
        stop.wait(2)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("binary")
    parser.add_argument("seconds", nargs="?", type=float, default=60)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--threads", type=int, default=6)
    parser.add_argument("--artifacts", default="test-artifacts/fuzz")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    log_path = os.path.join(args.artifacts, "reactord.log")
    os.makedirs(args.artifacts, exist_ok=True)
    log = open(log_path, "wb")
    # The default (durable) store, in a file of this run's own.
    store = os.path.join(args.artifacts, "fuzz-%d.sqlite" % os.getpid())
    proc = subprocess.Popen([args.binary, "--port", "0", "--admin-token", TOKEN, "--log-level", "info",
                             "--body-limit", "65536", "--heartbeat", "1", "--store", "sqlite:" + store], stderr=log)
    port = None
    for _ in range(200):
        time.sleep(0.05)
        m = re.search(rb"port=(\d+)", open(log_path, "rb").read())
        if m:
            port = int(m.group(1))
            break
    if port is None:
        proc.kill()
        sys.exit("reactord did not start; see %s" % log_path)
    sessions = []
    for _ in range(4):
        sock = socket.create_connection(("127.0.0.1", port), timeout=3)
        sock.sendall(b"POST /sessions HTTP/1.1\r\nHost: f\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        sessions.append(json.loads(read_response(Reader(sock, time.monotonic() + 3), "POST")[2])["session"])
        sock.close()

    print("fuzzing reactord on port %d for %.0f s with %d threads, seed %d" % (port, args.seconds, args.threads, seed))
    stats, stop = Stats(), threading.Event()
    until = time.monotonic() + args.seconds
    started = time.monotonic()
    threads = [threading.Thread(target=worker, args=(port, seed + i, until, sessions, stats, args.artifacts, stop))
               for i in range(args.threads)]
    threads.append(threading.Thread(target=prober, args=(port, until, stats, stop, proc)))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - started

    proc.send_signal(signal.SIGTERM)
    try:
        code = proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        code = "hung"
    log.close()
    text = open(log_path, "rb").read().decode("utf-8", "replace")
    if code != 0:
        stats.failures.append("reactord exit status %s after SIGTERM" % code)
    for marker in ("Fatal error", "Sanitizer", "Segmentation", "Aborted", "runtime error"):
        if marker in text:
            stats.failures.append("the server log shows %r" % marker)

    statuses = ", ".join("%d: %d" % kv for kv in sorted(stats.statuses.items()))
    print("%d requests in %.1f s (%.0f/s); answers by status {%s}; %d closed unanswered; %d timed out (incomplete on purpose)"
          % (stats.requests, elapsed, stats.requests / max(elapsed, 0.001), statuses, stats.unanswered, stats.timeouts))
    print("%d answers with libmicrohttpd 0.9.75's doubled error head (400/413/414/431 it makes itself; known defect)"
          % stats.known_defect)
    print("seed %d; reactord exit status %s; log %s" % (seed, code, log_path))
    if stats.failures:
        print("%d FAILURES (requests in %s):" % (len(stats.failures), args.artifacts))
        for failure in stats.failures[:20]:
            print("  " + failure)
        sys.exit(1)
    print("OK: the server stayed up; every answer was well-formed HTTP but for libmicrohttpd's known defect above")


if __name__ == "__main__":
    main()
