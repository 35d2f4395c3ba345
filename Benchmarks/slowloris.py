#!/usr/bin/env python3
"""Issue 25 item 7's scenario, measured: one address (127.0.0.1) opens CONNECTIONS connections
to reactord and sends each request head one byte every INTERVAL seconds (slowloris), reopening
those the server closes; meanwhile another address (127.0.0.2) asks GET /healthz every 100 ms on
a new connection. Prints the other address's answer times and how many timed out.

Usage: Benchmarks/slowloris.py BINARY [--connections 11000] [--interval 2] [--seconds 30]
                               [-- extra reactord flags, e.g. --connections-per-ip 0 --head-timeout 0]
Bounded: every loop ends after --seconds; the server listens on 127.0.0.1 only.
"""
import argparse
import errno
import re
import resource
import select
import socket
import subprocess
import sys
import time


def start(binary, extra):
    proc = subprocess.Popen([binary, "--port", "0", "--store", "memory", "--admin-token", "t",
                             "--access-log", "off", *extra], stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = re.search(r"port=(\d+)", proc.stderr.readline())
        if found:
            return proc, int(found.group(1))
    proc.kill()
    sys.exit("reactord did not say its port")


def healthz(port, timeout=10.0):
    start = time.monotonic()
    try:
        sock = socket.socket()
        sock.bind(("127.0.0.2", 0))
        sock.settimeout(timeout)
        sock.connect(("127.0.0.1", port))
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        ok = sock.recv(64).startswith(b"HTTP/1.1 200")
        sock.close()
        return (time.monotonic() - start) if ok else None
    except OSError:
        return None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binary")
    parser.add_argument("--connections", type=int, default=11000)
    parser.add_argument("--interval", type=float, default=2)
    parser.add_argument("--seconds", type=float, default=30)
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    args = parser.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    args.extra = extra
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    proc, port = start(args.binary, args.extra)
    head = b"GET /healthz HTTP/1.1\r\nHost: t\r\nX-Slow: " + b"a" * 100000
    sockets = {}   # fd -> [socket, bytes sent]

    def top_up():
        while len(sockets) < args.connections:
            sock = socket.socket()
            sock.setblocking(False)
            code = sock.connect_ex(("127.0.0.1", port))
            if code not in (0, errno.EINPROGRESS):
                sock.close()
                return
            sockets[sock.fileno()] = [sock, 0]

    try:
        top_up()
        print("opened %d slow connections from 127.0.0.1" % len(sockets), flush=True)
        times, failures = [], 0
        end = time.monotonic() + args.seconds
        next_trickle = time.monotonic()
        reopened = 0
        while time.monotonic() < end:
            if time.monotonic() >= next_trickle:
                next_trickle += args.interval
                for fd, entry in list(sockets.items()):
                    sock, sent = entry
                    try:
                        if sock.send(head[sent:sent + 1]) == 1:
                            entry[1] += 1
                    except BlockingIOError:
                        pass   # still connecting
                    except OSError:
                        sock.close()
                        del sockets[fd]
                        reopened += 1
                top_up()
            taken = healthz(port)
            if taken is None:
                failures += 1
            else:
                times.append(taken)
            time.sleep(0.1)
        times.sort()
        def pick(q):
            return times[min(len(times) - 1, int(q * len(times)))] * 1000 if times else float("nan")
        print("127.0.0.2 GET /healthz: %d answered, %d failed or timed out (10 s); "
              "median %.1f ms, p99 %.1f ms, max %.1f ms; slow connections closed by the server and reopened: %d"
              % (len(times), failures, pick(0.5), pick(0.99), pick(1.0), reopened))
    finally:
        for sock, _ in sockets.values():
            sock.close()
        proc.terminate()
        proc.wait(timeout=20)


if __name__ == "__main__":
    main()
