"""A real PostgreSQL server and real reactord nodes for the cluster tests.

PostgreSQL is Debian's, started once per run by scripts/postgres-test-server (initdb as the
postgres user, loopback only); every test gets a database of its own and three nodes on it.
Run by scripts/check-cluster (scripts/test): REACTORD_BINARY names the binary.
"""
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BINARY = os.environ.get("REACTORD_BINARY", os.path.join(ROOT, ".build/debug/reactord"))
sys.path.insert(0, os.path.join(ROOT, "Tests", "pysupport"))
from reactord_process import free_port, request, wait_until_healthy  # noqa: E402,F401 (free_port: for the tests)
TOKEN = "cluster-test-admin"
# The default lease (2 s), given explicitly: takeovers within it are part of what is tested.
LEASE = 2.0


class Postgres:
    def __init__(self):
        self.directory = tempfile.mkdtemp(prefix="reactord-pg-")
        self.port = free_port()
        self.script = os.path.join(ROOT, "scripts/postgres-test-server")
        out = subprocess.run([self.script, "start", self.directory, str(self.port)], check=True,
                             capture_output=True, text=True, timeout=120).stdout
        self.dsn = out.strip().splitlines()[-1]
        self.databases = 0

    def create_database(self):
        self.databases += 1
        name = f"cluster_{os.getpid()}_{self.databases}"
        out = subprocess.run([self.script, "createdb", self.directory, name], check=True, capture_output=True,
                             text=True, timeout=30).stdout
        return out.strip().splitlines()[-1]

    def sql(self, dsn, query):
        return subprocess.run(["psql", "-qAt", "-v", "ON_ERROR_STOP=1", dsn, "-c", query], check=True,
                              capture_output=True, text=True, timeout=30).stdout.strip()

    def stop_server(self):
        subprocess.run([self.script, "halt", self.directory], check=True, capture_output=True, timeout=60)

    def start_server(self):
        subprocess.run([self.script, "resume", self.directory], check=True, capture_output=True, timeout=60)

    def close(self):
        subprocess.run([self.script, "stop", self.directory], capture_output=True, timeout=60)


@pytest.fixture(scope="session")
def postgres():
    server = Postgres()
    yield server
    server.close()


class Node:
    def __init__(self, dsn, name, *extra, port=None, lease=LEASE):
        self.name = name
        self.port = port or free_port()
        self.log = tempfile.TemporaryFile(mode="w+")
        self.process = subprocess.Popen(
            [BINARY, "--store", dsn, "--port", str(self.port), "--admin-token", TOKEN, "--lease", str(lease),
             "--access-log", "off", *extra],
            stdout=subprocess.DEVNULL, stderr=self.log)
        wait_until_healthy(self, name, pause=0.05)

    def output(self):
        self.log.seek(0)
        return self.log.read()

    def logged(self, text, timeout=2):
        """Whether `text` is in the node's log within `timeout` s: info lines reach stderr in
        batches, up to 50 ms after they are logged (docs/operations.md, "Buffered")."""
        deadline = time.monotonic() + timeout
        while text not in self.output():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)
        return True

    def request(self, method, path, body=None, headers=None, timeout=15):
        return request(self.port, method, path, body, headers, timeout)

    def create(self):
        status, body, _ = self.request("POST", "/sessions", {"reactor": "counter"})
        assert status == 201, body
        return json.loads(body)["session"]

    def act(self, session, action, timeout=15):
        return self.request("POST", "/action", {"session": session, "action": action}, timeout=timeout)

    def put_user(self, user_id):
        return self.request("PUT", "/user", {"id": user_id, "name": user_id},
                            headers={"Authorization": f"Bearer {TOKEN}"})

    def signal(self, number):
        self.process.send_signal(number)

    def kill(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.kill()
            self.process.wait(timeout=10)

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


class Cluster:
    def __init__(self, postgres, count=3, *extra, lease=LEASE):
        self.postgres = postgres
        self.dsn = postgres.create_database()
        self.lease = lease
        self.nodes = []
        for index in range(count):
            self.nodes.append(Node(self.dsn, f"node{index + 1}", *extra, lease=lease))

    def restart(self, index):
        """Starts node `index` again on its port (its advertised address), after it died."""
        old = self.nodes[index]
        self.nodes[index] = Node(self.dsn, old.name, port=old.port, lease=self.lease)
        self.nodes.append(old)   # closed (and its log checked) with the others
        return self.nodes[index]

    def holder_port(self, session):
        address = self.postgres.sql(self.dsn, f"SELECT holder_address FROM reactord_sessions WHERE id = '{session}'")
        return int(address.rsplit(":", 1)[1]) if address else None

    def node_holding(self, session):
        port = self.holder_port(session)
        return next((node for node in self.nodes if node.port == port), None)

    def close(self):
        for node in self.nodes:
            node.kill()
        # Under a ThreadSanitizer build (scripts/test runs one), any report fails the test.
        reports = [node.name + ":\n" + node.output() for node in self.nodes if "ThreadSanitizer" in node.output()]
        assert not reports, "\n".join(reports)


@pytest.fixture()
def cluster(postgres):
    made = Cluster(postgres)
    yield made
    made.close()


class EventReader:
    """One SSE subscriber on a raw socket, its events collected with their arrival times."""

    def __init__(self, port, session, last_event_id=None):
        self.events = []
        self.closed = threading.Event()
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        head = f"GET /sessions/{session}/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
        if last_event_id is not None:
            head += f"Last-Event-ID: {last_event_id}\r\n"
        self.sock.sendall((head + "\r\n").encode())
        self.status = None
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        buffer = b""
        try:
            while b"\r\n\r\n" not in buffer:
                chunk = self.sock.recv(4096)
                if not chunk:
                    return
                buffer += chunk
            head, buffer = buffer.split(b"\r\n\r\n", 1)
            self.status = int(head.split(b" ")[1])
            if self.status != 200:
                return   # a problem document (or a proxy's page), not a stream
            # Bytes until a whole event is in: a read can end inside a character's UTF-8 bytes.
            text = b""
            while True:
                text += self._dechunk(buffer)
                buffer = b""
                while b"\n\n" in text:
                    block, text = text.split(b"\n\n", 1)
                    event = {"event": "message", "data": ""}
                    for line in block.decode().split("\n"):
                        if line.startswith(":") or ":" not in line:
                            continue
                        field, value = line.split(":", 1)
                        event[field] = value[1:] if value.startswith(" ") else value
                    if "id" in event or event["event"] == "end":
                        self.events.append((time.monotonic(), event))
                if self._body_ended:
                    return   # the last chunk: the response is over (a proxy may keep the connection)
                chunk = self.sock.recv(65536)
                if not chunk:
                    return
                buffer = chunk
        except OSError:
            return
        finally:
            self.closed.set()

    _pending = b""
    _body_ended = False

    def _dechunk(self, data):
        # reactord's streams are chunked: strip the chunk-size lines.
        self._pending += data
        out = b""
        while True:
            line_end = self._pending.find(b"\r\n")
            if line_end < 0:
                break
            size = int(self._pending[:line_end].split(b";")[0] or b"0", 16)
            if size == 0:
                self._body_ended = True
                break
            if len(self._pending) < line_end + 2 + size + 2:
                break
            out += self._pending[line_end + 2:line_end + 2 + size]
            self._pending = self._pending[line_end + 2 + size + 2:]
        return out

    def wait_for(self, predicate, timeout=15):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate([event for _, event in self.events]):
                return True
            time.sleep(0.02)
        return False

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass
