"""/metrics as Prometheus parses it, and the JSON log, against the real reactord binary.

Starts `reactord --port 0 --log-format json` on 127.0.0.1, drives sessions, actions (applied,
malformed, unknown session, invalid), an event stream and a limit, then parses /metrics with
prometheus_client's own parser and every stderr line as JSON.
Run by scripts/check-operations (scripts/test): REACTORD_BINARY names the binary.
"""
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from types import SimpleNamespace

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "pysupport"))
from json_log import wait_until_listening  # noqa: E402
from reactord_process import free_port, request, wait_until_healthy  # noqa: E402

import pytest
from prometheus_client.parser import text_string_to_metric_families

BINARY = os.environ.get("REACTORD_BINARY", ".build/debug/reactord")


class Server:
    def __init__(self, *args, open_files=None):
        # The durable store (answers wait for its commit: the deferred path) in a file of its own.
        self.directory = tempfile.TemporaryDirectory(prefix="reactord-ops-")
        if not any(arg == "--store" for arg in args):
            args = ("--store", f"sqlite:{self.directory.name}/ops.sqlite", *args)
        # `ulimit -n open_files`, soft and hard (so the server cannot raise it).
        limit = (lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, open_files))) if open_files else None
        self.process = subprocess.Popen(
            [BINARY, "--port", "0", "--admin-token", "ops-test", "--log-format", "json", *args],
            stderr=subprocess.PIPE, text=True, preexec_fn=limit)
        self.lines = []
        self.port = wait_until_listening(self.process, self.lines)

    def request(self, method, path, body=None, headers=None):
        data = body.encode() if isinstance(body, str) else body
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data, method=method,
                                         headers=headers or {})
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()

    def limit_lines(self):
        """The `limit hit` lines logged so far, parsed."""
        return [json.loads(line) for line in self.lines if '"limit hit"' in line]

    def stop(self):
        self.process.terminate()
        _, rest = self.process.communicate(timeout=15)
        self.lines += rest.splitlines(keepends=True)
        return self.process.returncode


@pytest.fixture()
def server():
    started = Server("--max-sessions", "3")
    yield started
    if started.process.poll() is None:
        started.process.kill()
        started.process.wait()


def families(text):
    return {family.name: family for family in text_string_to_metric_families(text)}


