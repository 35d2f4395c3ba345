"""A commit whose answer PostgreSQL never sends back: the connection is cut once the write has
reached the server, so the change may be stored and the node cannot know. Its answer must not be a
503, which promises that nothing was done (a balancer sends those again, and a client may), but a
504: the outcome is unknown; a retry under the same Idempotency-Key settles it, applied once."""
import json
import re
import socket
import threading
import time

from conftest import Node

# A keyed action's change is one statement, which commits by itself (its answer is kept by it):
# its Bind, then the Sync that has it run, is "the commit sent". The statement is prepared
# (its Parse, on first use, is not the commit): named reactord_write_ and a flag for each of its
# parts, the fifth of them its answers.
WRITE = re.compile(rb"B[\s\S]{4}\x00reactord_write_[01]{4}1")
SYNC = b"S\x00\x00\x00\x04"


class CommitCuttingProxy:
    """Relays TCP to PostgreSQL; once armed, the first connection that sends a keyed write has it
    delivered, then loses both its sockets before PostgreSQL's reply is relayed."""

    def __init__(self, port):
        self.target = port
        self.armed = threading.Event()
        self.cuts = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
                server = socket.create_connection(("127.0.0.1", self.target))
            except OSError:
                return
            threading.Thread(target=self._pipe, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, False), daemon=True).start()

    def _pipe(self, source, sink, from_client):
        writing = False
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                sink.sendall(data)
                writing = writing or (from_client and WRITE.search(data) is not None and self.armed.is_set())
                if writing and SYNC in data:
                    self.armed.clear()
                    time.sleep(0.3)   # PostgreSQL's reply is never relayed
                    self.cuts += 1
                    break
        except OSError:
            pass
        for end in (source, sink):
            try:
                end.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            end.close()

    def close(self):
        self.listener.close()


def stored_count(cluster, session):
    """The count as PostgreSQL holds it, whatever any node has in memory."""
    state = cluster.postgres.sql(cluster.dsn, f"SELECT state FROM reactord_sessions WHERE id = '{session}'")
    return json.loads(state)["count"]


def test_a_commit_whose_reply_is_lost_is_a_504_and_its_key_settles_it(cluster):
    port = int(re.search(r":(\d+)/", cluster.dsn).group(1))
    proxy = CommitCuttingProxy(port)
    node = Node(cluster.dsn.replace(f":{port}/", f":{proxy.port}/"), "proxied")
    try:
        session = node.create()
        for attempt in range(5):
            before = stored_count(cluster, session)
            key = f"lost-commit-{attempt}"
            proxy.armed.set()
            status, body, _ = node.request("POST", f"/sessions/{session}/actions", {"type": "increase"},
                                           headers={"Idempotency-Key": key})
            if status == 200:
                continue   # another write of the node's was the one cut: try again
            # Sent whole: whether PostgreSQL ran it, the node cannot know.
            assert status == 504, (status, body)
            assert "unknown" in json.loads(body)["detail"], body
            for _ in range(50):   # the retry under the key settles it: applied once, either way
                status, body, headers = node.request("POST", f"/sessions/{session}/actions",
                                                     {"type": "increase"}, headers={"Idempotency-Key": key})
                if status == 200:
                    break
                time.sleep(0.2)
            assert status == 200, (status, body)
            assert json.loads(body)["state"]["count"] == before + 1, body
            assert stored_count(cluster, session) == before + 1
            return
        raise AssertionError(f"no action's write was cut in 5 tries ({proxy.cuts} cuts)")
    finally:
        node.kill()
        proxy.close()
