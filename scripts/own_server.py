#!/usr/bin/env python3
"""Drives the user's server of Tests/Fixtures/OwnServer over HTTP on 127.0.0.1, as a client
would: run by scripts/check-own-server once the package is built. Python stdlib only.

Usage: own_server.py BUILD_DIR   (the directory holding OwnServer and LegacyServer)
"""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

FAILURES = []


def check(condition, message):
    if not condition:
        FAILURES.append(message)
        print("FAIL:", message, flush=True)


class Server:
    """A server binary started on port 0; the port is read from its log."""

    def __init__(self, binary, args=(), folder=None):
        self.log = tempfile.TemporaryFile()
        # A working directory of its own: the default store, reactord.sqlite, lives there (a
        # restart passes the folder on).
        self.folder = folder or tempfile.TemporaryDirectory(prefix="own-server-")
        self.process = subprocess.Popen([os.path.abspath(binary), *args], stdout=self.log, stderr=subprocess.STDOUT,
                                        cwd=self.folder.name)
        deadline = time.time() + 30
        self.port = None
        while time.time() < deadline and self.process.poll() is None:
            match = re.search(rb"port=(\d+)", self.text())
            if match:
                self.port = int(match.group(1))
                break
            time.sleep(0.05)
        if self.port is None:
            raise SystemExit(f"{binary} did not log its port:\n{self.text().decode(errors='replace')}")

    def text(self):
        self.log.seek(0)
        return self.log.read()

    def request(self, method, path, body=None, headers=None):
        """One request on its own connection; (status, headers, parsed JSON or None)."""
        payload = b"" if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        for name, value in (headers or {}).items():
            head += f"{name}: {value}\r\n"
        head += f"Content-Length: {len(payload)}\r\n\r\n"
        with socket.create_connection(("127.0.0.1", self.port), timeout=10) as sock:
            sock.sendall(head.encode() + payload)
            data = b""
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        status = int(lines[0].split()[1])
        fields = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
        if fields.get("transfer-encoding") == "chunked":
            body = dechunk(body)
        parsed = json.loads(body) if body.strip() else None
        return status, fields, parsed

    def stop(self):
        """SIGTERM; the exit status (None if it did not exit within 15 s)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return None


def dechunk(body):
    out = b""
    while body:
        size_line, _, rest = body.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        out += rest[:size]
        body = rest[size + 2:]
    return out


class EventStream:
    """A raw SSE subscriber: events as dicts (event, id, data), read with a deadline."""

    def __init__(self, port, path, headers=None):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        head = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
        for name, value in (headers or {}).items():
            head += f"{name}: {value}\r\n"
        self.sock.sendall((head + "\r\n").encode())
        self.buffer = b""
        self.status = None
        self.raw = b""

    def _fill(self, deadline):
        self.sock.settimeout(max(0.01, deadline - time.time()))
        try:
            chunk = self.sock.recv(65536)
        except socket.timeout:
            return False
        if not chunk:
            return False
        self.raw += chunk
        if self.status is None:
            self.buffer += chunk
            if b"\r\n\r\n" in self.buffer:
                head, _, rest = self.buffer.partition(b"\r\n\r\n")
                self.status = int(head.split()[1])
                self.chunked = b"chunked" in head.lower()
                self.pending, self.buffer = rest, b""
                self._decode()
            return True
        self.pending += chunk
        self._decode()
        return True

    def _decode(self):
        if not self.chunked:
            self.buffer += self.pending
            self.pending = b""
            return
        while True:
            line, sep, rest = self.pending.partition(b"\r\n")
            if not sep:
                return
            size = int(line.split(b";")[0] or b"0", 16)
            if len(rest) < size + 2:
                return
            self.buffer += rest[:size]
            self.pending = rest[size + 2:]

    def events(self, seconds):
        """Every event that arrives within `seconds`."""
        deadline = time.time() + seconds
        out = []
        while time.time() < deadline:
            while b"\n\n" in self.buffer:
                block, _, self.buffer = self.buffer.partition(b"\n\n")
                event = {}
                for line in block.decode().split("\n"):
                    if line.startswith(":") or ":" not in line:
                        continue
                    name, _, value = line.partition(":")
                    event[name] = value[1:] if value.startswith(" ") else value
                if "event" in event:
                    out.append(event)
            if not self._fill(deadline):
                if self.status is not None and time.time() < deadline:
                    continue
                break
        return out

    def until(self, predicate, seconds=5):
        """Events until one satisfies `predicate` (or the deadline); all of them."""
        deadline = time.time() + seconds
        seen = []
        while time.time() < deadline:
            batch = self.events(min(0.2, deadline - time.time()))
            seen += batch
            if any(predicate(e) for e in batch):
                break
        return seen

    def close(self):
        self.sock.close()


def states(events):
    return [json.loads(e["data"]) for e in events if e["event"] == "state"]


def run_cli_checks(binary):
    """The user's binary has reactord's command line: --help, and exit 2 naming a bad flag."""
    help_run = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=20)
    folded = " ".join(help_run.stdout.split())
    check(help_run.returncode == 0, f"--help exits 0, got {help_run.returncode}")
    for variable in ("REACTORD_PORT", "REACTORD_ADMIN_TOKEN", "REACTORD_LOG_LEVEL"):
        check(f"[env: {variable}]" in folded, f"--help lists {variable}")
    check("USAGE: OwnServer" in folded, f"--help names the binary: {help_run.stdout[:200]}")
    for args, env, name in ((["--threads", "0"], {}, "--threads"), (["--log-level", "loud"], {}, "--log-level"),
                            (["--nope"], {}, "--nope"), ([], {"REACTORD_PORT": "70000"}, "REACTORD_PORT")):
        result = subprocess.run([binary, *args], capture_output=True, text=True, timeout=20,
                                env={**os.environ, **env})
        check(result.returncode == 2, f"{args or env} exits 2, got {result.returncode}")
        check(name in result.stderr, f"{args or env}: message names {name}: {result.stderr.strip()[:200]}")


def run_todo_checks(binary):
    server = Server(binary, ["--port", "0", "--host", "127.0.0.1", "--admin-token", "own-token"])
    try:
        status, headers, created = server.request("POST", "/sessions", {"reactor": "todo"})
        check(status == 201, f"POST /sessions is 201, got {status} {created}")
        session = created["session"]
        check(created["state"]["items"] == [] and created["state"]["toast"] is None, f"initial state: {created}")

        # `user` is nil now, so absent from the JSON; it is still a field of the State type.
        filtered = EventStream(server.port, f"/sessions/{session}/events?fields=items,user")
        everything = EventStream(server.port, f"/sessions/{session}/events")
        first = filtered.until(lambda e: e["event"] == "state")
        check(filtered.status == 200, f"?fields=items,user on a nil user is 200, got {filtered.status}: {filtered.raw[:300]}")
        check(states(first)[:1] == [{"items": []}], f"filtered stream opens with items only: {first}")
        everything.until(lambda e: e["event"] == "state")

        status, _, answer = server.request("POST", "/action", {"session": session, "action": {"type": "add", "title": "milk"}})
        check(status == 200 and answer["state"]["items"] == [{"title": "milk", "done": False}], f"add: {status} {answer}")

        status, headers, problem = server.request("POST", "/action", {"session": session, "action": {"type": "add", "title": 5}})
        check(status == 422 and "action.title" in (problem or {}).get("detail", ""), f"wrong type names the field: {status} {problem}")
        check(headers.get("content-type", "").startswith("application/problem+json"), f"problem document: {headers}")
        status, _, problem = server.request("POST", "/action", {"session": session, "action": {"type": "toggle", "index": 1.5}})
        check(status == 422 and "action.index" in (problem or {}).get("detail", ""), f"1.5 for an Int names the field: {status} {problem}")
        status, _, problem = server.request("POST", "/action", {"session": session, "action": {"type": "fly"}})
        detail = (problem or {}).get("detail", "")
        check(status == 422 and "'fly'" in detail and "add, toggle, clear, load" in detail,
              f"unknown type lists the known ones: {status} {problem}")

        status, _, answer = server.request("POST", "/action", {"session": session, "action": {"type": "load"}})
        check(status == 200 and answer["state"]["loading"] is True, f"load starts loading at once: {status} {answer}")
        seen = everything.until(lambda e: e["event"] == "state" and json.loads(e["data"])["loading"] is False)
        last = states(seen)[-1] if states(seen) else {}
        check([i["title"] for i in last.get("items", [])] == ["milk", "loaded"], f"the async effect's mutations arrive: {seen}")
        pulses = [json.loads(e["data"]) for e in seen if e["event"] == "pulse"]
        check({"name": "toast", "value": "added milk"} in pulses and {"name": "toast", "value": "added loaded"} in pulses,
              f"toast pulses: {pulses}")

        status, _, _ = server.request("PUT", "/user", {"id": "u1", "name": "jay"}, {"Authorization": "Bearer own-token"})
        check(status == 200, f"PUT /user with the token from --admin-token: {status}")
        seen = filtered.until(lambda e: e["event"] == "state" and "user" in json.loads(e["data"]))
        check(states(seen) and states(seen)[-1].get("user") == {"id": "u1", "name": "jay"},
              f"the global user reaches the session through transform(mutation:): {seen}")
        filtered_states = states(filtered.events(0.3))
        check(all(set(s) <= {"items", "user"} for s in states(seen) + filtered_states), f"filtered stream keeps to its fields: {seen}")
        filtered.close()
        everything.close()
        check_spec(server)
    finally:
        code = server.stop()
    check(code == 0, f"SIGTERM: exit 0, got {code}")
    crash = re.search(rb"(Fatal error|Program crashed|Illegal instruction)", server.text())
    check(crash is None, f"no crash in the log: {server.text()[-2000:]}")

    # The default store is durable and the State Codable: the session comes back after a restart.
    again = Server(binary, ["--port", "0", "--host", "127.0.0.1", "--admin-token", "own-token"], folder=server.folder)
    try:
        status, _, restored = again.request("GET", f"/sessions/{session}")
        items = [i["title"] for i in (restored or {}).get("state", {}).get("items", [])]
        check(status == 200 and items == ["milk", "loaded"], f"after a restart the session is back: {status} {restored}")
    finally:
        check(again.stop() == 0, "SIGTERM after the restart: exit 0")


def check_spec(server):
    """/openapi.yaml describes this binary's reactor, from its own types."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(b"GET /openapi.yaml HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    if b"chunked" in head.lower():
        body = dechunk(body)
    components = {}
    for line in body.decode().split("\n"):
        match = re.match(r"    (\w+): (\{.*\})$", line)
        if match and match.group(2).startswith('{"'):
            components[match.group(1)] = json.loads(match.group(2))
    check(components.get("ReactorKind", {}).get("enum") == ["todo"], f"spec: ReactorKind is [todo]: {components.get('ReactorKind')}")
    add = components.get("TodoActionAdd", {})
    check(add.get("required") == ["type", "title"] and add.get("properties", {}).get("title") == {"type": "string"},
          f"spec: add takes a title string: {add}")
    toggle = components.get("TodoActionToggle", {}).get("properties", {}).get("index")
    check(toggle == {"type": "integer"}, f"spec: toggle's index is an integer: {toggle}")
    mapping = components.get("TodoAction", {}).get("discriminator", {}).get("mapping", {})
    check(sorted(mapping) == ["add", "clear", "load", "toggle"], f"spec: the four action types: {mapping}")
    state = components.get("TodoState", {}).get("properties", {})
    check(sorted(state) == ["items", "loading", "toast", "user"] and state["user"].get("nullable"), f"spec: state fields: {state}")
    pulse = components.get("TodoPulse", {}).get("properties", {}).get("name", {})
    check(pulse.get("enum") == ["toast"], f"spec: the toast pulse: {pulse}")


def run_legacy_checks(binary):
    """The README's pre-ReactorServiceCLI example: it crashed here on the first POST /sessions."""
    server = Server(binary)
    try:
        status, _, created = server.request("POST", "/sessions", {"reactor": "todo"})
        check(status == 201, f"legacy POST /sessions is 201, got {status}")
        if status == 201:
            status, _, answer = server.request("POST", "/action",
                                               {"session": created["session"], "action": {"type": "add", "item": "tea"}})
            check(status == 200 and answer["state"]["items"] == ["tea"], f"legacy action: {status} {answer}")
    finally:
        code = server.stop()
    check(code == 0, f"legacy SIGTERM: exit 0, got {code} {server.text()[-1500:]}")


def main():
    build = sys.argv[1]
    run_cli_checks(os.path.join(build, "OwnServer"))
    run_todo_checks(os.path.join(build, "OwnServer"))
    run_legacy_checks(os.path.join(build, "LegacyServer"))
    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed")
        sys.exit(1)
    print("OK: the user's server (Swift 6 mode) built without warnings and served as docs/serving-your-own.md says")


if __name__ == "__main__":
    main()