def test_metrics_parse_with_help_type_and_labels(server):
    status, body = server.request("POST", "/sessions", '{"reactor":"counter"}')
    assert status == 201, body
    session = json.loads(body)["session"]
    assert server.request("POST", "/action", json.dumps({"session": session, "action": {"type": "increase"}}))[0] == 200
    assert server.request("POST", "/action", "not json")[0] == 400
    assert server.request("POST", "/action", '{"session":"AAAAAAAAAAAAAAAAAAAAAA","action":{"type":"increase"}}')[0] == 404
    assert server.request("POST", "/action", json.dumps({"session": session, "action": {"type": "fly"}}))[0] == 422

    def subscribe(session):
        """A subscriber, held open while /metrics is read."""
        stream = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        stream.sendall(f"GET /sessions/{session}/events HTTP/1.1\r\nHost: t\r\n\r\n".encode())
        received = b""
        for _ in range(50):
            received += stream.recv(4096)
            if b"event: state" in received:
                break
        assert b"event: state" in received, received
        return stream

    streams = [subscribe(session)]
    # Past --max-sessions 3 the least recently used idle session leaves memory (still stored) ...
    made = [json.loads(server.request("POST", "/sessions", "{}")[1])["session"] for _ in range(3)]
    streams += [subscribe(made[1]), subscribe(made[2])]
    # ... and once every loaded session is busy (a subscriber each), a new one is a limit hit (503).
    assert server.request("POST", "/sessions", "{}")[0] == 503

    status, ready = server.request("GET", "/readyz")
    assert status == 200 and json.loads(ready)["checks"] == {"listening": "ok", "store": "ok"}, ready
    status, text = server.request("GET", "/metrics")
    assert status == 200
    for stream in streams:
        stream.close()
    parsed = families(text)

    # Every family has # HELP and # TYPE (the parser says "unknown" without a TYPE line).
    for name, family in parsed.items():
        assert family.documentation, f"{name} has no # HELP"
        assert family.type != "unknown", f"{name} has no # TYPE"
        assert family.samples, f"{name} has no sample"
    for line in text.splitlines():
        if line and not line.startswith("#"):
            assert any(line.startswith(name) for name in parsed), line

    def samples(name, suffix=""):
        return [s for s in parsed[name].samples if s.name == name + suffix]

    requests = samples("reactord_http_requests", "_total")
    assert {"method", "route", "status_class"} <= set(requests[0].labels)
    by_route = {(s.labels["method"], s.labels["route"], s.labels["status_class"]): s.value for s in requests}
    assert by_route[("POST", "/action", "2xx")] == 1
    assert by_route[("POST", "/action", "4xx")] == 3
    assert by_route[("POST", "/sessions", "5xx")] == 1
    assert parsed["reactord_http_request_duration_seconds"].type == "histogram"
    buckets = samples("reactord_http_request_duration_seconds", "_bucket")
    assert {"method", "route", "status_class", "le"} <= set(buckets[0].labels)
    counts = {(s.labels["route"], s.labels["status_class"]): s.value
              for s in samples("reactord_http_request_duration_seconds", "_count")}
    assert counts[("/action", "4xx")] == 3

    actions = {(s.labels["reactor"], s.labels["outcome"]): s.value for s in samples("reactord_actions", "_total")}
    assert actions[("counter", "applied")] == 1
    assert actions[("unknown", "malformed")] == 1
    assert actions[("unknown", "unknown_session")] == 1
    assert actions[("counter", "invalid")] == 1, "under the kind of the session it was sent to"

    sessions = {s.labels["reactor"]: s.value for s in samples("reactord_reactor_sessions")}
    assert sessions == {"counter": 3}
    subscribers = {s.labels["reactor"]: s.value for s in samples("reactord_reactor_subscribers")}
    assert subscribers == {"counter": 3}
    assert samples("reactord_sessions")[0].value == 3, "loaded"
    assert samples("reactord_sessions_stored")[0].value == 4, "stored, loaded or not"
    unloads = {s.labels["reason"]: s.value for s in samples("reactord_session_unloads", "_total")}
    assert unloads["memory"] >= 1, unloads

    for name in ("process_resident_memory_bytes", "process_open_fds", "process_start_time_seconds",
                 "process_max_fds", "process_virtual_memory_bytes"):
        assert parsed[name].type == "gauge", name
        assert samples(name)[0].value > 0, name
    assert parsed["process_cpu_seconds"].type == "counter"
    assert samples("process_cpu_seconds", "_total")[0].value > 0
    assert abs(samples("process_start_time_seconds")[0].value - time.time()) < 120
    assert session not in text and "ops-test" not in text, "no session id or token in /metrics"

    assert server.stop() == 0
    limits = server.limit_lines()
    assert len(limits) == 1 and limits[0]["level"] == "warning", limits
    assert "every one there is busy (--max-sessions)" in limits[0]["fields"]["what"], limits


def test_the_connection_limit_is_a_limit_hit_in_the_log():
    limited = Server("--store", "memory", "--connection-limit", "2")
    held = [socket.create_connection(("127.0.0.1", limited.port)) for _ in range(2)]
    try:
        for connection in held:
            connection.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
            assert connection.recv(4096).startswith(b"HTTP/1.1 200"), "held connections are served"
        for _ in range(3):
            status, _ = limited.request("GET", "/healthz")
            assert status == 503
    finally:
        for connection in held:
            connection.close()
        returncode = limited.stop()
    assert returncode == 0
    limits = limited.limit_lines()
    assert len(limits) == 1 and limits[0]["level"] == "warning", limits
    assert "connection limit" in limits[0]["fields"]["what"]
    assert limits[0]["fields"]["also_since_last_line"] == "0"


