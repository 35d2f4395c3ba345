"""The shipped deploy/cluster/nginx.conf, run by Debian's nginx in front of three real nodes on a
real PostgreSQL: only its addresses are rewritten (nodeN:8080 to the nodes' loopback ports,
port 80 to a free one). A client that acts and follows one session through nginx keeps every
answered action, applies each once, and its stream resumes with Last-Event-ID, through nginx,
across a node's kill -9 and across a rolling restart (SIGTERM each node in turn, start it again)."""
import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request

import pytest

from conftest import BINARY, ROOT, EventReader, Node, free_port

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
SHIPPED = os.path.join(ROOT, "deploy/cluster/nginx.conf")


class Nginx:
    def __init__(self, node_ports):
        self.directory = tempfile.mkdtemp(prefix="reactord-nginx-")
        os.chmod(self.directory, 0o755)   # its workers run as nobody
        self.port = free_port()
        site = open(SHIPPED).read()
        for index, port in enumerate(node_ports, 1):
            site = site.replace(f"server node{index}:8080", f"server 127.0.0.1:{port}")
        site = site.replace("listen 80;", f"listen 127.0.0.1:{self.port};")
        assert not re.search(r"node\d:8080|listen 80;", site), "the shipped nginx.conf changed shape"
        with open(os.path.join(self.directory, "site.conf"), "w") as out:
            out.write(site)
        d = self.directory
        with open(os.path.join(d, "nginx.conf"), "w") as out:
            out.write(f"""daemon off;
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {d}/body; proxy_temp_path {d}/proxy; fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;
    include {d}/site.conf;
}}
""")
        self.process = subprocess.Popen([NGINX, "-c", f"{d}/nginx.conf", "-p", d, "-e", f"{d}/error.log"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.errors()
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        raise AssertionError("nginx did not listen: " + self.errors())

    def errors(self):
        try:
            return open(os.path.join(self.directory, "error.log")).read()
        except OSError:
            return ""

    def request(self, method, path, body=None, timeout=30):
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data, method=method)
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return response.status, response.read().decode(), dict(response.headers)
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode(), dict(error.headers)
        except OSError as error:
            return None, str(error), {}

    def close(self):
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        shutil.rmtree(self.directory, ignore_errors=True)


class Client:
    """Acts on one session through nginx, one action at a time, as a careful client does: a 503
    is retried (nothing ran); an unknown outcome (502, 504, a cut connection) is settled by reading
    the session, since the counter's count says whether the action ran."""

    def __init__(self, balancer, session):
        self.balancer = balancer
        self.session = session
        self.applied = 0        # actions known to have run, each once
        self.statuses = {}      # every answer nginx gave, by status

    def _count(self):
        while True:
            status, body, _ = self.balancer.request("GET", f"/sessions/{self.session}")
            self.statuses[status] = self.statuses.get(status, 0) + 1
            if status == 200:
                return json.loads(body)["state"]["count"]
            time.sleep(0.1)

    def increase(self):
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            status, body, headers = self.balancer.request(
                "POST", "/action", {"session": self.session, "action": {"type": "increase"}})
            self.statuses[status] = self.statuses.get(status, 0) + 1
            if status == 200:
                assert json.loads(body)["state"]["count"] == self.applied + 1, body
                self.applied += 1
                return
            if status == 503:
                time.sleep(min(float(headers.get("Retry-After", "0.1")), 0.5))
                continue
            assert status in (None, 502, 504), (status, body)
            count = self._count()
            assert count in (self.applied, self.applied + 1), (count, self.applied)
            if count == self.applied + 1:
                self.applied += 1
                return
        raise AssertionError(f"no answer for an action within 30 s: {self.statuses}")


class ResumingSubscriber:
    """Follows the session through nginx; when its stream ends it reconnects, through nginx, with
    the last id it saw as Last-Event-ID."""

    def __init__(self, balancer, session):
        self.balancer = balancer
        self.session = session
        self.done = threading.Event()
        self.readers = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def ids_and_counts(self):
        seen = []
        for reader in list(self.readers):
            for _, event in list(reader.events):
                if event["event"] == "state":
                    seen.append((int(event["id"]), json.loads(event["data"])["count"]))
        return seen

    def _run(self):
        while not self.done.is_set():
            seen = self.ids_and_counts()
            last = seen[-1][0] if seen else None
            try:
                reader = EventReader(self.balancer.port, self.session, last_event_id=last)
            except OSError:
                time.sleep(0.1)
                continue
            self.readers.append(reader)
            while not reader.closed.wait(0.05):
                if self.done.is_set():
                    reader.close()
                    return
            time.sleep(0.05)

    def wait_for(self, version, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            seen = self.ids_and_counts()
            if seen and seen[-1][0] >= version:
                return True
            time.sleep(0.05)
        return False

    def close(self):
        self.done.set()
        self.thread.join(timeout=10)
        for reader in self.readers:
            reader.close()


@pytest.fixture()
def balanced(cluster):
    balancer = Nginx([node.port for node in cluster.nodes])
    yield cluster, balancer
    balancer.close()


def test_nginx_closes_its_idle_connections_to_the_nodes_before_a_node_does():
    """A node closes a keep-alive connection silent for --connection-timeout. nginx reusing one
    as the node closes it gets no answer's head: the request fails (a write is not resent) and
    the node is off the hash for fail_timeout, so its sessions' requests are forwarded and they
    move. Every upstream of the shipped nginx.conf must let its idle connections go first."""
    usage = subprocess.run([BINARY, "--help"], capture_output=True, text=True, timeout=30).stdout
    node_timeout = int(re.search(r"--connection-timeout <.*?\(default: (\d+)\)", usage, re.S).group(1))
    upstreams = re.findall(r"^upstream (\S+) \{(.*?)^\}", open(SHIPPED).read(), re.M | re.S)
    assert len(upstreams) == 2, upstreams
    for name, block in upstreams:
        found = re.search(r"^\s*keepalive_timeout (\d+)s;", block, re.M)
        # nginx's default is 60 s.
        assert found and int(found.group(1)) < node_timeout, f"upstream {name}: {block}"


def subscribed_node(cluster):
    """The node whose stream the subscriber is on (its own metrics say so)."""
    for node in cluster.nodes[:3]:
        status, body, _ = node.request("GET", "/metrics")
        if status == 200 and re.search(r"^reactord_subscribers 1(\.0)?$", body, re.M):
            return node
    return None


def check_stream(subscriber, client):
    assert subscriber.wait_for(client.applied), (
        subscriber.ids_and_counts()[-3:], client.applied,
        [(reader.status, reader.closed.is_set(), len(reader.events)) for reader in subscriber.readers])
    seen = subscriber.ids_and_counts()
    ids = [version for version, _ in seen]
    assert ids == list(range(ids[0], client.applied + 1)), f"a gap or a repeat across resumes: {ids}"
    assert all(count == version for version, count in seen), seen
    assert len(subscriber.readers) > 1, "the stream was never cut, so nothing resumed"


def followed_session(balancer):
    """A new session made through nginx, its resuming subscriber and its careful client."""
    status, body, _ = balancer.request("POST", "/sessions", {"reactor": "counter"})
    assert status == 201, body
    session = json.loads(body)["session"]
    return ResumingSubscriber(balancer, session), Client(balancer, session)


def test_a_stream_through_nginx_resumes_across_a_kill_9_of_its_node(balanced):
    cluster, balancer = balanced
    subscriber, client = followed_session(balancer)
    try:
        assert subscriber.wait_for(0)
        for _ in range(20):
            client.increase()
        victim = subscribed_node(cluster)
        assert victim is not None
        victim.kill()
        for _ in range(20):
            client.increase()
        cluster.restart(cluster.nodes.index(victim))
        for _ in range(20):
            client.increase()
        check_stream(subscriber, client)
        assert client.applied == 60
    finally:
        subscriber.close()


def test_a_stream_through_nginx_resumes_across_a_rolling_restart(balanced):
    cluster, balancer = balanced
    subscriber, client = followed_session(balancer)
    acting = threading.Event()
    failures = []

    def act():
        try:
            while not acting.is_set() and client.applied < 2000:   # bounded
                client.increase()
                time.sleep(0.01)
        except AssertionError as error:
            failures.append(error)

    sender = threading.Thread(target=act, daemon=True)
    try:
        assert subscriber.wait_for(0)
        sender.start()
        for index in range(3):
            time.sleep(0.5)
            cluster.nodes[index].stop()     # SIGTERM: commits, gives its leases back, exits
            restarted = cluster.restart(index)
            assert restarted.request("GET", "/readyz")[0] == 200
        time.sleep(0.5)
        acting.set()
        sender.join(timeout=60)
        assert not failures, failures
        assert client.applied > 10, client.statuses
        check_stream(subscriber, client)
        print(f"rolling restart: {client.applied} actions, answers by status {client.statuses}")
    finally:
        acting.set()
        subscriber.close()


def forwarded(cluster):
    """Requests the nodes forwarded to a holder, all outcomes, summed over the live nodes."""
    total = 0.0
    for node in cluster.nodes[:3]:
        status, body, _ = node.request("GET", "/metrics")
        assert status == 200
        total += sum(float(value) for value in re.findall(r"^reactord_cluster_forwarded_total\{[^}]*\} (\S+)$", body, re.M))
    return total


def served_by_holder(cluster, balancer, sessions, rounds):
    """The share of `rounds` increases of each session, sent through nginx, that no node forwarded."""
    before = forwarded(cluster)
    for _ in range(rounds):
        for session in sessions:
            status, body, _ = balancer.request("POST", f"/sessions/{session}/actions", {"type": "increase"})
            assert status == 200, body
    return 1 - (forwarded(cluster) - before) / (rounds * len(sessions))


def test_through_nginx_a_session_comes_to_live_where_its_requests_land(balanced):
    """The shipped nginx.conf hashes on the id in /sessions/{id}...; each session moves to that
    node after its first requests (Placement), so that from then on nine actions in ten (here:
    all of them) are served by their holder without a forward."""
    cluster, balancer = balanced
    sessions = []
    for _ in range(30):
        status, body, _ = balancer.request("POST", "/sessions", {"reactor": "counter"})
        assert status == 201, body
        sessions.append(json.loads(body)["session"])
    for _ in range(12):   # settling: at most eight forwarded requests per session
        for session in sessions:
            status, body, _ = balancer.request("POST", f"/sessions/{session}/actions", {"type": "increase"})
            assert status == 200, body
    share = served_by_holder(cluster, balancer, sessions, rounds=20)
    assert share >= 0.9, f"only {share:.0%} of actions were served by their holder"
    for session in sessions:   # every action applied once, wherever it went
        status, body, _ = balancer.request("GET", f"/sessions/{session}")
        assert status == 200 and json.loads(body)["state"]["count"] == 32, body


def test_a_session_followed_where_its_requests_no_longer_land_moves_and_its_stream_resumes(balanced):
    """A stream keeps its session in memory where it is. Streams opened on one node (as before a
    node joined, or came back) of sessions whose requests nginx now sends elsewhere must not hold
    them there, forwarded for ever: at the hand-over they close without `event: end`, resume
    through nginx with Last-Event-ID at the next version, and from then on the sessions' actions
    are served by their holder."""
    cluster, balancer = balanced
    first = cluster.nodes[0]
    sessions = [first.create() for _ in range(12)]
    streams = {session: EventReader(first.port, session) for session in sessions}
    try:
        for session, stream in streams.items():
            assert stream.wait_for(lambda events: len(events) == 1), session
        for _ in range(12):   # at most eight forwarded in a row, then the hand-over
            for session in sessions:
                status, body, _ = balancer.request("POST", f"/sessions/{session}/actions", {"type": "increase"})
                assert status == 200, body
        moved = [session for session, stream in streams.items() if stream.closed.wait(5)]
        # Twelve ids that all hash to the first node: about one chance in half a million.
        assert moved, "no session moved"
        for session in moved:
            events = [event for _, event in streams[session].events]
            assert all(event["event"] != "end" for event in events), events
            last = int(events[-1]["id"])
            resumed = EventReader(balancer.port, session, last_event_id=last)
            try:
                if last < 12:   # else nothing is missed, and nothing comes until the next action
                    assert resumed.wait_for(lambda got: len(got) >= 1), (session, last, resumed.status, balancer.errors())
                    assert int(resumed.events[0][1]["id"]) == last + 1, resumed.events
            finally:
                resumed.close()
        share = served_by_holder(cluster, balancer, sessions, rounds=10)
        assert share >= 0.9, f"only {share:.0%} of actions were served by their holder\n" + balancer.errors()
        for session in sessions:
            status, body, _ = balancer.request("GET", f"/sessions/{session}")
            assert status == 200 and json.loads(body)["state"]["count"] == 22, body
    finally:
        for stream in streams.values():
            stream.close()


class RefusingNode:
    """Stands in for a node that answers every request 503 (a node stopping, or one whose
    sessions' holder just died), counting the requests it had about sessions."""

    def __init__(self):
        import http.server

        counts = self.counts = {"session": 0}

        class Handler(http.server.BaseHTTPRequestHandler):
            def refuse(self):
                if self.path.startswith("/sessions/"):
                    counts["session"] += 1
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                body = b'{"status":503,"detail":"stopping"}'
                self.send_response(503)
                self.send_header("Retry-After", "1")
                self.send_header("Content-Type", "application/problem+json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_DELETE = refuse

            def log_message(self, *_):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def test_through_nginx_a_503_is_tried_again_on_another_node(cluster):
    """A 503 means nothing was done: nginx sends the request once more, POSTs included. For a
    session's requests the second try must reach another node than the hash's, or it only asks
    the refusing node again."""
    refusing = RefusingNode()
    balancer = Nginx([cluster.nodes[0].port, cluster.nodes[1].port, refusing.port])
    try:
        sessions = []
        for _ in range(24):
            status, body, _ = balancer.request("POST", "/sessions", {"reactor": "counter"})
            assert status == 201, body
            sessions.append(json.loads(body)["session"])
        for session in sessions:
            status, body, _ = balancer.request("POST", f"/sessions/{session}/actions", {"type": "increase"})
            assert status == 200, (session, status, body)
            status, body, _ = balancer.request("GET", f"/sessions/{session}")
            assert status == 200 and json.loads(body)["state"]["count"] == 1, (session, status, body)
        assert refusing.counts["session"] > 0, "no session hashed to the refusing node: the test proves nothing"
    finally:
        balancer.close()
        refusing.close()


def test_through_nginx_a_killed_holders_sessions_answer_503_until_they_move(balanced):
    """A kill -9 of the node a session hashes to (and lives on): until its lease runs out, the
    session's requests through nginx get reactord's 503 with Retry-After (cluster.md's failure
    table), then 200s. nginx's second try (@next) hashed to the dead node first and, not retrying
    a connection error, answered its own 502 page."""
    cluster, balancer = balanced
    status, body, _ = balancer.request("POST", "/sessions", {"reactor": "counter"})
    assert status == 201, body
    session = json.loads(body)["session"]
    applied = 0
    for _ in range(12):   # settling: the session moves to the node its id hashes to
        status, body, _ = balancer.request("POST", f"/sessions/{session}/actions", {"type": "increase"})
        assert status == 200, body
        applied += 1
    victim = cluster.node_holding(session)
    assert victim is not None
    victim.kill()
    answers = []
    deadline = time.monotonic() + cluster.lease + 4
    while time.monotonic() < deadline and answers[-3:] != [200] * 3:
        status, body, headers = balancer.request("POST", f"/sessions/{session}/actions", {"type": "increase"})
        answers.append(status)
        if status == 503:
            assert headers.get("Retry-After") and "problem+json" in headers.get("Content-Type", ""), (headers, body)
        else:
            assert status == 200, (status, body)
            applied += 1
        time.sleep(0.1)
    assert 503 in answers, "the killed node's lease never showed: the test proves nothing"
    assert answers[-3:] == [200] * 3, answers
    status, body, _ = balancer.request("GET", f"/sessions/{session}")
    assert status == 200 and json.loads(body)["state"]["count"] == applied, (body, applied)