def test_an_open_file_limit_below_the_connection_limit_is_a_warning_at_start():
    for connection_limit, warned in (("10000", True), ("100", False)):
        server = Server("--store", "memory", "--connection-limit", connection_limit, open_files=256)
        assert server.stop() == 0
        warnings = [json.loads(line) for line in server.lines if "fewer open files" in line]
        assert bool(warnings) == warned, (connection_limit, server.lines)
        if warned:
            assert warnings[0]["level"] == "warning"
            assert warnings[0]["fields"]["open_file_limit"] == "256", warnings


def test_a_full_store_is_a_limit_hit():
    full = Server("--max-stored-sessions", "1")
    try:
        assert full.request("POST", "/sessions", "{}")[0] == 201
        for _ in range(3):
            status, body = full.request("POST", "/sessions", "{}")
            assert status == 507 and "--max-stored-sessions" in body, body
    finally:
        returncode = full.stop()
    assert returncode == 0
    limits = full.limit_lines()
    assert len(limits) == 1 and "--max-stored-sessions" in limits[0]["fields"]["what"], limits


def test_json_log_has_access_and_lifecycle_lines(server):
    status, body = server.request("POST", "/sessions", "{}")
    session = json.loads(body)["session"]
    server.request("POST", "/action", json.dumps({"session": session, "action": {"type": "increase"}}))
    server.request("GET", f"/sessions/{session}?access_token=hunter2&fields=count")
    server.request("GET", "/healthz")
    assert server.request("HEAD", f"/sessions/{session}")[0] == 200
    assert server.request("HEAD", f"/sessions/{session}/events")[0] == 200
    assert server.stop() == 0
    records = [json.loads(line) for line in server.lines if line.strip()]
    for record in records:
        assert set(record) >= {"timestamp", "level", "message"}, record
        assert record["timestamp"].endswith("Z") and "T" in record["timestamp"]
    access = [r for r in records if r.get("fields", {}).get("log") == "access"]
    action = next(r for r in access if r["fields"]["path"] == "/action")
    assert action["level"] == "info"
    fields = action["fields"]
    assert fields["method"] == "POST" and fields["status"] == "200" and fields["session"] == session
    assert int(fields["bytes"]) > 0 and float(fields["duration_ms"]) >= 0
    # A HEAD sends no body and opens no stream, and its line says so.
    heads = [r["fields"] for r in access if r["fields"]["method"] == "HEAD"]
    assert len(heads) == 2, heads
    assert all(f.get("bytes", "0") == "0" and "stream" not in f for f in heads), heads
    get = next(r for r in access if r["fields"]["route"] == "/sessions/{id}")
    assert get["fields"]["query"] == "access_token=REDACTED&fields=count"
    assert not any("hunter2" in line for line in server.lines), "the token is redacted everywhere"
    assert not any(r["fields"]["path"] == "/healthz" for r in access), "probes are not logged at info"
    messages = [r["message"] for r in records]
    listening = next(r for r in records if r["message"] == "reactord listening")
    assert listening["fields"]["store"].startswith("sqlite:")
    stopping = next(r for r in records if r["message"] == "reactord stopping")
    assert stopping["fields"]["sessions"] == "1"
    stopped = next(r for r in records if r["message"] == "reactord stopped")
    assert stopped["fields"]["sessions_in_memory"] == "1"  # kept in the store, not ended


def test_a_stream_that_loads_its_session_is_logged_as_a_stream():
    """A stream of a session unloaded to the store is answered after its load (the deferred
    path): its access line says `stream=open`, as a stream of a loaded session's does."""
    server = Server("--unload-after", "0.3")
    try:
        status, body = server.request("POST", "/sessions", "{}")
        session = json.loads(body)["session"]
        deadline = time.monotonic() + 10
        while json.loads(server.request("GET", "/healthz")[1]).get("loaded_sessions") != 0:
            assert time.monotonic() < deadline, "the session was not unloaded"
            time.sleep(0.1)
        for _ in range(2):  # the first loads it, the second finds it loaded
            with socket.create_connection(("127.0.0.1", server.port), timeout=5) as stream:
                stream.sendall(f"GET /sessions/{session}/events HTTP/1.1\r\nHost: t\r\n\r\n".encode())
                received = b""
                while b"event: state" not in received:  # the head and the first event may come apart
                    chunk = stream.recv(4096)
                    assert chunk, received
                    received += chunk
        assert server.stop() == 0
    finally:
        if server.process.poll() is None:
            server.process.kill()
            server.process.wait()
    records = [json.loads(line) for line in server.lines if line.strip()]
    streams = [r["fields"] for r in records
               if r.get("fields", {}).get("log") == "access" and r["fields"]["route"] == "/sessions/{id}/events"]
    assert len(streams) == 2, streams
    for fields in streams:
        assert fields["status"] == "200" and fields.get("stream") == "open" and "bytes" not in fields, fields


def test_the_text_log_keeps_a_line_break_in_logged_text_on_its_line():
    """The text log writes what clients and admins send (a user's id) escaped: a line break
    (whatever a reader takes for one) in it cannot forge a line of its own, nor a NUL make the
    log binary."""
    port = free_port()
    log = tempfile.TemporaryFile()
    process = subprocess.Popen(
        [BINARY, "--port", str(port), "--admin-token", "ops-test", "--store", "memory", "--log-format", "text"],
        stderr=log)

    def output():
        log.seek(0)
        return log.read()

    try:
        wait_until_healthy(SimpleNamespace(
            process=process, output=output, request=lambda *args, **options: request(port, *args, **options)))
        forged = "2026-11-28T03:00:00+0000 critical reactord: FORGED"
        status, body, _ = request(port, "PUT", "/user", {"id": "evil\r\n" + forged + "\u0000\u001b[31m\t\\n\u0085\u2028\u2029" + forged,
                                                       "name": "n"},
                                  headers={"Authorization": "Bearer ops-test"})
        assert status == 200, body
        process.terminate()
        process.wait(timeout=15)
    finally:
        if process.poll() is None:
            process.kill()
    stderr = output()
    assert b"\0" not in stderr and b"\x1b" not in stderr and b"\r" not in stderr and b"\t" not in stderr
    lines = stderr.decode().splitlines()
    assert not [line for line in lines if line.startswith(forged)]
    [user_line] = [line for line in lines if "current user set" in line]
    # A client's own backslash is doubled, so it cannot pass for an escape; NEL, U+2028 and U+2029
    # end lines for some readers (str.splitlines among them).
    assert "evil\\r\\n" + forged + "\\u{0}\\u{1B}[31m\\t\\\\n\\u{85}\\u{2028}\\u{2029}" + forged in user_line


def test_access_log_off():
    server = Server("--access-log", "off", "--store", "memory")
    try:
        server.request("POST", "/sessions", "{}")
        assert server.stop() == 0
    finally:
        if server.process.poll() is None:
            server.process.kill()
    assert not [line for line in server.lines if '"log":"access"' in line]


def test_a_sigterm_loses_no_access_line_of_the_buffered_log():
    """The log is written out by a thread of its own, in batches (as nginx's buffer=): a stop
    right after a burst of requests still has every access line, and the stop's own lines after them."""
    server = Server("--store", "memory")
    try:
        status, body = server.request("POST", "/sessions", "{}")
        session = json.loads(body)["session"]
        connection = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        action = json.dumps({"session": session, "action": {"type": "increase"}}).encode()
        request = (b"POST /action HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n" % len(action)) + action
        connection.sendall(request * 500)   # pipelined: answered while the log still holds their lines
        received = b""
        while received.count(b"HTTP/1.1 200") < 500:
            chunk = connection.recv(65536)
            assert chunk, "the server closed the connection"
            received += chunk
        connection.close()
        assert server.stop() == 0
    finally:
        if server.process.poll() is None:
            server.process.kill()
    records = [json.loads(line) for line in server.lines if line.strip()]
    actions = [r for r in records if r.get("fields", {}).get("path") == "/action"]
    assert len(actions) == 500
    messages = [r["message"] for r in records]
    assert messages.index("reactord stopped") > max(i for i, r in enumerate(records) if r in actions)
